//! [`TaskThreads`]: the threads an instance's tasks and standby copies run
//! on, a fixed number of them (`run --task-threads`, by default one per
//! core), each running many tasks, as Kafka Streams' stream threads do.
//!
//! A task's loop mixes awaits (fetches, shipping) with synchronous work
//! (the processor, RocksDB), so it cannot share tokio's worker threads; on
//! a blocking-pool thread of its own per task, an instance stopped starting
//! tasks silently at tokio's 512, and held a thread per idle task. Here
//! each thread drives its tasks as local futures: while one waits on the
//! network, another processes. A task given to the thread running the
//! fewest stays there for its life.
//!
//! A task that panics ends alone (its result says so); its thread goes on
//! with the others. What a task must not do is block its thread waiting
//! for another task: nothing in a task does. It may block on the commit
//! writers' pool (`state::writer`) at a commit it settles, behind other
//! tasks' writes, never on a task. Each task yields its thread once per
//! turn of its loop, so one with a backlog (embedded, it never waits on the
//! network) does not starve the others.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{mpsc, oneshot};

/// Work for a thread: makes the task's future there (it need not be
/// `Send`: it never leaves the thread).
type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// The task threads of one run; they end once this is dropped and their
/// tasks are done.
pub(crate) struct TaskThreads {
    threads: Vec<TaskThread>,
}

struct TaskThread {
    jobs: mpsc::UnboundedSender<Job>,
    /// Tasks running on it now.
    load: Arc<AtomicUsize>,
}

/// How a task ended: its output, or the text of its panic.
pub(crate) type Ended<T> = Result<T, String>;

impl TaskThreads {
    /// Starts `count` threads (at least one) driving their tasks on
    /// `handle`'s runtime (its timers and sockets).
    pub fn start(handle: &tokio::runtime::Handle, count: usize) -> std::io::Result<Self> {
        let mut threads = Vec::with_capacity(count.max(1));
        for at in 0..count.max(1) {
            let (jobs, incoming) = mpsc::unbounded_channel();
            let handle = handle.clone();
            std::thread::Builder::new()
                .name(format!("strata-tasks-{at}"))
                .spawn(move || drive(&handle, incoming))?;
            threads.push(TaskThread {
                jobs,
                load: Arc::new(AtomicUsize::new(0)),
            });
        }
        Ok(Self { threads })
    }

    /// Runs the future `make` makes on the least busy thread; what it
    /// ends with arrives through the returned receiver.
    pub fn spawn<T, F>(
        &self,
        make: impl FnOnce() -> F + Send + 'static,
    ) -> oneshot::Receiver<Ended<T>>
    where
        T: Send + 'static,
        F: Future<Output = T> + 'static,
    {
        let thread = (self.threads.iter())
            .min_by_key(|t| t.load.load(Ordering::Relaxed))
            .expect("at least one thread");
        let (reply, ended) = oneshot::channel();
        let load = Arc::clone(&thread.load);
        load.fetch_add(1, Ordering::Relaxed);
        let job: Job = Box::new(move || {
            Box::pin(async move {
                let outcome = tokio::task::spawn_local(make()).await;
                load.fetch_sub(1, Ordering::Relaxed);
                let _ = reply.send(outcome.map_err(|error| match error.try_into_panic() {
                    Ok(panic) => panic_text(panic.as_ref()),
                    Err(error) => error.to_string(),
                }));
            })
        });
        if let Err(refused) = thread.jobs.send(job) {
            // The thread is gone (it cannot end while this holds its
            // sender, unless it panicked outside a task): the task ends
            // unrun, saying so.
            drop(refused);
        }
        ended
    }
}

/// One thread's loop: takes jobs until the run drops its sender, then
/// finishes the tasks it has.
fn drive(handle: &tokio::runtime::Handle, mut incoming: mpsc::UnboundedReceiver<Job>) {
    let local = tokio::task::LocalSet::new();
    handle.block_on(local.run_until(async move {
        let mut running = tokio::task::JoinSet::new();
        while let Some(make) = incoming.recv().await {
            running.spawn_local(make());
            // Reap what ended, so the set does not grow with every task.
            while running.try_join_next().is_some() {}
        }
        while running.join_next().await.is_some() {}
    }));
}

/// A panic's message, as `std` prints it.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(text), _) => (*text).to_string(),
        (_, Some(text)) => text.clone(),
        _ => "a panic without a message".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_tasks_share_a_few_threads_and_a_panic_ends_only_its_task() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let threads = TaskThreads::start(runtime.handle(), 2).unwrap();
        // More tasks than tokio's blocking pool would start, all waiting
        // at once: they can only finish if they share the two threads.
        let (go, gate) = tokio::sync::watch::channel(false);
        let ended: Vec<_> = (0..1_000)
            .map(|n| {
                let mut gate = gate.clone();
                threads.spawn(move || async move {
                    let _ = gate.wait_for(|open| *open).await;
                    n
                })
            })
            .collect();
        let panicked = threads.spawn(|| async { panic!("task 1000 failed") });
        go.send(true).unwrap();
        runtime.block_on(async {
            for (n, ended) in ended.into_iter().enumerate() {
                assert_eq!(ended.await.unwrap(), Ok(n));
            }
            let panicked: Ended<()> = panicked.await.unwrap();
            assert_eq!(panicked, Err("task 1000 failed".to_string()));
        });
    }
}
