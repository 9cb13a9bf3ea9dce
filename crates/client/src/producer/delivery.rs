//! How a record learns its batch's outcome: one [`Completion`] per batch,
//! shared by the [`DeliveryFuture`] of each of its records (not a channel
//! per record), and failed if the batch is dropped unanswered.

use std::sync::Arc;

use super::config::RecordMetadata;
use crate::ClientError;

/// How a batch ended, shared by the futures of its records (one per
/// batch rather than a channel per record).
#[derive(Default)]
pub(super) struct Completion {
    pub(super) state: std::sync::Mutex<CompletionState>,
}

#[derive(Default)]
pub(super) struct CompletionState {
    /// The batch's base offset (-1 when unknown), or why it failed.
    pub(super) outcome: Option<Result<i64, ClientError>>,
    pub(super) wakers: Vec<std::task::Waker>,
}

impl Completion {
    pub(super) fn finish(&self, outcome: Result<i64, ClientError>) {
        let wakers = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.outcome = Some(outcome);
            std::mem::take(&mut state.wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }
}

/// Resolves when the record is written (or failed).
pub struct DeliveryFuture {
    pub(super) completion: Arc<Completion>,
    pub(super) partition: i32,
    /// The record's place in its batch.
    pub(super) index: i64,
}

impl std::future::Future for DeliveryFuture {
    type Output = Result<RecordMetadata, ClientError>;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let mut state = self
            .completion
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match &state.outcome {
            Some(Ok(base_offset)) => std::task::Poll::Ready(Ok(RecordMetadata {
                partition: self.partition,
                offset: if *base_offset < 0 {
                    -1
                } else {
                    base_offset + self.index
                },
            })),
            Some(Err(error)) => std::task::Poll::Ready(Err(error.duplicate())),
            None => {
                if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    state.wakers.push(cx.waker().clone());
                }
                std::task::Poll::Pending
            }
        }
    }
}

/// A batch's hold on its completion: a batch dropped unanswered (the
/// producer went away) fails its records rather than leave them waiting.
pub(super) struct CompletionHandle(pub(super) Arc<Completion>);

impl CompletionHandle {
    pub(super) fn new() -> Self {
        Self(Arc::default())
    }

    pub(super) fn finish(&self, outcome: Result<i64, ClientError>) {
        self.0.finish(outcome);
    }
}

impl Drop for CompletionHandle {
    fn drop(&mut self) {
        let unanswered = self
            .0
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .outcome
            .is_none();
        if unanswered {
            self.0.finish(Err(ClientError::Closed));
        }
    }
}
