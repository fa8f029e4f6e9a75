//! Per-job workers: the FIFO queue, block strategies, timeout, kill and idle exit of XXL-JOB's
//! `JobThread`, on Tokio tasks.
//!
//! One worker per job id. Inside it, runs are serialised per *lane*: a stock admin's runs all
//! share one lane (exactly XXL-JOB's behaviour), while shard items sent by a Shardline admin (they
//! carry an idempotency key) get one lane per item index, so the sibling items of one fire that
//! land on this executor run side by side and a block strategy only ever weighs a run against
//! earlier runs of the *same* item.
//!
//! Locking: one std mutex over the job map, one per lane; the map lock is always taken first and
//! neither is held across an `.await`. Every handler runs in its own task, so a panic or an abort
//! ends the run and never the worker.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admin_client::AdminClient;
use crate::callback::CallbackSender;
use crate::context::{BoxHandler, JobContext, JobResult};
use crate::protocol::{BlockStrategy, CallbackItem, GlueType, TriggerRequest, CODE_FAIL};
use crate::runlog::{RunLogger, RunLogs};
use crate::script::ScriptJob;

/// Reason given to runs of a worker replaced because its handler changed.
pub(crate) const REASON_CHANGED: &str =
    "change jobhandler or glue type, and terminate the old job thread.";
/// Reason given to runs stopped by `/kill`.
pub(crate) const REASON_KILL: &str = "scheduling center kill job.";
/// Reason given to runs stopped because the executor shuts down.
pub(crate) const REASON_SHUTDOWN: &str = "executor shutdown, and kill the job.";
const REASON_COVER: &str = "block strategy effect：Cover Early";
const MSG_DISCARD: &str = "block strategy effect：Discard Later";
const MSG_TIMEOUT: &str = "job execute timeout";
/// XXL-JOB cuts result messages here; the admin column is not unbounded either.
const MAX_RESULT_MSG_CHARS: usize = 50_000;

/// What a trigger resolves to: identifies the handler, so a change replaces the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HandlerKey {
    Bean(String),
    Script(GlueType, i64),
}

/// The code a run executes.
#[derive(Clone)]
pub(crate) enum Runner {
    Bean(BoxHandler),
    Script(ScriptJob),
}

/// A lane is `None` for ordinary runs and `Some(index)` for the shard items of a Shardline admin.
type LaneKey = Option<i32>;

struct Queued {
    req: TriggerRequest,
    runner: Runner,
    /// Shard total after the maxNode rewrite.
    shard_total: i32,
}

struct Running {
    log_id: i64,
    cancel: CancellationToken,
}

#[derive(Default)]
struct LaneState {
    queue: VecDeque<Queued>,
    running: Option<Running>,
    /// Set once the lane is retired; its queued runs have been taken out and failed.
    stopped: Option<String>,
}

impl LaneState {
    fn busy(&self) -> bool {
        self.running.is_some() || !self.queue.is_empty()
    }

    fn holds(&self, log_id: i64) -> bool {
        self.running.as_ref().is_some_and(|r| r.log_id == log_id)
            || self.queue.iter().any(|q| q.req.log_id == log_id)
    }
}

struct Lane {
    job_id: i64,
    key: LaneKey,
    state: Mutex<LaneState>,
    notify: Notify,
}

impl Lane {
    fn state(&self) -> MutexGuard<'_, LaneState> {
        // A poisoned lock only means a panic elsewhere while it was held; the state stays usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Retires the lane: cancels its running run and hands back the queued ones to be failed.
    fn stop(&self, reason: &str) -> Vec<Queued> {
        let mut st = self.state();
        if st.stopped.is_none() {
            st.stopped = Some(reason.to_string());
        }
        if let Some(r) = &st.running {
            r.cancel.cancel();
        }
        let drained = st.queue.drain(..).collect();
        drop(st);
        // Wakes the lane task if it waits for work, so it exits now rather than at its idle timeout.
        self.notify.notify_one();
        drained
    }
}

struct JobWorker {
    key: HandlerKey,
    lanes: HashMap<LaneKey, Arc<Lane>>,
}

/// What workers need to run jobs and report them.
pub(crate) struct RunEnv {
    pub(crate) logs: RunLogs,
    pub(crate) admin: AdminClient,
    pub(crate) kill_grace: Duration,
    pub(crate) idle_timeout: Duration,
    /// The executor-wide limit of handlers running at once, and its slots.
    pub(crate) slots: Option<(usize, Arc<Semaphore>)>,
}

/// All workers of an executor. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Workers {
    shared: Arc<Shared>,
}

struct Shared {
    jobs: Mutex<HashMap<i64, JobWorker>>,
    env: RunEnv,
    /// Set when the executor starts; results are reported through it.
    callbacks: OnceLock<CallbackSender>,
    /// Lane and handler tasks, so shutdown can wait for them.
    tasks: TaskTracker,
}

impl Workers {
    pub(crate) fn new(env: RunEnv) -> Self {
        Workers {
            shared: Arc::new(Shared {
                jobs: Mutex::new(HashMap::new()),
                env,
                callbacks: OnceLock::new(),
                tasks: TaskTracker::new(),
            }),
        }
    }

    /// Connects the callback pipeline; `false` if one was connected already.
    pub(crate) fn set_callbacks(&self, sender: CallbackSender) -> bool {
        self.shared.callbacks.set(sender).is_ok()
    }

    pub(crate) fn is_started(&self) -> bool {
        self.shared.callbacks.get().is_some()
    }

    fn jobs(&self) -> MutexGuard<'_, HashMap<i64, JobWorker>> {
        self.shared.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a run (`/run`), applying the block strategy. `Err` carries the message of the refusal.
    pub(crate) fn trigger(
        &self,
        req: TriggerRequest,
        key: HandlerKey,
        runner: Runner,
        shard_total: i32,
    ) -> Result<(), String> {
        let job_id = req.job_id;
        let log_id = req.log_id;
        let strategy = BlockStrategy::from_wire(&req.executor_block_strategy);
        let lane_key: LaneKey = req.idempotency_key.as_ref().map(|_| req.broadcast_index);
        // Runs taken out of retired lanes; failed after the locks are released.
        let mut evicted: Vec<(Queued, &'static str)> = Vec::new();
        let outcome = {
            let mut jobs = self.jobs();
            if jobs.get(&job_id).is_some_and(|w| w.key != key) {
                if let Some(old) = jobs.remove(&job_id) {
                    for lane in old.lanes.values() {
                        evicted.extend(
                            lane.stop(REASON_CHANGED)
                                .into_iter()
                                .map(|q| (q, REASON_CHANGED)),
                        );
                    }
                }
            }
            let worker = jobs.entry(job_id).or_insert_with(|| JobWorker {
                key,
                lanes: HashMap::new(),
            });
            let busy = worker
                .lanes
                .get(&lane_key)
                .is_some_and(|l| l.state().busy());
            // A repeated request carries the same shard, so only its own lane can hold it:
            // looking through every lane made a fire of thousands of items on one executor
            // quadratic (5 100 items took seconds to accept).
            if worker
                .lanes
                .get(&lane_key)
                .is_some_and(|l| l.state().holds(log_id))
            {
                Err(format!("repeat trigger job, logId:{log_id}"))
            } else if busy && strategy == BlockStrategy::DiscardLater {
                Err(MSG_DISCARD.to_string())
            } else {
                if busy && strategy == BlockStrategy::CoverEarly {
                    if let Some(old) = worker.lanes.remove(&lane_key) {
                        evicted.extend(
                            old.stop(REASON_COVER)
                                .into_iter()
                                .map(|q| (q, REASON_COVER)),
                        );
                    }
                }
                let lane = worker
                    .lanes
                    .entry(lane_key)
                    .or_insert_with(|| self.spawn_lane(job_id, lane_key))
                    .clone();
                lane.state().queue.push_back(Queued {
                    req,
                    runner,
                    shard_total,
                });
                lane.notify.notify_one();
                Ok(())
            }
        };
        for (q, reason) in evicted {
            self.fail_queued(q, reason);
        }
        outcome
    }

    /// `/kill`: stops every lane of the job. `false` when the job had no worker.
    pub(crate) fn kill(&self, job_id: i64, reason: &str) -> bool {
        let Some(worker) = self.jobs().remove(&job_id) else {
            return false;
        };
        for lane in worker.lanes.values() {
            for q in lane.stop(reason) {
                self.fail_queued(q, reason);
            }
        }
        true
    }

    /// `/idleBeat`: whether the job has a run going or waiting.
    pub(crate) fn is_busy(&self, job_id: i64) -> bool {
        self.jobs()
            .get(&job_id)
            .is_some_and(|w| w.lanes.values().any(|l| l.state().busy()))
    }

    /// Whether any job has a run going or waiting.
    pub(crate) fn any_busy(&self) -> bool {
        self.jobs()
            .values()
            .any(|w| w.lanes.values().any(|l| l.state().busy()))
    }

    /// Shutdown: lets runs finish for `grace`, then kills what is left and waits for the tasks
    /// (each killed run reports its result through the callback pipeline).
    pub(crate) async fn shutdown(&self, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        while self.any_busy() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let job_ids: Vec<i64> = self.jobs().keys().copied().collect();
        for job_id in job_ids {
            self.kill(job_id, REASON_SHUTDOWN);
        }
        let tasks = &self.shared.tasks;
        tasks.close();
        // A handler stuck in blocking code cannot be aborted; do not let it hold shutdown for ever.
        let bound = self.shared.env.kill_grace + Duration::from_secs(1);
        if tokio::time::timeout(bound, tasks.wait()).await.is_err() {
            tracing::warn!("some job handlers did not stop; shutting down without them");
        }
    }

    /// Reports a run that is decided without being queued (maxNode skip or error).
    pub(crate) fn finish_at_once(&self, req: &TriggerRequest, result: JobResult) {
        let logger = self.shared.env.logs.logger(req.log_id, req.log_date_time);
        log_start(&logger, req, req.broadcast_total);
        self.finish(req, &logger, result);
    }

    fn fail_queued(&self, q: Queued, reason: &str) {
        let logger = self
            .shared
            .env
            .logs
            .logger(q.req.log_id, q.req.log_date_time);
        let msg = format!("{reason} [job not executed, in the job queue, killed.]");
        self.finish(&q.req, &logger, JobResult::fail(msg));
    }

    /// Logs the end of a run and sends its one callback.
    fn finish(&self, req: &TriggerRequest, logger: &RunLogger, result: JobResult) {
        let (code, mut msg) = if result.code() <= 0 {
            (
                CODE_FAIL,
                format!("job handle result lost. (code {})", result.code()),
            )
        } else {
            (result.code(), result.msg().to_string())
        };
        if let Some((cut, _)) = msg.char_indices().nth(MAX_RESULT_MSG_CHARS) {
            msg.truncate(cut);
            msg.push_str("...");
        }
        logger.log(format!(
            "----------- job execute end(finish) ----------- Result: handleCode={code}, handleMsg = {msg}"
        ));
        let item = CallbackItem {
            log_id: req.log_id,
            log_date_time: req.log_date_time,
            handle_code: code,
            handle_msg: msg,
        };
        match self.shared.callbacks.get() {
            Some(sender) => sender.send(item),
            // Only reachable when runs are queued on an executor that was never started.
            None => tracing::error!(
                log_id = item.log_id,
                "run finished but the executor is not started; result not reported"
            ),
        }
    }

    fn spawn_lane(&self, job_id: i64, key: LaneKey) -> Arc<Lane> {
        let lane = Arc::new(Lane {
            job_id,
            key,
            state: Mutex::new(LaneState::default()),
            notify: Notify::new(),
        });
        let workers = self.clone();
        let task_lane = Arc::clone(&lane);
        self.shared
            .tasks
            .spawn(async move { workers.lane_loop(task_lane).await });
        lane
    }

    async fn lane_loop(self, lane: Arc<Lane>) {
        loop {
            let next = {
                let mut st = lane.state();
                if st.stopped.is_some() {
                    return;
                }
                st.queue.pop_front().map(|q| {
                    let cancel = CancellationToken::new();
                    st.running = Some(Running {
                        log_id: q.req.log_id,
                        cancel: cancel.clone(),
                    });
                    (q, cancel)
                })
            };
            match next {
                Some((q, cancel)) => {
                    let (req, logger, result) = self.execute(&lane, q, cancel).await;
                    // Idle before the result leaves: an admin that reacts to the callback with a
                    // new trigger (or an idleBeat) must find the job idle, not still running.
                    lane.state().running = None;
                    self.finish(&req, &logger, result);
                }
                None => {
                    let idle = self.shared.env.idle_timeout;
                    if tokio::time::timeout(idle, lane.notify.notified())
                        .await
                        .is_err()
                        && self.retire_idle(&lane)
                    {
                        return;
                    }
                }
            }
        }
    }

    /// Removes an idle lane (and its job entry when it was the last lane). `false` if work arrived.
    fn retire_idle(&self, lane: &Arc<Lane>) -> bool {
        let mut jobs = self.jobs();
        let mut st = lane.state();
        if st.stopped.is_some() {
            return true;
        }
        if st.busy() {
            return false;
        }
        st.stopped = Some("executor idle times over limit.".to_string());
        drop(st);
        if let Some(worker) = jobs.get_mut(&lane.job_id) {
            if worker
                .lanes
                .get(&lane.key)
                .is_some_and(|l| Arc::ptr_eq(l, lane))
            {
                worker.lanes.remove(&lane.key);
                if worker.lanes.is_empty() {
                    jobs.remove(&lane.job_id);
                }
            }
        }
        tracing::debug!(job_id = lane.job_id, "idle job worker exits");
        true
    }

    /// Runs one queued run to its result (the caller reports it).
    async fn execute(
        &self,
        lane: &Lane,
        q: Queued,
        cancel: CancellationToken,
    ) -> (TriggerRequest, RunLogger, JobResult) {
        let env = &self.shared.env;
        let req = q.req;
        let logger = env.logs.logger(req.log_id, req.log_date_time);
        log_start(&logger, &req, q.shard_total);
        let timeout = u64::try_from(req.executor_timeout)
            .ok()
            .filter(|s| *s > 0)
            .map(Duration::from_secs);
        let deadline = async {
            match timeout {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline);
        let stop_reason = || {
            lane.state()
                .stopped
                .clone()
                .unwrap_or_else(|| REASON_KILL.to_string())
        };
        // Over the executor-wide limit the run waits for a slot, held until its handler is done
        // (aborted included); a kill or its timeout ends the wait.
        let _slot = match &env.slots {
            Some((limit, slots)) => {
                if slots.available_permits() == 0 {
                    logger.log(format!(
                        "----------- waiting for a slot: at most {limit} runs at once on this executor"
                    ));
                }
                tokio::select! {
                    permit = Arc::clone(slots).acquire_owned() => permit.ok(),
                    _ = cancel.cancelled() => {
                        let reason = stop_reason();
                        logger.log(format!("----------- job thread stopped, reason: {reason}"));
                        return (req, logger, JobResult::fail(format!("{reason} [job waiting for a slot, killed]")));
                    }
                    _ = &mut deadline => {
                        logger.log("----------- job execute timeout");
                        return (req, logger, JobResult::timeout(MSG_TIMEOUT));
                    }
                }
            }
            None => None,
        };
        let ctx = JobContext::new(
            &req,
            q.shard_total,
            logger.clone(),
            env.admin.clone(),
            cancel.clone(),
        );
        // The handler is called inside its own task: a panic, even one raised before the handler's
        // future exists, ends that task only.
        let runner = q.runner;
        let mut task = self.shared.tasks.spawn(async move {
            match runner {
                Runner::Bean(handler) => handler(ctx).await,
                Runner::Script(script) => script.run(ctx).await,
            }
        });
        let result = tokio::select! {
            joined = &mut task => match joined {
                Ok(result) => result,
                Err(e) => {
                    let msg = panic_text(e);
                    logger.log(format!("----------- job handler panicked: {msg}"));
                    JobResult::fail(format!("job handler panicked: {msg}"))
                }
            },
            _ = cancel.cancelled() => {
                let reason = stop_reason();
                logger.log(format!("----------- job thread stopped, reason: {reason}"));
                settle(task, env.kill_grace, &logger).await;
                JobResult::fail(format!("{reason} [job running, killed]"))
            }
            _ = &mut deadline => {
                logger.log("----------- job execute timeout");
                cancel.cancel();
                settle(task, env.kill_grace, &logger).await;
                JobResult::timeout(MSG_TIMEOUT)
            }
        };
        (req, logger, result)
    }
}

fn log_start(logger: &RunLogger, req: &TriggerRequest, shard_total: i32) {
    logger.log_lines(&[
        "----------- job execute start -----------",
        &format!(
            "----------- jobId:{} logId:{} param:{} shard:{}/{}",
            req.job_id, req.log_id, req.executor_params, req.broadcast_index, shard_total
        ),
    ]);
}

/// Gives a cancelled handler `grace` to return, then aborts it.
async fn settle(mut task: JoinHandle<JobResult>, grace: Duration, logger: &RunLogger) {
    if tokio::time::timeout(grace, &mut task).await.is_err() {
        task.abort();
        logger.log(format!(
            "----------- job handler ignored cancellation for {grace:?}, aborted"
        ));
    }
}

fn panic_text(e: tokio::task::JoinError) -> String {
    if !e.is_panic() {
        return e.to_string();
    }
    let payload = e.into_panic();
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}
