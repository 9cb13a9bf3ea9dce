//! Session windows: per key, a session is a run of records each within
//! the inactivity `gap` of the one before; a record closer than `gap` to
//! two sessions joins them into one. [`Sessions`] defines them,
//! [`SessionAggregate`] keeps them.
//!
//! A session `[start, end]` (`end` its last record's timestamp) takes
//! records while the watermark is below `end + gap + grace`; then it
//! **closes** (its final aggregate emitted on close, its entries
//! deleted). Per record:
//!
//! 1. The watermark moves up to the record's timestamp.
//! 2. The key's sessions are read (one prefix scan); the open ones within
//!    `gap` of the record merge with it: the new session spans them all,
//!    its aggregate is theirs merged (`merge`) and then folded with the
//!    record. The merged sessions' entries are deleted.
//! 3. A record that opens a new session already closed (`ts + gap +
//!    grace ≤ watermark`) and joins none is late: counted, dropped, and
//!    written to the late topic if there is one.
//! 4. Closed sessions are emitted and deleted. Whether a session is
//!    closed is decided from the watermark alone, at every record; the
//!    closing list is scanned once per `gap / 8` of watermark advance, so
//!    an emission on close may come that much later, never earlier, and
//!    never with another value.
//!
//! Stores, as for the fixed windows (see `key`): sessions by window key
//! (the start) holding `(end, aggregate)`, the closing list by `end + gap
//! + grace`, and the time store (`watermark`, `late`).

use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use strata::codec::Codec;
use strata::runtime::{Context, EmitOptions, Output, ProcessError, Store};

use crate::aggregate::Fold;
use crate::item::{Data, Item};
use crate::operator::{Next, Operator};

use super::aggregate::{LATE, WATERMARK};
use super::key::{closing_key, split_closing_key, split_window_key, time_bytes, window_key};
use super::spec::{Emit, Windowed};

/// A session window definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sessions {
    pub(crate) gap_ms: i64,
    pub(crate) grace_ms: i64,
    pub(crate) emit: Emit,
}

impl Sessions {
    /// Sessions that end after `gap` without a record of their key.
    pub fn with_gap(gap: Duration) -> Self {
        Self {
            gap_ms: i64::try_from(gap.as_millis()).unwrap_or(i64::MAX),
            grace_ms: 0,
            emit: Emit::OnUpdate,
        }
    }

    /// How long after `end + gap` a session still takes records.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
        self
    }

    /// Emit each session's aggregate once, when it closes.
    pub fn emit_on_close(mut self) -> Self {
        self.emit = Emit::OnClose;
        self
    }

    pub fn gap_ms(&self) -> i64 {
        self.gap_ms
    }

    pub fn grace_ms(&self) -> i64 {
        self.grace_ms
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        if self.gap_ms <= 0 {
            return Err("a session's inactivity gap must be at least 1 ms".into());
        }
        Ok(())
    }

    /// When a session whose last record is at `end` closes.
    pub fn closes_at(&self, end: i64) -> i64 {
        end.saturating_add(self.gap_ms)
            .saturating_add(self.grace_ms)
    }

    /// How far the watermark moves between two scans of the closing list.
    fn scan_step_ms(&self) -> i64 {
        (self.gap_ms / 8).max(1)
    }
}

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

pub(crate) struct SessionAggregate<K, V, A: 'static> {
    pub spec: Sessions,
    pub key_codec: Codec,
    pub stores: SessionStores<A>,
    pub fold: Arc<Fold<K, V, A>>,
    pub merge: Arc<Merge<K, A>>,
    pub late: Option<Output<K, V>>,
    pub next: Next<Windowed<K>, A>,
    watermark: i64,
    scanned_at: i64,
    encoded: Vec<u8>,
}

impl<K, V, A> SessionAggregate<K, V, A>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize,
    A: Data + Serialize + DeserializeOwned,
{
    pub fn new(
        spec: Sessions,
        key_codec: Codec,
        stores: SessionStores<A>,
        fold: Arc<Fold<K, V, A>>,
        merge: Arc<Merge<K, A>>,
        late: Option<Output<K, V>>,
        next: Next<Windowed<K>, A>,
    ) -> Self {
        Self {
            spec,
            key_codec,
            stores,
            fold,
            merge,
            late,
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
        if let Some(output) = self.late {
            let options = EmitOptions::default().timestamp(item.timestamp);
            ctx.emit_with(output, &item.key, &item.value, options)?;
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
            if self.spec.emit == Emit::OnClose
                && let Some(session) = ctx.get(self.stores.sessions, window)?
            {
                let (key, start) = split_window_key(window).map_err(ProcessError::msg)?;
                let key = Windowed {
                    key: self.key_codec.decode(key)?,
                    start,
                    end: session.end.saturating_add(1),
                };
                let item = Item {
                    key,
                    value: session.value,
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

impl<K, V, A> Operator<K, V> for SessionAggregate<K, V, A>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize,
    A: Data + Serialize + DeserializeOwned,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.watermark = ctx.get(self.stores.time, WATERMARK)?.unwrap_or(i64::MIN);
        self.scanned_at = i64::MIN;
        self.next.init(ctx)
    }

    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let ts = item.timestamp;
        if ts > self.watermark {
            self.watermark = ts;
            ctx.put(self.stores.time, WATERMARK, &self.watermark)?;
        }
        self.key_codec.encode_into(&item.key, &mut self.encoded)?;
        // The key's window keys share the first 4 + key-length bytes.
        let mut prefix = Vec::new();
        window_key(&self.encoded, 0, &mut prefix);
        prefix.truncate(prefix.len() - 8);
        let gap = self.spec.gap_ms;
        let mut joined: Vec<(i64, Session<A>)> = Vec::new();
        for entry in ctx.prefix(self.stores.sessions, &prefix)? {
            let (window, session) = entry?;
            let (_, start) = split_window_key(&window).map_err(ProcessError::msg)?;
            let near = start.saturating_sub(gap) <= ts && ts <= session.end.saturating_add(gap);
            if near && self.is_open(session.end) {
                joined.push((start, session));
            }
        }
        if joined.is_empty() && !self.is_open(ts) {
            self.late(item, ctx)?;
            return self.close(ctx);
        }
        let (mut start, mut end, mut value) = (ts, ts, None::<A>);
        let mut window = Vec::new();
        for (old_start, old) in joined {
            window_key(&self.encoded, old_start, &mut window);
            ctx.delete(self.stores.sessions, &window)?;
            let closes = self.spec.closes_at(old.end);
            ctx.delete(self.stores.closing, &closing_key(closes, &window))?;
            start = start.min(old_start);
            end = end.max(old.end);
            value = Some(match value {
                Some(value) => (self.merge)(&item.key, value, old.value),
                None => old.value,
            });
        }
        let value = (self.fold)(value, &item.key, &item.value);
        window_key(&self.encoded, start, &mut window);
        let session = Session {
            end,
            value: value.clone(),
        };
        ctx.put(self.stores.sessions, &window, &session)?;
        let closes = self.spec.closes_at(end);
        ctx.put(self.stores.closing, &closing_key(closes, &window), &())?;
        if self.spec.emit == Emit::OnUpdate {
            let key = Windowed {
                key: item.key,
                start,
                end: end.saturating_add(1),
            };
            self.next.push(
                Item {
                    key,
                    value,
                    timestamp: ts,
                },
                ctx,
            )?;
        }
        self.close(ctx)
    }
}
