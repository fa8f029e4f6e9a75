//! Jobs as the dispatch path sees them: read whole once per change, not once per fire.
//!
//! Every fire needs its job's whole configuration (handler, routing, sharding, glue, retries,
//! children). Reading the 32 columns of a job for each fire, and again when the fire ended, was the
//! largest single cost of a fire on SQLite (its driver copies every value of every row). Here jobs
//! are kept by id and checked against the database by `(enabled, updated_at)` only, and read
//! whole when either changed; every edit moves `updated_at` forward (see `store/jobs.rs`).
//!
//! A cached job's `next_fire_at` and `last_fire_at` are not current (the scheduler's claims move
//! them without an edit); nothing that reads jobs from here uses them. Jobs not asked for within
//! [`IDLE_MS`] are dropped, so the cache holds the jobs that fire, not every job defined.

use std::collections::{HashMap, HashSet};
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
    entries: Mutex<HashMap<i64, (Arc<Job>, i64)>>,
    pruned_at: AtomicI64,
}

impl JobCache {
    /// The current version of each of `ids` that still exists (deleted jobs are absent).
    pub async fn get(&self, store: &Store, ids: &[i64]) -> StoreResult<HashMap<i64, Arc<Job>>> {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let versions = store.job_versions(&ids).await?;
        let now = now_ms();
        let mut out = HashMap::with_capacity(versions.len());
        let mut stale = Vec::new();
        {
            let mut map = self.entries.lock().expect("job cache poisoned");
            let present: HashSet<i64> = versions.iter().map(|v| v.0).collect();
            for id in ids.iter().filter(|id| !present.contains(id)) {
                map.remove(id);
            }
            for (id, enabled, updated_at) in versions {
                match map.get_mut(&id) {
                    Some((job, used)) if job.enabled == enabled && job.updated_at == updated_at => {
                        *used = now;
                        out.insert(id, job.clone());
                    }
                    _ => stale.push(id),
                }
            }
        }
        if !stale.is_empty() {
            let fresh = store.get_jobs(&stale).await?;
            let mut map = self.entries.lock().expect("job cache poisoned");
            for job in fresh {
                let job = Arc::new(job);
                map.insert(job.id, (job.clone(), now));
                out.insert(job.id, job);
            }
        }
        self.prune(now);
        Ok(out)
    }

    /// Jobs held now (for tests and metrics).
    pub fn len(&self) -> usize {
        self.entries.lock().expect("job cache poisoned").len()
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
        self.entries
            .lock()
            .expect("job cache poisoned")
            .retain(|_, (_, used)| now - *used < IDLE_MS);
    }
}
