//! What follows a fire's end, and the watch on runs that never end by themselves.
//!
//! * [`on_fires_final`]: a failed fire whose failed items have retries left gets them planned with
//!   the job's interval and backoff (the fire is open again); otherwise one alarm goes out for the
//!   fire. A succeeded fire triggers its child jobs, once per fire (not once per shard). A
//!   FIX_DELAY job gets its next fire planned from the end of this one. The store writes what
//!   must follow with the fire's end (`follow_ups`), and [`recover_follow_ups`] does what an
//!   admin that stopped or died left undone.
//! * [`LostRuns`]: a run whose executor was evicted, refuses connections, or that is still open
//!   well past its timeout becomes `lost`; the item of a sharded job is failed over to another
//!   executor at once, other runs follow the retry policy. A run that an admin stored and died
//!   before sending becomes `lost` too, and is sent again at once, whatever the job; one it
//!   claimed for a late send and died before the answer is `lost` as any other. Nothing stays
//!   `triggering` or `running` for ever.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::alarm::Alarms;
use crate::config::Settings;
use crate::executor_http::ExecutorHttp;
use crate::metrics::Metrics;
use crate::model::{
    now_ms, AdminNode, Fire, FireState, Group, Job, RunState, ShardingMode, TriggerType,
};
use crate::note::{Message, Note, NoteKind};
use crate::results::ANSWER_HOLD;
use crate::schedule::Schedule;
use crate::scheduler::MAX_PREPARE_MS;
use crate::store::{FireEnded, OpenRun, OpenRunsCursor, Store};
use crate::trigger::{post_envelope, CallError, Dispatcher, FireRequest};

/// Margin after a run's timeout before the admin stops waiting for its result.
const TIMEOUT_MARGIN_MS: i64 = 30_000;
/// Longest backoff delay between retries.
const MAX_RETRY_DELAY_MS: i64 = 3_600_000;

/// Handles fires that just became final, a batch at a time, and clears their `follow_ups` rows
/// once done (one that fails stays for [`recover_follow_ups`], and an alarm's stays until it is
/// sent). Returns how many were done. Their jobs come from the
/// dispatcher's job cache; a fire row is read only when something follows from it (a failure,
/// child jobs, a FIX_DELAY schedule: the store marks those `follow_up` when they end), so the
/// common end of a fire (succeeded, nothing to follow) reads and writes nothing more.
pub async fn on_fires_final(
    store: &Store,
    dispatcher: &Dispatcher,
    settings: &Settings,
    alarms: &Arc<Alarms>,
    ended: &[FireEnded],
) -> anyhow::Result<usize> {
    let follow: Vec<&FireEnded> = ended.iter().filter(|e| e.follow_up).collect();
    if follow.is_empty() {
        return Ok(0);
    }
    let job_ids: Vec<i64> = follow.iter().map(|e| e.job_id).collect();
    let jobs = dispatcher.jobs(&job_ids).await?;
    let ids: Vec<i64> = follow.iter().map(|e| e.fire_id).collect();
    let fires: HashMap<i64, Fire> = store
        .get_fires(&ids)
        .await?
        .into_iter()
        .map(|f| (f.id, f))
        .collect();
    let mut done = Vec::with_capacity(follow.len());
    for e in follow {
        // A fire of a deleted job, a deleted fire, or one no longer in the state it ended in
        // (its items were retried since) has nothing to follow from this end.
        let (Some(job), Some(fire)) = (jobs.get(&e.job_id), fires.get(&e.fire_id)) else {
            done.push(*e);
            continue;
        };
        if fire.state != e.state.as_str() {
            done.push(*e);
            continue;
        }
        match on_fire_final(store, dispatcher, settings, alarms, fire, job, e).await {
            Ok(true) => done.push(*e),
            // The alarm's task clears it once sent.
            Ok(false) => {}
            Err(err) => tracing::warn!(error = %err, fire_id = e.fire_id, "fire follow-up failed"),
        }
    }
    store.follow_ups_done(&done).await?;
    Ok(done.len())
}

/// How long a fire's follow-up may stay undone before any admin's sweep does it: well past
/// the time its own admin takes, so that the two seldom meet (and when they do, every step of a
/// follow-up is a compare-and-set, or keyed, and happens once).
pub const FOLLOW_UP_GRACE_MS: i64 = 30_000;

/// Does the follow-ups that an admin left undone when it stopped or died between a fire's end
/// and its follow-up (the retries or the alarm of a failed fire, child jobs, a FIX_DELAY job's
/// next fire), and sends the alarms such an admin claimed and left unsent. Returns how many it
/// did (an alarm still being sent, within its lease, is found and left).
pub async fn recover_follow_ups(
    store: &Store,
    dispatcher: &Dispatcher,
    settings: &Settings,
    alarms: &Arc<Alarms>,
) -> anyhow::Result<usize> {
    let stale = store
        .stale_follow_ups(now_ms() - FOLLOW_UP_GRACE_MS, 500)
        .await?;
    let done = on_fires_final(store, dispatcher, settings, alarms, &stale).await?;
    if done > 0 {
        tracing::info!(
            fires = done,
            "did follow-ups left undone by a stopped admin"
        );
    }
    Ok(done)
}

/// Runs [`recover_follow_ups`] every few seconds until `stop`.
pub async fn follow_up_sweep(
    store: Store,
    dispatcher: Arc<Dispatcher>,
    settings: Arc<Settings>,
    alarms: Arc<Alarms>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = recover_follow_ups(&store, &dispatcher, &settings, &alarms).await {
            tracing::warn!(error = %e, "follow-up sweep failed");
        }
    }
}

/// Handles one fire that just became final; whether its follow-up is done (an alarm being
/// sent is not yet).
async fn on_fire_final(
    store: &Store,
    dispatcher: &Dispatcher,
    settings: &Settings,
    alarms: &Arc<Alarms>,
    fire: &Fire,
    job: &Job,
    ended: &FireEnded,
) -> anyhow::Result<bool> {
    let (fire_id, state) = (fire.id, ended.state);
    let mut done = true;
    let now = now_ms();
    if state == FireState::Failed {
        let runs = store.fire_runs(fire_id).await?;
        let retryable: Vec<(i64, i64)> = runs
            .iter()
            .filter(|r| r.superseded == 0)
            .filter(|r| {
                matches!(
                    RunState::parse(&r.state),
                    Ok(RunState::Failed | RunState::TimedOut | RunState::Lost)
                )
            })
            .filter(|r| r.retries < job.retry_count)
            .map(|r| {
                (
                    r.id,
                    now + retry_delay(job.retry_interval_s, job.retry_backoff, r.retries),
                )
            })
            .collect();
        if !retryable.is_empty() {
            let first = retryable.iter().map(|r| r.1).min().unwrap_or(now) - now;
            let msg = Note::new(NoteKind::Retrying)
                .with("count", retryable.len())
                .with("ms", first)
                .into();
            if store.schedule_retries(fire_id, &retryable, &msg).await? {
                dispatcher.notify_schedule_changed();
            }
            return Ok(true);
        }
        // Retries exhausted: one alarm for the fire, whichever admin gets here first.
        done = alarms.raise(store, job, fire, &runs, ended).await?;
    }
    if state == FireState::Succeeded {
        for child_id in job.child_ids() {
            if child_id == job.id {
                continue;
            }
            match store.get_job(child_id).await {
                Ok(child) => {
                    let mut req = FireRequest::manual(TriggerType::Parent);
                    req.parent_fire_id = Some(fire_id);
                    // Unique per parent fire and child: a follow-up done twice fires it once.
                    req.sched_key = Some(format!("parent:{fire_id}:{child_id}"));
                    if let Err(e) = dispatcher.fire(&child, req).await {
                        tracing::warn!(error = %e, child_id, fire_id, "child job trigger failed");
                    }
                }
                Err(e) => tracing::warn!(error = %e, child_id, "child job not found"),
            }
        }
    }
    let scheduled = fire.trigger_type == TriggerType::FixDelay.as_str()
        || fire.trigger_type == TriggerType::Misfire.as_str();
    if scheduled {
        if let Ok(schedule @ Schedule::FixDelay(_)) = Schedule::of_job(job, &settings.timezone) {
            if let Some(next) = schedule.after_finish(fire.finished_at.unwrap_or(now)) {
                store
                    .plan_after_finish(job.id, fire.planned_at, next)
                    .await?;
                dispatcher.notify_schedule_changed();
            }
        }
    }
    Ok(done)
}

/// `interval × backoff^retries` (the retries of the item so far), capped.
pub fn retry_delay(interval_s: i64, backoff: i64, retries: i64) -> i64 {
    let base = interval_s.max(0).saturating_mul(1000);
    let factor = backoff.max(1).saturating_pow(retries.clamp(0, 20) as u32);
    base.saturating_mul(factor).min(MAX_RETRY_DELAY_MS)
}

/// Open runs judged per sweep of the lost-run watch.
const OPEN_RUNS_PAGE: i64 = 5_000;
/// How long the watch waits for an executor's answer to its probe.
const PROBE_TIMEOUT: Duration = Duration::from_millis(1_000);
/// Executors the watch probes at once: a page's executors (up to thousands) are probed within a
/// few timeouts even when many hang, without a connection to each at the same moment.
const PROBES_AT_ONCE: usize = 64;
/// How long after its row was made a run still `triggering` is first judged. A healthy run reads
/// `triggering` from its preparation (up to [`MAX_PREPARE_MS`] before its send) until its
/// acceptance is written, which the results writer holds up to [`ANSWER_HOLD`] for the run's
/// result; a second past both, only runs that are late are left. Judged from 1 s, a sampled
/// sweep at 10 000 runs a second read 13 417 healthy runs, and the sweeps took a fifth of
/// MariaDB's time (docs/benchmarks.md, thirty-fifth round). A run its executor accepted is
/// `running` once the hold is over and judged at once, so an executor killed early in a run is
/// judged at most [`ANSWER_HOLD`] after its acceptance.
const UNSENT_GRACE_MS: i64 = MAX_PREPARE_MS + ANSWER_HOLD.as_millis() as i64 + 1_000;

/// A run its admin left behind when it stopped (see [`LostRuns::stranded_by_gone_admins`]).
struct Stranded {
    /// The admin that left it.
    owner: String,
    /// Claimed for a late send (`Store::claim_sends`), with no answer: whether the request went
    /// out is not known, so the run is not sent again but ended lost (a sharded item fails over).
    claimed: bool,
}

/// How long an executor may keep a result it could not deliver (no admin answered) before
/// sending it again: XXL-JOB's executors and the SDK re-send their spool every 30 s; a margin on top.
const SPOOL_PERIOD_MS: i64 = 35_000;

/// Watches open runs and declares the ones that cannot finish any more lost.
pub struct LostRuns {
    pub store: Store,
    pub dispatcher: Arc<Dispatcher>,
    pub settings: Arc<Settings>,
    pub metrics: Arc<Metrics>,
    pub http: ExecutorHttp,
    pub interval: Duration,
}

impl LostRuns {
    /// The token a run's executor expects: its group's (read once per sweep into `groups`).
    fn token_of(&self, groups: &HashMap<i64, Option<Group>>, group_id: i64) -> String {
        match groups.get(&group_id).and_then(Option::as_ref) {
            Some(group) => self.dispatcher.token_for(group),
            None => self.dispatcher.default_token().to_string(),
        }
    }

    pub async fn run(self, stop: CancellationToken) {
        let mut tick = tokio::time::interval(self.interval);
        // Executors that failed a liveness probe, with how many times in a row.
        let mut strikes: HashMap<String, u32> = HashMap::new();
        // Where the latest sweep's page of open runs ended.
        let mut cursor = OpenRunsCursor::default();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.sweep(&mut strikes, &mut cursor).await {
                tracing::warn!(error = %e, "lost-run sweep failed");
            }
        }
    }

    /// One look at a page of the open runs, from `cursor` on (`Store::open_runs` moves it on to
    /// the page's end, and back to the start after the last page). With more open runs than a
    /// page (a fixed-item job of thousands of items running for hours), the sweeps take turns
    /// over all of them: always reading the first page, a run opened after those was never
    /// judged while they stayed open, and a dead executor's runs among the later ones stayed
    /// `running` for good.
    async fn sweep(
        &self,
        strikes: &mut HashMap<String, u32>,
        cursor: &mut OpenRunsCursor,
    ) -> anyhow::Result<usize> {
        let now = now_ms();
        // Give a fresh run time to be sent and its acceptance written before judging it. A run
        // whose acceptance is written is judged at once: an executor killed early in a run must
        // not wait an extra sweep to be found out.
        let open = self
            .store
            .open_runs(now - UNSENT_GRACE_MS, cursor, OPEN_RUNS_PAGE)
            .await?;
        if open.is_empty() {
            // No run is open: no executor's strikes still matter.
            strikes.clear();
            return Ok(0);
        }
        let live: HashSet<String> = self
            .store
            .all_live_executors(now - self.settings.dead_after_ms())
            .await?
            .into_iter()
            .map(|e| e.address)
            .collect();
        // The page's groups, read once each: whether addresses are manual, and the token their
        // executors expect.
        let mut groups: HashMap<i64, Option<Group>> = HashMap::new();
        for run in &open {
            if let std::collections::hash_map::Entry::Vacant(e) = groups.entry(run.group_id) {
                e.insert(self.store.get_group(run.group_id).await.ok());
            }
        }
        let job_ids: Vec<i64> = open.iter().map(|r| r.job_id).collect();
        let jobs = self.dispatcher.jobs(&job_ids).await?;
        // Probe each executor that holds open runs once per sweep, side by side: one after the
        // other, every executor that timed out (a stopped process, a busy machine) held up the
        // judgement of all the others by the probe's second, and their second strike by as much
        // again.
        // Each with the token its group expects: with the admin-wide one, an executor of a
        // group with a token of its own answers "token invalid" and logs a warning every sweep.
        let mut addresses: HashMap<String, String> = HashMap::new();
        for r in open.iter().filter(|r| !r.executor_address.is_empty()) {
            if !addresses.contains_key(&r.executor_address) {
                let token = self.token_of(&groups, r.group_id);
                addresses.insert(r.executor_address.clone(), token);
            }
        }
        // Owned addresses: with futures borrowing them, rustc cannot prove the spawned watch
        // `Send` ("implementation of `FnOnce` is not general enough").
        let probes: Vec<(String, Result<_, CallError>)> = futures::stream::iter(addresses)
            .map(|(address, token)| async move {
                let probe = post_envelope::<serde_json::Value>(
                    &self.http,
                    &address,
                    "beat",
                    &token,
                    &serde_json::json!({}),
                    PROBE_TIMEOUT,
                )
                .await;
                (address, probe)
            })
            .buffer_unordered(PROBES_AT_ONCE)
            .collect()
            .await;
        let mut dead: HashSet<String> = HashSet::new();
        for (address, probe) in probes {
            match probe {
                Err(e) if e.transport => {
                    let n = strikes.entry(address.clone()).or_insert(0);
                    *n += 1;
                    // A refused connection means no process listens there any more; a timeout
                    // may be a busy machine, so it needs a second strike.
                    if *n >= 2 || e.refused {
                        dead.insert(address);
                    }
                }
                _ => {
                    strikes.remove(&address);
                }
            }
        }
        // A run found lost is stamped with the time it was judged, after the probes.
        let now = now_ms();
        let orphaned = self.stranded_by_gone_admins(&open, &groups, now).await?;
        let mut lost = 0;
        for run in open {
            let manual = groups
                .get(&run.group_id)
                .and_then(Option::as_ref)
                .is_some_and(|g| g.address_type == "MANUAL");
            let (timeout_s, sharded) = jobs.get(&run.job_id).map_or((0, false), |j| {
                (
                    j.timeout_s,
                    j.sharding_mode != ShardingMode::None.as_str()
                        || j.route_strategy == "SHARDING_BROADCAST",
                )
            });
            let started = run.dispatched_at.unwrap_or(run.created_at);
            let (mut unsent, mut executor_at_fault) = (false, true);
            let address = run.executor_address.as_str();
            let reason = if !address.is_empty() && dead.contains(address) {
                Some(Note::new(NoteKind::LostNoAnswer).with("address", address))
            } else if !manual && !address.is_empty() && !live.contains(address) {
                Some(Note::new(NoteKind::LostEvicted).with("address", address))
            } else if let Some(Stranded { owner, claimed }) = orphaned.get(&run.id) {
                (unsent, executor_at_fault) = (!claimed, false);
                let kind = if *claimed {
                    NoteKind::LostAdminClaimed
                } else {
                    NoteKind::LostAdminUnsent
                };
                Some(
                    Note::new(kind)
                        .with("owner", owner)
                        .with("address", address),
                )
            } else if timeout_s > 0 && now > started + timeout_s * 1000 + TIMEOUT_MARGIN_MS {
                Some(
                    Note::new(NoteKind::LostTimeout)
                        .with("margin", TIMEOUT_MARGIN_MS / 1000)
                        .with("timeout", timeout_s),
                )
            } else {
                None
            };
            let Some(reason) = reason else { continue };
            let msg = Message::from(reason);
            if unsent || sharded {
                // A run never sent is sent now, whatever the job: nothing ran it. Shard
                // failover: the item runs elsewhere now, not after a retry delay. Either way the
                // run is declared lost and replaced in one transaction.
                let Some(fire) = self.store.get_fire(run.fire_id).await? else {
                    continue;
                };
                let whole = self.store.runs_by_ids(&[run.id]).await?;
                let replaced = if unsent {
                    self.dispatcher.send_unsent(&fire, &whole, &msg).await
                } else {
                    self.dispatcher
                        .fail_over_lost(&fire, &whole, &msg, executor_at_fault)
                        .await
                };
                match replaced {
                    Ok(ids) if ids.is_empty() => continue,
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, run_id = run.id, "lost item not re-dispatched");
                        continue;
                    }
                }
            } else {
                if !self
                    .store
                    .finish_run(run.id, RunState::Lost, 500, &msg, now)
                    .await?
                {
                    continue;
                }
                self.dispatcher.refresh(run.fire_id).await?;
            }
            lost += 1;
            self.metrics.runs_lost.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(run_id = run.id, fire_id = run.fire_id, reason = %msg, "run lost");
        }
        Ok(lost)
    }

    /// The runs of `open` whose fire's admin is gone and left them `triggering` for good, with
    /// that admin:
    /// * never recorded as sent: the admin died after starting the fire (its runs are stored up
    ///   to the preparation lead before the send) and before recording the send, so the fire,
    ///   out of `scheduled`, has no lease for a takeover, and nothing else would ever send or end
    ///   its runs. Only fires with no send recorded at all count (a failover or retry run comes
    ///   after one; a fire that is `running` with none had a sibling run sent again);
    /// * claimed for a late send ([`Store::claim_sends`] records the send before it goes out) and
    ///   never answered: the admin died between the claim and the answer. Only claims older
    ///   than a request's timeout and the acceptance's hold count, so a late send still on its
    ///   way is not judged.
    ///
    /// Either way only runs whose executor says it is not running the job (`/idleBeat`): a run
    /// it got and finished would have been called back to a live admin long before its admin
    /// counts as gone, or, when no admin was up to take it, from the executor's spool once one
    /// has been up for [`SPOOL_PERIOD_MS`] (a run judged before would be run twice).
    async fn stranded_by_gone_admins(
        &self,
        open: &[OpenRun],
        groups: &HashMap<i64, Option<Group>>,
        now: i64,
    ) -> anyhow::Result<HashMap<i64, Stranded>> {
        let mut found = HashMap::new();
        let claimed_before = now
            - self.settings.dispatch_timeout().as_millis() as i64
            - ANSWER_HOLD.as_millis() as i64
            - 1_000;
        let is_claimed = |r: &OpenRun| {
            r.state == RunState::Triggering.as_str()
                && r.dispatched_at.is_some_and(|at| at < claimed_before)
        };
        let unsent: Vec<&OpenRun> = open
            .iter()
            .filter(|r| {
                (r.dispatched_at.is_none() || is_claimed(r)) && !r.executor_address.is_empty()
            })
            .collect();
        if unsent.is_empty() {
            return Ok(found);
        }
        let live: Vec<AdminNode> = self
            .store
            .admin_nodes()
            .await?
            .into_iter()
            .filter(|n| n.is_live(now))
            .collect();
        // When the longest-living admin came up: a result the executor could not deliver to any
        // admin waits in its spool, and comes once one has been up for a spool period.
        let Some(up_since) = live.iter().map(|n| n.started_at).min() else {
            return Ok(found);
        };
        let live_admins: HashSet<&str> = live.iter().map(|n| n.id.as_str()).collect();
        // Per open fire, its admin when that admin is gone, and whether the fire was recorded
        // sent: one read for the page (under overload many late runs are past the grace at once).
        let mut fire_ids: Vec<i64> = unsent.iter().map(|r| r.fire_id).collect();
        fire_ids.sort_unstable();
        fire_ids.dedup();
        let gone_owner: HashMap<i64, (String, bool)> = self
            .store
            .get_fires(&fire_ids)
            .await?
            .into_iter()
            .filter(|f| {
                (f.state == FireState::Triggering.as_str()
                    || f.state == FireState::Running.as_str())
                    && !f.owner.is_empty()
                    && !live_admins.contains(f.owner.as_str())
            })
            .map(|f| (f.id, (f.owner, f.dispatched_at.is_some())))
            .collect();
        // Per executor and job, whether the executor said it is not running the job.
        let mut idle: HashMap<(String, i64), bool> = HashMap::new();
        for run in unsent {
            let Some((owner, fire_sent)) = gone_owner.get(&run.fire_id) else {
                continue;
            };
            let claimed = run.dispatched_at.is_some();
            // A run with no send recorded, of a fire with one, is a failover or retry run
            // (they come after a send), sent by a live admin. (A fire `running` with none had a
            // sibling run sent again already: a fire's runs may fall in two pages.)
            if !claimed && *fire_sent {
                continue;
            }
            // Its result, if it ran, came straight to an admin up since before the run was made,
            // or from the spool by now; otherwise it may still come, and the run is left for now.
            if up_since >= run.created_at && now - up_since < SPOOL_PERIOD_MS {
                continue;
            }
            let key = (run.executor_address.clone(), run.job_id);
            let is_idle = match idle.get(&key) {
                Some(is_idle) => *is_idle,
                None => {
                    // With the group's own token where it has one: the admin-wide token would be
                    // refused there, and its runs never found idle.
                    let token = self.token_of(groups, run.group_id);
                    let answer = post_envelope::<serde_json::Value>(
                        &self.http,
                        &run.executor_address,
                        "idleBeat",
                        &token,
                        &serde_json::json!({ "jobId": run.job_id }),
                        PROBE_TIMEOUT,
                    )
                    .await;
                    let is_idle = answer.is_ok_and(|a| a.is_success());
                    idle.insert(key, is_idle);
                    is_idle
                }
            };
            if is_idle {
                let owner = owner.clone();
                found.insert(run.id, Stranded { owner, claimed });
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::retry_delay;

    #[test]
    fn backoff() {
        assert_eq!(retry_delay(10, 1, 0), 10_000);
        assert_eq!(retry_delay(10, 1, 3), 10_000);
        assert_eq!(retry_delay(10, 2, 0), 10_000);
        assert_eq!(retry_delay(10, 2, 3), 80_000);
        assert_eq!(retry_delay(0, 2, 3), 0);
        assert_eq!(retry_delay(600, 10, 9), 3_600_000, "capped");
    }
}
