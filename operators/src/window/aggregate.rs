//! [`WindowAggregate`]: a windowed aggregation over event time, per task.
//!
//! Per record, in this order:
//!
//! 1. The task's **watermark** (the greatest record timestamp it has seen;
//!    Kafka Streams' stream time) moves up to the record's timestamp.
//! 2. Every window the timestamp falls in that is still open (`end +
//!    grace > watermark`) takes the record: its aggregate is read, folded
//!    and written back, and emitted when windows emit on update. A new
//!    window is also listed under its closing key (see `key`).
//! 3. A record no open window takes is **late**: counted (the `late`
//!    entry of the time store, and `strata_task_dropped_records_total`
//!    with reason `late` in `/metrics`) and written to the late topic if
//!    there is one.
//! 4. Every window whose `end + grace` the watermark has reached
//!    **closes**: its final aggregate is emitted when windows emit on
//!    close (with timestamp `end - 1`), and its entries are deleted, so a
//!    window's state lives as long as the window.
//!
//! Stores, all written through the task's run and committed with its
//! offsets: the aggregates by window key, the closing list, and the time
//! store (`watermark`, `late`). The watermark is kept, so a task restarted
//! after a crash resumes with the watermark of its last commit and
//! decides every replayed record as the crash-free run did.
//!
//! Closing scans the closing list only when the watermark passes the next
//! possible window end (ends fall on a grid), not at every record. A
//! window the task opened itself is known to be new without reading the
//! store (see `known`).

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strata_record::codec::Codec;
use strata_runtime::{Context, EmitOptions, Output, ProcessError, Store};

use crate::aggregate::Fold;
use crate::item::{Data, Item};
use crate::operator::{Next, Operator};

use super::key::{closing_key, split_closing_key, split_window_key, time_bytes, window_key};
use super::known::OpenedWindows;
use super::spec::{Emit, Windowed, Windows};

/// The time store's entries.
pub(crate) const WATERMARK: &str = "watermark";
pub(crate) const LATE: &str = "late";

/// The stores of one windowed aggregation.
pub(crate) struct WindowStores<A: 'static> {
    pub windows: Store<Vec<u8>, A>,
    pub closing: Store<Vec<u8>, ()>,
    pub time: Store<String, i64>,
}

// Copy for any A (a derive would ask it of A).
impl<A> Clone for WindowStores<A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A> Copy for WindowStores<A> {}

pub(crate) struct WindowAggregate<K, V, A: 'static> {
    pub spec: Windows,
    pub key_codec: Codec,
    pub stores: WindowStores<A>,
    pub fold: Arc<Fold<K, V, A>>,
    pub late: Option<Output<K, V>>,
    pub next: Next<Windowed<K>, A>,
    /// i64::MIN until the task has seen a record.
    watermark: i64,
    /// Every window ending at or before this is closed.
    closed_through: i64,
    /// The windows opened since `init`, known absent before.
    opened: OpenedWindows,
    encoded: Vec<u8>,
    window: Vec<u8>,
}

impl<K, V, A> WindowAggregate<K, V, A>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize,
    A: Data + Serialize + DeserializeOwned,
{
    pub fn new(
        spec: Windows,
        key_codec: Codec,
        stores: WindowStores<A>,
        fold: Arc<Fold<K, V, A>>,
        late: Option<Output<K, V>>,
        next: Next<Windowed<K>, A>,
    ) -> Self {
        Self {
            spec,
            key_codec,
            stores,
            fold,
            late,
            next,
            watermark: i64::MIN,
            closed_through: i64::MIN,
            // Until `init` reads the stored watermark: every window read.
            opened: OpenedWindows::new(i64::MAX),
            encoded: Vec::new(),
            window: Vec::new(),
        }
    }

    fn late(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let late = ctx.get(self.stores.time, LATE)?.unwrap_or(0) + 1;
        ctx.put(self.stores.time, LATE, &late)?;
        ctx.dropped(LATE);
        if let Some(output) = self.late {
            let options = EmitOptions::default().timestamp(item.timestamp);
            ctx.emit_with(output, &item.key, &item.value, options)?;
        }
        Ok(())
    }

    /// Closes every window whose `end + grace` the watermark has reached.
    fn close(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let ended_by = self.watermark.saturating_sub(self.spec.grace_ms);
        if ended_by < self.spec.next_end_after(self.closed_through) {
            return Ok(());
        }
        let upto = ended_by.checked_add(1).map(|t| time_bytes(t).to_vec());
        let closing = match upto {
            Some(upto) => ctx.range(self.stores.closing, ..upto)?,
            None => ctx.range(self.stores.closing, ..)?,
        };
        for entry in closing {
            let (closing_key, ()) = entry?;
            let (end, window) = split_closing_key(&closing_key).map_err(ProcessError::msg)?;
            if self.spec.emit == Emit::OnClose
                && let Some(value) = ctx.get(self.stores.windows, window)?
            {
                let (key, start) = split_window_key(window).map_err(ProcessError::msg)?;
                let key = self.key_codec.decode(key)?;
                let timestamp = end.saturating_sub(1);
                let item = Item {
                    key: Windowed { key, start, end },
                    value,
                    timestamp,
                };
                self.next.push(item, ctx)?;
            }
            ctx.delete(self.stores.windows, window)?;
            ctx.delete(self.stores.closing, &closing_key)?;
        }
        self.closed_through = ended_by;
        self.opened.closed_through(ended_by);
        Ok(())
    }
}

impl<K, V, A> Operator<K, V> for WindowAggregate<K, V, A>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize,
    A: Data + Serialize + DeserializeOwned,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.watermark = ctx.get(self.stores.time, WATERMARK)?.unwrap_or(i64::MIN);
        self.closed_through = i64::MIN;
        self.opened = OpenedWindows::new(self.watermark);
        self.next.init(ctx)
    }

    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        if item.timestamp > self.watermark {
            self.watermark = item.timestamp;
            ctx.put(self.stores.time, WATERMARK, &self.watermark)?;
        }
        self.key_codec.encode_into(&item.key, &mut self.encoded)?;
        let mut taken = false;
        for start in self.spec.starts(item.timestamp) {
            if self.spec.closes_at(start) <= self.watermark {
                continue;
            }
            taken = true;
            window_key(&self.encoded, start, &mut self.window);
            let end = start.saturating_add(self.spec.size_ms);
            let last = match self.opened.open(&self.window, start, end, self.watermark) {
                true => None,
                false => ctx.get(self.stores.windows, &self.window)?,
            };
            if last.is_none() {
                ctx.put(self.stores.closing, &closing_key(end, &self.window), &())?;
            }
            let value = (self.fold)(last, &item.key, &item.value);
            ctx.put(self.stores.windows, &self.window, &value)?;
            if self.spec.emit == Emit::OnUpdate {
                let key = Windowed {
                    key: item.key.clone(),
                    start,
                    end,
                };
                let timestamp = item.timestamp;
                self.next.push(
                    Item {
                        key,
                        value,
                        timestamp,
                    },
                    ctx,
                )?;
            }
        }
        if !taken {
            self.late(item, ctx)?;
        }
        self.close(ctx)
    }
}
