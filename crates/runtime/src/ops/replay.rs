//! `replay`: run the app (a new build) into a version of its own: state
//! apart, derived topics named `<topic>.<version>`, the live version not
//! touched. Made on its first replay, resumed after (exactly once like
//! `run`); `from` must be what its first replay was given.

use crate::error::RuntimeError;
use crate::location::Location;
use crate::task::StartAt;
use crate::topology::App;
use crate::versions::{Version, Versions, parse_start};

use super::run::{RunOptions, RunSummary, run_until, stop_signal};

/// A replay ready to run: the app as the version runs it (its settings may
/// still be tuned), where, and from where in the external inputs.
pub struct Replay {
    pub app: App,
    pub location: Location,
    pub version: Version,
    pub start: StartAt,
}

impl Replay {
    /// The version `name` of `app` at `location` (made if new), starting
    /// `from` (earliest, an offset, a time).
    pub fn prepare(
        app: &App,
        location: &Location,
        name: &str,
        from: &str,
    ) -> Result<Self, RuntimeError> {
        let start = parse_start(from)?;
        let version = Versions::load(location.state_dir())?.for_replay(name, from)?;
        let (app, location) = app.as_version(location, &version);
        Ok(Self {
            app,
            location,
            version,
            start,
        })
    }

    /// Runs the replay as [`run`] runs an app (its `start` in place of
    /// `options.start`).
    pub async fn run(self, options: RunOptions) -> Result<RunSummary, RuntimeError> {
        self.run_until(options, stop_signal()?).await
    }

    /// Runs the replay as [`run_until`] runs an app: until `stop`
    /// completes, or with `until_end` until the inputs are drained.
    pub async fn run_until(
        self,
        options: RunOptions,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<RunSummary, RuntimeError> {
        let options = RunOptions {
            start: self.start,
            ..options
        };
        run_until(&self.app, &self.location, options, stop).await
    }
}
