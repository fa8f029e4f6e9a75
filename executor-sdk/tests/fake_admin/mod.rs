//! A protocol-exact fake admin for the SDK tests: an axum server on 127.0.0.1:0 that records every
//! POST (path, headers, JSON body, arrival time) and answers with the XXL-JOB envelope. It can be
//! told to fail (envelope code 500, or a non-200 HTTP status), and it can be stopped and started
//! again on the same port to play an admin that goes down and comes back.

#![allow(dead_code)] // each test binary uses a different part of it

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// One request received by the fake admin.
#[derive(Debug, Clone)]
pub struct Call {
    pub path: String,
    pub headers: HeaderMap,
    pub body: serde_json::Value,
    pub at: Instant,
}

impl Call {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// How the fake admin answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `{"code":200,...}` in the 3.3+ style (Jackson: `data` and an extra `success`).
    Ok,
    /// `{"code":200,"msg":null,"content":null}`: a 2.x admin.
    OkClassic,
    /// HTTP 200 with envelope code 500.
    Fail,
    /// HTTP 503 with a text body.
    HttpError,
    /// HTTP 200 with a body that is not an envelope.
    NotJson,
}

#[derive(Clone)]
struct Shared {
    calls: Arc<Mutex<Vec<Call>>>,
    mode: Arc<Mutex<Mode>>,
}

pub struct FakeAdmin {
    addr: SocketAddr,
    context: String,
    shared: Shared,
    server: Mutex<Option<(CancellationToken, tokio::task::JoinHandle<()>)>>,
}

impl FakeAdmin {
    /// An admin at the root context path (`http://127.0.0.1:port`).
    pub async fn start() -> FakeAdmin {
        Self::start_with_context("").await
    }

    /// An admin whose API lives under a context path such as `/xxl-job-admin`. The fake answers
    /// on every path and records it, so a test can check where the client went.
    pub async fn start_with_context(context: &str) -> FakeAdmin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let admin = FakeAdmin {
            addr,
            context: context.trim_end_matches('/').to_string(),
            shared: Shared {
                calls: Arc::new(Mutex::new(Vec::new())),
                mode: Arc::new(Mutex::new(Mode::Ok)),
            },
            server: Mutex::new(None),
        };
        admin.serve(listener);
        admin
    }

    /// The base address to configure in the executor (with the context path, no trailing slash).
    pub fn base(&self) -> String {
        format!("http://{}{}", self.addr, self.context)
    }

    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap() = mode;
    }

    /// Stops listening: connections are refused until [`FakeAdmin::up`].
    pub async fn down(&self) {
        let server = self.server.lock().unwrap().take();
        if let Some((stop, task)) = server {
            stop.cancel();
            let _ = task.await;
        }
    }

    /// Listens again on the same port.
    pub async fn up(&self) {
        let listener = TcpListener::bind(self.addr).await.unwrap();
        self.serve(listener);
    }

    pub fn calls(&self) -> Vec<Call> {
        self.shared.calls.lock().unwrap().clone()
    }

    /// Calls to `{context}/api/{uri}`.
    pub fn calls_to(&self, uri: &str) -> Vec<Call> {
        let path = format!("{}/api/{uri}", self.context);
        self.calls()
            .into_iter()
            .filter(|c| c.path == path)
            .collect()
    }

    /// Waits (up to `timeout`) until `done` holds for the recorded calls.
    pub async fn wait_until(&self, timeout: Duration, done: impl Fn(&[Call]) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(&self.calls()) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn serve(&self, listener: TcpListener) {
        let app = Router::new()
            .fallback(record)
            .with_state(self.shared.clone());
        let stop = CancellationToken::new();
        let signal = stop.clone();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { signal.cancelled().await })
                .await
                .unwrap();
        });
        *self.server.lock().unwrap() = Some((stop, task));
    }
}

async fn record(
    State(shared): State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = serde_json::from_slice(&body)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&body).into_owned()));
    shared.calls.lock().unwrap().push(Call {
        path: uri.path().to_string(),
        headers,
        body,
        at: Instant::now(),
    });
    let mode = *shared.mode.lock().unwrap();
    let json = |text: &'static str| {
        (StatusCode::OK, [("content-type", "application/json")], text).into_response()
    };
    match mode {
        Mode::Ok => json(r#"{"code":200,"msg":"Success","data":null,"success":true}"#),
        Mode::OkClassic => json(r#"{"code":200,"msg":null,"content":null}"#),
        Mode::Fail => json(r#"{"code":500,"msg":"database unavailable","data":null}"#),
        Mode::HttpError => (StatusCode::SERVICE_UNAVAILABLE, "upstream overloaded").into_response(),
        Mode::NotJson => (StatusCode::OK, "<html>login</html>").into_response(),
    }
}

/// An address where nothing listens (bound, then released).
pub async fn dead_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}
