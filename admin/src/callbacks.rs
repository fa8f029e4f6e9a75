//! Executor results, written in batches.
//!
//! `/api/callback` answers at once and hands its items to a channel; one writer task drains it in
//! batches (up to [`BATCH_MAX`] items or whatever arrived within [`BATCH_WAIT`]) and applies each
//! batch, with the new states of the fires it touched, in one transaction, so 10 000 results per
//! second cost about a hundred transactions, not 10 000. Fires whose runs all finished are then
//! handed to [`FireEvents`] once.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::metrics::Metrics;
use crate::model::{now_ms, RunState};
use crate::store::{CallbackOutcome, FireEnded, Store};

/// Most results in one transaction. Under a normal load a batch holds what arrived within
/// [`BATCH_WAIT`]; this bound only matters when results queue up because the writer waits for
/// the database (on SQLite every write waits for the one connection, one turn per waiter): the
/// more each turn stores, the sooner the queue drains. At 1 000 a turn, an admin overloaded with
/// 10 000 fires a second stored fewer results than its executors returned, and the queue grew.
const BATCH_MAX: usize = 5_000;
/// How long a batch collects results after its first one: a burst of results becomes a few
/// transactions, and a result is stored at most this much later.
const BATCH_WAIT: Duration = Duration::from_millis(10);

/// One result reported by an executor: (run id, handle code, message).
pub type CallbackEntry = (i64, i32, String);

/// What the writer tells the rest of the admin: a fire reached a final state.
pub type FireEvents = mpsc::UnboundedSender<FireEnded>;

/// The sending side, cloned into the HTTP handlers.
#[derive(Clone)]
pub struct CallbackSink {
    tx: mpsc::UnboundedSender<CallbackEntry>,
}

impl CallbackSink {
    /// Queues results; never blocks. Returns false when the writer has stopped (shutdown).
    pub fn submit(&self, items: Vec<CallbackEntry>) -> bool {
        items.into_iter().all(|i| self.tx.send(i).is_ok())
    }
}

/// Starts the writer task. It ends when every sink is dropped and the queue is drained.
pub fn start(
    store: Store,
    metrics: Arc<Metrics>,
    events: FireEvents,
) -> (CallbackSink, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<CallbackEntry>();
    let handle = tokio::spawn(async move {
        let mut batch = Vec::with_capacity(BATCH_MAX);
        loop {
            let Some(first) = rx.recv().await else { break };
            batch.push(first);
            let deadline = tokio::time::Instant::now() + BATCH_WAIT;
            while batch.len() < BATCH_MAX {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(item)) => batch.push(item),
                    _ => break,
                }
            }
            write_batch(&store, &metrics, &events, &mut batch).await;
        }
    });
    (CallbackSink { tx }, handle)
}

async fn write_batch(
    store: &Store,
    metrics: &Metrics,
    events: &FireEvents,
    batch: &mut Vec<CallbackEntry>,
) {
    metrics
        .callbacks_received
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
    // A failed write is retried a few times: the executor was already told "received", so
    // giving up would lose a result.
    let mut attempt = 0;
    let (outcomes, finals) = loop {
        match store.apply_callbacks_and_refresh(batch, now_ms()).await {
            Ok(o) => break o,
            Err(e) if attempt < 5 => {
                attempt += 1;
                tracing::warn!(error = %e, attempt, "callback batch write failed; retrying");
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            Err(e) => {
                tracing::error!(error = %e, items = batch.len(), "callback batch dropped after retries");
                batch.clear();
                return;
            }
        }
    };
    for ((_, code, msg), outcome) in batch.iter().zip(&outcomes) {
        match outcome {
            CallbackOutcome::Applied { .. } => {
                if let Some(state) = RunState::from_handle_code(*code, msg) {
                    metrics.count_result(state);
                }
            }
            CallbackOutcome::Duplicate => {
                metrics.callbacks_duplicate.fetch_add(1, Ordering::Relaxed);
            }
            CallbackOutcome::Unknown => {
                metrics.callbacks_unknown.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    batch.clear();
    for ended in finals {
        let _ = events.send(ended);
    }
}
