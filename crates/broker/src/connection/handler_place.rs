//! Where a request's handler runs. Handlers may block on disk I/O (a
//! segment roll syncs a file, a read may miss the page cache), so they
//! cannot always run on the executor as if they were async; but any
//! handoff to another thread per request costs more CPU than most
//! requests' own work.
//!
//! Measured with `make bench-requests` (one 100-byte record per produce
//! request, 8 connections): a handoff to the blocking pool and back made
//! 42% of the broker's samples context switches; `block_in_place`, which
//! hands the executor's other tasks to a blocking thread for the handler's
//! time, still wakes one per request (31 µs of broker CPU per request);
//! run on the executor itself, 15 µs.
//!
//! So each connection keeps a [`Pace`]:
//! 1. While its handlers are quick (each under [`QUICK_HANDLER_MAX`]),
//!    they run inline on the connection's task, on the executor.
//! 2. One that took longer (it waited on the disk, most likely) sends the
//!    connection's handlers off the executor for [`OFF_EXECUTOR_FOR`]:
//!    a cold read or a sync then stalls the executor's thread once per
//!    connection and period, not once per request. Another executor
//!    thread steals the stalled one's queued tasks meanwhile.
//! 3. Off the executor, a handler runs in place (`block_in_place`) within
//!    a bound ([`HANDLERS_IN_PLACE_MAX`]), and on the blocking pool past
//!    it.
//!
//! On a current-thread runtime (an app serving its log) handlers always
//! run on the blocking pool: inline, they would stop the app's only
//! thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::runtime::RuntimeFlavor;

/// A handler that took longer than this is counted slow.
const QUICK_HANDLER_MAX: Duration = Duration::from_millis(1);

/// How long a connection whose handler was slow runs its handlers off
/// the executor.
const OFF_EXECUTOR_FOR: Duration = Duration::from_secs(10);

/// At most this many handlers run in place at once; past it they go to
/// the blocking pool. A handler in place has handed its worker's
/// scheduler to a thread of that pool (512 threads by default), so with
/// no bound a disk stall under many connections could take every thread
/// of the pool and stop the executor itself (timers, stall timeouts,
/// shutdown); work queued for the pool only waits.
const HANDLERS_IN_PLACE_MAX: usize = 64;

/// The broker's places for handlers in place, shared by every connection.
static IN_PLACE: Places = Places::new(HANDLERS_IN_PLACE_MAX);

/// Where one connection's handlers run: inline while they are quick, off
/// the executor for a while after one was not (see the module doc).
#[derive(Debug, Default)]
pub(super) struct Pace {
    off_executor_until: Option<Instant>,
}

impl Pace {
    /// Whether a handler starting at `now` runs inline.
    fn inline_at(&self, now: Instant) -> bool {
        self.off_executor_until.is_none_or(|until| now >= until)
    }

    /// A handler that ended at `ended`, slow or not (see [`Usage`]).
    fn handled(&mut self, slow: bool, ended: Instant) {
        if slow {
            self.off_executor_until = Some(ended + OFF_EXECUTOR_FOR);
        }
    }
}

/// What the thread running a handler had used when it started.
///
/// A handler is slow when it held its thread past [`QUICK_HANDLER_MAX`]
/// by its own doing: it used the CPU that long, or it took that long and
/// gave the CPU up on the way (waiting for the disk or a lock). A thread
/// the kernel preempted, which a loaded machine does to any thread, does
/// not make its handler slow: that is not the handler's cost, and no
/// place would spare it.
struct Usage {
    started: Instant,
    /// The thread's CPU time and its voluntary context switches; None
    /// where the kernel does not say (the time alone decides then).
    thread: Option<(Duration, i64)>,
}

impl Usage {
    fn now() -> Self {
        Self {
            started: Instant::now(),
            thread: thread_usage(),
        }
    }

    /// Whether the handler that started at `self` and has just ended was
    /// slow.
    fn slow_since(&self) -> bool {
        let took = self.started.elapsed();
        if took <= QUICK_HANDLER_MAX {
            return false;
        }
        match (self.thread, thread_usage()) {
            (Some((cpu, waits)), Some((cpu_now, waits_now))) => {
                cpu_now.saturating_sub(cpu) > QUICK_HANDLER_MAX || waits_now > waits
            }
            _ => true,
        }
    }
}

/// The calling thread's CPU time (user and system) and voluntary context
/// switches.
fn thread_usage() -> Option<(Duration, i64)> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: `getrusage` fills the `rusage` it is given, of the calling
    // thread; it is read only when the call says it succeeded.
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) != 0 {
            return None;
        }
        usage.assume_init()
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    let cpu = time(usage.ru_utime) + time(usage.ru_stime);
    Some((cpu, usage.ru_nvcsw))
}

/// Where a handler ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    /// On the executor, in the connection's task.
    Inline,
    /// On the connection's thread, the executor's other tasks handed to
    /// another thread meanwhile.
    InPlace,
    BlockingPool,
}

/// Places for handlers in place: how many are taken, of at most `max`.
struct Places {
    taken: AtomicUsize,
    max: usize,
}

impl Places {
    const fn new(max: usize) -> Self {
        Self {
            taken: AtomicUsize::new(0),
            max,
        }
    }

    /// A place, if one is free, given back when the guard drops.
    fn take(&self) -> Option<InPlace<'_>> {
        let before = self.taken.fetch_add(1, Ordering::AcqRel);
        if before < self.max {
            return Some(InPlace { places: self });
        }
        self.taken.fetch_sub(1, Ordering::AcqRel);
        None
    }
}

/// A handler's place among its [`Places`], given back when dropped.
struct InPlace<'p> {
    places: &'p Places,
}

impl Drop for InPlace<'_> {
    fn drop(&mut self) {
        self.places.taken.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs a request's handler of the connection keeping `pace`, where the
/// module doc says. The connection's reader and writer, in the same task,
/// pause while it runs. A handler that panics fails its request wherever
/// it ran, the panic's message returned.
pub(super) async fn run_handler<T: Send + 'static>(
    pace: &mut Pace,
    handle: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    run_within(&IN_PLACE, pace, handle).await.0
}

/// [`run_handler`] within `places`; also says where the handler ran.
async fn run_within<T: Send + 'static>(
    places: &Places,
    pace: &mut Pace,
    handle: impl FnOnce() -> T + Send + 'static,
) -> (Result<T, String>, Ran) {
    let multi_threaded = matches!(
        tokio::runtime::Handle::current().runtime_flavor(),
        RuntimeFlavor::MultiThread
    );
    // Measured inside, so that a wait for a blocking thread is not counted.
    let timed = move || {
        let before = Usage::now();
        let handled = handle();
        (handled, before.slow_since())
    };
    let (handled, ran) = if multi_threaded && pace.inline_at(Instant::now()) {
        (caught(timed), Ran::Inline)
    } else if multi_threaded && let Some(_place) = places.take() {
        let handled = caught(|| tokio::task::block_in_place(timed));
        (handled, Ran::InPlace)
    } else {
        let handled = tokio::task::spawn_blocking(timed).await;
        (
            handled.map_err(|failed| failed.to_string()),
            Ran::BlockingPool,
        )
    };
    match handled {
        Ok((handled, slow)) => {
            pace.handled(slow, Instant::now());
            (Ok(handled), ran)
        }
        Err(failed) => (Err(failed), ran),
    }
}

/// Runs `handle` here, a panic caught as its message.
fn caught<R>(handle: impl FnOnce() -> R) -> Result<R, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(handle))
        .map_err(|panic| panic_message(&*panic))
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(message), _) => format!("panicked: {message}"),
        (_, Some(message)) => format!("panicked: {message}"),
        _ => "panicked".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};
    use std::time::{Duration, Instant};

    use super::{OFF_EXECUTOR_FOR, Pace, Places, QUICK_HANDLER_MAX, Ran, Usage, run_within};

    /// A connection's pace with its handlers sent off the executor.
    fn slowed() -> Pace {
        let mut pace = Pace::default();
        pace.handled(true, Instant::now());
        pace
    }

    /// Where a handler of the connection keeping `pace` ran, once the
    /// barrier, if any, let it return.
    async fn ran(places: &Places, pace: &mut Pace, wait: Option<Arc<Barrier>>) -> Ran {
        let handler = move || {
            if let Some(barrier) = wait {
                barrier.wait();
            }
        };
        let (handled, ran) = run_within(places, pace, handler).await;
        handled.expect("the handler returns");
        ran
    }

    #[test]
    fn a_slow_handler_sends_its_connection_off_the_executor_for_a_while() {
        let now = Instant::now();
        let mut pace = Pace::default();
        assert!(pace.inline_at(now));
        pace.handled(false, now);
        assert!(pace.inline_at(now));
        pace.handled(true, now);
        assert!(!pace.inline_at(now));
        assert!(!pace.inline_at(now + OFF_EXECUTOR_FOR - Duration::from_millis(1)));
        assert!(pace.inline_at(now + OFF_EXECUTOR_FOR));
    }

    #[test]
    fn a_handler_is_slow_when_it_waits_or_computes_past_the_limit_not_when_quick() {
        let quick = Usage::now();
        assert!(!quick.slow_since());
        let waited = Usage::now();
        std::thread::sleep(QUICK_HANDLER_MAX * 3);
        assert!(waited.slow_since(), "a sleep gives the CPU up");
        let computed = Usage::now();
        let mut spin = 0u64;
        while computed.started.elapsed() < QUICK_HANDLER_MAX * 3 {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        // Used the CPU past the limit, unless the kernel preempted the
        // spin for most of it (then it is rightly not slow): either way,
        // its verdict follows what the thread itself says it used.
        let cpu = |usage: &Usage| usage.thread.expect("Linux says").0;
        let used = cpu(&Usage::now()).saturating_sub(cpu(&computed));
        if used > QUICK_HANDLER_MAX * 2 {
            assert!(computed.slow_since());
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connections_handlers_run_inline_until_one_is_slow() {
        let places = Places::new(1);
        let mut pace = Pace::default();
        assert_eq!(ran(&places, &mut pace, None).await, Ran::Inline);
        let slow = || std::thread::sleep(QUICK_HANDLER_MAX * 3);
        let (handled, _) = run_within(&places, &mut pace, slow).await;
        handled.expect("the handler returns");
        assert_eq!(ran(&places, &mut pace, None).await, Ran::InPlace);
        assert_eq!(places.taken.load(std::sync::atomic::Ordering::Acquire), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn off_the_executor_handlers_run_in_place_up_to_the_bound_and_on_the_blocking_pool_past_it()
     {
        const MAX: usize = 3;
        let places: &'static Places = Box::leak(Box::new(Places::new(MAX)));
        // MAX handlers held in place until the one past them has run.
        let barrier = Arc::new(Barrier::new(MAX + 1));
        let held: Vec<_> = (0..MAX)
            .map(|_| {
                let barrier = Arc::clone(&barrier);
                tokio::spawn(async move { ran(places, &mut slowed(), Some(barrier)).await })
            })
            .collect();
        while places.taken.load(std::sync::atomic::Ordering::Acquire) < MAX {
            tokio::task::yield_now().await;
        }
        let past = ran(places, &mut slowed(), None).await;
        assert_eq!(past, Ran::BlockingPool, "past the bound");
        barrier.wait();
        for handler in held {
            assert_eq!(handler.await.unwrap(), Ran::InPlace, "within the bound");
        }
        assert_eq!(places.taken.load(std::sync::atomic::Ordering::Acquire), 0);
        let again = ran(places, &mut slowed(), None).await;
        assert_eq!(again, Ran::InPlace, "places given back");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_handler_fails_its_request_inline_or_in_place_and_gives_its_place_back() {
        let places = Places::new(1);
        for mut pace in [Pace::default(), slowed()] {
            let (failed, _) =
                run_within(&places, &mut pace, || -> () { panic!("a bad request") }).await;
            assert_eq!(failed.unwrap_err(), "panicked: a bad request");
            assert_eq!(places.taken.load(std::sync::atomic::Ordering::Acquire), 0);
        }
        assert_eq!(
            ran(&places, &mut slowed(), None).await,
            Ran::InPlace,
            "the place is free again"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn on_a_current_thread_runtime_handlers_run_on_the_blocking_pool() {
        let places = Places::new(1);
        assert_eq!(
            ran(&places, &mut Pace::default(), None).await,
            Ran::BlockingPool
        );
        let (failed, _) = run_within(&places, &mut Pace::default(), || -> () {
            panic!("a bad request")
        })
        .await;
        assert!(failed.unwrap_err().contains("a bad request"));
    }
}
