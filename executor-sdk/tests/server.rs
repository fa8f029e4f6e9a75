//! The executor's HTTP surface, driven with raw requests as an XXL-JOB admin sends them.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};
use shardline_executor::protocol::ACCESS_TOKEN_HEADER;
use shardline_executor::{Executor, JobResult};

fn demo(b: shardline_executor::ExecutorBuilder) -> shardline_executor::ExecutorBuilder {
    b.handler("demoJobHandler", |ctx| async move {
        ctx.log(format!(
            "hello from job {} param {}",
            ctx.job_id(),
            ctx.params()
        ));
        JobResult::success_with("done")
    })
}

#[tokio::test]
async fn beat_answers_with_both_payload_keys() {
    let ex = TestExecutor::start(|_| {}, demo).await;
    let env = ex.post("/beat", &json!(null)).await;
    assert_eq!(
        env,
        json!({"code":200,"msg":null,"data":null,"content":null})
    );
    // XXL-JOB 3.x sends no body at all on /beat.
    let resp = ex
        .http
        .post(format!("{}/beat", ex.url))
        .header(ACCESS_TOKEN_HEADER, TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap()["code"], 200);
    ex.stop().await;
}

#[tokio::test]
async fn token_is_checked_whatever_the_header_case() {
    let ex = TestExecutor::start(|_| {}, demo).await;
    let send = |name: &'static str, value: Option<&'static str>| {
        let mut req = ex.http.post(format!("{}/beat", ex.url)).body("");
        if let Some(v) = value {
            req = req.header(name, v);
        }
        async move {
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status(), 200);
            resp.json::<Value>().await.unwrap()
        }
    };
    assert_eq!(send("xxl-job-access-token", Some(TOKEN)).await["code"], 200);
    let wrong = send(ACCESS_TOKEN_HEADER, Some("guess")).await;
    assert_eq!(wrong["code"], 500);
    assert_eq!(wrong["msg"], "The access token is wrong.");
    assert_eq!(
        send(ACCESS_TOKEN_HEADER, None).await["msg"],
        "The access token is wrong."
    );
    // A 3.5 admin adds the appname header next to the token.
    let resp = ex
        .http
        .post(format!("{}/beat", ex.url))
        .header(ACCESS_TOKEN_HEADER, TOKEN)
        .header("XXL-JOB-APPNAME", APPNAME)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.json::<Value>().await.unwrap()["code"], 200);
    // A refused /run never reaches a handler.
    let resp = ex
        .http
        .post(format!("{}/run", ex.url))
        .header(ACCESS_TOKEN_HEADER, "guess")
        .body(trigger(1, 1, "demoJobHandler").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.json::<Value>().await.unwrap()["code"], 500);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(ex.admin.callback_count(1), 0);
    ex.stop().await;
}

#[tokio::test]
async fn empty_token_accepts_everyone() {
    let ex = TestExecutor::start(|c| c.access_token.clear(), demo).await;
    let resp = ex
        .http
        .post(format!("{}/beat", ex.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.json::<Value>().await.unwrap()["code"], 200);
    ex.stop().await;
}

#[tokio::test]
async fn unknown_route_and_wrong_method_get_envelopes() {
    let ex = TestExecutor::start(|_| {}, demo).await;
    let env = ex.post("/nope", &json!({})).await;
    assert_eq!(env["code"], 500);
    assert_eq!(env["msg"], "invalid request, uri-mapping(/nope) not found.");
    for path in ["/beat", "/run", "/nope"] {
        let resp = ex
            .http
            .get(format!("{}{path}", ex.url))
            .header(ACCESS_TOKEN_HEADER, TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let env: Value = resp.json().await.unwrap();
        assert_eq!(
            env["msg"], "invalid request, HttpMethod not support.",
            "{path}"
        );
    }
    ex.stop().await;
}

#[tokio::test]
async fn malformed_bodies_get_clear_errors() {
    let ex = TestExecutor::start(|_| {}, demo).await;
    for (path, body) in [
        ("/run", "{not json"),
        ("/run", "{\"jobId\":\"seven\",\"logId\":1}"),
        ("/run", ""),
        ("/idleBeat", "{}"),
        ("/kill", "[1,2]"),
        ("/log", "{\"logId\":null}"),
    ] {
        let resp = ex
            .http
            .post(format!("{}{path}", ex.url))
            .header(ACCESS_TOKEN_HEADER, TOKEN)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let env: Value = resp.json().await.unwrap();
        assert_eq!(env["code"], 500, "{path} {body}");
        let msg = env["msg"].as_str().unwrap();
        assert!(
            msg.starts_with("invalid request body:"),
            "{path} {body}: {msg}"
        );
    }
    // Still alive and working.
    ex.run_ok(&trigger(1, 11, "demoJobHandler")).await;
    assert_eq!(ex.admin.callback(11).await.handle_code, 200);
    ex.stop().await;
}

#[tokio::test]
async fn invalid_trigger_fields_are_refused() {
    let ex = TestExecutor::start(|_| {}, demo).await;
    let env = ex
        .run(&trigger_with(
            1,
            1,
            "demoJobHandler",
            json!({"broadcastIndex": 3, "broadcastTotal": 2}),
        ))
        .await;
    assert_eq!(
        env["msg"],
        "invalid shard: broadcastIndex 3 of broadcastTotal 2"
    );
    let env = ex.run(&trigger(1, 2, "nope")).await;
    assert_eq!(env["msg"], "job handler [nope] not found.");
    let env = ex
        .run(&trigger_with(1, 3, "", json!({"glueType": "GLUE_JAVA"})))
        .await;
    assert_eq!(env["msg"], "glueType[GLUE_JAVA] is not valid.");
    ex.stop().await;
}

/// ratch-job sends 0 of 0 for a fire that is not sharded; it runs as the one shard.
#[tokio::test]
async fn zero_of_zero_shards_is_one_shard() {
    let ex = TestExecutor::start(|_| {}, demo).await;
    ex.run_ok(&trigger_with(
        1,
        1,
        "demoJobHandler",
        json!({"broadcastIndex": 0, "broadcastTotal": 0}),
    ))
    .await;
    assert_eq!(ex.admin.callback(1).await.handle_code, 200);
    ex.stop().await;
}

/// Many runs in one request: each is answered as `/run` answers it, in order, and each that was
/// taken runs and calls back; a body that is not a list of triggers starts none.
#[tokio::test]
async fn batch_route_answers_each_run_in_order() {
    let ex = TestExecutor::start(|_| {}, demo).await;
    let batch = json!([
        trigger(1, 11, "demoJobHandler"),
        trigger(2, 12, "noSuchHandler"),
        trigger_with(
            3,
            13,
            "demoJobHandler",
            json!({"broadcastIndex": 2, "broadcastTotal": 2})
        ),
        trigger(4, 14, "demoJobHandler"),
    ]);
    let env = ex.post("/shardline/run", &batch).await;
    assert_eq!(env["code"], 200, "{env}");
    let answers = env["data"].as_array().expect("one answer per run");
    assert_eq!(answers.len(), 4, "{env}");
    assert_eq!(env["content"], env["data"], "both payload keys");
    assert_eq!(answers[0]["code"], 200);
    assert_eq!(answers[1]["code"], 500);
    assert_eq!(answers[1]["msg"], "job handler [noSuchHandler] not found.");
    assert_eq!(answers[2]["code"], 500);
    assert_eq!(
        answers[2]["msg"],
        "invalid shard: broadcastIndex 2 of broadcastTotal 2"
    );
    assert_eq!(answers[3]["code"], 200);
    assert_eq!(ex.admin.callback(11).await.handle_code, 200);
    assert_eq!(ex.admin.callback(14).await.handle_code, 200);

    // One trigger instead of a list, and a wrong token: refused whole, nothing started.
    let env = ex
        .post("/shardline/run", &trigger(5, 15, "demoJobHandler"))
        .await;
    assert_eq!(env["code"], 500);
    assert!(
        env["msg"]
            .as_str()
            .unwrap()
            .starts_with("invalid request body"),
        "{env}"
    );
    let wrong: Value = ex
        .http
        .post(format!("{}/shardline/run", ex.url))
        .header(ACCESS_TOKEN_HEADER, "guess")
        .body(json!([trigger(6, 16, "demoJobHandler")]).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(wrong["code"], 500);
    assert_eq!(wrong["msg"], "The access token is wrong.");
    // An empty list is a batch of nothing.
    let env = ex.post("/shardline/run", &json!([])).await;
    assert_eq!(env["code"], 200);
    assert_eq!(env["data"], json!([]));
    tokio::time::sleep(Duration::from_millis(200)).await;
    for refused in [12, 13, 15, 16] {
        assert_eq!(
            ex.admin.callback_count(refused),
            0,
            "log {refused} never ran"
        );
    }
    ex.stop().await;
}

#[tokio::test]
async fn oversized_request_gets_an_envelope() {
    let ex = TestExecutor::start(|c| c.max_request_bytes = 4096, demo).await;
    let mut big = trigger(1, 1, "demoJobHandler");
    big["executorParams"] = json!("x".repeat(64 * 1024));
    let env = ex.run(&big).await;
    assert_eq!(env["code"], 500);
    assert_eq!(
        env["msg"],
        "invalid request, body larger than the limit of 4096 bytes"
    );
    // Just under the limit is fine.
    let mut fits = trigger(1, 2, "demoJobHandler");
    fits["executorParams"] = json!("x".repeat(3000));
    ex.run_ok(&fits).await;
    assert_eq!(ex.admin.callback(2).await.handle_code, 200);
    ex.stop().await;
}

#[tokio::test]
async fn registers_and_deregisters_on_shutdown() {
    let ex = TestExecutor::start(
        |c| {
            c.meta.labels = vec!["shanghai".into()];
            c.meta.weight = Some(2);
        },
        demo,
    )
    .await;
    let reg = ex.admin.registry("registry").await;
    assert_eq!(reg.registry_group, "EXECUTOR");
    assert_eq!(reg.registry_key, APPNAME);
    // Bound to 127.0.0.1, so that is the address registered.
    assert_eq!(reg.registry_value, format!("{}/", ex.url));
    let meta = reg.meta.expect("meta sent");
    assert_eq!(meta.labels, vec!["shanghai"]);
    assert_eq!(meta.weight, Some(2));
    assert!(meta.run_batch, "the SDK says it takes runs in batches");
    let admin = ex.admin.clone();
    ex.stop().await;
    let removed = admin.registry("registryRemove").await;
    assert_eq!(removed.registry_value, reg.registry_value);
}

#[tokio::test]
async fn log_pages_through_the_server() {
    let ex = TestExecutor::start(
        |_| {},
        |b| {
            b.handler("chatty", |ctx| async move {
                for i in 1..=5 {
                    ctx.log(format!("line {i}"));
                }
            })
        },
    )
    .await;
    ex.run_ok(&trigger(3, 77, "chatty")).await;
    ex.admin.callback(77).await;
    // 2.x–3.4 admins spell the date field `logDateTim`.
    let env = ex
        .post(
            "/log",
            &json!({"logId":77,"logDateTim":now_millis(),"fromLineNum":1}),
        )
        .await;
    assert_eq!(env["code"], 200);
    let page = &env["data"];
    assert_eq!(env["content"], *page);
    let content = page["logContent"].as_str().unwrap();
    for i in 1..=5 {
        assert!(content.contains(&format!("line {i}")), "{content}");
    }
    let to = page["toLineNum"].as_i64().unwrap();
    assert!(to >= 7, "start, param, five lines, end: {content}");
    assert_eq!(page["isEnd"], false);
    // Asking past the end returns nothing new.
    let env = ex
        .post(
            "/log",
            &json!({"logId":77,"logDateTime":now_millis(),"fromLineNum":to + 1}),
        )
        .await;
    assert_eq!(env["data"]["logContent"], "");
    // The second page starts where asked.
    let env = ex
        .post(
            "/log",
            &json!({"logId":77,"logDateTime":now_millis(),"fromLineNum":3}),
        )
        .await;
    let content = env["data"]["logContent"].as_str().unwrap();
    assert!(content.starts_with(|c: char| c.is_ascii_digit()) && content.contains("line 1"));
    assert!(!content.contains("job execute start"), "{content}");
    // A run this executor never had.
    let env = ex
        .post(
            "/log",
            &json!({"logId":78,"logDateTime":now_millis(),"fromLineNum":1}),
        )
        .await;
    assert_eq!(
        env["data"]["logContent"],
        "readLog fail, logFile not exists"
    );
    assert_eq!(env["data"]["isEnd"], true);
    ex.stop().await;
}

#[tokio::test]
async fn kill_of_an_unknown_job_says_so() {
    let ex = TestExecutor::start(|_| {}, demo).await;
    let env = ex.post("/kill", &json!({"jobId": 404})).await;
    assert_eq!(env["code"], 200);
    assert_eq!(env["msg"], "job thread already killed.");
    assert_eq!(env["data"], "job thread already killed.");
    let env = ex.post("/idleBeat", &json!({"jobId": 404})).await;
    assert_eq!(env["code"], 200);
    ex.stop().await;
}

#[tokio::test]
async fn mounted_router_under_a_prefix() {
    let admin = FakeAdmin::start().await;
    let dir = tempfile::tempdir().unwrap();
    let executor = Executor::builder(test_config(&admin, dir.path()))
        .handler("demoJobHandler", |ctx| async move {
            JobResult::success_with(format!("ran {}", ctx.log_id()))
        })
        .build()
        .unwrap();
    // The service's own app, with the executor routes under /xxl-job: no extra port.
    let app = axum::Router::new()
        .route("/health", axum::routing::get(|| async { "ok" }))
        .nest("/xxl-job", executor.router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    let background = executor.start_background(addr.port(), "/xxl-job").unwrap();
    assert!(
        background
            .registered_address()
            .ends_with(&format!(":{}/xxl-job/", addr.port())),
        "{}",
        background.registered_address()
    );
    let reg = admin.registry("registry").await;
    assert_eq!(reg.registry_value, background.registered_address());
    assert!(matches!(
        executor.start_background(addr.port(), "/xxl-job"),
        Err(shardline_executor::ExecutorError::AlreadyStarted)
    ));

    let http = client();
    let base = format!("http://{addr}/xxl-job");
    let env = post_json(
        &http,
        &format!("{base}/run"),
        &trigger(1, 5, "demoJobHandler"),
    )
    .await;
    assert_eq!(env["code"], 200, "{env}");
    let cb = admin.callback(5).await;
    assert_eq!((cb.handle_code, cb.handle_msg.as_str()), (200, "ran 5"));
    let env = post_json(&http, &format!("{base}/nope"), &json!({})).await;
    assert_eq!(
        env["msg"],
        "invalid request, uri-mapping(/xxl-job/nope) not found."
    );
    let health = http
        .get(format!("http://{addr}/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.text().await.unwrap(), "ok");

    let _ = stop.send(());
    server.await.unwrap().unwrap();
    background.shutdown().await;
    admin.registry("registryRemove").await;
}

#[tokio::test]
async fn router_refuses_runs_until_started() {
    let admin = FakeAdmin::start().await;
    let dir = tempfile::tempdir().unwrap();
    let executor = Executor::builder(test_config(&admin, dir.path()))
        .handler("demoJobHandler", |_ctx| async {})
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, executor.router()).await });
    let env = post_json(
        &client(),
        &format!("http://{addr}/run"),
        &trigger(1, 1, "demoJobHandler"),
    )
    .await;
    assert_eq!(env["code"], 500);
    assert!(
        env["msg"].as_str().unwrap().contains("not started"),
        "{env}"
    );
}

#[test]
fn config_from_env_requires_an_appname() {
    let err = shardline_executor::ExecutorConfig::from_lookup(|_| None).unwrap_err();
    assert!(err.to_string().contains("appname is empty"), "{err}");
}
