//! The rebuild's side of the handover with a running app (the files and
//! the live task's side are in `task::handover`): announce, answer each
//! hold by running exactly to its offsets, and read the outcome.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::RuntimeError;
use crate::layout::write_whole;
use crate::task::handover::{Handover, SWAPPED, decode_offsets};

use super::job::{Job, Shared, behind, live_offsets, run_to};
use super::{CATCH_UP_EVERY, HANDOVER_MAX, HOLDS_MAX};

/// How often the rebuild looks at the handover files.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// Meets the running app's task (see `task::handover`) until it has swapped the
/// rebuilt state in; withdraws (removes `.ready`) on any other way out.
pub(super) async fn hand_over(shared: &Shared, job: &Job) -> Result<(), RuntimeError> {
    let files = Handover::beside(&job.rebuilt);
    files.clear_all()?;
    files.announce()?;
    let result = meet(shared, job, &files).await;
    if !matches!(result, Ok(true)) {
        let _ = std::fs::remove_file(&files.ready);
    }
    result.map(|_| ())
}

/// True once the live task swapped the rebuilt state in; false when the
/// rebuild is stopping. Between holds it keeps catching up, so that the
/// next hold is short.
async fn meet(shared: &Shared, job: &Job, files: &Handover) -> Result<bool, RuntimeError> {
    let task = || format!("{}/{}", job.spec.name, job.partition);
    let mut answered: Option<String> = None;
    let (mut answers, mut deadline) = (0, Instant::now() + HANDOVER_MAX);
    let mut caught_up_at = Instant::now();
    loop {
        if !files.ready.exists() {
            let outcome = std::fs::read_to_string(&files.outcome).unwrap_or_default();
            let _ = std::fs::remove_file(&files.outcome);
            return match outcome.strip_prefix("refused: ") {
                _ if outcome == SWAPPED => Ok(true),
                Some(why) => Err(RuntimeError::Rebuild {
                    task: task(),
                    reason: format!("the running app refused the rebuilt state: {why}"),
                }),
                None => Err(RuntimeError::Rebuild {
                    task: task(),
                    reason: "the running app withdrew from the handover (did it stop?); the rebuilt state is kept: run rebuild again to resume".into(),
                }),
            };
        }
        if shared.stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        match std::fs::read_to_string(&files.hold).ok() {
            Some(token) if answered.as_ref() != Some(&token) => {
                answers += 1;
                if answers > HOLDS_MAX {
                    return Err(RuntimeError::Rebuild {
                        task: task(),
                        reason: format!(
                            "it did not keep up with the running app ({HOLDS_MAX} holds went by); the rebuilt state is kept: run rebuild again when the app is less busy"
                        ),
                    });
                }
                let offsets = decode_offsets(&token).ok_or_else(|| RuntimeError::BadFile {
                    path: files.hold.clone(),
                    reason: "not the input offsets of a hold".into(),
                })?;
                run_to(shared, job, offsets).await?;
                write_whole(&files.caught_up, &token)?;
                answered = Some(token);
                deadline = Instant::now() + HANDOVER_MAX;
            }
            // Answered; the answer may have been dropped with a hold the
            // live task gave up on, and the next hold is the same.
            Some(token)
                if std::fs::read_to_string(&files.caught_up).ok().as_ref() != Some(&token) =>
            {
                write_whole(&files.caught_up, &token)?;
            }
            Some(_) => {}
            None if caught_up_at.elapsed() >= CATCH_UP_EVERY => {
                caught_up_at = Instant::now();
                // Closer to the live offsets for the next hold; a live
                // state being swapped or opened is left for the next round.
                if let Ok(live) = live_offsets(&job.live)
                    && behind(&live_offsets(&job.rebuilt)?, &live) > 0
                    && !files.hold.exists()
                {
                    run_to(shared, job, live).await?;
                }
            }
            None => {}
        }
        if Instant::now() > deadline {
            return Err(RuntimeError::Rebuild {
                task: task(),
                reason: format!(
                    "the running app did not take the rebuilt state within {} s (stopped, or a build without rebuild support?); the rebuilt state is kept: run rebuild again to resume",
                    HANDOVER_MAX.as_secs()
                ),
            });
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}
