//! Firing a task's due timers (see `runtime::timer` for what a timer is and
//! `state::timers` for how due ones are found).
//!
//! A sweep of one domain fires its due timers in order (time, then key),
//! each removed in the run as it fires and handed to the processor's
//! `on_timer`. It goes in passes: a pass takes the first
//! [`TIMERS_FIRED_PER_PASS_MAX`] due timers as the state has them and fires
//! those the run has not cancelled since; timers the callbacks schedule for
//! a time already reached fire in the next pass. Once a sweep has fired
//! that many timers since its last commit it commits (a backlog fires over
//! several commits rather than stall one), then goes on.
//!
//! When: an event-time sweep right after each record that moved the stream
//! time (before the next record: replays fire the same timers at the same
//! places), and in the task's loop for what a restart left due; a
//! processing-time sweep after each batch and in the task's loop, whose
//! idle wait ends by the earliest processing-time timer.

use crate::error::RuntimeError;
use crate::position::Position;
use crate::timer::{TIMERS_FIRED_PER_PASS_MAX, TimeDomain, Timer};

use super::Task;
use super::process::context;

impl Task {
    /// Fires the due timers of both domains.
    pub(super) async fn fire_due_timers(&mut self) -> Result<(), RuntimeError> {
        if !self.state.has_timers() {
            return Ok(());
        }
        self.fire_timers(TimeDomain::EventTime).await?;
        self.fire_timers(TimeDomain::ProcessingTime).await
    }

    /// Fires the due timers of `domain`, committing every
    /// [`TIMERS_FIRED_PER_PASS_MAX`] of them.
    pub(super) async fn fire_timers(&mut self, domain: TimeDomain) -> Result<(), RuntimeError> {
        let mut fired = 0usize;
        loop {
            let upto = match domain {
                TimeDomain::EventTime => match self.state.stream_time() {
                    Some(time) => time,
                    None => return Ok(()),
                },
                TimeDomain::ProcessingTime => self.setup.clock.now_ms(),
            };
            if !self.state.timer_due(domain, upto) {
                return Ok(());
            }
            if fired >= TIMERS_FIRED_PER_PASS_MAX {
                self.commit().await?;
                fired = 0;
            }
            // The scan reads the database with no commit writing it: the
            // commit in flight is settled (and shipped) first.
            if self.state.commit_in_flight() {
                self.settle().await?;
            }
            let due = (self.state).due_timers(domain, upto, TIMERS_FIRED_PER_PASS_MAX - fired)?;
            for timer in due {
                if !self.state.take_timer(&timer) {
                    continue;
                }
                self.fire(timer)?;
                fired += 1;
            }
        }
    }

    /// Calls the processor's `on_timer` with `timer` (already removed).
    fn fire(&mut self, timer: Timer) -> Result<(), RuntimeError> {
        let topic = &self.inputs[0].topic;
        let mut position = Position::before_records(topic, self.setup.partition, timer.time_ms);
        self.pending.moved = true;
        let described = timer.to_string();
        let mut ctx = context(
            (&mut self.state, &self.metrics, &mut self.write_sampler),
            &self.setup,
            &mut position,
        );
        if let Err(error) = self.processor.on_timer(timer, &mut ctx) {
            self.state.discard();
            return Err(RuntimeError::Timer {
                processor: self.setup.spec.name.clone(),
                task: self.setup.name(),
                timer: described,
                error,
            });
        }
        (self.metrics.timers_fired).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}
