//! Where a request's handler runs. Handlers may block on disk I/O (a
//! segment roll syncs a file, a read may miss the page cache), so they
//! cannot always run on the executor as if they were async; but any
//! handoff to another thread per request costs more CPU than most
//! requests' own work.
//!
//! Measured with `make bench-requests` (one 100-byte record per produce
//! request, 8 connections): a handoff to the blocking pool and back made
//! 42% of the broker's samples context switches; `block_in_place`, which
//! hands the executor's other tasks to a blocking thread for the handler's
//! time, still wakes one per request (31 µs of broker CPU per request);
//! run on the executor itself, 15 µs.
//!
//! So the requests of the data path ([`runs_inline`]: produce, fetch,
//! and the small reads clients make beside them) run inline on the
//! connection's task, on the executor, while its [`Pace`] allows:
//! 1. While the connection's handlers are quick, they run inline.
//! 2. One that held its thread past
//!    [`QUICK_HANDLER_MAX`](super::handler_usage::QUICK_HANDLER_MAX) and
//!    gave the CPU up on the way (it waited on the disk, most likely: a
//!    read that missed the page cache, a segment roll's sync) sends the
//!    connection's handlers off the executor for a period: at first
//!    [`OFF_EXECUTOR_FIRST`], doubled up to [`OFF_EXECUTOR_MAX`] each time
//!    one is slow again while off or within a period of coming back (see
//!    [`Pace`]). A cold reader then stalls an executor thread a few times
//!    per connection, then once per [`OFF_EXECUTOR_MAX`], not once per
//!    request; the other executor threads take the stalled one's queued
//!    tasks meanwhile (all but the one it would run next). A handler the
//!    kernel preempted is not slow: no place would spare it that.
//! 3. Off the executor, and for every other request (those that sync by
//!    design: transactions, topic creation and deletion, record
//!    deletion, group offsets), a handler runs in place (`block_in_place`)
//!    within a bound ([`HANDLERS_IN_PLACE_MAX`]), and on the blocking pool
//!    past it.
//!
//! What is left: a new connection's first slow handler stalls its thread,
//! and so many at once could stall every executor thread for a disk
//! read's time. On a current-thread runtime (an app serving its log)
//! handlers always run on the blocking pool: inline, they would stop the
//! app's only thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use tokio::runtime::RuntimeFlavor;

use super::handler_usage::{Usage, forget_note};

/// How long a connection whose handler was slow runs its handlers off
/// the executor, the first time. In place a handler costs about twice
/// the CPU (above), and one read of a page the kernel had reclaimed says
/// little of the next. Counted in a run of `make bench-requests`' fetches
/// (620,000 requests): with a fixed 10 s, five slow handlers sent 15% of
/// the requests in place; with these periods, three sent 0.15%.
const OFF_EXECUTOR_FIRST: Duration = Duration::from_millis(100);

/// The longest period off the executor: where a connection whose reads
/// keep missing the page cache (a consumer catching up on old segments)
/// settles, stalling an executor thread once per period.
const OFF_EXECUTOR_MAX: Duration = Duration::from_secs(10);

/// At most this many handlers run in place at once; past it they go to
/// the blocking pool. A handler in place has handed its worker's
/// scheduler to a thread of that pool (512 threads by default), so with
/// no bound a disk stall under many connections could take every thread
/// of the pool and stop the executor itself (timers, stall timeouts,
/// shutdown); work queued for the pool only waits.
const HANDLERS_IN_PLACE_MAX: usize = 64;

/// The broker's places for handlers in place, shared by every connection.
static IN_PLACE: Places = Places::new(HANDLERS_IN_PLACE_MAX);

/// Whether requests of `api_key` may run inline: the data path's, whose
/// handlers sync nothing themselves (an acks=all produce's sync runs on
/// the blocking pool). The others sync by design (transactions' state,
/// topics' directories, deleted records' marks, group offsets) or are
/// rare enough that a handoff costs nothing that matters.
pub(super) fn runs_inline(api_key: i16) -> bool {
    matches!(
        ApiKey::try_from(api_key),
        Ok(ApiKey::Produce
            | ApiKey::Fetch
            | ApiKey::ListOffsets
            | ApiKey::Metadata
            | ApiKey::ApiVersions
            | ApiKey::FindCoordinator
            | ApiKey::Heartbeat
            | ApiKey::OffsetFetch)
    )
}

/// Where one connection's handlers run: inline while they are quick, off
/// the executor for a period after one was not (see the module doc).
///
/// The period doubles, from [`OFF_EXECUTOR_FIRST`] up to
/// [`OFF_EXECUTOR_MAX`], when a handler is slow while its connection is
/// off, or within one period of its coming back: its reads are cold
/// still. A slow handler after a quick period as long as the last one
/// starts again from the first period. Handlers off the executor are
/// measured too, so a cold reader's period grows without stalling the
/// executor again.
#[derive(Debug, Default)]
pub(super) struct Pace {
    off: Option<Off>,
    /// Whether the connection runs on a multi-thread runtime, asked once.
    multi_threaded: Option<bool>,
}

/// A connection's handlers off the executor until `until`, for `period`.
#[derive(Debug, Clone, Copy)]
struct Off {
    until: Instant,
    period: Duration,
}

impl Pace {
    /// Whether the connection's runtime has workers to run handlers inline
    /// (a current-thread runtime has one thread, the app's).
    fn multi_threaded(&mut self) -> bool {
        *self.multi_threaded.get_or_insert_with(|| {
            matches!(
                tokio::runtime::Handle::current().runtime_flavor(),
                RuntimeFlavor::MultiThread
            )
        })
    }

    /// Whether a handler starting at `now` runs inline.
    fn inline_at(&self, now: Instant) -> bool {
        self.off.is_none_or(|off| now >= off.until)
    }

    /// A handler that ended at `ended`, slow or not (see [`Usage`]).
    fn handled(&mut self, slow: bool, ended: Instant) {
        if !slow {
            return;
        }
        let period = match self.off {
            Some(off) if ended < off.until + off.period => (off.period * 2).min(OFF_EXECUTOR_MAX),
            _ => OFF_EXECUTOR_FIRST,
        };
        self.off = Some(Off {
            until: ended + period,
            period,
        });
    }
}

/// Where a handler ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    /// On the executor, in the connection's task.
    Inline,
    /// On the connection's thread, the executor's other tasks handed to
    /// another thread meanwhile.
    InPlace,
    BlockingPool,
}

/// Places for handlers in place: how many are taken, of at most `max`.
struct Places {
    taken: AtomicUsize,
    max: usize,
}

impl Places {
    const fn new(max: usize) -> Self {
        Self {
            taken: AtomicUsize::new(0),
            max,
        }
    }

    /// A place, if one is free, given back when the guard drops.
    fn take(&self) -> Option<InPlace<'_>> {
        let before = self.taken.fetch_add(1, Ordering::AcqRel);
        if before < self.max {
            return Some(InPlace { places: self });
        }
        self.taken.fetch_sub(1, Ordering::AcqRel);
        None
    }
}

/// A handler's place among its [`Places`], given back when dropped.
struct InPlace<'p> {
    places: &'p Places,
}

impl Drop for InPlace<'_> {
    fn drop(&mut self) {
        self.places.taken.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs a request's handler of the connection keeping `pace`, where the
/// module doc says; the request was taken at `started`. The connection's
/// reader and writer, in the same task, pause while it runs. A handler
/// that panics fails its request wherever it ran, the panic's message
/// returned. Also says when the handler ended.
pub(super) async fn run_handler<T: Send + 'static>(
    pace: &mut Pace,
    api_key: i16,
    started: Instant,
    handle: impl FnOnce() -> T + Send + 'static,
) -> (Result<T, String>, Instant) {
    let inline = runs_inline(api_key);
    let (handled, _, ended) = run_within(&IN_PLACE, pace, inline, started, handle).await;
    (handled, ended)
}

/// [`run_handler`] within `places`, inline if `inline` and the pace
/// allows; also says where the handler ran.
async fn run_within<T: Send + 'static>(
    places: &Places,
    pace: &mut Pace,
    inline: bool,
    started: Instant,
    handle: impl FnOnce() -> T + Send + 'static,
) -> (Result<T, String>, Ran, Instant) {
    // Measured inside, so that a wait for a blocking thread is not counted.
    // Only the handlers that may run inline are measured: the others
    // (those that sync by design, slow every time) say nothing of how the
    // connection's data path runs, and are spared the measuring.
    let timed = move |on_worker: bool| {
        let usage = inline.then(|| {
            if on_worker {
                Usage::inline(started)
            } else {
                Usage::now()
            }
        });
        let handled = handle();
        let ended = Instant::now();
        let slow = usage.is_some_and(|usage| usage.slow_at(ended));
        (handled, slow, ended)
    };
    let multi_threaded = pace.multi_threaded();
    let (handled, ran) = if multi_threaded && inline && pace.inline_at(started) {
        (caught(|| timed(true)), Ran::Inline)
    } else if multi_threaded && let Some(_place) = places.take() {
        let handled = caught(|| tokio::task::block_in_place(|| timed(false)));
        forget_note();
        (handled, Ran::InPlace)
    } else {
        let handled = tokio::task::spawn_blocking(move || timed(false)).await;
        (
            handled.map_err(|failed| failed.to_string()),
            Ran::BlockingPool,
        )
    };
    match handled {
        Ok((handled, slow, ended)) => {
            pace.handled(slow, ended);
            (Ok(handled), ran, ended)
        }
        Err(failed) => (Err(failed), ran, Instant::now()),
    }
}

/// Runs `handle` here, a panic caught as its message.
fn caught<R>(handle: impl FnOnce() -> R) -> Result<R, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(handle))
        .map_err(|panic| panic_message(&*panic))
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(message), _) => format!("panicked: {message}"),
        (_, Some(message)) => format!("panicked: {message}"),
        _ => "panicked".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};
    use std::time::{Duration, Instant};

    use kafka_protocol::messages::ApiKey;

    use super::{
        OFF_EXECUTOR_FIRST, OFF_EXECUTOR_MAX, Off, Pace, Places, Ran, run_within, runs_inline,
    };
    use crate::connection::handler_usage::{QUICK_HANDLER_MAX, noted, worker_woke};

    /// A connection's pace with its handlers sent off the executor.
    fn slowed() -> Pace {
        // For the longest period: a test held up past the first one on a
        // loaded machine still finds its connection off the executor.
        let off = Off {
            until: Instant::now() + OFF_EXECUTOR_MAX,
            period: OFF_EXECUTOR_MAX,
        };
        Pace {
            off: Some(off),
            ..Pace::default()
        }
    }

    /// Where a handler (of a request that may run inline) of the
    /// connection keeping `pace` ran, once the barrier, if any, let it
    /// return; checked against the thread it ran on.
    async fn ran(places: &Places, pace: &mut Pace, wait: Option<Arc<Barrier>>) -> Ran {
        let caller = std::thread::current().id();
        let handler = move || {
            if let Some(barrier) = wait {
                barrier.wait();
            }
            std::thread::current().id() == caller
        };
        let (handled, ran, _) = run_within(places, pace, true, Instant::now(), handler).await;
        let here = handled.expect("the handler returns");
        assert_eq!(
            here,
            ran != Ran::BlockingPool,
            "{ran:?} on the caller's thread or not"
        );
        ran
    }

    /// How long `pace` keeps its connection off the executor from `now`
    /// (zero when inline), to the millisecond.
    fn off_for(pace: &Pace, now: Instant) -> Duration {
        let millis = Duration::from_millis(1);
        let mut off = Duration::ZERO;
        while !pace.inline_at(now + off) {
            off += millis;
        }
        off
    }

    #[test]
    fn a_slow_handler_sends_its_connection_off_the_executor_for_a_while() {
        let now = Instant::now();
        let mut pace = Pace::default();
        assert!(pace.inline_at(now));
        pace.handled(false, now);
        assert!(pace.inline_at(now));
        pace.handled(true, now);
        assert_eq!(off_for(&pace, now), OFF_EXECUTOR_FIRST);
        // Quick handlers neither end nor extend the period.
        pace.handled(false, now + Duration::from_millis(1));
        assert_eq!(off_for(&pace, now), OFF_EXECUTOR_FIRST);
    }

    #[test]
    fn a_connection_slow_again_soon_stays_off_longer_up_to_the_longest_period() {
        let mut now = Instant::now();
        let mut pace = Pace::default();
        pace.handled(true, now);
        let mut period = OFF_EXECUTOR_FIRST;
        // Slow again while off: the period doubles from that handler's end.
        now += period / 2;
        pace.handled(true, now);
        period *= 2;
        assert_eq!(off_for(&pace, now), period);
        // Slow again soon after coming back inline: doubled again.
        now += period + period / 2;
        assert!(pace.inline_at(now));
        pace.handled(true, now);
        period *= 2;
        assert_eq!(off_for(&pace, now), period);
        // A cold reader settles at the longest period.
        for _ in 0..16 {
            now += Duration::from_millis(1);
            pace.handled(true, now);
        }
        assert_eq!(off_for(&pace, now), OFF_EXECUTOR_MAX);
    }

    #[test]
    fn a_connection_quick_for_a_whole_period_starts_again_from_the_first() {
        let mut now = Instant::now();
        let mut pace = Pace::default();
        pace.handled(true, now);
        now += Duration::from_millis(1);
        pace.handled(true, now);
        assert_eq!(off_for(&pace, now), OFF_EXECUTOR_FIRST * 2);
        // Back inline, and quick for as long as the last period.
        now += OFF_EXECUTOR_FIRST * 4;
        pace.handled(true, now);
        assert_eq!(off_for(&pace, now), OFF_EXECUTOR_FIRST);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_handler_in_place_leaves_its_thread_counting_for_each_handler_again() {
        let places = Places::new(1);
        let thread_count = || (std::thread::current().id(), noted());
        let (handled, ran, _) =
            run_within(&places, &mut slowed(), true, Instant::now(), move || {
                worker_woke();
                thread_count()
            })
            .await;
        let (thread, noted_in_place) = handled.unwrap();
        assert_eq!(ran, Ran::InPlace);
        assert!(noted_in_place.is_some());
        // Still on the thread the handler blocked on.
        assert_eq!(std::thread::current().id(), thread);
        assert_eq!(noted(), None);
    }

    #[test]
    fn the_data_paths_requests_may_run_inline_and_those_that_sync_never_do() {
        let inline = [
            ApiKey::Produce,
            ApiKey::Fetch,
            ApiKey::Metadata,
            ApiKey::Heartbeat,
        ];
        for key in inline {
            assert!(runs_inline(key as i16), "{key:?}");
        }
        let off = [
            ApiKey::InitProducerId,
            ApiKey::EndTxn,
            ApiKey::WriteTxnMarkers,
            ApiKey::CreateTopics,
            ApiKey::DeleteTopics,
            ApiKey::DeleteRecords,
            ApiKey::OffsetCommit,
        ];
        for key in off {
            assert!(!runs_inline(key as i16), "{key:?}");
        }
        assert!(!runs_inline(-1) && !runs_inline(i16::MAX), "unknown keys");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connections_handlers_run_inline_until_one_is_slow() {
        let places = Places::new(1);
        let mut pace = Pace::default();
        assert_eq!(ran(&places, &mut pace, None).await, Ran::Inline);
        let slow = || std::thread::sleep(QUICK_HANDLER_MAX * 3);
        let before_slow = Instant::now();
        let (handled, ..) = run_within(&places, &mut pace, true, Instant::now(), slow).await;
        handled.expect("the handler returns");
        let next = ran(&places, &mut pace, None).await;
        // Inline again only if this thread was held up past the period.
        assert!(
            next == Ran::InPlace || before_slow.elapsed() >= OFF_EXECUTOR_FIRST,
            "{next:?}"
        );
        assert_eq!(places.taken.load(std::sync::atomic::Ordering::Acquire), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_that_may_not_run_inline_runs_in_place_on_a_quick_connection() {
        let places = Places::new(1);
        let (handled, ran, _) =
            run_within(&places, &mut Pace::default(), false, Instant::now(), || ()).await;
        handled.expect("the handler returns");
        assert_eq!(ran, Ran::InPlace);
    }

    /// A transactional producer's EndTxn syncs every time: its slowness
    /// must not send the producer's produce requests off the executor.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_request_that_may_not_run_inline_leaves_the_connection_inline() {
        let places = Places::new(1);
        let mut pace = Pace::default();
        let slow = || std::thread::sleep(QUICK_HANDLER_MAX * 3);
        let (handled, slow_ran, _) =
            run_within(&places, &mut pace, false, Instant::now(), slow).await;
        handled.expect("the handler returns");
        assert_eq!(slow_ran, Ran::InPlace);
        assert_eq!(ran(&places, &mut pace, None).await, Ran::Inline);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn off_the_executor_handlers_run_in_place_up_to_the_bound_and_on_the_blocking_pool_past_it()
     {
        const MAX: usize = 3;
        let places: &'static Places = Box::leak(Box::new(Places::new(MAX)));
        // MAX handlers held in place until the one past them has run.
        let barrier = Arc::new(Barrier::new(MAX + 1));
        let held: Vec<_> = (0..MAX)
            .map(|_| {
                let barrier = Arc::clone(&barrier);
                tokio::spawn(async move { ran(places, &mut slowed(), Some(barrier)).await })
            })
            .collect();
        while places.taken.load(std::sync::atomic::Ordering::Acquire) < MAX {
            tokio::task::yield_now().await;
        }
        let past = ran(places, &mut slowed(), None).await;
        assert_eq!(past, Ran::BlockingPool, "past the bound");
        barrier.wait();
        for handler in held {
            assert_eq!(handler.await.unwrap(), Ran::InPlace, "within the bound");
        }
        assert_eq!(places.taken.load(std::sync::atomic::Ordering::Acquire), 0);
        let again = ran(places, &mut slowed(), None).await;
        assert_eq!(again, Ran::InPlace, "places given back");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_handler_fails_its_request_inline_or_in_place_and_gives_its_place_back() {
        let places = Places::new(1);
        for mut pace in [Pace::default(), slowed()] {
            let (failed, ..) = run_within(&places, &mut pace, true, Instant::now(), || -> () {
                panic!("a bad request")
            })
            .await;
            assert_eq!(failed.unwrap_err(), "panicked: a bad request");
            assert_eq!(places.taken.load(std::sync::atomic::Ordering::Acquire), 0);
        }
        assert_eq!(
            ran(&places, &mut slowed(), None).await,
            Ran::InPlace,
            "the place is free again"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn on_a_current_thread_runtime_handlers_run_on_the_blocking_pool() {
        let places = Places::new(1);
        assert_eq!(
            ran(&places, &mut Pace::default(), None).await,
            Ran::BlockingPool
        );
        let (failed, ..) = run_within(
            &places,
            &mut Pace::default(),
            true,
            Instant::now(),
            || -> () { panic!("a bad request") },
        )
        .await;
        assert!(failed.unwrap_err().contains("a bad request"));
    }
}
