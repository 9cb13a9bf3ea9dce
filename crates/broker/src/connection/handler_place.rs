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
static HANDLERS_IN_PLACE: AtomicUsize = AtomicUsize::new(0);

/// A handler's place among [`HANDLERS_IN_PLACE_MAX`], given back when
/// dropped.
struct InPlace;

impl InPlace {
    fn take() -> Option<Self> {
        let before = HANDLERS_IN_PLACE.fetch_add(1, Ordering::AcqRel);
        if before < HANDLERS_IN_PLACE_MAX {
            return Some(Self);
        }
        HANDLERS_IN_PLACE.fetch_sub(1, Ordering::AcqRel);
        None
    }
}

impl Drop for InPlace {
    fn drop(&mut self) {
        HANDLERS_IN_PLACE.fetch_sub(1, Ordering::AcqRel);
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
    let multi_threaded = matches!(
        tokio::runtime::Handle::current().runtime_flavor(),
        RuntimeFlavor::MultiThread
    );
    if multi_threaded && let Some(_place) = InPlace::take() {
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
