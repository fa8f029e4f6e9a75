//! The callback pipeline against a recording fake admin: both body shapes, batching, the spool
//! while the admin is down and its replay when the admin returns, replay after a restart, and the
//! drain on shutdown.

mod fake_admin;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use fake_admin::{Call, FakeAdmin, Mode};
use shardline_executor::admin_client::AdminClient;
use shardline_executor::callback::{self, CallbackConfig};
use shardline_executor::protocol::{CallbackItem, Generation};
use shardline_executor::runlog::RunLogs;

const LOG_TIME: i64 = 1_750_000_000_123;
const WAIT: Duration = Duration::from_secs(10);

fn item(log_id: i64) -> CallbackItem {
    CallbackItem {
        log_id,
        log_date_time: LOG_TIME,
        handle_code: if log_id % 2 == 0 { 200 } else { 500 },
        handle_msg: format!("result of {log_id}"),
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    logs: RunLogs,
    spool: std::path::PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let logs = RunLogs::new(dir.path().join("logs"), 30).unwrap();
    let spool = dir.path().join("logs").join("callbacklogs");
    Setup {
        _dir: dir,
        logs,
        spool,
    }
}

fn config(spool: &Path, generation: Generation, batch_max: usize) -> CallbackConfig {
    CallbackConfig {
        generation,
        spool_dir: spool.to_path_buf(),
        batch_max,
        retry_interval: Duration::from_millis(200),
    }
}

fn client(admin: &FakeAdmin) -> AdminClient {
    AdminClient::new(
        reqwest::Client::new(),
        vec![admin.base()],
        "cb-token".to_string(),
        Duration::from_millis(500),
    )
}

/// Items of every `/api/callback` call, in either shape.
fn delivered(calls: &[Call]) -> Vec<serde_json::Value> {
    calls
        .iter()
        .filter(|c| c.path == "/api/callback")
        .flat_map(|c| match &c.body {
            serde_json::Value::Array(items) => items.clone(),
            other => other["callbackList"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        })
        .collect()
}

fn delivered_ids(calls: &[Call]) -> BTreeSet<i64> {
    delivered(calls)
        .iter()
        .map(|i| i["logId"].as_i64().unwrap())
        .collect()
}

/// The spool files written completely (a hidden `.…tmp` file is one being written, renamed into
/// place when done).
fn spool_files(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

async fn wait_for(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while !done() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

fn run_log(logs: &RunLogs, log_id: i64) -> String {
    logs.read(log_id, LOG_TIME, 1).log_content
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_array_shape_with_every_field_and_header() {
    let s = setup();
    let admin = FakeAdmin::start().await;
    let (sender, handle) = callback::start(
        config(&s.spool, Generation::Classic, 50),
        client(&admin),
        s.logs.clone(),
    );
    sender.send(item(1024));
    assert!(admin.wait_until(WAIT, |c| !delivered(c).is_empty()).await);
    handle.shutdown().await;

    let calls = admin.calls_to("callback");
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(call.header("xxl-job-access-token"), Some("cb-token"));
    assert_eq!(call.header("content-type"), Some("application/json"));
    assert_eq!(
        call.body,
        serde_json::json!([{"logId":1024,"logDateTim":LOG_TIME,"logDateTime":LOG_TIME,
                            "handleCode":200,"handleMsg":"result of 1024"}])
    );
    assert!(run_log(&s.logs, 1024).contains("callback finish"));
    assert!(spool_files(&s.spool).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v35_shape_wraps_the_list() {
    let s = setup();
    let admin = FakeAdmin::start().await;
    let (sender, handle) = callback::start(
        config(&s.spool, Generation::V35, 50),
        client(&admin),
        s.logs.clone(),
    );
    sender.send(item(7));
    assert!(admin.wait_until(WAIT, |c| !delivered(c).is_empty()).await);
    handle.shutdown().await;
    let body = &admin.calls_to("callback")[0].body;
    assert_eq!(
        body,
        &serde_json::json!({"callbackList":[{"logId":7,"logDateTim":LOG_TIME,
            "logDateTime":LOG_TIME,"handleCode":500,"handleMsg":"result of 7"}]})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_sends_become_few_posts() {
    let s = setup();
    let admin = FakeAdmin::start().await;
    let (sender, handle) = callback::start(
        config(&s.spool, Generation::Classic, 10),
        client(&admin),
        s.logs.clone(),
    );
    for id in 0..95 {
        sender.send(item(id));
    }
    assert!(admin.wait_until(WAIT, |c| delivered(c).len() >= 95).await);
    handle.shutdown().await;

    let calls = admin.calls_to("callback");
    let sizes: Vec<usize> = calls
        .iter()
        .map(|c| c.body.as_array().unwrap().len())
        .collect();
    assert!(sizes.iter().all(|&n| (1..=10).contains(&n)), "{sizes:?}");
    assert!(calls.len() >= 10 && calls.len() <= 20, "{sizes:?}");
    assert_eq!(delivered(&calls).len(), 95, "each result exactly once");
    assert_eq!(delivered_ids(&calls), (0..95).collect());
    // Order is kept within the stream.
    let order: Vec<i64> = delivered(&calls)
        .iter()
        .map(|i| i["logId"].as_i64().unwrap())
        .collect();
    assert_eq!(order, (0..95).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spooled_while_the_admin_is_down_and_replayed_when_it_returns() {
    let s = setup();
    let admin = FakeAdmin::start().await;
    admin.down().await;
    let (sender, handle) = callback::start(
        config(&s.spool, Generation::Classic, 50),
        client(&admin),
        s.logs.clone(),
    );
    for id in [1, 2, 3] {
        sender.send(item(id));
    }
    assert!(
        wait_for(WAIT, || !spool_files(&s.spool).is_empty()).await,
        "undeliverable batch spooled"
    );
    let files = spool_files(&s.spool);
    assert!(
        files
            .iter()
            .all(|f| f.starts_with("callback-") && f.ends_with(".json")),
        "{files:?}"
    );
    let log = run_log(&s.logs, 2);
    assert!(log.contains("callback fail, admin http://"), "{log}");

    // While the admin is known down, later results go to the spool without waiting.
    // (Three attempts with backoff would take more than 600 ms.)
    let sent = std::time::Instant::now();
    sender.send(item(4));
    assert!(wait_for(WAIT, || spool_files(&s.spool).len() >= 2).await);
    assert!(
        sent.elapsed() < Duration::from_millis(450),
        "{:?}",
        sent.elapsed()
    );

    admin.up().await;
    assert!(
        admin
            .wait_until(WAIT, |c| delivered_ids(c) == BTreeSet::from([1, 2, 3, 4]))
            .await,
        "spool replayed"
    );
    assert!(
        wait_for(WAIT, || spool_files(&s.spool).is_empty()).await,
        "delivered files deleted: {:?}",
        spool_files(&s.spool)
    );
    assert!(wait_for(WAIT, || run_log(&s.logs, 3).contains("callback finish")).await);
    handle.shutdown().await;
    assert_eq!(delivered(&admin.calls()).len(), 4, "no duplicates");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_refusing_with_code_500_is_retried_from_the_spool() {
    let s = setup();
    let admin = FakeAdmin::start().await;
    admin.set_mode(Mode::Fail);
    let (sender, handle) = callback::start(
        config(&s.spool, Generation::Classic, 50),
        client(&admin),
        s.logs.clone(),
    );
    sender.send(item(42));
    assert!(wait_for(WAIT, || !spool_files(&s.spool).is_empty()).await);
    // The first attempts and their backoff happened before the spool.
    assert!(admin.calls_to("callback").len() >= 3);
    assert!(run_log(&s.logs, 42).contains("callback fail, admin"));
    assert!(run_log(&s.logs, 42).contains("code 500, msg database unavailable"));

    admin.set_mode(Mode::Ok);
    assert!(wait_for(WAIT, || spool_files(&s.spool).is_empty()).await);
    handle.shutdown().await;
    let last = admin.calls_to("callback").pop().unwrap();
    assert_eq!(last.body[0]["logId"], 42);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_replays_what_the_previous_process_spooled() {
    let s = setup();
    let admin = FakeAdmin::start().await;
    admin.down().await;

    // First process: the admin is down the whole time; shutdown spools the queue.
    let (sender, handle) = callback::start(
        config(&s.spool, Generation::Classic, 2),
        client(&admin),
        s.logs.clone(),
    );
    for id in 10..17 {
        sender.send(item(id));
    }
    handle.shutdown().await;
    // A result reported after shutdown is not lost either.
    sender.send(item(99));
    let left = spool_files(&s.spool);
    assert!(!left.is_empty());
    assert!(
        left.iter().all(|f| f.starts_with("callback-")),
        "no temporary files: {left:?}"
    );

    // Second process, admin back: the spool is replayed at start, in the new generation's shape.
    admin.up().await;
    let (_sender, handle) = callback::start(
        config(&s.spool, Generation::V35, 50),
        client(&admin),
        s.logs.clone(),
    );
    let expected: BTreeSet<i64> = (10..17).chain([99]).collect();
    assert!(
        admin
            .wait_until(WAIT, |c| delivered_ids(c) == expected)
            .await,
        "got {:?}",
        delivered_ids(&admin.calls())
    );
    assert!(wait_for(WAIT, || spool_files(&s.spool).is_empty()).await);
    handle.shutdown().await;
    assert!(admin
        .calls_to("callback")
        .iter()
        .all(|c| c.body.get("callbackList").is_some()));
    assert!(run_log(&s.logs, 99).contains("callback finish (replayed from spool)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_delivers_what_is_queued() {
    let s = setup();
    let admin = FakeAdmin::start().await;
    let (sender, handle) = callback::start(
        config(&s.spool, Generation::Classic, 50),
        client(&admin),
        s.logs.clone(),
    );
    for id in 0..300 {
        sender.send(item(id));
    }
    handle.shutdown().await;
    assert_eq!(delivered_ids(&admin.calls()), (0..300).collect());
    assert_eq!(delivered(&admin.calls()).len(), 300);
    assert!(spool_files(&s.spool).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_spool_files_are_set_aside_not_retried() {
    let s = setup();
    std::fs::create_dir_all(&s.spool).unwrap();
    std::fs::write(s.spool.join("callback-broken.json"), "{ not json").unwrap();
    let admin = FakeAdmin::start().await;
    let (_sender, handle) = callback::start(
        config(&s.spool, Generation::Classic, 50),
        client(&admin),
        s.logs.clone(),
    );
    assert!(
        wait_for(WAIT, || spool_files(&s.spool)
            == ["callback-broken.json.bad"])
        .await,
        "{:?}",
        spool_files(&s.spool)
    );
    handle.shutdown().await;
    assert!(admin.calls().is_empty());
}
