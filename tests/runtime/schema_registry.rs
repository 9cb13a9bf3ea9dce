//! An app with schema-registry codecs and its registry: one that is not
//! given is refused before the app runs, and one that cannot be reached
//! stops the task with what to do, even under a dead-letter policy: no
//! record is to blame, so none is diverted, and the records are processed
//! once the registry answers. (The codecs against a real registry and
//! Confluent's serializers: tests/compat/schema_formats.rs.)

use strata::log::{LogConfig, LogManager};
use strata::record::codec::Codec;
use strata::runtime::cli::RegistryArgs;
use strata::runtime::{
    App, CheckpointArgs, Command, CommitArgs, Context, GroupArgs, LocationArgs, OnError,
    ProcessError, Record, Topic,
};

use strata::record::{BatchBuilder, Compression, NewRecord};

use crate::support::log::with_topic;

const ORDER: &str =
    r#"{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}"#;
const ORDERS: Topic<String, Order> = Topic::new("orders").codecs(Codec::Utf8, Codec::avro(ORDER));

#[derive(Debug, serde::Deserialize)]
struct Order {
    #[expect(
        dead_code,
        reason = "read, never looked at: the test is about the registry"
    )]
    id: i64,
}

fn take(_order: Record<String, Order>, _ctx: &mut Context) -> Result<(), ProcessError> {
    Ok(())
}

fn run_until_end() -> Command {
    Command::Run {
        until_end: true,
        serve: None,
        metrics: None,
        query: None,
        console: None,
        http: Default::default(),
        commit: CommitArgs::default(),
        checkpoints: CheckpointArgs::default(),
        group: GroupArgs::default(),
    }
}

/// Installs a registry for the whole test process: no other test of this
/// binary uses a registry codec.
#[test]
fn a_registry_missing_or_out_of_reach_stops_the_app_and_diverts_no_record() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // An order in the wire format, written with schema id 7, just now.
    with_topic(&data, "orders", 1, &[], |topic| {
        let mut batch = BatchBuilder::new(Compression::None);
        let order = [0, 0, 0, 0, 7, 2];
        (batch.push(NewRecord::new(Some(b"ada"), &order, strata::log::now_ms()))).unwrap();
        topic.partitions[0].append(&batch.build().unwrap()).unwrap();
    });
    let app = || {
        App::new("shop")
            .processor("take", take)
            .input(ORDERS)
            .on_error(OnError::dead_letter())
    };
    let mut location = LocationArgs {
        data_dir: Some(data.clone()),
        ..LocationArgs::default()
    };

    let refused = strata::runtime::cli::execute(&app(), &location, &run_until_end()).unwrap_err();
    let said = refused.to_string();
    assert!(
        said.contains("\"orders\"") && said.contains("--schema-registry"),
        "{said}"
    );

    // Port 1 on loopback: nothing listens there.
    location.registry = RegistryArgs {
        schema_registry: Some("http://127.0.0.1:1".into()),
        ..RegistryArgs::default()
    };
    let stopped = strata::runtime::cli::execute(&app(), &location, &run_until_end()).unwrap_err();
    let said = format!("{stopped:#}");
    assert!(
        said.contains("schema registry at http://127.0.0.1:1 not reached"),
        "{said}"
    );
    let log = LogManager::open(&data, LogConfig::default()).unwrap();
    let letters = (log.topic("shop-take-dlq")).map_or(0, |topic| {
        topic
            .partitions
            .iter()
            .map(|p| p.log_end_offset())
            .sum::<i64>()
    });
    assert_eq!(letters, 0, "no record diverted for the registry's absence");
    log.close().unwrap();
}
