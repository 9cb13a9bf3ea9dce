//! The cleaner's I/O budget: after each batch of reads and writes it sleeps
//! as long as it takes to stay under the configured bytes per second, so a
//! clean takes no more of the disk than the operator allows producers and
//! consumers to lose to it.

use std::time::{Duration, Instant};

pub struct Throttle {
    bytes_per_second: u64,
    started: Instant,
    bytes: u64,
}

impl Throttle {
    pub fn new(bytes_per_second: u64) -> Self {
        Self {
            bytes_per_second: bytes_per_second.max(1),
            started: Instant::now(),
            bytes: 0,
        }
    }

    /// Counts `bytes` of I/O and sleeps while the clean is ahead of its
    /// budget.
    pub fn spend(&mut self, bytes: u64) {
        self.bytes += bytes;
        let due = Duration::from_secs_f64(self.bytes as f64 / self.bytes_per_second as f64);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
    }
}
