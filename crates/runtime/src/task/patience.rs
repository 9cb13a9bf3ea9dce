//! [`Patience`]: whether a task with several inputs may go on without an
//! input that has nothing buffered, and how long a fetch of that input
//! waits on the broker (docs/design.md, "Order across inputs").
//!
//! | the input with nothing buffered | passed by? |
//! |---|---|
//! | at its target (`--until-end`, rebuild) | yes: it is done |
//! | has records before its target | no |
//! | `--until-end`, targets not known yet | no: a writer still runs |
//! | its partition holds records not fetched yet | no |
//! | caught up with its partition | after `max_task_idle` (0: at once) |
//!
//! "Not fetched yet" is judged by the end the input's last fetch saw (the
//! log end offset; remote, the last stable offset), as Kafka Streams
//! judges it by the lag its last fetch reported.

use std::time::{Duration, Instant};

use crate::log_access::FETCH_WAIT_MAX;

use super::input::Input;

/// How patient the choice is with one input that has nothing buffered.
#[derive(Debug, Clone, Copy)]
pub(super) struct Patience {
    /// The input's target, if the task has targets.
    pub target: Option<i64>,
    /// `--until-end` and the targets are not known yet: a writer of an
    /// input may still be running.
    pub ends_pending: bool,
    pub max_task_idle: Duration,
}

impl Patience {
    /// Whether the input reached its target: nothing more of it is read.
    pub fn at_target(&self, input: &Input) -> bool {
        self.target.is_some_and(|target| input.next >= target)
    }

    /// Whether the task may go on without `input`, which has nothing
    /// buffered (the table in the module doc).
    pub fn may_pass_by(&self, input: &Input, now: Instant) -> bool {
        if self.target.is_some() {
            return self.at_target(input);
        }
        if self.ends_pending {
            return false;
        }
        match input.end {
            Some(end) if input.next >= end => self.idle_over(input, now),
            _ => false,
        }
    }

    /// Whether a caught-up input has been idle for `max_task_idle`.
    fn idle_over(&self, input: &Input, now: Instant) -> bool {
        match input.idle_since {
            Some(since) => now.saturating_duration_since(since) >= self.max_task_idle,
            None => self.max_task_idle.is_zero(),
        }
    }

    /// How long a remote fetch of `input` should wait on the broker for
    /// records while the task waits for it: up to [`FETCH_WAIT_MAX`], or
    /// the rest of its idle time.
    pub fn fetch_wait(&self, input: &Input, now: Instant) -> Duration {
        if self.target.is_some() || self.ends_pending {
            return FETCH_WAIT_MAX;
        }
        let idle_for = input
            .idle_since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        self.max_task_idle
            .saturating_sub(idle_for)
            .min(FETCH_WAIT_MAX)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn input(next: i64, end: Option<i64>, idle_since: Option<Instant>) -> Input {
        let mut input = Input::new(Arc::from("in"), "in".into(), next);
        input.end = end;
        input.idle_since = idle_since;
        input
    }

    fn live(max_task_idle: Duration) -> Patience {
        Patience {
            target: None,
            ends_pending: false,
            max_task_idle,
        }
    }

    #[test]
    fn an_input_with_records_not_fetched_yet_is_never_passed_by() {
        let now = Instant::now();
        let long_idle = Some(now - Duration::from_secs(60));
        let behind = input(5, Some(9), long_idle);
        assert!(!live(Duration::ZERO).may_pass_by(&behind, now));
        assert!(!live(Duration::from_millis(10)).may_pass_by(&behind, now));
    }

    #[test]
    fn an_input_never_fetched_is_waited_for() {
        let now = Instant::now();
        assert!(!live(Duration::ZERO).may_pass_by(&input(0, None, None), now));
    }

    #[test]
    fn a_caught_up_input_is_passed_by_once_idle_for_max_task_idle() {
        let now = Instant::now();
        let idle = Duration::from_millis(100);
        let just_now = input(9, Some(9), Some(now));
        assert!(live(Duration::ZERO).may_pass_by(&just_now, now));
        assert!(!live(idle).may_pass_by(&just_now, now));
        let long_ago = input(9, Some(9), Some(now - Duration::from_millis(150)));
        assert!(live(idle).may_pass_by(&long_ago, now));
    }

    #[test]
    fn with_targets_only_an_input_at_its_target_is_passed_by() {
        let now = Instant::now();
        let caught_up = input(9, Some(9), Some(now - Duration::from_secs(60)));
        let to_go = Patience {
            target: Some(12),
            ends_pending: false,
            max_task_idle: Duration::ZERO,
        };
        assert!(!to_go.may_pass_by(&caught_up, now));
        let done = Patience {
            target: Some(9),
            ..to_go
        };
        assert!(done.may_pass_by(&caught_up, now));
        assert!(done.at_target(&caught_up));
    }

    #[test]
    fn until_the_ends_are_known_no_input_is_passed_by() {
        let now = Instant::now();
        let caught_up = input(9, Some(9), Some(now - Duration::from_secs(60)));
        let pending = Patience {
            target: None,
            ends_pending: true,
            max_task_idle: Duration::ZERO,
        };
        assert!(!pending.may_pass_by(&caught_up, now));
        assert_eq!(pending.fetch_wait(&caught_up, now), FETCH_WAIT_MAX);
    }

    #[test]
    fn a_fetch_waits_only_as_long_as_the_task_would_wait_for_the_input() {
        let now = Instant::now();
        let caught_up = input(9, Some(9), Some(now - Duration::from_millis(30)));
        assert_eq!(
            live(Duration::ZERO).fetch_wait(&caught_up, now),
            Duration::ZERO
        );
        let idle = live(Duration::from_millis(50)).fetch_wait(&caught_up, now);
        assert_eq!(idle, Duration::from_millis(20));
        let long = live(Duration::from_secs(5)).fetch_wait(&caught_up, now);
        assert_eq!(long, FETCH_WAIT_MAX);
    }
}
