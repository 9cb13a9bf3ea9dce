//! The operators' pipelines end to end, on a real embedded log: each file a
//! module of one test binary, so a change relinks one binary, not nine.

#[path = "../support/mod.rs"]
mod support;

mod aggregate;
mod dedup;
mod index;
mod join;
mod session;
mod stateless;
mod stream_join;
mod table_join;
mod window;
