//! `promote`: make a version live (`run` then uses its state and derived
//! topics). The version it replaces is kept, so promoting that one back
//! rolls back. Neither may be running: the live app would go on writing
//! the version it started with.

use crate::error::RuntimeError;
use crate::layout::{LayoutError, lock_running};
use crate::location::Location;
use crate::topology::App;
use crate::versions::{LIVE, Version, Versions};

/// What `promote` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Promoted {
    /// The version was live already; nothing changed.
    AlreadyLive(Version),
    Live {
        live: Version,
        previous: Version,
        /// Its derived topics' names in the log.
        derived_topics: Vec<String>,
    },
}

/// Makes version `name` of `app` at `location` live.
pub fn promote(app: &App, location: &Location, name: &str) -> Result<Promoted, RuntimeError> {
    let mut versions = Versions::load(location.state_dir())?;
    let next = versions.get(name)?;
    let current = versions.get(LIVE)?;
    if next == current {
        return Ok(Promoted::AlreadyLive(next));
    }
    let _current = lock_running(&current.state_dir).map_err(|error| match error {
        LayoutError::Locked { path, .. } => RuntimeError::Locked {
            path,
            why: format!(
                "the live version {} is running; stop it, promote, then start it again",
                current.name
            ),
        },
        error => error.into(),
    })?;
    let _next = lock_running(&next.state_dir).map_err(|error| match error {
        LayoutError::Locked { path, .. } => RuntimeError::Locked {
            path,
            why: format!(
                "version {} is running (a replay?); stop it first",
                next.name
            ),
        },
        error => error.into(),
    })?;
    let previous = versions.promote(name)?;
    let (app, _) = app.as_version(location, &next);
    Ok(Promoted::Live {
        live: next,
        previous,
        derived_topics: app.derived_log_topics(),
    })
}
