//! [`Sessions`]: a session window definition (inactivity gap, grace, and
//! when a session's aggregate is emitted), and [`SessionEmit`], the
//! emission mode as a type, which decides what a session aggregation's
//! stream carries:
//!
//! - [`OnUpdate`] (the default): `Option<A>` per windowed key, as a
//!   table's changes are. `Some(aggregate)` at every record a session
//!   takes; `None`, a **retraction**, for a windowed key that no longer
//!   exists because the session was merged into another or its bounds
//!   changed (a session's end is part of its key). A table kept from the
//!   stream, a `Some` upserting and a `None` deleting, holds exactly the
//!   sessions the operator holds, closed ones included.
//! - [`OnClose`]: the aggregate `A` itself, once per session, when it
//!   closes; a closed session never changes, so nothing is retracted.
//!
//! Making the mode a type lets the compiler tell a user of emit-on-update
//! sessions that some records are retractions, and spares a user of
//! emit-on-close sessions an `Option` that is never `None`.
//!
//! Written with [`Stream::to_upserts`](crate::Stream::to_upserts), a
//! retraction reaches the topic as a tombstone (a record with no value),
//! as Kafka Streams writes it; `.to(topic)` of an `Option` value type
//! would instead write `None` as the topic's value codec encodes it.

use std::marker::PhantomData;
use std::time::Duration;

use super::spec::Emit;
use crate::item::Data;

/// A session window definition: sessions end after `gap` without a
/// record of their key; `E` says when their aggregates are emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sessions<E = OnUpdate> {
    pub(crate) gap_ms: i64,
    pub(crate) grace_ms: i64,
    emit: PhantomData<E>,
}

/// Sessions emit at every update, retracting the windowed keys that no
/// longer exist (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnUpdate;

/// Sessions emit their final aggregate once, when they close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnClose;

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::OnUpdate {}
    impl Sealed for super::OnClose {}
}

/// When a session aggregation emits, and what its stream carries for an
/// aggregate `A`: [`OnUpdate`] or [`OnClose`] (sealed: the operator
/// knows only these two).
pub trait SessionEmit: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The value of each record of the aggregation's stream.
    type Value<A: Data>: Data;

    /// The mode as a value, for the operator's decisions.
    const EMIT: Emit;

    /// A session's (new or final) aggregate as the stream carries it.
    fn aggregate<A: Data>(aggregate: A) -> Self::Value<A>;

    /// The value saying a windowed key no longer exists; none in a mode
    /// that never retracts.
    fn retraction<A: Data>() -> Option<Self::Value<A>>;
}

impl SessionEmit for OnUpdate {
    type Value<A: Data> = Option<A>;
    const EMIT: Emit = Emit::OnUpdate;

    fn aggregate<A: Data>(aggregate: A) -> Option<A> {
        Some(aggregate)
    }

    fn retraction<A: Data>() -> Option<Option<A>> {
        Some(None)
    }
}

impl SessionEmit for OnClose {
    type Value<A: Data> = A;
    const EMIT: Emit = Emit::OnClose;

    fn aggregate<A: Data>(aggregate: A) -> A {
        aggregate
    }

    fn retraction<A: Data>() -> Option<A> {
        None
    }
}

impl Sessions<OnUpdate> {
    /// Sessions that end after `gap` without a record of their key,
    /// emitted at every update.
    pub fn with_gap(gap: Duration) -> Self {
        Self {
            gap_ms: millis(gap),
            grace_ms: 0,
            emit: PhantomData,
        }
    }

    /// Emit each session's aggregate once, when it closes.
    pub fn emit_on_close(self) -> Sessions<OnClose> {
        Sessions {
            gap_ms: self.gap_ms,
            grace_ms: self.grace_ms,
            emit: PhantomData,
        }
    }
}

impl<E: SessionEmit> Sessions<E> {
    /// How long after `end + gap` a session still takes records.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace_ms = millis(grace);
        self
    }

    pub fn gap_ms(&self) -> i64 {
        self.gap_ms
    }

    pub fn grace_ms(&self) -> i64 {
        self.grace_ms
    }

    pub fn emit(&self) -> Emit {
        E::EMIT
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
    pub(crate) fn scan_step_ms(&self) -> i64 {
        (self.gap_ms / 8).max(1)
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_on_close_keeps_the_gap_and_grace_and_changes_the_mode() {
        let updates = Sessions::with_gap(Duration::from_secs(2)).grace(Duration::from_secs(1));
        let finals = updates.emit_on_close();
        assert_eq!((finals.gap_ms(), finals.grace_ms()), (2_000, 1_000));
        assert_eq!(
            (updates.emit(), finals.emit()),
            (Emit::OnUpdate, Emit::OnClose)
        );
        assert_eq!(finals.closes_at(10_000), 13_000);
    }

    #[test]
    fn only_updates_retract() {
        assert_eq!(OnUpdate::retraction::<u64>(), Some(None));
        assert_eq!(OnClose::retraction::<u64>(), None);
        assert_eq!(OnUpdate::aggregate(3u64), Some(3));
        assert_eq!(OnClose::aggregate(3u64), 3);
    }

    #[test]
    fn a_gap_of_zero_is_refused() {
        assert!(Sessions::with_gap(Duration::ZERO).check().is_err());
        assert!(Sessions::with_gap(Duration::from_millis(1)).check().is_ok());
    }
}
