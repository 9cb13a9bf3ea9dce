//! The processor runtime as users run it: example apps against the embedded log, strata's broker and librdkafka's mock cluster; crashes, failover, queries, timers, versions, replays, and the operators' pipelines.
//!
//! One test binary per area, each file a module: a change relinks a few
//! binaries, not one per file.

#[path = "../support/mod.rs"]
mod support;

mod app;
mod console;
mod crash;
mod dead_letters;
mod determinism;
mod dlq_replay;
mod failover;
mod input_order;
mod many_tasks;
mod metrics;
mod mock_cluster;
mod operators_enrich;
mod operators_enrich_backlog;
mod operators_sessionize;
mod operators_versions;
mod provenance;
mod query;
mod query_instances;
mod replay_from;
mod runs;
mod schema_registry;
mod timers;
mod versions;
