//! [`WindowJoin`]: the one operator of a stream–stream join, taking the
//! records of both sides (see the `stream_join` module doc for the order
//! of its steps and its stores, and `windows` for which records join and
//! when each expires).

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use strata_record::codec::Codec;
use strata_runtime::{Context, EmitOptions, Output, ProcessError, Store};

use crate::expiry::{Expiry, ExpiryStores};
use crate::item::{Data, Item};
use crate::operator::{Next, Operator};

use super::key::{buffer_key, split_buffer_key};
use super::windows::JoinSide;
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

/// Where each side's late records go besides being counted, if anywhere.
pub(crate) struct LateOutputs<K, L, R> {
    pub left: Option<Output<K, L>>,
    pub right: Option<Output<K, R>>,
}

// Copy for any K, L and R (a derive would ask it of them).
impl<K, L, R> Clone for LateOutputs<K, L, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, L, R> Copy for LateOutputs<K, L, R> {}

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

/// What a join is, apart from its stores: built once per pipeline, and
/// again when a late topic is given after the join.
pub(crate) struct JoinSpec<K, L, R, O> {
    pub windows: JoinWindows,
    pub kind: Kind,
    pub key_codec: Codec,
    pub f: Arc<Joiner<K, L, R, O>>,
    pub late: LateOutputs<K, L, R>,
}

impl<K, L, R, O> Clone for JoinSpec<K, L, R, O> {
    fn clone(&self) -> Self {
        Self {
            f: Arc::clone(&self.f),
            ..*self
        }
    }
}

pub(crate) struct WindowJoin<K, L: 'static, R: 'static, O> {
    spec: JoinSpec<K, L, R, O>,
    stores: JoinStores<L, R>,
    expiry: Expiry,
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
    pub fn new(spec: JoinSpec<K, L, R, O>, stores: JoinStores<L, R>, next: Next<K, O>) -> Self {
        // Scans of the expiry list once per eighth of a record's life.
        let step_ms = spec.windows.longest_life_ms() / 8;
        Self {
            spec,
            stores,
            expiry: Expiry::new(stores.clock, step_ms),
            next,
            seq: 0,
            encoded: Vec::new(),
        }
    }

    /// The live records of `store`, the other side's, in the window of a
    /// record of `side` at `t`, in key order.
    fn partners<T>(
        &self,
        store: Store<Vec<u8>, Buffered<T>>,
        side: JoinSide,
        t: i64,
        ctx: &mut Context<'_>,
    ) -> Result<Partners<T>, ProcessError>
    where
        T: DeserializeOwned + 'static,
    {
        let w = self.spec.windows;
        let (back, ahead) = w.reach(side);
        // A partner at t₂ is live while t₂ + back + grace ≥ watermark
        // (its own window reaches `back` past it: the windows mirror).
        let live_from = self
            .expiry
            .watermark()
            .saturating_sub(back)
            .saturating_sub(w.grace_ms());
        let from = t.saturating_sub(back).max(live_from);
        let to = t.saturating_add(ahead);
        if from > to {
            return Ok(Vec::new());
        }
        let (mut lo, mut hi) = (Vec::new(), Vec::new());
        buffer_key(&self.encoded, from, 0, &mut lo);
        buffer_key(&self.encoded, to, u64::MAX, &mut hi);
        ctx.range(store, lo..=hi)?.collect()
    }

    /// Joins a record of `side` at `t` with each of `partners` by `f`
    /// (given the partner), marking partners that joined for the first
    /// time when `mark` (the other side is emitted unjoined). Whether
    /// there were any.
    fn join_each<T>(
        &mut self,
        key: &K,
        t: i64,
        (store, partners, mark): (Store<Vec<u8>, Buffered<T>>, Partners<T>, bool),
        f: impl Fn(&T) -> O,
        ctx: &mut Context<'_>,
    ) -> Result<bool, ProcessError>
    where
        T: Serialize + 'static,
    {
        let joined = !partners.is_empty();
        for (partner, mut record) in partners {
            let (_, t2, _) = split_buffer_key(&partner).map_err(ProcessError::msg)?;
            self.emit(key.clone(), f(&record.value), t.max(t2), ctx)?;
            if mark && !record.joined {
                record.joined = true;
                ctx.put(store, &partner, &record)?;
            }
        }
        Ok(joined)
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

    /// Counts a record that arrived expired, and writes it to its side's
    /// late topic if it has one.
    fn late(
        &mut self,
        item: Item<K, Side<L, R>>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        self.expiry.count(LATE, ctx)?;
        ctx.dropped(LATE);
        let options = EmitOptions::default().timestamp(item.timestamp);
        match (item.value, self.spec.late) {
            (
                Side::Left(value),
                LateOutputs {
                    left: Some(out), ..
                },
            ) => ctx.emit_with(out, &item.key, &value, options),
            (
                Side::Right(value),
                LateOutputs {
                    right: Some(out), ..
                },
            ) => ctx.emit_with(out, &item.key, &value, options),
            _ => Ok(()),
        }
    }

    /// Deletes the expired records, emitting those a left or outer join
    /// emits without a partner.
    fn expire(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let kind = self.spec.kind;
        for (_, entry) in self.expiry.take_expired(ctx)? {
            let (&side, buffered) = entry
                .split_first()
                .ok_or_else(|| ProcessError::msg("an empty expiry entry"))?;
            let (key, t, _) = split_buffer_key(buffered).map_err(ProcessError::msg)?;
            let key: K = self.spec.key_codec.decode(key)?;
            if side == LEFT {
                let record = ctx.get(self.stores.left, buffered)?;
                ctx.delete(self.stores.left, buffered)?;
                if let Some(record) = record.filter(|r| kind.unjoined_left && !r.joined) {
                    let value = (self.spec.f)(&key, Some(&record.value), None);
                    self.emit(key, value, t, ctx)?;
                }
            } else {
                let record = ctx.get(self.stores.right, buffered)?;
                ctx.delete(self.stores.right, buffered)?;
                if let Some(record) = record.filter(|r| kind.unjoined_right && !r.joined) {
                    let value = (self.spec.f)(&key, None, Some(&record.value));
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

    /// Joins a live record with the other side's buffered records and
    /// buffers it under `own`; its expiry list side byte.
    fn join(
        &mut self,
        key: K,
        t: i64,
        value: Side<L, R>,
        own: &[u8],
        ctx: &mut Context<'_>,
    ) -> Result<u8, ProcessError> {
        let (f, kind) = (Arc::clone(&self.spec.f), self.spec.kind);
        match value {
            Side::Left(value) => {
                let partners = self.partners(self.stores.right, JoinSide::Left, t, ctx)?;
                let other = (self.stores.right, partners, kind.unjoined_right);
                let f = |r: &R| f(&key, Some(&value), Some(r));
                let joined = self.join_each(&key, t, other, f, ctx)?;
                ctx.put(self.stores.left, own, &Buffered { value, joined })?;
                Ok(LEFT)
            }
            Side::Right(value) => {
                let partners = self.partners(self.stores.left, JoinSide::Right, t, ctx)?;
                let other = (self.stores.left, partners, kind.unjoined_left);
                let f = |l: &L| f(&key, Some(l), Some(&value));
                let joined = self.join_each(&key, t, other, f, ctx)?;
                ctx.put(self.stores.right, own, &Buffered { value, joined })?;
                Ok(RIGHT)
            }
        }
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
        let side = match item.value {
            Side::Left(_) => JoinSide::Left,
            Side::Right(_) => JoinSide::Right,
        };
        let expires_at = self.spec.windows.expires_at(side, t);
        if !self.expiry.is_live(expires_at) {
            self.late(item, ctx)?;
            return self.expire(ctx);
        }
        self.spec
            .key_codec
            .encode_into(&item.key, &mut self.encoded)?;
        let seq = self.next_seq(ctx)?;
        let mut own = Vec::new();
        buffer_key(&self.encoded, t, seq, &mut own);
        let side = self.join(item.key, t, item.value, &own, ctx)?;
        let mut entry = Vec::with_capacity(1 + own.len());
        entry.push(side);
        entry.extend_from_slice(&own);
        self.expiry.add(expires_at, &entry, ctx)?;
        self.expire(ctx)
    }
}
