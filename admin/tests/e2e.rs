//! End to end with real SDK executors over HTTP: registration, a broadcast trigger, maxNode, logs.
//! Runs on SQLite and on MariaDB.

mod common;

use std::sync::{Arc, Mutex};

use common::{TestAdmin, TestDb, TestExecutor};
use serde_json::json;
use shardline_executor::JobResult;

type Seen = Arc<Mutex<Vec<(String, i32, i32)>>>;

async fn executors(n: usize, admin: &TestAdmin, seen: &Seen) -> Vec<TestExecutor> {
    let mut v = Vec::new();
    for i in 0..n {
        let seen = seen.clone();
        let name = format!("exec-{i}");
        v.push(
            TestExecutor::start("e2e-app", &admin.base, move |b| {
                b.handler("record", move |ctx| {
                    let seen = seen.clone();
                    let name = name.clone();
                    async move {
                        ctx.log(format!(
                            "shard {}/{} on {name}",
                            ctx.shard_index(),
                            ctx.shard_total()
                        ));
                        seen.lock()
                            .unwrap()
                            .push((name, ctx.shard_index(), ctx.shard_total()));
                        JobResult::success_with("recorded")
                    }
                })
            })
            .await,
        );
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn broadcast_max_node_and_logs() {
    for db in TestDb::all().await {
        let admin = TestAdmin::start(&db).await;
        let group = admin
            .post("/groups", json!({"appname": "e2e-app", "title": "E2E"}))
            .await;
        let gid = group["id"].as_i64().unwrap();
        let seen: Seen = Arc::default();
        let execs = executors(3, &admin, &seen).await;
        admin.wait_executors(gid, 3).await;

        let job = admin
            .post(
                "/jobs",
                json!({"group_id": gid, "name": "broadcast", "handler": "record",
                       "sharding_mode": "BROADCAST", "schedule_type": "NONE"}),
            )
            .await;
        let jid = job["id"].as_i64().unwrap();

        // Broadcast: one run per executor, index = position in the sorted address list.
        let fire = admin.post(&format!("/jobs/{jid}/trigger"), json!({})).await;
        let fire = admin.wait_fire(fire["fire_id"].as_i64().unwrap()).await;
        assert_eq!(fire["state"], "succeeded", "{} {fire}", db.kind());
        assert_eq!(fire["coverage"]["summary"], "3/3 items succeeded");
        let runs = fire["runs"].as_array().unwrap();
        let mut addrs: Vec<&str> = execs.iter().map(|e| e.address.as_str()).collect();
        addrs.sort();
        for (i, r) in runs.iter().enumerate() {
            assert_eq!(r["shard_index"], i as i64);
            assert_eq!(r["shard_total"], 3);
            assert_eq!(r["executor_address"], addrs[i]);
            assert_eq!(r["state"], "succeeded");
            // Stored without a message, read back with the usual one.
            assert_eq!(r["trigger_code"], 200);
            assert_eq!(r["trigger_msg"], format!("accepted by {}", addrs[i]), "{r}");
            assert_eq!(
                r["trigger_note"],
                serde_json::json!({"code": "accepted_by", "params": {"address": addrs[i]}}),
                "{r}"
            );
            assert_eq!(r["handle_note"], serde_json::Value::Null, "{r}");
        }
        assert_eq!(seen.lock().unwrap().len(), 3);

        // The run's log, read through the admin from its executor.
        let run_id = runs[1]["id"].as_i64().unwrap();
        let log = admin.get(&format!("/runs/{run_id}/log?from_line=1")).await;
        assert!(
            log["content"].as_str().unwrap().contains("shard 1/3"),
            "{log}"
        );
        assert_eq!(log["is_end"], false);
        let to = log["to_line"].as_i64().unwrap();
        let tail = admin
            .get(&format!("/runs/{run_id}/log?from_line={}", to + 1))
            .await;
        assert_eq!(tail["is_end"], true, "finished run, nothing new: {tail}");

        // maxNode on the job: only 2 executors are called, each sees total 2.
        seen.lock().unwrap().clear();
        admin
            .put(&format!("/jobs/{jid}"), json!({"max_node": 2}))
            .await;
        let fire = admin.post(&format!("/jobs/{jid}/trigger"), json!({})).await;
        let fire = admin.wait_fire(fire["fire_id"].as_i64().unwrap()).await;
        assert_eq!(fire["runs"].as_array().unwrap().len(), 2, "{fire}");
        assert_eq!(fire["state"], "succeeded");
        let calls = seen.lock().unwrap().clone();
        assert_eq!(calls.len(), 2, "exactly two executors called: {calls:?}");
        assert!(calls.iter().all(|(_, _, total)| *total == 2));

        // maxNode in the parameters (as stock users write it) works the same.
        seen.lock().unwrap().clear();
        admin
            .put(&format!("/jobs/{jid}"), json!({"max_node": 0}))
            .await;
        let fire = admin
            .post(
                &format!("/jobs/{jid}/trigger"),
                json!({"params": "{\"maxNode\": 2}"}),
            )
            .await;
        let fire = admin.wait_fire(fire["fire_id"].as_i64().unwrap()).await;
        assert_eq!(fire["runs"].as_array().unwrap().len(), 2);
        let mut idx: Vec<i32> = seen.lock().unwrap().iter().map(|c| c.1).collect();
        idx.sort();
        assert_eq!(idx, [0, 1]);

        for e in execs {
            e.stop().await;
        }
        admin.stop().await;
        db.cleanup().await;
    }
}
