//! `/api/v1/users`, `/api/v1/tokens` and `/api/v1/audit`. Admins manage everyone and read the
//! audit log; a user sees himself and his own tokens.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use axum::Router;
use serde::{Deserialize, Serialize};

use super::fields::check_name;
use super::paging::{requested_page, Page};
use crate::api::error::{Json, Path, Query};
use crate::api::{ApiError, AppState, Caller};
use crate::auth;
use crate::model::{now_ms, ApiToken, AuditEntry, Role, User};
use crate::refusal::{Reason, Refusal};
use crate::store::{AuditFilter, StoreError};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/users", get(list_users).post(create_user))
        .route("/users/me", get(me))
        .route(
            "/users/{id}",
            get(get_user).put(update_user).delete(delete_user),
        )
        .route("/users/{id}/password", post(set_password))
        .route("/tokens", get(list_tokens).post(create_token))
        .route("/tokens/{id}", delete(revoke_token))
        .route("/audit", get(list_audit))
}

#[derive(Debug, Deserialize)]
struct AuditQuery {
    username: Option<String>,
    /// Time from, epoch ms (inclusive).
    from: Option<i64>,
    /// Time to, epoch ms (exclusive).
    to: Option<i64>,
    #[serde(default)]
    offset: i64,
    limit: Option<i64>,
}

/// The audit log (ADMIN): who changed what, newest first.
async fn list_audit(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<AuditQuery>,
) -> Result<Json<Page<AuditEntry>>, ApiError> {
    caller.require_admin()?;
    let (offset, limit) = requested_page(q.offset, q.limit)?;
    let f = AuditFilter {
        username: q.username.filter(|u| !u.trim().is_empty()),
        from_ms: q.from,
        to_ms: q.to,
        offset,
        limit,
    };
    let (items, total) = st.store.list_audit(&f).await?;
    Ok(Json(Page {
        items,
        total,
        offset,
        limit,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UserBody {
    username: Option<String>,
    password: Option<String>,
    role: Option<String>,
    group_ids: Option<Vec<i64>>,
}

fn check_username(name: &str) -> Result<(), ApiError> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
    {
        return Err(ApiError::field("username", Reason::Username));
    }
    Ok(())
}

fn join_ids(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// Checks that every group exists and returns the list as stored (each group once).
async fn group_list(st: &AppState, ids: &[i64]) -> Result<String, ApiError> {
    let mut unique: Vec<i64> = Vec::with_capacity(ids.len());
    for id in ids {
        if unique.contains(id) {
            continue;
        }
        if matches!(st.store.get_group(*id).await, Err(StoreError::NotFound(_))) {
            return Err(ApiError::field(
                "group_ids",
                Refusal::new(Reason::NoSuchGroup).with("id", id),
            ));
        }
        unique.push(*id);
    }
    let joined = join_ids(&unique);
    // The column holds 1024 characters.
    if joined.len() > 1024 {
        return Err(ApiError::field("group_ids", Reason::TooManyGroups));
    }
    Ok(joined)
}

async fn list_users(
    State(st): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<User>>, ApiError> {
    caller.require_admin()?;
    Ok(Json(st.store.list_users().await?))
}

async fn me(caller: Caller) -> Json<User> {
    Json(caller.user)
}

async fn get_user(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<User>, ApiError> {
    if caller.user.id != id {
        caller.require_admin()?;
    }
    Ok(Json(st.store.get_user(id).await?))
}

async fn create_user(
    State(st): State<AppState>,
    caller: Caller,
    Json(body): Json<UserBody>,
) -> Result<(StatusCode, Json<User>), ApiError> {
    caller.require_admin()?;
    let username = body.username.unwrap_or_default().trim().to_string();
    check_username(&username)?;
    let password = body
        .password
        .ok_or_else(|| ApiError::field("password", Reason::Required))?;
    auth::check_password_strength(&password).map_err(|m| ApiError::field("password", m))?;
    let role = body.role.unwrap_or_else(|| "USER".into());
    Role::parse(&role).map_err(|e| ApiError::field("role", e))?;
    let groups = group_list(&st, &body.group_ids.unwrap_or_default()).await?;
    let hash = auth::hash_password_async(password)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let id = st
        .store
        .create_user(&username, &hash, &role, &groups, false, now_ms())
        .await?;
    Ok((StatusCode::CREATED, Json(st.store.get_user(id).await?)))
}

async fn update_user(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
    Json(body): Json<UserBody>,
) -> Result<Json<User>, ApiError> {
    caller.require_admin()?;
    let current = st.store.get_user(id).await?;
    if body
        .username
        .as_deref()
        .is_some_and(|u| u != current.username)
    {
        return Err(ApiError::field("username", Reason::Unchangeable));
    }
    if body.password.is_some() {
        return Err(ApiError::field(
            "password",
            Refusal::new(Reason::PasswordEndpoint).with("id", id),
        ));
    }
    let role = body.role.unwrap_or(current.role.clone());
    Role::parse(&role).map_err(|e| ApiError::field("role", e))?;
    if current.id == caller.user.id && role != Role::Admin.as_str() {
        return Err(ApiError::field("role", Reason::OwnAdminRole));
    }
    let groups = match body.group_ids {
        Some(g) => group_list(&st, &g).await?,
        None => current.group_ids,
    };
    st.store
        .update_user_access(id, &role, &groups, now_ms())
        .await?;
    Ok(Json(st.store.get_user(id).await?))
}

async fn delete_user(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    caller.require_admin()?;
    if id == caller.user.id {
        return Err(ApiError::bad_request(Reason::DeleteSelf));
    }
    st.store.delete_user(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PasswordBody {
    password: String,
}

async fn set_password(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
    Json(body): Json<PasswordBody>,
) -> Result<StatusCode, ApiError> {
    if caller.user.id != id {
        caller.require_admin()?;
    }
    auth::check_password_strength(&body.password).map_err(|m| ApiError::field("password", m))?;
    let hash = auth::hash_password_async(body.password)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    st.store.set_password(id, &hash, false, now_ms()).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_tokens(
    State(st): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<ApiToken>>, ApiError> {
    let scope = (!caller.user.is_admin()).then_some(caller.user.id);
    Ok(Json(st.store.list_tokens(scope).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenBody {
    name: String,
    /// Admins may create a token for another user.
    user_id: Option<i64>,
}

#[derive(Debug, Serialize)]
struct NewToken {
    #[serde(flatten)]
    token: ApiToken,
    /// The secret, shown this once only.
    secret: String,
}

async fn create_token(
    State(st): State<AppState>,
    caller: Caller,
    Json(body): Json<TokenBody>,
) -> Result<(StatusCode, Json<NewToken>), ApiError> {
    let name = body.name.trim();
    check_name("name", name, 128)?;
    let user_id = match body.user_id {
        Some(u) if u != caller.user.id => {
            caller.require_admin()?;
            st.store.get_user(u).await?.id
        }
        _ => caller.user.id,
    };
    let (secret, hash, prefix) = auth::new_api_token();
    let id = st
        .store
        .create_token(user_id, name, &hash, &prefix, now_ms())
        .await?;
    let token = st.store.get_token(id).await?;
    Ok((StatusCode::CREATED, Json(NewToken { token, secret })))
}

async fn revoke_token(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    let token = st.store.get_token(id).await?;
    if token.user_id != caller.user.id {
        caller.require_admin()?;
    }
    st.store.revoke_token(id, now_ms()).await?;
    Ok(StatusCode::NO_CONTENT)
}
