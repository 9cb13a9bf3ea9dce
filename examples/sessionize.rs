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
