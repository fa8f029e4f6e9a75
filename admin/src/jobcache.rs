//! Jobs as the dispatch path sees them: read whole once per change, not once per fire.
//!
//! Every fire needs its job's whole configuration (handler, routing, sharding, glue, retries,
//! children). Reading the 32 columns of a job for each fire, and again when the fire ended, was the
//! largest single cost of a fire on SQLite (its driver copies every value of every row). Here jobs
//! are kept by id and checked against the database by `(enabled, updated_at)` only, and read
//! whole when either changed; every edit moves `updated_at` forward (see `store/jobs.rs`).
//!
//! Every edit, stop, start or deletion of a job also counts itself in the database
//! ([`Store::job_edits`]) in its own transaction. While that count is the one the cache was last
//! checked at, every cached job is still current and a lookup reads one row, not one per job:
//! the check per job cost more than anything else a fire read (three checks per fire: when it
//! is prepared, just before it is sent, and when it ended).
//!
//! A cached job's `next_fire_at` and `last_fire_at` are not current (the scheduler's claims move
//! them without an edit); nothing that reads jobs from here uses them. Jobs not asked for within
//! [`IDLE_MS`] are dropped, so the cache holds the jobs that fire, not every job defined.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use crate::model::{now_ms, Job};
use crate::store::{Store, StoreResult};

/// How long a job stays cached without being asked for.
const IDLE_MS: i64 = 600_000;
/// How often idle jobs are dropped.
const PRUNE_EVERY_MS: i64 = 60_000;

/// Jobs by id, with when each was last asked for.
#[derive(Default)]
pub struct JobCache {
    inner: Mutex<Inner>,
    /// Serialises checks, so a slower check cannot record an older count over a newer one.
    checking: tokio::sync::Mutex<()>,
    pruned_at: AtomicI64,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<i64, (Arc<Job>, i64)>,
    /// The edit count at which every entry was last checked; `None` before the first check.
    checked_at: Option<i64>,
}

impl JobCache {
    /// The current version of each of `ids` that still exists (deleted jobs are absent).
    pub async fn get(&self, store: &Store, ids: &[i64]) -> StoreResult<HashMap<i64, Arc<Job>>> {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let edits = store.job_edits().await?;
        let now = now_ms();
        // While nothing was edited since the last check, cached jobs are current and only the
        // jobs not cached yet are read.
        if self.lock().checked_at != Some(edits) {
            self.drop_edited(store, &ids, edits).await?;
        }
        let mut out = HashMap::with_capacity(ids.len());
        let missing: Vec<i64> = {
            let mut inner = self.lock();
            ids.iter()
                .copied()
                .filter(|id| match inner.entries.get_mut(id) {
                    Some((job, used)) => {
                        *used = now;
                        out.insert(*id, job.clone());
                        false
                    }
                    None => true,
                })
                .collect()
        };
        if !missing.is_empty() {
            let fresh = store.get_jobs(&missing).await?;
            let mut inner = self.lock();
            // Kept only if no check recorded a newer count meanwhile: an edit after `edits`
            // may have been missed by that check, as these jobs were not cached yet.
            let keep = inner.checked_at == Some(edits);
            for job in fresh {
                let job = Arc::new(job);
                if keep {
                    inner.entries.insert(job.id, (job.clone(), now));
                }
                out.insert(job.id, job);
            }
        }
        self.prune(now);
        Ok(out)
    }

    /// After edits (`edits` is the count read before this call): checks every cached job and
    /// the ones asked for by `(enabled, updated_at)`, drops those edited or deleted, and records
    /// `edits` as the count the cache is current at.
    async fn drop_edited(&self, store: &Store, ids: &[i64], edits: i64) -> StoreResult<()> {
        let _one = self.checking.lock().await;
        let mut check: Vec<i64> = self.lock().entries.keys().chain(ids).copied().collect();
        check.sort_unstable();
        check.dedup();
        let current: HashMap<i64, (i64, i64)> = store
            .job_versions(&check)
            .await?
            .into_iter()
            .map(|(id, enabled, updated_at)| (id, (enabled, updated_at)))
            .collect();
        let mut inner = self.lock();
        inner
            .entries
            .retain(|id, (job, _)| current.get(id) == Some(&(job.enabled, job.updated_at)));
        // The count was read before the check, so an edit made during it shows as a new count
        // at the next lookup.
        inner.checked_at = Some(edits);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("job cache poisoned")
    }

    /// Jobs held now (for tests and metrics).
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn prune(&self, now: i64) {
        let last = self.pruned_at.load(Ordering::Relaxed);
        if now - last < PRUNE_EVERY_MS
            || self
                .pruned_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        self.lock()
            .entries
            .retain(|_, (_, used)| now - *used < IDLE_MS);
    }
}
