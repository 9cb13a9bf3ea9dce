//! The `segment_recovery` fuzz target: the checks in `fuzz/checks/segment_recovery.rs`, which
//! `tests/hostile/fuzz_corpus.rs` also runs over every input of the checked-in
//! corpus.

#![no_main]

#[path = "../checks/segment_recovery.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
