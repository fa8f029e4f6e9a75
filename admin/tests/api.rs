//! The REST API `/api/v1`, endpoint by endpoint, against a real admin on a random port: success,
//! validation errors naming their field, authentication and permissions, unknown ids, the job rules,
//! and hostile input that must never produce a 500. SQLite throughout; the tests where column sizes
//! and SQL dialects matter also run on MariaDB.

mod common;

use std::collections::BTreeSet;

use common::{TestAdmin, TestDb, TestExecutor, API_TOKEN};
use reqwest::Method;
use serde_json::{json, Value};
use shardline_executor::JobResult;

/// What a request carries.
enum Body {
    None,
    Json(Value),
    /// Sent as is with `Content-Type: application/json` (malformed JSON, odd shapes).
    Raw(String),
    /// Sent with `Content-Type: text/plain`.
    Text(String),
}

/// An answer: status (0 when the connection broke, e.g. a handler panicked), JSON body and the
/// `WWW-Authenticate` header.
#[derive(Debug)]
struct Resp {
    status: u16,
    json: Value,
    www_auth: Option<String>,
}

async fn send(
    admin: &TestAdmin,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Body,
) -> Resp {
    // A fresh connection per request: a broken connection then belongs to this request, never
    // to a pooled one the server closed after an earlier answer.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("http client");
    let mut req = http.request(method, admin.url(&format!("/api/v1{path}")));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req = match body {
        Body::None => req,
        Body::Json(v) => req.json(&v),
        Body::Raw(s) => req.header("content-type", "application/json").body(s),
        Body::Text(s) => req.header("content-type", "text/plain").body(s),
    };
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            return Resp {
                status: 0,
                json: Value::String(format!("transport error: {e}")),
                www_auth: None,
            }
        }
    };
    let status = resp.status().as_u16();
    let www_auth = resp
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let text = resp.text().await.unwrap_or_default();
    let json = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    Resp {
        status,
        json,
        www_auth,
    }
}

/// As the configured admin token.
async fn admin_call(admin: &TestAdmin, method: Method, path: &str, body: Body) -> Resp {
    send(admin, method, path, Some(API_TOKEN), body).await
}

/// Checks the error shape `{"error":{"status","message","field"}}`: the status, the field at fault
/// (`None`: no field) and a piece of the message.
#[track_caller]
fn expect_error(r: &Resp, status: u16, field: Option<&str>, needle: &str) {
    assert_eq!(r.status, status, "expected {status}, got {r:?}");
    let e = &r.json["error"];
    assert_eq!(e["status"], status, "error.status in {}", r.json);
    let msg = e["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no message in {}", r.json));
    assert!(
        msg.to_lowercase().contains(&needle.to_lowercase()),
        "message {msg:?} should mention {needle:?}"
    );
    match field {
        Some(f) => {
            assert_eq!(e["field"], f, "field in {}", r.json);
            // The console translates a refused field's message by its code.
            assert!(e["code"].is_string(), "no code in {}", r.json);
            assert!(e["params"].is_object(), "no params in {}", r.json);
        }
        None => assert!(e.get("field").is_none(), "no field expected in {}", r.json),
    }
}

#[track_caller]
fn expect_status(r: &Resp, status: u16) -> &Value {
    assert_eq!(r.status, status, "expected {status}, got {r:?}");
    &r.json
}

fn id_of(v: &Value) -> i64 {
    v["id"].as_i64().unwrap_or_else(|| panic!("no id in {v}"))
}

/// Two groups, a USER allowed on the first only (with a token), a job in each group.
struct World {
    admin: TestAdmin,
    g1: i64,
    g2: i64,
    user_id: i64,
    user_token: String,
    user_token_id: i64,
    job1: i64,
    job2: i64,
}

async fn world(db: &TestDb) -> World {
    let admin = TestAdmin::start(db).await;
    let g1 = id_of(
        &admin
            .post("/groups", json!({"appname": "app-one", "title": "One"}))
            .await,
    );
    let g2 = id_of(
        &admin
            .post("/groups", json!({"appname": "app-two", "title": "Two"}))
            .await,
    );
    let user = admin
        .post(
            "/users",
            json!({"username": "operator", "password": "operator-pass-1", "role": "USER", "group_ids": [g1]}),
        )
        .await;
    let user_id = id_of(&user);
    let token = admin
        .post("/tokens", json!({"name": "operator's", "user_id": user_id}))
        .await;
    let job = |g: i64, name: &str| json!({"group_id": g, "name": name, "handler": "work", "schedule_type": "NONE"});
    let job1 = id_of(&admin.post("/jobs", job(g1, "one")).await);
    let job2 = id_of(&admin.post("/jobs", job(g2, "two")).await);
    World {
        admin,
        g1,
        g2,
        user_id,
        user_token: token["secret"].as_str().unwrap().to_string(),
        user_token_id: id_of(&token),
        job1,
        job2,
    }
}

impl World {
    async fn user(&self, method: Method, path: &str, body: Body) -> Resp {
        send(&self.admin, method, path, Some(&self.user_token), body).await
    }
}

/// Waits until a run reaches `state`.
async fn wait_run_state(admin: &TestAdmin, run_id: i64, state: &str) -> Value {
    for _ in 0..400 {
        let run = admin.get(&format!("/runs/{run_id}")).await;
        if run["state"] == state {
            return run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!(
        "run {run_id} never reached {state}: {}",
        admin.get(&format!("/runs/{run_id}")).await
    );
}

// ---------------------------------------------------------------------------------------------
// Groups
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_crud_validation_and_errors() {
    let db = TestDb::sqlite();
    let w = world(&db).await;
    let a = &w.admin;

    // Create, read, list, update.
    let r = admin_call(
        a,
        Method::POST,
        "/groups",
        Body::Json(json!({"appname": "billing", "title": "Billing", "access_token": "grp-secret",
                          "address_type": "MANUAL", "addresses": "http://10.0.0.2:9999/, http://10.0.0.1:9999/"})),
    )
    .await;
    let g = expect_status(&r, 201).clone();
    let gid = id_of(&g);
    assert_eq!(g["appname"], "billing");
    assert_eq!(g["address_type"], "MANUAL");
    // Kept sorted: the position is the shard index.
    assert_eq!(
        g["addresses"],
        json!(["http://10.0.0.1:9999/", "http://10.0.0.2:9999/"])
    );
    assert_eq!(g["access_token"], "grp-secret", "admins see the token");
    assert_eq!(g["generation"], "CLASSIC");
    let listed = a.get("/groups").await;
    assert_eq!(listed.as_array().unwrap().len(), 3);
    assert_eq!(a.get(&format!("/groups/{gid}")).await["title"], "Billing");
    let execs = a.get(&format!("/groups/{gid}/executors")).await;
    assert_eq!(
        execs.as_array().unwrap().len(),
        2,
        "a MANUAL group's executors are its list"
    );
    let g = a
        .put(
            &format!("/groups/{gid}"),
            json!({"title": "Billing jobs", "generation": "V35"}),
        )
        .await;
    assert_eq!(g["title"], "Billing jobs");
    assert_eq!(g["generation"], "V35");
    assert_eq!(g["appname"], "billing", "fields not sent are kept");
    assert_eq!(g["address_type"], "MANUAL");

    // Validation: each refusal names its field and the problem.
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!({"title": "no appname"}), "appname", "is required"),
        (
            json!({"appname": "bad name!"}),
            "appname",
            "may contain only",
        ),
        (json!({"appname": "x".repeat(65)}), "appname", "1 to 64"),
        (
            json!({"appname": "t1", "title": "y".repeat(129)}),
            "title",
            "1 to 128",
        ),
        (
            json!({"appname": "t2", "title": "   "}),
            "title",
            "1 to 128",
        ),
        (
            json!({"appname": "t3", "address_type": "BOGUS"}),
            "address_type",
            "BOGUS",
        ),
        (
            json!({"appname": "t4", "address_type": "MANUAL"}),
            "addresses",
            "at least one address",
        ),
        (
            json!({"appname": "t5", "addresses": ["ftp://x"]}),
            "addresses",
            "not an http(s) URL",
        ),
        (
            json!({"appname": "t5b", "addresses": ["http://bad host:9999/"]}),
            "addresses",
            "not an http(s) URL",
        ),
        (
            json!({"appname": "t6", "generation": "V99"}),
            "generation",
            "CLASSIC",
        ),
        (
            json!({"appname": "t7", "access_token": "k".repeat(256)}),
            "access_token",
            "255",
        ),
        (
            json!({"appname": "t8", "addresses": [format!("http://{}/", "a".repeat(300))]}),
            "addresses",
            "255",
        ),
    ];
    for (body, field, needle) in cases {
        let r = admin_call(a, Method::POST, "/groups", Body::Json(body.clone())).await;
        expect_error(&r, 400, Some(field), needle);
    }
    let r = admin_call(
        a,
        Method::PUT,
        &format!("/groups/{gid}"),
        Body::Json(json!({"addresses": []})),
    )
    .await;
    expect_error(&r, 400, Some("addresses"), "at least one address");
    let r = admin_call(
        a,
        Method::POST,
        "/groups",
        Body::Raw("{\"appname\": 5}".into()),
    )
    .await;
    expect_error(&r, 400, None, "invalid JSON body");

    // Conflicts.
    let r = admin_call(
        a,
        Method::POST,
        "/groups",
        Body::Json(json!({"appname": "billing"})),
    )
    .await;
    expect_error(&r, 409, None, "already used");
    let r = admin_call(
        a,
        Method::PUT,
        &format!("/groups/{gid}"),
        Body::Json(json!({"appname": "app-one"})),
    )
    .await;
    expect_error(&r, 409, None, "already used");
    let r = admin_call(a, Method::DELETE, &format!("/groups/{}", w.g1), Body::None).await;
    expect_error(&r, 409, None, "job");

    // Delete, then it is gone.
    let r = admin_call(a, Method::DELETE, &format!("/groups/{gid}"), Body::None).await;
    assert_eq!(r.status, 204, "{r:?}");
    for (m, path, body) in [
        (Method::GET, format!("/groups/{gid}"), Body::None),
        (
            Method::PUT,
            format!("/groups/{gid}"),
            Body::Json(json!({"title": "x"})),
        ),
        (Method::DELETE, format!("/groups/{gid}"), Body::None),
        (Method::GET, format!("/groups/{gid}/executors"), Body::None),
    ] {
        let r = admin_call(a, m, &path, body).await;
        expect_error(&r, 404, None, "group not found");
    }

    // A USER sees only his groups, and never their access token.
    let r = w.user(Method::GET, "/groups", Body::None).await;
    let groups = expect_status(&r, 200).as_array().unwrap().clone();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0]["id"], w.g1);
    assert!(groups[0].get("access_token").is_none(), "{}", groups[0]);
    let r = w
        .user(Method::GET, &format!("/groups/{}", w.g1), Body::None)
        .await;
    assert!(expect_status(&r, 200).get("access_token").is_none());
    let r = w
        .user(
            Method::GET,
            &format!("/groups/{}/executors", w.g1),
            Body::None,
        )
        .await;
    assert_eq!(expect_status(&r, 200), &json!([]));

    w.admin.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Jobs
// ---------------------------------------------------------------------------------------------

/// A valid cron expression longer than the 255 characters the column holds.
fn long_cron() -> String {
    let all: Vec<String> = (0..60).map(|n| n.to_string()).collect();
    format!("{} {} 0 * * ?", all.join(","), all.join(","))
}

fn bean_job(group: i64, name: &str) -> Value {
    json!({"group_id": group, "name": name, "handler": "work", "schedule_type": "NONE"})
}

/// `base` with `extra`'s keys set.
fn with(base: &Value, extra: Value) -> Value {
    let mut v = base.clone();
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_crud_list_and_read_only_echo() {
    let db = TestDb::sqlite();
    let w = world(&db).await;
    let a = &w.admin;

    let r = admin_call(
        a,
        Method::POST,
        "/jobs",
        Body::Json(json!({
            "group_id": w.g1, "name": "nightly", "description": "reconcile", "handler": "reconcile",
            "params": "p", "schedule_type": "CRON", "schedule_conf": "0 0 2 * * ?",
            "timezone": "Asia/Shanghai", "route_strategy": "ROUND", "block_strategy": "DISCARD_LATER",
            "timeout_s": 60, "retry_count": 2, "retry_interval_s": 5, "retry_backoff": 2,
            "misfire_strategy": "FIRE_ONCE_NOW", "enabled": true, "alarm_targets": "ops@example.com",
            "child_job_ids": [w.job1]
        })),
    )
    .await;
    let job = expect_status(&r, 201).clone();
    let jid = id_of(&job);
    assert_eq!(job["enabled"], true);
    assert_eq!(job["child_job_id_list"], json!([w.job1]));
    assert_eq!(job["child_job_ids"], w.job1.to_string());
    let next = job["next_fire_at"]
        .as_i64()
        .expect("an enabled CRON job has a next fire");
    // 02:00 in Shanghai is 18:00 UTC.
    assert_eq!(next.rem_euclid(86_400_000), 18 * 3_600_000, "{job}");

    // GET, then PUT of the very same document (read-only fields included) keeps it.
    let got = a.get(&format!("/jobs/{jid}")).await;
    assert_eq!(got["name"], "nightly");
    assert_eq!(
        got["enabled"], true,
        "flags are booleans, as documented: {got}"
    );
    assert_eq!(got["resume_checkpoint"], false);
    let again = a.put(&format!("/jobs/{jid}"), got.clone()).await;
    assert_eq!(
        again["next_fire_at"], got["next_fire_at"],
        "unchanged schedule keeps its plan"
    );
    assert_eq!(again["description"], "reconcile");

    // A partial update changes only what it sends.
    let upd = a
        .put(
            &format!("/jobs/{jid}"),
            json!({"description": "v2", "retry_count": 3}),
        )
        .await;
    assert_eq!(upd["description"], "v2");
    assert_eq!(upd["retry_count"], 3);
    assert_eq!(upd["handler"], "reconcile");
    assert_eq!(upd["timeout_s"], 60);

    // List with filters and paging.
    let page = a.get("/jobs").await;
    assert_eq!(page["total"], 3);
    let page = a.get(&format!("/jobs?group_id={}", w.g1)).await;
    assert_eq!(page["total"], 2);
    let page = a.get("/jobs?handler=reconcile").await;
    assert_eq!(page["total"], 1);
    assert_eq!(page["items"][0]["id"], jid);
    let page = a.get("/jobs?name=nigh").await;
    assert_eq!(page["items"][0]["id"], jid, "{page}");
    let page = a.get("/jobs?enabled=true").await;
    assert_eq!(page["total"], 1);
    let page = a.get("/jobs?limit=1&offset=1").await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["total"], 3);
    assert_eq!(page["limit"], 1);
    assert_eq!(page["offset"], 1);
    // A page size above 1000 is brought down, and the page says which it used.
    let page = a.get("/jobs?limit=5000").await;
    assert_eq!(page["limit"], 1000);
    assert_eq!(page["total"], 3);
    assert_eq!(a.get("/jobs").await["limit"], 50);
    // Paging no list could answer is refused, on every list, naming the field.
    for list in ["/jobs", "/fires", "/runs", "/audit"] {
        for (query, field) in [
            ("limit=0", "limit"),
            ("limit=-5", "limit"),
            ("offset=-1", "offset"),
            ("offset=-9223372036854775808&limit=10", "offset"),
        ] {
            let r = admin_call(a, Method::GET, &format!("{list}?{query}"), Body::None).await;
            expect_error(&r, 400, Some(field), "at least");
        }
        let page = a.get(&format!("{list}?limit=1&offset=0")).await;
        assert_eq!(page["limit"], 1, "{list}: {page}");
    }

    // A USER lists only the jobs of his groups.
    let r = w.user(Method::GET, "/jobs", Body::None).await;
    let page = expect_status(&r, 200);
    assert_eq!(page["total"], 2);
    assert!(page["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|j| j["group_id"] == w.g1));
    let r = w
        .user(Method::GET, &format!("/jobs?group_id={}", w.g2), Body::None)
        .await;
    assert_eq!(expect_status(&r, 200)["total"], 0);

    // Start / stop.
    let stopped = a.post(&format!("/jobs/{jid}/stop"), json!({})).await;
    assert_eq!(stopped["enabled"], false);
    assert!(stopped["next_fire_at"].is_null());
    let started = a.post(&format!("/jobs/{jid}/start"), json!({})).await;
    assert_eq!(started["enabled"], true);
    assert!(started["next_fire_at"].is_i64());

    // Next fires: five, a day apart.
    let next = a.get(&format!("/jobs/{jid}/next")).await;
    let times: Vec<i64> = serde_json::from_value(next["times"].clone()).unwrap();
    assert_eq!(times.len(), 5);
    assert!(
        times.windows(2).all(|p| p[1] - p[0] == 86_400_000),
        "{times:?}"
    );
    let next = a.get(&format!("/jobs/{jid}/next?count=2")).await;
    assert_eq!(next["times"].as_array().unwrap().len(), 2);

    // GLUE history, checkpoints and assignment on an ordinary job.
    assert_eq!(a.get(&format!("/jobs/{jid}/glue")).await, json!([]));
    assert_eq!(a.get(&format!("/jobs/{jid}/checkpoints")).await, json!([]));
    let r = admin_call(
        a,
        Method::DELETE,
        &format!("/jobs/{jid}/checkpoints"),
        Body::None,
    )
    .await;
    assert_eq!(expect_status(&r, 200), &json!({"cleared": 0}));
    let r = admin_call(
        a,
        Method::GET,
        &format!("/jobs/{jid}/assignment"),
        Body::None,
    )
    .await;
    expect_error(&r, 400, None, "only ITEMS jobs");

    // Delete; every job route then answers 404.
    let r = admin_call(a, Method::DELETE, &format!("/jobs/{jid}"), Body::None).await;
    assert_eq!(r.status, 204);
    for (m, suffix) in [
        (Method::GET, ""),
        (Method::PUT, ""),
        (Method::DELETE, ""),
        (Method::POST, "/start"),
        (Method::POST, "/stop"),
        (Method::POST, "/trigger"),
        (Method::GET, "/glue"),
        (Method::GET, "/checkpoints"),
        (Method::DELETE, "/checkpoints"),
        (Method::GET, "/assignment"),
        (Method::GET, "/next"),
    ] {
        let body = if m == Method::PUT {
            Body::Json(json!({"description": "x"}))
        } else {
            Body::None
        };
        let r = admin_call(a, m.clone(), &format!("/jobs/{jid}{suffix}"), body).await;
        expect_error(&r, 404, None, "job not found");
    }

    w.admin.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_rules_are_enforced() {
    let db = TestDb::sqlite();
    let w = world(&db).await;
    let a = &w.admin;
    let base = bean_job(w.g1, "rules");

    // (changes to a valid job, field at fault, piece of the message)
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!({"group_id": null}), "group_id", "is required"),
        (json!({"group_id": 999_999}), "group_id", "does not exist"),
        (json!({"name": "  "}), "name", "1 to 255"),
        (
            json!({"handler": ""}),
            "handler",
            "BEAN job needs a handler",
        ),
        (json!({"handler": "h".repeat(256)}), "handler", "255"),
        (
            json!({"schedule_type": "HOURLY"}),
            "schedule_type",
            "HOURLY",
        ),
        (
            json!({"schedule_type": "CRON", "schedule_conf": "0 0 25 * * ?"}),
            "schedule_conf",
            "Hour values must be between 0 and 23",
        ),
        (
            json!({"schedule_type": "CRON", "schedule_conf": "0 0 0 * *"}),
            "schedule_conf",
            "Unexpected end of expression",
        ),
        (
            json!({"schedule_type": "CRON", "schedule_conf": "0 0 12 * * ?", "timezone": "Mars/Olympus"}),
            "timezone",
            "Mars/Olympus",
        ),
        (
            json!({"schedule_type": "FIX_RATE", "schedule_conf": "fast"}),
            "schedule_conf",
            "whole number of seconds",
        ),
        (
            json!({"schedule_type": "FIX_RATE", "schedule_conf": "0"}),
            "schedule_conf",
            "between 1 and",
        ),
        (
            json!({"schedule_type": "FIX_RATE", "schedule_conf": "1.5"}),
            "schedule_conf",
            "whole number of seconds",
        ),
        (
            json!({"schedule_type": "FIX_DELAY", "schedule_conf": "99999999999"}),
            "schedule_conf",
            "between 1 and",
        ),
        (
            json!({"route_strategy": "NEAREST"}),
            "route_strategy",
            "NEAREST",
        ),
        (
            json!({"block_strategy": "QUEUE"}),
            "block_strategy",
            "SERIAL_EXECUTION",
        ),
        (
            json!({"misfire_strategy": "IGNORE"}),
            "misfire_strategy",
            "IGNORE",
        ),
        (json!({"sharding_mode": "SOME"}), "sharding_mode", "SOME"),
        (json!({"timeout_s": -1}), "timeout_s", "between 0 and"),
        (
            json!({"retry_count": 101}),
            "retry_count",
            "between 0 and 100",
        ),
        (
            json!({"retry_interval_s": -5}),
            "retry_interval_s",
            "between 0 and",
        ),
        (
            json!({"retry_backoff": 0}),
            "retry_backoff",
            "between 1 and 10",
        ),
        (json!({"max_node": -1}), "max_node", "between 0 and"),
        (
            json!({"sharding_mode": "ITEMS", "sharding_total": 0}),
            "sharding_total",
            "between 1 and",
        ),
        (
            json!({"sharding_mode": "ITEMS", "sharding_total": 2, "sharding_strategy": "SINGLE"}),
            "sharding_strategy",
            "SINGLE",
        ),
        (
            json!({"sharding_strategy": "SINGLE"}),
            "sharding_strategy",
            "SINGLE",
        ),
        // Item parameters are parsed strictly and the refusal names the piece at fault.
        (
            json!({"sharding_mode": "ITEMS", "sharding_total": 3, "item_params": "0=a,x=b"}),
            "item_params",
            "x=b",
        ),
        (
            json!({"sharding_mode": "ITEMS", "sharding_total": 3, "item_params": "0=a,5=b"}),
            "item_params",
            "5=b",
        ),
        (
            json!({"sharding_mode": "ITEMS", "sharding_total": 3, "item_params": "0=a,0=b"}),
            "item_params",
            "0=b",
        ),
        (
            json!({"sharding_mode": "ITEMS", "sharding_total": 3, "item_params": "0=a,,1=b"}),
            "item_params",
            "",
        ),
        (
            json!({"item_params": "0=a"}),
            "item_params",
            "sharding_mode ITEMS",
        ),
        (
            json!({"glue_type": "GLUE_GROOVY", "glue_source": "class A {}"}),
            "glue_type",
            "GLUE_GROOVY",
        ),
        (
            json!({"glue_type": "GLUE_RUBY", "glue_source": "puts 1"}),
            "glue_type",
            "expected one of: BEAN, GLUE_SHELL",
        ),
        (
            json!({"glue_type": "GLUE_SHELL"}),
            "glue_source",
            "needs its source",
        ),
        (
            json!({"child_job_ids": [999_999]}),
            "child_job_ids",
            "job 999999 does not exist",
        ),
        (
            json!({"child_job_ids": "1, two"}),
            "child_job_ids",
            "\"two\" is not a job id",
        ),
        (json!({"enabled": true}), "enabled", "NONE job never fires"),
        // Sizes the database could not store are refused here, not by the database.
        (
            json!({"schedule_type": "CRON", "schedule_conf": long_cron()}),
            "schedule_conf",
            "255",
        ),
        (
            json!({"timezone": "Mars/Olympus"}),
            "timezone",
            "Mars/Olympus",
        ),
        (
            json!({"description": "d".repeat(70_000)}),
            "description",
            "65535",
        ),
        (json!({"params": "p".repeat(70_000)}), "params", "65535"),
        (
            json!({"alarm_targets": "a".repeat(70_000)}),
            "alarm_targets",
            "65535",
        ),
        (
            json!({"glue_type": "GLUE_SHELL", "glue_source": "echo", "glue_remark": "r".repeat(256)}),
            "glue_remark",
            "255",
        ),
        (
            json!({"schedule_type": "CRON", "schedule_conf": "0 0 0 1 1 ? 2020", "enabled": true}),
            "schedule_conf",
            "never fires again",
        ),
    ];
    for (extra, field, needle) in cases {
        let body = with(&base, extra.clone());
        let r = admin_call(a, Method::POST, "/jobs", Body::Json(body)).await;
        assert_eq!(r.status, 400, "{extra} -> {r:?}");
        expect_error(&r, 400, Some(field), needle);
        // The same rules apply to updates of an existing job.
        if extra.get("group_id").is_none() {
            let r = admin_call(
                a,
                Method::PUT,
                &format!("/jobs/{}", w.job1),
                Body::Json(extra.clone()),
            )
            .await;
            expect_error(&r, 400, Some(field), needle);
        }
    }
    // Nothing was created or changed by the refused requests.
    assert_eq!(a.get("/jobs").await["total"], 2);
    let j1 = a.get(&format!("/jobs/{}", w.job1)).await;
    assert_eq!(j1["schedule_type"], "NONE");
    assert_eq!(j1["handler"], "work");

    // Unknown fields are refused by name rather than silently dropped.
    let r = admin_call(
        a,
        Method::POST,
        "/jobs",
        Body::Json(with(&base, json!({"handlr": "x"}))),
    )
    .await;
    expect_error(&r, 400, None, "handlr");

    // A job cannot be its own child; existing jobs can be children, in either input form.
    let r = admin_call(
        a,
        Method::PUT,
        &format!("/jobs/{}", w.job1),
        Body::Json(json!({"child_job_ids": [w.job1]})),
    )
    .await;
    expect_error(&r, 400, Some("child_job_ids"), "its own child");
    let child = id_of(&a.post("/jobs", bean_job(w.g1, "child")).await);
    let j = a
        .put(
            &format!("/jobs/{}", w.job1),
            json!({"child_job_ids": format!(" {child} ,")}),
        )
        .await;
    assert_eq!(j["child_job_id_list"], json!([child]));
    // Repeated ids are stored once.
    let many: Vec<i64> = vec![child; 600];
    let j = a
        .put(&format!("/jobs/{}", w.job1), json!({"child_job_ids": many}))
        .await;
    assert_eq!(j["child_job_id_list"], json!([child]));
    let j = a
        .put(&format!("/jobs/{}", w.job1), json!({"child_job_ids": []}))
        .await;
    assert_eq!(j["child_job_id_list"], json!([]));

    // Valid schedules.
    let j = a
        .post(
            "/jobs",
            with(
                &base,
                json!({"schedule_type": "FIX_RATE", "schedule_conf": " 30 ", "enabled": true}),
            ),
        )
        .await;
    assert_eq!(j["schedule_conf"], "30", "stored trimmed");
    let times: Vec<i64> =
        serde_json::from_value(a.get(&format!("/jobs/{}/next", id_of(&j))).await["times"].clone())
            .unwrap();
    assert!(times.windows(2).all(|p| p[1] - p[0] == 30_000), "{times:?}");
    let j = a
        .post(
            "/jobs",
            with(
                &base,
                json!({"schedule_type": "fix_delay", "schedule_conf": "15"}),
            ),
        )
        .await;
    assert_eq!(j["schedule_type"], "FIX_DELAY", "the type is normalised");

    // A NONE job cannot be started; a schedule that never fires again neither.
    let r = admin_call(
        a,
        Method::POST,
        &format!("/jobs/{}/start", w.job1),
        Body::None,
    )
    .await;
    expect_error(&r, 400, None, "NONE job never fires");
    let past = a
        .post(
            "/jobs",
            with(
                &base,
                json!({"schedule_type": "CRON", "schedule_conf": "0 0 0 1 1 ? 2020"}),
            ),
        )
        .await;
    let r = admin_call(
        a,
        Method::POST,
        &format!("/jobs/{}/start", id_of(&past)),
        Body::None,
    )
    .await;
    expect_error(&r, 400, None, "never fires again");
    let next = a.get(&format!("/jobs/{}/next", id_of(&past))).await;
    assert_eq!(next["times"], json!([]));

    // GLUE: script jobs keep a version history, newest first; CRLF is removed from shell.
    let glue = a
        .post(
            "/jobs",
            with(
                &base,
                json!({"handler": "", "glue_type": "GLUE_SHELL", "glue_source": "echo 1\r\n", "glue_remark": "first"}),
            ),
        )
        .await;
    let gid = id_of(&glue);
    assert_eq!(glue["glue_source"], "echo 1\n");
    a.put(
        &format!("/jobs/{gid}"),
        json!({"glue_source": "echo 2", "glue_remark": "second"}),
    )
    .await;
    a.put(
        &format!("/jobs/{gid}"),
        json!({"description": "not a glue change"}),
    )
    .await;
    let versions = a.get(&format!("/jobs/{gid}/glue")).await;
    let versions = versions.as_array().unwrap();
    assert_eq!(versions.len(), 2, "{versions:?}");
    assert_eq!(versions[0]["glue_source"], "echo 2");
    assert_eq!(versions[0]["remark"], "second");
    assert_eq!(versions[1]["remark"], "first");

    // ITEMS: the assignment spreads the items over the (here: no) executors.
    let items = a
        .post(
            "/jobs",
            with(
                &base,
                json!({"sharding_mode": "ITEMS", "sharding_total": 4, "item_params": "0=a, 1=b,3=d",
                       "sharding_strategy": "round_robin"}),
            ),
        )
        .await;
    assert_eq!(
        items["sharding_strategy"], "ROTATE",
        "aliases are stored by their name"
    );
    let asg = a.get(&format!("/jobs/{}/assignment", id_of(&items))).await;
    assert_eq!(asg["strategy"], "ROTATE");
    assert_eq!(asg["sharding_total"], 4);
    assert_eq!(asg["executors"], json!([]));

    // Manual trigger bodies are validated too.
    let trig_path = format!("/jobs/{}/trigger", w.job1);
    let trig = |body: Body| admin_call(a, Method::POST, &trig_path, body);
    expect_error(
        &trig(Body::Json(json!({"addresses": []}))).await,
        400,
        Some("addresses"),
        "at least one",
    );
    expect_error(
        &trig(Body::Json(json!({"addresses": ["10.0.0.1:9999"]}))).await,
        400,
        Some("addresses"),
        "not an http(s) URL",
    );
    expect_error(
        &trig(Body::Json(json!({"addresses": ["http://bad host:9999/"]}))).await,
        400,
        Some("addresses"),
        "not an http(s) URL",
    );
    expect_error(
        &trig(Body::Json(json!({"shard": {"index": 2, "total": 2}}))).await,
        400,
        Some("shard"),
        "must be in 0..2",
    );
    expect_error(
        &trig(Body::Json(
            json!({"shard": {"index": 0, "total": 4_294_967_297_i64}}),
        ))
        .await,
        400,
        Some("shard"),
        "total",
    );
    expect_error(
        &trig(Body::Json(json!({"params": "p".repeat(70_000)}))).await,
        400,
        Some("params"),
        "65535",
    );
    expect_error(
        &trig(Body::Json(
            json!({"addresses": [format!("http://{}/", "a".repeat(300))]}),
        ))
        .await,
        400,
        Some("addresses"),
        "255",
    );
    expect_error(
        &trig(Body::Json(json!({"param": "x"}))).await,
        400,
        None,
        "param",
    );
    expect_error(
        &trig(Body::Raw("{".into())).await,
        400,
        None,
        "invalid JSON",
    );

    w.admin.stop().await;
}

/// Changing N of an ITEMS job that has checkpoints needs `reset_checkpoints: true`, since it changes
/// `MOD(id, N)` routing. The checkpoint is saved through the executor protocol for a real run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharding_total_change_is_guarded_by_checkpoints() {
    for db in TestDb::all().await {
        let admin = TestAdmin::start(&db).await;
        let g = id_of(&admin.post("/groups", json!({"appname": "guard-app"})).await);
        let exec = TestExecutor::start("guard-app", &admin.base, |b| {
            b.handler("items", |_ctx| async move { JobResult::success() })
        })
        .await;
        admin.wait_executors(g, 1).await;
        let job = admin
            .post(
                "/jobs",
                json!({"group_id": g, "name": "items", "handler": "items", "schedule_type": "NONE",
                       "sharding_mode": "ITEMS", "sharding_total": 2}),
            )
            .await;
        let jid = id_of(&job);
        let fire = admin.post(&format!("/jobs/{jid}/trigger"), json!({})).await;
        let run_ids: Vec<i64> = serde_json::from_value(fire["run_ids"].clone()).unwrap();
        assert_eq!(run_ids.len(), 2);
        admin.wait_fire(fire["fire_id"].as_i64().unwrap()).await;

        // Checkpoint for item 1 via the protocol extension.
        admin
            .executor_call(
                "/api/shardline/checkpoint",
                json!({"logId": run_ids[1], "value": "last-id=42"}),
            )
            .await;
        let cps = admin.get(&format!("/jobs/{jid}/checkpoints")).await;
        assert_eq!(cps.as_array().unwrap().len(), 1, "{cps}");
        assert_eq!(cps[0]["item"], 1);
        assert_eq!(cps[0]["value"], "last-id=42");
        assert_eq!(cps[0]["run_id"], run_ids[1]);

        // Other changes are fine and keep the checkpoint.
        admin
            .put(
                &format!("/jobs/{jid}"),
                json!({"description": "still 2 items"}),
            )
            .await;
        admin
            .put(
                &format!("/jobs/{jid}"),
                json!({"sharding_total": 2, "reset_checkpoints": false}),
            )
            .await;
        assert_eq!(
            admin
                .get(&format!("/jobs/{jid}/checkpoints"))
                .await
                .as_array()
                .unwrap()
                .len(),
            1
        );

        // Changing N without the confirmation: 409, nothing changes.
        for body in [
            json!({"sharding_total": 3}),
            json!({"sharding_total": 3, "reset_checkpoints": false}),
        ] {
            let r = admin_call(
                &admin,
                Method::PUT,
                &format!("/jobs/{jid}"),
                Body::Json(body),
            )
            .await;
            expect_error(&r, 409, None, "reset_checkpoints");
            assert!(
                r.json["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("from 2 to 3"),
                "{}",
                r.json
            );
        }
        assert_eq!(
            admin.get(&format!("/jobs/{jid}")).await["sharding_total"],
            2
        );
        assert_eq!(
            admin
                .get(&format!("/jobs/{jid}/checkpoints"))
                .await
                .as_array()
                .unwrap()
                .len(),
            1
        );

        // With the confirmation: changed, checkpoints cleared; later changes need no confirmation.
        let j = admin
            .put(
                &format!("/jobs/{jid}"),
                json!({"sharding_total": 3, "reset_checkpoints": true}),
            )
            .await;
        assert_eq!(j["sharding_total"], 3);
        assert_eq!(
            admin.get(&format!("/jobs/{jid}/checkpoints")).await,
            json!([])
        );
        let j = admin
            .put(&format!("/jobs/{jid}"), json!({"sharding_total": 4}))
            .await;
        assert_eq!(j["sharding_total"], 4);

        // The assignment follows the new N over the one live executor.
        let asg = admin.get(&format!("/jobs/{jid}/assignment")).await;
        assert_eq!(asg["executors"][0]["items"], json!([0, 1, 2, 3]), "{asg}");

        // Clearing checkpoints through the API.
        admin.post(&format!("/jobs/{jid}/trigger"), json!({})).await;
        let runs = admin.get(&format!("/runs?job_id={jid}&limit=1")).await;
        let run_id = runs["items"][0]["id"].as_i64().unwrap();
        admin
            .executor_call(
                "/api/shardline/checkpoint",
                json!({"logId": run_id, "value": "7"}),
            )
            .await;
        let r = admin_call(
            &admin,
            Method::DELETE,
            &format!("/jobs/{jid}/checkpoints"),
            Body::None,
        )
        .await;
        assert_eq!(expect_status(&r, 200), &json!({"cleared": 1}));

        exec.stop().await;
        admin.stop().await;
        db.cleanup().await;
    }
}

// ---------------------------------------------------------------------------------------------
// Fires and runs
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fires_runs_logs_retry_and_kill() {
    for db in TestDb::all().await {
        let admin = TestAdmin::start(&db).await;
        let a = &admin;
        let g = id_of(&a.post("/groups", json!({"appname": "fire-app"})).await);
        let exec = TestExecutor::start("fire-app", &a.base, |b| {
            b.handler("work", |ctx| async move {
                ctx.log(format!("working on {:?}", ctx.params()));
                if ctx.params() == "fail" {
                    JobResult::fail("asked to fail")
                } else {
                    JobResult::success_with("done")
                }
            })
            .handler("hold", |ctx| async move {
                ctx.log("holding");
                tokio::select! {
                    _ = ctx.cancelled() => JobResult::fail("cancelled"),
                    _ = tokio::time::sleep(std::time::Duration::from_secs(60)) => JobResult::success(),
                }
            })
        })
        .await;
        a.wait_executors(g, 1).await;
        let work = id_of(
            &a.post(
                "/jobs",
                json!({"group_id": g, "name": "work", "handler": "work", "schedule_type": "NONE"}),
            )
            .await,
        );

        // A successful fire, read back through every view.
        let t = a
            .post(&format!("/jobs/{work}/trigger"), json!({"params": "ok"}))
            .await;
        let fire_id = t["fire_id"].as_i64().unwrap();
        let run_id = t["run_ids"][0].as_i64().unwrap();
        let fire = a.wait_fire(fire_id).await;
        assert_eq!(fire["state"], "succeeded");
        assert_eq!(fire["trigger_type"], "API");
        assert_eq!(fire["coverage"]["summary"], "1/1 run succeeded", "{fire}");
        assert_eq!(fire["runs"][0]["id"], run_id);
        let page = a.get(&format!("/fires?job_id={work}")).await;
        assert_eq!(page["total"], 1);
        assert_eq!(page["items"][0]["id"], fire_id);
        assert_eq!(a.get("/fires?state=failed").await["total"], 0);
        assert_eq!(a.get("/fires?state=succeeded").await["total"], 1);
        let page = a.get(&format!("/fires?fire_id={fire_id}")).await;
        assert_eq!(page["total"], 1);
        assert_eq!(page["items"][0]["id"], fire_id);
        let other = fire_id + 1000;
        assert_eq!(a.get(&format!("/fires?fire_id={other}")).await["total"], 0);
        let r = admin_call(a, Method::GET, "/fires?state=running-ish", Body::None).await;
        expect_error(&r, 400, Some("state"), "running-ish");
        let run = a.get(&format!("/runs/{run_id}")).await;
        assert_eq!(run["state"], "succeeded");
        assert_eq!(run["handle_msg"], "done");
        assert_eq!(run["executor_address"], exec.address);
        let runs = a.get(&format!("/runs?fire_id={fire_id}")).await;
        assert_eq!(runs["total"], 1);
        assert_eq!(a.get("/runs?state=succeeded").await["total"], 1);
        assert_eq!(a.get("/runs?state=running").await["total"], 0);
        let from = run["created_at"].as_i64().unwrap();
        assert_eq!(
            a.get(&format!("/runs?from={from}&to={}", from + 1)).await["total"],
            1
        );
        assert_eq!(a.get(&format!("/runs?to={from}")).await["total"], 0);
        let log = a.get(&format!("/runs/{run_id}/log")).await;
        assert!(
            log["content"]
                .as_str()
                .unwrap()
                .contains("working on \"ok\""),
            "{log}"
        );

        // Nothing to retry or kill on a succeeded fire.
        let r = admin_call(
            a,
            Method::POST,
            &format!("/fires/{fire_id}/retry"),
            Body::None,
        )
        .await;
        expect_error(&r, 409, None, "no failed item");
        let r = admin_call(a, Method::POST, &format!("/runs/{run_id}/kill"), Body::None).await;
        expect_error(&r, 409, None, "already finished");
        let r = admin_call(a, Method::GET, "/runs?state=exploded", Body::None).await;
        expect_error(&r, 400, Some("state"), "exploded");

        // A failed fire: retry re-runs only the failed item.
        let t = a
            .post(&format!("/jobs/{work}/trigger"), json!({"params": "fail"}))
            .await;
        let failed_id = t["fire_id"].as_i64().unwrap();
        let fire = a.wait_fire(failed_id).await;
        assert_eq!(fire["state"], "failed");
        assert_eq!(fire["coverage"]["failed"], 1);
        let r = admin_call(
            a,
            Method::POST,
            &format!("/fires/{failed_id}/retry"),
            Body::None,
        )
        .await;
        let retry = expect_status(&r, 200);
        assert_eq!(retry["retried_items"], json!([0]));
        let new_run = retry["run_ids"][0].as_i64().unwrap();
        assert_ne!(new_run, t["run_ids"][0].as_i64().unwrap());
        let fire = a.wait_fire(failed_id).await;
        assert_eq!(fire["coverage"]["items"][0]["attempts"], 2, "{fire}");

        // Kill a running run.
        let hold = id_of(
            &a.post(
                "/jobs",
                json!({"group_id": g, "name": "hold", "handler": "hold", "schedule_type": "NONE"}),
            )
            .await,
        );
        let t = a.post(&format!("/jobs/{hold}/trigger"), json!({})).await;
        let hold_run = t["run_ids"][0].as_i64().unwrap();
        wait_run_state(a, hold_run, "running").await;
        let r = admin_call(
            a,
            Method::POST,
            &format!("/runs/{hold_run}/kill"),
            Body::None,
        )
        .await;
        let kill = expect_status(&r, 200);
        assert_eq!(kill["state"], "killed", "{kill}");
        let fire = a.wait_fire(t["fire_id"].as_i64().unwrap()).await;
        assert_eq!(fire["state"], "failed");
        assert_eq!(
            a.get("/fires?limit=2").await["items"]
                .as_array()
                .unwrap()
                .len(),
            2
        );

        // Unknown ids.
        for (m, path, what) in [
            (Method::GET, "/fires/999999", "fire"),
            (Method::POST, "/fires/999999/retry", "fire"),
            (Method::GET, "/runs/999999", "run"),
            (Method::GET, "/runs/999999/log", "run"),
            (Method::POST, "/runs/999999/kill", "run"),
        ] {
            let r = admin_call(a, m, path, Body::None).await;
            expect_error(&r, 404, None, &format!("{what} not found"));
        }

        exec.stop().await;
        admin.stop().await;
        db.cleanup().await;
    }
}

// ---------------------------------------------------------------------------------------------
// Users and tokens
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_crud_and_validation() {
    let db = TestDb::sqlite();
    let w = world(&db).await;
    let a = &w.admin;

    let users = a.get("/users").await;
    let users = users.as_array().unwrap();
    assert_eq!(users.len(), 2);
    for u in users {
        assert!(u.get("password_hash").is_none(), "{u}");
    }
    let me = a.get("/users/me").await;
    assert_eq!(me["role"], "ADMIN");
    let admin_id = id_of(&me);

    let cases: Vec<(Value, &str, &str)> = vec![
        (json!({"password": "long-enough-1"}), "username", "1 to 64"),
        (
            json!({"username": "has space", "password": "long-enough-1"}),
            "username",
            "1 to 64",
        ),
        (
            json!({"username": "u".repeat(65), "password": "long-enough-1"}),
            "username",
            "1 to 64",
        ),
        (json!({"username": "newbie"}), "password", "is required"),
        (
            json!({"username": "newbie", "password": "short"}),
            "password",
            "at least 8",
        ),
        (
            json!({"username": "newbie", "password": "long-enough-1", "role": "ROOT"}),
            "role",
            "ROOT",
        ),
        (
            json!({"username": "newbie", "password": "long-enough-1", "group_ids": [999_999]}),
            "group_ids",
            "group 999999 does not exist",
        ),
    ];
    for (body, field, needle) in cases {
        let r = admin_call(a, Method::POST, "/users", Body::Json(body)).await;
        expect_error(&r, 400, Some(field), needle);
    }
    let r = admin_call(
        a,
        Method::POST,
        "/users",
        Body::Json(json!({"username": "newbie", "password": "long-enough-1", "admin": true})),
    )
    .await;
    expect_error(&r, 400, None, "admin");
    let r = admin_call(
        a,
        Method::POST,
        "/users",
        Body::Json(json!({"username": "operator", "password": "long-enough-1"})),
    )
    .await;
    expect_error(&r, 409, None, "already exists");

    let u = a
        .post(
            "/users",
            json!({"username": "newbie", "password": "long-enough-1", "group_ids": [w.g2]}),
        )
        .await;
    let uid = id_of(&u);
    assert_eq!(u["role"], "USER", "USER is the default role");
    assert_eq!(u["group_ids"], w.g2.to_string());
    assert!(u.get("password_hash").is_none());
    assert_eq!(a.get(&format!("/users/{uid}")).await["username"], "newbie");

    // Updates: role and groups; username and password are not changed here.
    let u = a
        .put(
            &format!("/users/{uid}"),
            json!({"role": "ADMIN", "group_ids": [w.g1, w.g2]}),
        )
        .await;
    assert_eq!(u["role"], "ADMIN");
    assert_eq!(u["group_ids"], format!("{},{}", w.g1, w.g2));
    let r = admin_call(
        a,
        Method::PUT,
        &format!("/users/{uid}"),
        Body::Json(json!({"username": "other"})),
    )
    .await;
    expect_error(&r, 400, Some("username"), "cannot be changed");
    let r = admin_call(
        a,
        Method::PUT,
        &format!("/users/{uid}"),
        Body::Json(json!({"password": "long-enough-2"})),
    )
    .await;
    expect_error(&r, 400, Some("password"), "/password");
    let r = admin_call(
        a,
        Method::PUT,
        &format!("/users/{uid}"),
        Body::Json(json!({"role": "GOD"})),
    )
    .await;
    expect_error(&r, 400, Some("role"), "GOD");
    let r = admin_call(
        a,
        Method::PUT,
        &format!("/users/{admin_id}"),
        Body::Json(json!({"role": "USER"})),
    )
    .await;
    expect_error(&r, 400, Some("role"), "own ADMIN role");

    // Passwords.
    let r = admin_call(
        a,
        Method::POST,
        &format!("/users/{uid}/password"),
        Body::Json(json!({"password": "short"})),
    )
    .await;
    expect_error(&r, 400, Some("password"), "at least 8");
    let r = admin_call(
        a,
        Method::POST,
        &format!("/users/{uid}/password"),
        Body::Json(json!({})),
    )
    .await;
    expect_error(&r, 400, None, "password");
    let r = admin_call(
        a,
        Method::POST,
        &format!("/users/{uid}/password"),
        Body::Json(json!({"password": "brand-new-pass"})),
    )
    .await;
    assert_eq!(r.status, 204, "{r:?}");
    // A user may change his own password, not someone else's.
    let r = w
        .user(
            Method::POST,
            &format!("/users/{}/password", w.user_id),
            Body::Json(json!({"password": "operator-pass-2"})),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");

    // Delete.
    let r = admin_call(a, Method::DELETE, &format!("/users/{admin_id}"), Body::None).await;
    expect_error(&r, 400, None, "yourself");
    let r = admin_call(a, Method::DELETE, &format!("/users/{uid}"), Body::None).await;
    assert_eq!(r.status, 204);
    for (m, path, body) in [
        (Method::GET, format!("/users/{uid}"), Body::None),
        (
            Method::PUT,
            format!("/users/{uid}"),
            Body::Json(json!({"role": "USER"})),
        ),
        (Method::DELETE, format!("/users/{uid}"), Body::None),
        (
            Method::POST,
            format!("/users/{uid}/password"),
            Body::Json(json!({"password": "long-enough-3"})),
        ),
    ] {
        let r = admin_call(a, m, &path, body).await;
        expect_error(&r, 404, None, "user not found");
    }

    w.admin.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_lifecycle() {
    let db = TestDb::sqlite();
    let w = world(&db).await;
    let a = &w.admin;

    // Create: the secret is in this answer only.
    let r = w
        .user(Method::POST, "/tokens", Body::Json(json!({"name": "ci"})))
        .await;
    let created = expect_status(&r, 201).clone();
    let secret = created["secret"].as_str().unwrap().to_string();
    let tid = id_of(&created);
    assert_eq!(created["user_id"], w.user_id);
    assert!(secret.len() >= 32, "a long random secret: {secret}");
    assert!(secret.starts_with(created["prefix"].as_str().unwrap()));
    assert!(created.get("token_hash").is_none());
    assert!(created["last_used_at"].is_null());

    // Use it.
    let r = send(a, Method::GET, "/users/me", Some(&secret), Body::None).await;
    assert_eq!(expect_status(&r, 200)["username"], "operator");

    // List: no secret, no hash; a user sees only his own tokens, an admin sees all.
    let r = w.user(Method::GET, "/tokens", Body::None).await;
    let mine = expect_status(&r, 200).as_array().unwrap().clone();
    assert_eq!(mine.len(), 2);
    for t in &mine {
        assert!(
            t.get("secret").is_none() && t.get("token_hash").is_none(),
            "{t}"
        );
        assert!(!t.to_string().contains(&secret));
    }
    let used = mine.iter().find(|t| t["id"] == tid).unwrap();
    assert!(used["last_used_at"].is_i64(), "use is recorded: {used}");
    let admin_tok = a.post("/tokens", json!({"name": "admin's own"})).await;
    assert_eq!(a.get("/tokens").await.as_array().unwrap().len(), 3);
    assert_eq!(
        w.user(Method::GET, "/tokens", Body::None)
            .await
            .json
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // Validation.
    for body in [
        json!({"name": ""}),
        json!({"name": "   "}),
        json!({"name": "n".repeat(129)}),
    ] {
        let r = w.user(Method::POST, "/tokens", Body::Json(body)).await;
        expect_error(&r, 400, Some("name"), "1 to 128");
    }
    let r = w.user(Method::POST, "/tokens", Body::Json(json!({}))).await;
    expect_error(&r, 400, None, "name");
    let r = admin_call(
        a,
        Method::POST,
        "/tokens",
        Body::Json(json!({"name": "x", "user_id": 999_999})),
    )
    .await;
    expect_error(&r, 404, None, "user not found");
    // A user cannot mint tokens for someone else, nor revoke theirs.
    let r = w
        .user(
            Method::POST,
            "/tokens",
            Body::Json(json!({"name": "x", "user_id": id_of(&a.get("/users/me").await)})),
        )
        .await;
    expect_error(&r, 403, None, "ADMIN role");
    let r = w
        .user(
            Method::DELETE,
            &format!("/tokens/{}", id_of(&admin_tok)),
            Body::None,
        )
        .await;
    expect_error(&r, 403, None, "ADMIN role");

    // Revoke; the token is refused afterwards, and revoking again is 404.
    let r = w
        .user(Method::DELETE, &format!("/tokens/{tid}"), Body::None)
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    let r = send(a, Method::GET, "/users/me", Some(&secret), Body::None).await;
    expect_error(&r, 401, None, "invalid or revoked");
    let r = w
        .user(Method::DELETE, &format!("/tokens/{tid}"), Body::None)
        .await;
    expect_error(&r, 404, None, "token not found");
    let listed = a.get("/tokens").await;
    let revoked = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == tid)
        .unwrap()
        .clone();
    assert!(revoked["revoked_at"].is_i64(), "{revoked}");
    let r = admin_call(a, Method::DELETE, "/tokens/999999", Body::None).await;
    expect_error(&r, 404, None, "token not found");

    // An admin can revoke a user's token; deleting a user removes his tokens.
    let r = admin_call(
        a,
        Method::DELETE,
        &format!("/tokens/{}", w.user_token_id),
        Body::None,
    )
    .await;
    assert_eq!(r.status, 204);
    let r = w.user(Method::GET, "/users/me", Body::None).await;
    expect_error(&r, 401, None, "invalid or revoked");

    w.admin.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Authentication and permissions
// ---------------------------------------------------------------------------------------------

/// Every route of `/api/v1` with `{id}` set to `id`.
fn concrete(path: &str, id: &str) -> String {
    path.replace("{id}", id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_refuses_missing_and_bad_tokens() {
    let db = TestDb::sqlite();
    let w = world(&db).await;
    let a = &w.admin;
    let routes = served_routes();
    assert!(routes.len() > 30, "{routes:?}");
    for (path, method) in &routes {
        if path == "/openapi.json" {
            continue;
        }
        let m: Method = method.parse().unwrap();
        let p = concrete(path, &w.job1.to_string());
        let body = || match m {
            Method::POST | Method::PUT => Body::Json(json!({})),
            _ => Body::None,
        };
        let r = send(a, m.clone(), &p, None, body()).await;
        expect_error(&r, 401, None, "missing bearer token");
        assert_eq!(r.www_auth.as_deref(), Some("Bearer"), "{method} {p}");
        let r = send(a, m.clone(), &p, Some("not-a-token"), body()).await;
        expect_error(&r, 401, None, "invalid or revoked");
        let r = a
            .http
            .request(m.clone(), a.url(&format!("/api/v1{p}")))
            .header("authorization", format!("Basic {API_TOKEN}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 401, "{method} {p} with Basic");
        let r = a
            .http
            .request(m.clone(), a.url(&format!("/api/v1{p}")))
            .header("authorization", "Bearer   ")
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status().as_u16(),
            401,
            "{method} {p} with an empty bearer"
        );
    }
    // The OpenAPI document itself is public.
    let r = send(a, Method::GET, "/openapi.json", None, Body::None).await;
    assert_eq!(r.status, 200);
    w.admin.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_role_and_group_permissions() {
    let db = TestDb::sqlite();
    let w = world(&db).await;
    let a = &w.admin;
    let admin_id = id_of(&a.get("/users/me").await);
    let admin_tok = id_of(&a.post("/tokens", json!({"name": "admin's"})).await);

    // A fire and a run in the group the user lacks (no executor: the run fails at once).
    let t = a
        .post(&format!("/jobs/{}/trigger", w.job2), json!({}))
        .await;
    let fire2 = t["fire_id"].as_i64().unwrap();
    let run2 = t["run_ids"][0].as_i64().unwrap();
    a.wait_fire(fire2).await;

    // ADMIN-only endpoints: 403 for a USER.
    let admin_only: Vec<(Method, String, Body)> = vec![
        (
            Method::POST,
            "/groups".into(),
            Body::Json(json!({"appname": "mine"})),
        ),
        (
            Method::PUT,
            format!("/groups/{}", w.g1),
            Body::Json(json!({"title": "mine"})),
        ),
        (Method::DELETE, format!("/groups/{}", w.g1), Body::None),
        (Method::GET, "/users".into(), Body::None),
        (
            Method::POST,
            "/users".into(),
            Body::Json(json!({"username": "x", "password": "long-enough-1"})),
        ),
        (Method::GET, format!("/users/{admin_id}"), Body::None),
        (
            Method::PUT,
            format!("/users/{}", w.user_id),
            Body::Json(json!({"role": "ADMIN"})),
        ),
        (Method::DELETE, format!("/users/{admin_id}"), Body::None),
        (
            Method::POST,
            format!("/users/{admin_id}/password"),
            Body::Json(json!({"password": "hijacked-pass"})),
        ),
        (
            Method::POST,
            "/tokens".into(),
            Body::Json(json!({"name": "x", "user_id": admin_id})),
        ),
        (Method::DELETE, format!("/tokens/{admin_tok}"), Body::None),
    ];
    for (m, path, body) in admin_only {
        let r = w.user(m.clone(), &path, body).await;
        expect_error(&r, 403, None, "ADMIN role");
    }
    // The user did not promote himself.
    assert_eq!(
        a.get(&format!("/users/{}", w.user_id)).await["role"],
        "USER"
    );

    // Everything about a group he lacks: 403 naming the group.
    let (g2, j2) = (w.g2, w.job2);
    let lacking: Vec<(Method, String, Body)> = vec![
        (Method::GET, format!("/groups/{g2}"), Body::None),
        (Method::GET, format!("/groups/{g2}/executors"), Body::None),
        (
            Method::POST,
            "/jobs".into(),
            Body::Json(bean_job(g2, "sneaky")),
        ),
        (
            Method::PUT,
            format!("/jobs/{}", w.job1),
            Body::Json(json!({"group_id": g2})),
        ),
        (
            Method::PUT,
            format!("/jobs/{}", w.job1),
            Body::Json(json!({"child_job_ids": [j2]})),
        ),
        (Method::GET, format!("/jobs/{j2}"), Body::None),
        (
            Method::PUT,
            format!("/jobs/{j2}"),
            Body::Json(json!({"description": "x"})),
        ),
        (Method::DELETE, format!("/jobs/{j2}"), Body::None),
        (Method::POST, format!("/jobs/{j2}/start"), Body::None),
        (Method::POST, format!("/jobs/{j2}/stop"), Body::None),
        (Method::POST, format!("/jobs/{j2}/trigger"), Body::None),
        (Method::GET, format!("/jobs/{j2}/glue"), Body::None),
        (Method::GET, format!("/jobs/{j2}/checkpoints"), Body::None),
        (
            Method::DELETE,
            format!("/jobs/{j2}/checkpoints"),
            Body::None,
        ),
        (Method::GET, format!("/jobs/{j2}/assignment"), Body::None),
        (Method::GET, format!("/jobs/{j2}/next"), Body::None),
        (Method::GET, format!("/fires/{fire2}"), Body::None),
        (Method::POST, format!("/fires/{fire2}/retry"), Body::None),
        (Method::GET, format!("/runs/{run2}"), Body::None),
        (Method::GET, format!("/runs/{run2}/log"), Body::None),
        (Method::POST, format!("/runs/{run2}/kill"), Body::None),
    ];
    for (m, path, body) in lacking {
        let r = w.user(m.clone(), &path, body).await;
        expect_error(&r, 403, None, &format!("no permission on group {g2}"));
    }
    assert_eq!(a.get(&format!("/jobs/{}", w.job1)).await["group_id"], w.g1);
    assert_eq!(a.get("/jobs").await["total"], 2, "nothing created");
    assert_eq!(
        a.get(&format!("/jobs/{}", w.job1)).await["child_job_id_list"],
        json!([])
    );

    // Lists are filtered to his groups.
    let r = w.user(Method::GET, "/fires", Body::None).await;
    assert_eq!(expect_status(&r, 200)["total"], 0);
    let r = w
        .user(Method::GET, &format!("/fires?job_id={j2}"), Body::None)
        .await;
    assert_eq!(expect_status(&r, 200)["total"], 0);
    let r = w
        .user(Method::GET, &format!("/runs?fire_id={fire2}"), Body::None)
        .await;
    assert_eq!(expect_status(&r, 200)["total"], 0);
    assert_eq!(a.get(&format!("/runs?fire_id={fire2}")).await["total"], 1);

    // What he may do: his groups' jobs, himself, the cron helper, the node list.
    let r = w
        .user(Method::POST, "/jobs", Body::Json(bean_job(w.g1, "allowed")))
        .await;
    let mine = id_of(expect_status(&r, 201));
    let r = w
        .user(Method::POST, &format!("/jobs/{mine}/trigger"), Body::None)
        .await;
    assert!(expect_status(&r, 200)["fire_id"].is_i64());
    let r = w.user(Method::GET, "/users/me", Body::None).await;
    assert_eq!(expect_status(&r, 200)["id"], w.user_id);
    let r = w
        .user(Method::GET, &format!("/users/{}", w.user_id), Body::None)
        .await;
    assert_eq!(expect_status(&r, 200)["username"], "operator");
    let r = w
        .user(
            Method::GET,
            "/cron/next?expr=0%200%201%20*%20*%20%3F",
            Body::None,
        )
        .await;
    assert_eq!(expect_status(&r, 200)["times"].as_array().unwrap().len(), 5);
    let r = w.user(Method::GET, "/nodes", Body::None).await;
    expect_status(&r, 200);
    let r = w
        .user(Method::DELETE, &format!("/jobs/{mine}"), Body::None)
        .await;
    assert_eq!(r.status, 204);

    w.admin.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Cron preview, nodes, OpenAPI
// ---------------------------------------------------------------------------------------------

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_preview() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let a = &admin;
    let cron = |q: String| async move {
        admin_call(a, Method::GET, &format!("/cron/next?{q}"), Body::None).await
    };

    // Valid: exact times after a fixed instant, in the admin's zone (UTC) or the one asked for.
    let r = cron(format!("expr={}&after=0", enc("0 0 12 * * ?"))).await;
    let v = expect_status(&r, 200);
    let day = 86_400_000_i64;
    let noon = 12 * 3_600_000_i64;
    assert_eq!(
        v["times"],
        json!([
            noon,
            noon + day,
            noon + 2 * day,
            noon + 3 * day,
            noon + 4 * day
        ])
    );
    assert_eq!(v["timezone"], "UTC");
    assert_eq!(v["description"], "at 12:00:00, every day");
    // In the console's other language, description and warnings alike.
    let r = cron(format!("expr={}&after=0&lang=zh-CN", enc("0 30 2 * * ?"))).await;
    let v = expect_status(&r, 200);
    assert_eq!(v["description"], "每天 02:30:00");
    let r = cron(format!(
        "expr={}&lang=zh&tz=America/New_York",
        enc("0 30 2 * * ?")
    ))
    .await;
    let v = expect_status(&r, 200);
    assert!(
        v["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("会被跳过")),
        "{v}"
    );
    let r = cron(format!(
        "expr={}&after=0&tz=Asia/Shanghai&count=2",
        enc(" 0 0 12 * * ? ")
    ))
    .await;
    let v = expect_status(&r, 200);
    assert_eq!(v["times"], json!([4 * 3_600_000, 4 * 3_600_000 + day]));
    assert_eq!(v["timezone"], "Asia/Shanghai");
    let r = cron(format!("expr={}&count=100", enc("*/1 * * * * ?"))).await;
    assert_eq!(
        expect_status(&r, 200)["times"].as_array().unwrap().len(),
        100
    );
    let r = cron(format!("expr={}", enc("0 0 0 ? * MON#2"))).await;
    assert_eq!(expect_status(&r, 200)["times"].as_array().unwrap().len(), 5);

    // Invalid: 400 on `expr` with Quartz's words.
    for (expr, needle) in [
        ("0 0 25 * * ?", "Hour values must be between 0 and 23"),
        ("0 FOO * * * ?", "Illegal characters for this position: 'FOO'"),
        ("0 0 0 * *", "Unexpected end of expression."),
        ("0 0 0 * * MON", "Support for specifying both a day-of-week AND a day-of-month parameter is not implemented."),
        ("", "Unexpected end of expression."),
    ] {
        let r = cron(format!("expr={}", enc(expr))).await;
        expect_error(&r, 400, Some("expr"), needle);
    }

    // Never fires again: an empty list (and a warning), not an error.
    let r = cron(format!("expr={}", enc("0 0 0 1 1 ? 2020"))).await;
    let v = expect_status(&r, 200);
    assert_eq!(v["times"], json!([]));
    assert!(!v["warnings"].as_array().unwrap().is_empty(), "{v}");

    // Other parameters.
    let ok = enc("0 0 12 * * ?");
    expect_error(
        &cron(format!("expr={ok}&count=0")).await,
        400,
        Some("count"),
        "between 1 and 100",
    );
    expect_error(
        &cron(format!("expr={ok}&count=101")).await,
        400,
        Some("count"),
        "between 1 and 100",
    );
    expect_error(
        &cron(format!("expr={ok}&tz=Mars/Olympus")).await,
        400,
        Some("tz"),
        "Mars/Olympus",
    );
    expect_error(
        &cron(format!("expr={ok}&count=many")).await,
        400,
        None,
        "invalid query string",
    );
    expect_error(
        &cron(format!("expr={ok}&after=soon")).await,
        400,
        None,
        "invalid query string",
    );
    expect_error(
        &cron(format!("expr={ok}&lang=fr")).await,
        400,
        Some("lang"),
        "unknown language 'fr': use en or zh",
    );
    expect_error(&cron("tz=UTC".into()).await, 400, None, "expr");
    // Far ends of time: an answer, never a crash.
    for after in [i64::MAX, i64::MIN, 253_402_300_799_999, -62_135_596_800_000] {
        let r = cron(format!("expr={ok}&after={after}")).await;
        assert!(r.status == 200 || r.status == 400, "after={after}: {r:?}");
        if r.status == 200 {
            assert!(r.json["times"].is_array());
        } else {
            expect_error(&r, 400, Some("after"), "");
        }
    }

    admin.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_lists_this_admin() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let mut nodes = Value::Null;
    for _ in 0..100 {
        nodes = admin.get("/nodes").await;
        if !nodes.as_array().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let nodes = nodes.as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert!(nodes[0]["id"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(nodes[0]["heartbeat_at"].is_i64());
    admin.stop().await;
}

/// `(path under /api/v1, METHOD)` of every route the v1 router serves, read from its source: the
/// `.route("path", get(..).post(..))` calls of `src/api/v1/*.rs`.
fn served_routes() -> BTreeSet<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/api/v1");
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find(".route(") {
            let call = &rest[at + ".route(".len()..];
            let mut depth = 1;
            let end = call
                .char_indices()
                .find_map(|(i, c)| {
                    match c {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    (depth == 0).then_some(i)
                })
                .expect("balanced .route( call");
            let args = &call[..end];
            let q1 = args.find('"').unwrap() + 1;
            let q2 = q1 + args[q1..].find('"').unwrap();
            let path = &args[q1..q2];
            let handlers = &args[q2 + 1..];
            for m in ["get", "post", "put", "delete", "patch"] {
                let needle = format!("{m}(");
                let found = handlers.match_indices(&needle).any(|(i, _)| {
                    i == 0
                        || !handlers.as_bytes()[i - 1].is_ascii_alphanumeric()
                            && handlers.as_bytes()[i - 1] != b'_'
                });
                if found {
                    out.insert((path.to_string(), m.to_ascii_uppercase()));
                }
            }
            rest = &call[end..];
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document_lists_every_route() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let resp = admin
        .http
        .get(admin.url("/api/v1/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let doc: Value = serde_json::from_str(&resp.text().await.unwrap()).expect("valid JSON");
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    assert_eq!(doc["servers"][0]["url"], "/api/v1");
    assert!(doc["info"]["title"].is_string() && doc["info"]["version"].is_string());

    // Documented operations, and every $ref resolves.
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (k, op) in item.as_object().unwrap() {
            if k == "parameters" {
                continue;
            }
            assert!(
                ["get", "post", "put", "delete", "patch"].contains(&k.as_str()),
                "{path}: {k}"
            );
            assert!(op["summary"].is_string(), "{path} {k} has a summary");
            assert!(op["responses"].as_object().is_some_and(|r| !r.is_empty()));
            documented.insert((path.clone(), k.to_ascii_uppercase()));
        }
        if path.contains("{id}") {
            let params = item["parameters"]
                .as_array()
                .unwrap_or_else(|| panic!("{path} declares its id parameter"));
            assert!(params
                .iter()
                .any(|p| p["name"] == "id" && p["in"] == "path"));
        }
    }
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(!refs.is_empty());
    for r in refs {
        let pointer = r
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("local ref {r}"));
        assert!(doc.pointer(pointer).is_some(), "unresolved $ref {r}");
    }

    // Exactly the routes the router serves.
    let served = served_routes();
    let missing: Vec<_> = served.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&served).collect();
    assert!(missing.is_empty(), "served but not documented: {missing:?}");
    assert!(extra.is_empty(), "documented but not served: {extra:?}");

    // And the live server answers each documented operation (our JSON, not the router's 404/405).
    for (path, method) in &documented {
        let m: Method = method.parse().unwrap();
        let p = concrete(path, "987654321");
        let body = match m {
            Method::POST | Method::PUT => Body::Json(json!({})),
            _ => Body::None,
        };
        let r = admin_call(&admin, m, &p, body).await;
        assert_ne!(r.status, 405, "{method} {p}");
        assert!(r.status < 500, "{method} {p}: {r:?}");
        if r.status >= 400 {
            assert_eq!(r.json["error"]["status"], r.status, "{method} {p}: {r:?}");
        }
    }
    admin.stop().await;
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == "$ref" {
                    out.push(x.as_str().unwrap().to_string());
                } else {
                    collect_refs(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile input
// ---------------------------------------------------------------------------------------------

/// Checks an answer to hostile input: never a 5xx nor a broken connection, and errors in our shape.
#[track_caller]
fn assert_client_error_or_ok(r: &Resp, what: &str) {
    assert!(
        r.status != 0 && r.status < 500,
        "{what} -> {} {}",
        r.status,
        r.json
    );
    if r.status >= 400 {
        assert_eq!(r.json["error"]["status"], r.status, "{what} -> {}", r.json);
        assert!(
            r.json["error"]["message"].is_string(),
            "{what} -> {}",
            r.json
        );
    }
}

/// The routes that read a JSON body.
const BODY_ROUTES: [&str; 9] = [
    "/tokens",
    "/groups",
    "/groups/{id}",
    "/jobs",
    "/jobs/{id}",
    "/jobs/{id}/trigger",
    "/users",
    "/users/{id}",
    "/users/{id}/password",
];

/// Values of the wrong type, size or range for any field.
fn wrong_values() -> Vec<Value> {
    vec![
        json!(null),
        json!(true),
        json!(-1),
        json!(0),
        json!(i64::MIN),
        json!(i64::MAX),
        json!(u64::MAX),
        json!(1.5),
        json!(-1e300),
        json!(""),
        json!("x"),
        json!(" \u{0}\u{202e}☃ "),
        json!([]),
        json!([1, "a"]),
        json!({}),
        json!({"a": {"b": []}}),
        json!("9".repeat(40)),
        json!("x".repeat(300)),
        json!("é".repeat(70_000)),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_input_never_yields_500() {
    for db in TestDb::all().await {
        let w = world(&db).await;
        let a = &w.admin;
        let kind = db.kind();
        // A fire and a run to aim at.
        let t = a
            .post(&format!("/jobs/{}/trigger", w.job1), json!({}))
            .await;
        a.wait_fire(t["fire_id"].as_i64().unwrap()).await;

        let routes = served_routes();
        let raw_bodies: Vec<String> = vec![
            String::new(),
            " ".into(),
            "{".into(),
            "}".into(),
            "null".into(),
            "[]".into(),
            "\"text\"".into(),
            "12345678901234567890123".into(),
            "{\"unknown_field\": 1}".into(),
            "{\"id\": 1e400}".into(),
            "{\"name\": \"\\ud800\"}".into(),
            "{\"a\":1,\"a\":2}".into(),
            "\u{feff}{}".into(),
            "[".repeat(100_000),
            format!("{{\"k\": \"{}\"}}", "v".repeat(1_000_000)),
        ];
        let ids = [
            "abc",
            "99999999999999999999",
            "-1",
            "0",
            "9223372036854775807",
            "-9223372036854775808",
            "1.5",
            "%20",
            "1e3",
            "%F0%9F%92%A3",
        ];
        let queries = [
            "limit=abc",
            "limit=99999999999999999999",
            "limit=-5&offset=-9223372036854775808",
            "offset=9223372036854775807",
            "job_id=x&group_id=1.5",
            "fire_id=-1&state=%00",
            "state=running&from=9223372036854775807&to=-9223372036854775808",
            "enabled=maybe",
            "name=%25%27%22%3B--&handler=%5C",
            "count=0",
            "count=99999999999999999999",
            "from_line=-2147483648",
            "from_line=2147483648",
            "expr=%00&tz=%00",
            "expr=*&after=1e99",
        ];

        for (path, method) in &routes {
            let m: Method = method.parse().unwrap();
            // Odd ids with no body.
            if path.contains("{id}") {
                for id in ids {
                    let p = concrete(path, id);
                    let r = admin_call(a, m.clone(), &p, Body::None).await;
                    assert_client_error_or_ok(&r, &format!("[{kind}] {method} {p}"));
                }
            }
            let p = concrete(path, "1");
            if m == Method::GET {
                for q in queries {
                    let full = format!("{p}?{q}");
                    let r = admin_call(a, m.clone(), &full, Body::None).await;
                    // Reading a run's log asks its executor, which may be gone: 502 is honest.
                    if path == "/runs/{id}/log" && r.status == 502 {
                        continue;
                    }
                    assert_client_error_or_ok(&r, &format!("[{kind}] GET {full}"));
                }
            }
            if m == Method::POST || m == Method::PUT {
                for b in &raw_bodies {
                    // A route that reads no body answers before the upload ends and closes the
                    // connection; only routes with a body get the large one.
                    if b.len() >= 64 * 1024 && !BODY_ROUTES.contains(&path.as_str()) {
                        continue;
                    }
                    let r = admin_call(a, m.clone(), &p, Body::Raw(b.clone())).await;
                    let shown: String = b.chars().take(40).collect();
                    assert_client_error_or_ok(&r, &format!("[{kind}] {method} {p} body {shown:?}"));
                }
                let r = admin_call(a, m.clone(), &p, Body::Text("{}".into())).await;
                assert_client_error_or_ok(&r, &format!("[{kind}] {method} {p} as text/plain"));
            }
        }

        // Every field of each writable schema, with values of the wrong type, size or range.
        let doc = a.get("/openapi.json").await;
        let targets: Vec<(&str, String, Value)> = vec![
            ("Group", "/groups".into(), json!({"appname": "fuzz-app"})),
            ("Group", format!("/groups/{}", w.g1), json!({})),
            ("Job", "/jobs".into(), bean_job(w.g1, "fuzz")),
            ("Job", format!("/jobs/{}", w.job1), json!({})),
            (
                "TriggerRequest",
                format!("/jobs/{}/trigger", w.job1),
                json!({}),
            ),
        ];
        for (schema, path, base) in targets {
            let props = doc["components"]["schemas"][schema]["properties"]
                .as_object()
                .unwrap_or_else(|| panic!("schema {schema}"));
            let method = if path.matches('/').count() == 1 || path.ends_with("/trigger") {
                Method::POST
            } else {
                Method::PUT
            };
            let mut fields: Vec<&String> = props.keys().collect();
            let glue_remark = "glue_remark".to_string();
            if schema == "Job" {
                fields.push(&glue_remark);
            }
            for field in fields {
                for value in wrong_values() {
                    let mut body = base.clone();
                    body[field.as_str()] = value.clone();
                    let r = admin_call(a, method.clone(), &path, Body::Json(body)).await;
                    let shown: String = value.to_string().chars().take(40).collect();
                    assert_client_error_or_ok(
                        &r,
                        &format!("[{kind}] {method} {path} {field}={shown}"),
                    );
                    // A new group or job that did get created is removed, so that the next one
                    // with the same name can be tried.
                    if r.status == 201 {
                        let created = format!("{path}/{}", id_of(&r.json));
                        admin_call(a, Method::DELETE, &created, Body::None).await;
                    }
                }
            }
        }
        for (path, base) in [
            (
                "/users",
                json!({"username": "fuzz", "password": "fuzz-password"}),
            ),
            ("/tokens", json!({"name": "fuzz"})),
        ] {
            for field in base.as_object().unwrap().keys().chain(
                [
                    "role".to_string(),
                    "group_ids".to_string(),
                    "user_id".to_string(),
                ]
                .iter(),
            ) {
                if path == "/tokens" && (field == "role" || field == "group_ids") {
                    continue;
                }
                if path == "/users" && field == "user_id" {
                    continue;
                }
                for value in wrong_values() {
                    let mut body = base.clone();
                    body[field.as_str()] = value.clone();
                    let r = admin_call(a, Method::POST, path, Body::Json(body)).await;
                    let shown: String = value.to_string().chars().take(40).collect();
                    assert_client_error_or_ok(&r, &format!("[{kind}] POST {path} {field}={shown}"));
                    if r.status == 201 && path == "/users" {
                        admin_call(
                            a,
                            Method::DELETE,
                            &format!("/users/{}", id_of(&r.json)),
                            Body::None,
                        )
                        .await;
                    }
                }
            }
        }

        // The admin is still healthy and answers normally.
        assert_eq!(a.get(&format!("/jobs/{}", w.job1)).await["id"], w.job1);
        w.admin.stop().await;
        db.cleanup().await;
    }
}

/// `POST /fires/clear` (XXL-JOB's "clear logs"): one cut at a time, in the caller's groups only,
/// ended fires only; on both databases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clearing_fires_by_group_and_job() {
    for db in TestDb::all().await {
        let kind = db.kind();
        let w = world(&db).await;
        let a = &w.admin;
        // Fires that fail at once (no executor online): two of job 1, one of job 2.
        let mut fires = Vec::new();
        for job in [w.job1, w.job1, w.job2] {
            let t = a.post(&format!("/jobs/{job}/trigger"), json!({})).await;
            let fire = t["fire_id"].as_i64().unwrap();
            a.wait_fire(fire).await;
            fires.push(fire);
        }
        let clear = |body: Value| w.user(Method::POST, "/fires/clear", Body::Json(body));
        for (body, field, needle) in [
            (json!({}), None, "exactly one"),
            (json!({"all": true, "keep_newest": 5}), None, "exactly one"),
            (json!({"all": false}), None, "exactly one"),
            (json!({"keep_newest": 0}), Some("keep_newest"), "at least 1"),
            (
                json!({"older_than_days": -3}),
                Some("older_than_days"),
                "at least 1",
            ),
            (
                json!({"all": true, "group_id": w.g1, "job_id": w.job2}),
                Some("job_id"),
                "not in group",
            ),
        ] {
            expect_error(&clear(body.clone()).await, 400, field, needle);
        }
        expect_status(&clear(json!({"all": true, "bogus": 1})).await, 400);
        let forbidden = [
            json!({"all": true, "group_id": w.g2}),
            json!({"all": true, "job_id": w.job2}),
        ];
        for body in forbidden {
            expect_error(&clear(body).await, 403, None, "no permission");
        }
        expect_status(&clear(json!({"all": true, "job_id": 999_999})).await, 404);
        // Nothing is older than a day; keeping the newest five of group 1 keeps both.
        let r = clear(json!({"older_than_days": 1, "group_id": w.g1})).await;
        assert_eq!(
            expect_status(&r, 200),
            &json!({"fires": 0, "runs": 0}),
            "{kind}"
        );
        let r = clear(json!({"older_than_days": i64::MAX})).await;
        assert_eq!(
            expect_status(&r, 200),
            &json!({"fires": 0, "runs": 0}),
            "{kind}"
        );
        let r = clear(json!({"keep_newest": 5})).await;
        assert_eq!(
            expect_status(&r, 200),
            &json!({"fires": 0, "runs": 0}),
            "{kind}"
        );
        // The user's "all" is their groups: job 1's two fires go (their alarms' follow-ups may
        // take a moment), job 2's stays.
        let mut cleared = 0;
        for _ in 0..50 {
            let r = clear(json!({"all": true, "job_id": w.job1})).await;
            cleared += expect_status(&r, 200)["fires"].as_i64().unwrap();
            if cleared == 2 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert_eq!(cleared, 2, "{kind}");
        expect_status(&clear(json!({"all": true})).await, 200);
        let (status, _) = a
            .call(Method::GET, &format!("/fires/{}", fires[0]), None)
            .await;
        assert_eq!(status, 404, "{kind}");
        let left = a.get(&format!("/fires/{}", fires[2])).await;
        assert_eq!(left["state"], "failed", "{kind}: {left}");
        // The admin's "all" is every group.
        let r = admin_call(
            a,
            Method::POST,
            "/fires/clear",
            Body::Json(json!({"all": true})),
        )
        .await;
        assert_eq!(expect_status(&r, 200)["fires"], 1, "{kind}");
        w.admin.stop().await;
        db.cleanup().await;
    }
}

/// The audit log keeps every change request of an identified caller (refused ones too), not
/// reads and not unidentified callers; only an ADMIN reads it. Both databases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_says_who_changed_what() {
    for db in TestDb::all().await {
        let kind = db.kind();
        let w = world(&db).await;
        let a = &w.admin;
        let before = a.get("/audit?limit=1000").await["total"].as_i64().unwrap();
        let job = json!({"group_id": w.g1, "name": "audited", "handler": "work", "schedule_type": "NONE"});
        let r = w.user(Method::POST, "/jobs", Body::Json(job)).await;
        let created = id_of(expect_status(&r, 201));
        let r = w
            .user(Method::DELETE, &format!("/jobs/{}", w.job2), Body::None)
            .await;
        expect_status(&r, 403);
        w.user(Method::GET, "/jobs", Body::None).await;
        let r = send(
            a,
            Method::POST,
            "/jobs",
            Some("not-a-token"),
            Body::Json(json!({})),
        )
        .await;
        expect_status(&r, 401);
        a.post(&format!("/jobs/{created}/trigger"), json!({})).await;

        let log = a.get("/audit?limit=1000").await;
        assert_eq!(log["total"].as_i64().unwrap() - before, 3, "{kind}: {log}");
        let items = log["items"].as_array().unwrap();
        let seen: Vec<(String, String, String, i64)> = items[..3]
            .iter()
            .map(|e| {
                (
                    e["username"].as_str().unwrap().to_string(),
                    e["method"].as_str().unwrap().to_string(),
                    e["path"].as_str().unwrap().to_string(),
                    e["status"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                (
                    "admin".into(),
                    "POST".into(),
                    format!("/api/v1/jobs/{created}/trigger"),
                    200
                ),
                (
                    "operator".into(),
                    "DELETE".into(),
                    format!("/api/v1/jobs/{}", w.job2),
                    403
                ),
                ("operator".into(), "POST".into(), "/api/v1/jobs".into(), 201),
            ],
            "{kind}: newest first"
        );
        assert_eq!(items[1]["user_id"], w.user_id, "{kind}");
        assert_eq!(
            items[1]["console"], 0,
            "{kind}: an API token, not the console"
        );
        let mine = a.get("/audit?username=operator&limit=1").await;
        assert_eq!(mine["total"], 2, "{kind}: {mine}");
        assert_eq!(mine["items"].as_array().unwrap().len(), 1, "{kind}");
        let r = w.user(Method::GET, "/audit", Body::None).await;
        expect_error(&r, 403, None, "ADMIN");
        // A path longer than the column is kept, cut (a 404 here).
        let long = format!("/jobs/{}", "9".repeat(700));
        w.user(Method::DELETE, &long, Body::None).await;
        let last = a.get("/audit?username=operator&limit=1").await;
        let path = last["items"][0]["path"].as_str().unwrap().to_string();
        assert!(
            path.starts_with("/api/v1/jobs/999") && path.len() == 512,
            "{kind}: {path}"
        );
        // So is a method longer than its column (an extension method no route takes).
        let odd = Method::from_bytes(b"MKCALENDAR").unwrap();
        let r = w.user(odd, "/jobs", Body::None).await;
        let status = i64::from(r.status);
        let last = a.get("/audit?username=operator&limit=1").await;
        let e = &last["items"][0];
        assert_eq!(
            (
                e["method"].as_str(),
                e["path"].as_str(),
                e["status"].as_i64()
            ),
            (Some("MKCALEND"), Some("/api/v1/jobs"), Some(status)),
            "{kind}: {last}"
        );
        w.admin.stop().await;
        db.cleanup().await;
    }
}
