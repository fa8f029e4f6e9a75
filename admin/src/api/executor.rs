//! The admin side of the XXL-JOB executor protocol: `/api/registry`, `/api/registryRemove`,
//! `/api/callback` (also under `/xxl-job-admin/api/`), plus the checkpoint extension.
//!
//! As in XXL-JOB, every answer is HTTP 200 with an envelope whose `code` says what happened, and
//! `content`/`data` stay null (one third-party executor treats anything else as a failure).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::Router;
use shardline_executor::protocol::{
    self, CallbackBody, CheckpointRequest, Envelope, RegistryRequest, MAX_CHECKPOINT_BYTES,
};

use super::AppState;
use crate::model::{now_ms, RunState};
use crate::store::Beat;

pub fn routes() -> Router<AppState> {
    let api = Router::new()
        .route("/registry", post(registry))
        .route("/registryRemove", post(registry_remove))
        .route("/callback", post(callback))
        .route("/shardline/checkpoint", post(checkpoint));
    Router::new()
        .nest("/api", api.clone())
        .nest("/xxl-job-admin/api", api)
}

type Reply = axum::Json<Envelope<()>>;

fn fail(msg: impl Into<String>) -> Reply {
    axum::Json(Envelope::fail(msg))
}

fn ok() -> Reply {
    axum::Json(Envelope::ok())
}

/// Checks the token and parses the body, or returns the envelope to answer with.
fn accept<T: serde::de::DeserializeOwned>(
    state: &AppState,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<T, Reply> {
    // Header names are case-insensitive (one executor sends `xxl-job-access-token`).
    let presented = headers
        .get(protocol::ACCESS_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok());
    if !protocol::token_matches(&state.access_token, presented) {
        return Err(fail("The access token is wrong."));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(fail("invalid request, requestBody empty."));
    }
    serde_json::from_slice(body).map_err(|e| fail(format!("invalid request body: {e}")))
}

async fn registry(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Reply {
    let req: RegistryRequest = match accept(&state, &headers, &body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    if let Err(m) = req.validate() {
        return fail(m);
    }
    // Sizes of the registry columns: a longer value would fail the write with a database error.
    let max_key = shardline_executor::protocol::MAX_APPNAME_CHARS;
    if req.registry_key.trim().chars().count() > max_key {
        return fail(format!(
            "Illegal Argument: registryKey is longer than {max_key} characters."
        ));
    }
    let address = crate::trigger::normalize_address(&req.registry_value);
    let max = shardline_executor::protocol::MAX_ADDRESS_CHARS;
    if address.chars().count() > max {
        return fail(format!(
            "Illegal Argument: registryValue is longer than {max} characters."
        ));
    }
    // XXL-JOB's admin lists any value; then every run sent to it fails. A removal stays lenient,
    // so that such an entry can still be taken out.
    if !shardline_executor::protocol::is_http_address(&address) {
        return fail("Illegal Argument: registryValue is not an http(s) URL.");
    }
    let meta = req
        .meta
        .as_ref()
        .and_then(|m| serde_json::to_string(m).ok())
        .unwrap_or_default();
    let beat = Beat {
        appname: req.registry_key.trim().to_string(),
        address: address.clone(),
        meta,
        at: now_ms(),
    };
    match state.beats.beat(beat).await {
        Ok(()) => {
            state.dispatcher.mark_healthy(&address);
            ok()
        }
        Err(e) => {
            tracing::error!(error = %e, "registry write failed");
            fail("registry failed: database unavailable")
        }
    }
}

async fn registry_remove(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Reply {
    let req: RegistryRequest = match accept(&state, &headers, &body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    if let Err(m) = req.validate() {
        return fail(m);
    }
    let address = crate::trigger::normalize_address(&req.registry_value);
    match state.beats.remove(req.registry_key.trim(), &address).await {
        Ok(_) => ok(),
        Err(e) => {
            tracing::error!(error = %e, "registry remove failed");
            fail("registryRemove failed: database unavailable")
        }
    }
}

async fn callback(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Reply {
    let req: CallbackBody = match accept(&state, &headers, &body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let items: Vec<_> = req
        .into_items()
        .into_iter()
        .map(|i| (i.log_id, i.handle_code, i.handle_msg))
        .collect();
    if state.results.submit(items) {
        ok()
    } else {
        // Shutting down: the executor keeps the result and sends it again later.
        fail("admin is shutting down; retry the callback")
    }
}

async fn checkpoint(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Reply {
    let req: CheckpointRequest = match accept(&state, &headers, &body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    if req.value.len() > MAX_CHECKPOINT_BYTES {
        return fail(format!(
            "checkpoint too large: {} bytes (limit {MAX_CHECKPOINT_BYTES})",
            req.value.len()
        ));
    }
    let run = match state.store.get_run(req.log_id).await {
        Ok(Some(r)) => r,
        Ok(None) => return fail(format!("unknown logId {}", req.log_id)),
        Err(e) => {
            tracing::error!(error = %e, "checkpoint lookup failed");
            return fail("checkpoint failed: database unavailable");
        }
    };
    // A run declared lost whose executor wakes up later, or one replaced by a takeover, would
    // drag the item back behind the run that owns it now.
    if run.superseded != 0 || run.state == RunState::Lost.as_str() {
        return fail(format!(
            "run {} was replaced or declared lost ({}); checkpoint ignored",
            run.id, run.state
        ));
    }
    match state
        .store
        .save_checkpoint(run.job_id, run.shard_index, &req.value, run.id, now_ms())
        .await
    {
        Ok(()) => ok(),
        Err(e) => {
            tracing::error!(error = %e, "checkpoint write failed");
            fail("checkpoint failed: database unavailable")
        }
    }
}
