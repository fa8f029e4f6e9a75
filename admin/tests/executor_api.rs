//! The executor-facing protocol of the admin (`/api/registry`, `/api/registryRemove`,
//! `/api/callback`, `/api/shardline/checkpoint`, also under `/xxl-job-admin/api/`), spoken as stock
//! XXL-JOB executors speak it: HTTP 200 always, the outcome in the envelope's `code`.

mod common;

use common::{TestAdmin, TestDb, TestExecutor, ACCESS_TOKEN};
use serde_json::{json, Value};
use shardline_executor::JobResult;

const ROUTES: [&str; 4] = [
    "registry",
    "registryRemove",
    "callback",
    "shardline/checkpoint",
];
const PREFIXES: [&str; 2] = ["/api", "/xxl-job-admin/api"];

/// Posts `body` as is; returns the HTTP status and the envelope.
async fn proto(admin: &TestAdmin, path: &str, token: Option<&str>, body: &str) -> (u16, Value) {
    let mut req = admin
        .http
        .post(admin.url(path))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(t) = token {
        req = req.header("XXL-JOB-ACCESS-TOKEN", t);
    }
    let resp = req.send().await.expect("admin reachable");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{path}: the answer is not an envelope ({e}): {text}"));
    (status, v)
}

/// Posts with the right token and checks the envelope is HTTP 200 with both payload keys null.
async fn call(admin: &TestAdmin, path: &str, body: Value) -> Value {
    envelope(
        proto(admin, path, Some(ACCESS_TOKEN), &body.to_string()).await,
        path,
    )
}

#[track_caller]
fn envelope((status, v): (u16, Value), what: &str) -> Value {
    assert_eq!(status, 200, "{what}: always HTTP 200, got {status} {v}");
    assert!(v["code"].is_i64(), "{what}: {v}");
    let obj = v.as_object().unwrap();
    assert!(
        obj.contains_key("data") && obj.contains_key("content"),
        "{what}: {v}"
    );
    assert!(v["data"].is_null() && v["content"].is_null(), "{what}: {v}");
    v
}

#[track_caller]
fn expect_fail(v: &Value, needle: &str) {
    assert_eq!(v["code"], 500, "{v}");
    let msg = v["msg"].as_str().unwrap_or_default();
    assert!(
        msg.contains(needle),
        "msg {msg:?} should contain {needle:?}"
    );
}

#[track_caller]
fn expect_ok(v: &Value) {
    assert_eq!(v["code"], 200, "{v}");
}

fn registry(key: &str, value: &str) -> Value {
    json!({"registryGroup": "EXECUTOR", "registryKey": key, "registryValue": value})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_and_body_are_checked_on_every_route() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let good = registry("tok-app", "http://127.0.0.1:9/").to_string();
    for prefix in PREFIXES {
        for route in ROUTES {
            let path = format!("{prefix}/{route}");
            for token in [None, Some(""), Some("wrong"), Some("test-access-token2")] {
                let v = envelope(proto(&admin, &path, token, &good).await, &path);
                assert_eq!(v["code"], 500, "{path} {token:?}");
                assert_eq!(v["msg"], "The access token is wrong.", "{path} {token:?}");
            }
            for body in ["", "   \n"] {
                let v = envelope(proto(&admin, &path, Some(ACCESS_TOKEN), body).await, &path);
                expect_fail(&v, "requestBody empty");
            }
            for body in [
                "{",
                "null",
                "\"x\"",
                "12",
                "[1,",
                "{\"logId\": \"x\", \"callbackList\": 5}",
                "\u{feff}",
            ] {
                let v = envelope(proto(&admin, &path, Some(ACCESS_TOKEN), body).await, &path);
                assert_eq!(v["code"], 500, "{path} body {body:?}: {v}");
                assert!(v["msg"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
            }
        }
    }
    // The header name is case-insensitive (one executor sends it in lower case).
    let resp = admin
        .http
        .post(admin.url("/api/registry"))
        .header("xxl-job-access-token", ACCESS_TOKEN)
        .header("content-type", "application/json")
        .body(good)
        .send()
        .await
        .unwrap();
    let v: Value = resp.json().await.unwrap();
    expect_ok(&v);
    admin.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_and_registry_remove() {
    for db in TestDb::all().await {
        let admin = TestAdmin::start(&db).await;
        let g = admin.post("/groups", json!({"appname": "reg-app"})).await["id"]
            .as_i64()
            .unwrap();
        let executors = || async { admin.get(&format!("/groups/{g}/executors")).await };

        // Blank or missing fields: XXL-JOB's "Illegal Argument.".
        for body in [
            registry("", "http://127.0.0.1:9/"),
            registry("reg-app", "  "),
            json!({"registryGroup": "", "registryKey": "reg-app", "registryValue": "http://127.0.0.1:9/"}),
            json!({"registryKey": "reg-app", "registryValue": "http://127.0.0.1:9/"}),
            json!({"registryGroup": "EXECUTOR", "registryKey": null, "registryValue": "http://127.0.0.1:9/"}),
            json!({}),
        ] {
            for prefix in PREFIXES {
                let v = call(&admin, &format!("{prefix}/registry"), body.clone()).await;
                expect_fail(&v, "Illegal Argument.");
                let v = call(&admin, &format!("{prefix}/registryRemove"), body.clone()).await;
                expect_fail(&v, "Illegal Argument.");
            }
        }
        // Longer than the registry can hold: refused with a reason, on every database. The limit
        // counts characters, as the column does: 64 two-byte ones are stored.
        for (chars, refused) in [(300, true), (65, true), (64, false)] {
            let body = registry(&"é".repeat(chars), "http://127.0.0.1:9/");
            let v = call(&admin, "/api/registry", body).await;
            if refused {
                expect_fail(&v, "registryKey is longer than 64 characters");
            } else {
                expect_ok(&v);
            }
        }
        let long_addr = format!("http://{}/", "a".repeat(300));
        let v = call(&admin, "/api/registry", registry("reg-app", &long_addr)).await;
        expect_fail(&v, "registryValue");
        // An address no run request could be sent to is refused with its reason, not listed.
        for bad in [
            "not a url",
            "127.0.0.1:9999",
            "http://bad host:9/",
            "http://a:1/,http://b:2/",
        ] {
            let v = call(&admin, "/api/registry", registry("reg-app", bad)).await;
            expect_fail(&v, "registryValue is not an http(s) URL");
        }
        assert_eq!(executors().await, json!([]));

        // Register under both prefixes; the extension metadata is kept; beats are idempotent.
        let mut with_meta = registry("reg-app", "http://127.0.0.1:9002/");
        with_meta["shardlineMeta"] = json!({"weight": 3, "labels": ["shanghai"]});
        expect_ok(&call(&admin, "/api/registry", with_meta.clone()).await);
        expect_ok(&call(&admin, "/api/registry", with_meta).await);
        expect_ok(
            &call(
                &admin,
                "/xxl-job-admin/api/registry",
                registry(" reg-app ", "http://127.0.0.1:9001"),
            )
            .await,
        );
        let list = executors().await;
        let list = list.as_array().unwrap();
        assert_eq!(list.len(), 2, "{list:?}");
        // Sorted by address, with a trailing slash as XXL-JOB writes it.
        assert_eq!(list[0]["address"], "http://127.0.0.1:9001/");
        assert_eq!(list[1]["address"], "http://127.0.0.1:9002/");
        assert_eq!(list[1]["weight"], 3);
        assert_eq!(list[1]["labels"], json!(["shanghai"]));
        assert!(list[0]["last_beat_at"].is_i64());

        // Remove one through each prefix; removing an unknown executor is not an error.
        expect_ok(
            &call(
                &admin,
                "/api/registryRemove",
                registry("reg-app", "http://127.0.0.1:9002/"),
            )
            .await,
        );
        assert_eq!(executors().await.as_array().unwrap().len(), 1);
        expect_ok(
            &call(
                &admin,
                "/xxl-job-admin/api/registryRemove",
                registry("reg-app", "http://127.0.0.1:9001/"),
            )
            .await,
        );
        assert_eq!(executors().await, json!([]));
        expect_ok(
            &call(
                &admin,
                "/api/registryRemove",
                registry("nobody", "http://127.0.0.1:1/"),
            )
            .await,
        );

        admin.stop().await;
        db.cleanup().await;
    }
}

async fn run_state(admin: &TestAdmin, run_id: i64) -> Value {
    admin.get(&format!("/runs/{run_id}")).await
}

async fn wait_run(admin: &TestAdmin, run_id: i64, state: &str) -> Value {
    for _ in 0..400 {
        let run = run_state(admin, run_id).await;
        if run["state"] == state {
            return run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!(
        "run {run_id} never reached {state}: {}",
        run_state(admin, run_id).await
    );
}

/// Results as stock executors send them. Runs come from real triggers of a real executor whose
/// handler holds until stopped, so only the callbacks sent here decide the runs' states. The
/// admin applies callbacks in arrival order, so once a later one shows, earlier ones were applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn callbacks_both_shapes_first_result_wins() {
    for db in TestDb::all().await {
        let admin = TestAdmin::start(&db).await;
        let g = admin.post("/groups", json!({"appname": "cb-app"})).await["id"]
            .as_i64()
            .unwrap();
        let exec = TestExecutor::start("cb-app", &admin.base, |b| {
            b.handler("hold", |ctx| async move {
                ctx.cancelled().await;
                JobResult::fail("stopped")
            })
        })
        .await;
        admin.wait_executors(g, 1).await;
        // One job per run, so the executor runs them side by side.
        let mut runs = Vec::new();
        let mut fires = Vec::new();
        for i in 0..5 {
            let job = admin
                .post(
                    "/jobs",
                    json!({"group_id": g, "name": format!("hold-{i}"), "handler": "hold", "schedule_type": "NONE"}),
                )
                .await;
            let t = admin
                .post(&format!("/jobs/{}/trigger", job["id"]), json!({}))
                .await;
            runs.push(t["run_ids"][0].as_i64().unwrap());
            fires.push(t["fire_id"].as_i64().unwrap());
        }
        for r in &runs {
            wait_run(&admin, *r, "running").await;
        }
        let (a, b, c, d, e) = (runs[0], runs[1], runs[2], runs[3], runs[4]);

        // handleCode 0 (3.5's "still running") and a missing handleCode are not results.
        expect_ok(
            &call(
                &admin,
                "/api/callback",
                json!([{"logId": a, "logDateTim": 0, "handleCode": 0, "handleMsg": "progress"}]),
            )
            .await,
        );
        expect_ok(
            &call(
                &admin,
                "/api/callback",
                json!({"callbackList": [{"logId": a}]}),
            )
            .await,
        );
        // The 3.5 shape with the 3.5 date spelling.
        expect_ok(
            &call(
                &admin,
                "/api/callback",
                json!({"callbackList": [{"logId": b, "logDateTime": 1_700_000_000_000_i64, "handleCode": 200, "handleMsg": "ok"}]}),
            )
            .await,
        );
        let rb = wait_run(&admin, b, "succeeded").await;
        assert_eq!(rb["handle_msg"], "ok");
        assert_eq!(
            run_state(&admin, a).await["state"],
            "running",
            "handleCode 0 is not final"
        );
        let fb = admin.wait_fire(fires[1]).await;
        assert_eq!(fb["state"], "succeeded");

        // First result wins: a failure, then a late success for the same run.
        expect_ok(
            &call(
                &admin,
                "/api/callback",
                json!([{"logId": a, "logDateTim": 0, "handleCode": 500, "handleMsg": "boom"}]),
            )
            .await,
        );
        wait_run(&admin, a, "failed").await;
        expect_ok(
            &call(
                &admin,
                "/xxl-job-admin/api/callback",
                json!([{"logId": a, "logDateTime": 0, "handleCode": 200, "handleMsg": "late"},
                       {"logId": c, "logDateTim": 0, "logDateTime": 0, "handleCode": 502, "handleMsg": "timeout"}]),
            )
            .await,
        );
        wait_run(&admin, c, "timed_out").await;
        let ra = run_state(&admin, a).await;
        assert_eq!(ra["state"], "failed", "{ra}");
        assert_eq!(ra["handle_msg"], "boom");
        assert_eq!(ra["handle_code"], 500);

        // Unknown log ids are acknowledged (the executor must not retry them for ever), and the
        // known items of the same batch still count.
        expect_ok(
            &call(
                &admin,
                "/api/callback",
                json!([{"logId": 987_654_321, "handleCode": 200}, {"logId": -1, "handleCode": 500},
                       {"logId": d, "handleCode": 500, "handleMsg": "job killed by admin"}]),
            )
            .await,
        );
        wait_run(&admin, d, "killed").await;
        expect_ok(&call(&admin, "/api/callback", json!([])).await);
        expect_ok(&call(&admin, "/api/callback", json!({"callbackList": []})).await);

        // A malformed item refuses the whole batch, which the executor will resend.
        let v = call(
            &admin,
            "/api/callback",
            json!([{"logId": e, "handleCode": "200"}]),
        )
        .await;
        expect_fail(&v, "invalid request body");
        let v = call(&admin, "/api/callback", json!([{"handleCode": 200}])).await;
        expect_fail(&v, "invalid request body");
        assert_eq!(run_state(&admin, e).await["state"], "running");

        exec.stop().await;
        admin.stop().await;
        db.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn checkpoints_through_the_protocol() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let g = admin.post("/groups", json!({"appname": "cp-app"})).await["id"]
        .as_i64()
        .unwrap();
    let exec = TestExecutor::start("cp-app", &admin.base, |b| {
        b.handler("items", |_ctx| async move { JobResult::success() })
    })
    .await;
    admin.wait_executors(g, 1).await;
    let job = admin
        .post(
            "/jobs",
            json!({"group_id": g, "name": "items", "handler": "items", "schedule_type": "NONE",
                   "sharding_mode": "ITEMS", "sharding_total": 3}),
        )
        .await;
    let jid = job["id"].as_i64().unwrap();
    let t = admin.post(&format!("/jobs/{jid}/trigger"), json!({})).await;
    admin.wait_fire(t["fire_id"].as_i64().unwrap()).await;
    let run2 = admin.get(&format!("/runs?fire_id={}", t["fire_id"])).await["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["shard_index"] == 2)
        .unwrap()["id"]
        .as_i64()
        .unwrap();

    let v = call(
        &admin,
        "/api/shardline/checkpoint",
        json!({"logId": 987_654_321, "value": "x"}),
    )
    .await;
    expect_fail(&v, "unknown logId 987654321");
    let v = call(
        &admin,
        "/api/shardline/checkpoint",
        json!({"logId": run2, "value": "x".repeat(64 * 1024 + 1)}),
    )
    .await;
    expect_fail(&v, "checkpoint too large");
    let v = call(&admin, "/api/shardline/checkpoint", json!({"logId": run2})).await;
    expect_fail(&v, "value");
    assert_eq!(
        admin.get(&format!("/jobs/{jid}/checkpoints")).await,
        json!([])
    );

    expect_ok(
        &call(
            &admin,
            "/api/shardline/checkpoint",
            json!({"logId": run2, "value": "id=10"}),
        )
        .await,
    );
    expect_ok(
        &call(
            &admin,
            "/xxl-job-admin/api/shardline/checkpoint",
            json!({"logId": run2, "value": "id=20"}),
        )
        .await,
    );
    let cps = admin.get(&format!("/jobs/{jid}/checkpoints")).await;
    assert_eq!(cps.as_array().unwrap().len(), 1, "one per item: {cps}");
    assert_eq!(cps[0]["item"], 2);
    assert_eq!(cps[0]["value"], "id=20", "the newest wins");

    exec.stop().await;
    admin.stop().await;
}
