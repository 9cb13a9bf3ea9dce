//! The `request_body` fuzz target: the checks in `fuzz/checks/request_body.rs`, which
//! `tests/hostile/fuzz_corpus.rs` also runs over every input of the checked-in
//! corpus.

#![no_main]

#[path = "../checks/request_body.rs"]
mod checks;

/// The broker's allocator: the protocol decoder reserves room for as many
/// elements as a count claims, which the system allocator would refuse.
#[global_allocator]
static ALLOCATOR: strata::broker::HugeReservingAllocator = strata::broker::HugeReservingAllocator;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
