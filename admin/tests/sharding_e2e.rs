//! The sharding model end to end, with real executors over HTTP: fixed items and their assignment,
//! shard failover when an executor process dies (kill -9) or stops answering (SIGSTOP), coverage,
//! checkpoints handed to takeovers and to the next fire, retry of failed items only, AFFINITY and
//! WEIGHTED, the guard on changing N, idempotency keys, and broadcast with maxNode.
//!
//! Executors that must die are separate processes running the SDK example `range_executor` (built
//! on demand); the others run in this process. Every test checks that no item of a fire succeeded
//! twice unless a retry was asked for. The tests take turns (one lock) so that the timings they
//! measure are not skewed by each other on a small machine.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use common::{TestAdmin, TestDb, TestExecutor, ACCESS_TOKEN};
use serde_json::{json, Value};
use shardline_executor::JobResult;

/// One test at a time: they measure failover latencies and start many executors.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

// ---------------------------------------------------------------------------------------------
// Executor processes

/// The `range_executor` example binary, built when missing or older than the SDK's sources.
fn range_executor_binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // The test binary lives in target/<profile>/deps; examples in target/<profile>/examples.
        let exe = std::env::current_exe().expect("path of the test binary");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test binary under target/<profile>/deps");
        let bin = profile_dir
            .join("examples")
            .join(format!("range_executor{}", std::env::consts::EXE_SUFFIX));
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../executor-sdk");
        let built = std::fs::metadata(&bin).and_then(|m| m.modified()).ok();
        let newest_source = [sdk.join("src"), sdk.join("examples")]
            .iter()
            .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
            .filter_map(|e| e.metadata().and_then(|m| m.modified()).ok())
            .max()
            .unwrap_or(SystemTime::UNIX_EPOCH);
        if built.is_none_or(|b| b < newest_source) {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
            let mut cmd = Command::new(cargo);
            cmd.args([
                "build",
                "-p",
                "shardline-executor",
                "--example",
                "range_executor",
            ]);
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let status = cmd
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("cargo runs");
            assert!(
                status.success(),
                "building the range_executor example failed"
            );
        }
        bin
    })
    .clone()
}

/// An executor process running `rangeJobHandler`; killed with SIGKILL when dropped.
struct ExecProcess {
    child: Child,
    address: String,
    journal: PathBuf,
    dir: tempfile::TempDir,
}

impl ExecProcess {
    /// Starts one and waits until it listens (it prints its address once bound).
    fn spawn(appname: &str, admin: &str) -> ExecProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = dir.path().join("journal.jsonl");
        let stderr = std::fs::File::create(dir.path().join("stderr.log")).expect("stderr file");
        let mut child = Command::new(range_executor_binary())
            .env("SHARDLINE_EXECUTOR_APPNAME", appname)
            .env("SHARDLINE_EXECUTOR_ADMIN_ADDRESSES", admin)
            .env("SHARDLINE_EXECUTOR_ACCESS_TOKEN", ACCESS_TOKEN)
            .env("SHARDLINE_EXECUTOR_BIND", "127.0.0.1:0")
            .env("SHARDLINE_EXECUTOR_LOG_PATH", dir.path().join("logs"))
            .env("SHARDLINE_EXECUTOR_CALLBACK_RETRY_INTERVAL_SECS", "1")
            .env("SHARDLINE_EXECUTOR_SHUTDOWN_GRACE_SECS", "1")
            .env("RANGE_EXECUTOR_BEAT_MS", "200")
            .env("RANGE_EXECUTOR_JOURNAL", &journal)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start the range_executor example");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut process = ExecProcess {
            child,
            address: String::new(),
            journal,
            dir,
        };
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        match line.trim().strip_prefix("listening on ") {
            Some(a) => process.address = a.to_string(),
            None => panic!(
                "range_executor did not start (printed {line:?}): {}",
                process.stderr()
            ),
        }
        process
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and waits until the process is gone. Returns when that was (epoch ms).
    fn kill9(&mut self) -> i64 {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
        now_ms()
    }

    /// Sends a signal by name (`STOP`, `CONT`).
    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{name} {}", self.pid());
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }

    /// Every journal line written so far (start, checkpoint, done of each run).
    fn journal(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.journal)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn events(&self, event: &str) -> Vec<Value> {
        self.journal()
            .into_iter()
            .filter(|e| e["event"] == event)
            .collect()
    }
}

impl Drop for ExecProcess {
    fn drop(&mut self) {
        // SIGKILL also ends a stopped process.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `n` executor processes, sorted by address (the order items are assigned in).
async fn processes(n: usize, appname: &str, admin: &TestAdmin, gid: i64) -> Vec<ExecProcess> {
    let mut v: Vec<ExecProcess> = (0..n)
        .map(|_| ExecProcess::spawn(appname, &admin.base))
        .collect();
    v.sort_by(|a, b| a.address.cmp(&b.address));
    admin.wait_executors(gid, n).await;
    v
}

// ---------------------------------------------------------------------------------------------
// Admin helpers

/// Registers an executor of `appname` at an address nobody listens on (it refuses connections)
/// and returns that address, which sorts before every live executor's.
async fn register_dead(admin: &TestAdmin, appname: &str) -> &'static str {
    let dead = "http://127.0.0.1:1/";
    admin
        .executor_call(
            "/api/registry",
            json!({"registryGroup": "EXECUTOR", "registryKey": appname, "registryValue": dead}),
        )
        .await;
    dead
}

async fn group(admin: &TestAdmin, appname: &str) -> i64 {
    admin
        .post("/groups", json!({"appname": appname, "title": appname}))
        .await["id"]
        .as_i64()
        .unwrap()
}

/// Creates an ITEMS job of `n` items; `extra` fields are merged in.
async fn items_job(admin: &TestAdmin, gid: i64, handler: &str, n: i64, extra: Value) -> i64 {
    let mut body = json!({
        "group_id": gid, "name": format!("{handler}-{n}"), "handler": handler,
        "schedule_type": "NONE", "sharding_mode": "ITEMS", "sharding_total": n,
        "sharding_strategy": "AVERAGE",
    });
    if let (Some(b), Value::Object(extra)) = (body.as_object_mut(), extra) {
        b.extend(extra);
    }
    admin.post("/jobs", body).await["id"].as_i64().unwrap()
}

async fn trigger(admin: &TestAdmin, jid: i64, body: Value) -> i64 {
    admin.post(&format!("/jobs/{jid}/trigger"), body).await["fire_id"]
        .as_i64()
        .unwrap()
}

fn runs(fire: &Value) -> Vec<Value> {
    fire["runs"].as_array().cloned().unwrap_or_default()
}

/// The current (not superseded) run of each item.
fn current_runs(fire: &Value) -> BTreeMap<i64, Value> {
    runs(fire)
        .into_iter()
        .filter(|r| r["superseded"] == 0)
        .map(|r| (r["shard_index"].as_i64().unwrap(), r))
        .collect()
}

/// The invariant of every test: no item of a fire has two successful runs (without a retry).
fn assert_one_success_per_item(fire: &Value) {
    let mut ok: HashMap<i64, usize> = HashMap::new();
    for r in runs(fire) {
        if r["state"] == "succeeded" {
            *ok.entry(r["shard_index"].as_i64().unwrap()).or_default() += 1;
        }
    }
    for (item, n) in ok {
        assert_eq!(n, 1, "item {item} succeeded {n} times: {fire}");
    }
}

/// The journals agree: no (fire, item) key finished twice on the executors' side either.
fn assert_one_done_per_key(procs: &[&ExecProcess]) {
    let mut done: HashMap<String, usize> = HashMap::new();
    for p in procs {
        for e in p.events("done") {
            *done
                .entry(e["key"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    for (key, n) in done {
        assert_eq!(n, 1, "{key} finished {n} times on the executors");
    }
}

async fn checkpoints(admin: &TestAdmin, jid: i64) -> BTreeMap<i64, Value> {
    admin
        .get(&format!("/jobs/{jid}/checkpoints"))
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["item"].as_i64().unwrap(), c.clone()))
        .collect()
}

/// Polls `check` every 20 ms until it holds, for at most `limit`.
async fn wait_until<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// In-process executors whose `record` handler notes (executor, item, total, item param, key),
/// takes 100 ms, and fails once on the items listed in `fail_once`.
type Calls = Arc<Mutex<Vec<(usize, i32, i32, Option<String>, Option<String>)>>>;

async fn recording_executor(
    appname: &str,
    admin: &TestAdmin,
    who: usize,
    calls: &Calls,
    fail_once: &Arc<Mutex<BTreeSet<i32>>>,
    configure: impl FnOnce(&mut shardline_executor::ExecutorConfig),
) -> TestExecutor {
    let (calls, fail_once) = (calls.clone(), fail_once.clone());
    TestExecutor::start_with(appname, &admin.base, configure, move |b| {
        b.handler("record", move |ctx| {
            let (calls, fail_once) = (calls.clone(), fail_once.clone());
            async move {
                let item = ctx.shard_index();
                calls.lock().unwrap().push((
                    who,
                    item,
                    ctx.shard_total(),
                    ctx.item_param().map(str::to_string),
                    ctx.idempotency_key().map(str::to_string),
                ));
                // Long enough for the sibling items on one executor to overlap.
                tokio::time::sleep(Duration::from_millis(100)).await;
                if fail_once.lock().unwrap().remove(&item) {
                    return JobResult::fail(format!("item {item} fails on purpose"));
                }
                JobResult::success_with(format!("item {item}/{}", ctx.shard_total()))
            }
        })
    })
    .await
}

/// Registration metadata as an executor reads it from `SHARDLINE_EXECUTOR_<key>=<value>`.
fn meta_from_env(key: &str, value: &str) -> shardline_executor::protocol::ExecutorMeta {
    let var = format!("SHARDLINE_EXECUTOR_{key}");
    shardline_executor::ExecutorConfig::from_lookup(|k| match k {
        "SHARDLINE_EXECUTOR_APPNAME" => Some("any".to_string()),
        k if k == var => Some(value.to_string()),
        _ => None,
    })
    .expect("valid executor environment")
    .meta
}

// ---------------------------------------------------------------------------------------------
// 1. Fixed items with AVERAGE

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn items_average_three_executors_eight_items() {
    let _turn = SERIAL.lock().await;
    for db in TestDb::all().await {
        let admin = TestAdmin::start(&db).await;
        let gid = group(&admin, "avg-app").await;
        let calls: Calls = Arc::default();
        let none = Arc::default();
        let mut execs = Vec::new();
        for who in 0..3 {
            execs.push(recording_executor("avg-app", &admin, who, &calls, &none, |_| {}).await);
        }
        admin.wait_executors(gid, 3).await;
        let mut sorted: Vec<(String, usize)> = execs
            .iter()
            .enumerate()
            .map(|(i, e)| (e.address.clone(), i))
            .collect();
        sorted.sort();

        let jid = items_job(&admin, gid, "record", 8, json!({})).await;
        // The promised assignment, by ascending address.
        let a = admin.get(&format!("/jobs/{jid}/assignment")).await;
        assert_eq!(a["strategy"], "AVERAGE");
        let assigned: Vec<(String, Vec<i64>)> = a["executors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let items = e["items"].as_array().unwrap();
                (
                    e["address"].as_str().unwrap().to_string(),
                    items.iter().map(|i| i.as_i64().unwrap()).collect(),
                )
            })
            .collect();
        let expected = [vec![0, 1, 6], vec![2, 3, 7], vec![4, 5]];
        for (k, (address, items)) in assigned.iter().enumerate() {
            assert_eq!(address, &sorted[k].0, "{} executors by address", db.kind());
            assert_eq!(items, &expected[k], "{}: {a}", db.kind());
        }

        let fire = admin.wait_fire(trigger(&admin, jid, json!({})).await).await;
        assert_eq!(fire["state"], "succeeded", "{}: {fire}", db.kind());
        assert_eq!(fire["coverage"]["summary"], "8/8 items succeeded");
        assert_eq!(runs(&fire).len(), 8, "one run per item, no failover needed");
        for (item, run) in current_runs(&fire) {
            assert_eq!(run["shard_total"], 8);
            let owner = expected.iter().position(|l| l.contains(&item)).unwrap();
            assert_eq!(run["executor_address"], sorted[owner].0, "item {item}");
        }
        // What the executors saw: broadcastIndex = item, broadcastTotal = 8, on the owner.
        let mut seen = calls.lock().unwrap().clone();
        seen.sort_by_key(|c| c.1);
        assert_eq!(seen.len(), 8, "{seen:?}");
        for (k, (who, item, total, _, key)) in seen.iter().enumerate() {
            assert_eq!((*item, *total), (k as i32, 8));
            let owner = expected
                .iter()
                .position(|l| l.contains(&(k as i64)))
                .unwrap();
            assert_eq!(*who, sorted[owner].1, "item {item} ran on its owner");
            assert!(key.is_some(), "a Shardline admin sends an idempotency key");
        }
        assert_one_success_per_item(&fire);

        // Sibling items on one executor all run, whatever the block strategy.
        for block in ["DISCARD_LATER", "COVER_EARLY"] {
            calls.lock().unwrap().clear();
            admin
                .put(&format!("/jobs/{jid}"), json!({"block_strategy": block}))
                .await;
            let fire = admin.wait_fire(trigger(&admin, jid, json!({})).await).await;
            assert_eq!(
                fire["coverage"]["summary"], "8/8 items succeeded",
                "{block}: {fire}"
            );
            assert_eq!(runs(&fire).len(), 8, "{block}: {fire}");
            let mut items: Vec<i32> = calls.lock().unwrap().iter().map(|c| c.1).collect();
            items.sort();
            assert_eq!(items, (0..8).collect::<Vec<_>>(), "{block}");
            assert_one_success_per_item(&fire);
        }

        for e in execs {
            e.stop().await;
        }
        admin.stop().await;
        db.cleanup().await;
    }
}

/// The admin's count of HTTP requests that carried runs to executors.
async fn dispatch_requests(admin: &TestAdmin) -> u64 {
    let text = admin
        .http
        .get(admin.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("shardline_dispatch_requests_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no request count in /metrics:\n{text}"))
}

/// An SDK executor registers as taking runs in batches: a fire's items for one executor go out
/// in one request, each run still gets its own answer (the executor without the handler refuses
/// its items, the other runs its own), and with batches turned off every run is a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_request_carries_an_executors_items() {
    let _turn = SERIAL.lock().await;
    for db in TestDb::all().await {
        for (flags, requests_per_fire) in [(&[][..], 2), (&["--dispatch-batch", "1"][..], 8)] {
            let admin = TestAdmin::start_with(&db, flags).await;
            // A group of its own in each round: the database is shared.
            let app = format!("batch-app-{requests_per_fire}");
            let gid = group(&admin, &app).await;
            let calls: Calls = Arc::default();
            let none = Arc::default();
            let with_handler = recording_executor(&app, &admin, 0, &calls, &none, |_| {}).await;
            let without = TestExecutor::start(&app, &admin.base, |b| b).await;
            admin.wait_executors(gid, 2).await;
            let executors = admin.get(&format!("/groups/{gid}/executors")).await;
            for e in executors.as_array().unwrap() {
                assert_eq!(e["run_batch"], true, "{executors}");
            }

            let jid = items_job(&admin, gid, "record", 8, json!({})).await;
            let before = dispatch_requests(&admin).await;
            let fire = admin.wait_fire(trigger(&admin, jid, json!({})).await).await;
            let sent = dispatch_requests(&admin).await - before;
            assert_eq!(sent, requests_per_fire, "{} {flags:?}: {fire}", db.kind());

            let runs = current_runs(&fire);
            assert_eq!(runs.len(), 8, "{fire}");
            let mut ran: Vec<i64> = calls.lock().unwrap().iter().map(|c| c.1 as i64).collect();
            ran.sort();
            for (item, run) in &runs {
                if run["executor_address"] == with_handler.address.as_str() {
                    assert_eq!(run["state"], "succeeded", "item {item}: {run}");
                    assert!(ran.contains(item), "item {item} ran");
                } else {
                    assert_eq!(run["executor_address"], without.address.as_str());
                    assert_eq!(run["state"], "failed", "item {item}: {run}");
                    let msg = run["trigger_msg"].as_str().unwrap_or_default();
                    assert!(
                        msg.contains("job handler [record] not found."),
                        "item {item} refused with the executor's own words: {run}"
                    );
                    assert!(!ran.contains(item), "item {item} did not run");
                }
            }
            assert_eq!(
                ran.len(),
                4,
                "AVERAGE gives each executor four items: {ran:?}"
            );
            assert_eq!(fire["state"], "failed", "{fire}");

            with_handler.stop().await;
            without.stop().await;
            admin.stop().await;
        }
        db.cleanup().await;
    }
}

// ---------------------------------------------------------------------------------------------
// 2. kill -9 of an executor process mid-fire

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_executor_items_fail_over_within_a_second() {
    let _turn = SERIAL.lock().await;
    for db in TestDb::all().await {
        kill_scenario(&db).await;
        db.cleanup().await;
    }
}

async fn kill_scenario(db: &TestDb) {
    let admin = TestAdmin::start(db).await;
    let gid = group(&admin, "kill-app").await;
    let mut procs = processes(3, "kill-app", &admin, gid).await;
    // 100 ids per item, 30 ms each: an item takes about 3 s.
    let jid = items_job(
        &admin,
        gid,
        "rangeJobHandler",
        8,
        json!({"params": "ids=800,step_ms=30,checkpoint_every=1000"}),
    )
    .await;
    let fire_id = trigger(&admin, jid, json!({})).await;

    // The second executor by address holds items [2, 3, 7]; kill it while they sleep.
    let victim_address = procs[1].address.clone();
    wait_until(
        Duration::from_secs(10),
        "the victim's items to start",
        || {
            let n = procs[1].events("start").len();
            async move { n == 3 }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed_at = procs[1].kill9();

    let fire = admin.wait_fire(fire_id).await;
    assert_eq!(fire["state"], "succeeded", "{fire}");
    assert_eq!(fire["coverage"]["summary"], "8/8 items succeeded");
    let mut moved = Vec::new();
    for item in fire["coverage"]["items"].as_array().unwrap() {
        let i = item["item"].as_i64().unwrap();
        if [2, 3, 7].contains(&i) {
            assert_eq!(item["attempts"], 2, "{item}");
            assert_eq!(
                item["history"],
                json!([format!("lost on {victim_address}")]),
                "{item}"
            );
            assert_ne!(item["executor_address"], victim_address.as_str());
            moved.push(i);
        } else {
            assert_eq!(item["attempts"], 1, "{item}");
        }
    }
    assert_eq!(moved, [2, 3, 7]);
    // Same item, same total, at once after detection.
    let all = runs(&fire);
    for i in &moved {
        let lost = all
            .iter()
            .find(|r| r["shard_index"] == *i && r["attempt"] == 0)
            .unwrap();
        let again = all
            .iter()
            .find(|r| r["shard_index"] == *i && r["attempt"] == 1)
            .unwrap();
        assert_eq!(lost["state"], "lost");
        assert_eq!(again["shard_total"], 8);
        assert_eq!(again["state"], "succeeded");
        let detected = lost["finished_at"].as_i64().unwrap();
        let redispatched = again["dispatched_at"].as_i64().unwrap();
        println!(
            "[{}] item {i}: kill -> lost {} ms, kill -> re-dispatched {} ms (detection -> re-dispatch {} ms)",
            db.kind(),
            detected - killed_at,
            redispatched - killed_at,
            redispatched - detected
        );
        assert!(
            redispatched - detected <= 1_000,
            "item {i} re-dispatched {} ms after the loss was detected",
            redispatched - detected
        );
        // The lost-run check runs every second; the rest is slack for a loaded machine.
        assert!(
            redispatched - killed_at <= 1_800,
            "item {i} re-dispatched {} ms after the kill",
            redispatched - killed_at
        );
    }
    assert_one_success_per_item(&fire);
    assert_one_done_per_key(&procs.iter().collect::<Vec<_>>());
    drop(procs);
    admin.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 3. An executor that stops answering but stays registered

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stopped_executor_leaves_no_coverage_gap() {
    let _turn = SERIAL.lock().await;
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "stop-app").await;
    let procs = processes(3, "stop-app", &admin, gid).await;
    // 50 ids per item, 30 ms each: about 1.5 s per item; checkpoints every 10 ids.
    let jid = items_job(
        &admin,
        gid,
        "rangeJobHandler",
        6,
        json!({"params": "ids=300,step_ms=30,checkpoint_every=10"}),
    )
    .await;

    // (a) Stopped before the fire: its dispatches time out and its items go elsewhere at once.
    procs[1].signal("STOP");
    let started = Instant::now();
    let fire = admin.wait_fire(trigger(&admin, jid, json!({})).await).await;
    println!(
        "fire with a stopped executor finished in {} ms",
        started.elapsed().as_millis()
    );
    assert_eq!(fire["state"], "succeeded", "{fire}");
    assert_eq!(fire["coverage"]["summary"], "6/6 items succeeded");
    for (item, run) in current_runs(&fire) {
        assert_ne!(
            run["executor_address"],
            procs[1].address.as_str(),
            "item {item}"
        );
    }
    let moved: Vec<&Value> = fire["coverage"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["attempts"] == 2)
        .collect();
    assert_eq!(
        moved.len(),
        2,
        "the stopped executor's two items moved: {fire}"
    );
    for m in moved {
        assert_eq!(
            m["history"],
            json!([format!("failed on {}", procs[1].address)])
        );
    }
    assert_one_success_per_item(&fire);
    let first_fire_id = fire["id"].as_i64().unwrap();
    let timed_out: Vec<i64> = runs(&fire)
        .iter()
        .filter(|r| r["executor_address"] == procs[1].address.as_str())
        .map(|r| r["id"].as_i64().unwrap())
        .collect();

    // (b) Stopped in the middle of a fire: its runs are declared lost and run elsewhere.
    let on_c = procs[2].events("start").len();
    let fire_id = trigger(&admin, jid, json!({})).await;
    wait_until(
        Duration::from_secs(10),
        "items to start on the third",
        || {
            let n = procs[2].events("start").len();
            async move { n >= on_c + 3 }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    procs[2].signal("STOP");
    let stopped_at = now_ms();
    let fire = admin.wait_fire(fire_id).await;
    assert_eq!(fire["state"], "succeeded", "{fire}");
    assert_eq!(fire["coverage"]["summary"], "6/6 items succeeded");
    let current = current_runs(&fire);
    for (item, run) in &current {
        assert_eq!(
            run["executor_address"],
            procs[0].address.as_str(),
            "item {item}: only the first executor still answers"
        );
    }
    let all = runs(&fire);
    let lost: Vec<&Value> = all.iter().filter(|r| r["state"] == "lost").collect();
    assert!(
        !lost.is_empty(),
        "the stopped executor's runs were lost: {fire}"
    );
    for l in &lost {
        assert_eq!(l["executor_address"], procs[2].address.as_str());
        println!(
            "item {}: stop -> lost {} ms",
            l["shard_index"],
            l["finished_at"].as_i64().unwrap() - stopped_at
        );
    }
    // Each takeover resumed from what this fire's lost run had saved, or from the start: never
    // from the previous fire's final checkpoint, which would skip this fire's work. What the lost
    // run sent counts (`saving`): it may have been stopped after the admin stored a checkpoint
    // and before it journalled the answer.
    let saved_by_lost: Vec<(i64, String)> = procs[2]
        .events("saving")
        .iter()
        .map(|e| {
            (
                e["log_id"].as_i64().unwrap(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for l in &lost {
        let item = l["shard_index"].as_i64().unwrap();
        let msg = current[&item]["handle_msg"].as_str().unwrap();
        let from = msg
            .split("resumed after id ")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .unwrap_or_else(|| panic!("unexpected result {msg:?}"));
        let allowed = from == "0"
            || saved_by_lost
                .iter()
                .any(|(id, v)| *id == l["id"].as_i64().unwrap() && v == &format!("id={from}"));
        assert!(allowed, "item {item} resumed after id {from}: {msg}");
    }
    assert_one_success_per_item(&fire);

    // Both stopped executors wake up. The third finishes its lost runs; the second may run the
    // requests whose dispatch timed out (they sat in its socket). Their results and checkpoints
    // must not count: the takeovers' stand.
    procs[2].signal("CONT");
    procs[1].signal("CONT");
    let stale: Vec<i64> = lost.iter().map(|l| l["id"].as_i64().unwrap()).collect();
    wait_until(
        Duration::from_secs(10),
        "the woken executor to finish",
        || {
            let done: Vec<i64> = procs[2]
                .events("done")
                .iter()
                .filter_map(|e| e["log_id"].as_i64())
                .collect();
            let all_done = stale.iter().all(|id| done.contains(id));
            async move { all_done }
        },
    )
    .await;
    let woke = Instant::now();
    while woke.elapsed() < Duration::from_millis(2_500) {
        let done = procs[1].events("done");
        if timed_out
            .iter()
            .all(|id| done.iter().any(|e| e["log_id"] == *id))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "the second executor ran {} of the {} requests that timed out while it was stopped",
        procs[1]
            .events("done")
            .iter()
            .filter(|e| timed_out.contains(&e["log_id"].as_i64().unwrap_or(0)))
            .count(),
        timed_out.len()
    );
    // Give their callbacks time to arrive.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let first = admin.get(&format!("/fires/{first_fire_id}")).await;
    assert_eq!(first["state"], "succeeded", "{first}");
    assert_eq!(first["coverage"]["summary"], "6/6 items succeeded");
    for r in runs(&first) {
        if timed_out.contains(&r["id"].as_i64().unwrap()) {
            assert_eq!(
                r["state"], "failed",
                "a late result does not revive a failed dispatch"
            );
        }
    }
    assert_one_success_per_item(&first);
    let fire = admin.get(&format!("/fires/{fire_id}")).await;
    assert_eq!(fire["state"], "succeeded", "{fire}");
    for l in &lost {
        let run = admin.get(&format!("/runs/{}", l["id"])).await;
        assert_eq!(
            run["state"], "lost",
            "a late result does not revive a lost run"
        );
    }
    assert_one_success_per_item(&fire);
    let current = current_runs(&fire);
    for (item, cp) in checkpoints(&admin, jid).await {
        assert_eq!(
            cp["run_id"], current[&item]["id"],
            "item {item}: the checkpoint is the current run's, not a stale one's: {cp}"
        );
    }
    drop(procs);
    admin.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 4. Checkpoints: takeover resumes, the next fire resumes when asked, clearing

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn takeover_and_next_fire_resume_from_the_checkpoint() {
    let _turn = SERIAL.lock().await;
    for db in TestDb::all().await {
        checkpoint_scenario(&db).await;
        db.cleanup().await;
    }
}

async fn checkpoint_scenario(db: &TestDb) {
    let admin = TestAdmin::start(db).await;
    let gid = group(&admin, "cp-app").await;
    let mut procs = processes(2, "cp-app", &admin, gid).await;
    // Item 0 owns the even ids of 1..=400 (200 ids, 20 ms each, about 4 s) and checkpoints after
    // 100 of them (id=200, half way) and at its end (id=400).
    let jid = items_job(
        &admin,
        gid,
        "rangeJobHandler",
        2,
        json!({"params": "ids=400,step_ms=20,checkpoint_every=100"}),
    )
    .await;
    let fire_id = trigger(&admin, jid, json!({})).await;
    wait_until(
        Duration::from_secs(15),
        "item 0's half-way checkpoint",
        || {
            let admin = &admin;
            async move {
                checkpoints(admin, jid)
                    .await
                    .get(&0)
                    .is_some_and(|c| c["value"] == "id=200")
            }
        },
    )
    .await;
    // Item 0 runs on the first executor (AVERAGE over two: [0], [1]).
    let killed_at = procs[0].kill9();
    let saved = checkpoints(&admin, jid).await;
    assert_eq!(saved[&0]["value"], "id=200", "{saved:?}");

    let fire = admin.wait_fire(fire_id).await;
    assert_eq!(fire["state"], "succeeded", "{fire}");
    assert_eq!(fire["coverage"]["summary"], "2/2 items succeeded");
    let current = current_runs(&fire);
    let takeover = &current[&0];
    assert_eq!(takeover["attempt"], 1);
    assert_eq!(takeover["executor_address"], procs[1].address.as_str());
    assert_eq!(
        takeover["handle_msg"], "item 0/2: resumed after id 200, processed 100 ids",
        "the takeover started from the checkpoint, not from the start"
    );
    println!(
        "[{}] kill -> takeover dispatched {} ms",
        db.kind(),
        takeover["dispatched_at"].as_i64().unwrap() - killed_at
    );
    let started: Vec<Value> = procs[1]
        .events("start")
        .into_iter()
        .filter(|e| e["log_id"] == takeover["id"])
        .collect();
    assert_eq!(started.len(), 1);
    assert_eq!(
        started[0]["checkpoint"], "id=200",
        "last_checkpoint() seen by the new run"
    );
    assert_eq!(
        current[&1]["handle_msg"],
        "item 1/2: resumed after id 0, processed 200 ids"
    );
    let saved = checkpoints(&admin, jid).await;
    assert_eq!(saved[&0]["value"], "id=400");
    assert_eq!(saved[&1]["value"], "id=399");
    assert_eq!(saved[&0]["run_id"], takeover["id"]);
    assert_one_success_per_item(&fire);

    // A new fire starts from scratch unless the job asks to resume.
    let quick = json!({"params": "ids=440,step_ms=1,checkpoint_every=1000"});
    let fire = admin
        .wait_fire(trigger(&admin, jid, quick.clone()).await)
        .await;
    assert_eq!(fire["state"], "succeeded", "{fire}");
    for (item, run) in current_runs(&fire) {
        assert_eq!(
            run["handle_msg"],
            format!("item {item}/2: resumed after id 0, processed 220 ids")
        );
    }
    assert_one_success_per_item(&fire);

    // With resume_checkpoint the next fire starts where the last one stopped.
    admin
        .put(&format!("/jobs/{jid}"), json!({"resume_checkpoint": true}))
        .await;
    let saved = checkpoints(&admin, jid).await;
    assert_eq!(saved[&0]["value"], "id=440");
    assert_eq!(saved[&1]["value"], "id=439");
    let more = json!({"params": "ids=460,step_ms=1,checkpoint_every=1000"});
    let fire = admin
        .wait_fire(trigger(&admin, jid, more.clone()).await)
        .await;
    assert_eq!(fire["state"], "succeeded", "{fire}");
    let current = current_runs(&fire);
    assert_eq!(
        current[&0]["handle_msg"],
        "item 0/2: resumed after id 440, processed 10 ids"
    );
    assert_eq!(
        current[&1]["handle_msg"],
        "item 1/2: resumed after id 439, processed 10 ids"
    );
    assert_one_success_per_item(&fire);

    // Clearing: the API shows none, and the next fire starts from scratch again.
    let (status, cleared) = admin
        .call(
            reqwest::Method::DELETE,
            &format!("/jobs/{jid}/checkpoints"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{cleared}");
    assert_eq!(cleared["cleared"], 2);
    assert!(checkpoints(&admin, jid).await.is_empty());
    let fire = admin.wait_fire(trigger(&admin, jid, more).await).await;
    let current = current_runs(&fire);
    assert_eq!(
        current[&0]["handle_msg"],
        "item 0/2: resumed after id 0, processed 230 ids"
    );
    assert_one_success_per_item(&fire);
    assert_one_done_per_key(&procs.iter().collect::<Vec<_>>());
    drop(procs);
    admin.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 5. Retry of the failed items only

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retry_reruns_exactly_the_failed_items() {
    let _turn = SERIAL.lock().await;
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "retry-app").await;
    let calls: Calls = Arc::default();
    let fail_once: Arc<Mutex<BTreeSet<i32>>> = Arc::new(Mutex::new([2, 5].into()));
    let mut execs = Vec::new();
    for who in 0..3 {
        execs.push(recording_executor("retry-app", &admin, who, &calls, &fail_once, |_| {}).await);
    }
    admin.wait_executors(gid, 3).await;
    let jid = items_job(&admin, gid, "record", 8, json!({})).await;

    let fire_id = trigger(&admin, jid, json!({})).await;
    let fire = admin.wait_fire(fire_id).await;
    assert_eq!(fire["state"], "failed", "{fire}");
    assert_eq!(fire["coverage"]["summary"], "6/8 items succeeded, 2 failed");
    assert_one_success_per_item(&fire);
    let first_keys: HashMap<i32, Option<String>> = calls
        .lock()
        .unwrap()
        .iter()
        .map(|c| (c.1, c.4.clone()))
        .collect();

    let answer = admin
        .post(&format!("/fires/{fire_id}/retry"), json!({}))
        .await;
    assert_eq!(answer["retried_items"], json!([2, 5]), "{answer}");
    let fire = admin.wait_fire(fire_id).await;
    assert_eq!(fire["state"], "succeeded", "{fire}");
    assert_eq!(fire["coverage"]["summary"], "8/8 items succeeded");
    for item in fire["coverage"]["items"].as_array().unwrap() {
        let i = item["item"].as_i64().unwrap();
        if i == 2 || i == 5 {
            assert_eq!(item["attempts"], 2, "{item}");
            assert!(item["history"][0]
                .as_str()
                .unwrap()
                .starts_with("failed on "));
        } else {
            assert_eq!(item["attempts"], 1, "{item}");
        }
    }
    for r in runs(&fire).iter().filter(|r| r["attempt"] == 1) {
        assert_eq!(r["shard_total"], 8, "same total: {r}");
    }
    // The executors ran items 2 and 5 twice (same item, same total, same key) and nothing else.
    let seen = calls.lock().unwrap().clone();
    let mut per_item: BTreeMap<i32, usize> = BTreeMap::new();
    for (_, item, total, _, key) in &seen {
        assert_eq!(*total, 8);
        assert_eq!(
            key, &first_keys[item],
            "a retry keeps the item's idempotency key"
        );
        *per_item.entry(*item).or_default() += 1;
    }
    let expected: BTreeMap<i32, usize> = (0..8)
        .map(|i| (i, if i == 2 || i == 5 { 2 } else { 1 }))
        .collect();
    assert_eq!(per_item, expected);
    assert_one_success_per_item(&fire);

    // Nothing left to retry.
    let (status, body) = admin
        .call(
            reqwest::Method::POST,
            &format!("/fires/{fire_id}/retry"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 409, "{body}");

    for e in execs {
        e.stop().await;
    }
    admin.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 6. AFFINITY with labels and WEIGHTED with registered weights

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn affinity_labels_and_weights_from_registration() {
    let _turn = SERIAL.lock().await;
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;

    // AFFINITY: shanghai, beijing and an unlabelled executor.
    let gid = group(&admin, "aff-app").await;
    let calls: Calls = Arc::default();
    let none = Arc::default();
    let labels = ["shanghai", "beijing", ""];
    let mut execs = Vec::new();
    for (who, l) in labels.into_iter().enumerate() {
        let meta = meta_from_env("LABELS", l);
        execs.push(
            recording_executor("aff-app", &admin, who, &calls, &none, move |c| {
                c.meta = meta
            })
            .await,
        );
    }
    admin.wait_executors(gid, 3).await;
    let registered = admin.get(&format!("/groups/{gid}/executors")).await;
    for (who, e) in execs.iter().enumerate() {
        let view = registered
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["address"] == e.address.as_str())
            .unwrap_or_else(|| panic!("{} not registered: {registered}", e.address));
        let expected: Vec<&str> = Some(labels[who])
            .filter(|l| !l.is_empty())
            .into_iter()
            .collect();
        assert_eq!(view["labels"], json!(expected), "{registered}");
    }
    let jid = items_job(
        &admin,
        gid,
        "record",
        4,
        json!({"sharding_strategy": "AFFINITY", "item_params": "0=shanghai,1=beijing"}),
    )
    .await;
    let fire = admin.wait_fire(trigger(&admin, jid, json!({})).await).await;
    assert_eq!(fire["state"], "succeeded", "{fire}");
    assert_eq!(fire["coverage"]["summary"], "4/4 items succeeded");
    let current = current_runs(&fire);
    assert_eq!(current[&0]["executor_address"], execs[0].address.as_str());
    assert_eq!(current[&1]["executor_address"], execs[1].address.as_str());
    assert_eq!(current[&0]["item_param"], "shanghai");
    assert_eq!(current[&1]["item_param"], "beijing");
    // Items without a label are spread by AVERAGE, as the assignment view says.
    let a = admin.get(&format!("/jobs/{jid}/assignment")).await;
    for e in a["executors"].as_array().unwrap() {
        for item in e["items"].as_array().unwrap() {
            assert_eq!(
                current[&item.as_i64().unwrap()]["executor_address"],
                e["address"],
                "the fire follows the assignment view: {a}"
            );
        }
    }
    let seen = calls.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    for (who, item, total, param, _) in &seen {
        assert_eq!(*total, 4);
        match item {
            0 => assert_eq!((*who, param.as_deref()), (0, Some("shanghai"))),
            1 => assert_eq!((*who, param.as_deref()), (1, Some("beijing"))),
            _ => assert_eq!(param.as_deref(), None),
        }
    }
    assert_one_success_per_item(&fire);

    // WEIGHTED 1:3 over 8 items: 2 and 6.
    let gid = group(&admin, "w-app").await;
    let wcalls: Calls = Arc::default();
    let mut wexecs = Vec::new();
    for (who, weight) in ["1", "3"].into_iter().enumerate() {
        let meta = meta_from_env("WEIGHT", weight);
        wexecs.push(
            recording_executor("w-app", &admin, who, &wcalls, &none, move |c| c.meta = meta).await,
        );
    }
    admin.wait_executors(gid, 2).await;
    let registered = admin.get(&format!("/groups/{gid}/executors")).await;
    let weights: HashMap<String, i64> = registered
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["address"].as_str().unwrap().to_string(),
                e["weight"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(weights[&wexecs[0].address], 1, "{registered}");
    assert_eq!(weights[&wexecs[1].address], 3, "{registered}");
    let jid = items_job(
        &admin,
        gid,
        "record",
        8,
        json!({"sharding_strategy": "WEIGHTED"}),
    )
    .await;
    let fire = admin.wait_fire(trigger(&admin, jid, json!({})).await).await;
    assert_eq!(fire["state"], "succeeded", "{fire}");
    assert_eq!(fire["coverage"]["summary"], "8/8 items succeeded");
    let mut per_exec: BTreeMap<usize, Vec<i32>> = BTreeMap::new();
    for (who, item, total, _, _) in wcalls.lock().unwrap().iter() {
        assert_eq!(*total, 8);
        per_exec.entry(*who).or_default().push(*item);
    }
    assert_eq!(per_exec.get(&0).map_or(0, Vec::len), 2, "{per_exec:?}");
    assert_eq!(per_exec.get(&1).map_or(0, Vec::len), 6, "{per_exec:?}");
    // Contiguous blocks in address order, as AVERAGE lays them out.
    let first = if wexecs[0].address < wexecs[1].address {
        0
    } else {
        1
    };
    let mut lead = per_exec[&first].clone();
    lead.sort();
    let expected: Vec<i32> = if first == 0 {
        vec![0, 1]
    } else {
        (0..6).collect()
    };
    assert_eq!(lead, expected, "{per_exec:?}");
    assert_one_success_per_item(&fire);

    for e in execs.into_iter().chain(wexecs) {
        e.stop().await;
    }
    admin.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 7. The guard on changing N

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changing_n_needs_a_checkpoint_reset() {
    let _turn = SERIAL.lock().await;
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "guard-app").await;
    let exec = TestExecutor::start("guard-app", &admin.base, |b| {
        b.handler("save", |ctx| async move {
            match ctx
                .checkpoint(format!("id={}", 100 + ctx.shard_index()))
                .await
            {
                Ok(()) => JobResult::success(),
                Err(e) => JobResult::fail(e.to_string()),
            }
        })
    })
    .await;
    admin.wait_executors(gid, 1).await;
    let jid = items_job(&admin, gid, "save", 2, json!({})).await;

    // Without checkpoints N may change freely.
    admin
        .put(&format!("/jobs/{jid}"), json!({"sharding_total": 3}))
        .await;
    let fire = admin.wait_fire(trigger(&admin, jid, json!({})).await).await;
    assert_eq!(fire["state"], "succeeded", "{fire}");
    assert_one_success_per_item(&fire);
    assert_eq!(checkpoints(&admin, jid).await.len(), 3);

    // With checkpoints: refused, nothing changed.
    let (status, body) = admin
        .call(
            reqwest::Method::PUT,
            &format!("/jobs/{jid}"),
            Some(json!({"sharding_total": 4})),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(body.to_string().contains("reset_checkpoints"), "{body}");
    assert_eq!(
        admin.get(&format!("/jobs/{jid}")).await["sharding_total"],
        3
    );
    assert_eq!(checkpoints(&admin, jid).await.len(), 3);
    // Other edits are not held up by the guard.
    admin
        .put(&format!("/jobs/{jid}"), json!({"description": "nightly"}))
        .await;
    assert_eq!(checkpoints(&admin, jid).await.len(), 3);

    // Confirmed: N changes and the checkpoints are gone.
    admin
        .put(
            &format!("/jobs/{jid}"),
            json!({"sharding_total": 4, "reset_checkpoints": true}),
        )
        .await;
    assert_eq!(
        admin.get(&format!("/jobs/{jid}")).await["sharding_total"],
        4
    );
    assert!(checkpoints(&admin, jid).await.is_empty());
    let fire = admin.wait_fire(trigger(&admin, jid, json!({})).await).await;
    assert_eq!(fire["coverage"]["summary"], "4/4 items succeeded");
    assert_one_success_per_item(&fire);

    exec.stop().await;
    admin.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 8. Idempotency keys

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idempotency_key_survives_failover_and_differs_per_item_and_fire() {
    let _turn = SERIAL.lock().await;
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "key-app").await;
    let mut procs = processes(2, "key-app", &admin, gid).await;
    // 4 items over 2 executors ([0, 1], [2, 3]); 50 ids of 30 ms each per item.
    let jid = items_job(
        &admin,
        gid,
        "rangeJobHandler",
        4,
        json!({"params": "ids=200,step_ms=30,checkpoint_every=1000"}),
    )
    .await;
    let fire_id = trigger(&admin, jid, json!({})).await;
    wait_until(
        Duration::from_secs(10),
        "both items to start on the victim",
        || {
            let n = procs[0].events("start").len();
            async move { n == 2 }
        },
    )
    .await;
    let before: HashMap<i64, String> = procs[0]
        .events("start")
        .iter()
        .map(|e| {
            (
                e["item"].as_i64().unwrap(),
                e["key"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    procs[0].kill9();
    let fire = admin.wait_fire(fire_id).await;
    assert_eq!(fire["state"], "succeeded", "{fire}");
    assert_eq!(fire["coverage"]["summary"], "4/4 items succeeded");
    let takeover: HashMap<i64, String> = procs[1]
        .events("start")
        .iter()
        .filter(|e| before.contains_key(&e["item"].as_i64().unwrap()))
        .map(|e| {
            (
                e["item"].as_i64().unwrap(),
                e["key"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(before.len(), 2);
    assert_eq!(
        takeover, before,
        "the takeover sees the same key for the same item"
    );
    let first: BTreeSet<String> = procs[1]
        .events("start")
        .iter()
        .chain(procs[0].events("start").iter())
        .map(|e| e["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(first.len(), 4, "one key per item: {first:?}");
    assert_one_success_per_item(&fire);

    // The next fire: new keys for every item.
    let second_fire = admin.wait_fire(trigger(&admin, jid, json!({})).await).await;
    assert_eq!(second_fire["state"], "succeeded", "{second_fire}");
    let second: BTreeSet<String> = procs[1]
        .events("start")
        .iter()
        .map(|e| e["key"].as_str().unwrap().to_string())
        .filter(|k| !first.contains(k))
        .collect();
    assert_eq!(second.len(), 4, "four new keys: {second:?}");
    assert_one_success_per_item(&second_fire);
    assert_one_done_per_key(&procs.iter().collect::<Vec<_>>());
    drop(procs);
    admin.stop().await;
}

// ---------------------------------------------------------------------------------------------
// 9. Broadcast with maxNode over many executors

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn max_node_calls_exactly_m_executors_whose_partitions_cover_the_table() {
    let _turn = SERIAL.lock().await;
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "wide-app").await;
    // The "table": ids 1..=10 000, and how often each was processed.
    const IDS: usize = 10_000;
    let table: Arc<Vec<AtomicU32>> = Arc::new((0..IDS).map(|_| AtomicU32::new(0)).collect());
    let called: Arc<Mutex<Vec<(usize, i32, i32)>>> = Arc::default();
    let mut execs = Vec::new();
    for who in 0..20 {
        let (table, called) = (table.clone(), called.clone());
        execs.push(
            TestExecutor::start("wide-app", &admin.base, move |b| {
                b.handler("scan", move |ctx| {
                    let (table, called) = (table.clone(), called.clone());
                    async move {
                        let (index, total) = (ctx.shard_index(), ctx.shard_total());
                        called.lock().unwrap().push((who, index, total));
                        let mut n = 0;
                        // SELECT id FROM t WHERE MOD(id, total) = index
                        for id in (1..=IDS).filter(|id| id % total as usize == index as usize) {
                            table[id - 1].fetch_add(1, Ordering::Relaxed);
                            n += 1;
                        }
                        JobResult::success_with(format!("{n} ids"))
                    }
                })
            })
            .await,
        );
    }
    admin.wait_executors(gid, 20).await;
    let jid = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "wide", "handler": "scan", "schedule_type": "NONE",
                   "sharding_mode": "BROADCAST", "max_node": 8}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let fire = admin.wait_fire(trigger(&admin, jid, json!({})).await).await;
    assert_eq!(fire["state"], "succeeded", "{fire}");
    assert_eq!(fire["coverage"]["summary"], "8/8 items succeeded");
    assert_eq!(runs(&fire).len(), 8);
    let calls = called.lock().unwrap().clone();
    assert_eq!(calls.len(), 8, "exactly 8 executors called: {calls:?}");
    let whos: BTreeSet<usize> = calls.iter().map(|c| c.0).collect();
    assert_eq!(whos.len(), 8, "8 different executors: {calls:?}");
    let indexes: BTreeSet<i32> = calls.iter().map(|c| c.1).collect();
    assert_eq!(indexes, (0..8).collect(), "{calls:?}");
    assert!(calls.iter().all(|c| c.2 == 8), "{calls:?}");
    for (i, n) in table.iter().enumerate() {
        assert_eq!(n.load(Ordering::Relaxed), 1, "id {} processed once", i + 1);
    }
    assert_one_success_per_item(&fire);

    // A dead executor that is still registered, at the lowest address so maxNode picks it: its
    // shard runs on a live executor with the same index and total, and the table is still
    // covered exactly once.
    let dead = register_dead(&admin, "wide-app").await;
    admin.wait_executors(gid, 21).await;
    for n in table.iter() {
        n.store(0, Ordering::Relaxed);
    }
    called.lock().unwrap().clear();
    let fire = admin.wait_fire(trigger(&admin, jid, json!({})).await).await;
    assert_eq!(fire["state"], "succeeded", "{fire}");
    assert_eq!(fire["coverage"]["summary"], "8/8 items succeeded");
    let first = &fire["coverage"]["items"][0];
    assert_eq!(
        first["history"],
        json!([format!("failed on {dead}")]),
        "{fire}"
    );
    for r in current_runs(&fire).values() {
        assert_eq!(r["shard_total"], 8);
        assert_ne!(r["executor_address"], dead);
    }
    let calls = called.lock().unwrap().clone();
    let indexes: Vec<i32> = calls
        .iter()
        .map(|c| c.1)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(indexes, (0..8).collect::<Vec<_>>(), "{calls:?}");
    assert_eq!(calls.len(), 8, "{calls:?}");
    assert!(calls.iter().all(|c| c.2 == 8), "{calls:?}");
    for (i, n) in table.iter().enumerate() {
        assert_eq!(n.load(Ordering::Relaxed), 1, "id {} processed once", i + 1);
    }
    assert_one_success_per_item(&fire);

    // Known dead now: the next fire leaves it out and calls 8 live executors again.
    called.lock().unwrap().clear();
    let fire = admin.wait_fire(trigger(&admin, jid, json!({})).await).await;
    assert_eq!(fire["coverage"]["summary"], "8/8 items succeeded");
    assert_eq!(runs(&fire).len(), 8, "no failover needed: {fire}");
    let whos: BTreeSet<usize> = called.lock().unwrap().iter().map(|c| c.0).collect();
    assert_eq!(whos.len(), 8);
    assert_one_success_per_item(&fire);

    for e in execs {
        e.stop().await;
    }
    admin.stop().await;
}

/// A failover is a new attempt, not a retry: an item whose executor was dead fails over, fails
/// there, and still gets the retry its job asks for (it used to count the failover as one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_uses_up_none_of_the_items_retries() {
    let _turn = SERIAL.lock().await;
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "retry-app").await;
    let live = TestExecutor::start("retry-app", &admin.base, |b| {
        b.handler("fail", |_| async { JobResult::fail("failing on purpose") })
    })
    .await;
    admin.wait_executors(gid, 1).await;
    let dead = register_dead(&admin, "retry-app").await;
    admin.wait_executors(gid, 2).await;
    // One item: the dead executor sorts first and gets it.
    let jid = items_job(
        &admin,
        gid,
        "fail",
        1,
        json!({"retry_count": 1, "retry_interval_s": 0}),
    )
    .await;
    let id = trigger(&admin, jid, json!({})).await;
    let mut fire = Value::Null;
    for _ in 0..100 {
        fire = admin.wait_fire(id).await;
        if runs(&fire).len() >= 3 && fire["state"] == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let all: Vec<(Value, Value, Value, Value)> = runs(&fire)
        .into_iter()
        .map(|r| {
            (
                r["attempt"].clone(),
                r["retries"].clone(),
                r["state"].clone(),
                json!(r["executor_address"] == dead),
            )
        })
        .collect();
    assert_eq!(
        all,
        vec![
            (json!(0), json!(0), json!("failed"), json!(true)),
            (json!(1), json!(0), json!("failed"), json!(false)),
            (json!(2), json!(1), json!("failed"), json!(false)),
        ],
        "the dead executor's dispatch, its failover, then the job's one retry: {fire}"
    );
    live.stop().await;
    admin.stop().await;
    db.cleanup().await;
}

/// A broadcast to a registered executor that is dead: its item fails over, and the fire is never
/// reported failed on the way (no failure alarm, no retry of the item), however soon the other
/// items' results come in. The unanswered request used to be stored before its new attempt, and a
/// sibling's result in between made the fire look failed: a third of such fires alarmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_is_never_reported_as_a_failure() {
    let _turn = SERIAL.lock().await;
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "quick-app").await;
    // (fire, item) → how often it ran.
    let ran: Arc<Mutex<BTreeMap<(String, i32), u32>>> = Arc::default();
    let mut execs = Vec::new();
    for _ in 0..3 {
        let ran = ran.clone();
        execs.push(
            TestExecutor::start("quick-app", &admin.base, move |b| {
                b.handler("quick", move |ctx| {
                    let ran = ran.clone();
                    async move {
                        // The idempotency key is job:fire:item.
                        let fire = ctx.idempotency_key().unwrap_or_default();
                        let fire = fire.split(':').nth(1).unwrap_or_default().to_string();
                        *ran.lock()
                            .unwrap()
                            .entry((fire, ctx.shard_index()))
                            .or_default() += 1;
                        JobResult::success()
                    }
                })
            })
            .await,
        );
    }
    admin.wait_executors(gid, 3).await;
    let dead = register_dead(&admin, "quick-app").await;
    admin.wait_executors(gid, 4).await;
    let jid = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "quick", "handler": "quick", "schedule_type": "NONE",
                   "sharding_mode": "BROADCAST", "retry_count": 1, "retry_interval_s": 0}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let mut fires = Vec::new();
    for _ in 0..30 {
        fires.push(trigger(&admin, jid, json!({})).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for id in fires {
        let fire = admin.wait_fire(id).await;
        assert_eq!(fire["state"], "succeeded", "{fire}");
        assert_eq!(fire["coverage"]["summary"], "4/4 items succeeded", "{fire}");
        assert_eq!(fire["alarm_state"], 0, "reported failed on the way: {fire}");
        let dead_item = runs(&fire)
            .into_iter()
            .find(|r| r["executor_address"] == dead)
            .expect("the dead executor's item");
        assert_eq!(dead_item["state"], "failed", "{fire}");
        assert_eq!(dead_item["superseded"], 1, "{fire}");
        assert_one_success_per_item(&fire);
    }
    // Let any retry a false failure would have planned come and go.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ran = ran.lock().unwrap().clone();
    assert_eq!(ran.len(), 30 * 4, "{ran:?}");
    assert!(ran.values().all(|n| *n == 1), "an item ran twice: {ran:?}");
    for e in execs {
        e.stop().await;
    }
    admin.stop().await;
    db.cleanup().await;
}

/// More runs open than one sweep of the lost-run watch reads (5 000): a fixed-item job of 5 100
/// items holds them on a live executor, then a run on another executor that dies. That run has
/// the highest id, so a watch that always read the oldest page never judged it; it is found lost
/// within a few sweeps.
#[tokio::test]
async fn a_lost_run_is_found_behind_thousands_of_open_ones() {
    let _turn = SERIAL.lock().await;
    for db in TestDb::all().await {
        let admin = TestAdmin::start(&db).await;
        let hold = |b: shardline_executor::ExecutorBuilder| {
            b.handler("hold", |_| async {
                tokio::time::sleep(Duration::from_secs(120)).await;
                JobResult::success()
            })
        };
        let busy_group = group(&admin, "busy-app").await;
        let busy = TestExecutor::start("busy-app", &admin.base, hold).await;
        admin.wait_executors(busy_group, 1).await;
        let many = items_job(&admin, busy_group, "hold", 5_100, json!({})).await;
        let many_fire = trigger(&admin, many, json!({})).await;
        // Each item is accepted (it queues behind the first on the executor): all stay open.
        wait_until(Duration::from_secs(60), "5 100 items accepted", || {
            let admin = &admin;
            async move {
                let fire = admin.get(&format!("/fires/{many_fire}")).await;
                let runs = runs(&fire);
                runs.len() == 5_100 && runs.iter().all(|r| r["state"] == "running")
            }
        })
        .await;

        // The other executor is a process, killed with -9 while its run sleeps (a graceful
        // stop would report the run killed).
        let lone_group = group(&admin, "lone-app").await;
        let mut lone = processes(1, "lone-app", &admin, lone_group).await;
        let one = admin
            .post(
                "/jobs",
                json!({"group_id": lone_group, "name": "one", "handler": "rangeJobHandler",
                       "schedule_type": "NONE", "params": "ids=100,step_ms=1000"}),
            )
            .await["id"]
            .as_i64()
            .unwrap();
        let one_fire = trigger(&admin, one, json!({})).await;
        wait_until(Duration::from_secs(10), "the lone run accepted", || {
            let admin = &admin;
            async move {
                let fire = admin.get(&format!("/fires/{one_fire}")).await;
                runs(&fire).first().is_some_and(|r| r["state"] == "running")
            }
        })
        .await;
        // Its executor dies: it refuses connections from now on (it is not evicted for 90 s).
        let killed_at = lone[0].kill9();
        let fire = admin.wait_fire(one_fire).await;
        let run = &runs(&fire)[0];
        assert_eq!(fire["state"], "failed", "[{}] {fire}", db.kind());
        assert_eq!(run["state"], "lost", "[{}] {fire}", db.kind());
        println!(
            "[{}] kill -> lost {} ms behind 5 100 open runs",
            db.kind(),
            run["finished_at"].as_i64().unwrap() - killed_at
        );
        // The busy executor's runs are all still open: none was judged lost.
        let many = admin.get(&format!("/fires/{many_fire}")).await;
        assert!(
            runs(&many).iter().all(|r| r["state"] == "running"),
            "[{}] a live executor's run was declared lost",
            db.kind()
        );
        busy.stop().await;
        admin.stop().await;
        db.cleanup().await;
    }
}

/// Executors that stop answering (stopped processes) delay the watch's judgement by one probe's
/// timeout in all: it probes the executors of a page side by side, so a killed executor's run is
/// found within a timeout of the sweep, and the stopped ones' after their two strikes. Probed one
/// after the other, each stopped executor added its probe's second to every sweep: here four
/// before anything was judged.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stopped_executors_do_not_hold_up_the_watch() {
    let _turn = SERIAL.lock().await;
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    // Five executors, each in a group of its own and running one long run.
    let mut procs = Vec::new();
    let mut fires = Vec::new();
    for i in 0..5 {
        let app = format!("held-{i}");
        let gid = group(&admin, &app).await;
        procs.extend(processes(1, &app, &admin, gid).await);
        let job = admin
            .post(
                "/jobs",
                json!({"group_id": gid, "name": app, "handler": "rangeJobHandler",
                       "schedule_type": "NONE", "params": "ids=100,step_ms=1000"}),
            )
            .await["id"]
            .as_i64()
            .unwrap();
        fires.push(trigger(&admin, job, json!({})).await);
    }
    for &fire in &fires {
        wait_until(Duration::from_secs(10), "the run accepted", || {
            let admin = &admin;
            async move {
                let fire = admin.get(&format!("/fires/{fire}")).await;
                runs(&fire).first().is_some_and(|r| r["state"] == "running")
            }
        })
        .await;
    }
    // Four stop answering; the fifth dies (it refuses connections from now on).
    for p in &procs[..4] {
        p.signal("STOP");
    }
    let killed = Instant::now();
    procs[4].kill9();
    let fire = admin.wait_fire(fires[4]).await;
    let found = killed.elapsed();
    assert_eq!(runs(&fire)[0]["state"], "lost", "{fire}");
    let mut all_found = found;
    for &fire in &fires[..4] {
        let fire = admin.wait_fire(fire).await;
        all_found = killed.elapsed();
        let run = &runs(&fire)[0];
        assert_eq!(run["state"], "lost", "{fire}");
        assert!(
            run["handle_msg"]
                .as_str()
                .is_some_and(|m| m.contains("stopped answering")),
            "{fire}"
        );
        assert_eq!(run["handle_note"]["code"], "lost_no_answer", "{fire}");
        assert_eq!(
            run["handle_note"]["params"]["address"], run["executor_address"],
            "{fire}"
        );
    }
    println!(
        "kill -> lost {} ms; stop -> lost {} ms for the last of four",
        found.as_millis(),
        all_found.as_millis()
    );
    // A sweep within a second, its probes' timeout of a second, slack for a loaded machine.
    assert!(found <= Duration::from_millis(3_000), "{found:?}");
    // Two sweeps' strikes.
    assert!(all_found <= Duration::from_millis(5_000), "{all_found:?}");
    drop(procs);
    admin.stop().await;
}

/// The lost-run watch probes an executor holding an open run (`/beat`) with the token of the
/// run's group, as the run request itself was sent: with the admin-wide token, an executor of a
/// group with a token of its own refused every probe, each second, for as long as a run was open.
#[tokio::test]
async fn the_watch_probes_with_the_groups_token() {
    let _turn = SERIAL.lock().await;
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = admin
        .post(
            "/groups",
            json!({"appname": "own-token", "title": "own-token", "access_token": "grp-secret"}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    // A stand-in executor that takes the run and never calls back (it stays open), recording
    // each request's route and token.
    let seen = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let record = seen.clone();
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: axum::http::HeaderMap| {
            let record = record.clone();
            async move {
                let token = headers
                    .get("XXL-JOB-ACCESS-TOKEN")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                record.lock().unwrap().push((uri.path().to_string(), token));
                axum::Json(json!({"code": 200, "msg": null}))
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}/", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    admin
        .executor_call(
            "/api/registry",
            json!({"registryGroup": "EXECUTOR", "registryKey": "own-token", "registryValue": address}),
        )
        .await;
    admin.wait_executors(gid, 1).await;
    let job = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "held", "handler": "held", "schedule_type": "NONE"}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let fire = trigger(&admin, job, json!({})).await;
    let beats = || {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|(path, _)| path == "/beat")
            .count()
    };
    wait_until(
        Duration::from_secs(20),
        "two probes of the open run",
        || {
            let n = beats();
            async move { n >= 2 }
        },
    )
    .await;
    let seen = seen.lock().unwrap().clone();
    assert!(seen.iter().any(|(path, _)| path == "/run"), "{seen:?}");
    assert!(
        seen.iter().all(|(_, token)| token == "grp-secret"),
        "every request carries the group's token: {seen:?}"
    );
    // The probes found it alive: the run is still open.
    let fire = admin.get(&format!("/fires/{fire}")).await;
    assert_eq!(runs(&fire)[0]["state"], "running", "{fire}");
    server.abort();
    admin.stop().await;
}

/// An admin that claimed runs for a late send (`Store::claim_sends` records the send before the
/// request goes out) and died before their answers left them `triggering` with a send recorded,
/// which no rule judged: open for good. Another admin's watch now ends them lost once their admin
/// counts as gone, the claim is older than a request's timeout and the answer's hold, and the
/// executor says it is not running the job: a plain job's fire fails (its retries and alarm
/// follow), a sharded item runs again at once. Whether the request went out is not known, so a
/// plain run is not sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_claimed_by_an_admin_that_died_do_not_stay_triggering() {
    let _turn = SERIAL.lock().await;
    for db in TestDb::all().await {
        stranded_claims_scenario(&db).await;
        db.cleanup().await;
    }
}

async fn stranded_claims_scenario(db: &TestDb) {
    use shardline_admin::store::{NewRun, Store};
    let kind = db.kind();
    let admin = TestAdmin::start(db).await;
    let gid = group(&admin, "stranded-app").await;
    let calls = Calls::default();
    let no_failures = Arc::new(Mutex::new(BTreeSet::new()));
    let mut execs = Vec::new();
    for who in 0..2 {
        let exec =
            recording_executor("stranded-app", &admin, who, &calls, &no_failures, |_| {}).await;
        execs.push(exec);
    }
    admin.wait_executors(gid, 2).await;
    let plain = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "plain", "handler": "record", "schedule_type": "NONE"}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let sharded = items_job(&admin, gid, "record", 2, json!({})).await;

    // What the gone admin left: its node, silent for 30 s, and a fire of each job it started
    // (runs stored) and claimed for a late send, with no answer.
    let store = Store::connect(&db.url).await.unwrap();
    let now = now_ms();
    store
        .heartbeat_node("gone-admin", "127.0.0.1:9", now - 120_000, now - 30_000)
        .await
        .unwrap();
    let run = |item: i64, total: i64, exec: &TestExecutor| NewRun {
        shard_index: item,
        shard_total: total,
        attempt: 0,
        retries: 0,
        executor_address: exec.address.clone(),
        handler: "record".into(),
        params: String::new(),
        item_param: None,
    };
    let mut left = Vec::new();
    for (job, runs) in [
        (plain, vec![run(0, 1, &execs[0])]),
        (sharded, vec![run(0, 2, &execs[0]), run(1, 2, &execs[1])]),
    ] {
        let (fire, ids) = store
            .create_fire(job, gid, "CRON", now, None, "", None, &runs, now)
            .await
            .unwrap()
            .unwrap();
        let claimed = store.claim_sends(&ids, now + 100).await.unwrap();
        assert_eq!(claimed, ids, "{kind}");
        left.push(fire);
    }
    db.exec(&[format!(
        "UPDATE fires SET owner = 'gone-admin' WHERE id IN ({}, {})",
        left[0], left[1]
    )])
    .await;
    store.close().await;

    let (plain_fire, sharded_fire) = (left[0], left[1]);
    let plain_fire = admin.wait_fire(plain_fire).await;
    let sharded_fire = admin.wait_fire(sharded_fire).await;
    assert_eq!(plain_fire["state"], "failed", "{kind}: {plain_fire}");
    assert_eq!(sharded_fire["state"], "succeeded", "{kind}: {sharded_fire}");
    // Each claimed run ended lost, saying why, and not before its claim was older than a
    // request's timeout (3 s), the answer's hold (1 s) and a second.
    let claimed_runs: Vec<Value> = runs(&plain_fire)
        .into_iter()
        .chain(runs(&sharded_fire))
        .filter(|r| r["attempt"] == 0)
        .collect();
    assert_eq!(claimed_runs.len(), 3, "{kind}: {claimed_runs:?}");
    for r in &claimed_runs {
        assert_eq!(r["state"], "lost", "{kind}: {r}");
        let msg = r["handle_msg"].as_str().unwrap_or_default();
        assert!(
            msg.contains("admin gone-admin stopped after claiming its late send"),
            "{kind}: {msg}"
        );
        let judged = r["finished_at"].as_i64().unwrap();
        assert!(
            judged >= now + 100 + 3_000,
            "{kind}: judged at +{} ms",
            judged - now
        );
    }
    // The plain run was not sent again; each sharded item ran once, on a new attempt.
    let calls = calls.lock().unwrap().clone();
    assert!(calls.iter().all(|c| c.2 == 2), "{kind}: {calls:?}");
    let items: BTreeSet<i32> = calls.iter().map(|c| c.1).collect();
    assert_eq!(
        (calls.len(), items),
        (2, BTreeSet::from([0, 1])),
        "{kind}: {calls:?}"
    );
    assert_one_success_per_item(&sharded_fire);
    for exec in execs {
        exec.stop().await;
    }
    admin.stop().await;
}
