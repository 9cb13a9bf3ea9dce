//! The pool against a broker in this process.
use super::*;
use strata_broker::{Broker, BrokerConfig};
use strata_client::ClientConfig;
use strata_log::{LogConfig, LogManager};
use strata_record::{BatchBuilder, Compression, NewRecord};

const OPTIONS: FetchOptions = FetchOptions {
    min_bytes: 1,
    max_wait: Duration::from_millis(10),
    read_committed: true,
};
const RECORDS: i64 = 10;

/// Values of `partition` from `offset` to the end, read through `pool`
/// a fetch at a time.
async fn read_from(pool: &FetchPool, partition: i32, mut offset: i64) -> Vec<String> {
    let mut values = Vec::new();
    while offset < RECORDS {
        let wait = Duration::from_millis(10);
        let (fetched, _) = pool
            .fetch("t", partition, offset, 1 << 20, wait)
            .await
            .unwrap();
        assert_eq!(fetched.offset, offset, "an answer from the offset asked");
        for batch in fetched.visible_batches() {
            for record in batch.unwrap().records(1 << 20).unwrap().iter() {
                let record = record.unwrap();
                if record.offset >= offset {
                    values.push(String::from_utf8(record.value.unwrap().to_vec()).unwrap());
                }
            }
        }
        offset = fetched.next_offset();
    }
    values
}

fn values(partition: i32, from: i64) -> Vec<String> {
    (from..RECORDS)
        .map(|n| format!("{partition}-{n}"))
        .collect()
}

#[test]
fn readers_of_a_thread_share_its_pool_and_each_reads_from_where_it_asks() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(LogManager::open(dir.path(), LogConfig::default()).unwrap());
        log.create_topic("t", 2, Default::default()).unwrap();
        for partition in 0..2 {
            for n in 0..RECORDS {
                let mut builder = BatchBuilder::new(Compression::None);
                let value = format!("{partition}-{n}");
                builder
                    .push(NewRecord::new(None, value.as_bytes(), 1))
                    .unwrap();
                let batch = builder.build().unwrap();
                log.partition("t", partition)
                    .unwrap()
                    .append(&batch)
                    .unwrap();
            }
        }
        let config = BrokerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            ..Default::default()
        };
        let broker = Broker::bind(config, Arc::clone(&log)).await.unwrap();
        let addr = broker.local_addr().to_string();
        tokio::spawn(broker.serve(std::future::pending()));
        let shared = Cluster::connect(ClientConfig::new(&addr)).await.unwrap();
        tokio::task::LocalSet::new()
            .run_until(async {
                let a = FetchPool::of_this_thread(&shared, OPTIONS).await.unwrap();
                let b = FetchPool::of_this_thread(&shared, OPTIONS).await.unwrap();
                let c = FetchPool::of_this_thread(&shared, OPTIONS).await.unwrap();
                assert!(a.asks.same_channel(&b.asks), "one pool per thread");
                // Two readers of one partition at different offsets,
                // and one of another, all at once.
                let (from_0, from_5, other) = tokio::join!(
                    read_from(&a, 0, 0),
                    read_from(&b, 0, 5),
                    read_from(&c, 1, 3)
                );
                assert_eq!(from_0, values(0, 0));
                assert_eq!(from_5, values(0, 5));
                assert_eq!(other, values(1, 3));
                // A reader that moves back (its answer fetched ahead
                // is from elsewhere) reads from where it asks.
                assert_eq!(read_from(&a, 0, 2).await, values(0, 2));
                assert_eq!(read_from(&c, 1, 9).await, values(1, 9));
            })
            .await;
    });
}
