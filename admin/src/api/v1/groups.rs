//! `/api/v1/groups`: executor groups and their live executors.

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use serde::{Deserialize, Serialize};

use super::fields::{check_executor_address, check_len, check_name};
use crate::api::error::{Json, Path};
use crate::api::{ApiError, AppState, Caller};
use crate::model::{now_ms, AddressType, Group};
use crate::refusal::Reason;
use crate::store::GroupInput;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/groups", get(list).post(create))
        .route("/groups/{id}", get(get_one).put(update).delete(remove))
        .route("/groups/{id}/executors", get(executors))
}

#[derive(Debug, Deserialize)]
pub struct GroupBody {
    pub appname: Option<String>,
    pub title: Option<String>,
    pub address_type: Option<String>,
    /// A list, or one comma-separated string.
    pub addresses: Option<AddressList>,
    pub access_token: Option<String>,
    pub generation: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum AddressList {
    List(Vec<String>),
    Text(String),
}

impl AddressList {
    fn into_vec(self) -> Vec<String> {
        let v = match self {
            AddressList::List(v) => v,
            AddressList::Text(s) => s.split(',').map(str::to_string).collect(),
        };
        v.into_iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }
}

/// A group as the API shows it; the access token only to admins.
#[derive(Debug, Serialize)]
pub struct GroupView {
    pub id: i64,
    pub appname: String,
    pub title: String,
    pub address_type: String,
    pub addresses: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_token: Option<String>,
    pub generation: String,
    pub created_at: i64,
    pub updated_at: i64,
}

pub fn view(g: Group, caller: &Caller) -> GroupView {
    let addresses = g.manual_addresses();
    GroupView {
        id: g.id,
        appname: g.appname,
        title: g.title,
        address_type: g.address_type,
        addresses,
        access_token: caller.user.is_admin().then_some(g.access_token),
        generation: g.generation,
        created_at: g.created_at,
        updated_at: g.updated_at,
    }
}

/// Validates a body against the current group (for updates) or defaults (for creation).
fn validate(body: GroupBody, current: Option<&Group>) -> Result<GroupInput, ApiError> {
    let appname = body
        .appname
        .or_else(|| current.map(|g| g.appname.clone()))
        .ok_or_else(|| ApiError::field("appname", Reason::Required))?
        .trim()
        .to_string();
    check_name(
        "appname",
        &appname,
        shardline_executor::protocol::MAX_APPNAME_CHARS,
    )?;
    if !appname
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(ApiError::field("appname", Reason::AppnameChars));
    }
    let title = body
        .title
        .or_else(|| current.map(|g| g.title.clone()))
        .unwrap_or_else(|| appname.clone())
        .trim()
        .to_string();
    check_name("title", &title, 128)?;
    let address_type = body
        .address_type
        .or_else(|| current.map(|g| g.address_type.clone()))
        .unwrap_or_else(|| "AUTO".into());
    AddressType::parse(&address_type).map_err(|e| ApiError::field("address_type", e))?;
    let addresses = match body.addresses {
        Some(list) => list.into_vec(),
        None => current.map(Group::manual_addresses).unwrap_or_default(),
    };
    for a in &addresses {
        check_executor_address(a)?;
    }
    if address_type == "MANUAL" && addresses.is_empty() {
        return Err(ApiError::field("addresses", Reason::ManualNeedsAddress));
    }
    let generation = body
        .generation
        .or_else(|| current.map(|g| g.generation.clone()))
        .unwrap_or_else(|| "CLASSIC".into());
    if generation != "CLASSIC" && generation != "V35" {
        return Err(ApiError::field("generation", Reason::Generation));
    }
    let access_token = body
        .access_token
        .or_else(|| current.map(|g| g.access_token.clone()))
        .unwrap_or_default();
    check_len("access_token", &access_token, 255)?;
    Ok(GroupInput {
        appname,
        title,
        address_type,
        addresses: addresses.join(","),
        access_token,
        generation,
    })
}

async fn list(
    State(st): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<GroupView>>, ApiError> {
    let groups = st.store.list_groups().await?;
    Ok(Json(
        groups
            .into_iter()
            .filter(|g| caller.user.can_access_group(g.id))
            .map(|g| view(g, &caller))
            .collect(),
    ))
}

async fn create(
    State(st): State<AppState>,
    caller: Caller,
    Json(body): Json<GroupBody>,
) -> Result<(axum::http::StatusCode, Json<GroupView>), ApiError> {
    caller.require_admin()?;
    let input = validate(body, None)?;
    let id = st.store.create_group(&input, now_ms()).await?;
    let g = st.store.get_group(id).await?;
    Ok((axum::http::StatusCode::CREATED, Json(view(g, &caller))))
}

async fn get_one(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<GroupView>, ApiError> {
    let g = st.store.get_group(id).await?;
    caller.require_group(id)?;
    Ok(Json(view(g, &caller)))
}

async fn update(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
    Json(body): Json<GroupBody>,
) -> Result<Json<GroupView>, ApiError> {
    caller.require_admin()?;
    let current = st.store.get_group(id).await?;
    let input = validate(body, Some(&current))?;
    st.store.update_group(id, &input, now_ms()).await?;
    Ok(Json(view(st.store.get_group(id).await?, &caller)))
}

async fn remove(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<axum::http::StatusCode, ApiError> {
    caller.require_admin()?;
    st.store.delete_group(id).await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// A live executor of a group.
#[derive(Debug, Serialize)]
pub struct ExecutorView {
    pub address: String,
    pub last_beat_at: Option<i64>,
    pub first_seen: Option<i64>,
    pub weight: u32,
    pub labels: Vec<String>,
    /// It takes many runs in one request (registered by the Shardline SDK).
    pub run_batch: bool,
}

pub async fn live_executors(st: &AppState, g: &Group) -> Result<Vec<ExecutorView>, ApiError> {
    if g.address_type == "MANUAL" {
        return Ok(g
            .manual_addresses()
            .into_iter()
            .map(|address| ExecutorView {
                address,
                last_beat_at: None,
                first_seen: None,
                weight: 1,
                labels: vec![],
                run_batch: false,
            })
            .collect());
    }
    let since = now_ms() - st.settings.dead_after_ms();
    Ok(st
        .store
        .live_executors(&g.appname, since)
        .await?
        .into_iter()
        .map(|e| {
            let meta: shardline_executor::protocol::ExecutorMeta =
                serde_json::from_str(&e.meta).unwrap_or_default();
            ExecutorView {
                address: e.address,
                last_beat_at: Some(e.updated_at),
                first_seen: Some(e.first_seen),
                weight: meta.weight.unwrap_or(1).max(1),
                labels: meta.labels,
                run_batch: meta.run_batch,
            }
        })
        .collect())
}

async fn executors(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<Vec<ExecutorView>>, ApiError> {
    let g = st.store.get_group(id).await?;
    caller.require_group(id)?;
    Ok(Json(live_executors(&st, &g).await?))
}
