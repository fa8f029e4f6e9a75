//! Per-job workers through the protocol: block strategies, timeout, kill, duplicates, maxNode,
//! panics, sibling shard items, script jobs, idle exit and checkpoints.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use serde_json::json;
use shardline_executor::{CheckpointError, ExecutorBuilder, JobContext, JobHandler, JobResult};

/// Counts concurrent and total executions, and records the order of log ids.
#[derive(Clone, Default)]
struct Probe {
    running: Arc<AtomicUsize>,
    max_running: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
    order: Arc<Mutex<Vec<i64>>>,
    totals: Arc<Mutex<Vec<(i64, i32, i32)>>>,
}

impl Probe {
    fn enter(&self, ctx: &JobContext) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_running.fetch_max(now, Ordering::SeqCst);
        self.order.lock().unwrap().push(ctx.log_id());
        self.totals
            .lock()
            .unwrap()
            .push((ctx.log_id(), ctx.shard_index(), ctx.shard_total()));
    }

    fn leave(&self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

/// `sleep`: sleeps the number of milliseconds in its parameter, honouring cancellation.
/// `stubborn`: sleeps 30 s ignoring cancellation (it has to be aborted).
fn handlers(probe: &Probe) -> impl FnOnce(ExecutorBuilder) -> ExecutorBuilder {
    let p1 = probe.clone();
    let p2 = probe.clone();
    move |b| {
        b.handler("sleep", move |ctx| {
            let p = p1.clone();
            async move {
                p.enter(&ctx);
                let ms: u64 = ctx.params().parse().unwrap_or(0);
                let result = tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => JobResult::success_with(format!("slept {ms}")),
                    _ = ctx.cancelled() => JobResult::fail("cancelled"),
                };
                p.leave();
                result
            }
        })
        .handler("stubborn", move |ctx| {
            let p = p2.clone();
            async move {
                p.enter(&ctx);
                tokio::time::sleep(Duration::from_secs(30)).await;
                p.leave();
                JobResult::success_with("stubborn finished")
            }
        })
        .handler("panics", |ctx| async move {
            if ctx.params() == "boom" {
                panic!("boom at {}", ctx.log_id());
            }
            JobResult::success()
        })
        .handler("coded", |ctx| async move {
            let code: i32 = ctx.params().parse().unwrap_or(200);
            JobResult::with_code(code, "custom")
        })
    }
}

fn sleep_trigger(job_id: i64, log_id: i64, ms: u64, strategy: &str) -> serde_json::Value {
    trigger_with(
        job_id,
        log_id,
        "sleep",
        json!({"executorParams": ms.to_string(), "executorBlockStrategy": strategy}),
    )
}

#[tokio::test]
async fn serial_execution_runs_one_at_a_time_in_order() {
    let probe = Probe::default();
    let ex = TestExecutor::start(|_| {}, handlers(&probe)).await;
    let triggers: Vec<_> = (1..=4)
        .map(|log_id| sleep_trigger(1, log_id, 100, "SERIAL_EXECUTION"))
        .collect();
    for t in &triggers {
        ex.run_ok(t).await;
    }
    // Queued runs make the job busy for idleBeat.
    let env = ex.post("/idleBeat", &json!({"jobId": 1})).await;
    assert_eq!(env["code"], 500);
    assert_eq!(env["msg"], "job thread is running or has trigger queue.");
    for log_id in 1..=4 {
        let cb = ex.admin.callback(log_id).await;
        assert_eq!((cb.handle_code, cb.handle_msg.as_str()), (200, "slept 100"));
        // The trigger's time comes back: it names the log's day folder on the admin side.
        assert_eq!(
            cb.log_date_time,
            triggers[log_id as usize - 1]["logDateTime"]
                .as_i64()
                .unwrap()
        );
    }
    assert_eq!(*probe.order.lock().unwrap(), vec![1, 2, 3, 4]);
    assert_eq!(probe.max_running.load(Ordering::SeqCst), 1);
    let env = ex.post("/idleBeat", &json!({"jobId": 1})).await;
    assert_eq!(env["code"], 200);
    // Unknown strategies are serial, as in XXL-JOB.
    ex.run_ok(&sleep_trigger(1, 5, 10, "WHATEVER")).await;
    assert_eq!(ex.admin.callback(5).await.handle_code, 200);
    for log_id in 1..=5 {
        assert_eq!(
            ex.admin.callback_count(log_id),
            1,
            "exactly one callback per run"
        );
    }
    ex.stop().await;
}

#[tokio::test]
async fn discard_later_refuses_while_busy() {
    let probe = Probe::default();
    let ex = TestExecutor::start(|_| {}, handlers(&probe)).await;
    ex.run_ok(&sleep_trigger(2, 1, 1000, "DISCARD_LATER")).await;
    eventually("first run started", || probe.calls() == 1).await;
    let env = ex.run(&sleep_trigger(2, 2, 10, "DISCARD_LATER")).await;
    assert_eq!(env["code"], 500);
    assert_eq!(env["msg"], "block strategy effect：Discard Later");
    assert_eq!(ex.admin.callback(1).await.handle_code, 200);
    // Idle again: accepted.
    ex.run_ok(&sleep_trigger(2, 3, 10, "DISCARD_LATER")).await;
    assert_eq!(ex.admin.callback(3).await.handle_code, 200);
    assert_eq!(ex.admin.callback_count(2), 0);
    ex.stop().await;
}

#[tokio::test]
async fn cover_early_kills_running_and_queued() {
    let probe = Probe::default();
    let ex = TestExecutor::start(|_| {}, handlers(&probe)).await;
    ex.run_ok(&sleep_trigger(3, 1, 10_000, "SERIAL_EXECUTION"))
        .await;
    ex.run_ok(&sleep_trigger(3, 2, 10_000, "SERIAL_EXECUTION"))
        .await;
    eventually("first run started", || probe.calls() == 1).await;
    ex.run_ok(&sleep_trigger(3, 3, 50, "COVER_EARLY")).await;
    let first = ex.admin.callback(1).await;
    assert_eq!(first.handle_code, 500);
    assert_eq!(
        first.handle_msg,
        "block strategy effect：Cover Early [job running, killed]"
    );
    let second = ex.admin.callback(2).await;
    assert_eq!(second.handle_code, 500);
    assert_eq!(
        second.handle_msg,
        "block strategy effect：Cover Early [job not executed, in the job queue, killed.]"
    );
    let third = ex.admin.callback(3).await;
    assert_eq!(
        (third.handle_code, third.handle_msg.as_str()),
        (200, "slept 50")
    );
    // Run 2 never started.
    assert_eq!(*probe.order.lock().unwrap(), vec![1, 3]);
    ex.stop().await;
}

#[tokio::test]
async fn timeout_reports_502_and_aborts_a_stubborn_handler() {
    let probe = Probe::default();
    let ex = TestExecutor::start(|_| {}, handlers(&probe)).await;
    let started = std::time::Instant::now();
    ex.run_ok(&trigger_with(
        4,
        1,
        "stubborn",
        json!({"executorTimeout": 1}),
    ))
    .await;
    let cb = ex.admin.callback(1).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_str()),
        (502, "job execute timeout")
    );
    // One second of timeout plus the 300 ms grace, not the handler's 30 s.
    assert!(started.elapsed() < Duration::from_secs(5));
    // The aborted handler never got past its sleep, and the worker goes on.
    ex.run_ok(&trigger_with(
        4,
        2,
        "sleep",
        json!({"executorParams": "10"}),
    ))
    .await;
    assert_eq!(ex.admin.callback(2).await.handle_code, 200);
    assert_eq!(
        probe.running.load(Ordering::SeqCst),
        1,
        "the stubborn run was aborted, not finished"
    );
    // A cooperative handler sees the cancellation before the timeout result is reported.
    ex.run_ok(&trigger_with(
        4,
        3,
        "sleep",
        json!({"executorParams": "60000", "executorTimeout": 1}),
    ))
    .await;
    assert_eq!(ex.admin.callback(3).await.handle_code, 502);
    ex.stop().await;
}

#[tokio::test]
async fn kill_stops_the_running_run_and_fails_the_queue() {
    let probe = Probe::default();
    let ex = TestExecutor::start(|_| {}, handlers(&probe)).await;
    // Same handler for all three: a different one would replace the worker instead.
    for log_id in 1..=3 {
        ex.run_ok(&trigger(5, log_id, "stubborn")).await;
    }
    eventually("first run started", || probe.calls() == 1).await;
    let env = ex.post("/kill", &json!({"jobId": 5})).await;
    assert_eq!(env["code"], 200);
    assert_eq!(env["msg"], serde_json::Value::Null);
    let first = ex.admin.callback(1).await;
    assert_eq!(
        (first.handle_code, first.handle_msg.as_str()),
        (500, "scheduling center kill job. [job running, killed]")
    );
    for log_id in [2, 3] {
        let cb = ex.admin.callback(log_id).await;
        assert_eq!(
            (cb.handle_code, cb.handle_msg.as_str()),
            (
                500,
                "scheduling center kill job. [job not executed, in the job queue, killed.]"
            )
        );
    }
    assert_eq!(probe.calls(), 1);
    // The job can be triggered again after a kill.
    ex.run_ok(&sleep_trigger(5, 4, 10, "SERIAL_EXECUTION"))
        .await;
    assert_eq!(ex.admin.callback(4).await.handle_code, 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    for log_id in 1..=4 {
        assert_eq!(
            ex.admin.callback_count(log_id),
            1,
            "exactly one callback per run"
        );
    }
    ex.stop().await;
}

#[tokio::test]
async fn duplicate_log_id_is_refused_while_queued_or_running() {
    let probe = Probe::default();
    let ex = TestExecutor::start(|_| {}, handlers(&probe)).await;
    ex.run_ok(&sleep_trigger(6, 1, 1000, "SERIAL_EXECUTION"))
        .await;
    ex.run_ok(&sleep_trigger(6, 2, 10, "SERIAL_EXECUTION"))
        .await;
    eventually("first run started", || probe.calls() == 1).await;
    for log_id in [1, 2] {
        let env = ex.run(&sleep_trigger(6, log_id, 10, "COVER_EARLY")).await;
        assert_eq!(env["msg"], format!("repeat trigger job, logId:{log_id}"));
    }
    ex.admin.callback(2).await;
    assert_eq!(ex.admin.callback_count(1), 1);
    assert_eq!(probe.calls(), 2);

    // Items of a sharded fire (each in its own lane): a repeat of one item's request is refused,
    // the other items are not held up by it.
    let item = |log_id: i64, index: i32| {
        let mut t = sleep_trigger(8, log_id, 300, "SERIAL_EXECUTION");
        t["broadcastIndex"] = json!(index);
        t["broadcastTotal"] = json!(3);
        t["shardlineIdempotencyKey"] = json!(format!("8:1:{index}"));
        t
    };
    for (log_id, index) in [(11, 0), (12, 1), (13, 2)] {
        ex.run_ok(&item(log_id, index)).await;
    }
    for (log_id, index) in [(11, 0), (13, 2)] {
        let env = ex.run(&item(log_id, index)).await;
        assert_eq!(env["msg"], format!("repeat trigger job, logId:{log_id}"));
    }
    for log_id in [11, 12, 13] {
        assert_eq!(ex.admin.callback(log_id).await.handle_code, 200);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    for log_id in [11, 12, 13] {
        assert_eq!(ex.admin.callback_count(log_id), 1, "log {log_id} ran once");
    }
    ex.stop().await;
}

#[tokio::test]
async fn max_node_skips_rewrites_and_rejects() {
    let probe = Probe::default();
    let ex = TestExecutor::start(|_| {}, handlers(&probe)).await;
    let shard = |log_id: i64, params: &str, index: i32, total: i32| {
        trigger_with(
            7,
            log_id,
            "sleep",
            json!({"executorParams": params, "broadcastIndex": index, "broadcastTotal": total}),
        )
    };
    // Index 2 of 3 with maxNode 2: success at once, the handler is not called.
    ex.run_ok(&shard(1, r#"{"maxNode":2}"#, 2, 3)).await;
    let cb = ex.admin.callback(1).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_str()),
        (200, "skipped, maxNode=2")
    );
    assert_eq!(probe.calls(), 0);
    // Index 1 runs and sees a total of 2.
    ex.run_ok(&shard(2, r#"{"maxNode":2}"#, 1, 3)).await;
    ex.admin.callback(2).await;
    assert_eq!(*probe.totals.lock().unwrap(), vec![(2, 1, 2)]);
    // Invalid values fail the run with the reason.
    ex.run_ok(&shard(3, r#"{"maxNode":5}"#, 0, 3)).await;
    let cb = ex.admin.callback(3).await;
    assert_eq!(cb.handle_code, 500);
    assert_eq!(cb.handle_msg, "invalid maxNode 5: larger than shardTotal 3");
    ex.run_ok(&shard(4, r#"{"maxNode":0}"#, 0, 3)).await;
    assert!(ex.admin.callback(4).await.handle_msg.contains("at least 1"));
    ex.run_ok(&shard(5, r#"{"maxNode":"two"}"#, 0, 3)).await;
    assert!(ex
        .admin
        .callback(5)
        .await
        .handle_msg
        .contains("not an integer"));
    assert_eq!(probe.calls(), 1);
    // Plain strings (the sleep handler's milliseconds) are untouched.
    ex.run_ok(&shard(6, "20", 2, 3)).await;
    let cb = ex.admin.callback(6).await;
    assert_eq!(cb.handle_msg, "slept 20");
    assert_eq!(probe.totals.lock().unwrap()[1], (6, 2, 3));
    // The skipped run has a log saying so.
    let env = ex
        .post(
            "/log",
            &json!({"logId":1,"logDateTime":now_millis(),"fromLineNum":1}),
        )
        .await;
    assert!(env["data"]["logContent"]
        .as_str()
        .unwrap()
        .contains("skipped, maxNode=2"));
    ex.stop().await;
}

#[tokio::test]
async fn a_panicking_handler_fails_its_run_only() {
    let probe = Probe::default();
    let ex = TestExecutor::start(|_| {}, handlers(&probe)).await;
    ex.run_ok(&trigger_with(
        8,
        1,
        "panics",
        json!({"executorParams": "boom"}),
    ))
    .await;
    ex.run_ok(&trigger_with(
        8,
        2,
        "panics",
        json!({"executorParams": "fine"}),
    ))
    .await;
    let cb = ex.admin.callback(1).await;
    assert_eq!(cb.handle_code, 500);
    assert!(cb.handle_msg.contains("boom at 1"), "{}", cb.handle_msg);
    assert_eq!(ex.admin.callback(2).await.handle_code, 200);
    ex.stop().await;
}

#[tokio::test]
async fn custom_codes_pass_through_and_zero_is_not_a_result() {
    let probe = Probe::default();
    let ex = TestExecutor::start(|_| {}, handlers(&probe)).await;
    ex.run_ok(&trigger_with(
        9,
        1,
        "coded",
        json!({"executorParams": "409"}),
    ))
    .await;
    ex.run_ok(&trigger_with(9, 2, "coded", json!({"executorParams": "0"})))
        .await;
    let cb = ex.admin.callback(1).await;
    assert_eq!((cb.handle_code, cb.handle_msg.as_str()), (409, "custom"));
    let cb = ex.admin.callback(2).await;
    assert_eq!(cb.handle_code, 500);
    assert!(cb.handle_msg.starts_with("job handle result lost."));
    ex.stop().await;
}

#[tokio::test]
async fn sibling_items_are_never_discarded() {
    let probe = Probe::default();
    let ex = TestExecutor::start(|_| {}, handlers(&probe)).await;
    let item = |log_id: i64, index: i32, strategy: &str| {
        trigger_with(
            10,
            log_id,
            "sleep",
            json!({
                "executorParams": "1000",
                "executorBlockStrategy": strategy,
                "broadcastIndex": index,
                "broadcastTotal": 8,
                "shardlineIdempotencyKey": format!("10:77:{index}"),
            }),
        )
    };
    // Items 0, 1 and 6 of one fire land here: all run, side by side.
    ex.run_ok(&item(1, 0, "DISCARD_LATER")).await;
    ex.run_ok(&item(2, 1, "DISCARD_LATER")).await;
    ex.run_ok(&item(3, 6, "COVER_EARLY")).await;
    for log_id in 1..=3 {
        let cb = ex.admin.callback(log_id).await;
        assert_eq!(cb.handle_code, 200, "{}", cb.handle_msg);
    }
    assert_eq!(probe.max_running.load(Ordering::SeqCst), 3);
    // The next fire's item 0 arriving while this fire's item 0 runs is a block-strategy matter.
    ex.run_ok(&item(4, 0, "DISCARD_LATER")).await;
    eventually("item 0 started", || probe.calls() == 4).await;
    let env = ex.run(&item(5, 0, "DISCARD_LATER")).await;
    assert_eq!(env["msg"], "block strategy effect：Discard Later");
    ex.admin.callback(4).await;
    // Without Shardline's fields (a stock admin), one job is one queue, as in XXL-JOB.
    ex.run_ok(&sleep_trigger(11, 6, 1000, "DISCARD_LATER"))
        .await;
    eventually("stock run started", || probe.calls() == 5).await;
    let mut stock = sleep_trigger(11, 7, 300, "DISCARD_LATER");
    stock["broadcastIndex"] = json!(1);
    stock["broadcastTotal"] = json!(2);
    assert_eq!(
        ex.run(&stock).await["msg"],
        "block strategy effect：Discard Later"
    );
    ex.stop().await;
}

#[tokio::test]
async fn a_changed_handler_replaces_the_worker() {
    let probe = Probe::default();
    let ex = TestExecutor::start(|_| {}, handlers(&probe)).await;
    ex.run_ok(&sleep_trigger(12, 1, 10_000, "SERIAL_EXECUTION"))
        .await;
    eventually("first run started", || probe.calls() == 1).await;
    ex.run_ok(&trigger_with(
        12,
        2,
        "coded",
        json!({"executorParams": "200"}),
    ))
    .await;
    let cb = ex.admin.callback(1).await;
    assert_eq!(
        cb.handle_msg,
        "change jobhandler or glue type, and terminate the old job thread. [job running, killed]"
    );
    assert_eq!(ex.admin.callback(2).await.handle_code, 200);
    ex.stop().await;
}

#[tokio::test]
async fn an_idle_worker_exits() {
    let probe = Probe::default();
    let ex = TestExecutor::start(
        |c| c.worker_idle_timeout = Duration::from_millis(1000),
        handlers(&probe),
    )
    .await;
    // Right after a run the worker still exists: /kill finds it.
    ex.run_ok(&sleep_trigger(13, 1, 10, "SERIAL_EXECUTION"))
        .await;
    ex.admin.callback(1).await;
    let env = ex.post("/kill", &json!({"jobId": 13})).await;
    assert_eq!(
        env["msg"],
        serde_json::Value::Null,
        "worker should still exist: {env}"
    );
    // After the idle timeout it is gone.
    ex.run_ok(&sleep_trigger(14, 2, 10, "SERIAL_EXECUTION"))
        .await;
    ex.admin.callback(2).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let env = ex.post("/kill", &json!({"jobId": 14})).await;
    assert_eq!(env["msg"], "job thread already killed.");
    // And a new trigger gets a fresh one.
    ex.run_ok(&sleep_trigger(14, 3, 10, "SERIAL_EXECUTION"))
        .await;
    assert_eq!(ex.admin.callback(3).await.handle_code, 200);
    ex.stop().await;
}

#[tokio::test]
async fn shutdown_kills_running_jobs_and_reports_them() {
    let probe = Probe::default();
    let ex = TestExecutor::start(|_| {}, handlers(&probe)).await;
    ex.run_ok(&sleep_trigger(15, 1, 60_000, "SERIAL_EXECUTION"))
        .await;
    ex.run_ok(&sleep_trigger(15, 2, 60_000, "SERIAL_EXECUTION"))
        .await;
    eventually("run started", || probe.calls() == 1).await;
    let admin = ex.admin.clone();
    ex.stop().await;
    let cb = admin.callback(1).await;
    assert_eq!(
        cb.handle_msg,
        "executor shutdown, and kill the job. [job running, killed]"
    );
    let cb = admin.callback(2).await;
    assert_eq!(
        cb.handle_msg,
        "executor shutdown, and kill the job. [job not executed, in the job queue, killed.]"
    );
    admin.registry("registryRemove").await;
}

/// A handler type implementing the trait rather than a closure.
struct Checkpointing;

impl JobHandler for Checkpointing {
    async fn execute(&self, ctx: JobContext) -> JobResult {
        let seen = format!(
            "last={:?} item={:?} key={:?}",
            ctx.last_checkpoint(),
            ctx.item_param(),
            ctx.idempotency_key()
        );
        ctx.log(&seen);
        if let Err(e) = ctx
            .checkpoint("x".repeat(shardline_executor::protocol::MAX_CHECKPOINT_BYTES + 1))
            .await
        {
            assert!(
                matches!(e, CheckpointError::TooLarge { .. }) || e == CheckpointError::Unsupported
            );
        }
        match ctx.checkpoint("id=42").await {
            Ok(()) => JobResult::success_with(seen),
            Err(e) => JobResult::fail(e.to_string()),
        }
    }
}

#[tokio::test]
async fn checkpoints_go_to_a_shardline_admin_only() {
    let ex = TestExecutor::start(|_| {}, |b| b.job_handler("cp", Checkpointing)).await;
    ex.run_ok(&trigger_with(
        16,
        1,
        "cp",
        json!({
            "shardlineIdempotencyKey": "16:5:2",
            "shardlineCheckpoint": "id=7",
            "shardlineItemParam": "beijing",
            "broadcastIndex": 2,
            "broadcastTotal": 4
        }),
    ))
    .await;
    let cb = ex.admin.callback(1).await;
    assert_eq!(cb.handle_code, 200, "{}", cb.handle_msg);
    assert_eq!(
        cb.handle_msg,
        r#"last=Some("id=7") item=Some("beijing") key=Some("16:5:2")"#
    );
    let saved = ex.admin.record.lock().unwrap().checkpoints.clone();
    assert_eq!(
        saved.len(),
        1,
        "the oversized value never left the executor"
    );
    assert_eq!((saved[0].log_id, saved[0].value.as_str()), (1, "id=42"));
    // A stock admin's run: no call at all, a clear error for the handler.
    ex.run_ok(&trigger(16, 2, "cp")).await;
    let cb = ex.admin.callback(2).await;
    assert_eq!(cb.handle_code, 500);
    assert_eq!(
        cb.handle_msg,
        "checkpoints are not supported by the admin that sent this run"
    );
    assert_eq!(ex.admin.record.lock().unwrap().checkpoints.len(), 1);
    ex.stop().await;
}

fn glue(
    job_id: i64,
    log_id: i64,
    glue_type: &str,
    source: &str,
    updated: i64,
) -> serde_json::Value {
    trigger_with(
        job_id,
        log_id,
        "",
        json!({
            "glueType": glue_type,
            "glueSource": source,
            "glueUpdatetime": updated,
            "executorParams": "hello world",
            "broadcastIndex": 1,
            "broadcastTotal": 3
        }),
    )
}

async fn log_text(ex: &TestExecutor, log_id: i64) -> String {
    let env = ex
        .post(
            "/log",
            &json!({"logId":log_id,"logDateTime":now_millis(),"fromLineNum":1}),
        )
        .await;
    env["data"]["logContent"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn shell_scripts_run_when_enabled() {
    let ex = TestExecutor::start(|c| c.glue_enabled = true, |b| b).await;
    let script = "echo \"args:$1|$2|$3\"\r\necho oops >&2\nexit 0\n";
    ex.run_ok(&glue(20, 1, "GLUE_SHELL", script, 1000)).await;
    let cb = ex.admin.callback(1).await;
    assert_eq!(cb.handle_code, 200, "{}", cb.handle_msg);
    let log = log_text(&ex, 1).await;
    assert!(log.contains("args:hello world|1|3"), "{log}");
    assert!(log.contains("oops"), "{log}");
    let dir = ex.dir.path().join("gluesource");
    assert!(dir.join("20_1000.sh").exists());
    // A new version replaces the file and reports a failing exit code.
    ex.run_ok(&glue(20, 2, "GLUE_SHELL", "exit 3", 2000)).await;
    let cb = ex.admin.callback(2).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_str()),
        (500, "script exit value(3) is failed")
    );
    assert!(dir.join("20_2000.sh").exists());
    assert!(
        !dir.join("20_1000.sh").exists(),
        "older versions are deleted"
    );
    // maxNode applies to scripts too: the script sees the rewritten total.
    let mut t = glue(20, 3, "GLUE_SHELL", "echo \"total:$3\"", 2000);
    t["executorParams"] = json!(r#"{"maxNode":2}"#);
    ex.run_ok(&t).await;
    ex.admin.callback(3).await;
    assert!(log_text(&ex, 3).await.contains("total:2"));
    ex.stop().await;
}

#[tokio::test]
async fn a_killed_script_takes_its_children_with_it() {
    let ex = TestExecutor::start(|c| c.glue_enabled = true, |b| b).await;
    let pid_file = ex.dir.path().join("child.pid");
    // The script starts a background child and waits: both must die on timeout.
    let script = format!("sleep 30 &\necho $! > {}\nwait\n", pid_file.display());
    let mut t = glue(21, 1, "GLUE_SHELL", &script, 1);
    t["executorTimeout"] = json!(1);
    ex.run_ok(&t).await;
    let cb = ex.admin.callback(1).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_str()),
        (502, "job execute timeout")
    );
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    eventually("background child killed", || {
        // Gone, or a zombie waiting for its reaper.
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat.split_whitespace().nth(2) == Some("Z"),
        }
    })
    .await;
    ex.stop().await;
}

#[tokio::test]
async fn scripts_are_refused_when_disabled_and_groovy_always() {
    let ex = TestExecutor::start(|_| {}, |b| b).await;
    let env = ex.run(&glue(22, 1, "GLUE_SHELL", "echo hi", 1)).await;
    assert_eq!(env["code"], 500);
    assert_eq!(
        env["msg"],
        "fail, current glue type [GLUE_SHELL] not supported."
    );
    let env = ex.run(&glue(22, 2, "GLUE_PYTHON", "print(1)", 1)).await;
    assert_eq!(
        env["msg"],
        "fail, current glue type [GLUE_PYTHON] not supported."
    );
    let env = ex.run(&glue(22, 3, "GLUE_GROOVY", "class X {}", 1)).await;
    assert_eq!(env["msg"], "GLUE_GROOVY is not supported by this executor");
    ex.stop().await;

    let ex = TestExecutor::start(|c| c.glue_enabled = true, |b| b).await;
    let env = ex.run(&glue(22, 4, "GLUE_GROOVY", "class X {}", 1)).await;
    assert_eq!(env["msg"], "GLUE_GROOVY is not supported by this executor");
    ex.stop().await;
}

/// With `max_concurrent_runs`, at most that many handlers run at once over all jobs; the others
/// wait for a slot (busy for `idleBeat`), and a kill or their timeout ends the wait.
#[tokio::test]
async fn an_executor_wide_limit_makes_runs_wait_for_a_slot() {
    let probe = Probe::default();
    let ex = TestExecutor::start(|c| c.max_concurrent_runs = Some(2), handlers(&probe)).await;
    // Six jobs of their own (no block strategy between them), two slots.
    for job in 1..=6 {
        ex.run_ok(&sleep_trigger(job, job, 200, "SERIAL_EXECUTION"))
            .await;
    }
    let env = ex.post("/idleBeat", &json!({"jobId": 6})).await;
    assert_eq!(env["code"], 500, "a run waiting for a slot is busy");
    for log_id in 1..=6 {
        let cb = ex.admin.callback(log_id).await;
        assert_eq!((cb.handle_code, cb.handle_msg.as_str()), (200, "slept 200"));
    }
    assert_eq!(probe.max_running.load(Ordering::SeqCst), 2);
    assert!(log_text(&ex, 6)
        .await
        .contains("waiting for a slot: at most 2 runs at once"));

    // Both slots held by stubborn runs: a waiting run is killed, another times out waiting.
    for job in [11, 12] {
        ex.run_ok(&trigger(job, job, "stubborn")).await;
    }
    eventually("both slots taken", || probe.calls() == 8).await;
    ex.run_ok(&sleep_trigger(13, 13, 10, "SERIAL_EXECUTION"))
        .await;
    ex.run_ok(&trigger_with(
        14,
        14,
        "sleep",
        json!({"executorParams": "10", "executorTimeout": 1}),
    ))
    .await;
    let env = ex.post("/kill", &json!({"jobId": 13})).await;
    assert_eq!(env["code"], 200);
    let cb = ex.admin.callback(13).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_str()),
        (
            500,
            "scheduling center kill job. [job waiting for a slot, killed]"
        )
    );
    let cb = ex.admin.callback(14).await;
    assert_eq!(
        (cb.handle_code, cb.handle_msg.as_str()),
        (502, "job execute timeout")
    );
    assert_eq!(probe.calls(), 8, "neither waiting run got to its handler");
    // A killed run frees its slot for the next one.
    ex.post("/kill", &json!({"jobId": 11})).await;
    ex.run_ok(&sleep_trigger(15, 15, 10, "SERIAL_EXECUTION"))
        .await;
    assert_eq!(ex.admin.callback(15).await.handle_code, 200);
    ex.post("/kill", &json!({"jobId": 12})).await;
    ex.stop().await;
}
