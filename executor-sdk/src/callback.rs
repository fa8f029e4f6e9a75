//! The callback pipeline: run results travel from the job workers to the admin's `/api/callback`.
//!
//! Workers call [`CallbackSender::send`], which never blocks and never drops: items go into an
//! unbounded queue, or straight to the spool once the pipeline has shut down. One consumer batches
//! the queue (up to `batch_max` items, lingering a few milliseconds) and posts each batch in the
//! shape of the configured admin generation. A batch that cannot be delivered after a few attempts
//! is written to the spool folder as a JSON file (atomically: temporary file, fsync, rename), and a
//! retry task re-sends spooled files every `retry_interval` and deletes each one the admin accepts.
//! The retry task also runs at start, so files left by a previous process are replayed.
//!
//! While the admin is known to be down the consumer probes it at most once a second and spools the
//! other batches at once, so a dead admin costs neither memory nor a timeout per batch.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use md5::{Digest, Md5};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::admin_client::AdminClient;
use crate::protocol::{CallbackBody, CallbackItem, Generation};
use crate::runlog::RunLogs;

/// How long the consumer waits for more items before posting a batch that is not full.
const FLUSH_LINGER: Duration = Duration::from_millis(5);
/// Attempts per batch (with backoff) before it is spooled.
const SEND_ATTEMPTS: u32 = 3;
const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// While the admin is down, the consumer tries one post per this period and spools the rest.
const PROBE_PERIOD: Duration = Duration::from_secs(1);
/// Longest time shutdown spends delivering the queue before spooling what is left (XXL-JOB: 10 s).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
const MIN_RETRY_INTERVAL: Duration = Duration::from_millis(10);
const SPOOL_PREFIX: &str = "callback-";
const SPOOL_SUFFIX: &str = ".json";

/// Settings of the callback pipeline.
#[derive(Debug, Clone)]
pub struct CallbackConfig {
    /// Which body shape the admin expects (array, or `{callbackList}` for XXL-JOB 3.5).
    pub generation: Generation,
    /// Folder of undelivered batches; it survives restarts and is replayed at start.
    pub spool_dir: PathBuf,
    /// Most items per callback request (0 is taken as 1).
    pub batch_max: usize,
    /// How often the spool is re-sent.
    pub retry_interval: Duration,
}

impl CallbackConfig {
    /// XXL-JOB's defaults: classic array body, batches of 50, spool retried every 30 s.
    pub fn new(spool_dir: PathBuf) -> Self {
        CallbackConfig {
            generation: Generation::Classic,
            spool_dir,
            batch_max: 50,
            retry_interval: Duration::from_secs(30),
        }
    }
}

/// Queues run results for the admin. Cheap to clone; `send` never blocks.
#[derive(Clone)]
pub struct CallbackSender {
    tx: mpsc::UnboundedSender<CallbackItem>,
    spool: Arc<Spool>,
}

impl CallbackSender {
    /// Queues one result. After shutdown the result is written to the spool, to be delivered by
    /// the next start.
    pub fn send(&self, item: CallbackItem) {
        if let Err(mpsc::error::SendError(item)) = self.tx.send(item) {
            if let Err(e) = self.spool.write(std::slice::from_ref(&item)) {
                tracing::error!(
                    log_id = item.log_id,
                    handle_code = item.handle_code,
                    error = %e,
                    "callback lost: pipeline stopped and spool not writable"
                );
            }
        }
    }
}

/// Owns the pipeline's tasks. Dropping it stops them too (without waiting); prefer
/// [`CallbackHandle::shutdown`].
pub struct CallbackHandle {
    stop: DropGuard,
    consumer: tokio::task::JoinHandle<()>,
    retry: tokio::task::JoinHandle<()>,
}

impl CallbackHandle {
    /// Stops the pipeline: the queue is delivered for at most 10 s and whatever is left is spooled
    /// for the next start.
    pub async fn shutdown(self) {
        let CallbackHandle {
            stop,
            consumer,
            retry,
        } = self;
        drop(stop);
        if let Err(e) = consumer.await {
            tracing::error!(error = %e, "callback consumer task failed");
        }
        if let Err(e) = retry.await {
            tracing::error!(error = %e, "callback retry task failed");
        }
    }
}

/// Starts the pipeline (needs a Tokio runtime). Spool files found in `cfg.spool_dir` are replayed.
pub fn start(
    cfg: CallbackConfig,
    admin: AdminClient,
    logs: RunLogs,
) -> (CallbackSender, CallbackHandle) {
    if let Err(e) = fs::create_dir_all(&cfg.spool_dir) {
        // Not fatal: every spool write retries the creation, and undeliverable batches are kept
        // in memory meanwhile.
        tracing::warn!(dir = %cfg.spool_dir.display(), error = %e, "cannot create the callback spool folder");
    }
    let spool = Arc::new(Spool { dir: cfg.spool_dir });
    let shared = Arc::new(Shared {
        admin,
        logs,
        generation: cfg.generation,
        batch_max: cfg.batch_max.max(1),
        spool: spool.clone(),
        unspooled: Mutex::new(Vec::new()),
        last_failure: Mutex::new(None),
        recovered: Notify::new(),
    });
    let (tx, rx) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let consumer = tokio::spawn(run_consumer(shared.clone(), rx, stop.clone()));
    let retry = tokio::spawn(run_retry(
        shared,
        cfg.retry_interval.max(MIN_RETRY_INTERVAL),
        stop.clone(),
    ));
    (
        CallbackSender { tx, spool },
        CallbackHandle {
            stop: stop.drop_guard(),
            consumer,
            retry,
        },
    )
}

struct Shared {
    admin: AdminClient,
    logs: RunLogs,
    generation: Generation,
    batch_max: usize,
    spool: Arc<Spool>,
    /// Batches the spool could not take (disk full, folder not writable), retried from memory.
    unspooled: Mutex<Vec<Vec<CallbackItem>>>,
    /// When the last post failed; `None` while the admin answers.
    last_failure: Mutex<Option<Instant>>,
    /// Wakes the retry task when the admin answers again after a failure.
    recovered: Notify,
}

impl Shared {
    async fn post(&self, items: &[CallbackItem]) -> Result<(), String> {
        let body = self.generation.callback_body(items.to_vec());
        let result = self.admin.call("callback", &body).await.map(|_| ());
        let was_down = {
            let mut last = self.last_failure.lock().unwrap_or_else(|e| e.into_inner());
            let was_down = last.is_some();
            *last = if result.is_ok() {
                None
            } else {
                Some(Instant::now())
            };
            was_down
        };
        if was_down && result.is_ok() {
            self.recovered.notify_one();
        }
        result
    }

    /// Whether the admin failed less than [`PROBE_PERIOD`] ago (then a batch is spooled at once).
    fn recently_failed(&self) -> bool {
        let last = self.last_failure.lock().unwrap_or_else(|e| e.into_inner());
        last.is_some_and(|t| t.elapsed() < PROBE_PERIOD)
    }

    /// Posts a batch with a few attempts; spools it when they all fail.
    async fn deliver(&self, batch: Vec<CallbackItem>, stop: &CancellationToken) {
        let mut last_error = String::from("admin unreachable (failed less than a second ago)");
        if !self.recently_failed() {
            for attempt in 1..=SEND_ATTEMPTS {
                match self.post(&batch).await {
                    Ok(()) => {
                        self.record(&batch, "----------- callback finish".to_string())
                            .await;
                        return;
                    }
                    Err(e) => last_error = e,
                }
                if attempt == SEND_ATTEMPTS || stop.is_cancelled() {
                    break;
                }
                let backoff = BACKOFF_BASE * 2u32.pow(attempt - 1);
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
            }
        }
        tracing::warn!(items = batch.len(), error = %last_error, "callback failed, spooling for retry");
        self.record(
            &batch,
            format!("----------- callback fail, {last_error}; kept for retry"),
        )
        .await;
        self.park(batch).await;
    }

    /// Writes the batch to the spool, or keeps it in memory if the spool cannot take it.
    async fn park(&self, batch: Vec<CallbackItem>) {
        let spool = self.spool.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            let r = spool.write(&batch);
            (batch, r)
        })
        .await;
        match outcome {
            Ok((_, Ok(path))) => {
                tracing::debug!(file = %path.display(), "callback batch spooled");
            }
            Ok((batch, Err(e))) => {
                tracing::error!(items = batch.len(), error = %e, "cannot spool callbacks, keeping them in memory");
                self.unspooled
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(batch);
            }
            Err(e) => tracing::error!(error = %e, "callback spool task failed"),
        }
    }

    /// Appends the outcome line to the log of every run in the batch.
    async fn record(&self, batch: &[CallbackItem], line: String) {
        let runs: Vec<(i64, i64)> = batch.iter().map(|i| (i.log_id, i.log_date_time)).collect();
        let logs = self.logs.clone();
        let written = tokio::task::spawn_blocking(move || {
            for (log_id, log_date_time) in runs {
                logs.logger(log_id, log_date_time).log(&line);
            }
        })
        .await;
        if let Err(e) = written {
            tracing::warn!(error = %e, "writing callback outcome to run logs failed");
        }
    }

    /// Re-sends what was kept in memory, then the spool files, oldest first; stops at the first
    /// failure (the admin is still down, the next round will try again).
    async fn replay(&self, stop: &CancellationToken) {
        let kept = std::mem::take(&mut *self.unspooled.lock().unwrap_or_else(|e| e.into_inner()));
        let mut kept = kept.into_iter();
        for batch in kept.by_ref() {
            if stop.is_cancelled() || self.post(&batch).await.is_err() {
                let mut unspooled = self.unspooled.lock().unwrap_or_else(|e| e.into_inner());
                unspooled.push(batch);
                unspooled.extend(kept);
                return;
            }
            self.record(&batch, "----------- callback finish (retried)".to_string())
                .await;
        }

        let spool = self.spool.clone();
        let files = match tokio::task::spawn_blocking(move || spool.list()).await {
            Ok(Ok(files)) => files,
            Ok(Err(e)) => {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::warn!(error = %e, "cannot list the callback spool");
                }
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "callback spool listing task failed");
                return;
            }
        };
        for path in files {
            if stop.is_cancelled() {
                return;
            }
            let read_path = path.clone();
            let items = match tokio::task::spawn_blocking(move || Spool::read(&read_path)).await {
                Ok(Ok(items)) => items,
                Ok(Err(SpoolReadError::Gone)) => continue,
                Ok(Err(SpoolReadError::Corrupt(e))) => {
                    quarantine(&path, &e);
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "callback spool read task failed");
                    return;
                }
            };
            if !items.is_empty() {
                let result = tokio::select! {
                    _ = stop.cancelled() => return,
                    r = self.post(&items) => r,
                };
                if let Err(e) = result {
                    tracing::debug!(file = %path.display(), error = %e, "spooled callbacks still undeliverable");
                    return;
                }
            }
            let remove_path = path.clone();
            match tokio::task::spawn_blocking(move || Spool::remove(&remove_path)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    // Delivered twice at worst next round; the admin keeps the first result.
                    tracing::warn!(file = %path.display(), error = %e, "cannot delete delivered callback file");
                }
                Err(e) => tracing::warn!(error = %e, "callback spool delete task failed"),
            }
            tracing::info!(file = %path.display(), items = items.len(), "spooled callbacks delivered");
            self.record(
                &items,
                "----------- callback finish (replayed from spool)".to_string(),
            )
            .await;
        }
    }
}

async fn run_consumer(
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<CallbackItem>,
    stop: CancellationToken,
) {
    loop {
        let first = tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            item = rx.recv() => item,
        };
        // `None`: every sender is gone and the queue is empty, so nothing can arrive any more.
        let Some(first) = first else { return };
        let batch = collect_batch(first, &mut rx, shared.batch_max).await;
        shared.deliver(batch, &stop).await;
    }
    drain(&shared, rx).await;
}

/// Takes what is queued, lingering [`FLUSH_LINGER`] for more, up to `max` items.
async fn collect_batch(
    first: CallbackItem,
    rx: &mut mpsc::UnboundedReceiver<CallbackItem>,
    max: usize,
) -> Vec<CallbackItem> {
    let mut batch = vec![first];
    let deadline = Instant::now() + FLUSH_LINGER;
    while batch.len() < max {
        match rx.try_recv() {
            Ok(item) => {
                batch.push(item);
                continue;
            }
            Err(mpsc::error::TryRecvError::Disconnected) => break,
            Err(mpsc::error::TryRecvError::Empty) => {}
        }
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(item)) => batch.push(item),
            Ok(None) | Err(_) => break,
        }
    }
    batch
}

/// Shutdown: deliver the queue for at most [`DRAIN_TIMEOUT`], spool the rest.
async fn drain(shared: &Shared, mut rx: mpsc::UnboundedReceiver<CallbackItem>) {
    // Closing first makes the queue finite: later sends go straight to the spool.
    rx.close();
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    let mut admin_failed = shared.recently_failed();
    loop {
        let mut batch = Vec::new();
        while batch.len() < shared.batch_max {
            match rx.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
        if batch.is_empty() {
            return;
        }
        let error = if admin_failed {
            "admin unreachable while shutting down".to_string()
        } else {
            match tokio::time::timeout_at(deadline, shared.post(&batch)).await {
                Ok(Ok(())) => {
                    shared
                        .record(&batch, "----------- callback finish".to_string())
                        .await;
                    continue;
                }
                Ok(Err(e)) => e,
                Err(_) => "shutdown drain time exceeded".to_string(),
            }
        };
        // One failure is enough: spool the rest without waiting on a dead admin.
        admin_failed = true;
        shared
            .record(
                &batch,
                format!("----------- callback fail, {error}; kept for retry"),
            )
            .await;
        shared.park(batch).await;
    }
}

async fn run_retry(shared: Arc<Shared>, interval: Duration, stop: CancellationToken) {
    loop {
        shared.replay(&stop).await;
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(interval) => {}
            _ = shared.recovered.notified() => {}
        }
    }
    // Give what only lives in memory one more chance to reach the disk before the process ends.
    let kept = std::mem::take(&mut *shared.unspooled.lock().unwrap_or_else(|e| e.into_inner()));
    for batch in kept {
        if let Err(e) = shared.spool.write(&batch) {
            let log_ids: Vec<i64> = batch.iter().map(|i| i.log_id).collect();
            tracing::error!(?log_ids, error = %e, "callbacks lost: spool not writable at shutdown");
        }
    }
}

/// The folder of undelivered batches: one JSON array of callback items per file, named by the
/// MD5 of its content (an identical batch spooled twice is one file).
struct Spool {
    dir: PathBuf,
}

enum SpoolReadError {
    /// Deleted meanwhile (delivered by another round).
    Gone,
    Corrupt(String),
}

impl Spool {
    fn write(&self, items: &[CallbackItem]) -> io::Result<PathBuf> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        fs::create_dir_all(&self.dir)?;
        let json = serde_json::to_vec(items).map_err(io::Error::other)?;
        let name = format!(
            "{SPOOL_PREFIX}{}{SPOOL_SUFFIX}",
            hex::encode(Md5::digest(&json))
        );
        let target = self.dir.join(&name);
        // The temporary name does not match the spool pattern, so a half-written file is never
        // replayed; the rename makes the complete file appear at once.
        let tmp = self.dir.join(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut file = File::create(&tmp)?;
            file.write_all(&json)?;
            file.sync_all()?;
            fs::rename(&tmp, &target)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        // Make the rename itself durable; not every platform can open a folder, hence best effort.
        if let Ok(dir) = File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        Ok(target)
    }

    /// Spool files, oldest first.
    fn list(&self) -> io::Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if !(name.starts_with(SPOOL_PREFIX) && name.ends_with(SPOOL_SUFFIX)) {
                continue;
            }
            let modified = entry
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(std::time::SystemTime::UNIX_EPOCH);
            files.push((modified, entry.path()));
        }
        files.sort();
        Ok(files.into_iter().map(|(_, p)| p).collect())
    }

    /// Reads a spool file; both callback shapes are accepted, so a file written by another tool
    /// in the `{callbackList}` shape replays too.
    fn read(path: &Path) -> Result<Vec<CallbackItem>, SpoolReadError> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(SpoolReadError::Gone),
            Err(e) => return Err(SpoolReadError::Corrupt(e.to_string())),
        };
        serde_json::from_slice::<CallbackBody>(&bytes)
            .map(CallbackBody::into_items)
            .map_err(|e| SpoolReadError::Corrupt(e.to_string()))
    }

    fn remove(path: &Path) -> io::Result<()> {
        match fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// Moves an unreadable spool file aside (`.bad`) so it is kept for a person to inspect but no
/// longer retried every round.
fn quarantine(path: &Path, error: &str) {
    let mut bad = path.as_os_str().to_owned();
    bad.push(".bad");
    match fs::rename(path, &bad) {
        Ok(()) => {
            tracing::error!(file = %path.display(), error, "unreadable callback spool file moved aside")
        }
        Err(e) => {
            tracing::error!(file = %path.display(), error, rename_error = %e, "unreadable callback spool file")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(log_id: i64) -> CallbackItem {
        CallbackItem {
            log_id,
            log_date_time: 1_750_000_000_123,
            handle_code: 200,
            handle_msg: format!("run {log_id}"),
        }
    }

    #[test]
    fn spool_round_trip_is_atomic_and_content_named() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool {
            dir: dir.path().join("callbacklogs"),
        };
        let a = spool.write(&[item(1), item(2)]).unwrap();
        let again = spool.write(&[item(1), item(2)]).unwrap();
        assert_eq!(a, again, "same content, same file");
        let b = spool.write(&[item(3)]).unwrap();
        assert_ne!(a, b);
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("callback-") && name.ends_with(".json"));
        assert_eq!(name.len(), "callback-".len() + 32 + ".json".len());
        // No temporary file is left behind.
        let all: Vec<_> = fs::read_dir(&spool.dir).unwrap().collect();
        assert_eq!(all.len(), 2);
        let listed = spool.list().unwrap();
        assert_eq!(listed.len(), 2);
        assert!(matches!(Spool::read(&a), Ok(v) if v == vec![item(1), item(2)]));
        Spool::remove(&a).unwrap();
        Spool::remove(&a).unwrap();
        assert!(matches!(Spool::read(&a), Err(SpoolReadError::Gone)));
    }

    #[test]
    fn spool_lists_only_its_files_and_reads_both_shapes() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool {
            dir: dir.path().to_path_buf(),
        };
        fs::write(dir.path().join(".callback-x.json.1.2.tmp"), "[").unwrap();
        fs::write(dir.path().join("callback-y.json.bad"), "[").unwrap();
        fs::write(dir.path().join("other.json"), "[]").unwrap();
        let wrapped = dir.path().join("callback-wrapped.json");
        fs::write(
            &wrapped,
            r#"{"callbackList":[{"logId":9,"logDateTime":5,"handleCode":500,"handleMsg":"x"}]}"#,
        )
        .unwrap();
        assert_eq!(spool.list().unwrap(), vec![wrapped.clone()]);
        let items = match Spool::read(&wrapped) {
            Ok(items) => items,
            Err(_) => panic!("wrapped shape must read"),
        };
        assert_eq!(items[0].log_id, 9);
        assert_eq!(items[0].handle_code, 500);
    }

    #[test]
    fn corrupt_spool_file_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("callback-z.json");
        fs::write(&path, "{not json").unwrap();
        let Err(SpoolReadError::Corrupt(e)) = Spool::read(&path) else {
            panic!("must be corrupt");
        };
        quarantine(&path, &e);
        assert!(!path.exists());
        assert!(dir.path().join("callback-z.json.bad").exists());
    }
}
