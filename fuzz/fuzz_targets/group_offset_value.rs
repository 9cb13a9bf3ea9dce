//! The `group_offset_value` fuzz target: the checks in `fuzz/checks/group_offset_value.rs`, which
//! `tests/hostile/fuzz_corpus.rs` also runs over every input of the checked-in
//! corpus.

#![no_main]

#[path = "../checks/group_offset_value.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
