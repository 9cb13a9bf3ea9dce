//! The test driver's side of dead letters: what a processor's dead-letter
//! topic holds, and `dlq replay` after a fix, run as the command runs it
//! (crashes included).

use crate::cli::IntoApp;
use crate::ops::{
    DeadLetters, LetterFilter, LetterReplay, LetterReplaySummary, dead_letters,
    replay_dead_letters_until,
};

use super::{TestDriver, TestError};

impl TestDriver {
    /// Puts `app` (the next build: a fix) in place of the app under test:
    /// the same name, its state and topics taken up as they are. What runs
    /// from here on is it; the driver's commit setting stays.
    pub fn deploy(&mut self, app: impl IntoApp) -> Result<(), TestError> {
        let mut app = app.into_app().map_err(TestError::App)?;
        app.check().map_err(TestError::App)?;
        if app.name != self.app.name {
            return Err(TestError::App(format!(
                "app {:?} is deployed in place of {:?}: a build of the same app keeps its name",
                app.name, self.app.name
            )));
        }
        app.config.commit = self.app.config.commit;
        app.config.task_threads = 1;
        self.inputs = app.external_inputs();
        self.app = app;
        self.up_to_date = false;
        Ok(())
    }

    /// Each processor's dead letters (or `processor`'s), with what replays
    /// did with them, after running the app.
    pub fn dead_letters(&mut self, processor: Option<&str>) -> Result<Vec<DeadLetters>, TestError> {
        self.settle()?;
        let read = dead_letters(&self.app, &self.location, processor);
        Ok(self.runtime.block_on(read)?)
    }

    /// Replays `processor`'s dead letters that `filter` admits through the
    /// app as it is now (see [`deploy`](Self::deploy)), as `<app> dlq
    /// replay` does, once what was piped has been processed.
    pub fn replay_dead_letters(
        &mut self,
        processor: &str,
        filter: LetterFilter,
    ) -> Result<LetterReplaySummary, TestError> {
        self.replay(processor, filter, None)
    }

    /// [`replay_dead_letters`](Self::replay_dead_letters), ended as a
    /// SIGKILL would right after its tasks have replayed `letters` letters
    /// between them: what they had not committed is lost. The next call
    /// recovers as a restarted process would. True if the crash cut the
    /// replay short (false: it replayed fewer, and ended).
    pub fn crash_replay_after(
        &mut self,
        processor: &str,
        filter: LetterFilter,
        letters: u64,
    ) -> Result<bool, TestError> {
        match self.replay(processor, filter, Some(letters)) {
            Ok(_) => Ok(false),
            Err(TestError::Runtime(crate::RuntimeError::Crashed)) => Ok(true),
            Err(error) => Err(error),
        }
    }

    fn replay(
        &mut self,
        processor: &str,
        filter: LetterFilter,
        crash_after: Option<u64>,
    ) -> Result<LetterReplaySummary, TestError> {
        if self.down {
            return Err(TestError::Down);
        }
        self.settle()?;
        let replay = LetterReplay {
            processor: processor.to_string(),
            filter,
            clock: self.clock.clone().into(),
            crash_after,
        };
        // The app then runs before the next read: what the replay emitted
        // flows on through the processors downstream.
        self.up_to_date = false;
        let job =
            replay_dead_letters_until(&self.app, &self.location, &replay, std::future::pending());
        Ok(self.runtime.block_on(job)?)
    }
}
