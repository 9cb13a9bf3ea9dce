//! [`WindowJoin`]: the one operator of a stream–stream join, taking the
//! records of both sides (see the `stream_join` module doc for the order
//! of its steps and its stores).

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use strata::codec::Codec;
use strata::runtime::{Context, ProcessError, Store};

use crate::expiry::{Expiry, ExpiryStores};
use crate::item::{Data, Item};
use crate::operator::{Next, Operator};

use super::key::{buffer_key, split_buffer_key};
use super::{JoinWindows, Side};

/// A buffered record and whether it has joined a record of the other
/// side (a left or outer join emits those that never did).
#[derive(Serialize, Deserialize)]
pub(crate) struct Buffered<V> {
    value: V,
    joined: bool,
}

/// The expiry list's side bytes.
const LEFT: u8 = 0;
const RIGHT: u8 = 1;

/// The other side's records a record joins, by buffer key.
type Partners<T> = Vec<(Vec<u8>, Buffered<T>)>;

/// Which records of each side are emitted without a partner.
#[derive(Clone, Copy)]
pub(crate) struct Kind {
    pub unjoined_left: bool,
    pub unjoined_right: bool,
}

/// The join function of every kind: inner joins get both sides.
pub(crate) type Joiner<K, L, R, O> = dyn Fn(&K, Option<&L>, Option<&R>) -> O + Send + Sync;

/// The time store's entries besides the watermark.
const LATE: &str = "late";
const SEQ_ENTRY: &str = "seq";

pub(crate) struct JoinStores<L: 'static, R: 'static> {
    pub left: Store<Vec<u8>, Buffered<L>>,
    pub right: Store<Vec<u8>, Buffered<R>>,
    pub clock: ExpiryStores,
}

// Copy for any L and R (a derive would ask it of them).
impl<L, R> Clone for JoinStores<L, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<L, R> Copy for JoinStores<L, R> {}

pub(crate) struct WindowJoin<K, L: 'static, R: 'static, O> {
    windows: JoinWindows,
    kind: Kind,
    key_codec: Codec,
    stores: JoinStores<L, R>,
    expiry: Expiry,
    f: Arc<Joiner<K, L, R, O>>,
    next: Next<K, O>,
    /// The last buffered record's number (kept in the time store).
    seq: u64,
    encoded: Vec<u8>,
}

impl<K, L, R, O> WindowJoin<K, L, R, O>
where
    K: Data + Serialize + DeserializeOwned,
    L: Data + Serialize + DeserializeOwned,
    R: Data + Serialize + DeserializeOwned,
    O: Data,
{
    pub fn new(
        windows: JoinWindows,
        kind: Kind,
        key_codec: Codec,
        stores: JoinStores<L, R>,
        f: Arc<Joiner<K, L, R, O>>,
        next: Next<K, O>,
    ) -> Self {
        // Scans of the expiry list once per eighth of a record's life.
        let step_ms = windows.within_ms.saturating_add(windows.grace_ms) / 8;
        Self {
            windows,
            kind,
            key_codec,
            stores,
            expiry: Expiry::new(stores.clock, step_ms),
            f,
            next,
            seq: 0,
            encoded: Vec::new(),
        }
    }

    /// The other side's live records in `t`'s window, in key order.
    fn partners<T>(
        &self,
        store: Store<Vec<u8>, Buffered<T>>,
        t: i64,
        ctx: &mut Context<'_>,
    ) -> Result<Partners<T>, ProcessError>
    where
        T: DeserializeOwned + 'static,
    {
        let w = self.windows;
        // Live: t₂ + within + grace ≥ watermark.
        let live_from = self
            .expiry
            .watermark()
            .saturating_sub(w.within_ms)
            .saturating_sub(w.grace_ms);
        let from = t.saturating_sub(w.within_ms).max(live_from);
        let to = t.saturating_add(w.within_ms);
        if from > to {
            return Ok(Vec::new());
        }
        let (mut lo, mut hi) = (Vec::new(), Vec::new());
        buffer_key(&self.encoded, from, 0, &mut lo);
        buffer_key(&self.encoded, to, u64::MAX, &mut hi);
        ctx.range(store, lo..=hi)?.collect()
    }

    fn emit(
        &mut self,
        key: K,
        value: O,
        timestamp: i64,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        let item = Item {
            key,
            value,
            timestamp,
        };
        self.next.push(item, ctx)
    }

    /// Deletes the expired records, emitting those a left or outer join
    /// emits without a partner.
    fn expire(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        for (_, entry) in self.expiry.take_expired(ctx)? {
            let (&side, buffered) = entry
                .split_first()
                .ok_or_else(|| ProcessError::msg("an empty expiry entry"))?;
            let (key, t, _) = split_buffer_key(buffered).map_err(ProcessError::msg)?;
            let key: K = self.key_codec.decode(key)?;
            if side == LEFT {
                let record = ctx.get(self.stores.left, buffered)?;
                ctx.delete(self.stores.left, buffered)?;
                if let Some(record) = record.filter(|r| self.kind.unjoined_left && !r.joined) {
                    let value = (self.f)(&key, Some(&record.value), None);
                    self.emit(key, value, t, ctx)?;
                }
            } else {
                let record = ctx.get(self.stores.right, buffered)?;
                ctx.delete(self.stores.right, buffered)?;
                if let Some(record) = record.filter(|r| self.kind.unjoined_right && !r.joined) {
                    let value = (self.f)(&key, None, Some(&record.value));
                    self.emit(key, value, t, ctx)?;
                }
            }
        }
        Ok(())
    }

    fn next_seq(&mut self, ctx: &mut Context<'_>) -> Result<u64, ProcessError> {
        self.seq += 1;
        ctx.put(self.expiry.stores.time, SEQ_ENTRY, &(self.seq as i64))?;
        Ok(self.seq)
    }
}

impl<K, L, R, O> Operator<K, Side<L, R>> for WindowJoin<K, L, R, O>
where
    K: Data + Serialize + DeserializeOwned,
    L: Data + Serialize + DeserializeOwned,
    R: Data + Serialize + DeserializeOwned,
    O: Data,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.expiry.init(ctx)?;
        let seq = ctx.get(self.expiry.stores.time, SEQ_ENTRY)?.unwrap_or(0);
        self.seq = u64::try_from(seq).map_err(|_| ProcessError::msg("a negative join seq"))?;
        self.next.init(ctx)
    }

    fn push(
        &mut self,
        item: Item<K, Side<L, R>>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        let t = item.timestamp;
        self.expiry.advance(t, ctx)?;
        let expires_at = self.windows.expires_at(t);
        if !self.expiry.is_live(expires_at) {
            self.expiry.count(LATE, ctx)?;
            return self.expire(ctx);
        }
        self.key_codec.encode_into(&item.key, &mut self.encoded)?;
        let seq = self.next_seq(ctx)?;
        let mut own = Vec::new();
        buffer_key(&self.encoded, t, seq, &mut own);
        let key = item.key;
        let side = match item.value {
            Side::Left(value) => {
                let partners = self.partners(self.stores.right, t, ctx)?;
                let joined = !partners.is_empty();
                for (partner, mut record) in partners {
                    let (_, t2, _) = split_buffer_key(&partner).map_err(ProcessError::msg)?;
                    let out = (self.f)(&key, Some(&value), Some(&record.value));
                    self.emit(key.clone(), out, t.max(t2), ctx)?;
                    if self.kind.unjoined_right && !record.joined {
                        record.joined = true;
                        ctx.put(self.stores.right, &partner, &record)?;
                    }
                }
                ctx.put(self.stores.left, &own, &Buffered { value, joined })?;
                LEFT
            }
            Side::Right(value) => {
                let partners = self.partners(self.stores.left, t, ctx)?;
                let joined = !partners.is_empty();
                for (partner, mut record) in partners {
                    let (_, t2, _) = split_buffer_key(&partner).map_err(ProcessError::msg)?;
                    let out = (self.f)(&key, Some(&record.value), Some(&value));
                    self.emit(key.clone(), out, t.max(t2), ctx)?;
                    if self.kind.unjoined_left && !record.joined {
                        record.joined = true;
                        ctx.put(self.stores.left, &partner, &record)?;
                    }
                }
                ctx.put(self.stores.right, &own, &Buffered { value, joined })?;
                RIGHT
            }
        };
        let mut entry = Vec::with_capacity(1 + own.len());
        entry.push(side);
        entry.extend_from_slice(&own);
        self.expiry.add(expires_at, &entry, ctx)?;
        self.expire(ctx)
    }
}
