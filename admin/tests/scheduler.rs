//! The scheduler against real executors: cron on time, FIX_RATE / FIX_DELAY spacing, misfire after
//! downtime, retries with backoff and one alarm, children after all shards, route strategies.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{TestAdmin, TestDb, TestExecutor, Webhook};
use serde_json::{json, Value};
use shardline_executor::JobResult;

type Calls = Arc<Mutex<Vec<(i64, String, i64)>>>; // (job id, executor name, at ms)

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// An executor with a few handlers that record their calls.
async fn executor(appname: &str, admin: &TestAdmin, name: &str, calls: &Calls) -> TestExecutor {
    let (c1, c2, c3) = (calls.clone(), calls.clone(), calls.clone());
    let (n1, n2, n3) = (name.to_string(), name.to_string(), name.to_string());
    TestExecutor::start(appname, &admin.base, move |b| {
        b.handler("record", move |ctx| {
            let (calls, name) = (c1.clone(), n1.clone());
            async move {
                calls.lock().unwrap().push((ctx.job_id(), name, now_ms()));
                JobResult::success_with("ok")
            }
        })
        .handler("slow", move |ctx| {
            let (calls, name) = (c2.clone(), n2.clone());
            async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                calls.lock().unwrap().push((ctx.job_id(), name, now_ms()));
                JobResult::success_with("slow ok")
            }
        })
        .handler("fail", move |ctx| {
            let (calls, name) = (c3.clone(), n3.clone());
            async move {
                calls.lock().unwrap().push((ctx.job_id(), name, now_ms()));
                JobResult::fail("failing on purpose")
            }
        })
    })
    .await
}

async fn group(admin: &TestAdmin, appname: &str) -> i64 {
    admin
        .post("/groups", json!({"appname": appname, "title": appname}))
        .await["id"]
        .as_i64()
        .unwrap()
}

async fn fires(admin: &TestAdmin, job: i64) -> Vec<Value> {
    let v = admin.get(&format!("/fires?job_id={job}&limit=1000")).await;
    let mut items = v["items"].as_array().unwrap().clone();
    items.reverse();
    items
}

/// The fires of `job` that were sent, oldest first. A stop that lands in the last 20 ms before a
/// claimed fire is due finds it past its last look: that fire is closed unsent (`skipped`, "job
/// stopped"), as it should be, and has no send time.
async fn sent_fires(admin: &TestAdmin, job: i64) -> Vec<Value> {
    let mut all = fires(admin, job).await;
    all.retain(|f| !(f["state"] == "skipped" && f["message"] == "job stopped"));
    all
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

/// A job of the `record` handler firing every whole second.
async fn every_second(admin: &TestAdmin, gid: i64, name: &str) -> i64 {
    admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": name, "handler": "record",
            "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "enabled": true}),
        )
        .await["id"]
        .as_i64()
        .unwrap()
}

/// Stops the jobs, then waits for their fires already on their way: a fire due within the
/// stop's last moment still goes out (its last look at the job came first), and its send time
/// and result are stored with its answers, in 10 ms batches.
async fn stop_jobs(admin: &TestAdmin, ids: &[i64]) {
    for id in ids {
        admin.post(&format!("/jobs/{id}/stop"), json!({})).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cron_fires_on_time_and_rates_keep_spacing() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "sched-app").await;
    let calls: Calls = Arc::default();
    let e = executor("sched-app", &admin, "e1", &calls).await;
    admin.wait_executors(gid, 1).await;

    let cron = every_second(&admin, gid, "every-second").await;
    let rate = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "rate", "handler": "record",
            "schedule_type": "FIX_RATE", "schedule_conf": "1", "enabled": true}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let delay = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "delay", "handler": "slow",
            "schedule_type": "FIX_DELAY", "schedule_conf": "1", "enabled": true}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    stop_jobs(&admin, &[cron, rate, delay]).await;

    // CRON: one fire per whole second, dispatched at its millisecond.
    let cf = sent_fires(&admin, cron).await;
    assert!(cf.len() >= 5, "cron fired {} times", cf.len());
    let mut lateness = Vec::new();
    for pair in cf.windows(2) {
        assert_eq!(
            pair[1]["planned_at"].as_i64().unwrap() - pair[0]["planned_at"].as_i64().unwrap(),
            1000
        );
    }
    for f in &cf {
        assert_eq!(f["planned_at"].as_i64().unwrap() % 1000, 0);
        assert_eq!(f["trigger_type"], "CRON");
        lateness.push(f["dispatched_at"].as_i64().unwrap() - f["planned_at"].as_i64().unwrap());
    }
    lateness.sort();
    println!(
        "precision: {} cron fires, lateness median {} ms, p99 {} ms, max {} ms",
        lateness.len(),
        percentile(&lateness, 0.5),
        percentile(&lateness, 0.99),
        lateness.last().unwrap()
    );
    assert!(
        percentile(&lateness, 0.5) < 100,
        "median lateness {lateness:?}"
    );

    // FIX_RATE: planned times exactly 1 s apart.
    let rf = fires(&admin, rate).await;
    assert!(rf.len() >= 5);
    for pair in rf.windows(2) {
        assert_eq!(
            pair[1]["planned_at"].as_i64().unwrap() - pair[0]["planned_at"].as_i64().unwrap(),
            1000
        );
    }
    // FIX_DELAY: the next fire is planned 1 s after the previous one finished (the run takes 0.5 s).
    let df = fires(&admin, delay).await;
    assert!(df.len() >= 3, "{df:?}");
    for pair in df.windows(2) {
        let finished = pair[0]["finished_at"].as_i64().unwrap();
        let next = pair[1]["planned_at"].as_i64().unwrap();
        assert_eq!(next - finished, 1000, "FIX_DELAY spacing");
        assert!(next - pair[0]["planned_at"].as_i64().unwrap() >= 1500);
    }
    e.stop().await;
    admin.stop().await;
    db.cleanup().await;
}

/// A job is claimed again only when its next fire is near (4 s), and then for every fire up to
/// the look-ahead (6.5 s): a job firing every second gets its fires a few at a time, with no gap
/// and none twice, instead of its row being locked and rewritten on every pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_is_claimed_for_several_fires_at_once() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "claim-app").await;
    let calls: Calls = Arc::default();
    let e = executor("claim-app", &admin, "e1", &calls).await;
    admin.wait_executors(gid, 1).await;
    let job = every_second(&admin, gid, "every-second").await;
    tokio::time::sleep(Duration::from_millis(13_000)).await;
    // Read while the job runs: the fires claimed ahead are still there, so every claim's fires
    // are complete. The fires of one claim share its time (`created_at`).
    let all = fires(&admin, job).await;
    let planned: Vec<i64> = all
        .iter()
        .map(|f| f["planned_at"].as_i64().unwrap())
        .collect();
    for pair in planned.windows(2) {
        assert_eq!(pair[1] - pair[0], 1000, "fires planned {planned:?}");
    }
    let mut claims: Vec<(i64, usize)> = Vec::new();
    for f in &all {
        let at = f["created_at"].as_i64().unwrap();
        match claims.last_mut() {
            Some((t, n)) if *t == at => *n += 1,
            _ => claims.push((at, 1)),
        }
    }
    // The first claim takes the whole look-ahead; each later one at least two fires.
    assert!(claims.len() >= 3, "claims (time, fires): {claims:?}");
    assert!(
        claims[1..].iter().all(|(_, n)| *n >= 2),
        "claims (time, fires): {claims:?}"
    );
    stop_jobs(&admin, &[job]).await;
    e.stop().await;
    admin.stop().await;
    db.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn misfire_policies_after_downtime() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "misfire-app").await;
    let calls: Calls = Arc::default();
    let e = executor("misfire-app", &admin, "e1", &calls).await;
    admin.wait_executors(gid, 1).await;
    let mut ids = Vec::new();
    for policy in ["DO_NOTHING", "FIRE_ONCE_NOW"] {
        ids.push(
            admin
                .post(
                    "/jobs",
                    json!({"group_id": gid, "name": policy, "handler": "record",
                    "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "enabled": true,
                    "misfire_strategy": policy}),
                )
                .await["id"]
                .as_i64()
                .unwrap(),
        );
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    admin.stop().await;
    // Down for 8 s: 8 fires of each job missed.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let before = now_ms();
    let admin = TestAdmin::start_with(&db, &[]).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    for id in &ids {
        admin.post(&format!("/jobs/{id}/stop"), json!({})).await;
    }
    let nothing = fires(&admin, ids[0]).await;
    let once = fires(&admin, ids[1]).await;
    let after = |v: &Vec<Value>| -> Vec<Value> {
        v.iter()
            .filter(|f| f["created_at"].as_i64().unwrap() >= before)
            .cloned()
            .collect()
    };
    let (nothing, once) = (after(&nothing), after(&once));
    assert!(
        nothing.iter().all(|f| f["trigger_type"] == "CRON"),
        "{nothing:?}"
    );
    let misfires: Vec<_> = once
        .iter()
        .filter(|f| f["trigger_type"] == "MISFIRE")
        .collect();
    assert_eq!(
        misfires.len(),
        1,
        "fired once however many were missed: {once:?}"
    );
    assert!(
        once.iter().filter(|f| f["trigger_type"] == "CRON").count() >= 1,
        "then the schedule resumes"
    );
    e.stop().await;
    admin.stop().await;
    db.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retries_back_off_and_alarm_once() {
    let db = TestDb::sqlite();
    // A webhook receiver for the alarm, down for its first request.
    let hook = Webhook::start(|_, n| n == 0).await;
    let hook_url = hook.url.clone();

    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "retry-app").await;
    let calls: Calls = Arc::default();
    let e = executor("retry-app", &admin, "e1", &calls).await;
    admin.wait_executors(gid, 1).await;
    let job = admin
        .post("/jobs", json!({"group_id": gid, "name": "flaky", "handler": "fail",
            "retry_count": 2, "retry_interval_s": 1, "retry_backoff": 2, "alarm_targets": hook_url}))
        .await["id"].as_i64().unwrap();
    let fire = admin
        .post(&format!("/jobs/{job}/trigger"), json!({"params": "p-1"}))
        .await["fire_id"]
        .as_i64()
        .unwrap();
    // 1 s then 2 s of backoff: all three attempts are done after ~3.5 s.
    let mut v = Value::Null;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        v = admin.get(&format!("/fires/{fire}")).await;
        if v["state"] == "failed" && v["runs"].as_array().unwrap().len() == 3 {
            break;
        }
    }
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "one attempt and two retries: {v}");
    let at: Vec<i64> = calls.lock().unwrap().iter().map(|c| c.2).collect();
    assert_eq!(at.len(), 3);
    let gaps = [at[1] - at[0], at[2] - at[1]];
    assert!(
        (900..1900).contains(&gaps[0]),
        "first retry after ~1 s: {gaps:?}"
    );
    assert!(
        (1900..2900).contains(&gaps[1]),
        "second retry after ~2 s (backoff): {gaps:?}"
    );
    assert!(
        runs.iter()
            .all(|r| r["params"] == "p-1" && r["shard_index"] == 0),
        "same parameters"
    );
    // The webhook refused the first try; the second, a second later, went through.
    for _ in 0..50 {
        if admin.get(&format!("/fires/{fire}")).await["alarm_state"] == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = hook.took();
    assert_eq!(
        sent.len(),
        1,
        "one alarm per failed fire, after its retries: {sent:?}"
    );
    assert_eq!(sent[0]["fire_id"], fire);
    assert_eq!(hook.requests(), 2, "tried again once");
    let v = admin.get(&format!("/fires/{fire}")).await;
    assert_eq!(v["alarm_state"], 2, "the alarm is recorded as sent: {v}");
    e.stop().await;
    admin.stop().await;
    db.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn child_runs_once_after_all_shards() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "child-app").await;
    let calls: Calls = Arc::default();
    let mut execs = Vec::new();
    for i in 0..3 {
        execs.push(executor("child-app", &admin, &format!("e{i}"), &calls).await);
    }
    admin.wait_executors(gid, 3).await;
    let child = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "child", "handler": "record"}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let parent = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "parent", "handler": "slow",
            "sharding_mode": "BROADCAST", "child_job_ids": [child]}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let fire = admin
        .post(&format!("/jobs/{parent}/trigger"), json!({}))
        .await["fire_id"]
        .as_i64()
        .unwrap();
    let pf = admin.wait_fire(fire).await;
    assert_eq!(pf["state"], "succeeded");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let cf = fires(&admin, child).await;
    assert_eq!(cf.len(), 1, "one child fire for a 3-shard parent: {cf:?}");
    assert_eq!(cf[0]["trigger_type"], "PARENT");
    assert_eq!(cf[0]["parent_fire_id"], fire);
    let child_calls = calls
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c.0 == child)
        .count();
    assert_eq!(child_calls, 1);
    for e in execs {
        e.stop().await;
    }
    admin.stop().await;
    db.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn route_strategies_pick_as_xxl_job_does() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "route-app").await;
    let calls: Calls = Arc::default();
    let mut execs = Vec::new();
    for i in 0..3 {
        execs.push(executor("route-app", &admin, &format!("e{i}"), &calls).await);
    }
    admin.wait_executors(gid, 3).await;
    let mut addrs: Vec<String> = execs.iter().map(|e| e.address.clone()).collect();
    addrs.sort();

    async fn targets(admin: &TestAdmin, gid: i64, route: &str, n: usize) -> Vec<String> {
        let job = admin
            .post("/jobs", json!({"group_id": gid, "name": route, "handler": "record", "route_strategy": route}))
            .await["id"].as_i64().unwrap();
        let mut out = Vec::new();
        for _ in 0..n {
            let f = admin.post(&format!("/jobs/{job}/trigger"), json!({})).await["fire_id"]
                .as_i64()
                .unwrap();
            let f = admin.wait_fire(f).await;
            assert_eq!(f["state"], "succeeded", "{route}: {f}");
            out.push(
                f["runs"][0]["executor_address"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
        out
    }
    assert!(targets(&admin, gid, "FIRST", 3)
        .await
        .iter()
        .all(|a| *a == addrs[0]));
    assert!(targets(&admin, gid, "LAST", 3)
        .await
        .iter()
        .all(|a| *a == addrs[2]));
    let round = targets(&admin, gid, "ROUND", 6).await;
    let pos: Vec<usize> = round
        .iter()
        .map(|a| addrs.iter().position(|x| x == a).unwrap())
        .collect();
    for w in pos.windows(2) {
        assert_eq!(w[1], (w[0] + 1) % 3, "ROUND cycles: {pos:?}");
    }
    let hash = targets(&admin, gid, "CONSISTENT_HASH", 3).await;
    assert!(
        hash.iter().all(|a| *a == hash[0]),
        "a job sticks to one executor"
    );
    // XXL-JOB's LFU starts new addresses at a random count below the group size, so the first
    // picks vary; over enough triggers the least used one always catches up.
    let lfu = targets(&admin, gid, "LEAST_FREQUENTLY_USED", 9).await;
    for a in &addrs {
        assert!(
            lfu.iter().any(|x| x == a),
            "LFU reaches every executor: {lfu:?}"
        );
    }
    let lru = targets(&admin, gid, "LEAST_RECENTLY_USED", 3).await;
    let mut distinct = lru.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "LRU visits everyone: {lru:?}");
    assert!(targets(&admin, gid, "FAILOVER", 2)
        .await
        .iter()
        .all(|a| *a == addrs[0]));
    assert!(targets(&admin, gid, "BUSYOVER", 2)
        .await
        .iter()
        .all(|a| *a == addrs[0]));
    let r = targets(&admin, gid, "RANDOM", 5).await;
    assert!(r.iter().all(|a| addrs.contains(a)));

    // FAILOVER over a manual group whose first address is dead picks the live one.
    let dead = "http://127.0.0.1:9/".to_string();
    let manual = admin
        .post(
            "/groups",
            json!({"appname": "manual-app", "title": "manual", "address_type": "MANUAL",
            "addresses": [dead, addrs[1].clone()]}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let got = targets(&admin, manual, "FAILOVER", 2).await;
    assert!(got.iter().all(|a| *a == addrs[1]), "{got:?}");
    for e in execs {
        e.stop().await;
    }
    admin.stop().await;
    db.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_admin_on_one_sqlite_file_is_refused() {
    use clap::Parser;
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let cli = shardline_admin::config::Cli::parse_from([
        "shardline-admin",
        "--database-url",
        &db.url,
        "--access-token",
        common::ACCESS_TOKEN,
    ]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = shardline_admin::app::run(cli.settings, listener, std::future::pending())
        .await
        .expect_err("second admin refused");
    let msg = err.to_string();
    assert!(
        msg.contains("SQLite supports one admin")
            && msg.contains("MySQL")
            && msg.contains("counts as gone from")
            && msg.contains(" UTC"),
        "{msg}"
    );
    admin.stop().await;
    db.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn edits_and_stops_apply_to_fires_not_yet_dispatched() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "edit-app").await;
    let seen: Arc<Mutex<Vec<(String, i64)>>> = Arc::default();
    let s2 = seen.clone();
    let e = TestExecutor::start("edit-app", &admin.base, move |b| {
        b.handler("echo", move |ctx| {
            let seen = s2.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push((ctx.params().to_string(), now_ms()));
                JobResult::success()
            }
        })
    })
    .await;
    admin.wait_executors(gid, 1).await;
    let job = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "echo", "handler": "echo", "params": "v1",
            "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "enabled": true}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    // Fires for the next seconds are already claimed; the new parameters still apply to them.
    admin
        .put(&format!("/jobs/{job}"), json!({"params": "v2"}))
        .await;
    let edited = now_ms();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    admin.post(&format!("/jobs/{job}/stop"), json!({})).await;
    let stopped = now_ms();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let calls = seen.lock().unwrap().clone();
    assert!(calls.iter().any(|(p, _)| p == "v1"));
    let after_edit: Vec<_> = calls.iter().filter(|(_, at)| *at > edited + 50).collect();
    assert!(
        !after_edit.is_empty() && after_edit.iter().all(|(p, _)| p == "v2"),
        "{calls:?}"
    );
    let after_stop = calls.iter().filter(|(_, at)| *at > stopped + 100).count();
    assert_eq!(
        after_stop, 0,
        "no fire after the job was stopped: {calls:?}"
    );
    // The claimed-but-cancelled fires left no trace; every stored fire ran.
    for f in sent_fires(&admin, job).await {
        assert_eq!(f["state"], "succeeded", "{f}");
    }
    e.stop().await;
    admin.stop().await;
    db.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_executor_does_not_delay_other_jobs() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    // An "executor" that accepts connections and never answers: every dispatch to it waits for
    // the whole dispatch timeout (1 s in tests).
    let hole = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hole_addr = format!("http://{}/", hole.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = hole.accept().await {
            held.push(sock);
        }
    });
    let dead = admin
        .post("/groups", json!({"appname": "dead-app", "title": "dead", "address_type": "MANUAL", "addresses": [hole_addr]}))
        .await["id"].as_i64().unwrap();
    let gid = group(&admin, "live-app").await;
    let calls: Calls = Arc::default();
    let e = executor("live-app", &admin, "e1", &calls).await;
    admin.wait_executors(gid, 1).await;
    let mut stuck = Vec::new();
    for i in 0..5 {
        stuck.push(every_second(&admin, dead, &format!("stuck-{i}")).await);
    }
    let live = every_second(&admin, gid, "live").await;
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    let all: Vec<i64> = stuck.iter().copied().chain([live]).collect();
    stop_jobs(&admin, &all).await;
    let lf = sent_fires(&admin, live).await;
    let mut lateness: Vec<i64> = lf
        .iter()
        .map(|f| f["dispatched_at"].as_i64().unwrap() - f["planned_at"].as_i64().unwrap())
        .collect();
    lateness.sort();
    println!("live job next to 5 stuck ones: lateness {lateness:?} ms");
    assert!(lf.len() >= 5, "{lf:?}");
    assert!(
        percentile(&lateness, 0.5) < 200,
        "the live job keeps its time: {lateness:?}"
    );
    assert!(lf.iter().all(|f| f["state"] == "succeeded"));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let sf = sent_fires(&admin, stuck[0]).await;
    assert!(
        !sf.is_empty() && sf.iter().all(|f| f["state"] == "failed"),
        "{sf:?}"
    );
    e.stop().await;
    admin.stop().await;
    db.cleanup().await;
}

/// An admin that comes back to more misfired jobs than one claim takes (1 000) plans all of them
/// in its first pass. A claim of misfired DO_NOTHING jobs gets no fires; the pass used to take
/// that for "nothing more due" and advance only a thousand jobs a second, so the rest misfired
/// again in turn and an overloaded admin stopped firing altogether.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backlog_of_misfired_jobs_is_planned_in_one_pass() {
    const JOBS: usize = 2_500;
    let db = TestDb::sqlite();
    let store = shardline_admin::store::Store::connect(&db.url)
        .await
        .unwrap();
    let gid = store
        .create_group(
            &shardline_admin::store::GroupInput {
                appname: "backlog-app".into(),
                title: "Backlog".into(),
                address_type: "AUTO".into(),
                addresses: String::new(),
                access_token: String::new(),
                generation: "CLASSIC".into(),
            },
            now_ms(),
        )
        .await
        .unwrap();
    // Due an hour ago: every one of them misfired.
    let hour_ago = now_ms() - 3_600_000;
    for i in 0..JOBS {
        let job = shardline_admin::model::Job {
            group_id: gid,
            name: format!("backlog-{i}"),
            schedule_type: "CRON".into(),
            schedule_conf: "* * * * * ?".into(),
            timezone: "UTC".into(),
            handler: "record".into(),
            misfire_strategy: "DO_NOTHING".into(),
            enabled: 1,
            next_fire_at: Some(hour_ago - i as i64),
            ..Default::default()
        };
        store.create_job(&job, hour_ago).await.unwrap();
    }
    store.close().await;
    let started = now_ms();
    let admin = TestAdmin::start(&db).await;
    // One pass takes well under a second here; the second pass would come a second after it.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    admin.stop().await;
    let pool = sqlx::SqlitePool::connect(&db.url).await.unwrap();
    let firsts: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT job_id, MIN(planned_at) FROM fires WHERE trigger_type = 'CRON' GROUP BY job_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert_eq!(firsts.len(), JOBS, "every job has its regular fires again");
    let earliest = firsts.iter().map(|f| f.1).min().unwrap();
    let latest = firsts.iter().map(|f| f.1).max().unwrap();
    assert!(earliest > started, "no missed fire was replayed");
    // All were planned by the same pass: their first fires are the same second, or the next one
    // if the pass crossed a second boundary. A thousand jobs per pass put them 2 s apart.
    assert!(
        latest - earliest <= 1_000,
        "first fires from {earliest} to {latest}: the backlog took more than one pass"
    );
    db.cleanup().await;
}

/// A cron expression with one time left (a year field) fires that once, then the job stops, as
/// XXL-JOB stops a job with no next trigger time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_schedule_that_ends_runs_its_last_fire_then_stops() {
    use chrono::{Datelike, Timelike};
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = group(&admin, "ending-app").await;
    let calls: Calls = Arc::default();
    let e = executor("ending-app", &admin, "e1", &calls).await;
    admin.wait_executors(gid, 1).await;
    let at = chrono::Utc::now() + chrono::Duration::seconds(4);
    let cron = format!(
        "{} {} {} {} {} ? {}",
        at.second(),
        at.minute(),
        at.hour(),
        at.day(),
        at.month(),
        at.year()
    );
    let planned = at.timestamp() * 1000;
    let id = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "once", "handler": "record", "timezone": "UTC",
            "schedule_type": "CRON", "schedule_conf": cron, "enabled": true}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let deadline = planned + 5_000;
    while now_ms() < deadline && calls.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ran: Vec<i64> = calls.lock().unwrap().iter().map(|c| c.2).collect();
    assert_eq!(
        ran.len(),
        1,
        "the one time of the schedule ran: {:?}",
        fires(&admin, id).await
    );
    assert!(ran[0] >= planned, "not before its time");
    let f = fires(&admin, id).await;
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["planned_at"].as_i64(), Some(planned));
    let job = admin.get(&format!("/jobs/{id}")).await;
    assert_eq!(job["enabled"], json!(false), "nothing left to fire: {job}");
    e.stop().await;
    admin.stop().await;
    db.cleanup().await;
}

/// Scheduled fires of a group with no executor online fail with the reason as their message, on
/// both databases; the notes of a batch of fires are written with the fires' start, alike notes
/// in one statement (a statement per fire held up the batch's preparation).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fires_of_a_group_without_executors_fail_with_the_reason() {
    for db in TestDb::all().await {
        let kind = db.kind();
        let admin = TestAdmin::start(&db).await;
        let gid = group(&admin, "nobody-app").await;
        let mut jobs = Vec::new();
        for i in 0..20 {
            jobs.push(every_second(&admin, gid, &format!("nobody-{i}")).await);
        }
        // A broadcast plans no run at all there; its fire says why too.
        let broadcast = admin
            .post(
                "/jobs",
                json!({"group_id": gid, "name": "nobody-broadcast", "handler": "record",
                       "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "enabled": true,
                       "sharding_mode": "BROADCAST"}),
            )
            .await["id"]
            .as_i64()
            .unwrap();
        jobs.push(broadcast);
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        stop_jobs(&admin, &jobs).await;
        for job in &jobs {
            let ended: Vec<Value> = fires(&admin, *job)
                .await
                .into_iter()
                .filter(|f| f["state"] != "skipped" && f["state"] != "scheduled")
                .collect();
            assert!(!ended.is_empty(), "{kind}: job {job} had no fire");
            for f in &ended {
                assert_eq!(
                    (f["state"].as_str(), f["message"].as_str()),
                    (Some("failed"), Some("no online executor in the group")),
                    "{kind}: {f}"
                );
                // The admin's own message comes with its note, for the console to translate.
                assert_eq!(
                    f["message_note"],
                    serde_json::json!({"code": "no_executor", "params": {}}),
                    "{kind}: {f}"
                );
            }
            if *job == broadcast {
                let f = admin.get(&format!("/fires/{}", ended[0]["id"])).await;
                assert_eq!(
                    f["coverage"]["summary"], "no run: no online executor in the group",
                    "{kind}: {f}"
                );
            }
        }
        admin.stop().await;
        db.cleanup().await;
    }
}
