//! The trigger path: from "job J fires now" to run requests accepted by executors.
//!
//! One call of [`Dispatcher::fire`] plans the runs (which executors, which shard or item each gets),
//! stores the fire and its runs in one transaction (the scheduler's unique `sched_key` makes a
//! double fire impossible), sends `/run` to every target concurrently over one pooled HTTP client,
//! and records each answer. A run whose dispatch fails is re-dispatched at once to another live
//! executor with the same index and total (shard failover), and the failing executor is avoided by
//! routing until it beats again.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use futures::StreamExt;
use shardline_executor::protocol::{self, Envelope, Generation, TriggerRequest};

use crate::config::Settings;
use crate::executor_http::ExecutorHttp;
use crate::jobcache::JobCache;
use crate::metrics::Metrics;
use crate::model::{
    now_ms, AddressType, AdminNode, Fire, FireState, Group, Job, Run, RunState, ShardingMode,
    TriggerType,
};
use crate::note::{Message, Note, NoteKind};
use crate::results::{FireEvents, ResultSink};
use crate::route::{RouteError, RouteStrategy, Router};
use crate::sharding::{self, ItemParams, ShardExecutor};
use crate::store::{FireEnded, FireRuns, NewRun, Replacing, RunUpdate, Store, StoreError};

/// Run requests in flight at once in a dispatch round, shared out among the executors it sends to
/// (at least [`MIN_LANE_CONCURRENCY`] each): a burst reuses the pooled keep-alive connections
/// instead of opening a socket per run, and a dead executor only holds up its own lane.
const DISPATCH_CONCURRENCY: usize = 64;
const MIN_LANE_CONCURRENCY: usize = 8;
/// Batched run requests in flight at once to one executor. Each holds up to
/// `SHARDLINE_DISPATCH_BATCH` runs: with many in flight, a fire of thousands of items on one
/// executor arrived all at once, and the executor, starting them all, answered the last requests
/// after their timeout.
const BATCHES_IN_FLIGHT: usize = 2;
/// A run request slower than this counts towards moving its job to the scheduler's slow pool
/// (XXL-JOB's rule, applied per request: a large batch taking long is not one job being slow).
const SLOW_REQUEST_MS: u128 = 500;
/// Slow requests within a minute after which a job is slow.
const SLOW_REQUESTS_PER_MINUTE: u32 = 10;
/// The largest body of a batched run request: well under the 5 MiB an executor takes by default,
/// so that runs carrying long GLUE sources or parameters are spread over more requests.
const MAX_BATCH_BYTES: usize = 1024 * 1024;

/// What a fire should do beyond the job's own configuration.
#[derive(Debug, Clone)]
pub struct FireRequest {
    pub trigger_type: TriggerType,
    /// The planned time (the scheduler's tick, or now for manual fires).
    pub planned_at: i64,
    /// Set by the scheduler to make the planned fire unique across admins.
    pub sched_key: Option<String>,
    /// Replaces the job's parameters.
    pub params: Option<String>,
    /// Replaces the group's executors (manual "run on these").
    pub addresses: Option<Vec<String>>,
    /// Runs one shard only, `(index, total)`.
    pub shard: Option<(i64, i64)>,
    pub parent_fire_id: Option<i64>,
}

impl FireRequest {
    pub fn manual(trigger_type: TriggerType) -> Self {
        FireRequest {
            trigger_type,
            planned_at: now_ms(),
            sched_key: None,
            params: None,
            addresses: None,
            shard: None,
            parent_fire_id: None,
        }
    }
}

/// The result of a fire.
#[derive(Debug, Clone, PartialEq)]
pub enum FireOutcome {
    Fired {
        fire_id: i64,
        run_ids: Vec<i64>,
    },
    /// Another admin already stored this planned fire.
    AlreadyFired,
}

#[derive(Debug, thiserror::Error)]
pub enum TriggerError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An executor as routing sees it, with the metadata it registered.
#[derive(Debug, Clone)]
struct Target {
    address: String,
    weight: u32,
    labels: Vec<String>,
    /// It takes many runs in one request ([`protocol::RUN_BATCH_ROUTE`]).
    run_batch: bool,
}

/// One fire on its way to the executors, with what dispatch needs to know about it.
struct FireWork {
    job: Arc<Job>,
    group: Arc<Group>,
    targets: Arc<Vec<Target>>,
    fire_id: i64,
    planned_at: i64,
    runs: Vec<Run>,
}

/// Fires whose runs are planned and stored, ready to be sent.
pub struct Prepared {
    works: Vec<FireWork>,
}

impl Prepared {
    /// Splits the fires by planned time, earliest first, to be sent each at its time.
    pub fn by_planned_time(self) -> Vec<(i64, Prepared)> {
        let mut groups: std::collections::BTreeMap<i64, Vec<FireWork>> = Default::default();
        for w in self.works {
            groups.entry(w.planned_at).or_default().push(w);
        }
        groups
            .into_iter()
            .map(|(at, works)| (at, Prepared { works }))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.works.is_empty()
    }

    /// Separates the fires whose job is no longer the one they were prepared with (edited,
    /// stopped or deleted since; `now` holds each job's (enabled, updated_at) as they are).
    /// Returns those as (fire id, job id, planned time).
    pub fn take_stale(&mut self, now: &HashMap<i64, (i64, i64)>) -> Vec<(i64, i64, i64)> {
        let (fresh, stale): (Vec<FireWork>, Vec<FireWork>) =
            std::mem::take(&mut self.works).into_iter().partition(|w| {
                now.get(&w.job.id).is_some_and(|(enabled, updated_at)| {
                    // Unchanged since prepared (a job its schedule just ended was prepared
                    // stopped, for its last fire).
                    *enabled == w.job.enabled && *updated_at == w.job.updated_at
                })
            });
        self.works = fresh;
        stale
            .into_iter()
            .map(|w| (w.fire_id, w.job.id, w.planned_at))
            .collect()
    }

    /// The send list of these fires, built ahead of their time: walking a thousand fires' jobs
    /// and runs, cold half a second after preparation, took 5–10 ms on a two-core machine, and
    /// built at the planned millisecond that was the fires' lateness.
    pub fn into_send_list(self) -> SendList {
        SendList::new(self.works)
    }

    /// The jobs of the prepared fires.
    pub fn job_ids(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.works.iter().map(|w| w.job.id).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// Fires ready to send: their runs moved into one list, and what is read just before sending
/// (checkpoints) found in advance, so a plain fire reads nothing.
pub struct SendList {
    works: Vec<Arc<FireWork>>,
    pending: Vec<(Arc<FireWork>, Run)>,
    /// Sharded jobs whose runs are handed a checkpoint: resuming jobs, and new attempts.
    checkpoint_jobs: Vec<i64>,
    /// Fires with new attempts of a job that does not resume: an attempt continues only from
    /// what its own fire saved.
    own_fires: Vec<i64>,
}

impl SendList {
    fn new(works: Vec<FireWork>) -> SendList {
        let mut checkpoint_jobs = Vec::new();
        let mut own_fires = Vec::new();
        let mut pending = Vec::new();
        let works = works
            .into_iter()
            .map(|mut w| {
                let retried = w.runs.iter().any(|r| r.attempt > 0);
                if is_sharded(&w.job) {
                    if w.job.resume_checkpoint != 0 || retried {
                        checkpoint_jobs.push(w.job.id);
                    }
                    if w.job.resume_checkpoint == 0 && retried {
                        own_fires.push(w.fire_id);
                    }
                }
                // The runs move, not copied.
                let runs = std::mem::take(&mut w.runs);
                let w = Arc::new(w);
                pending.extend(runs.into_iter().map(|r| (w.clone(), r)));
                w
            })
            .collect();
        checkpoint_jobs.sort_unstable();
        checkpoint_jobs.dedup();
        SendList {
            works,
            pending,
            checkpoint_jobs,
            own_fires,
        }
    }
}

/// A run planned for dispatch.
struct Planned {
    run: NewRun,
}

/// How old this admin's last written heartbeat may be for it to be sure no other admin counts it
/// gone (another does after [`AdminNode::DEAD_AFTER_MS`]): 5 s less, for clocks apart.
const BEAT_TRUSTED_MS: i64 = AdminNode::DEAD_AFTER_MS - 5_000;

/// Why [`Dispatcher::replace_runs`] replaces runs with new attempts: how the old ones end and
/// where the new ones go.
#[derive(Clone, Copy)]
enum Attempt<'a> {
    /// An operator's "retry the failed items": ended runs, sent anywhere healthy.
    Operator,
    /// The job's retry of a failed item: one more retry counted.
    Retry,
    /// The executor died: the open run ends lost, the item goes elsewhere.
    Failover(&'a Message),
    /// Stored and never sent by an admin that died: the open run ends lost, the item goes to
    /// the same executor.
    Unsent(&'a Message),
}

/// Sends runs to executors; shared by the API, the scheduler and the retry loop.
pub struct Dispatcher {
    store: Store,
    http: ExecutorHttp,
    settings: Arc<Settings>,
    access_token: String,
    router: Router,
    metrics: Arc<Metrics>,
    /// Executors whose last dispatch failed, with when; skipped by routing until they beat again.
    unhealthy: Mutex<HashMap<String, i64>>,
    /// Fires that just became final (children, alarms, FIX_DELAY follow from it).
    events: FireEvents,
    /// Where the answers to run requests are stored, with the executors' results.
    results: ResultSink,
    /// Woken when a job's schedule changed, so the local scheduler claims at once.
    schedule_changed: tokio::sync::Notify,
    /// The jobs of the fires being dispatched, read whole only when they changed.
    jobs: JobCache,
    /// Slow run requests per job in the current minute: (minute, count).
    slow_counts: Mutex<HashMap<i64, (i64, u32)>>,
    /// The time of this admin's last heartbeat that was written ([`Dispatcher::beat_written`]).
    beat_at: AtomicI64,
}

impl Dispatcher {
    pub fn new(
        store: Store,
        http: ExecutorHttp,
        settings: Arc<Settings>,
        access_token: String,
        metrics: Arc<Metrics>,
        events: FireEvents,
        results: ResultSink,
    ) -> Self {
        Dispatcher {
            store,
            http,
            settings,
            access_token,
            router: Router::new(),
            metrics,
            unhealthy: Mutex::new(HashMap::new()),
            events,
            results,
            schedule_changed: tokio::sync::Notify::new(),
            slow_counts: Mutex::new(HashMap::new()),
            jobs: JobCache::default(),
            beat_at: AtomicI64::new(now_ms()),
        }
    }

    /// Records that this admin's heartbeat of time `at` is written (`admin_nodes`).
    pub fn beat_written(&self, at: i64) {
        self.beat_at.fetch_max(at, Ordering::Relaxed);
    }

    /// The jobs `ids` as they are now (deleted ones absent), from the job cache.
    pub async fn jobs(&self, ids: &[i64]) -> Result<HashMap<i64, Arc<Job>>, StoreError> {
        self.jobs.get(&self.store, ids).await
    }

    /// Whether the job's run requests kept being slow this minute (its executors hang or are
    /// gone), so the scheduler dispatches it apart from the others.
    pub fn is_slow(&self, job_id: i64) -> bool {
        let minute = now_ms() / 60_000;
        self.slow_counts
            .lock()
            .expect("slow counts poisoned")
            .get(&job_id)
            .is_some_and(|(m, n)| *m == minute && *n > SLOW_REQUESTS_PER_MINUTE)
    }

    /// Counts one slow request for each of `job_ids` (one per slow request).
    fn count_slow(&self, job_ids: &[i64]) {
        if job_ids.is_empty() {
            return;
        }
        let minute = now_ms() / 60_000;
        let mut map = self.slow_counts.lock().expect("slow counts poisoned");
        map.retain(|_, (m, _)| *m == minute);
        for job_id in job_ids {
            let e = map.entry(*job_id).or_insert((minute, 0));
            e.1 += 1;
        }
    }

    /// Whether the results writer is behind ([`ResultSink::behind`]).
    pub fn results_behind(&self) -> bool {
        self.results.behind()
    }

    /// Tells the scheduler a job was started or its schedule changed.
    pub fn notify_schedule_changed(&self) {
        self.schedule_changed.notify_one();
    }

    /// Resolves when [`Dispatcher::notify_schedule_changed`] is called.
    pub async fn schedule_changed(&self) {
        self.schedule_changed.notified().await;
    }

    pub fn http(&self) -> &ExecutorHttp {
        &self.http
    }

    /// The token sent to a group's executors.
    pub fn token_for(&self, group: &Group) -> String {
        if group.access_token.is_empty() {
            self.access_token.clone()
        } else {
            group.access_token.clone()
        }
    }

    /// Called on every heartbeat: an executor that beats again is healthy again.
    pub fn mark_healthy(&self, address: &str) {
        let mut map = self.unhealthy.lock().expect("unhealthy map poisoned");
        if !map.is_empty() {
            map.remove(address);
        }
    }

    /// The admin-wide executor token.
    pub fn default_token(&self) -> &str {
        &self.access_token
    }

    /// Makes routing avoid an executor until it beats again.
    pub fn avoid(&self, address: &str) {
        self.mark_unhealthy(address);
    }

    fn mark_unhealthy(&self, address: &str) {
        self.unhealthy
            .lock()
            .expect("unhealthy map poisoned")
            .insert(address.to_string(), now_ms());
    }

    fn unhealthy_set(&self) -> HashSet<String> {
        self.unhealthy
            .lock()
            .expect("unhealthy map poisoned")
            .keys()
            .cloned()
            .collect()
    }

    /// The executors a fire of `group` may use, sorted by address (the shard order).
    async fn targets(
        &self,
        group: &Group,
        explicit: Option<&[String]>,
    ) -> Result<Vec<Target>, StoreError> {
        if let Some(list) = explicit {
            let mut v: Vec<String> = list.iter().map(|a| normalize_address(a)).collect();
            v.sort();
            v.dedup();
            return Ok(v
                .into_iter()
                .map(|address| Target {
                    address,
                    weight: 1,
                    labels: vec![],
                    run_batch: false,
                })
                .collect());
        }
        if group.address_type == AddressType::Manual.as_str() {
            return Ok(group
                .manual_addresses()
                .into_iter()
                .map(|a| Target {
                    address: normalize_address(&a),
                    weight: 1,
                    labels: vec![],
                    run_batch: false,
                })
                .collect());
        }
        let since = now_ms() - self.settings.dead_after_ms();
        let live = self.store.live_executors(&group.appname, since).await?;
        Ok(live
            .into_iter()
            .map(|e| {
                let meta: protocol::ExecutorMeta =
                    serde_json::from_str(&e.meta).unwrap_or_default();
                Target {
                    address: e.address,
                    weight: meta.weight.unwrap_or(1).max(1),
                    labels: meta.labels,
                    run_batch: meta.run_batch,
                }
            })
            .collect())
    }

    /// Fires `job` once: plans, stores and dispatches its runs.
    pub async fn fire(&self, job: &Job, req: FireRequest) -> Result<FireOutcome, TriggerError> {
        let group = Arc::new(self.store.get_group(job.group_id).await?);
        let targets = Arc::new(self.targets(&group, req.addresses.as_deref()).await?);
        let params = req.params.clone().unwrap_or_else(|| job.params.clone());
        let (planned, note) = self.plan(job, &targets, &params, req.shard).await?;
        let runs: Vec<NewRun> = planned.into_iter().map(|p| p.run).collect();
        let Some((fire_id, run_ids)) = self
            .store
            .create_fire(
                job.id,
                job.group_id,
                req.trigger_type.as_str(),
                req.planned_at,
                req.sched_key.as_deref(),
                &params,
                req.parent_fire_id,
                &runs,
                now_ms(),
            )
            .await?
        else {
            return Ok(FireOutcome::AlreadyFired);
        };
        self.metrics.fires_total.fetch_add(1, Ordering::Relaxed);
        if let Some(note) = &note {
            self.store.set_fire_message(fire_id, note).await?;
        }
        let stored = self.store.runs_of_fires(&[fire_id]).await?;
        let work = FireWork {
            job: Arc::new(job.clone()),
            group,
            targets,
            fire_id,
            planned_at: req.planned_at,
            runs: stored,
        };
        self.dispatch_runs(SendList::new(vec![work])).await?;
        Ok(FireOutcome::Fired { fire_id, run_ids })
    }

    /// Dispatches fires the scheduler claimed (their rows exist, without runs): plans each with
    /// its job as it is now, stores all runs in one transaction and sends them together. `fires`
    /// are (job, fire id, planned time, trigger type). With `start_for` the fires are still
    /// `scheduled` and only those this node still owns are started and sent; without it they
    /// were started already ([`crate::store::Store::start_claimed`]).
    pub async fn dispatch_claimed(
        &self,
        fires: Vec<(Arc<Job>, i64, i64, String)>,
        start_for: Option<&str>,
    ) -> Result<(), TriggerError> {
        let prepared = self.prepare_claimed(fires, start_for).await?;
        self.send_prepared(prepared.into_send_list()).await
    }

    /// Sends fires made ready by [`Dispatcher::prepare_claimed`] ([`Prepared::into_send_list`]).
    ///
    /// When this admin's last written heartbeat is old enough that the others may count it gone
    /// (its writes stalled), or the send comes that long after a fire's time (the admin was
    /// paused, and its heartbeat may be written again just now), the lost-run watch of another
    /// admin may be sending these runs again ([`Dispatcher::send_unsent`]): the runs are claimed
    /// first ([`Store::claim_sends`]), and only those this admin got are sent, so an item does
    /// not run twice.
    pub async fn send_prepared(&self, mut list: SendList) -> Result<(), TriggerError> {
        let now = now_ms();
        if now - self.beat_at.load(Ordering::Relaxed) > BEAT_TRUSTED_MS
            || list
                .works
                .iter()
                .any(|w| now - w.planned_at > BEAT_TRUSTED_MS)
        {
            let ids: Vec<i64> = list.pending.iter().map(|(_, r)| r.id).collect();
            let claimed: HashSet<i64> = self
                .store
                .claim_sends(&ids, now)
                .await?
                .into_iter()
                .collect();
            list.pending.retain(|(_, r)| claimed.contains(&r.id));
            let kept: HashSet<i64> = list.pending.iter().map(|(w, _)| w.fire_id).collect();
            list.works.retain(|w| kept.contains(&w.fire_id));
            if list.pending.len() < ids.len() {
                tracing::warn!(
                    dropped = ids.len() - list.pending.len(),
                    "runs this admin sends late (or with its heartbeat stale) were sent or ended by another admin meanwhile, and are not sent again"
                );
            }
        }
        self.dispatch_runs(list).await?;
        Ok(())
    }

    /// The database half of [`Dispatcher::dispatch_claimed`]: plans the fires and stores their runs,
    /// without sending anything. The scheduler does this shortly before the planned time, so that
    /// at the planned millisecond only the requests are left to send.
    pub async fn prepare_claimed(
        &self,
        fires: Vec<(Arc<Job>, i64, i64, String)>,
        start_for: Option<&str>,
    ) -> Result<Prepared, TriggerError> {
        let mut groups: HashMap<i64, (Arc<Group>, Arc<Vec<Target>>)> = HashMap::new();
        let mut planned_fires = Vec::with_capacity(fires.len());
        let mut rows = Vec::with_capacity(fires.len());
        let mut failed_plans = Vec::new();
        for (job, fire_id, planned_at, _trigger_type) in fires {
            let (group, targets) = match groups.get(&job.group_id) {
                Some(g) => g.clone(),
                None => {
                    let group = Arc::new(self.store.get_group(job.group_id).await?);
                    let targets = Arc::new(self.targets(&group, None).await?);
                    groups.insert(job.group_id, (group.clone(), targets.clone()));
                    (group, targets)
                }
            };
            let (job_id, group_id) = (job.id, job.group_id);
            let (runs, note) = match self.plan(&job, &targets, &job.params, None).await {
                Ok((planned, note)) => {
                    let runs = planned.into_iter().map(|p| p.run).collect();
                    planned_fires.push(FireWork {
                        job,
                        group,
                        targets,
                        fire_id,
                        planned_at,
                        runs: vec![],
                    });
                    (runs, note)
                }
                // A job that cannot be planned (e.g. made invalid by an edit) fails this fire
                // visibly instead of leaving it open.
                Err(e) => {
                    failed_plans.push(fire_id);
                    (vec![], Some(Message::words(e.to_string())))
                }
            };
            rows.push(FireRuns {
                fire_id,
                job_id,
                group_id,
                runs,
                note,
            });
        }
        let (started, stored) = self
            .store
            .add_runs_to_fires(&rows, now_ms(), start_for)
            .await?;
        self.metrics
            .fires_total
            .fetch_add(started.len() as u64, Ordering::Relaxed);
        // Fires another admin took over are its own to dispatch.
        planned_fires.retain(|w| started.contains(&w.fire_id));
        failed_plans.retain(|id| started.contains(id));
        let mut by_fire: HashMap<i64, Vec<Run>> = HashMap::new();
        for r in stored {
            by_fire.entry(r.fire_id).or_default().push(r);
        }
        let mut empty = failed_plans;
        let works: Vec<FireWork> = planned_fires
            .into_iter()
            .filter_map(|mut w| match by_fire.remove(&w.fire_id) {
                Some(runs) => {
                    w.runs = runs;
                    Some(w)
                }
                None => {
                    empty.push(w.fire_id);
                    None
                }
            })
            .collect();
        if !empty.is_empty() {
            self.refresh_many(&empty).await?;
        }
        Ok(Prepared { works })
    }

    /// Decides the runs of a fire. Returns them and an optional note for the fire's message.
    async fn plan(
        &self,
        job: &Job,
        targets: &[Target],
        params: &str,
        shard: Option<(i64, i64)>,
    ) -> Result<(Vec<Planned>, Option<Message>), TriggerError> {
        let mode = ShardingMode::parse(&job.sharding_mode)
            .map_err(|r| TriggerError::Invalid(r.to_string()))?;
        let route = RouteStrategy::parse(&job.route_strategy)
            .map_err(|e| TriggerError::Invalid(e.to_string()))?;
        let base = |index: i64, total: i64, address: String, item_param: Option<String>| Planned {
            run: NewRun {
                shard_index: index,
                shard_total: total,
                attempt: 0,
                retries: 0,
                executor_address: address,
                handler: job.handler.clone(),
                params: params.to_string(),
                item_param,
            },
        };
        let unhealthy = self.unhealthy_set();

        // Retrying one shard: same index and total, any healthy executor.
        if let Some((index, total)) = shard {
            let address = self.pick_failover_target(targets, &unhealthy, None, index as usize);
            return Ok((
                vec![base(index, total, address.unwrap_or_default(), None)],
                None,
            ));
        }

        match mode {
            ShardingMode::Items => {
                let n = u32::try_from(job.sharding_total)
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| {
                        TriggerError::Invalid(format!(
                            "sharding_total {} must be at least 1",
                            job.sharding_total
                        ))
                    })?;
                let item_params = ItemParams::parse(&job.item_params, n)
                    .map_err(|e| TriggerError::Invalid(e.to_string()))?;
                let strategy = sharding::parse_strategy(&job.sharding_strategy)
                    .map_err(|e| TriggerError::Invalid(e.to_string()))?;
                // Executors that failed a dispatch lately are left out of the assignment when
                // others remain, so no item is planned onto a dead-but-registered executor.
                let healthy: Vec<&Target> = targets
                    .iter()
                    .filter(|t| !unhealthy.contains(&t.address))
                    .collect();
                let usable: Vec<&Target> = if healthy.is_empty() {
                    targets.iter().collect()
                } else {
                    healthy
                };
                let execs: Vec<ShardExecutor> = usable
                    .iter()
                    .map(|t| ShardExecutor {
                        address: t.address.clone(),
                        weight: t.weight,
                        labels: t.labels.clone(),
                    })
                    .collect();
                let assignment = strategy.assign(&execs, &job.name, n, &item_params);
                let mut runs = Vec::with_capacity(n as usize);
                for item in 0..n {
                    let address = assignment
                        .owner_of(item)
                        .map(|p| execs[p].address.clone())
                        .unwrap_or_default();
                    runs.push(base(
                        i64::from(item),
                        i64::from(n),
                        address,
                        item_params.get(item).map(str::to_string),
                    ));
                }
                Ok((runs, None))
            }
            _ if mode == ShardingMode::Broadcast || route == RouteStrategy::ShardingBroadcast => {
                let count = targets.len();
                let max_node = if job.max_node > 0 {
                    Some(job.max_node as usize)
                } else {
                    protocol::parse_max_node(params, count.max(1) as i32)
                        .ok()
                        .flatten()
                        .map(|m| m as usize)
                };
                let addresses: Vec<&str> = targets.iter().map(|t| t.address.as_str()).collect();
                let (chosen, note) = match max_node {
                    // With no run at all the fire fails; it says why, as a single run's does.
                    _ if count == 0 => (Vec::new(), Some(RouteError::NoExecutors.into())),
                    Some(m) if m < count => (
                        sharding::select_broadcast_targets(&addresses, &unhealthy, m),
                        Some(
                            Note::new(NoteKind::MaxNode)
                                .with("max", m)
                                .with("count", count)
                                .into(),
                        ),
                    ),
                    _ => ((0..count).collect(), None),
                };
                let total = chosen.len() as i64;
                let runs = chosen
                    .iter()
                    .enumerate()
                    .map(|(i, &p)| base(i as i64, total, targets[p].address.clone(), None))
                    .collect();
                Ok((runs, note))
            }
            _ => {
                let addresses: Vec<String> = targets.iter().map(|t| t.address.clone()).collect();
                let chosen = self.route_single(job, route, &addresses, &unhealthy).await;
                let (address, note) = match chosen {
                    Ok((a, log)) => (a, log.map(Message::words)),
                    Err(e) => (String::new(), Some(e.into())),
                };
                Ok((vec![base(0, 1, address, None)], note))
            }
        }
    }

    /// Chooses the executor of a non-sharded fire by the job's route strategy.
    async fn route_single(
        &self,
        job: &Job,
        route: RouteStrategy,
        addresses: &[String],
        unhealthy: &HashSet<String>,
    ) -> Result<(String, Option<String>), RouteError> {
        if addresses.is_empty() {
            return Err(RouteError::NoExecutors);
        }
        // Only FAILOVER and BUSYOVER call executors to choose; the others need no token, and a
        // group read per fire was a database round trip on every scheduled fire.
        let probes = matches!(route, RouteStrategy::Failover | RouteStrategy::Busyover);
        let group_token = if probes {
            match self.store.get_group(job.group_id).await {
                Ok(g) => self.token_for(&g),
                Err(_) => self.access_token.clone(),
            }
        } else {
            String::new()
        };
        let timeout = self.settings.dispatch_timeout();
        let job_id = job.id;
        let busy = route == RouteStrategy::Busyover;
        let http = &self.http;
        let token = group_token.as_str();
        let probe = |address: &str| {
            let address = address.to_string();
            async move {
                let (path, body) = if busy {
                    ("idleBeat", serde_json::json!({ "jobId": job_id }))
                } else {
                    ("beat", serde_json::json!({}))
                };
                let env =
                    post_envelope::<serde_json::Value>(http, &address, path, token, &body, timeout)
                        .await
                        .map_err(String::from)?;
                if env.is_success() {
                    Ok(())
                } else {
                    Err(env.msg.unwrap_or_else(|| format!("code {}", env.code)))
                }
            }
        };
        self.router
            .choose_probed(route, job_id, addresses, unhealthy, probe)
            .await
            .map(|c| (c.address, c.message))
    }

    /// Picks an executor for re-running `index` after `failed` failed: the next healthy executor
    /// after the failed one in address order (so items spread), else any other, else none.
    fn pick_failover_target(
        &self,
        targets: &[Target],
        unhealthy: &HashSet<String>,
        failed: Option<&str>,
        index: usize,
    ) -> Option<String> {
        if targets.is_empty() {
            return None;
        }
        let n = targets.len();
        let start = failed
            .and_then(|f| targets.iter().position(|t| t.address == f))
            .map_or(index % n, |p| (p + 1) % n);
        let order = (0..n).map(|k| &targets[(start + k) % n]);
        let mut fallback = None;
        for t in order {
            if Some(t.address.as_str()) == failed {
                continue;
            }
            if !unhealthy.contains(&t.address) {
                return Some(t.address.clone());
            }
            fallback.get_or_insert_with(|| t.address.clone());
        }
        fallback.or_else(|| failed.map(str::to_string))
    }

    /// Sends every run of the list concurrently, records all answers in one transaction, and
    /// fails over the runs whose executor did not answer.
    async fn dispatch_runs(&self, list: SendList) -> Result<(), StoreError> {
        let SendList {
            works,
            mut pending,
            checkpoint_jobs,
            own_fires,
        } = list;
        if works.is_empty() {
            return Ok(());
        }
        // Checkpoints go to failovers and retries (and to every run when the job resumes).
        let mut checkpoints: HashMap<i64, HashMap<i64, (String, i64)>> = HashMap::new();
        for job_id in checkpoint_jobs {
            let cps = self.store.checkpoints(job_id).await?;
            checkpoints.insert(
                job_id,
                cps.into_iter()
                    .map(|c| (c.item, (c.value, c.run_id)))
                    .collect(),
            );
        }
        // A failover or retry continues from what its own fire saved; a checkpoint left by an
        // earlier fire would make it skip work this fire never did, unless the job resumes.
        let mut own_runs: HashMap<i64, HashSet<i64>> = HashMap::new();
        for fire_id in own_fires {
            let ids = self.store.fire_runs(fire_id).await?;
            own_runs.insert(fire_id, ids.into_iter().map(|r| r.id).collect());
        }
        let max_rounds = works.iter().map(|w| w.targets.len()).max().unwrap_or(0);
        let mut to_refresh: HashSet<i64> = HashSet::new();
        // Each round sends the pending runs; runs whose executor did not answer get a new attempt
        // on another executor in the next round, at most once per executor.
        for round in 0..=max_rounds {
            if pending.is_empty() {
                break;
            }
            let sent_at = now_ms();
            // Each run's request, encoded once: sent alone (shared, not copied) or in a batch.
            let bodies: Vec<Result<Bytes, CallError>> = pending
                .iter()
                .map(|(w, run)| {
                    let checkpoint = checkpoints
                        .get(&w.job.id)
                        .and_then(|c| c.get(&run.shard_index))
                        .filter(|(_, saved_by)| {
                            w.job.resume_checkpoint != 0
                                || (run.attempt > 0
                                    && own_runs
                                        .get(&w.fire_id)
                                        .is_some_and(|ids| ids.contains(saved_by)))
                        })
                        .map(|(value, _)| value.clone());
                    let req = self.trigger_request(&w.job, w.fire_id, run, checkpoint);
                    serde_json::to_vec(&req)
                        .map(Bytes::from)
                        .map_err(|e| CallError {
                            transport: true,
                            refused: false,
                            message: Note::new(NoteKind::CannotEncode).with("detail", e).into(),
                        })
                })
                .collect();
            // What an answer means for pending run `i`: its update is handed to the results
            // writer as it comes, which keeps an acceptance back for the run's result to write
            // both in one row update; an unanswered request that may fail over is kept for the
            // failover, which stores it with the new attempt.
            let settle = |i: usize,
                          result: Result<Envelope<serde_json::Value>, CallError>,
                          took: std::time::Duration,
                          started_ms: i64| {
                let (w, run) = &pending[i];
                let (state, code, msg, transport) = answer(result, &run.executor_address);
                let update = RunUpdate {
                    run_id: run.id,
                    fire_id: w.fire_id,
                    state,
                    executor_address: run.executor_address.clone(),
                    trigger_code: code,
                    trigger_msg: msg,
                    at: started_ms,
                    fire_sent_at: sent_at,
                };
                let kept = if transport && fails_over_unanswered(w, run) {
                    Some(update)
                } else {
                    self.results.sent(update);
                    None
                };
                (state, transport, took, started_ms, kept)
            };
            // A bounded number in flight per executor: the requests reuse the pooled keep-alive
            // connections instead of opening one connection per run of a burst (10 000 fires due
            // in the same millisecond opened thousands of sockets), and an executor that does not
            // answer only holds up its own runs.
            let mut by_executor: HashMap<&str, Vec<usize>> = HashMap::new();
            for (i, (_, run)) in pending.iter().enumerate() {
                by_executor
                    .entry(run.executor_address.as_str())
                    .or_default()
                    .push(i);
            }
            let per_lane =
                (DISPATCH_CONCURRENCY / by_executor.len().max(1)).max(MIN_LANE_CONCURRENCY);
            let (bodies, settle, runs) = (&bodies, &settle, &pending);
            let lanes = by_executor.into_values().map(|idx| {
                let requests = self.requests_of_lane(runs, bodies, idx);
                let in_flight = if requests.iter().any(|(group, _)| group.len() > 1) {
                    BATCHES_IN_FLIGHT
                } else {
                    per_lane
                };
                // Collected first: a stream over the lazy iterator trips the compiler's Send check.
                let sends: Vec<_> = requests
                    .into_iter()
                    .map(|(group, token)| async move {
                        let (w, run) = &runs[group[0]];
                        let started = Instant::now();
                        let started_ms = now_ms();
                        let answers = self
                            .send_runs(&w.group, &run.executor_address, &token, &group, bodies)
                            .await;
                        let took = started.elapsed();
                        group
                            .into_iter()
                            .zip(answers)
                            .map(|(i, result)| (i, settle(i, result, took, started_ms)))
                            .collect::<Vec<_>>()
                    })
                    .collect();
                async move {
                    futures::stream::iter(sends)
                        .buffered(in_flight)
                        .collect::<Vec<_>>()
                        .await
                }
            });
            let lanes = futures::future::join_all(lanes).await;
            let mut results: Vec<Option<_>> = (0..pending.len()).map(|_| None).collect();
            for (i, r) in lanes.into_iter().flatten().flatten() {
                results[i] = Some(r);
            }
            let mut first_sent: HashMap<i64, i64> = HashMap::new();
            let mut failed = Vec::new();
            let mut slow = Vec::new();
            for ((w, run), slot) in pending.iter().zip(results) {
                let (state, transport, took, started_ms, kept) = slot.expect("every send answered");
                let first = first_sent.entry(w.fire_id).or_insert(started_ms);
                *first = (*first).min(started_ms);
                self.metrics
                    .dispatch_latency
                    .observe(took.as_millis() as u64);
                if took.as_millis() > SLOW_REQUEST_MS {
                    slow.push(w.job.id);
                }
                if state == RunState::Failed {
                    self.metrics
                        .dispatch_failures
                        .fetch_add(1, Ordering::Relaxed);
                    // An executor that answered with a refusal is alive (e.g. DISCARD_LATER);
                    // only an executor that did not answer at all is avoided.
                    if transport && !run.executor_address.is_empty() {
                        self.mark_unhealthy(&run.executor_address);
                    }
                    to_refresh.insert(w.fire_id);
                    failed.push((w.clone(), run.clone(), kept));
                }
            }
            self.count_slow(&slow);
            // Failover: only transport failures of sharded fires move to another executor; a
            // refusal by a live executor is the job's business (block strategy, unknown handler).
            // An unanswered request with nowhere to go is stored as it is, with the others.
            let unhealthy = self.unhealthy_set();
            let mut next: Vec<(Arc<FireWork>, i64, NewRun, RunUpdate)> = Vec::new();
            for (w, run, kept) in failed {
                let Some(update) = kept else { continue };
                let target = self
                    .pick_failover_target(
                        &w.targets,
                        &unhealthy,
                        Some(&run.executor_address),
                        run.shard_index as usize,
                    )
                    .filter(|a| *a != run.executor_address && !unhealthy.contains(a));
                let Some(address) = target else {
                    self.results.sent(update);
                    continue;
                };
                next.push((w, run.id, NewRun::next_attempt(&run, address), update));
            }
            // The answers, with each fire's send time, are stored before this round ends, so a
            // later round (the failovers below) keeps the first send time; without one, the
            // acceptances may wait for their results (`results::ANSWER_HOLD`), but the failed
            // answers are stored before their fires are refreshed below.
            let stored = if next.is_empty() {
                self.results.flush().await
            } else {
                self.results.flush_all().await
            };
            if !stored {
                return Err(StoreError::NotStored(
                    "the answers to run requests were not stored",
                ));
            }
            if round == 0 {
                // The fire row keeps the time its batch started going out; the metric records
                // when each fire's first request left.
                for w in &works {
                    let at = first_sent.get(&w.fire_id).copied().unwrap_or(sent_at);
                    self.metrics
                        .trigger_lateness
                        .observe((at - w.planned_at).max(0) as u64);
                }
            }
            // The unanswered request and its new attempt are stored together: stored apart, a
            // sibling's result in between made the fire look failed (and alarmed) before its
            // failover.
            pending = Vec::with_capacity(next.len());
            let mut next = next.into_iter();
            while let Some((w, replaced, new, update)) = next.next() {
                let stored: Result<Option<Vec<Run>>, StoreError> = async {
                    let Some(fire) = self.store.get_fire(w.fire_id).await? else {
                        return Ok(None);
                    };
                    let ids = self
                        .store
                        .add_attempts(
                            &fire,
                            &[(replaced, new)],
                            Replacing::Unanswered(std::slice::from_ref(&update)),
                            now_ms(),
                        )
                        .await?;
                    Ok(Some(self.store.runs_by_ids(&ids).await?))
                }
                .await;
                match stored {
                    Ok(Some(runs)) => pending.extend(runs.into_iter().map(|r| (w.clone(), r))),
                    Ok(None) => self.results.sent(update),
                    Err(e) => {
                        // The answers are not lost with the failover: they go the usual way, so
                        // their runs end failed instead of staying `triggering` until the
                        // lost-run watch finds them. An answer already stored with its new
                        // attempt changes nothing again (it moves a run only out of
                        // `triggering`, and writes the same send fields).
                        self.results.sent(update);
                        for (_, _, _, update) in next {
                            self.results.sent(update);
                        }
                        return Err(e);
                    }
                }
            }
        }
        if !to_refresh.is_empty() {
            let ids: Vec<i64> = to_refresh.into_iter().collect();
            self.refresh_many(&ids).await?;
        }
        Ok(())
    }

    /// How one executor's runs of a dispatch round go out: each group of pending runs is one
    /// request with the token it carries. Runs for an executor that takes batches
    /// ([`protocol::ExecutorMeta::run_batch`]) share requests, up to the configured number of
    /// runs and [`MAX_BATCH_BYTES`] each; any other run is a group of its own.
    fn requests_of_lane(
        &self,
        pending: &[(Arc<FireWork>, Run)],
        bodies: &[Result<Bytes, CallError>],
        lane: Vec<usize>,
    ) -> Vec<(Vec<usize>, String)> {
        let most = self.settings.dispatch_batch;
        let mut out = Vec::new();
        // Batches still open, by token (one executor may serve groups with different tokens).
        let mut open: HashMap<String, (Vec<usize>, usize)> = HashMap::new();
        for i in lane {
            let (w, run) = &pending[i];
            let token = self.token_for(&w.group);
            let batches = w
                .targets
                .iter()
                .any(|t| t.run_batch && t.address == run.executor_address);
            let len = match &bodies[i] {
                Ok(body) if most > 1 && batches => body.len(),
                _ => {
                    out.push((vec![i], token));
                    continue;
                }
            };
            let (group, bytes) = open.entry(token.clone()).or_default();
            if !group.is_empty() && (group.len() >= most || *bytes + len > MAX_BATCH_BYTES) {
                out.push((std::mem::take(group), token.clone()));
                *bytes = 0;
            }
            group.push(i);
            *bytes += len + 1;
        }
        out.extend(open.into_iter().map(|(token, (group, _))| (group, token)));
        out
    }

    /// Sends the runs `group` (indexes into `bodies`, all for one executor) and gives each its
    /// answer, in order: one run alone goes to `/run`, more go in one request to the batch
    /// route, whose answer holds one envelope per run. An answer for the whole batch (a refusal,
    /// or no answer at all) is each run's.
    async fn send_runs(
        &self,
        group_of_job: &Group,
        address: &str,
        token: &str,
        group: &[usize],
        bodies: &[Result<Bytes, CallError>],
    ) -> Vec<Result<Envelope<serde_json::Value>, CallError>> {
        if address.is_empty() {
            let none = CallError {
                transport: true,
                refused: false,
                message: RouteError::NoExecutors.into(),
            };
            return vec![Err(none); group.len()];
        }
        let timeout = self.settings.dispatch_timeout();
        if let [i] = group {
            let body = match &bodies[*i] {
                Ok(body) => body.clone(),
                Err(e) => return vec![Err(e.clone())],
            };
            self.count_request();
            let route = if group_of_job.generation == "V35" {
                Generation::V35
            } else {
                Generation::Classic
            }
            .trigger_route();
            return vec![
                post_envelope_bytes(&self.http, address, route, token, body, timeout).await,
            ];
        }
        let mut body = Vec::with_capacity(
            2 + group
                .iter()
                .map(|&i| bodies[i].as_ref().map_or(0, |b| b.len() + 1))
                .sum::<usize>(),
        );
        body.push(b'[');
        for (n, &i) in group.iter().enumerate() {
            if n > 0 {
                body.push(b',');
            }
            body.extend_from_slice(bodies[i].as_ref().expect("only encoded runs are batched"));
        }
        body.push(b']');
        let body = Bytes::from(body);
        self.count_request();
        let answer = post_envelope_bytes::<Vec<Envelope<serde_json::Value>>>(
            &self.http,
            address,
            protocol::RUN_BATCH_ROUTE,
            token,
            body,
            timeout,
        )
        .await;
        match answer {
            Ok(env) if env.is_success() => match env.payload {
                Some(answers) if answers.len() == group.len() => {
                    answers.into_iter().map(Ok).collect()
                }
                other => {
                    let e = CallError {
                        transport: false,
                        refused: false,
                        message: Note::new(NoteKind::BatchAnswers)
                            .with(
                                "url",
                                format_args!(
                                    "{}{}",
                                    normalize_address(address),
                                    protocol::RUN_BATCH_ROUTE
                                ),
                            )
                            .with("got", other.map_or(0, |a| a.len()))
                            .with("runs", group.len())
                            .into(),
                    };
                    vec![Err(e); group.len()]
                }
            },
            Ok(refused) => {
                let whole = Envelope {
                    code: refused.code,
                    msg: refused.msg,
                    payload: None,
                };
                vec![Ok(whole); group.len()]
            }
            Err(e) => vec![Err(e); group.len()],
        }
    }

    fn count_request(&self) {
        self.metrics
            .dispatch_requests
            .fetch_add(1, Ordering::Relaxed);
    }

    /// The protocol request for one run.
    fn trigger_request(
        &self,
        job: &Job,
        fire_id: i64,
        run: &Run,
        checkpoint: Option<String>,
    ) -> TriggerRequest {
        TriggerRequest {
            job_id: job.id,
            executor_handler: job.handler.clone(),
            executor_params: run.params.clone(),
            executor_block_strategy: job.block_strategy.clone(),
            executor_timeout: job.timeout_s as i32,
            log_id: run.id,
            log_date_time: run.log_date_time,
            glue_type: job.glue_type.clone(),
            glue_source: job.glue_source.clone(),
            glue_updatetime: job.glue_updated_at,
            broadcast_index: run.shard_index as i32,
            broadcast_total: run.shard_total as i32,
            checkpoint,
            idempotency_key: Some(format!("{}:{}:{}", job.id, fire_id, run.shard_index)),
            item_param: run.item_param.clone(),
        }
    }

    /// Re-dispatches the given ended runs of a fire as new attempts, as an operator asked ("retry
    /// the failed items"): the job's retries are left for the runs' own failures.
    pub async fn redispatch(&self, fire: &Fire, runs: &[Run]) -> Result<Vec<i64>, TriggerError> {
        self.replace_runs(fire, runs, Attempt::Operator).await
    }

    /// Re-dispatches the given failed runs of a fire as the job's retries of their items (each
    /// new run counts one more retry than the run it replaces).
    pub async fn retry(&self, fire: &Fire, runs: &[Run]) -> Result<Vec<i64>, TriggerError> {
        self.replace_runs(fire, runs, Attempt::Retry).await
    }

    /// Declares open runs lost and runs their items elsewhere at once, as new attempts with the
    /// same item and total. Runs whose result arrived meanwhile are left alone. When their
    /// executor is at fault (it died), it is avoided until it beats again; a run its admin left
    /// behind is no fault of its executor. Returns the ids of the new runs.
    pub async fn fail_over_lost(
        &self,
        fire: &Fire,
        runs: &[Run],
        reason: &Message,
        executor_at_fault: bool,
    ) -> Result<Vec<i64>, TriggerError> {
        if executor_at_fault {
            for r in runs {
                self.mark_unhealthy(&r.executor_address);
            }
        }
        self.replace_runs(fire, runs, Attempt::Failover(reason))
            .await
    }

    /// Sends, as new attempts, runs that an admin stored and died before sending (their executor
    /// said it is not running the job): the job never ran for them, so sending them now runs
    /// each item once, late, where ending them lost would drop the fire. They go to the executor
    /// they were routed to while it is registered (it is not at fault), else as a failover
    /// does. The old runs end `lost` with `reason`. Returns the ids of the new runs.
    pub async fn send_unsent(
        &self,
        fire: &Fire,
        runs: &[Run],
        reason: &Message,
    ) -> Result<Vec<i64>, TriggerError> {
        self.replace_runs(fire, runs, Attempt::Unsent(reason)).await
    }

    async fn replace_runs(
        &self,
        fire: &Fire,
        runs: &[Run],
        why: Attempt<'_>,
    ) -> Result<Vec<i64>, TriggerError> {
        if runs.is_empty() {
            return Ok(vec![]);
        }
        let job = self.store.get_job(fire.job_id).await?;
        let group = self.store.get_group(job.group_id).await?;
        let targets = self.targets(&group, None).await?;
        let unhealthy = self.unhealthy_set();
        let pairs: Vec<(i64, NewRun)> = runs
            .iter()
            .map(|r| {
                let keep = matches!(why, Attempt::Unsent(_))
                    && targets.iter().any(|t| t.address == r.executor_address);
                let address = if keep {
                    r.executor_address.clone()
                } else {
                    self.pick_failover_target(&targets, &unhealthy, None, r.shard_index as usize)
                        .unwrap_or_default()
                };
                let mut next = NewRun::next_attempt(r, address);
                next.retries += i64::from(matches!(why, Attempt::Retry));
                (r.id, next)
            })
            .collect();
        let replacing = match why {
            Attempt::Failover(reason) => Replacing::Lost(reason),
            Attempt::Unsent(reason) => Replacing::Unsent(reason),
            Attempt::Operator | Attempt::Retry => Replacing::Ended,
        };
        let ids = self
            .store
            .add_attempts(fire, &pairs, replacing, now_ms())
            .await?;
        if ids.is_empty() {
            return Ok(ids);
        }
        let stored = self.store.runs_by_ids(&ids).await?;
        let work = FireWork {
            job: Arc::new(job),
            group: Arc::new(group),
            targets: Arc::new(targets),
            fire_id: fire.id,
            planned_at: now_ms(),
            runs: stored,
        };
        self.dispatch_runs(SendList::new(vec![work])).await?;
        Ok(ids)
    }

    /// Asks an executor to stop a job (XXL-JOB's `/kill` stops every run of that job there).
    pub async fn kill(&self, run: &Run) -> Result<String, String> {
        let group = self
            .store
            .get_group(run.group_id)
            .await
            .map_err(|e| e.to_string())?;
        let body = protocol::KillRequest { job_id: run.job_id };
        let env = post_envelope::<serde_json::Value>(
            &self.http,
            &run.executor_address,
            "kill",
            &self.token_for(&group),
            &body,
            self.settings.dispatch_timeout(),
        )
        .await?;
        if env.is_success() {
            Ok(env.msg.unwrap_or_else(|| "kill sent".to_string()))
        } else {
            Err(env
                .msg
                .unwrap_or_else(|| format!("executor answered code {}", env.code)))
        }
    }

    /// Reads a run's log from its executor (`/log`, paged from `from_line`).
    pub async fn read_log(&self, run: &Run, from_line: i32) -> Result<protocol::LogResult, String> {
        let group = self
            .store
            .get_group(run.group_id)
            .await
            .map_err(|e| e.to_string())?;
        let body = protocol::LogRequest {
            log_id: run.id,
            log_date_time: run.log_date_time,
            from_line_num: from_line.max(1),
        };
        let env = post_envelope::<protocol::LogResult>(
            &self.http,
            &run.executor_address,
            "log",
            &self.token_for(&group),
            &body,
            self.settings.dispatch_timeout(),
        )
        .await?;
        if !env.is_success() {
            return Err(env
                .msg
                .unwrap_or_else(|| format!("executor answered code {}", env.code)));
        }
        env.payload
            .ok_or_else(|| "executor answered without a log".to_string())
    }

    /// [`Dispatcher::refresh`] for several fires.
    /// Returns the fires that became final.
    pub async fn refresh_many(&self, fire_ids: &[i64]) -> Result<Vec<FireEnded>, StoreError> {
        let ended = self.store.refresh_fire_states(fire_ids, now_ms()).await?;
        self.announce(&ended);
        Ok(ended)
    }

    /// Hands fires that ended to the follow-up task (retries, alarms, child jobs, FIX_DELAY).
    pub fn announce(&self, ended: &[FireEnded]) {
        for e in ended {
            let _ = self.events.send(*e);
        }
    }

    /// Recomputes a fire's state after its runs changed, and announces it when it became final.
    pub async fn refresh(&self, fire_id: i64) -> Result<Option<FireState>, StoreError> {
        Ok(self
            .refresh_many(&[fire_id])
            .await?
            .first()
            .map(|e| e.state))
    }
}

/// What an answer to a run request means for the run: (state, trigger code, message, whether
/// the executor did not answer at all).
fn answer(
    result: Result<Envelope<serde_json::Value>, CallError>,
    address: &str,
) -> (RunState, i64, Message, bool) {
    match result {
        // No message: the row keeps none for the usual acceptance and reads it back as
        // `accepted by <address>` (`store::RUN_COLS`), so none is built per run here.
        Ok(env) if env.is_success() => (RunState::Running, 200, Message::default(), false),
        Ok(env) => (
            RunState::Failed,
            i64::from(env.code),
            Note::new(NoteKind::RefusedBy)
                .with("address", address)
                .with("detail", env.msg.unwrap_or_default())
                .into(),
            false,
        ),
        Err(e) => (RunState::Failed, 500, e.message, e.transport),
    }
}

/// Whether a run whose request gets no answer moves to another executor (shard failover): a run
/// of a sharded fire, or one planned without an executor, where the fire has targets.
fn fails_over_unanswered(w: &FireWork, run: &Run) -> bool {
    (is_sharded(&w.job) || run.executor_address.is_empty()) && !w.targets.is_empty()
}

fn is_sharded(job: &Job) -> bool {
    job.sharding_mode != ShardingMode::None.as_str()
        || job.route_strategy == RouteStrategy::ShardingBroadcast.as_str()
}

/// Registered addresses end with `/` (XXL-JOB style); requests append the route to it.
pub fn normalize_address(a: &str) -> String {
    let a = a.trim();
    if a.ends_with('/') {
        a.to_string()
    } else {
        format!("{a}/")
    }
}

/// Why a request to an executor failed.
#[derive(Debug, Clone, PartialEq)]
pub struct CallError {
    /// No answer at all (refused connection, timeout): the executor may be dead.
    pub transport: bool,
    /// The connection was refused: no process listens at the address any more.
    pub refused: bool,
    pub message: Message,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message.text)
    }
}

impl From<CallError> for String {
    fn from(e: CallError) -> String {
        e.message.text
    }
}

/// POSTs a protocol request to `{address}{path}` and reads the envelope. A non-200 status or a
/// body that is no envelope is an answer of a live executor; no answer is a transport error.
pub async fn post_envelope<T: serde::de::DeserializeOwned>(
    http: &ExecutorHttp,
    address: &str,
    path: &str,
    token: &str,
    body: &(impl serde::Serialize + ?Sized),
    timeout: std::time::Duration,
) -> Result<Envelope<T>, CallError> {
    let body = serde_json::to_vec(body).map_err(|e| CallError {
        transport: true,
        refused: false,
        message: Note::new(NoteKind::RequestFailed)
            .with("url", format_args!("{}{path}", normalize_address(address)))
            .with("detail", format_args!("cannot encode the request: {e}"))
            .into(),
    })?;
    post_envelope_bytes(http, address, path, token, Bytes::from(body), timeout).await
}

/// [`post_envelope`] with the request already encoded.
async fn post_envelope_bytes<T: serde::de::DeserializeOwned>(
    http: &ExecutorHttp,
    address: &str,
    path: &str,
    token: &str,
    body: Bytes,
    timeout: std::time::Duration,
) -> Result<Envelope<T>, CallError> {
    let url = format!("{}{path}", normalize_address(address));
    let answered = |note: Note| CallError {
        transport: false,
        refused: false,
        message: note.with("url", &url).into(),
    };
    let (status, bytes) = http
        .post_json(&url, token, body, timeout)
        .await
        .map_err(|e| CallError {
            transport: true,
            refused: e.kind == NoteKind::ConnectionRefused,
            message: Note::new(e.kind)
                .with("url", &url)
                .with("detail", e.detail)
                .into(),
        })?;
    if !status.is_success() {
        return Err(answered(
            Note::new(NoteKind::HttpStatus).with("status", status).with(
                "body",
                String::from_utf8_lossy(&bytes[..bytes.len().min(500)]),
            ),
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        answered(Note::new(NoteKind::NotEnvelope).with("detail", e).with(
            "body",
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)]),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::{answer, CallError};
    use crate::model::RunState;
    use crate::note::Message;
    use shardline_executor::protocol::Envelope;

    /// An acceptance carries no message (the row keeps none; reads give `accepted by <address>`),
    /// any other answer says what it was and from whom.
    #[test]
    fn an_accepted_answer_carries_no_message() {
        let at = "http://10.0.0.1:9999/";
        assert_eq!(
            answer(Ok(Envelope::success(None)), at),
            (RunState::Running, 200, Message::default(), false)
        );
        assert_eq!(
            answer(Ok(Envelope::fail("busy")), at),
            (
                RunState::Failed,
                500,
                Message {
                    text: "refused by http://10.0.0.1:9999/: busy".to_string(),
                    note: Some(
                        r#"{"code":"refused_by","params":{"address":"http://10.0.0.1:9999/","detail":"busy"}}"#
                            .to_string()
                    ),
                },
                false
            )
        );
        let unanswered = CallError {
            transport: true,
            refused: true,
            message: Message::words("connection refused"),
        };
        assert_eq!(
            answer(Err(unanswered), at),
            (
                RunState::Failed,
                500,
                Message::words("connection refused"),
                true
            )
        );
    }
}
