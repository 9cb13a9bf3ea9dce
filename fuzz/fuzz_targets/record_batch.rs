//! The `record_batch` fuzz target: the checks in `fuzz/checks/record_batch.rs`, which
//! `tests/hostile/fuzz_corpus.rs` also runs over every input of the checked-in
//! corpus.

#![no_main]

#[path = "../checks/record_batch.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
