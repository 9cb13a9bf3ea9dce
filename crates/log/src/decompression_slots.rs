//! The process-wide slots under which an append inflates a compressed batch
//! to check its records: at most [`DECOMPRESSIONS_AT_ONCE_MAX`] at once, so
//! the memory that checking takes is bounded whatever the number of
//! producers. A caller without a free slot waits for one; each holds one
//! slot at a time, so waiting cannot deadlock. Thread-safe.

use std::sync::{Condvar, Mutex, PoisonError};

use super::limits::DECOMPRESSIONS_AT_ONCE_MAX;

static TAKEN: Mutex<usize> = Mutex::new(0);
static FREED: Condvar = Condvar::new();

/// A slot, given back on drop.
pub(crate) struct DecompressionSlot(());

/// Takes a slot, waiting until one is free.
pub(crate) fn take() -> DecompressionSlot {
    let taken = TAKEN.lock().unwrap_or_else(PoisonError::into_inner);
    let mut taken = FREED
        .wait_while(taken, |taken| *taken >= DECOMPRESSIONS_AT_ONCE_MAX)
        .unwrap_or_else(PoisonError::into_inner);
    *taken += 1;
    DecompressionSlot(())
}

impl Drop for DecompressionSlot {
    fn drop(&mut self) {
        let mut taken = TAKEN.lock().unwrap_or_else(PoisonError::into_inner);
        debug_assert!(*taken > 0, "a slot given back that was never taken");
        *taken -= 1;
        FREED.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn no_more_than_the_maximum_are_held_at_once() {
        static HELD: AtomicUsize = AtomicUsize::new(0);
        static MOST: AtomicUsize = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..4 * DECOMPRESSIONS_AT_ONCE_MAX {
                scope.spawn(|| {
                    for _ in 0..50 {
                        let _slot = take();
                        let now = HELD.fetch_add(1, Ordering::SeqCst) + 1;
                        MOST.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        HELD.fetch_sub(1, Ordering::SeqCst);
                    }
                });
            }
        });
        let most = MOST.load(Ordering::SeqCst);
        assert!((1..=DECOMPRESSIONS_AT_ONCE_MAX).contains(&most), "{most}");
    }
}
