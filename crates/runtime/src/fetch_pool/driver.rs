//! The driver of a [`FetchPool`](super::FetchPool): the pool's state and
//! its rounds of Fetches, owned by one local task of its thread (see the
//! parent module for the protocol).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use strata_client::{self as client, ClientError, Fetcher};

/// The longest a Fetch waits on the broker while some partition's answer
/// waits to be taken.
const SHORT_WAIT: Duration = Duration::from_millis(5);

/// How long after its reader last asked an answer waiting to be taken
/// keeps its broker's Fetches short.
const HOLDING_FOR: Duration = Duration::from_millis(200);

/// How long a partition is followed after its reader last asked.
const FORGET_AFTER: Duration = Duration::from_secs(30);

/// The longest pause between retries of a failing partition (the client's
/// backoff doubles up to this).
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A partition one reader follows.
pub(super) type Key = (u64, Arc<str>, i32);

/// What a reader's fetch gets: the answer, and when (ms since the epoch)
/// its Fetch was sent.
pub(crate) type Answer = Result<(client::Fetched, i64), ClientError>;

/// What the pool's driver receives.
pub(super) enum Ask {
    /// One reader's fetch.
    Fetch {
        key: Key,
        offset: i64,
        max_bytes: i32,
        max_wait: Duration,
        reply: oneshot::Sender<Answer>,
    },
    /// A reader's handle was dropped: stop following its partitions.
    Forget(u64),
}

/// A followed partition.
struct Followed {
    /// Where its next Fetch starts.
    next: i64,
    max_bytes: i32,
    /// An answer fetched ahead, from `next` before it moved on, and when
    /// its Fetch was sent.
    buffered: Option<(client::Fetched, i64)>,
    /// Readers' fetches waiting for the answer at their offset.
    waiting: Vec<(i64, Duration, oneshot::Sender<Answer>)>,
    in_flight: bool,
    asked: Instant,
    /// Retriable failures in a row, and when to try again.
    failures: u32,
    retry_at: Option<Instant>,
}

/// The pool's state, owned by its local task.
pub(super) struct Driver {
    fetcher: Fetcher,
    followed: HashMap<Key, Followed>,
    /// Brokers with a Fetch in flight.
    busy: std::collections::HashSet<i32>,
}

/// A Fetch's answers: its broker, when it was sent, for each partition
/// asked where it started, and the answers.
type Round = (
    i32,
    i64,
    Vec<(Key, i64)>,
    Vec<(String, i32, Result<client::Fetched, ClientError>)>,
);

impl Driver {
    pub(super) fn new(fetcher: Fetcher) -> Self {
        Self {
            fetcher,
            followed: HashMap::new(),
            busy: Default::default(),
        }
    }

    pub(super) async fn run(mut self, mut incoming: mpsc::UnboundedReceiver<Ask>) {
        let mut rounds: tokio::task::JoinSet<Round> = tokio::task::JoinSet::new();
        let mut open = true;
        while open || !rounds.is_empty() {
            let wake = self.next_retry();
            tokio::select! {
                ask = incoming.recv(), if open => match ask {
                    Some(Ask::Forget(reader)) => self.forget_reader(reader),
                    Some(ask) => {
                        self.take(ask);
                        // Everything asked meanwhile goes in the next round.
                        while let Ok(ask) = incoming.try_recv() {
                            self.take(ask);
                        }
                    }
                    None => open = false,
                },
                Some(done) = rounds.join_next(), if !rounds.is_empty() => {
                    if let Ok(round) = done {
                        self.settle(round);
                    }
                }
                () = sleep_until(wake), if wake.is_some() => {}
            }
            if open {
                self.forget_idle();
                self.start_rounds(&mut rounds).await;
            }
        }
    }

    /// A reader's fetch: its buffered answer, or a wait for the next.
    fn take(&mut self, ask: Ask) {
        let Ask::Fetch {
            key,
            offset,
            max_bytes,
            max_wait,
            reply,
        } = ask
        else {
            if let Ask::Forget(reader) = ask {
                self.forget_reader(reader);
            }
            return;
        };
        let now = Instant::now();
        let followed = self.followed.entry(key).or_insert_with(|| Followed {
            next: offset,
            max_bytes,
            buffered: None,
            waiting: Vec::new(),
            in_flight: false,
            asked: now,
            failures: 0,
            retry_at: None,
        });
        followed.asked = now;
        followed.max_bytes = max_bytes;
        if let Some((buffered, sent_ms)) = followed.buffered.take() {
            if buffered.offset == offset {
                let _ = reply.send(Ok((buffered, sent_ms)));
                return;
            }
            // The reader moved (a restart, a seek): fetch from where it is.
            followed.next = offset;
        }
        // Failures so far were fetches ahead: a reader waiting now gets
        // the client's whole retry budget.
        followed.waiting.retain(|(_, _, reply)| !reply.is_closed());
        if followed.waiting.is_empty() {
            followed.failures = 0;
            if !followed.in_flight {
                followed.next = offset;
            }
        }
        followed.waiting.push((offset, max_wait, reply));
    }

    /// Stops following every partition of `reader` (its handle is gone).
    fn forget_reader(&mut self, reader: u64) {
        self.followed
            .retain(|(of, _, _), followed| *of != reader || followed.in_flight);
    }

    /// Stops following partitions nobody asked for in a while.
    fn forget_idle(&mut self) {
        let now = Instant::now();
        self.followed.retain(|_, followed| {
            followed.in_flight
                || !followed.waiting.is_empty()
                || now.duration_since(followed.asked) < FORGET_AFTER
        });
    }

    /// When the first partition waiting out a backoff may be fetched
    /// (one whose time has come waits for its broker's round to end, which
    /// wakes the driver anyway).
    fn next_retry(&self) -> Option<Instant> {
        let now = Instant::now();
        (self.followed.values())
            .filter(|f| !f.in_flight)
            .filter_map(|f| f.retry_at)
            .filter(|at| *at > now)
            .min()
    }

    /// A Fetch to every broker with none in flight, for the followed
    /// partitions it leads that need one.
    async fn start_rounds(&mut self, rounds: &mut tokio::task::JoinSet<Round>) {
        let now = Instant::now();
        let mut by_broker: BTreeMap<i32, Vec<Key>> = BTreeMap::new();
        // Brokers leading a partition whose answer waits to be taken.
        let mut holding: std::collections::HashSet<i32> = Default::default();
        let mut leaders: HashMap<(Arc<str>, i32), i32> = HashMap::new();
        let cluster = Arc::clone(self.fetcher.cluster());
        let keys: Vec<Key> = self.followed.keys().cloned().collect();
        for key in keys {
            let followed = &self.followed[&key];
            if followed.in_flight || followed.retry_at.is_some_and(|at| at > now) {
                continue;
            }
            let (topic, partition) = (Arc::clone(&key.1), key.2);
            // Errors are not kept: each reader gets its own, typed (a
            // broker out of reach must read as such to the task).
            let node = match leaders.get(&(Arc::clone(&topic), partition)) {
                Some(node) => *node,
                None => match cluster.leader_node(&topic, partition).await {
                    Ok(node) => {
                        leaders.insert((topic, partition), node);
                        node
                    }
                    Err(error) => {
                        self.failed(&key, error);
                        continue;
                    }
                },
            };
            let followed = &self.followed[&key];
            // An answer waits to be taken by a reader busy with the one
            // before (one that asked lately: an answer left by a reader
            // gone quiet holds nobody up).
            if followed.buffered.is_none() {
                by_broker.entry(node).or_default().push(key);
            } else if now.duration_since(followed.asked) < HOLDING_FOR {
                holding.insert(node);
            }
        }
        for (node, keys) in by_broker {
            if self.busy.contains(&node) {
                continue;
            }
            // One reader per partition in a Fetch, readers waiting first
            // (before partitions only fetched ahead): another waits a
            // round, a short one if it has a reader waiting.
            let mut keys = keys;
            keys.sort_by_key(|key| self.followed[key].waiting.is_empty());
            let mut seen = std::collections::HashSet::new();
            let mut left_waiting = false;
            let keys: Vec<Key> = (keys.into_iter())
                .filter(|key| {
                    let first = seen.insert((Arc::clone(&key.1), key.2));
                    left_waiting |= !first && !self.followed[key].waiting.is_empty();
                    first
                })
                .collect();
            let mut wait = self.fetcher.options().max_wait;
            let mut max_bytes = 1;
            let mut asked = Vec::with_capacity(keys.len());
            let mut wants = Vec::with_capacity(keys.len());
            for key in keys {
                let followed = self.followed.get_mut(&key).expect("followed");
                followed.in_flight = true;
                for (_, max_wait, _) in &followed.waiting {
                    wait = wait.min(*max_wait);
                }
                max_bytes = max_bytes.max(followed.max_bytes);
                wants.push((key.1.to_string(), key.2, followed.next));
                asked.push((key, followed.next));
            }
            if holding.contains(&node) || left_waiting {
                wait = wait.min(SHORT_WAIT);
            }
            self.busy.insert(node);
            let fetcher = self.fetcher.clone();
            let sent_ms = strata_record::time::now_ms();
            rounds.spawn_local(async move {
                let answers = fetcher.fetch_many_within(&wants, max_bytes, wait).await;
                (node, sent_ms, asked, answers)
            });
        }
    }

    /// Takes a Fetch's answers: to the readers waiting for them, or into
    /// buffers.
    fn settle(&mut self, (node, sent_ms, asked, answers): Round) {
        self.busy.remove(&node);
        let mut answers: HashMap<(String, i32), Result<client::Fetched, ClientError>> = (answers
            .into_iter())
        .map(|(topic, partition, answer)| ((topic, partition), answer))
        .collect();
        for (key, from) in asked {
            let answer = answers
                .remove(&(key.1.to_string(), key.2))
                .unwrap_or(Err(ClientError::Closed));
            let Some(followed) = self.followed.get_mut(&key) else {
                continue;
            };
            followed.in_flight = false;
            if followed.next != from {
                // The reader moved while this was in flight.
                continue;
            }
            match answer {
                Ok(fetched) => {
                    followed.failures = 0;
                    followed.retry_at = None;
                    followed.next = fetched.next_offset();
                    let (mine, others): (Vec<_>, Vec<_>) = (followed.waiting.drain(..))
                        .filter(|(_, _, reply)| !reply.is_closed())
                        .partition(|(at, _, _)| *at == from);
                    followed.waiting = others;
                    if mine.is_empty() {
                        // Fetched ahead: kept for the reader if it holds
                        // records (an empty answer only says "nothing yet").
                        // Its records are copied out: the response they came
                        // in may hold many partitions' worth.
                        if fetched.records.is_empty() {
                            followed.next = from;
                        } else {
                            let mut fetched = fetched;
                            fetched.records = bytes::Bytes::copy_from_slice(&fetched.records);
                            followed.buffered = Some((fetched, sent_ms));
                        }
                    } else {
                        for (_, _, reply) in mine {
                            let _ = reply.send(Ok((fetched.clone(), sent_ms)));
                        }
                    }
                    if let Some((at, _, _)) = followed.waiting.first() {
                        // A reader asked elsewhere meanwhile.
                        followed.next = *at;
                        followed.buffered = None;
                    }
                }
                Err(error) => self.failed(&key, error),
            }
        }
    }

    /// A partition's fetch failed: tried again after a backoff while the
    /// error is retriable and retries remain, else its readers get it.
    fn failed(&mut self, key: &Key, error: ClientError) {
        let config = self.fetcher.cluster().config();
        let (retries, backoff) = (config.retries, config.retry_backoff);
        let Some(followed) = self.followed.get_mut(key) else {
            return;
        };
        followed.in_flight = false;
        if error.is_retriable() && followed.failures < retries {
            followed.failures += 1;
            let pause = backoff
                .saturating_mul(1 << (followed.failures - 1).min(10))
                .min(BACKOFF_MAX);
            followed.retry_at = Some(Instant::now() + pause);
            return;
        }
        followed.failures = 0;
        followed.retry_at = None;
        // The first reader waiting gets the error as it is (its kind
        // matters: a broker out of reach, an offset out of range); any
        // other (a second reader of the partition, rare) is fetched for
        // again, with the retries afresh.
        followed.waiting.retain(|(_, _, reply)| !reply.is_closed());
        if !followed.waiting.is_empty() {
            let (_, _, reply) = followed.waiting.remove(0);
            let _ = reply.send(Err(error));
        }
        // Nobody waits: fetched again when next asked.
        if followed_is_idle(followed) {
            self.followed.remove(key);
        }
    }
}

fn followed_is_idle(followed: &Followed) -> bool {
    followed.waiting.is_empty() && followed.buffered.is_none() && !followed.in_flight
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
