//! What follows a fire's end survives the admin: a failed fire's retries, a succeeded fire's
//! child jobs and a FIX_DELAY job's next fire are done by the next admin when the one that saw
//! the fire end stopped or died before it could (the follow-up is written with the end, in
//! `follow_ups`, and the admins sweep for the ones left undone).
//!
//! The window is the milliseconds between the end's commit and its follow-up, too short to hit
//! with a kill; so the test stops the admin and leaves the database as such a death leaves it
//! (the end stored, its follow-up written and not done), then starts another admin on it.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{TestAdmin, TestDb, TestExecutor, Webhook};
use serde_json::{json, Value};
use shardline_executor::JobResult;

/// The follow-ups not done yet, read from the database.
async fn follow_ups_left(db: &TestDb) -> i64 {
    let sql = "SELECT COUNT(*) FROM follow_ups";
    if db.kind() == "mysql" {
        let pool = sqlx::MySqlPool::connect(&db.url).await.unwrap();
        let n = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
        pool.close().await;
        n
    } else {
        let pool = sqlx::SqlitePool::connect(&db.url).await.unwrap();
        let n = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
        pool.close().await;
        n
    }
}

async fn fires_of(admin: &TestAdmin, job: i64) -> Vec<Value> {
    let mut v = admin.get(&format!("/fires?job_id={job}&limit=100")).await["items"]
        .as_array()
        .unwrap()
        .clone();
    v.reverse();
    v
}

/// Polls `check` every 100 ms for up to 20 s.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<String>>,
{
    let mut last = String::new();
    for _ in 0..200 {
        match check().await {
            None => return,
            Some(state) => last = state,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} never happened; last seen: {last}");
}

/// A group of `appname` with one live executor whose handlers are `ok` and `fail`.
async fn group_with_executor(admin: &TestAdmin, appname: &str) -> (i64, TestExecutor) {
    let gid = admin
        .post("/groups", json!({"appname": appname, "title": appname}))
        .await["id"]
        .as_i64()
        .unwrap();
    let executor = TestExecutor::start(appname, &admin.base, |b| {
        b.handler("ok", |_| async { JobResult::success() })
            .handler("fail", |_| async { JobResult::fail("failing on purpose") })
    })
    .await;
    admin.wait_executors(gid, 1).await;
    (gid, executor)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn follow_ups_left_undone_are_done_by_the_next_admin() {
    for db in TestDb::all().await {
        let kind = db.kind();
        let admin = TestAdmin::start(&db).await;
        let (gid, executor) = group_with_executor(&admin, "follow-app").await;
        let create = |body: Value| {
            let admin = &admin;
            async move { admin.post("/jobs", body).await["id"].as_i64().unwrap() }
        };
        let child = create(json!({"group_id": gid, "name": "child", "handler": "ok"})).await;
        let parent = create(json!({"group_id": gid, "name": "parent", "handler": "ok"})).await;
        let failing = create(json!({"group_id": gid, "name": "failing", "handler": "fail"})).await;
        let delayed = create(json!({"group_id": gid, "name": "delayed", "handler": "ok",
            "schedule_type": "FIX_DELAY", "schedule_conf": "1", "enabled": true}))
        .await;

        let trigger = |job: i64| {
            let admin = &admin;
            async move {
                let fire = admin.post(&format!("/jobs/{job}/trigger"), json!({})).await["fire_id"]
                    .as_i64()
                    .unwrap();
                admin.wait_fire(fire).await;
                fire
            }
        };
        let parent_fire = trigger(parent).await;
        let failed_fire = trigger(failing).await;
        eventually("the FIX_DELAY job's first fire", || async {
            let fires = fires_of(&admin, delayed).await;
            let first = fires.first().map(|f| f["state"].clone());
            (first != Some(json!("succeeded"))).then(|| format!("{fires:?}"))
        })
        .await;
        let first_delayed = fires_of(&admin, delayed).await[0].clone();
        let first_id = first_delayed["id"].as_i64().unwrap();
        let stopped = admin.stop_keeping_address().await;

        // The state an admin killed right after these ends leaves: the parent's end stored but
        // its child not triggered (the job has a child job now), the failed fire's retry not
        // planned (the job retries once now), the FIX_DELAY job's next fire not planned; each
        // with its follow-up written at the end, long enough ago for the sweep.
        let stmts = vec![
            format!("UPDATE jobs SET child_job_ids = '{child}' WHERE id = {parent}"),
            format!("UPDATE jobs SET retry_count = 1 WHERE id = {failing}"),
            format!("UPDATE fires SET alarm_state = 0 WHERE id = {failed_fire}"),
            format!("DELETE FROM runs WHERE job_id = {delayed} AND fire_id > {first_id}"),
            format!("DELETE FROM fires WHERE job_id = {delayed} AND id > {first_id}"),
            format!(
                "UPDATE jobs SET next_fire_at = NULL, last_fire_at = {} WHERE id = {delayed}",
                first_delayed["planned_at"]
            ),
            "DELETE FROM follow_ups".to_string(),
            format!("INSERT INTO follow_ups (fire_id, job_id, state, created_at) VALUES ({parent_fire}, {parent}, 'succeeded', 1), ({failed_fire}, {failing}, 'failed', 1), ({first_id}, {delayed}, 'succeeded', 1)"),
        ];
        db.exec(&stmts).await;
        let admin = stopped.start_again(&db).await;

        eventually("the child job's fire", || async {
            let fires = fires_of(&admin, child).await;
            match fires.as_slice() {
                [f] if f["state"] == "succeeded" => {
                    assert_eq!(f["trigger_type"], "PARENT", "{kind}: {f}");
                    assert_eq!(f["parent_fire_id"], parent_fire, "{kind}: {f}");
                    None
                }
                other => Some(format!("{other:?}")),
            }
        })
        .await;
        eventually("the failed fire's retry", || async {
            let f = admin.get(&format!("/fires/{failed_fire}")).await;
            let attempts = f["runs"].as_array().map_or(0, Vec::len);
            let done = f["state"] == "failed" && attempts == 2 && f["alarm_state"] != 0;
            (!done).then(|| f.to_string())
        })
        .await;
        eventually("the FIX_DELAY job's next fires", || async {
            let fires = fires_of(&admin, delayed).await;
            let later: Vec<&Value> = fires
                .iter()
                .filter(|f| f["id"].as_i64().unwrap() > first_id && f["state"] == "succeeded")
                .collect();
            (later.len() < 2).then(|| format!("{fires:?}"))
        })
        .await;

        // Done once: the same follow-ups found again (a second admin sweeping them at once)
        // trigger no second child fire and no second retry, and no FIX_DELAY fire beside the
        // one the job is on.
        db.exec(&[format!("INSERT INTO follow_ups (fire_id, job_id, state, created_at) VALUES ({parent_fire}, {parent}, 'succeeded', 1), ({failed_fire}, {failing}, 'failed', 1), ({first_id}, {delayed}, 'succeeded', 1)")]).await;
        eventually("the repeated follow-ups done", || async {
            let left = follow_ups_left(&db).await;
            (left > 0).then(|| format!("{left} left"))
        })
        .await;
        assert_eq!(
            fires_of(&admin, child).await.len(),
            1,
            "{kind}: one child fire"
        );
        let f = admin.get(&format!("/fires/{failed_fire}")).await;
        assert_eq!(
            f["runs"].as_array().unwrap().len(),
            2,
            "{kind}: one retry: {f}"
        );
        admin
            .post(&format!("/jobs/{delayed}/stop"), json!({}))
            .await;
        let fires = fires_of(&admin, delayed).await;
        for pair in fires.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if let Some(finished) = a["finished_at"].as_i64() {
                assert!(
                    b["planned_at"].as_i64().unwrap() >= finished,
                    "{kind}: a FIX_DELAY fire planned beside a running one: {a} {b}"
                );
            }
        }

        executor.stop().await;
        admin.stop().await;
        db.cleanup().await;
    }
}

/// A FIX_DELAY job plans its next fire when one ends, and a fire that misfired ends too: taken
/// over from an admin that died, too late to run (DO_NOTHING), it is skipped and the job goes on
/// (it used to stop for good, nothing being left to plan its next fire).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fix_delay_job_goes_on_after_its_fire_misfired() {
    for db in TestDb::all().await {
        let kind = db.kind();
        let admin = TestAdmin::start(&db).await;
        let (gid, executor) = group_with_executor(&admin, "late-app").await;
        let job = admin
            .post(
                "/jobs",
                json!({"group_id": gid, "name": "delayed", "handler": "ok",
                "schedule_type": "FIX_DELAY", "schedule_conf": "1"}),
            )
            .await["id"]
            .as_i64()
            .unwrap();
        let stopped = admin.stop_keeping_address().await;

        // The job runs and its next fire, a minute ago, was claimed by an admin that died.
        let planned = shardline_admin::model::now_ms() - 60_000;
        db.exec(
            &[
                format!("INSERT INTO fires (job_id, group_id, trigger_type, planned_at, sched_key, params, state, total_items, message, owner, claim_expires_at, children_done, alarm_state, created_at) VALUES ({job}, {gid}, 'FIX_DELAY', {planned}, '{job}:{planned}', '', 'scheduled', 0, '', 'a-dead-admin', {}, 0, 0, {planned})", planned + 1_000),
                format!("UPDATE jobs SET enabled = 1, next_fire_at = NULL, last_fire_at = {planned} WHERE id = {job}"),
            ],
        )
        .await;
        let admin = stopped.start_again(&db).await;
        eventually("the job's next fire", || async {
            let fires = fires_of(&admin, job).await;
            let ok = fires.len() >= 2
                && fires[0]["state"] == "skipped"
                && fires[1]["state"] == "succeeded"
                && fires[1]["trigger_type"] == "FIX_DELAY";
            (!ok).then(|| format!("{kind}: {fires:?}"))
        })
        .await;
        executor.stop().await;
        admin.stop().await;
        db.cleanup().await;
    }
}

/// An alarm its admin claimed and did not send (it stopped or died while sending: the fire in
/// alarm state -1, the follow-up left) is sent by the next admin once the claim is older than
/// the lease, once; one claimed more recently is left to the admin that claimed it. An alarm
/// whose follow-up was found late (its admin died before claiming it) is sent once too, however
/// long its sending takes: the lease runs from the claim, not from the fire's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_alarm_left_unsent_by_its_admin_is_sent_by_the_next() {
    for db in TestDb::all().await {
        let kind = db.kind();
        // The fires whose alarms the webhook refuses, and how many more times.
        let refuse: Arc<Mutex<HashMap<i64, usize>>> = Arc::default();
        let refusing = refuse.clone();
        let hook = Webhook::start(move |alarm, _| {
            let fire = alarm["fire_id"].as_i64().unwrap_or(0);
            let mut refusals = refusing.lock().unwrap();
            match refusals.get_mut(&fire) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    true
                }
                _ => false,
            }
        })
        .await;
        let url = hook.url.clone();
        let admin = TestAdmin::start(&db).await;
        let (gid, executor) = group_with_executor(&admin, "alarm-app").await;
        let job = admin
            .post(
                "/jobs",
                json!({"group_id": gid, "name": "failing", "handler": "fail", "alarm_targets": url}),
            )
            .await["id"]
            .as_i64()
            .unwrap();
        let mut fires = Vec::new();
        for _ in 0..3 {
            let fire = admin.post(&format!("/jobs/{job}/trigger"), json!({})).await["fire_id"]
                .as_i64()
                .unwrap();
            admin.wait_fire(fire).await;
            fires.push(fire);
        }
        eventually("the three alarms sent", || async {
            let n = hook.took().len();
            (n < 3).then(|| format!("{n} alarms"))
        })
        .await;
        eventually("both follow-ups cleared once sent", || async {
            let left = follow_ups_left(&db).await;
            (left > 0).then(|| format!("{left} left"))
        })
        .await;
        let stopped = admin.stop_keeping_address().await;

        // Two fires as an admin that died while sending leaves them: claimed (-1), the
        // follow-up still there; the first claimed ten minutes ago, the second one minute ago
        // (past the sweep's grace, within the lease). The third as one that died before
        // claiming leaves it, ten minutes ago; its webhook refuses twice, so that sending it
        // takes longer than a sweep's interval.
        let (old, recent, late) = (fires[0], fires[1], fires[2]);
        let now = shardline_admin::model::now_ms();
        db.exec(
            &[
                format!("UPDATE fires SET alarm_state = -1 WHERE id IN ({old}, {recent})"),
                format!("UPDATE fires SET alarm_state = 0 WHERE id = {late}"),
                format!(
                    "INSERT INTO follow_ups (fire_id, job_id, state, created_at) VALUES ({old}, {job}, 'failed', {}), ({recent}, {job}, 'failed', {}), ({late}, {job}, 'failed', {})",
                    now - 600_000,
                    now - 60_000,
                    now - 600_000,
                ),
            ],
        )
        .await;
        refuse.lock().unwrap().insert(late, 2);
        let admin = stopped.start_again(&db).await;
        eventually("the old claim's alarm sent again", || async {
            let f = admin.get(&format!("/fires/{old}")).await;
            (f["alarm_state"] != 2).then(|| f.to_string())
        })
        .await;
        eventually("the late follow-up's alarm sent", || async {
            let f = admin.get(&format!("/fires/{late}")).await;
            (f["alarm_state"] != 2).then(|| f.to_string())
        })
        .await;
        eventually("their follow-ups cleared", || async {
            let left = follow_ups_left(&db).await;
            (left != 1).then(|| format!("{left} left"))
        })
        .await;
        // Two sweeps later: the recent claim is still its admin's, sent by nobody else.
        tokio::time::sleep(Duration::from_secs(11)).await;
        let alarms = hook.took();
        let of = |fire: i64| alarms.iter().filter(|a| a["fire_id"] == fire).count();
        assert_eq!(
            of(old),
            2,
            "{kind}: the old claim sent once more: {alarms:?}"
        );
        assert_eq!(
            of(recent),
            1,
            "{kind}: the recent claim left alone: {alarms:?}"
        );
        assert_eq!(
            of(late),
            2,
            "{kind}: the late follow-up's alarm sent once: {alarms:?}"
        );
        let f = admin.get(&format!("/fires/{recent}")).await;
        assert_eq!(f["alarm_state"], -1, "{kind}: {f}");
        assert_eq!(follow_ups_left(&db).await, 1, "{kind}");

        executor.stop().await;
        admin.stop().await;
        db.cleanup().await;
    }
}
