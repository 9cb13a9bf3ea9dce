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

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}
