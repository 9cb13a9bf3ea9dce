//! The `consumer_subscription` fuzz target: the checks in `fuzz/checks/consumer_subscription.rs`, which
//! `tests/hostile/fuzz_corpus.rs` also runs over every input of the checked-in
//! corpus.

#![no_main]

#[path = "../checks/consumer_subscription.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
