//! [`JoinWindows`]: which records of the two sides of a stream–stream
//! join are close enough in event time to join, and how long each side's
//! records stay buffered for partners that arrive out of order.
//!
//! Windows are relative to the **left** record, as Kafka Streams' are to
//! the stream `join` is called on: a left record at `t` joins the right
//! records at `t − before ..= t + after` (so `t_right − t_left` lies in
//! `[−before, after]`). Seen from the right, a right record at `t` joins
//! the left records at `t − after ..= t + before`.
//!
//! A record's window ends where its latest partner can be: `t + after`
//! for a left record, `t + before` for a right one. It is **live** (taken
//! when it arrives, buffered, joinable) while the watermark is at most
//! its window's end plus the grace period; after that it **expires**
//! (deleted; a left or outer join emits it unjoined if it never joined),
//! and a record that arrives already expired is **late**. Two records
//! join when they are in each other's windows and both are live when the
//! second arrives: a record emitted as unjoined never joins afterwards.
//!
//! The bounds are `Duration`s, so a window is never negative or inverted
//! (its lower end is always at or below its upper end): there is nothing
//! of the kind to refuse. A bound beyond `i64::MAX` ms saturates (a
//! record that never expires).

use std::time::Duration;

/// How close in event time two records must be to join (see the module
/// doc), and how long after its window a record is still taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinWindows {
    before_ms: i64,
    after_ms: i64,
    grace_ms: i64,
}

/// The two sides of a join, for what differs between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinSide {
    Left,
    Right,
}

impl JoinWindows {
    /// Records `within` of each other join (`|t_right − t_left| ≤
    /// within`): `before` and `after` both `within`.
    pub fn of(within: Duration) -> Self {
        Self {
            before_ms: millis(within),
            after_ms: millis(within),
            grace_ms: 0,
        }
    }

    /// A left record at `t` joins the right records from `t − before` to
    /// `t` (and, with [`JoinWindows::after`], to `t + after`).
    pub fn before(before: Duration) -> Self {
        Self {
            before_ms: millis(before),
            after_ms: 0,
            grace_ms: 0,
        }
    }

    /// A left record at `t` joins the right records up to `t + after`;
    /// the lower bound, `t − before`, is kept.
    pub fn after(mut self, after: Duration) -> Self {
        self.after_ms = millis(after);
        self
    }

    /// How long past the end of its window a record is still taken and
    /// buffered for late partners (default 0).
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace_ms = millis(grace);
        self
    }

    pub fn before_ms(&self) -> i64 {
        self.before_ms
    }

    pub fn after_ms(&self) -> i64 {
        self.after_ms
    }

    pub fn grace_ms(&self) -> i64 {
        self.grace_ms
    }

    /// How far before and after its own timestamp a record of `side`
    /// finds its partners.
    pub(crate) fn reach(&self, side: JoinSide) -> (i64, i64) {
        match side {
            JoinSide::Left => (self.before_ms, self.after_ms),
            JoinSide::Right => (self.after_ms, self.before_ms),
        }
    }

    /// The last watermark at which a record of `side` at `t` is live.
    pub(crate) fn expires_at(&self, side: JoinSide, t: i64) -> i64 {
        let (_, ahead) = self.reach(side);
        t.saturating_add(ahead).saturating_add(self.grace_ms)
    }

    /// The longest a record of either side lives past its timestamp.
    pub(crate) fn longest_life_ms(&self) -> i64 {
        (self.before_ms.max(self.after_ms)).saturating_add(self.grace_ms)
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_record_is_live_until_the_watermark_passes_its_window_and_grace() {
        let w = JoinWindows::of(ms(100)).grace(ms(50));
        assert_eq!(w.expires_at(JoinSide::Left, 1_000), 1_150);
        assert_eq!(w.expires_at(JoinSide::Right, 1_000), 1_150);
        let forever = JoinWindows::of(Duration::MAX);
        assert_eq!(forever.expires_at(JoinSide::Left, 5), i64::MAX);
    }

    #[test]
    fn a_left_record_waits_for_after_and_a_right_one_for_before() {
        let w = JoinWindows::before(ms(300)).after(ms(20)).grace(ms(5));
        assert_eq!(w.reach(JoinSide::Left), (300, 20));
        assert_eq!(w.reach(JoinSide::Right), (20, 300));
        assert_eq!(w.expires_at(JoinSide::Left, 1_000), 1_025);
        assert_eq!(w.expires_at(JoinSide::Right, 1_000), 1_305);
        assert_eq!(w.longest_life_ms(), 305);
    }

    #[test]
    fn of_is_before_and_after_alike_and_after_keeps_before() {
        let of = JoinWindows::of(ms(70));
        assert_eq!(of, JoinWindows::before(ms(70)).after(ms(70)));
        assert_eq!(of.after(ms(5)).before_ms(), 70);
        assert_eq!(JoinWindows::before(ms(9)).after_ms(), 0);
    }
}
