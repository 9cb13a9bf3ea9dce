//! Asking the CPU for a cache line ahead of its use: the hint the stores'
//! tables give for the records a task is about to process.

/// Asks the CPU to bring the line holding `value` into its caches. Only a
/// hint: it never faults and costs nothing where the CPU has no such
/// instruction (it is a no-op off x86-64).
#[inline]
pub(super) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it never faults, and the address
    // is that of a live value anyway.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
