//! [`SessionAggregate`]: session windows kept per task. Per key, a
//! session is a run of records each within the inactivity `gap` of the
//! one before; a record closer than `gap` to two sessions joins them into
//! one. `session_spec` defines them ([`Sessions`]) and what the stream
//! carries in each emission mode.
//!
//! A session `[start, end]` (`end` its last record's timestamp; its
//! windowed key's end is `end + 1`, exclusive) takes records while the
//! watermark is below `end + gap + grace`; then it **closes** (its final
//! aggregate emitted on close, its entries deleted). Per record:
//!
//! 1. The watermark moves up to the record's timestamp.
//! 2. The key's sessions are read (one prefix scan); the open ones within
//!    `gap` of the record merge with it: the new session spans them all,
//!    its aggregate is theirs merged (`merge`) and then folded with the
//!    record. The merged sessions' entries are deleted.
//! 3. A record that opens a new session already closed (`ts + gap +
//!    grace ≤ watermark`) and joins none is late: counted (in the time
//!    store and as a dropped record in `/metrics`), dropped, and
//!    written to the late topic if there is one.
//! 4. When sessions emit on update, a **retraction** (`None`) is emitted
//!    for each merged session whose windowed key is not the new
//!    session's (merged into another, or its start or end moved), then
//!    the new session's aggregate (`Some`), all with the record's
//!    timestamp. A record inside a session's bounds keeps its key, so it
//!    is an update of it with no retraction.
//! 5. Closed sessions are emitted (on close) and deleted. Whether a
//!    session is closed is decided from the watermark alone, at every
//!    record; the closing list is scanned once per `gap / 8` of watermark
//!    advance (by the record that moves the watermark into a step of its
//!    own, also after a restart), so an emission on close may come that
//!    much later, never earlier, never with another value, and at the
//!    same place in every run of the same records. On update, closing
//!    emits nothing: the session's last update stands.
//!
//! Invariant (emit on update): the stream's records applied in order to a
//! map (`Some` upserting, `None` deleting) leave exactly the sessions
//! the operator has made, open and closed, each with its aggregate.
//!
//! Stores, as for the fixed windows (see `key`): sessions by window key
//! (the start) holding `(end, aggregate)`, the closing list by `end + gap
//! + grace`, and the time store (`watermark`, `late`).

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use strata_record::codec::Codec;
use strata_runtime::{Context, EmitOptions, Output, ProcessError, Store};

use crate::aggregate::Fold;
use crate::item::{Data, Item};
use crate::operator::{Next, Operator};

use super::aggregate::{LATE, WATERMARK};
use super::key::{closing_key, split_closing_key, split_window_key, time_bytes, window_key};
use super::session_spec::{SessionEmit, Sessions};
use super::spec::{Emit, Windowed};

/// A session's entry: its last record's timestamp and its aggregate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Session<A> {
    pub end: i64,
    pub value: A,
}

/// Merges the aggregates of two sessions joined by a record.
pub(crate) type Merge<K, A> = dyn Fn(&K, A, A) -> A + Send + Sync;

pub(crate) struct SessionStores<A: 'static> {
    pub sessions: Store<Vec<u8>, Session<A>>,
    pub closing: Store<Vec<u8>, ()>,
    pub time: Store<String, i64>,
}

// Copy for any A (a derive would ask it of A).
impl<A> Clone for SessionStores<A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A> Copy for SessionStores<A> {}

pub(crate) struct SessionAggregate<K, V, A: Data, E: SessionEmit> {
    spec: Sessions<E>,
    key_codec: Codec,
    stores: SessionStores<A>,
    fns: SessionFns<K, V, A>,
    next: Next<Windowed<K>, E::Value<A>>,
    watermark: i64,
    scanned_at: i64,
    encoded: Vec<u8>,
}

/// What a session aggregation needs besides its stores: how it folds and
/// merges aggregates, and where late records go.
pub(crate) struct SessionFns<K, V, A> {
    pub fold: Arc<Fold<K, V, A>>,
    pub merge: Arc<Merge<K, A>>,
    pub late: Option<Output<K, V>>,
}

impl<K, V, A, E> SessionAggregate<K, V, A, E>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize,
    A: Data + Serialize + DeserializeOwned,
    E: SessionEmit,
{
    pub fn new(
        spec: Sessions<E>,
        key_codec: Codec,
        stores: SessionStores<A>,
        fns: SessionFns<K, V, A>,
        next: Next<Windowed<K>, E::Value<A>>,
    ) -> Self {
        Self {
            spec,
            key_codec,
            stores,
            fns,
            next,
            watermark: i64::MIN,
            scanned_at: i64::MIN,
            encoded: Vec::new(),
        }
    }

    fn is_open(&self, end: i64) -> bool {
        self.spec.closes_at(end) > self.watermark
    }

    fn late(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let late = ctx.get(self.stores.time, LATE)?.unwrap_or(0) + 1;
        ctx.put(self.stores.time, LATE, &late)?;
        ctx.dropped(LATE);
        if let Some(output) = self.fns.late {
            let options = EmitOptions::default().timestamp(item.timestamp);
            ctx.emit_with(output, &item.key, &item.value, options)?;
        }
        Ok(())
    }

    /// The key's open sessions within `gap` of `ts`, by start (one prefix
    /// scan of the key's window keys).
    fn near(
        &mut self,
        ts: i64,
        ctx: &mut Context<'_>,
    ) -> Result<Vec<(i64, Session<A>)>, ProcessError> {
        // The key's window keys share the first 4 + key-length bytes.
        let mut prefix = Vec::new();
        window_key(&self.encoded, 0, &mut prefix);
        prefix.truncate(prefix.len() - 8);
        let gap = self.spec.gap_ms;
        let mut joined = Vec::new();
        for entry in ctx.prefix(self.stores.sessions, &prefix)? {
            let (window, session) = entry?;
            let (_, start) = split_window_key(&window).map_err(ProcessError::msg)?;
            let near = start.saturating_sub(gap) <= ts && ts <= session.end.saturating_add(gap);
            if near && self.is_open(session.end) {
                joined.push((start, session));
            }
        }
        Ok(joined)
    }

    /// Deletes the sessions a record at `ts` joins and makes them one with
    /// it.
    fn merge_joined(
        &mut self,
        key: &K,
        ts: i64,
        joined: Vec<(i64, Session<A>)>,
        ctx: &mut Context<'_>,
    ) -> Result<Merged<A>, ProcessError> {
        let mut merged = Merged {
            start: ts,
            end: ts,
            value: None,
            gone: Vec::with_capacity(joined.len()),
        };
        let mut window = Vec::new();
        for (old_start, old) in joined {
            window_key(&self.encoded, old_start, &mut window);
            ctx.delete(self.stores.sessions, &window)?;
            let closes = self.spec.closes_at(old.end);
            ctx.delete(self.stores.closing, &closing_key(closes, &window))?;
            merged.gone.push((old_start, old.end));
            merged.start = merged.start.min(old_start);
            merged.end = merged.end.max(old.end);
            merged.value = Some(match merged.value {
                Some(value) => (self.fns.merge)(key, value, old.value),
                None => old.value,
            });
        }
        Ok(merged)
    }

    /// In emit-on-update mode, a retraction of each deleted session whose
    /// windowed key is not the new session's (the same key is replaced by
    /// the update that follows, not deleted).
    fn retract(
        &mut self,
        key: &K,
        gone: &[(i64, i64)],
        now: (i64, i64),
        ts: i64,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        let Some(retraction) = E::retraction::<A>() else {
            return Ok(());
        };
        for &(start, end) in gone.iter().filter(|&&bounds| bounds != now) {
            debug_assert!(now.0 <= start && end <= now.1, "a merge only grows");
            let item = Item {
                key: windowed(key.clone(), start, end),
                value: retraction.clone(),
                timestamp: ts,
            };
            self.next.push(item, ctx)?;
        }
        Ok(())
    }

    /// Emits (on close) and deletes every session the watermark closed.
    fn close(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let step = self.spec.scan_step_ms();
        if self.scanned_at != i64::MIN
            && self.watermark.div_euclid(step) == self.scanned_at.div_euclid(step)
        {
            return Ok(());
        }
        self.scanned_at = self.watermark;
        let upto = self
            .watermark
            .checked_add(1)
            .map(|t| time_bytes(t).to_vec());
        let closing = match upto {
            Some(upto) => ctx.range(self.stores.closing, ..upto)?,
            None => ctx.range(self.stores.closing, ..)?,
        };
        for entry in closing {
            let (closing_key, ()) = entry?;
            let (_, window) = split_closing_key(&closing_key).map_err(ProcessError::msg)?;
            if E::EMIT == Emit::OnClose
                && let Some(session) = ctx.get(self.stores.sessions, window)?
            {
                let (key, start) = split_window_key(window).map_err(ProcessError::msg)?;
                let item = Item {
                    key: windowed(self.key_codec.decode(key)?, start, session.end),
                    value: E::aggregate(session.value),
                    timestamp: session.end,
                };
                self.next.push(item, ctx)?;
            }
            ctx.delete(self.stores.sessions, window)?;
            ctx.delete(self.stores.closing, &closing_key)?;
        }
        Ok(())
    }
}

/// The session a record makes of itself and the sessions it joins,
/// before the record is folded in.
struct Merged<A> {
    start: i64,
    end: i64,
    /// The joined sessions' aggregates merged; none if it joined none.
    value: Option<A>,
    /// The bounds `[start, end]` of each session joined (and deleted).
    gone: Vec<(i64, i64)>,
}

/// The windowed key of the session `[start, end]` (`end` its last
/// record's timestamp; a windowed key's end is exclusive).
fn windowed<K>(key: K, start: i64, end: i64) -> Windowed<K> {
    Windowed {
        key,
        start,
        end: end.saturating_add(1),
    }
}

impl<K, V, A, E> Operator<K, V> for SessionAggregate<K, V, A, E>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize,
    A: Data + Serialize + DeserializeOwned,
    E: SessionEmit,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.watermark = ctx.get(self.stores.time, WATERMARK)?.unwrap_or(i64::MIN);
        // The watermark's step was scanned by the record that moved it
        // there, in the same commit (see the module doc).
        self.scanned_at = self.watermark;
        self.next.init(ctx)
    }

    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let ts = item.timestamp;
        if ts > self.watermark {
            self.watermark = ts;
            ctx.put(self.stores.time, WATERMARK, &self.watermark)?;
        }
        self.key_codec.encode_into(&item.key, &mut self.encoded)?;
        let joined = self.near(ts, ctx)?;
        if joined.is_empty() && !self.is_open(ts) {
            self.late(item, ctx)?;
            return self.close(ctx);
        }
        let merged = self.merge_joined(&item.key, ts, joined, ctx)?;
        let value = (self.fns.fold)(merged.value, &item.key, &item.value);
        let mut window = Vec::new();
        window_key(&self.encoded, merged.start, &mut window);
        let session = Session {
            end: merged.end,
            value: value.clone(),
        };
        ctx.put(self.stores.sessions, &window, &session)?;
        let closes = self.spec.closes_at(merged.end);
        ctx.put(self.stores.closing, &closing_key(closes, &window), &())?;
        if E::EMIT == Emit::OnUpdate {
            let now = (merged.start, merged.end);
            self.retract(&item.key, &merged.gone, now, ts, ctx)?;
            let item = Item {
                key: windowed(item.key, merged.start, merged.end),
                value: E::aggregate(value),
                timestamp: ts,
            };
            self.next.push(item, ctx)?;
        }
        self.close(ctx)
    }
}
