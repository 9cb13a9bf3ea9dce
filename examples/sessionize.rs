//! User sessions over a clickstream, written with `strata-operators`:
//! `clicks` (user → page) grouped per user into sessions that end after
//! 30 minutes without a click, each written once, when it closes, to
//! `user-sessions` (user → JSON: start, end, clicks, in ms since the Unix
//! epoch). A click more than 30 minutes after its session's last one
//! starts another; one that comes in between two sessions joins them.
//!
//! A session closes when the clicks of the task's partition reach 30
//! minutes past its last click (event time: the timestamps, not the
//! clock), plus a grace of 5 minutes for clicks that arrive late. Clicks
//! later than that are counted and written to `late-clicks`.
//!
//! ```text
//! cargo run --example sessionize -- --data-dir ./strata-data run
//! cargo run --example sessionize -- --data-dir ./strata-data dump-state
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use strata::codec::Codec;
use strata::runtime::App;
use strata_operators::{Pipeline, PipelineError, Sessions, Topic, Windowed};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct UserSession {
    start: i64,
    end: i64,
    clicks: u64,
}

const CLICKS: Topic<String, String> = Topic::new("clicks");
const LATE_CLICKS: Topic<String, String> = Topic::new("late-clicks");
const USER_SESSIONS: Topic<String, UserSession> =
    Topic::new("user-sessions").codecs(Codec::Raw, Codec::Json);

const GAP: Duration = Duration::from_secs(30 * 60);
const GRACE: Duration = Duration::from_secs(5 * 60);

fn app() -> Result<App, PipelineError> {
    let pipeline = Pipeline::new("sessionize");
    pipeline
        .from(CLICKS)
        .named("sessions")
        .stored_as("sessions")
        .session(Sessions::with_gap(GAP).grace(GRACE).emit_on_close())
        .late_to(LATE_CLICKS)
        .count()
        .map(|session: Windowed<String>, clicks| {
            let value = UserSession {
                start: session.start,
                end: session.end,
                clicks,
            };
            (session.key, value)
        })
        .to(USER_SESSIONS);
    pipeline.app()
}

strata::main!(app());

#[cfg(test)]
mod tests {
    use super::*;
    use strata::runtime::EmitOptions;
    use strata::testing::TestDriver;

    const MINUTE: i64 = 60_000;

    fn click(driver: &mut TestDriver, user: &str, minute: i64) {
        let at = EmitOptions::default().timestamp(driver.now_ms() + minute * MINUTE);
        driver.pipe_with(CLICKS, user, "/page", at).unwrap();
    }

    fn sessions(driver: &mut TestDriver) -> Vec<(String, i64, i64, u64)> {
        let t0 = driver.now_ms();
        (driver.output(USER_SESSIONS).unwrap().into_iter())
            .map(|r| {
                let s = r.value.unwrap();
                let minutes = |ms: i64| (ms - t0) / MINUTE;
                (r.key.unwrap(), minutes(s.start), minutes(s.end), s.clicks)
            })
            .collect()
    }

    #[test]
    fn a_session_is_written_once_when_it_closes_and_late_clicks_go_aside() {
        let mut driver = TestDriver::new(app()).unwrap();
        for minute in [0, 10, 20] {
            click(&mut driver, "ada", minute);
        }
        click(&mut driver, "bob", 30);
        assert_eq!(
            sessions(&mut driver),
            [],
            "nothing closed before 20 + 30 + 5 minutes"
        );
        // Stream time moves on with the clicks: ada's session closes.
        click(&mut driver, "bob", 56);
        assert_eq!(sessions(&mut driver), [("ada".into(), 0, 20, 3)]);
        // Too late for ada's session, which is gone.
        click(&mut driver, "ada", 15);
        let late = driver.output(LATE_CLICKS).unwrap();
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].key.as_deref(), Some("ada"));
        driver.assert_replay_matches();
    }

    #[test]
    fn a_crash_between_clicks_neither_loses_nor_repeats_a_session() {
        let mut driver = TestDriver::new(app()).unwrap();
        click(&mut driver, "ada", 0);
        click(&mut driver, "bob", 1);
        driver.process().unwrap();
        click(&mut driver, "ada", 10);
        click(&mut driver, "bob", 12);
        // Those two are processed, then lost uncommitted.
        assert!(driver.crash_after(1).unwrap(), "the crash cuts the run");
        for (user, minute) in [("ada", 20), ("bob", 30), ("cy", 100)] {
            click(&mut driver, user, minute);
        }
        driver.restart().unwrap();
        let mut closed = sessions(&mut driver);
        closed.sort();
        assert_eq!(closed, [("ada".into(), 0, 20, 3), ("bob".into(), 1, 30, 3)]);
        driver.assert_replay_matches();
    }
}
