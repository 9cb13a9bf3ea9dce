//! Where a request's handler runs. Handlers may block on disk I/O (a
//! segment roll syncs a file, a read may miss the page cache), so not on
//! the executor as if they were async; but a handoff to a blocking thread
//! and back per request cost more CPU than most requests' own work
//! (`make bench-requests`: 42% of the broker's samples were context
//! switches). So a handler runs on its connection's thread with the
//! executor's other tasks handed to another thread meanwhile, within a
//! bound, and on the blocking pool past it.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::RuntimeFlavor;

/// At most this many handlers run in place at once; past it they go to
/// the blocking pool. A handler in place has handed its worker's
/// scheduler to a thread of that pool (512 threads by default), so with
/// no bound a disk stall under many connections could take every thread
/// of the pool and stop the executor itself (timers, stall timeouts,
/// shutdown); work queued for the pool only waits.
const HANDLERS_IN_PLACE_MAX: usize = 64;

/// The broker's places for handlers in place, shared by every connection.
static IN_PLACE: Places = Places::new(HANDLERS_IN_PLACE_MAX);

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

/// Runs a request's handler, which may block on disk I/O. On a
/// multi-threaded runtime (`strata serve`'s) it runs on the connection's
/// own thread, the executor's other tasks handed to another thread
/// meanwhile (`block_in_place`): a handoff to a blocking thread and back
/// per request cost more CPU than most requests' work (`make
/// bench-requests`). The connection's reader and writer, in the same
/// task, pause while it runs. Past [`HANDLERS_IN_PLACE_MAX`], and on a
/// current-thread runtime (an app serving its log), it runs on a blocking
/// thread. A handler that panics fails its request either way, the
/// panic's message returned.
pub(super) async fn run_handler<T: Send + 'static>(
    handle: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    run_within(&IN_PLACE, handle).await
}

/// [`run_handler`] within `places`.
async fn run_within<T: Send + 'static>(
    places: &Places,
    handle: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let multi_threaded = matches!(
        tokio::runtime::Handle::current().runtime_flavor(),
        RuntimeFlavor::MultiThread
    );
    if multi_threaded && let Some(_place) = places.take() {
        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            tokio::task::block_in_place(handle)
        }));
        return handled.map_err(|panic| panic_message(&*panic));
    }
    (tokio::task::spawn_blocking(handle).await).map_err(|failed| failed.to_string())
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
    use std::thread::ThreadId;

    use super::{Places, run_within};

    /// Where a handler ran: on the calling task's thread (in place) or
    /// not (the blocking pool).
    async fn ran_in_place(places: &Places, wait: Option<Arc<Barrier>>) -> bool {
        let caller: ThreadId = std::thread::current().id();
        let handler = move || {
            if let Some(barrier) = wait {
                barrier.wait();
            }
            std::thread::current().id() == caller
        };
        run_within(places, handler)
            .await
            .expect("the handler returns")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn handlers_run_in_place_up_to_the_bound_and_on_the_blocking_pool_past_it() {
        const MAX: usize = 3;
        let places: &'static Places = Box::leak(Box::new(Places::new(MAX)));
        // MAX handlers held in place until the one past them has run.
        let barrier = Arc::new(Barrier::new(MAX + 1));
        let held: Vec<_> = (0..MAX)
            .map(|_| tokio::spawn(ran_in_place(places, Some(Arc::clone(&barrier)))))
            .collect();
        while places.taken.load(std::sync::atomic::Ordering::Acquire) < MAX {
            tokio::task::yield_now().await;
        }
        assert!(
            !ran_in_place(places, None).await,
            "past the bound, a handler runs on the blocking pool"
        );
        barrier.wait();
        for handler in held {
            assert!(handler.await.unwrap(), "within the bound, in place");
        }
        assert_eq!(places.taken.load(std::sync::atomic::Ordering::Acquire), 0);
        assert!(ran_in_place(places, None).await, "places given back");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_handler_in_place_fails_its_request_and_gives_its_place_back() {
        let places = Places::new(1);
        let failed = run_within(&places, || -> () { panic!("a bad request") }).await;
        assert_eq!(failed.unwrap_err(), "panicked: a bad request");
        assert_eq!(places.taken.load(std::sync::atomic::Ordering::Acquire), 0);
        assert!(ran_in_place(&places, None).await, "the place is free again");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn on_a_current_thread_runtime_handlers_run_on_the_blocking_pool() {
        let places = Places::new(1);
        assert!(!ran_in_place(&places, None).await);
        let failed = run_within(&places, || -> () { panic!("a bad request") }).await;
        assert!(failed.unwrap_err().contains("a bad request"));
    }
}
