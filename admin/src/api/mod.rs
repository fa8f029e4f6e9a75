//! HTTP surface of the admin: the executor-facing protocol (`/api/...`), the REST API
//! (`/api/v1/...`) and the operational endpoints.

mod error;
mod executor;
mod ops;
pub mod v1;

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::Router;

pub use error::ApiError;

use crate::config::Settings;
use crate::metrics::Metrics;
use crate::model::{AuditEntry, User};
use crate::results::ResultSink;
use crate::store::Store;
use crate::trigger::Dispatcher;

/// Everything a handler needs; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub settings: Arc<Settings>,
    pub dispatcher: Arc<Dispatcher>,
    pub results: ResultSink,
    /// Executor heartbeats, written behind.
    pub beats: Arc<crate::beats::Beats>,
    pub metrics: Arc<Metrics>,
    /// Token executors present; empty only when explicitly allowed.
    pub access_token: Arc<str>,
    /// This admin's id in `admin_nodes`.
    pub node_id: Arc<str>,
}

/// The whole HTTP router of the admin.
pub fn router(state: AppState) -> Router {
    let limit = state.settings.max_body_bytes;
    Router::new()
        .merge(executor::routes())
        .nest(
            "/api/v1",
            v1::routes().layer(axum::middleware::from_fn_with_state(state.clone(), audit)),
        )
        .merge(ops::routes())
        .merge(crate::console::routes())
        .layer(tower_http::limit::RequestBodyLimitLayer::new(limit))
        .with_state(state)
}

/// The caller of a REST API request, authenticated by a bearer token or by the console's session
/// cookie (then state-changing requests must carry the session's CSRF token).
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: User,
    /// Signed in through the console (a person), rather than with an API token (automation).
    pub console: bool,
}

impl Caller {
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.user.is_admin() {
            Ok(())
        } else {
            Err(ApiError::forbidden(crate::refusal::Reason::AdminOnly))
        }
    }

    /// Refuses access to a group the user was not given.
    pub fn require_group(&self, group_id: i64) -> Result<(), ApiError> {
        if self.user.can_access_group(group_id) {
            Ok(())
        } else {
            Err(ApiError::forbidden(
                crate::refusal::Refusal::new(crate::refusal::Reason::NoGroupPermission)
                    .with("id", group_id),
            ))
        }
    }

    /// The groups a list is restricted to (`None` = all, for admins).
    pub fn group_scope(&self) -> Option<Vec<i64>> {
        (!self.user.is_admin()).then(|| self.user.group_list())
    }
}

/// What the audit layer found out about a request's caller, handed to the handler's extractor so
/// that the token or session is looked up once, whether it is accepted or refused.
#[derive(Clone)]
struct Identified(Result<Caller, ApiError>);

/// Keeps every REST API request that could change something in the audit log: its caller
/// (identified here once and handed to the handler), method, path and the answer's status.
/// Requests whose caller is not identified are not kept: a flood of them would otherwise be a
/// write each. Bodies are not kept (passwords, secrets).
async fn audit(
    axum::extract::State(st): axum::extract::State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::Method;
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    let method = req.method().to_string();
    let path = req
        .extensions()
        .get::<axum::extract::OriginalUri>()
        .map_or_else(|| req.uri().path().to_string(), |u| u.path().to_string());
    let (mut parts, body) = req.into_parts();
    let identified = Caller::from_request_parts(&mut parts, &st).await;
    let caller = identified.as_ref().ok().cloned();
    parts.extensions.insert(Identified(identified));
    let resp = next
        .run(axum::extract::Request::from_parts(parts, body))
        .await;
    if let Some(c) = caller {
        let entry = AuditEntry::now(&c.user, c.console, &method, &path, resp.status().as_u16());
        keep_audit(&st, &entry).await;
    }
    resp
}

/// Stores an audit entry. A failure is logged, not returned: the request it describes is done.
pub(crate) async fn keep_audit(st: &AppState, entry: &AuditEntry) {
    if let Err(e) = st.store.record_audit(entry).await {
        tracing::warn!(error = %e, user = %entry.username, method = %entry.method, path = %entry.path, "audit entry not stored");
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        // Identified (or refused) already by the audit layer.
        if let Some(Identified(outcome)) = parts.extensions.get::<Identified>() {
            return outcome.clone();
        }
        if !parts
            .headers
            .contains_key(axum::http::header::AUTHORIZATION)
        {
            if let Some(user) =
                crate::console::session::api_user(state, &parts.method, &parts.headers).await?
            {
                return Ok(Caller {
                    user,
                    console: true,
                });
            }
        }
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                ApiError::unauthorized("missing bearer token (Authorization: Bearer <token>)")
            })?;
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ApiError::unauthorized("Authorization header must be 'Bearer <token>'")
            })?;
        authenticate_token(state, token).await.map(|user| Caller {
            user,
            console: false,
        })
    }
}

/// Finds the user a bearer token belongs to: the configured automation token (as the first
/// admin user), or a stored API token.
pub async fn authenticate_token(state: &AppState, token: &str) -> Result<User, ApiError> {
    if let Some(configured) = state
        .settings
        .api_token
        .as_deref()
        .filter(|t| !t.is_empty())
    {
        if shardline_executor::protocol::token_matches(configured, Some(token)) {
            let admin = state
                .store
                .list_users()
                .await?
                .into_iter()
                .find(|u| u.is_admin())
                .ok_or_else(|| ApiError::unauthorized("no admin user exists"))?;
            return Ok(admin);
        }
    }
    let hash = crate::auth::token_hash(token);
    let found = state
        .store
        .token_by_hash(&hash)
        .await?
        .ok_or_else(|| ApiError::unauthorized("invalid or revoked token"))?;
    let now = crate::model::now_ms();
    // Recording every use would be a write per request; a minute of precision is enough.
    if found.last_used_at.is_none_or(|t| now - t > 60_000) {
        state.store.touch_token(found.id, now).await?;
    }
    Ok(state.store.get_user(found.user_id).await?)
}
