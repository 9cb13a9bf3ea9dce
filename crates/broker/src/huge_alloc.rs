//! An allocator that keeps a hostile length prefix from aborting the broker.
//!
//! The protocol decoder reserves room for as many array elements as a
//! request *claims* before reading them, so a 14-byte request can ask for
//! hundreds of gigabytes. The system allocator refuses, and Rust aborts the
//! process on a failed allocation. This allocator serves such huge requests
//! with address space only (`mmap` with `MAP_NORESERVE`): nothing is
//! committed until written, the decoder fails on the missing bytes long
//! before writing much, and the space is returned. Everything smaller goes
//! to the system allocator unchanged.
//!
//! Install it in a binary with
//! `#[global_allocator] static A: HugeReservingAllocator = HugeReservingAllocator;`.
//! `strata` does; an app binary that serves the protocol (`run --serve`)
//! must too. A library cannot choose the process's allocator, so
//! [`Broker::bind`](super::Broker::bind) checks with
//! [`huge_claims_survivable`] and warns, naming this type, when the process
//! would abort on such a request.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations at least this large are reserved, not committed.
const HUGE_BYTES_MIN: usize = 1 << 30;

pub struct HugeReservingAllocator;

// SAFETY: every block comes either from `System` (sizes below the
// threshold) or from an anonymous private mapping (sizes at or above it,
// page-aligned, so any alignment up to a page is met); `dealloc` tells the
// two apart by the same size test, since Rust passes the allocation's layout
// back unchanged.
unsafe impl GlobalAlloc for HugeReservingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() < HUGE_BYTES_MIN || layout.align() > page_size() {
            // SAFETY: forwarded with the caller's layout.
            return unsafe { System.alloc(layout) };
        }
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                layout.size(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            ptr.cast()
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() < HUGE_BYTES_MIN || layout.align() > page_size() {
            // SAFETY: the block came from `System` with this layout.
            unsafe { System.dealloc(ptr, layout) };
            return;
        }
        // SAFETY: the block is the mapping `alloc` made for this size.
        unsafe { libc::munmap(ptr.cast(), layout.size()) };
    }
}

/// The size [`huge_claims_survivable`] asks for: beyond any real request,
/// as large as what a claimed array length can make the decoder reserve.
const PROBE_BYTES: usize = 1 << 40;

/// Whether an allocation as large as a hostile length prefix can claim is
/// answered rather than refused: true under [`HugeReservingAllocator`] (or
/// a system that overcommits without limit), false under the default
/// allocator on a system that refuses it — there such a request aborts the
/// process. The probe reserves address space only and returns it at once.
pub fn huge_claims_survivable() -> bool {
    let Ok(layout) = Layout::from_size_align(PROBE_BYTES, page_size()) else {
        return false;
    };
    // SAFETY: the layout has a non-zero size; the block, if any, is freed
    // with the same layout and never touched.
    unsafe {
        let ptr = std::alloc::alloc(layout);
        if ptr.is_null() {
            return false;
        }
        std::alloc::dealloc(ptr, layout);
    }
    true
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}
