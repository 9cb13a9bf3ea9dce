//! [`Stream::dedup`]: de-duplication by key within a window of event
//! time.
//!
//! Per key, the task keeps the timestamp `t₀` of the last record it let
//! through. A record of the key at `t` is a **duplicate**, and dropped,
//! when that entry is live and `|t − t₀| < window`; any other record
//! passes and, unless it is already expired itself, becomes the key's
//! entry. Per record, in this order:
//!
//! 1. The task's watermark (the greatest timestamp it has seen) moves up
//!    to the record's timestamp.
//! 2. The key's entry is read; the record is a duplicate or passes as
//!    above. An entry at `t₀` is live while the watermark is below
//!    `t₀ + window`: after that, no record of the window can still be
//!    told from a late one, and the entry is gone.
//! 3. Expired entries are deleted (see `expiry`: a range scan of the
//!    time-ordered expiry list, once per `window / 8` of watermark
//!    advance; liveness is decided at every record, so the scans change
//!    no output).
//!
//! A record is **late** when it is not a duplicate and is expired itself
//! (`t + window ≤ watermark`): an earlier record of its key within
//! `window` may have been let through and forgotten, so whether it is a
//! duplicate cannot be told. It is counted (`late` in the time store,
//! as windows and joins count theirs); without a late topic it passes (as
//! after its key's entry expired) and leaves no entry, and with one
//! ([`Deduped::late_to`]) it goes to that topic instead of downstream. A
//! record that is a duplicate of a live entry is dropped as a duplicate,
//! late or not.
//!
//! Invariants: a key has at most one entry, listed once in the expiry
//! list under `t₀ + window − 1`; a live entry is never replaced (a record
//! that passes beside a live entry is always expired itself).
//!
//! Stores (`dedup-<node>` by default, or `stored_as`): the entries (key →
//! `t₀`, keys in the stream's key codec), `<name>-expiring` (the expiry
//! list) and `<name>-time` (`watermark`, `duplicates`, `late`).

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use strata_record::codec::Codec;
use strata_runtime::{App, Context, EmitOptions, Output, ProcessError, Store};

use crate::expiry::{Expiry, ExpiryStores};
use crate::graph::{Make, key_codec_or_default, make_op};
use crate::item::{Data, Item};
use crate::operator::{Next, Operator};
use crate::stream::Stream;
use strata_runtime::Topic;

/// The time store's count of the records dropped as duplicates.
pub(crate) const DUPLICATES: &str = "duplicates";
/// The time store's count of the late records (passed, or sent to the
/// late topic).
const LATE: &str = "late";

/// A de-duplication as built: built again when a late topic is given.
struct DedupSpec<K, V> {
    window_ms: i64,
    key_codec: Codec,
    kept: Store<K, i64>,
    stores: ExpiryStores,
    late: Option<Output<K, V>>,
}

// Copy for any K and V (a derive would ask it of them).
impl<K, V> Clone for DedupSpec<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, V> Copy for DedupSpec<K, V> {}

struct Dedup<K, V> {
    spec: DedupSpec<K, V>,
    expiry: Expiry,
    next: Next<K, V>,
    encoded: Vec<u8>,
}

impl<K, V> Dedup<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize,
{
    /// The last instant an entry kept at `t0` is live.
    fn expires_at(&self, t0: i64) -> i64 {
        t0.saturating_add(self.spec.window_ms - 1)
    }

    /// Makes a record at `t` its key's entry, replacing an expired one.
    fn keep(
        &mut self,
        key: &K,
        t: i64,
        kept: Option<i64>,
        ctx: &mut Context<'_>,
    ) -> Result<(), ProcessError> {
        self.spec.key_codec.encode_into(key, &mut self.encoded)?;
        if let Some(t0) = kept {
            self.expiry
                .remove(self.expires_at(t0), &self.encoded, ctx)?;
        }
        ctx.put(self.spec.kept, key, &t)?;
        self.expiry.add(self.expires_at(t), &self.encoded, ctx)
    }

    fn expire(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        for (at, key) in self.expiry.take_expired(ctx)? {
            let key: K = self.spec.key_codec.decode(&key)?;
            // The entry listed is the key's entry (a replaced entry's
            // listing is removed with it); checked, not assumed.
            if let Some(t0) = ctx.get(self.spec.kept, &key)?
                && self.expires_at(t0) == at
            {
                ctx.delete(self.spec.kept, &key)?;
            }
        }
        Ok(())
    }
}

impl<K, V> Operator<K, V> for Dedup<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize,
{
    fn init(&mut self, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        self.expiry.init(ctx)?;
        self.next.init(ctx)
    }

    fn push(&mut self, item: Item<K, V>, ctx: &mut Context<'_>) -> Result<(), ProcessError> {
        let t = item.timestamp;
        self.expiry.advance(t, ctx)?;
        let kept = ctx.get(self.spec.kept, &item.key)?;
        let live_entry = kept.filter(|&t0| self.expiry.is_live(self.expires_at(t0)));
        if let Some(t0) = live_entry
            && t.abs_diff(t0) < self.spec.window_ms.unsigned_abs()
        {
            self.expiry.count(DUPLICATES, ctx)?;
            return self.expire(ctx);
        }
        if self.expiry.is_live(self.expires_at(t)) {
            debug_assert!(live_entry.is_none(), "a live entry is never replaced");
            self.keep(&item.key, t, kept, ctx)?;
        } else {
            self.expiry.count(LATE, ctx)?;
            if let Some(output) = self.spec.late {
                let options = EmitOptions::default().timestamp(t);
                ctx.emit_with(output, &item.key, &item.value, options)?;
                return self.expire(ctx);
            }
        }
        self.next.push(item, ctx)?;
        self.expire(ctx)
    }
}

/// The `make` of a de-duplication's node.
fn make_dedup<K, V>(spec: DedupSpec<K, V>) -> Make
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    make_op::<K, V, K, V, _>(move |next| {
        Box::new(Dedup {
            spec,
            expiry: Expiry::new(spec.stores, spec.window_ms / 8),
            next,
            encoded: Vec::new(),
        })
    })
}

/// What [`Stream::dedup`] returns: the stream of the records let through
/// (it dereferences to a [`Stream`]), and where late records go.
pub struct Deduped<K, V> {
    stream: Stream<K, V>,
    spec: DedupSpec<K, V>,
}

impl<K, V> Deduped<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    /// Writes late records (see the `dedup` module doc) to `topic`, and
    /// counts them, instead of letting them through.
    pub fn late_to(mut self, topic: Topic<K, V>) -> Self {
        self.spec.late = Some(topic);
        let mut graph = self.stream.pipeline.graph.borrow_mut();
        graph.rebuild_writing_to(self.stream.node, make_dedup(self.spec), topic);
        drop(graph);
        self
    }

    /// The stream of the records let through.
    pub fn stream(&self) -> Stream<K, V> {
        self.stream.clone()
    }
}

impl<K, V> Deref for Deduped<K, V> {
    type Target = Stream<K, V>;

    fn deref(&self) -> &Stream<K, V> {
        &self.stream
    }
}

impl<K, V> From<Deduped<K, V>> for Stream<K, V> {
    fn from(deduped: Deduped<K, V>) -> Self {
        deduped.stream
    }
}

impl<K, V> Stream<K, V>
where
    K: Data + Serialize + DeserializeOwned,
    V: Data + Serialize + DeserializeOwned,
{
    /// The records whose key was not let through within `window` of
    /// their timestamp (event time), the others dropped as duplicates;
    /// see the `dedup` module doc for late records and expiry. A stream
    /// whose keys changed is repartitioned first.
    pub fn dedup(&self, window: Duration) -> Deduped<K, V> {
        let label = "dedup";
        let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
        if window_ms <= 0 {
            self.pipeline
                .graph
                .borrow_mut()
                .fail("dedup: a de-duplication window must be at least 1 ms".into());
        }
        let input = self.partitioned(label);
        let key_codec = key_codec_or_default(input.key_codec);
        let (kept, list, time) = {
            let mut graph = input.pipeline.graph.borrow_mut();
            let node = graph.nodes.len();
            let name = graph.store_name(node, label, self.store_name.as_deref());
            (
                name,
                graph.store_name(node, label, Some(&format!("{name}-expiring"))),
                graph.store_name(node, label, Some(&format!("{name}-time"))),
            )
        };
        let spec = DedupSpec {
            window_ms: window_ms.max(1),
            key_codec,
            kept: Store::<K, i64>::named(kept).codecs(key_codec, Codec::Postcard),
            stores: ExpiryStores {
                list: Store::named(list).codecs(Codec::Raw, Codec::Postcard),
                time: Store::named(time),
            },
            late: None,
        };
        let out = input.child::<K, V>(make_dedup(spec), input.key_codec, true);
        let (kept, stores) = (spec.kept, spec.stores);
        let declare =
            Arc::new(move |app: App| app.store(kept).store(stores.list).store(stores.time));
        let mut graph = out.pipeline.graph.borrow_mut();
        graph.declare(out.node, format!("store {}", kept.name()), declare);
        drop(graph);
        Deduped { stream: out, spec }
    }
}
