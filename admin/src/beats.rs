//! Executor heartbeats, written behind.
//!
//! Executors beat every 30 s and are evicted after 90 s without one, so the time of a beat only has
//! to reach the database well within a minute. A beat of an executor this admin already wrote
//! (with the same metadata) is kept in memory and written together with all others once per
//! [`Beats::flush_every`]: 1 000 executors cost one transaction a second instead of 33. A new
//! executor (or one silent for the eviction age, whose row may be gone), changed metadata, and
//! every beat while the last write failed are written at once, so a registration is visible when
//! its request is answered and a database outage is answered with an error, as with a write per
//! beat.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::model::now_ms;
use crate::store::{Beat, Store, StoreResult};

type Key = (String, String);

pub struct Beats {
    store: Store,
    flush_every: Duration,
    /// The registry's eviction age: a known executor silent for this long is written at once
    /// when it beats again, and forgotten at the next flush, so memory follows the live fleet.
    forget_after_ms: i64,
    inner: Mutex<Inner>,
    /// Held while pending beats are written and while an executor is removed, so that a removal
    /// is never undone by the write of a beat taken before it.
    write: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Inner {
    /// Executors whose row this admin wrote: the metadata written and the time of the last beat.
    known: HashMap<Key, (String, i64)>,
    /// The latest beat of each known executor, not yet written.
    pending: HashMap<Key, Beat>,
    /// The last write of pending beats failed: beats are written one by one (and answered with
    /// the error) until a write succeeds.
    failing: bool,
}

impl Beats {
    /// `dead_after_ms` is the registry's eviction age; beats are written at least ten times
    /// within it (once a second with the default 90 s).
    pub fn new(store: Store, dead_after_ms: i64) -> Arc<Beats> {
        let flush_ms = (dead_after_ms / 10).clamp(10, 1_000) as u64;
        Arc::new(Beats {
            store,
            flush_every: Duration::from_millis(flush_ms),
            forget_after_ms: dead_after_ms.max(1),
            inner: Mutex::new(Inner::default()),
            write: tokio::sync::Mutex::new(()),
        })
    }

    pub fn flush_every(&self) -> Duration {
        self.flush_every
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        // The guarded maps stay consistent at every await-free step; a panic elsewhere does not
        // make them unusable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a beat: kept for the next flush when this admin already wrote the executor with
    /// the same metadata, written now otherwise.
    pub async fn beat(&self, beat: Beat) -> StoreResult<()> {
        let key = (beat.appname.clone(), beat.address.clone());
        {
            let mut inner = self.inner();
            if !inner.failing {
                if let Some((meta, last)) = inner.known.get_mut(&key) {
                    // Silent for the eviction age, its row may be gone (evicted): a beat then
                    // registers it again, at once.
                    if *meta == beat.meta && beat.at - *last < self.forget_after_ms {
                        *last = beat.at;
                        inner.pending.insert(key, beat);
                        return Ok(());
                    }
                }
            }
        }
        self.store
            .upsert_registry_many(std::slice::from_ref(&beat))
            .await?;
        let mut inner = self.inner();
        inner.failing = false;
        if inner.pending.get(&key).is_some_and(|p| p.at <= beat.at) {
            inner.pending.remove(&key);
        }
        inner.known.insert(key, (beat.meta, beat.at));
        Ok(())
    }

    /// Removes an executor (it stopped): its pending beat is dropped first, so no later write
    /// brings it back.
    pub async fn remove(&self, appname: &str, address: &str) -> StoreResult<u64> {
        let _write = self.write.lock().await;
        {
            let key = (appname.to_string(), address.to_string());
            let mut inner = self.inner();
            inner.pending.remove(&key);
            inner.known.remove(&key);
        }
        self.store.remove_registry(appname, address).await
    }

    /// Writes the pending beats in one transaction. On failure they stay pending (unless a newer
    /// beat of the same executor arrived) and are written by the next flush.
    pub async fn flush(&self) {
        let _write = self.write.lock().await;
        let beats: Vec<Beat> = self.inner().pending.drain().map(|(_, b)| b).collect();
        if beats.is_empty() {
            return;
        }
        let result = self.store.upsert_registry_many(&beats).await;
        let mut inner = self.inner();
        match result {
            Ok(()) => {
                inner.failing = false;
                let cutoff = now_ms() - self.forget_after_ms;
                inner.known.retain(|_, (_, last)| *last >= cutoff);
            }
            Err(e) => {
                tracing::warn!(error = %e, beats = beats.len(), "heartbeat write failed; retrying at the next flush");
                inner.failing = true;
                for b in beats {
                    inner
                        .pending
                        .entry((b.appname.clone(), b.address.clone()))
                        .or_insert(b);
                }
            }
        }
    }
}

/// Flushes every [`Beats::flush_every`] until `stop`, then once more.
pub async fn run(beats: Arc<Beats>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(beats.flush_every());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tick.tick() => beats.flush().await,
        }
    }
    beats.flush().await;
}
