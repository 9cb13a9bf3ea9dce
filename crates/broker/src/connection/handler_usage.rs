//! Whether a request's handler was slow: it held its thread past
//! [`QUICK_HANDLER_MAX`] and gave the CPU up on the way (waited on the
//! disk, or a lock), which sends its connection's handlers off the
//! executor for a while ([`super::handler_place`]). A handler the kernel
//! preempted is not slow: no place would spare it that.
//!
//! Telling a wait from a preemption takes the thread's count of voluntary
//! context switches before and after the handler. Asked of the kernel for
//! every request, that is a system call each; a worker of the runtime the
//! broker is served on notes the count as it wakes instead (see
//! [`Usage`]).

use std::cell::Cell;
use std::time::{Duration, Instant};

/// A handler that held its thread longer than this, giving the CPU up on
/// the way, is counted slow (see [`Usage`]).
pub(super) const QUICK_HANDLER_MAX: Duration = Duration::from_millis(1);

/// When a handler started, and how often its thread had given the CPU up
/// by then.
///
/// A handler is slow when it held its thread past [`QUICK_HANDLER_MAX`]
/// and gave the CPU up on the way (waiting for the disk, or a lock). A
/// thread the kernel preempted, which a loaded machine does to any
/// thread, does not make its handler slow: that is not the handler's
/// cost, and no place would spare it. (The thread's CPU time is not
/// asked: the kernel brings it up to date only at its ticks and switches,
/// so a preempted handler would be charged for what ran before it.)
///
/// Asking the kernel is a system call (`getrusage`, 375 ns here: 2% of
/// `make bench-requests`' produce request), so an inline handler on a
/// worker whose runtime notes the count as it wakes ([`worker_woke`])
/// counts from that note instead, and asks only once it has taken past
/// the limit. The count is noted again every [`HANDLERS_PER_NOTE`]
/// handlers, and after a slow one. Between notes a worker gives the CPU
/// up only where something it ran blocked (a lock, a page fault), and
/// then a handler of the same stretch that was only preempted past the
/// limit counts as slow: the count errs towards slow, never towards
/// quick.
pub(super) struct Usage {
    started: Instant,
    /// The thread's voluntary context switches; None where the kernel
    /// does not say (the time alone decides then).
    gave_up: Option<i64>,
    /// `gave_up` is the worker's noted count, not asked for this handler.
    from_note: bool,
}

/// Inline handlers counted from one note of a worker's count before it is
/// asked again: a worker busy for long stretches parks seldom, and
/// counting from a wake long past would widen the stretch in which a wait
/// makes a preempted handler slow. One system call per this many
/// handlers costs nothing that can be measured.
const HANDLERS_PER_NOTE: u32 = 64;

/// A worker's count of voluntary context switches, and the handlers
/// counted from it since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Noted {
    switches: i64,
    handlers: u32,
}

thread_local! {
    /// The worker's noted count: set as it wakes, where its runtime calls
    /// [`worker_woke`]. None elsewhere, and on a thread that has run a
    /// handler in place since (it blocked there, and may be a worker again
    /// before it next parks).
    static NOTED: Cell<Option<Noted>> = const { Cell::new(None) };
}

/// Notes the calling worker's voluntary context switches as it wakes: the
/// `on_thread_unpark` hook of the runtime the broker is served on
/// ([`crate::serving_runtime()`]). Workers park when they have nothing to
/// run, a few times per hundred requests under load, so this costs a
/// system call per park instead of one per request.
pub(crate) fn worker_woke() {
    note(voluntary_switches());
}

/// Forgets the calling thread's noted count: it has blocked running a
/// handler in place, and may go on as a worker before it next parks.
pub(super) fn forget_note() {
    NOTED.set(None);
}

/// The calling thread's noted count, if any.
#[cfg(test)]
pub(super) fn noted() -> Option<i64> {
    NOTED.get().map(|noted| noted.switches)
}

fn note(switches: Option<i64>) {
    NOTED.set(switches.map(|switches| Noted {
        switches,
        handlers: 0,
    }));
}

impl Usage {
    /// A handler that started at `started` inline, on the executor's
    /// worker running this.
    pub(super) fn inline(started: Instant) -> Self {
        let (gave_up, from_note) = match NOTED.get() {
            None => (voluntary_switches(), false),
            Some(noted) if noted.handlers < HANDLERS_PER_NOTE => {
                let handlers = noted.handlers + 1;
                NOTED.set(Some(Noted { handlers, ..noted }));
                (Some(noted.switches), true)
            }
            Some(_) => {
                let switches = voluntary_switches();
                note(switches);
                (switches, true)
            }
        };
        Self {
            started,
            gave_up,
            from_note,
        }
    }

    /// A handler starting now, off the executor.
    pub(super) fn now() -> Self {
        Self {
            started: Instant::now(),
            gave_up: voluntary_switches(),
            from_note: false,
        }
    }

    /// Whether the handler that started at `self` and ended at `ended` was
    /// slow.
    pub(super) fn slow_at(&self, ended: Instant) -> bool {
        if ended.saturating_duration_since(self.started) <= QUICK_HANDLER_MAX {
            return false;
        }
        let after = voluntary_switches();
        if self.from_note {
            // What this handler gave up is not counted again for the next.
            note(after);
        }
        match (self.gave_up, after) {
            (Some(before), Some(after)) => after > before,
            _ => true,
        }
    }
}

/// How often the calling thread has given the CPU up (its voluntary
/// context switches).
#[cfg(target_os = "linux")]
fn voluntary_switches() -> Option<i64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: `getrusage` fills the `rusage` it is given, of the calling
    // thread; it is read only when the call says it succeeded.
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) != 0 {
            return None;
        }
        usage.assume_init()
    };
    // `c_long`: 64 bits where this builds, 32 on a 32-bit Linux.
    #[allow(clippy::useless_conversion)]
    Some(i64::from(usage.ru_nvcsw))
}

/// Elsewhere the kernel is not asked: time alone decides.
#[cfg(not(target_os = "linux"))]
fn voluntary_switches() -> Option<i64> {
    None
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{HANDLERS_PER_NOTE, NOTED, QUICK_HANDLER_MAX, Usage, worker_woke};

    /// Runs `test` on a new thread: nothing noted on it yet.
    fn on_a_thread_of_its_own(test: impl FnOnce() + Send + 'static) {
        std::thread::spawn(test).join().unwrap();
    }

    /// Spins past the quick handler's limit without giving the CPU up.
    fn spin_past_the_limit() {
        let started = Instant::now();
        let mut spin = 0u64;
        while started.elapsed() < QUICK_HANDLER_MAX * 3 {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
    }

    #[test]
    fn a_handler_is_slow_when_it_waited_past_the_limit_not_when_it_only_ran() {
        let quick = Usage::now();
        assert!(!quick.slow_at(Instant::now()));
        let waited = Usage::now();
        std::thread::sleep(QUICK_HANDLER_MAX * 3);
        assert!(waited.slow_at(Instant::now()), "a sleep gives the CPU up");
        // A spin never gives the CPU up: past the limit (preempted or
        // not), it is still not slow.
        let ran = Usage::now();
        spin_past_the_limit();
        assert!(!ran.slow_at(Instant::now()));
    }

    #[test]
    fn counted_from_a_workers_wake_a_wait_makes_one_handler_slow_and_not_the_next() {
        on_a_thread_of_its_own(|| {
            worker_woke();
            let quick = Usage::inline(Instant::now());
            assert!(quick.from_note);
            assert!(!quick.slow_at(Instant::now()));
            let waited = Usage::inline(Instant::now());
            std::thread::sleep(QUICK_HANDLER_MAX * 3);
            assert!(waited.slow_at(Instant::now()), "a sleep gives the CPU up");
            // That wait is counted once: a spin after it is not slow.
            let ran = Usage::inline(Instant::now());
            assert!(ran.from_note);
            spin_past_the_limit();
            assert!(!ran.slow_at(Instant::now()));
        });
    }

    /// The trade-off the note makes: a wait between handlers, since the
    /// note, makes the next handler preempted past the limit slow; but
    /// only for [`HANDLERS_PER_NOTE`] handlers, after which the count is
    /// noted again.
    #[test]
    fn a_wait_since_the_note_counts_against_a_preempted_handler_until_the_next_note() {
        on_a_thread_of_its_own(|| {
            worker_woke();
            std::thread::sleep(Duration::from_millis(1));
            let ran = Usage::inline(Instant::now());
            spin_past_the_limit();
            assert!(ran.slow_at(Instant::now()), "the wait before it counted");

            worker_woke();
            std::thread::sleep(Duration::from_millis(1));
            for _ in 0..HANDLERS_PER_NOTE {
                Usage::inline(Instant::now());
            }
            let noted_again = Usage::inline(Instant::now());
            assert_eq!(NOTED.get().map(|noted| noted.handlers), Some(0));
            spin_past_the_limit();
            assert!(!noted_again.slow_at(Instant::now()));
        });
    }

    #[test]
    fn a_thread_that_never_woke_as_a_worker_asks_the_kernel_for_each_handler() {
        on_a_thread_of_its_own(|| {
            let waited = Usage::inline(Instant::now());
            assert!(!waited.from_note);
            assert!(waited.gave_up.is_some());
            std::thread::sleep(QUICK_HANDLER_MAX * 3);
            assert!(waited.slow_at(Instant::now()));
            let ran = Usage::inline(Instant::now());
            spin_past_the_limit();
            assert!(!ran.slow_at(Instant::now()));
            assert_eq!(NOTED.get(), None, "nothing noted off a worker");
        });
    }

    #[test]
    fn the_runtime_the_broker_is_served_on_notes_its_workers_wakes() {
        let runtime = crate::serving_runtime().unwrap();
        let noted = runtime.block_on(async {
            tokio::spawn(async {
                // Idle meanwhile, every worker parks; the one that runs
                // the rest of this has woken since.
                tokio::time::sleep(Duration::from_millis(50)).await;
                NOTED.get()
            })
            .await
            .unwrap()
        });
        assert!(noted.is_some());
    }
}
