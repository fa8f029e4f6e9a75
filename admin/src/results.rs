//! Run results, written in batches: executors' callbacks and the answers to run requests.
//!
//! `/api/callback` answers at once and hands its items to a channel, and the dispatcher hands
//! over each run request's answer as it comes; one writer task drains the channel in batches (up
//! to [`BATCH_MAX`] items or whatever arrived within [`BATCH_WAIT`]) and applies each batch, with
//! the new states of the fires it touched, in one transaction, so 10 000 results per second
//! cost about a hundred transactions, not 10 000. An executor's acceptance of a run waits up to
//! [`ANSWER_HOLD`] for the run's result, so that a short run's answer and result are written as
//! one row update. Fires whose runs all finished are then handed to [`FireEvents`] once.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::model::{now_ms, RunState};
use crate::store::{CallbackOutcome, FireEnded, RunUpdate, Store};

/// Most results in one transaction. Under a normal load a batch holds what arrived within
/// [`BATCH_WAIT`]; this bound only matters when results queue up because the writer waits for
/// the database (on SQLite every write waits for the one connection, one turn per waiter): the
/// more each turn stores, the sooner the queue drains. At 1 000 a turn, an admin overloaded with
/// 10 000 fires a second stored fewer results than its executors returned, and the queue grew.
const BATCH_MAX: usize = 5_000;
/// How many results may wait before the writer counts as behind ([`ResultSink::behind`]): four
/// full batches, two seconds' worth at 10 000 runs a second. With one batch, MariaDB's writer at
/// 10 000 runs a second passed it for moments it then caught up from, and the claims it held
/// back made those seconds' fires 0.6–3.7 s late.
const BEHIND_AT: usize = 4 * BATCH_MAX;
/// How long a batch collects results after its first one: a burst of results becomes a few
/// transactions, and a result is stored at most this much later.
const BATCH_WAIT: Duration = Duration::from_millis(10);
/// How long an executor's acceptance of a run is kept back for the run's result, to be written
/// with it: one row update instead of two (and one of the fire's instead of two). An executor
/// that takes a batch of runs answers for all of them at once and returns their results as
/// they finish; the results of short runs came about 40 ms after their answers at 1 000 runs a
/// second and up to 600 ms after at 10 000, so with a 10 ms window almost every answer was
/// written apart (docs/benchmarks.md, thirty-second round). Meanwhile the run reads
/// `triggering`, which the lost-run watch leaves alone until the hold is over
/// (`monitor::UNSENT_GRACE_MS`).
pub const ANSWER_HOLD: Duration = Duration::from_secs(1);

/// One result reported by an executor: (run id, handle code, message).
pub type CallbackEntry = (i64, i32, String);

/// What the writer tells the rest of the admin: a fire reached a final state.
pub type FireEvents = mpsc::UnboundedSender<FireEnded>;

enum Entry {
    Callback(CallbackEntry),
    Sent(RunUpdate),
    /// Answered once everything queued before it is stored (true) or dropped (false); with
    /// `held`, the acceptances kept back for their results as well.
    Flush {
        held: bool,
        done: oneshot::Sender<bool>,
    },
}

/// The sending side, cloned into the HTTP handlers and the dispatcher.
#[derive(Clone)]
pub struct ResultSink {
    tx: mpsc::UnboundedSender<Entry>,
    /// Results queued or being written, not yet stored; acceptances kept back for their
    /// results ([`ANSWER_HOLD`]) are not counted: they are not writes the database is behind on.
    waiting: Arc<AtomicUsize>,
}

impl ResultSink {
    /// Queues executor results; never blocks. Returns false when the writer has stopped
    /// (shutdown).
    pub fn submit(&self, items: Vec<CallbackEntry>) -> bool {
        items.into_iter().all(|i| self.queue(Entry::Callback(i)))
    }

    /// Queues the answer to a run request; never blocks. An acceptance may be kept back for up
    /// to [`ANSWER_HOLD`] to be written with its run's result. Once the writer has stopped the
    /// answer is lost, and the next [`ResultSink::flush`] says so.
    pub fn sent(&self, update: RunUpdate) {
        self.queue(Entry::Sent(update));
    }

    /// Queues one result, counted as waiting until the writer has written it: counted before
    /// it is sent, so the writer never takes off more than was counted, and not at all when the
    /// writer has stopped.
    fn queue(&self, entry: Entry) -> bool {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let queued = self.tx.send(entry).is_ok();
        if !queued {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
        }
        queued
    }

    /// Whether the writer is behind: more than [`BEHIND_AT`] results wait to be stored. The
    /// scheduler claims no more fires meanwhile, since on SQLite every claim is a write the
    /// results wait behind.
    pub fn behind(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > BEHIND_AT
    }

    /// Waits until everything queued so far is stored, but for the acceptances kept back for
    /// their results. False when some of it was not (the writer gave up on a batch, or has
    /// stopped).
    pub async fn flush(&self) -> bool {
        self.flush_with(false).await
    }

    /// As [`ResultSink::flush`], the acceptances kept back included: for a caller that must
    /// see every answer stored (a dispatch round followed by failovers, whose fire keeps the
    /// first send time stored).
    pub async fn flush_all(&self) -> bool {
        self.flush_with(true).await
    }

    async fn flush_with(&self, held: bool) -> bool {
        let (done, rx) = oneshot::channel();
        self.tx.send(Entry::Flush { held, done }).is_ok() && rx.await.unwrap_or(false)
    }
}

/// Starts the writer task. It ends when every sink is dropped and the queue is drained.
pub fn start(
    store: Store,
    metrics: Arc<Metrics>,
    events: FireEvents,
) -> (ResultSink, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Entry>();
    let waiting = Arc::new(AtomicUsize::new(0));
    let queued = waiting.clone();
    let handle = tokio::spawn(async move {
        let mut batch = Batch::default();
        let mut held = Held::default();
        loop {
            // The next entry, or the time the oldest acceptance held has waited enough.
            let first = match held.next_due() {
                Some(due) => tokio::time::timeout_at(due, rx.recv()).await.ok(),
                None => Some(rx.recv().await),
            };
            let open = match first {
                Some(Some(first)) => {
                    batch.add(first);
                    let deadline = Instant::now() + BATCH_WAIT;
                    while batch.len() < BATCH_MAX {
                        match tokio::time::timeout_at(deadline, rx.recv()).await {
                            Ok(Some(item)) => batch.add(item),
                            _ => break,
                        }
                    }
                    true
                }
                Some(None) => false,
                None => true,
            };
            let taken = batch.len();
            // Once every sink is gone, nothing more can come: everything held is written.
            batch.release_all |= !open;
            held.exchange(&mut batch, Instant::now());
            let stored = batch.len() == 0 || write_batch(&store, &metrics, &events, &batch).await;
            queued.fetch_sub(taken, Ordering::Relaxed);
            for waiter in batch.flushes.drain(..) {
                let _ = waiter.send(stored);
            }
            batch.sent.clear();
            batch.callbacks.clear();
            batch.release_all = false;
            if !open {
                break;
            }
        }
    });
    (ResultSink { tx, waiting }, handle)
}

#[derive(Default)]
struct Batch {
    sent: Vec<RunUpdate>,
    callbacks: Vec<CallbackEntry>,
    flushes: Vec<oneshot::Sender<bool>>,
    /// A flush asked for the acceptances held as well.
    release_all: bool,
}

impl Batch {
    fn add(&mut self, entry: Entry) {
        match entry {
            Entry::Callback(c) => self.callbacks.push(c),
            Entry::Sent(u) => self.sent.push(u),
            Entry::Flush { held, done } => {
                self.release_all |= held;
                self.flushes.push(done);
            }
        }
    }

    fn len(&self) -> usize {
        self.sent.len() + self.callbacks.len()
    }
}

/// Acceptances kept back for their runs' results ([`ANSWER_HOLD`]), by run, and in the order
/// they came (each with the time it is written at the latest).
#[derive(Default)]
struct Held {
    by_run: HashMap<i64, RunUpdate>,
    due: VecDeque<(Instant, i64)>,
}

impl Held {
    fn next_due(&self) -> Option<Instant> {
        self.due.front().map(|(at, _)| *at)
    }

    /// Keeps back the batch's acceptances whose result is not in it, and gives it back the
    /// held ones whose result is, every held one that has waited [`ANSWER_HOLD`], and all of
    /// them when a flush asked for them.
    fn exchange(&mut self, batch: &mut Batch, now: Instant) {
        let results: HashSet<i64> = batch.callbacks.iter().map(|(id, _, _)| *id).collect();
        if !batch.release_all {
            let until = now + ANSWER_HOLD;
            let (keep, hold): (Vec<RunUpdate>, Vec<RunUpdate>) = std::mem::take(&mut batch.sent)
                .into_iter()
                .partition(|u| u.state != RunState::Running || results.contains(&u.run_id));
            batch.sent = keep;
            for u in hold {
                self.due.push_back((until, u.run_id));
                self.by_run.insert(u.run_id, u);
            }
        }
        for id in &results {
            if let Some(u) = self.by_run.remove(id) {
                batch.sent.push(u);
            }
        }
        while let Some(&(at, id)) = self.due.front() {
            if at > now && !batch.release_all {
                break;
            }
            self.due.pop_front();
            // Gone already if its result came in the meantime.
            if let Some(u) = self.by_run.remove(&id) {
                batch.sent.push(u);
            }
        }
    }
}

/// Stores one batch; false when it was dropped after retries.
async fn write_batch(store: &Store, metrics: &Metrics, events: &FireEvents, batch: &Batch) -> bool {
    metrics
        .callbacks_received
        .fetch_add(batch.callbacks.len() as u64, Ordering::Relaxed);
    // A failed write is retried a few times: the executor was already told "received", so
    // giving up would lose a result.
    let mut attempt = 0;
    let (outcomes, finals) = loop {
        match store
            .store_results(&batch.sent, &batch.callbacks, now_ms())
            .await
        {
            Ok(o) => break o,
            Err(e) if attempt < 5 => {
                attempt += 1;
                tracing::warn!(error = %e, attempt, "result batch write failed; retrying");
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            Err(e) => {
                tracing::error!(
                    error = %e,
                    callbacks = batch.callbacks.len(),
                    answers = batch.sent.len(),
                    "result batch dropped after retries"
                );
                return false;
            }
        }
    };
    for ((_, code, msg), outcome) in batch.callbacks.iter().zip(&outcomes) {
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
    for ended in finals {
        let _ = events.send(ended);
    }
    true
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::{start, BEHIND_AT};
    use crate::metrics::Metrics;
    use crate::store::{Db, Store};

    /// The writer is behind while more than `BEHIND_AT` results wait, and no longer once it has
    /// stored them.
    #[tokio::test]
    async fn the_writer_is_behind_while_results_pile_up() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}/r.db", dir.path().display()))
            .await
            .unwrap();
        let metrics = Arc::new(Metrics::default());
        let (events, _events_rx) = tokio::sync::mpsc::unbounded_channel();
        let (sink, writer) = start(store.clone(), metrics, events);
        let Db::Sqlite { write, .. } = &store.db else {
            unreachable!("a SQLite URL gives a SQLite store")
        };
        // The one writer connection, taken away from the results writer.
        let held = write.acquire().await.unwrap();
        let item = |i: usize| (1_000_000 + i as i64, 200, String::new());
        assert!(sink.submit((0..BEHIND_AT).map(item).collect()));
        assert!(!sink.behind(), "up to the bound is not behind");
        assert!(sink.submit(vec![item(BEHIND_AT)]));
        // Taken off the queue or not, nothing is stored while the database takes no writes.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(sink.behind(), "more than the bound waits");
        drop(held);
        assert!(sink.flush().await);
        assert!(!sink.behind(), "all stored");
        drop(sink);
        writer.await.unwrap();
    }
}
