//! A group member for tests: a strata consumer polling in its own task and
//! publishing what it holds, what it read and the rebalances it saw.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use strata::client::{Consumer, ConsumerRecord, Rebalance, TopicPartition};

pub struct Member {
    assigned: Arc<Mutex<Vec<TopicPartition>>>,
    pub events: Arc<Mutex<Vec<Rebalance>>>,
    pub consumed: Arc<Mutex<Vec<ConsumerRecord>>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Consumer>,
}

impl Member {
    /// Subscribes `consumer` to `topic` and polls it until stopped.
    pub fn spawn(mut consumer: Consumer, topic: &'static str) -> Self {
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&events);
        consumer.on_rebalance(move |event| seen.lock().unwrap().push(event.clone()));
        consumer.subscribe(&[topic]).unwrap();
        let assigned = Arc::new(Mutex::new(Vec::new()));
        let consumed = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, c, s) = (
            Arc::clone(&assigned),
            Arc::clone(&consumed),
            Arc::clone(&stop),
        );
        let task = tokio::spawn(async move {
            while !s.load(Ordering::Relaxed) {
                let records = consumer.poll(Duration::from_millis(200)).await.unwrap();
                c.lock().unwrap().extend(records);
                *a.lock().unwrap() = consumer.assignment();
            }
            consumer
        });
        Self {
            assigned,
            events,
            consumed,
            stop,
            task,
        }
    }

    pub fn assigned(&self) -> Vec<TopicPartition> {
        self.assigned.lock().unwrap().clone()
    }

    /// The partition numbers it holds.
    pub fn partitions(&self) -> Vec<i32> {
        self.assigned().iter().map(|(_, p)| *p).collect()
    }

    /// Stops polling and hands the consumer back (to close it).
    pub async fn stop(self) -> Consumer {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap()
    }
}
