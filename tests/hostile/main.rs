//! Hostile input: malformed, truncated, oversized and absurd requests, hostile TLS and SASL peers, and the fuzzers' checked-in corpus, against the broker's own allocator.
//!
//! One test binary per area, each file a module: a change relinks a few
//! binaries, not one per file.

/// The broker's allocator: the request decoders reserve room for as many
/// elements as a count claims, which the system allocator would refuse.
#[global_allocator]
static ALLOCATOR: strata::broker::HugeReservingAllocator = strata::broker::HugeReservingAllocator;

#[path = "../support/mod.rs"]
mod support;

mod fuzz_corpus;
mod hostile_requests;
mod malformed_requests;
mod security;
