//! The executor's HTTP surface: `POST /beat`, `/idleBeat`, `/run` (also `/trigger`), `/kill` and
//! `/log`, exactly as an XXL-JOB admin calls them, and `/shardline/run`, many runs in one request
//! (a Shardline extension, [`RUN_BATCH_ROUTE`]).
//!
//! Every answer is HTTP 200 with an [`Envelope`]; errors live only in its `code`, because the
//! Java clients treat any other status as a transport failure. The routes sit at the root of the
//! router so a service can `nest` it under a prefix of its own app.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::{Json, Router};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::executor::Inner;
use crate::protocol::{
    token_matches, Envelope, IdleBeatRequest, KillRequest, LogRequest, TriggerRequest,
    ACCESS_TOKEN_HEADER, CODE_SUCCESS, RUN_BATCH_ROUTE,
};
use crate::worker::REASON_KILL;

/// An oversized body is read and thrown away up to this many times the limit (and this long), so
/// the client still gets its envelope instead of a reset connection; past that the connection is
/// dropped.
const DRAIN_FACTOR: usize = 4;
const DRAIN_TIME: Duration = Duration::from_secs(5);

type Shared = Arc<Inner>;

/// The router of the executor protocol over `inner`.
pub(crate) fn router(inner: Shared) -> Router {
    Router::new()
        .route("/beat", any(beat))
        .route("/idleBeat", any(idle_beat))
        .route("/run", any(run))
        .route("/trigger", any(run))
        .route(&format!("/{RUN_BATCH_ROUTE}"), any(run_batch))
        .route("/kill", any(kill))
        .route("/log", any(log))
        .fallback(not_found)
        .with_state(inner)
}

fn reply<T: Serialize>(envelope: Envelope<T>) -> Response {
    Json(envelope).into_response()
}

fn fail(msg: impl Into<String>) -> Response {
    reply(Envelope::<()>::fail(msg))
}

/// The checks every route shares, in XXL-JOB's order: method, token, then the body.
async fn admit(
    inner: &Inner,
    method: &Method,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, String> {
    if method != Method::POST {
        return Err("invalid request, HttpMethod not support.".to_string());
    }
    let presented = headers
        .get(ACCESS_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok());
    if !token_matches(&inner.config.access_token, presented) {
        return Err("The access token is wrong.".to_string());
    }
    read_body(body, inner.config.max_request_bytes).await
}

/// [`admit`], then the body as JSON of `T`.
async fn request<T: DeserializeOwned>(
    inner: &Inner,
    method: &Method,
    headers: &HeaderMap,
    body: Body,
) -> Result<T, String> {
    let body = admit(inner, method, headers, body).await?;
    serde_json::from_slice(&body).map_err(|e| format!("invalid request body: {e}"))
}

async fn read_body(body: Body, limit: usize) -> Result<Bytes, String> {
    let mut stream = body.into_data_stream();
    let mut buf: Vec<u8> = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("invalid request, cannot read the body: {e}"))?;
        if buf.len() + chunk.len() > limit {
            let mut seen = buf.len() + chunk.len();
            let drain = async {
                while let Some(Ok(chunk)) = stream.next().await {
                    seen += chunk.len();
                    if seen > limit.saturating_mul(DRAIN_FACTOR) {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(DRAIN_TIME, drain).await;
            return Err(format!(
                "invalid request, body larger than the limit of {limit} bytes"
            ));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(buf))
}

async fn beat(
    State(inner): State<Shared>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // The body (none, or "" from 2.x admins) is ignored, but still bounded.
    match admit(&inner, &method, &headers, body).await {
        Ok(_) => reply(Envelope::ok()),
        Err(msg) => fail(msg),
    }
}

async fn idle_beat(
    State(inner): State<Shared>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let req: IdleBeatRequest = match request(&inner, &method, &headers, body).await {
        Ok(r) => r,
        Err(msg) => return fail(msg),
    };
    if inner.workers.is_busy(req.job_id) {
        fail("job thread is running or has trigger queue.")
    } else {
        reply(Envelope::ok())
    }
}

async fn run(
    State(inner): State<Shared>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let req: TriggerRequest = match request(&inner, &method, &headers, body).await {
        Ok(r) => r,
        Err(msg) => return fail(msg),
    };
    reply(start(&inner, req))
}

/// Many runs in one request: each is taken as `/run` takes it, and its answer is the one `/run`
/// would have given, in the order of the requests. A body that cannot be read starts none.
async fn run_batch(
    State(inner): State<Shared>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let reqs: Vec<TriggerRequest> = match request(&inner, &method, &headers, body).await {
        Ok(r) => r,
        Err(msg) => return fail(msg),
    };
    let answers: Vec<Envelope<()>> = reqs.into_iter().map(|req| start(&inner, req)).collect();
    reply(Envelope::success(Some(answers)))
}

/// Hands one run to its job's worker; the envelope says whether it was taken.
fn start(inner: &Inner, req: TriggerRequest) -> Envelope<()> {
    let (job_id, log_id) = (req.job_id, req.log_id);
    match inner.run(req) {
        Ok(()) => Envelope::ok(),
        Err(msg) => {
            tracing::info!(job_id, log_id, reason = %msg, "trigger refused");
            Envelope::fail(msg)
        }
    }
}

async fn kill(
    State(inner): State<Shared>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let req: KillRequest = match request(&inner, &method, &headers, body).await {
        Ok(r) => r,
        Err(msg) => return fail(msg),
    };
    if inner.workers.kill(req.job_id, REASON_KILL) {
        tracing::info!(job_id = req.job_id, "job killed by the admin");
        reply(Envelope::ok())
    } else {
        // 2.x admins show `msg`, 3.3+ show the payload: say it in both.
        let text = "job thread already killed.";
        reply(Envelope {
            code: CODE_SUCCESS,
            msg: Some(text.to_string()),
            payload: Some(text.to_string()),
        })
    }
}

async fn log(
    State(inner): State<Shared>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let req: LogRequest = match request(&inner, &method, &headers, body).await {
        Ok(r) => r,
        Err(msg) => return fail(msg),
    };
    let logs = inner.logs.clone();
    // Reading a page is file I/O of up to a megabyte: keep it off the async workers.
    let result = tokio::task::spawn_blocking(move || {
        logs.read(req.log_id, req.log_date_time, req.from_line_num)
    })
    .await;
    match result {
        Ok(page) => reply(Envelope::success(Some(page))),
        Err(e) => fail(format!("readLog fail, {e}")),
    }
}

async fn not_found(
    State(inner): State<Shared>,
    OriginalUri(uri): OriginalUri,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match admit(&inner, &method, &headers, body).await {
        Ok(_) => fail(format!(
            "invalid request, uri-mapping({}) not found.",
            uri.path()
        )),
        Err(msg) => fail(msg),
    }
}
