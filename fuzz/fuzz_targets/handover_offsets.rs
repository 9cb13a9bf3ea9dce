//! The `handover_offsets` fuzz target: the checks in `fuzz/checks/handover_offsets.rs`, which
//! `tests/hostile/fuzz_corpus.rs` also runs over every input of the checked-in
//! corpus.

#![no_main]

#[path = "../checks/handover_offsets.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
