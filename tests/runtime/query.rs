//! Queries over an app's committed state, in process on an embedded log:
//! a key, a prefix, a range, a window store's windows and an index
//! store's keys by field, merged over the tasks of two partitions; the HTTP endpoint of a running app answering
//! the same while it commits more, a replayed version's state by
//! `?version=`, and the errors a client gets for what cannot be answered.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use strata::codec::Codec;
use strata::runtime::cli::{CheckpointArgs, Command, CommitArgs, GroupArgs, LocationArgs};
use strata::runtime::ops::query::QUERY_ENTRIES_DEFAULT;
use strata::runtime::ops::query::http::QueryEndpoint;
use strata::runtime::ops::{Lookup, StoreQuery};
use strata::runtime::window_key::window_key;
use strata::runtime::{
    App, Context, Location, ProcessError, Record, RunOptions, RuntimeError, Store,
};

/// Word → how often it was seen (raw keys: prefixes are byte prefixes).
const TALLY: Store<String, u64> = Store::new("tally");
/// Word length → the last word of that length (postcard keys).
const BY_LENGTH: Store<u64, String> = Store::new("by-length").codecs(Codec::Postcard, Codec::Json);
/// Per word and minute of event time, how often it was seen.
const PER_MINUTE: Store<Vec<u8>, u64> = Store::new("per-minute");

const MINUTE_MS: i64 = 60_000;

/// The first minute of the input: recent, or retention would delete it.
fn base() -> i64 {
    let now = strata::log::now_ms();
    now - now.rem_euclid(MINUTE_MS) - 10 * MINUTE_MS
}

/// Counts each word `weight` times.
fn tally(
    weight: u64,
) -> impl Fn(Record<Vec<u8>, String>, &mut Context) -> Result<(), ProcessError> + Clone {
    move |word, ctx| {
        let n = ctx.get(TALLY, &word.value)?.unwrap_or(0) + weight;
        ctx.put(TALLY, &word.value, &n)?;
        ctx.put(BY_LENGTH, &(word.value.len() as u64), &word.value)?;
        let mut key = Vec::new();
        let start = word.timestamp - word.timestamp.rem_euclid(MINUTE_MS);
        window_key(word.value.as_bytes(), start, &mut key);
        let n = ctx.get(PER_MINUTE, &key)?.unwrap_or(0) + 1;
        ctx.put(PER_MINUTE, &key, &n)
    }
}

fn app(weight: u64) -> App {
    App::new("words")
        .processor("tally", tally(weight))
        .input("words")
        .store(TALLY)
        .store(BY_LENGTH)
        .store(PER_MINUTE)
        .window_keys::<String>(Codec::Raw)
}

/// Appends `words` to `words` (2 partitions), each keyed by itself and
/// so in its key's partition (a word's count is kept by one task), stamped
/// `at`.
fn append(data: &Path, at: i64, words: &[&str]) {
    let records: Vec<_> = words.iter().map(|w| (*w, Some(*w), at)).collect();
    support::append_keyed(data, "words", 2, &records);
}

/// Appends the input; returns its first minute.
fn fill(data: &Path) -> i64 {
    let base = base();
    append(data, base, &["apple", "banana", "apple"]);
    append(data, base + MINUTE_MS + 5, &["apricot", "apple", "cherry"]);
    append(data, base + 2 * MINUTE_MS, &["banana"]);
    base
}

fn until_end() -> RunOptions {
    RunOptions {
        until_end: true,
        ..RunOptions::default()
    }
}

fn ask(
    app: &App,
    location: &Location,
    store: &str,
    lookup: Lookup,
) -> Result<Vec<(Value, Value)>, RuntimeError> {
    let query = StoreQuery {
        store: store.to_string(),
        lookup,
        limit: QUERY_ENTRIES_DEFAULT,
    };
    let answer = strata::runtime::ops::query(app, location, &query, None)?;
    Ok(answer
        .entries
        .into_iter()
        .map(|e| (e.key, e.value))
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_prefixes_ranges_and_windows_are_answered_over_every_task() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let base = fill(&data);
    let app = app(1);
    let location = Location::embedded(&data, app.name());
    strata::runtime::ops::run(&app, &location, until_end())
        .await
        .unwrap();

    let key = |k: &str| ask(&app, &location, "tally", Lookup::Key(k.into())).unwrap();
    assert_eq!(key("apple"), [(json!("apple"), json!(3))]);
    assert_eq!(key("durian"), []);
    let prefix = ask(&app, &location, "tally", Lookup::Prefix("ap".into())).unwrap();
    assert_eq!(
        prefix,
        [(json!("apple"), json!(3)), (json!("apricot"), json!(1))]
    );
    let range = Lookup::Range {
        from: Some("apricot".into()),
        to: Some("banana".into()),
    };
    let range = ask(&app, &location, "tally", range).unwrap();
    assert_eq!(
        range,
        [(json!("apricot"), json!(1)), (json!("banana"), json!(2))],
        "both ends in"
    );
    let all = ask(&app, &location, "tally", Lookup::All).unwrap();
    assert_eq!(all.len(), 4);

    // A limit keeps the first entries in key order, over every task.
    let limited = StoreQuery {
        store: "tally".into(),
        lookup: Lookup::All,
        limit: 2,
    };
    let answer = strata::runtime::ops::query(&app, &location, &limited, None).unwrap();
    assert!(answer.truncated);
    assert_eq!(answer.tasks, ["tally/0", "tally/1"]);
    let keys: Vec<_> = answer.entries.iter().map(|e| e.key.clone()).collect();
    assert_eq!(keys, [json!("apple"), json!("apricot")]);

    // Keys of other types are read as JSON.
    let five = ask(&app, &location, "by-length", Lookup::Key("7".into())).unwrap();
    assert_eq!(five, [(json!(7), json!("apricot"))]);
    let error = ask(&app, &location, "by-length", Lookup::Prefix("1".into())).unwrap_err();
    assert!(error.to_string().contains("raw or utf8 keys"), "{error}");
    let error = ask(&app, &location, "by-length", Lookup::Key("seven".into())).unwrap_err();
    assert!(
        error.to_string().contains("not a key of type u64"),
        "{error}"
    );

    // A window store answers one key's windows in a range of starts.
    let window = |from, to| Lookup::Window {
        key: "apple".into(),
        from,
        to,
    };
    let windows = ask(&app, &location, "per-minute", window(None, None)).unwrap();
    assert_eq!(
        windows,
        [
            (json!({"key": "apple", "start": base}), json!(2)),
            (json!({"key": "apple", "start": base + MINUTE_MS}), json!(1)),
        ]
    );
    let later = window(Some(base + 1), Some(base + MINUTE_MS));
    let later = ask(&app, &location, "per-minute", later).unwrap();
    assert_eq!(later.len(), 1, "{later:?}");
    let none = window(Some(base + MINUTE_MS + 1), None);
    let none = ask(&app, &location, "per-minute", none).unwrap();
    assert_eq!(none, []);
    let error = ask(&app, &location, "tally", window(None, None)).unwrap_err();
    assert!(error.to_string().contains("not a window store"), "{error}");
    let error = ask(&app, &location, "nope", Lookup::All).unwrap_err();
    assert!(
        matches!(error, RuntimeError::UnknownStore { .. }),
        "{error}"
    );
}

/// `GET target` on `addr`: the status and the JSON body.
fn get(addr: SocketAddr, target: &str) -> (u16, Value) {
    support::http::get_json(&addr.to_string(), target)
}

fn replay_v2(data: &Path) {
    let location = LocationArgs {
        data_dir: Some(data.to_path_buf()),
        ..LocationArgs::default()
    };
    let replay = Command::Replay {
        metrics: None,
        console: None,
        version: "v2".into(),
        from: "earliest".into(),
        until_end: true,
        http: Default::default(),
        commit: CommitArgs::default(),
        checkpoints: CheckpointArgs::default(),
        group: GroupArgs::default(),
    };
    strata::runtime::cli::execute(&app(10), &location, &replay).unwrap();
}

#[test]
fn a_running_app_answers_over_http_as_it_commits() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let base = fill(&data);
    replay_v2(&data);
    let app = app(1);
    let location = Location::embedded(&data, app.name());
    let options = RunOptions {
        serve: Some("127.0.0.1:0".parse().unwrap()),
        query: Some(QueryEndpoint {
            addr: "127.0.0.1:0".parse().unwrap(),
            root: location.clone(),
            version: "base".into(),
        }),
        ..RunOptions::default()
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = {
        let (app, location) = (app.clone(), location.clone());
        runtime.spawn(async move {
            let stop = async {
                let _ = stopped.await;
            };
            strata::runtime::ops::run_until(&app, &location, options, stop).await
        })
    };
    let address_file = location.state_dir().join("query-address");
    support::wait_until("the query address", Duration::from_secs(60), || {
        address_file.exists()
    });
    let addr: SocketAddr = std::fs::read_to_string(&address_file)
        .unwrap()
        .parse()
        .unwrap();
    support::wait_until("every word counted", Duration::from_secs(60), || {
        get(addr, "/stores/tally/keys/banana").1["entries"][0]["value"] == json!(2)
    });

    let (status, stores) = get(addr, "/stores");
    assert_eq!(status, 200);
    assert_eq!(stores["per-minute"]["window_store"], json!(true));
    assert_eq!(stores["tally"]["processor"], json!("tally"));
    let (status, apple) = get(addr, "/stores/tally?key=apple");
    assert_eq!(
        (status, &apple["entries"]),
        (200, &json!([{"key": "apple", "value": 3}]))
    );
    let (status, prefix) = get(addr, "/stores/tally?prefix=ap&limit=1");
    assert_eq!(status, 200);
    assert_eq!(prefix["entries"], json!([{"key": "apple", "value": 3}]));
    assert_eq!(prefix["truncated"], json!(true));
    let banana = format!(
        "/stores/per-minute?window=banana&from={base}&to={}",
        base + 2 * MINUTE_MS
    );
    let (_, windows) = get(addr, &banana);
    assert_eq!(windows["entries"].as_array().unwrap().len(), 2, "{windows}");
    let (status, v2) = get(addr, "/stores/tally/keys/apple?version=v2");
    assert_eq!(
        (status, &v2["entries"][0]["value"]),
        (200, &json!(30)),
        "{v2}"
    );

    // What is committed later is answered later.
    let kafka = location.serving_addr().expect("the app serves the log");
    runtime.block_on(produce(kafka, "durian"));
    support::wait_until("the new word committed", Duration::from_secs(60), || {
        get(addr, "/stores/tally/keys/durian").0 == 200
    });

    let (status, missing) = get(addr, "/stores/tally/keys/fig");
    assert_eq!(status, 404);
    assert!(
        missing["error"].as_str().unwrap().contains("no such key"),
        "{missing}"
    );
    assert_eq!(get(addr, "/stores/nope").0, 404);
    assert_eq!(get(addr, "/stores/tally?version=v9").0, 404);
    assert_eq!(get(addr, "/stores/by-length?prefix=1").0, 400);
    assert_eq!(get(addr, "/stores/per-minute?window=a&from=soon").0, 400);
    assert_eq!(get(addr, "/elsewhere").0, 404);
    // A key holding a slash is one path segment, encoded.
    let (status, slashed) = get(addr, "/stores/tally/keys/a%2Fb");
    assert_eq!(status, 404);
    assert!(
        slashed["error"].as_str().unwrap().contains("no such key"),
        "{slashed}"
    );
    let (status, body) = support::http::request(&addr.to_string(), "POST", "/stores");
    assert_eq!(status, 405);
    assert!(body.contains("only GET is served"), "{body}");

    stop.send(()).unwrap();
    runtime.block_on(running).unwrap().unwrap();
    assert!(!address_file.exists(), "the address file goes with the app");
}

/// Sends `word` to `words` through the Kafka port the app serves.
pub(crate) async fn produce(addr: SocketAddr, word: &str) {
    use strata::client::{ClientConfig, Cluster, Producer, ProducerConfig, ProducerRecord};
    let cluster = Cluster::connect(ClientConfig::new(&addr.to_string()))
        .await
        .unwrap();
    let producer = Producer::new(cluster, ProducerConfig::default())
        .await
        .unwrap();
    let delivered = producer
        .send(ProducerRecord::new(
            "words",
            Some(word.as_bytes()),
            word.as_bytes(),
        ))
        .await
        .unwrap();
    producer.flush().await;
    delivered.await.unwrap();
    producer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_store_answers_the_keys_of_a_field_and_of_a_field_prefix() {
    use strata_operators::{Pipeline, Topic};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let now = strata::log::now_ms();
    let users = [
        ("ada", Some("London"), now),
        ("alan", Some("Londonderry"), now),
        ("grace", Some("New York"), now),
        ("linus", Some("London"), now),
    ];
    support::append_keyed(&data, "users", 2, &users);
    // Linus moves away: his London entry goes.
    support::append_keyed(&data, "users", 2, &[("linus", Some("Helsinki"), now)]);
    const USERS: Topic<String, String> = Topic::new("users");
    let pipeline = Pipeline::new("cities");
    pipeline
        .table(USERS)
        .index_by("by-city", |_user, city: &String| Some(city.clone()));
    let app = pipeline.app().unwrap();
    let location = Location::embedded(&data, app.name());
    strata::runtime::ops::run(&app, &location, until_end())
        .await
        .unwrap();

    let keys = |lookup| {
        let entries = ask(&app, &location, "by-city", lookup).unwrap();
        entries.into_iter().map(|(key, _)| key).collect::<Vec<_>>()
    };
    assert_eq!(
        keys(Lookup::Field("London".into())),
        [json!({"field": "London", "key": "ada"})]
    );
    assert_eq!(
        keys(Lookup::Prefix("Lon".into())),
        [
            json!({"field": "London", "key": "ada"}),
            json!({"field": "Londonderry", "key": "alan"}),
        ]
    );
    let error = ask(&app, &location, "tally-none", Lookup::Field("x".into())).unwrap_err();
    assert!(
        matches!(error, RuntimeError::UnknownStore { .. }),
        "{error}"
    );
}

#[test]
fn an_endpoint_beyond_loopback_is_refused_before_the_app_runs_without_tls_and_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let location = LocationArgs {
        data_dir: Some(data.clone()),
        ..LocationArgs::default()
    };
    let anywhere: SocketAddr = "0.0.0.0:0".parse().unwrap();
    for (metrics, query, console, what) in [
        (Some(anywhere), None, None, "metrics endpoint"),
        (None, Some(anywhere), None, "query endpoint"),
        (None, None, Some(anywhere), "console"),
    ] {
        let run = Command::Run {
            until_end: true,
            serve: None,
            metrics,
            query,
            console,
            http: Default::default(),
            commit: CommitArgs::default(),
            checkpoints: CheckpointArgs::default(),
            group: GroupArgs::default(),
        };
        let refused = strata::runtime::cli::execute(&app(1), &location, &run).unwrap_err();
        let said = refused.to_string();
        assert!(
            said.contains(what) && said.contains("--allow-unauthenticated-remote"),
            "{said}"
        );
        assert!(!data.join("apps").exists(), "nothing ran");
    }
}
