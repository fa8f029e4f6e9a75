//! Test harness: a protocol-exact fake admin (`/api/registry`, `/api/registryRemove`,
//! `/api/callback`, `/api/shardline/checkpoint` on 127.0.0.1:0) and an executor started on
//! 127.0.0.1:0 pointed at it, driven with raw JSON as an XXL-JOB admin drives it.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use shardline_executor::protocol::{
    CallbackBody, CallbackItem, CheckpointRequest, RegistryRequest, ACCESS_TOKEN_HEADER,
};
use shardline_executor::{Executor, ExecutorBuilder, ExecutorConfig, ExecutorError};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const TOKEN: &str = "test-token";
pub const APPNAME: &str = "test-app";
/// Upper bound for anything a test waits for; far above what a healthy run needs.
pub const WAIT: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct AdminRecord {
    pub registry: Vec<(String, RegistryRequest)>,
    pub callbacks: Vec<CallbackItem>,
    pub checkpoints: Vec<CheckpointRequest>,
}

/// A fake admin that answers like XXL-JOB's `OpenApiController` and records what it receives.
#[derive(Clone)]
pub struct FakeAdmin {
    pub url: String,
    pub record: Arc<Mutex<AdminRecord>>,
}

impl FakeAdmin {
    pub async fn start() -> FakeAdmin {
        let record = Arc::new(Mutex::new(AdminRecord::default()));
        let app = Router::new()
            .route("/api/{uri}", post(admin_api))
            .route("/api/shardline/checkpoint", post(admin_checkpoint))
            .with_state(record.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeAdmin { url, record }
    }

    /// Waits for the callback of `log_id` and returns it.
    pub async fn callback(&self, log_id: i64) -> CallbackItem {
        self.wait_for(|r| r.callbacks.iter().find(|c| c.log_id == log_id).cloned())
            .await
            .unwrap_or_else(|| panic!("no callback for log {log_id}"))
    }

    /// How many callbacks arrived for `log_id` (exactly one is expected per finished run).
    pub fn callback_count(&self, log_id: i64) -> usize {
        let r = self.record.lock().unwrap();
        r.callbacks.iter().filter(|c| c.log_id == log_id).count()
    }

    /// Waits until a registry call of kind `uri` (`registry` or `registryRemove`) arrived.
    pub async fn registry(&self, uri: &str) -> RegistryRequest {
        self.wait_for(|r| {
            r.registry
                .iter()
                .find(|(u, _)| u == uri)
                .map(|(_, req)| req.clone())
        })
        .await
        .unwrap_or_else(|| panic!("no {uri} call"))
    }

    pub async fn wait_for<T>(&self, f: impl Fn(&AdminRecord) -> Option<T>) -> Option<T> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(v) = f(&self.record.lock().unwrap()) {
                return Some(v);
            }
            if tokio::time::Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn token_ok(headers: &HeaderMap) -> bool {
    headers
        .get(ACCESS_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        == Some(TOKEN)
}

async fn admin_api(
    State(record): State<Arc<Mutex<AdminRecord>>>,
    Path(uri): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Json<Value> {
    if !token_ok(&headers) {
        return Json(json!({"code":500,"msg":"The access token is wrong.","data":null}));
    }
    match uri.as_str() {
        "registry" | "registryRemove" => {
            let req: RegistryRequest = match serde_json::from_slice(&body) {
                Ok(r) => r,
                Err(e) => return Json(json!({"code":500,"msg":e.to_string()})),
            };
            if req.validate().is_err() {
                return Json(json!({"code":500,"msg":"Illegal Argument."}));
            }
            record.lock().unwrap().registry.push((uri, req));
        }
        "callback" => {
            let body: CallbackBody = match serde_json::from_slice(&body) {
                Ok(r) => r,
                Err(e) => return Json(json!({"code":500,"msg":e.to_string()})),
            };
            record.lock().unwrap().callbacks.extend(body.into_items());
        }
        other => {
            return Json(
                json!({"code":500,"msg":format!("invalid request, uri-mapping({other}) not found.")}),
            )
        }
    }
    Json(json!({"code":200,"msg":"Success","data":null,"success":true}))
}

async fn admin_checkpoint(
    State(record): State<Arc<Mutex<AdminRecord>>>,
    headers: HeaderMap,
    Json(req): Json<CheckpointRequest>,
) -> Json<Value> {
    if !token_ok(&headers) {
        return Json(json!({"code":500,"msg":"The access token is wrong."}));
    }
    record.lock().unwrap().checkpoints.push(req);
    Json(json!({"code":200,"msg":null,"data":null}))
}

/// The configuration tests start from: loopback, port 0, short grace periods, a temp log folder.
pub fn test_config(admin: &FakeAdmin, dir: &std::path::Path) -> ExecutorConfig {
    let mut cfg = ExecutorConfig::new(APPNAME, vec![admin.url.clone()]);
    cfg.access_token = TOKEN.to_string();
    cfg.bind = "127.0.0.1:0".parse().unwrap();
    cfg.log_path = dir.to_path_buf();
    cfg.kill_grace = Duration::from_millis(300);
    cfg.shutdown_grace = Duration::from_millis(300);
    cfg.callback_retry_interval = Duration::from_millis(200);
    cfg
}

/// An executor served on 127.0.0.1:0 and its fake admin.
pub struct TestExecutor {
    pub url: String,
    pub admin: FakeAdmin,
    pub http: reqwest::Client,
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ExecutorError>>>,
}

impl TestExecutor {
    pub async fn start(
        tweak: impl FnOnce(&mut ExecutorConfig),
        handlers: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder,
    ) -> TestExecutor {
        let admin = FakeAdmin::start().await;
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = test_config(&admin, dir.path());
        tweak(&mut cfg);
        let executor = handlers(Executor::builder(cfg)).build().unwrap();
        let bound = executor.bind().await.unwrap();
        let url = format!("http://{}", bound.local_addr());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(bound.serve(async {
            let _ = stopped.await;
        }));
        TestExecutor {
            url,
            admin,
            http: client(),
            dir,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// POSTs `body` to `path` with the access token, as the admin does; returns the envelope.
    pub async fn post(&self, path: &str, body: &Value) -> Value {
        post_json(&self.http, &format!("{}{path}", self.url), body).await
    }

    pub async fn run(&self, trigger: &Value) -> Value {
        self.post("/run", trigger).await
    }

    /// Runs a trigger that must be accepted.
    pub async fn run_ok(&self, trigger: &Value) {
        let env = self.run(trigger).await;
        assert_eq!(env["code"], 200, "trigger refused: {env}");
    }

    /// Stops the executor (graceful shutdown) and waits for it.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(WAIT, task)
                .await
                .expect("executor did not stop")
                .unwrap()
                .unwrap();
        }
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

pub async fn post_json(http: &reqwest::Client, url: &str, body: &Value) -> Value {
    let resp = http
        .post(url)
        .header(ACCESS_TOKEN_HEADER, TOKEN)
        .header("Content-Type", "application/json;charset=UTF-8")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "executor answered a non-200 status");
    resp.json().await.unwrap()
}

/// A trigger with all eleven stock fields, as XXL-JOB's admin sends it.
pub fn trigger(job_id: i64, log_id: i64, handler: &str) -> Value {
    json!({
        "jobId": job_id,
        "executorHandler": handler,
        "executorParams": "",
        "executorBlockStrategy": "SERIAL_EXECUTION",
        "executorTimeout": 0,
        "logId": log_id,
        "logDateTime": now_millis(),
        "glueType": "BEAN",
        "glueSource": "",
        "glueUpdatetime": 1_749_990_000_000i64,
        "broadcastIndex": 0,
        "broadcastTotal": 1
    })
}

/// Trigger times are "now": run logs of old days would be removed by the retention clean-up.
pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap()
}

/// `trigger` with some fields replaced.
pub fn trigger_with(job_id: i64, log_id: i64, handler: &str, extra: Value) -> Value {
    let mut t = trigger(job_id, log_id, handler);
    for (k, v) in extra.as_object().unwrap() {
        t[k] = v.clone();
    }
    t
}

/// Waits until `cond` holds (polling), or fails the test.
pub async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
