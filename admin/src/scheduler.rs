//! The scheduler: decides when jobs fire and hands each fire to the dispatcher at its millisecond.
//!
//! Each pass (about once a second) claims the fires due within the look-ahead window
//! ([`Store::claim_due`]: fire rows with an owner and a lease, inserted in the same transaction that
//! advances the job) and puts them in an in-memory timer ordered by planned time. The loop sleeps
//! until the earliest one and dispatches it then, not at the next whole second. A pass also takes
//! over fires whose owner's lease ran out (an admin killed with -9), and starts due retries.
//!
//! [`plan_job`] is the pure step: given a job and the time, which fires it gets and its next planned
//! time; the misfire policy lives there and in [`Scheduler::dispatch`].

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Settings;
use crate::model::{now_ms, Job, MisfireStrategy, ScheduleType, TriggerType};
use crate::note::{Note, NoteKind};
use crate::schedule::{Schedule, ScheduleCache, ScheduleError};
use crate::store::{ClaimedFire, JobPlan, PlannedFire, Store, StoreError};
use crate::trigger::Dispatcher;

/// How far ahead fires are claimed and put in the timer.
pub const LOOKAHEAD_MS: i64 = 6_500;
/// A job is claimed once its next fire is due within this time, and then gets every fire up to
/// [`LOOKAHEAD_MS`]: a job firing every second is claimed (its row locked and rewritten) for at
/// least 2–3 fires at a time (more when the pass comes later in its cycle), not on every pass
/// for one. On MariaDB the jobs' advance was about a
/// tenth of the server's work per fire. Jobs that fire together are claimed together, and a pass
/// over 10 000 of them on a busy MariaDB took up to 3.7 s: with 2.5 s its last batches claimed
/// fires already due, which went out late; 4 s leaves room for such a pass.
const CLAIM_WITHIN_MS: i64 = 4_000;
/// How long after its planned time a claimed fire stays with its owner before another admin may
/// take it over.
pub const LEASE_MS: i64 = 3_000;
/// Most fires one job gets in one pass (a job firing every 100 ms still keeps up).
const MAX_FIRES_PER_JOB: usize = 64;
/// How long before its planned time a fire is prepared (its runs planned and stored), so that at
/// the planned millisecond only the requests are left to send, while preparations are quick (the
/// lead grows while they are not, up to [`MAX_PREPARE_MS`]). Routing sees the executors as they
/// are when the fire is prepared.
pub const PREPARE_MS: i64 = 500;
/// The longest lead a fire is prepared with. A preparation that takes long (10 000 fires on a busy
/// MariaDB took 260–580 ms) moves the lead up to twice its time, so the next ones are ready at
/// their millisecond; with 500 ms fixed, every preparation past 480 ms made its whole second late
/// by the overrun. The lead stays below the time fires are claimed ahead ([`CLAIM_WITHIN_MS`]
/// less a pass), so claimed fires are in the timer before they are handed out.
pub const MAX_PREPARE_MS: i64 = 1_500;
/// How long before its planned time a prepared fire's job is checked for edits, so that the check
/// is not part of the fire's lateness. An edit made within this last moment applies from the
/// next fire; an edit before it takes the fire back ([`Store::cancel_scheduled`] drops only the
/// prepared fires whose check is still to come).
pub const CHECK_AHEAD_MS: i64 = 20;
/// Jobs claimed per transaction.
const CLAIM_BATCH: i64 = 1_000;
/// How late the latest sends may start before a pass stops claiming. An admin offered more fires
/// than it can send claims them all the same (a claim costs less than a dispatch) and falls ever
/// further behind: at 10 000 fires a second on two cores the sends ran 8 s late and the queue of
/// claimed fires grew without bound. Unclaimed jobs wait instead, and their misfire policy sheds
/// what the admin could not send in time. A gate of 1 s let the sends lag 1.2–1.7 s (p50) there;
/// 250 ms, 0.7–0.8 s, at 2 % fewer runs a second.
///
/// The lag is counted from when a fire could first go ([`could_go_at`]): its planned time, or, if
/// it entered the timer less than a preparation lead before that (or after it), its entry plus
/// the lead, the time an on-time fire is given to be prepared. Counted from the planned time
/// alone, the gate kept itself shut: fires claimed late because the gate was shut were sent
/// "late", which shut it again, and on MariaDB at 10 000 fires a second the claims settled 4–5 s
/// behind with a third of the fires shed as misfires while the database and the admin had time
/// to spare. Counted from the entry into the timer without the lead, the preparation of fires
/// claimed late shut the gate by itself (lags of 271–475 ms from it alone at 20 000 fires a second
/// on SQLite).
const MAX_SEND_LAG_MS: i64 = 250;

/// Which fires a due job gets now and when it is due next.
///
/// `now` is the current time, `horizon` the end of the look-ahead window. A job whose planned time
/// is more than `misfire_threshold` in the past misfired (the admin was down or overloaded): it
/// fires once now (FIRE_ONCE_NOW) or not at all (DO_NOTHING), however many fires were missed, and
/// its schedule resumes from now.
pub fn plan_job(
    job: &Job,
    now: i64,
    horizon: i64,
    misfire_threshold: i64,
    default_tz: &str,
) -> JobPlan {
    plan_parsed(
        job,
        &Schedule::of_job(job, default_tz),
        now,
        horizon,
        misfire_threshold,
    )
}

/// [`plan_job`] with the job's schedule already parsed (the scheduler keeps parsed schedules).
fn plan_parsed(
    job: &Job,
    schedule: &Result<Schedule, ScheduleError>,
    now: i64,
    horizon: i64,
    misfire_threshold: i64,
) -> JobPlan {
    let Some(next) = job.next_fire_at else {
        return JobPlan::default();
    };
    let schedule = match schedule {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(job_id = job.id, error = %e.refusal, "invalid schedule; job stopped");
            return JobPlan {
                stop: true,
                ..JobPlan::default()
            };
        }
    };
    let regular = match ScheduleType::parse(&job.schedule_type) {
        Ok(ScheduleType::FixRate) => TriggerType::FixRate,
        Ok(ScheduleType::FixDelay) => TriggerType::FixDelay,
        _ => TriggerType::Cron,
    };
    let fix_delay = matches!(schedule, Schedule::FixDelay(_));
    if next < now - misfire_threshold {
        let fires = if job.misfire_strategy == MisfireStrategy::FireOnceNow.as_str() {
            vec![PlannedFire {
                planned_at: now,
                trigger_type: TriggerType::Misfire.as_str(),
            }]
        } else {
            vec![]
        };
        let next_fire_at = if fix_delay && !fires.is_empty() {
            None
        } else {
            schedule.first_after(now)
        };
        let stop = next_fire_at.is_none() && (fires.is_empty() || !fix_delay);
        return JobPlan {
            fires,
            next_fire_at,
            stop,
        };
    }
    let mut fires = Vec::new();
    let mut t = Some(next);
    while let Some(at) = t {
        if at > horizon || fires.len() >= MAX_FIRES_PER_JOB {
            break;
        }
        fires.push(PlannedFire {
            planned_at: at,
            trigger_type: regular.as_str(),
        });
        if fix_delay {
            // The next FIX_DELAY fire is planned when this one finishes.
            return JobPlan {
                fires,
                next_fire_at: None,
                stop: false,
            };
        }
        t = schedule.next_after_planned(at);
        // A fire late but within the threshold (the admin was briefly away) happens once; the
        // ones missed meanwhile are not replayed, the schedule resumes from now.
        while let Some(missed) = t.filter(|x| *x <= now) {
            t = schedule.next_after_planned(missed);
        }
    }
    JobPlan {
        stop: t.is_none(),
        fires,
        next_fire_at: t,
    }
}

/// A claimed fire waiting for its time, keyed in the timer by (planned time, fire id).
#[derive(Clone)]
struct Due {
    job_id: i64,
    trigger_type: String,
    /// When the fire was claimed: a job stopped after this was stopped by someone, one stopped
    /// before it by this very claim (its schedule ended with this fire).
    claimed_at: i64,
    /// When the fire entered the timer: a fire claimed late could not go before this, and its
    /// lateness until then, or its preparation within the lead after, is not the sends' (see
    /// [`could_go_at`]).
    queued_at: i64,
}

/// Whether a fire claimed at `claimed_at` of the job as it is now is to be dispatched: not when
/// the job was stopped since, but a job the claim itself stopped (its schedule has no time after
/// this fire: `next_fire_at` cleared, no edit since) still gets this last fire. A claim is
/// stamped strictly after its job's last edit, so a job created or edited in the claim's own
/// millisecond still counts as unchanged since.
fn job_runs_fire(job: &Job, claimed_at: i64) -> bool {
    job.enabled != 0 || (job.next_fire_at.is_none() && job.updated_at < claimed_at)
}

/// When a fire planned at `planned_at`, in a batch whose latest fire entered the timer at
/// `queued_by` and was handed out with preparation lead `lead`, could first go: fires in the
/// timer at least a lead before their time are due at their planned time; one that came later is
/// allowed the same lead for its preparation, counted from its entry, so only a send later than
/// that counts as the sends being behind ([`MAX_SEND_LAG_MS`]).
fn could_go_at(planned_at: i64, queued_by: i64, lead: i64) -> i64 {
    planned_at.max(queued_by.saturating_add(lead))
}

/// The preparation lead after one that took `took_ms` with lead `old` ([`Scheduler::prepared_in`]).
fn next_prepare_lead(old: i64, took_ms: i64) -> i64 {
    (2 * took_ms)
        .max(old - old / 10)
        .clamp(PREPARE_MS, MAX_PREPARE_MS)
}

/// Sleeps until the wall-clock millisecond `at` (returns at once if it has passed).
async fn sleep_until_ms(at: i64) {
    let wait = at - now_ms();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
}

/// The per-node scheduler.
pub struct Scheduler {
    store: Store,
    dispatcher: Arc<Dispatcher>,
    settings: Arc<Settings>,
    node: String,
    /// Claimed fires by (planned time, fire id).
    timer: Mutex<BTreeMap<(i64, i64), Due>>,
    /// Wakes the timer loop when fires were added (they may be due before its next wake).
    timer_added: tokio::sync::Notify,
    /// Dispatch slots: most jobs use the fast pool; jobs whose requests keep being slow
    /// ([`Dispatcher::is_slow`]) use the slow one, so a dead executor cannot hold up everyone
    /// else's fires.
    fast: Arc<Semaphore>,
    slow: Arc<Semaphore>,
    /// Parsed schedules of the jobs claimed lately.
    schedules: ScheduleCache,
    /// How late the latest prepared fires started going out (ms after their planned time), and
    /// when.
    send_lag_ms: AtomicI64,
    send_lag_at: AtomicI64,
    /// How long before their time fires are handed out for preparation: [`PREPARE_MS`], or more
    /// while preparations take long (see [`MAX_PREPARE_MS`]).
    prepare_lead_ms: AtomicI64,
    /// The dispatch tasks, waited for on shutdown: a fire they started is sent, not left with
    /// its runs stored and unsent for the lost-run watch to fail.
    dispatching: TaskTracker,
}

impl Scheduler {
    pub fn new(
        store: Store,
        dispatcher: Arc<Dispatcher>,
        settings: Arc<Settings>,
        node: String,
    ) -> Arc<Self> {
        Arc::new(Scheduler {
            store,
            dispatcher,
            settings,
            node,
            timer: Mutex::new(BTreeMap::new()),
            timer_added: tokio::sync::Notify::new(),
            fast: Arc::new(Semaphore::new(2_000)),
            slow: Arc::new(Semaphore::new(200)),
            schedules: ScheduleCache::default(),
            send_lag_ms: AtomicI64::new(0),
            send_lag_at: AtomicI64::new(0),
            prepare_lead_ms: AtomicI64::new(PREPARE_MS),
            dispatching: TaskTracker::new(),
        })
    }

    /// Runs until `stop` is cancelled: claims in one task, dispatches from the timer in this
    /// one. A claim pass can take seconds when the admin is overloaded (every write waits for the
    /// same database); the timer never waits for it, so fires already claimed go out on time.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let claimer = tokio::spawn(self.clone().claim_loop(stop.clone()));
        loop {
            self.dispatch_due(now_ms());
            let wake_at = self.next_handout().unwrap_or(i64::MAX);
            let sleep_ms = wake_at.saturating_sub(now_ms()).clamp(0, 1_000) as u64;
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = self.timer_added.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(sleep_ms)) => {}
            }
        }
        // Claims end before the timer is given back, so none is left behind.
        let _ = claimer.await;
        self.release_claims().await;
        // Fires already handed out are prepared at most `MAX_PREPARE_MS` ahead; their sends
        // wait for the executors' answers at most the dispatch timeout.
        self.dispatching.close();
        let most = Duration::from_millis(MAX_PREPARE_MS as u64)
            + self.settings.dispatch_timeout()
            + Duration::from_secs(5);
        if tokio::time::timeout(most, self.dispatching.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "fires still being dispatched at shutdown; the lost-run watch will judge them"
            );
        }
    }

    /// A pass about once a second, and at once when a job's schedule changed.
    ///
    /// A pass is timed to start when the timer hands fires out for preparation (the preparation
    /// lead before their time) if that moment is less than a second away: its work is then done
    /// before those fires are sent instead of beside the sends. A pass at 1 000 jobs costs tens
    /// of milliseconds of CPU, and a profile on two cores showed one running beside the sends of
    /// a whole second's fires, competing with them.
    async fn claim_loop(self: Arc<Self>, stop: CancellationToken) {
        loop {
            let started = now_ms();
            // A pass held back by sends that are behind is not run again for a changed schedule
            // before its second is up: while jobs are being created on an overloaded admin, each
            // creation woke the claimer only to find it may not claim (up to a hundred times a
            // second, two reads each).
            let held_back = match self.pass().await {
                Ok(held_back) => held_back,
                Err(e) => {
                    tracing::warn!(error = %e, "scheduler pass failed");
                    false
                }
            };
            tracing::debug!(
                took_ms = now_ms() - started,
                pending = self.pending(),
                "scheduler pass"
            );
            let mut next = started + 1_000;
            let mut aligned = false;
            loop {
                let sleep_ms = (next - now_ms()).clamp(0, 1_000) as u64;
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = self.dispatcher.schedule_changed(), if !held_back => break,
                    _ = tokio::time::sleep(Duration::from_millis(sleep_ms)) => {}
                }
                let now = now_ms();
                if now < next {
                    continue;
                }
                match self.next_handout() {
                    Some(at) if !aligned && at > now && at < now + 1_000 => {
                        next = at;
                        aligned = true;
                    }
                    _ => break,
                }
            }
        }
    }

    /// When the timer next hands fires out for preparation.
    fn next_handout(&self) -> Option<i64> {
        let timer = self.timer.lock().expect("timer poisoned");
        timer.keys().next().map(|k| k.0 - self.prepare_lead())
    }

    fn prepare_lead(&self) -> i64 {
        self.prepare_lead_ms.load(Ordering::Relaxed)
    }

    /// Learns from a preparation that took `took_ms`: the lead rises at once to twice that, and
    /// falls back by a tenth per preparation, so one quick batch (a slow job's single fire) does
    /// not undo it before the next large one.
    fn prepared_in(&self, took_ms: i64) {
        let lead = next_prepare_lead(self.prepare_lead(), took_ms);
        self.prepare_lead_ms.store(lead, Ordering::Relaxed);
    }

    /// Claims due fires, takes over orphaned ones and starts due retries. Returns whether the
    /// claims were held back because the sends are behind.
    async fn pass(&self) -> Result<bool, StoreError> {
        let threshold = self.settings.misfire_threshold_ms;
        let tz = self.settings.timezone.clone();
        let mut held_back = false;
        loop {
            // A lag measured more than a second ago is stale: nothing was sent since, so
            // nothing is queued either.
            let lag = self.send_lag_ms.load(Ordering::Relaxed);
            let lag_age = now_ms() - self.send_lag_at.load(Ordering::Relaxed);
            if lag > MAX_SEND_LAG_MS && lag_age < 1_000 {
                tracing::debug!(lag_ms = lag, "sends are behind; not claiming");
                held_back = true;
                break;
            }
            if self.dispatcher.results_behind() {
                tracing::debug!("results are behind; not claiming");
                held_back = true;
                break;
            }
            // Each batch plans with the time it starts at: a pass under load takes long enough
            // for the time it started at to be stale.
            let now = now_ms();
            let (jobs, claimed) = self
                .store
                .claim_due(
                    &self.node,
                    now + CLAIM_WITHIN_MS,
                    LEASE_MS,
                    CLAIM_BATCH,
                    now,
                    |job| {
                        let schedule = self.schedules.of_job(job, &tz);
                        plan_parsed(job, &schedule, now, now + LOOKAHEAD_MS, threshold)
                    },
                )
                .await?;
            tracing::debug!(
                jobs,
                fires = claimed.len(),
                took_ms = now_ms() - now,
                "claimed"
            );
            self.add_to_timer(&claimed);
            // A full batch of jobs means more may be due. Counted in jobs, not fires: jobs that
            // misfired get no fire, and a batch of them must not end the pass.
            if (jobs as i64) < CLAIM_BATCH {
                break;
            }
        }
        let now = now_ms();
        let orphans = self
            .store
            .take_over_expired(&self.node, now, LEASE_MS, 1_000)
            .await?;
        if !orphans.is_empty() {
            // Their admin stopped, or fell so far behind that its own claims outlived their
            // leases: this admin's own fires, when it is the one behind (a lone admin's failed
            // dispatch leaves its fires to this too).
            tracing::warn!(
                count = orphans.len(),
                "took over fires whose lease ran out (their admin stopped or fell behind)"
            );
            let keep = self.collapse_misfired(orphans, now).await?;
            self.add_to_timer(&keep);
        }
        for (run_id, retry_at) in self.store.due_retries(now, 500).await? {
            if self.store.take_retry(run_id, retry_at).await? {
                let store = self.store.clone();
                let dispatcher = self.dispatcher.clone();
                tokio::spawn(async move {
                    if let Err(e) = retry_run(&store, &dispatcher, run_id).await {
                        tracing::warn!(error = %e, run_id, "retry failed to start");
                    }
                });
            }
        }
        Ok(held_back)
    }

    /// Of the taken-over fires already later than the misfire threshold, keeps only the latest
    /// per job (the misfire policy then fires it once or skips it); the others are skipped, so a
    /// long outage never turns into a burst of fires.
    async fn collapse_misfired(
        &self,
        orphans: Vec<ClaimedFire>,
        now: i64,
    ) -> Result<Vec<ClaimedFire>, StoreError> {
        let threshold = self.settings.misfire_threshold_ms;
        let mut latest: HashMap<i64, i64> = HashMap::new();
        for o in orphans.iter().filter(|o| now - o.planned_at > threshold) {
            let e = latest.entry(o.job_id).or_insert(o.planned_at);
            *e = (*e).max(o.planned_at);
        }
        let (superseded, keep): (Vec<ClaimedFire>, Vec<ClaimedFire>) =
            orphans.into_iter().partition(|o| {
                now - o.planned_at > threshold && latest.get(&o.job_id) != Some(&o.planned_at)
            });
        let ids: Vec<i64> = superseded.iter().map(|o| o.fire_id).collect();
        let ended = self
            .store
            .skip_claims(&ids, &self.node, &NoteKind::MisfireSuperseded.into(), now)
            .await?;
        self.dispatcher.announce(&ended);
        Ok(keep)
    }

    fn add_to_timer(&self, claimed: &[ClaimedFire]) {
        if claimed.is_empty() {
            return;
        }
        let queued_at = now_ms();
        {
            let mut timer = self.timer.lock().expect("timer poisoned");
            for c in claimed {
                timer.insert(
                    (c.planned_at, c.fire_id),
                    Due {
                        job_id: c.job_id,
                        trigger_type: c.trigger_type.clone(),
                        claimed_at: c.claimed_at,
                        queued_at,
                    },
                );
            }
        }
        self.timer_added.notify_one();
    }

    /// Starts the dispatch of every timer entry whose time has come: one task for all the on-time
    /// fires of fast jobs (their database work is batched), one task each for slow jobs.
    fn dispatch_due(self: &Arc<Self>, now: i64) {
        let due: Vec<((i64, i64), Due)> = {
            let mut timer = self.timer.lock().expect("timer poisoned");
            let later = timer.split_off(&(now + self.prepare_lead() + 1, i64::MIN));
            std::mem::replace(&mut *timer, later).into_iter().collect()
        };
        if due.is_empty() {
            return;
        }
        let (fires, late_ms) = (due.len(), now - due[0].0 .0);
        let (slow, fast): (Vec<_>, Vec<_>) = due
            .into_iter()
            .partition(|(_, d)| self.dispatcher.is_slow(d.job_id));
        tracing::debug!(fires, slow = slow.len(), late_ms, "due");
        for entry in slow {
            let this = self.clone();
            let pool = self.slow.clone();
            self.dispatching.spawn(async move {
                let Ok(_permit) = pool.acquire_owned().await else {
                    return;
                };
                this.dispatch_batch(vec![entry], true).await;
            });
        }
        if !fast.is_empty() {
            let this = self.clone();
            let pool = self.fast.clone();
            self.dispatching.spawn(async move {
                let Ok(_permit) = pool.acquire_owned().await else {
                    return;
                };
                this.dispatch_batch(fast, true).await;
            });
        }
    }

    /// Dispatches fires due now or within the preparation lead: the job's current state and the
    /// misfire policy apply; on-time fires are started and prepared together, then sent at their
    /// planned time.
    async fn dispatch_batch(&self, due: Vec<((i64, i64), Due)>, prepare: bool) {
        let handed_out = now_ms();
        let lead = self.prepare_lead();
        let job_ids: Vec<i64> = due.iter().map(|(_, d)| d.job_id).collect();
        let jobs: HashMap<i64, Arc<Job>> = match self.dispatcher.jobs(&job_ids).await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "cannot load jobs of due fires; they will be taken over");
                return;
            }
        };
        let now = now_ms();
        let threshold = self.settings.misfire_threshold_ms;
        let mut on_time = Vec::new();
        // Fires closed without a dispatch, by reason; each reason is one statement per chunk.
        let mut deleted = Vec::new();
        let mut stopped = Vec::new();
        let mut missed = Vec::new();
        // The on-time fires' timer entries, kept while prepared ones wait for their time: a fire
        // taken back after an edit is dispatched again from its entry.
        let mut claims: HashMap<i64, Due> = HashMap::new();
        // The latest of these fires to enter the timer: none of them could go before that.
        let mut queued_by = i64::MIN;
        for ((planned_at, fire_id), due) in due {
            let Some(job) = jobs.get(&due.job_id) else {
                deleted.push(fire_id);
                continue;
            };
            if !job_runs_fire(job, due.claimed_at) {
                stopped.push(fire_id);
                continue;
            }
            let job_id = due.job_id;
            let late = now - planned_at;
            if late > threshold && due.trigger_type != TriggerType::Misfire.as_str() {
                if job.misfire_strategy != MisfireStrategy::FireOnceNow.as_str() {
                    missed.push(fire_id);
                    continue;
                }
                let result = async {
                    if self
                        .store
                        .start_claimed(fire_id, &self.node, TriggerType::Misfire.as_str())
                        .await?
                    {
                        self.dispatcher
                            .dispatch_claimed(
                                vec![(
                                    job.clone(),
                                    fire_id,
                                    planned_at,
                                    TriggerType::Misfire.as_str().into(),
                                )],
                                None,
                            )
                            .await?;
                    }
                    Ok::<(), crate::trigger::TriggerError>(())
                }
                .await;
                if let Err(e) = result {
                    tracing::warn!(error = %e, fire_id, job_id, "misfired fire not dispatched");
                }
                continue;
            }
            on_time.push((job.clone(), fire_id, planned_at, due.trigger_type.clone()));
            queued_by = queued_by.max(due.queued_at);
            if prepare {
                claims.insert(fire_id, due);
            }
        }
        for (ids, note) in [
            (deleted, Note::new(NoteKind::JobDeleted)),
            (stopped, Note::new(NoteKind::JobStopped)),
            (
                missed,
                Note::new(NoteKind::MisfireLate).with("ms", threshold),
            ),
        ] {
            if ids.is_empty() {
                continue;
            }
            match self
                .store
                .skip_claims(&ids, &self.node, &note.into(), now)
                .await
            {
                Ok(ended) => self.dispatcher.announce(&ended),
                Err(e) => {
                    tracing::warn!(error = %e, fires = ids.len(), "claimed fires not closed; they will be taken over")
                }
            }
        }
        if on_time.is_empty() {
            return;
        }
        // The fires are started (`scheduled` → `triggering`) with their runs stored, in one
        // transaction; fires another admin took over (we were too slow) are its to dispatch.
        let node = Some(self.node.as_str());
        if !prepare {
            if let Err(e) = self.dispatcher.dispatch_claimed(on_time, node).await {
                tracing::warn!(error = %e, "scheduled fires not dispatched");
            }
            return;
        }
        match self.dispatcher.prepare_claimed(on_time, node).await {
            Ok(prepared) => {
                let took_ms = now_ms() - handed_out;
                self.prepared_in(took_ms);
                tracing::debug!(took_ms, lead_ms = self.prepare_lead(), "prepared");
                for (planned_at, group) in prepared.by_planned_time() {
                    sleep_until_ms(planned_at - CHECK_AHEAD_MS).await;
                    let go_at = could_go_at(planned_at, queued_by, lead);
                    self.send_at_time(group, planned_at, go_at, &claims).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "scheduled fires not dispatched"),
        }
    }

    /// Sends prepared fires at their planned time. Fires whose job was edited, stopped or deleted
    /// since they were prepared ([`CHECK_AHEAD_MS`] before it) are taken back and dispatched as
    /// the job is now, so an edit or a stop applies to every fire not yet sent, as without
    /// preparation.
    async fn send_at_time(
        &self,
        mut group: crate::trigger::Prepared,
        planned_at: i64,
        go_at: i64,
        claims: &HashMap<i64, Due>,
    ) {
        let checking = now_ms();
        let stale = match self.dispatcher.jobs(&group.job_ids()).await {
            Ok(jobs) => {
                let now: HashMap<i64, (i64, i64)> = jobs
                    .into_iter()
                    .map(|(id, j)| (id, (j.enabled, j.updated_at)))
                    .collect();
                group.take_stale(&now)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot check the jobs of prepared fires; sending as prepared");
                vec![]
            }
        };
        if !group.is_empty() {
            let list = group.into_send_list();
            sleep_until_ms(planned_at).await;
            let now = now_ms();
            tracing::debug!(
                check_started_ms = checking - planned_at,
                ready_ms = now - planned_at,
                "sending"
            );
            self.send_lag_ms.store(now - go_at, Ordering::Relaxed);
            self.send_lag_at.store(now, Ordering::Relaxed);
            if let Err(e) = self.dispatcher.send_prepared(list).await {
                tracing::warn!(error = %e, "scheduled fires not dispatched");
            }
        }
        if stale.is_empty() {
            return;
        }
        let ids: Vec<i64> = stale.iter().map(|s| s.0).collect();
        match self.store.unprepare_fires(&ids, &self.node, LEASE_MS).await {
            Ok(back) => {
                let back: std::collections::HashSet<i64> = back.into_iter().collect();
                let again: Vec<((i64, i64), Due)> = stale
                    .into_iter()
                    .filter(|s| back.contains(&s.0))
                    .filter_map(|(fire_id, _, planned_at)| {
                        Some(((planned_at, fire_id), claims.get(&fire_id)?.clone()))
                    })
                    .collect();
                Box::pin(self.dispatch_batch(again, false)).await;
            }
            Err(e) => tracing::warn!(error = %e, "cannot take back prepared fires of edited jobs"),
        }
    }

    /// On shutdown, gives the fires still in the timer back: their rows go and their jobs' next
    /// planned time moves back to them, so another admin (or the next start) plans them again at
    /// once, with the misfire policy applying if that is too late.
    async fn release_claims(&self) {
        let pending: Vec<i64> = {
            let mut timer = self.timer.lock().expect("timer poisoned");
            std::mem::take(&mut *timer)
                .into_keys()
                .map(|(_, id)| id)
                .collect()
        };
        if let Err(e) = self.store.unclaim(&pending, &self.node).await {
            tracing::warn!(error = %e, fires = pending.len(), "claims not given back; they will be taken over");
        }
    }

    /// Fires waiting in this node's timer (for tests and metrics).
    pub fn pending(&self) -> usize {
        self.timer.lock().expect("timer poisoned").len()
    }
}

/// Re-runs a failed run as a new attempt with the same item, total and parameters.
async fn retry_run(
    store: &Store,
    dispatcher: &Dispatcher,
    run_id: i64,
) -> Result<(), crate::trigger::TriggerError> {
    let Some(run) = store.get_run(run_id).await? else {
        return Ok(());
    };
    if run.superseded != 0 {
        return Ok(());
    }
    let Some(fire) = store.get_fire(run.fire_id).await? else {
        return Ok(());
    };
    dispatcher.retry(&fire, &[run]).await?;
    Ok(())
}

#[cfg(test)]
mod tests_support {
    use crate::model::Job;

    pub fn job(schedule_type: &str, conf: &str, next: Option<i64>, misfire: &str) -> Job {
        Job {
            id: 1,
            group_id: 1,
            name: "j".into(),
            schedule_type: schedule_type.into(),
            schedule_conf: conf.into(),
            timezone: "UTC".into(),
            handler: "h".into(),
            misfire_strategy: misfire.into(),
            enabled: 1,
            next_fire_at: next,
            ..Job::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::job;
    use super::*;

    #[test]
    fn a_fire_claimed_late_is_allowed_the_preparation_lead() {
        // In the timer before its handout: due at its planned time, however long ago it came.
        assert_eq!(could_go_at(10_000, 5_000, 500), 10_000);
        // Claimed 3 s late: its preparation gets the lead, as an on-time fire's does, so a send
        // 300 ms after the claim is not behind, and one 800 ms after it is 300 ms behind.
        assert_eq!(could_go_at(10_000, 13_000, 500), 13_500);
        // Claimed less than a lead before its time: the later of the two.
        assert_eq!(could_go_at(10_000, 9_800, 500), 10_300);
        assert_eq!(could_go_at(i64::MAX - 1, i64::MAX - 1, 500), i64::MAX);
    }

    #[test]
    fn the_preparation_lead_follows_slow_preparations() {
        // Quick preparations keep the half second.
        assert_eq!(next_prepare_lead(PREPARE_MS, 30), PREPARE_MS);
        // One that took 450 ms moves it to 900 at once; a quick one then takes a tenth off.
        assert_eq!(next_prepare_lead(PREPARE_MS, 450), 900);
        assert_eq!(next_prepare_lead(900, 5), 810);
        let mut lead = 900;
        for _ in 0..20 {
            lead = next_prepare_lead(lead, 5);
        }
        assert_eq!(lead, PREPARE_MS);
        // Never beyond the cap, however slow.
        assert_eq!(next_prepare_lead(PREPARE_MS, 10_000), MAX_PREPARE_MS);
    }

    #[test]
    fn cron_every_second_fills_the_window() {
        let j = job("CRON", "* * * * * ?", Some(10_000), "DO_NOTHING");
        let p = plan_job(&j, 9_000, 14_000, 5_000, "UTC");
        let at: Vec<i64> = p.fires.iter().map(|f| f.planned_at).collect();
        assert_eq!(at, [10_000, 11_000, 12_000, 13_000, 14_000]);
        assert_eq!(p.next_fire_at, Some(15_000));
        assert!(!p.stop);
        assert!(p.fires.iter().all(|f| f.trigger_type == "CRON"));
    }

    #[test]
    fn fix_rate_keeps_its_phase_and_fix_delay_waits() {
        let j = job("FIX_RATE", "2", Some(10_500), "DO_NOTHING");
        let p = plan_job(&j, 10_000, 15_000, 5_000, "UTC");
        let at: Vec<i64> = p.fires.iter().map(|f| f.planned_at).collect();
        assert_eq!(at, [10_500, 12_500, 14_500]);
        assert_eq!(p.next_fire_at, Some(16_500));
        let d = job("FIX_DELAY", "2", Some(10_500), "DO_NOTHING");
        let p = plan_job(&d, 10_000, 15_000, 5_000, "UTC");
        assert_eq!(p.fires.len(), 1);
        assert_eq!(p.next_fire_at, None);
        assert!(!p.stop);
    }

    #[test]
    fn misfire_policies_fire_once_at_most() {
        // Planned an hour ago, every second: 3 600 fires were missed.
        let now = 3_700_000;
        let late = job("CRON", "* * * * * ?", Some(100_000), "DO_NOTHING");
        let p = plan_job(&late, now, now + 5_000, 5_000, "UTC");
        assert!(p.fires.is_empty());
        assert_eq!(p.next_fire_at, Some(3_701_000));
        let once = job("CRON", "* * * * * ?", Some(100_000), "FIRE_ONCE_NOW");
        let p = plan_job(&once, now, now + 5_000, 5_000, "UTC");
        assert_eq!(
            p.fires,
            vec![PlannedFire {
                planned_at: now,
                trigger_type: "MISFIRE"
            }]
        );
        assert_eq!(p.next_fire_at, Some(3_701_000));
        // Less late than the threshold: it fires normally, at its planned time.
        let slightly = job("CRON", "* * * * * ?", Some(now - 1_000), "DO_NOTHING");
        let p = plan_job(&slightly, now, now + 1_000, 5_000, "UTC");
        assert_eq!(p.fires[0].planned_at, now - 1_000);
        assert_eq!(p.fires[0].trigger_type, "CRON");
    }

    #[test]
    fn ended_and_invalid_schedules_stop_the_job() {
        // 2020-01-01T00:00:00Z, the only fire of this expression.
        let only = 1_577_836_800_000;
        let past = job("CRON", "0 0 0 1 1 ? 2020", Some(only), "DO_NOTHING");
        let p = plan_job(&past, only - 500, only + 4_500, 5_000, "UTC");
        assert_eq!(p.fires.len(), 1, "the one planned fire still happens");
        assert!(p.stop);
        let bad = job("CRON", "nonsense", Some(1_000), "DO_NOTHING");
        assert!(plan_job(&bad, 500, 5_500, 5_000, "UTC").stop);
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::tests_support::job;
    use super::*;

    proptest! {
        /// FIX_RATE keeps its phase: fires are exactly `rate` apart, all within the window, and
        /// the next planned time is the first one beyond it.
        #[test]
        fn fix_rate_spacing(rate_s in 1i64..120, next in 0i64..1_000_000, ahead in 0i64..10_000, window in 0i64..20_000) {
            let now = next - ahead;
            let j = job("FIX_RATE", &rate_s.to_string(), Some(next), "DO_NOTHING");
            let p = plan_job(&j, now, now + window, 5_000, "UTC");
            let rate = rate_s * 1000;
            for w in p.fires.windows(2) {
                prop_assert_eq!(w[1].planned_at - w[0].planned_at, rate);
            }
            prop_assert!(p.fires.iter().all(|f| f.planned_at <= now + window));
            let expected_next = p.fires.last().map_or(next, |f| f.planned_at + rate);
            prop_assert_eq!(p.next_fire_at, Some(expected_next));
            prop_assert!(expected_next > now + window || p.fires.len() == MAX_FIRES_PER_JOB);
        }

        /// However late a job is, the misfire policy fires it at most once.
        #[test]
        fn misfire_fires_at_most_once(late_s in 6i64..100_000, policy in prop_oneof!["DO_NOTHING", "FIRE_ONCE_NOW"]) {
            let now = 10_000_000_000i64;
            let j = job("CRON", "* * * * * ?", Some(now - late_s * 1000), &policy);
            let p = plan_job(&j, now, now + 5_000, 5_000, "UTC");
            prop_assert!(p.fires.len() <= 1);
            prop_assert_eq!(p.fires.len() == 1, policy == "FIRE_ONCE_NOW");
            prop_assert!(p.next_fire_at.unwrap() > now);
        }
    }
}
