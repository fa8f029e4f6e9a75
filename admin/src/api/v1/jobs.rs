//! `/api/v1/jobs`: job CRUD, start/stop, manual triggers, GLUE history, checkpoints and the
//! current item assignment.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize, Serializer};
use shardline_executor::protocol::{BlockStrategy, GlueType};

use super::fields::{check_executor_address, check_len, check_name, check_text, in_range};
use super::paging::{requested_page, Page};
use crate::api::error::{Json, Path, Query};
use crate::api::{ApiError, AppState, Caller};
use crate::model::{now_ms, Checkpoint, Job, MisfireStrategy, ShardingMode, TriggerType};
use crate::refusal::{Reason, Refusal};
use crate::route::RouteStrategy;
use crate::schedule::Schedule;
use crate::sharding::{self, ItemParams};
use crate::store::JobFilter;
use crate::trigger::{FireOutcome, FireRequest};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/jobs", get(list).post(create))
        .route("/jobs/{id}", get(get_one).put(update).delete(remove))
        .route("/jobs/{id}/start", post(start))
        .route("/jobs/{id}/stop", post(stop))
        .route("/jobs/{id}/trigger", post(trigger))
        .route("/jobs/{id}/glue", get(glue_versions))
        .route(
            "/jobs/{id}/checkpoints",
            get(checkpoints).delete(clear_checkpoints),
        )
        .route("/jobs/{id}/assignment", get(assignment))
        .route("/jobs/{id}/next", get(next_fires))
}

/// A job as clients send it; every field optional (updates keep what is not sent).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobBody {
    pub group_id: Option<i64>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub schedule_type: Option<String>,
    pub schedule_conf: Option<String>,
    pub timezone: Option<String>,
    pub handler: Option<String>,
    pub params: Option<String>,
    pub route_strategy: Option<String>,
    pub block_strategy: Option<String>,
    pub timeout_s: Option<i64>,
    pub retry_count: Option<i64>,
    pub retry_interval_s: Option<i64>,
    pub retry_backoff: Option<i64>,
    pub misfire_strategy: Option<String>,
    pub sharding_mode: Option<String>,
    pub sharding_total: Option<i64>,
    pub sharding_strategy: Option<String>,
    pub item_params: Option<String>,
    pub max_node: Option<i64>,
    pub resume_checkpoint: Option<bool>,
    pub child_job_ids: Option<IdList>,
    pub glue_type: Option<String>,
    pub glue_source: Option<String>,
    pub glue_remark: Option<String>,
    pub alarm_targets: Option<String>,
    pub enabled: Option<bool>,
    /// Confirms that changing `sharding_total` may drop the job's checkpoints.
    pub reset_checkpoints: Option<bool>,
    // Read-only fields a client may echo back from a GET; ignored.
    pub id: Option<serde_json::Value>,
    pub next_fire_at: Option<serde_json::Value>,
    pub last_fire_at: Option<serde_json::Value>,
    pub created_at: Option<serde_json::Value>,
    pub updated_at: Option<serde_json::Value>,
    pub glue_updated_at: Option<serde_json::Value>,
    pub child_job_id_list: Option<serde_json::Value>,
}

/// Child job ids as a JSON list or a comma-separated string (XXL-JOB's form).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum IdList {
    List(Vec<i64>),
    Text(String),
}

impl IdList {
    fn parse(self) -> Result<Vec<i64>, ApiError> {
        match self {
            IdList::List(v) => Ok(v),
            IdList::Text(s) => s
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| {
                    p.parse::<i64>().map_err(|_| {
                        ApiError::field(
                            "child_job_ids",
                            Refusal::new(Reason::NotJobId).with("value", format_args!("{p:?}")),
                        )
                    })
                })
                .collect(),
        }
    }
}

/// A job as the API shows it.
#[derive(Debug)]
pub struct JobView {
    pub job: Job,
    pub child_job_id_list: Vec<i64>,
}

impl Serialize for JobView {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut v = serde_json::to_value(&self.job).map_err(serde::ser::Error::custom)?;
        if let Some(m) = v.as_object_mut() {
            // Stored as 0/1; shown as the booleans the document declares and clients send back.
            m.insert("enabled".into(), (self.job.enabled != 0).into());
            m.insert(
                "resume_checkpoint".into(),
                (self.job.resume_checkpoint != 0).into(),
            );
            m.insert(
                "child_job_id_list".into(),
                self.child_job_id_list.clone().into(),
            );
        }
        v.serialize(s)
    }
}

fn view(job: Job) -> JobView {
    JobView {
        child_job_id_list: job.child_ids(),
        job,
    }
}

/// Applies `body` over `base` and checks every field. Returns the job and whether its GLUE
/// source changed.
async fn merge_and_validate(
    st: &AppState,
    caller: &Caller,
    base: &Job,
    body: JobBody,
) -> Result<(Job, bool), ApiError> {
    let mut j = base.clone();
    macro_rules! take {
        ($f:ident) => {
            if let Some(v) = body.$f {
                j.$f = v;
            }
        };
    }
    take!(group_id);
    take!(name);
    take!(description);
    take!(schedule_type);
    take!(schedule_conf);
    take!(timezone);
    take!(handler);
    take!(params);
    take!(route_strategy);
    take!(block_strategy);
    take!(timeout_s);
    take!(retry_count);
    take!(retry_interval_s);
    take!(retry_backoff);
    take!(misfire_strategy);
    take!(sharding_mode);
    take!(sharding_total);
    take!(sharding_strategy);
    take!(item_params);
    take!(max_node);
    take!(glue_type);
    take!(glue_source);
    take!(alarm_targets);
    if let Some(v) = body.resume_checkpoint {
        j.resume_checkpoint = i64::from(v);
    }
    if let Some(v) = body.enabled {
        j.enabled = i64::from(v);
    }

    // Ownership: the group exists and the caller may use it.
    if j.group_id <= 0 {
        return Err(ApiError::field("group_id", Reason::Required));
    }
    if st.store.get_group(j.group_id).await.is_err() {
        return Err(ApiError::field(
            "group_id",
            Refusal::new(Reason::NoSuchGroup).with("id", j.group_id),
        ));
    }
    caller.require_group(j.group_id)?;

    j.name = j.name.trim().to_string();
    check_name("name", &j.name, 255)?;
    check_text("description", &j.description)?;
    check_text("params", &j.params)?;
    check_text("alarm_targets", &j.alarm_targets)?;
    crate::alarm::parse_targets(&j.alarm_targets)
        .map_err(|e| ApiError::field("alarm_targets", e))?;
    check_text("item_params", &j.item_params)?;
    j.schedule_type = j.schedule_type.trim().to_ascii_uppercase();
    j.schedule_conf = j.schedule_conf.trim().to_string();
    check_len("schedule_conf", &j.schedule_conf, 255)?;
    // Checked for every schedule type: the zone is kept and used once the type becomes CRON.
    j.timezone = j.timezone.trim().to_string();
    if !j.timezone.is_empty() {
        crate::cron::parse_tz(&j.timezone).map_err(|r| ApiError::field("timezone", r))?;
    }
    let schedule = Schedule::parse(
        &j.schedule_type,
        &j.schedule_conf,
        &j.timezone,
        &st.settings.timezone,
    )
    .map_err(|e| ApiError::field(e.field, e.refusal))?;
    if matches!(schedule, Schedule::None) {
        j.schedule_conf.clear();
    }
    RouteStrategy::parse(&j.route_strategy)
        .map_err(|e| ApiError::field("route_strategy", Refusal::from(e)))?;
    BlockStrategy::parse(&j.block_strategy).ok_or_else(|| {
        let names: Vec<&str> = BlockStrategy::ALL.iter().map(|b| b.as_str()).collect();
        ApiError::field("block_strategy", Refusal::one_of(&j.block_strategy, &names))
    })?;
    MisfireStrategy::parse(&j.misfire_strategy)
        .map_err(|e| ApiError::field("misfire_strategy", e))?;
    let mode =
        ShardingMode::parse(&j.sharding_mode).map_err(|e| ApiError::field("sharding_mode", e))?;
    in_range("timeout_s", j.timeout_s, 0, 7 * 86_400)?;
    in_range("retry_count", j.retry_count, 0, 100)?;
    in_range("retry_interval_s", j.retry_interval_s, 0, 86_400)?;
    in_range("retry_backoff", j.retry_backoff, 1, 10)?;
    in_range("max_node", j.max_node, 0, 100_000)?;

    // Stored by its canonical name (aliases and case are accepted), in every mode.
    j.sharding_strategy = sharding::parse_strategy(&j.sharding_strategy)
        .map_err(|e| ApiError::field("sharding_strategy", Refusal::from(e)))?
        .name()
        .to_string();
    match mode {
        ShardingMode::Items => {
            let n = in_range("sharding_total", j.sharding_total, 1, 100_000)?;
            ItemParams::parse(&j.item_params, n as u32)
                .map_err(|e| ApiError::field("item_params", Refusal::from(e)))?;
        }
        _ => {
            if !j.item_params.trim().is_empty() {
                return Err(ApiError::field("item_params", Reason::ItemParamsNeedItems));
            }
            j.sharding_total = in_range("sharding_total", j.sharding_total, 1, 100_000)?;
        }
    }

    let glue = GlueType::parse(&j.glue_type).ok_or_else(|| {
        // GLUE_GROOVY is a glue type, but not one to offer (below).
        let names: Vec<&str> = GlueType::ALL
            .iter()
            .filter(|g| **g != GlueType::GlueGroovy)
            .map(|g| g.as_str())
            .collect();
        ApiError::field("glue_type", Refusal::one_of(&j.glue_type, &names))
    })?;
    if glue == GlueType::GlueGroovy {
        return Err(ApiError::field("glue_type", Reason::GroovyUnsupported));
    }
    if glue == GlueType::Bean {
        j.handler = j.handler.trim().to_string();
        if j.handler.is_empty() {
            return Err(ApiError::field("handler", Reason::HandlerNeeded));
        }
    } else if j.glue_source.trim().is_empty() {
        return Err(ApiError::field("glue_source", Reason::SourceNeeded));
    }
    check_len("handler", &j.handler, 255)?;
    if glue == GlueType::GlueShell {
        // As XXL-JOB does: scripts edited on Windows must still run under bash.
        j.glue_source = j.glue_source.replace('\r', "");
    }

    if let Some(ids) = body.child_job_ids {
        let mut ids = ids.parse()?;
        // Each child once, in the order given.
        let mut seen = std::collections::HashSet::new();
        ids.retain(|id| seen.insert(*id));
        for id in &ids {
            if *id == j.id {
                return Err(ApiError::field("child_job_ids", Reason::OwnChild));
            }
            let Ok(child) = st.store.get_job(*id).await else {
                return Err(ApiError::field(
                    "child_job_ids",
                    Refusal::new(Reason::NoSuchJob).with("id", id),
                ));
            };
            // A child fires on the parent's behalf: the caller must be allowed to fire it.
            caller.require_group(child.group_id)?;
        }
        j.child_job_ids = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        check_len("child_job_ids", &j.child_job_ids, 1024)?;
    }

    // Changing N changes MOD(id, N) routing: saved checkpoints would point into other items.
    if j.id != 0 && mode == ShardingMode::Items && j.sharding_total != base.sharding_total {
        let cps = st.store.checkpoints(j.id).await?;
        if !cps.is_empty() {
            if body.reset_checkpoints != Some(true) {
                return Err(ApiError::conflict(
                    Refusal::new(Reason::TotalChangesRouting)
                        .with("from", base.sharding_total)
                        .with("to", j.sharding_total)
                        .with("n", cps.len()),
                ));
            }
            st.store.clear_checkpoints(j.id).await?;
        }
    }

    if j.enabled != 0 {
        if matches!(schedule, Schedule::None) {
            return Err(ApiError::field("enabled", Reason::NeverFires));
        }
        let schedule_changed = j.schedule_type != base.schedule_type
            || j.schedule_conf != base.schedule_conf
            || j.timezone != base.timezone
            || base.enabled == 0;
        if schedule_changed || j.next_fire_at.is_none() {
            j.next_fire_at = schedule.first_after(now_ms());
        }
        if j.next_fire_at.is_none() {
            // Enabled with nothing planned would look scheduled and never run; start() refuses it too.
            return Err(ApiError::field("schedule_conf", Reason::NeverFiresAgain));
        }
    } else {
        j.next_fire_at = None;
    }

    if let Some(remark) = &body.glue_remark {
        check_len("glue_remark", remark, 255)?;
    }
    let glue_changed = j.glue_type != base.glue_type || j.glue_source != base.glue_source;
    if glue_changed {
        j.glue_updated_at = now_ms();
    }
    Ok((j, glue_changed && glue != GlueType::Bean))
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    group_id: Option<i64>,
    name: Option<String>,
    handler: Option<String>,
    enabled: Option<bool>,
    #[serde(default)]
    offset: i64,
    limit: Option<i64>,
}

async fn list(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> Result<Json<Page<JobView>>, ApiError> {
    let (offset, limit) = requested_page(q.offset, q.limit)?;
    let f = JobFilter {
        group_ids: caller.group_scope(),
        group_id: q.group_id,
        name: q.name.filter(|s| !s.is_empty()),
        handler: q.handler.filter(|s| !s.is_empty()),
        enabled: q.enabled,
        offset,
        limit,
    };
    let (rows, total) = st.store.list_jobs(&f).await?;
    let items = rows.into_iter().map(view).collect();
    Ok(Json(Page {
        items,
        total,
        offset,
        limit,
    }))
}

async fn create(
    State(st): State<AppState>,
    caller: Caller,
    Json(body): Json<JobBody>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    let remark = body
        .glue_remark
        .clone()
        .unwrap_or_else(|| "first version".into());
    let (job, glue_changed) = merge_and_validate(&st, &caller, &Job::default(), body).await?;
    let now = now_ms();
    let id = st.store.create_job(&job, now).await?;
    if job.enabled != 0 {
        st.dispatcher.notify_schedule_changed();
    }
    if glue_changed {
        st.store
            .add_glue_version(id, &job.glue_type, &job.glue_source, &remark, now)
            .await?;
    }
    Ok((StatusCode::CREATED, Json(view(st.store.get_job(id).await?))))
}

/// Loads a job the caller may see.
pub async fn load(st: &AppState, caller: &Caller, id: i64) -> Result<Job, ApiError> {
    let job = st.store.get_job(id).await?;
    caller.require_group(job.group_id)?;
    Ok(job)
}

async fn get_one(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<JobView>, ApiError> {
    Ok(Json(view(load(&st, &caller, id).await?)))
}

async fn update(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
    Json(body): Json<JobBody>,
) -> Result<Json<JobView>, ApiError> {
    let current = load(&st, &caller, id).await?;
    let remark = body.glue_remark.clone().unwrap_or_default();
    let (job, glue_changed) = merge_and_validate(&st, &caller, &current, body).await?;
    let now = now_ms();
    st.store.update_job(&job, now).await?;
    if job.next_fire_at != current.next_fire_at || job.enabled != current.enabled {
        // Fires already claimed for the old schedule must not happen any more.
        cancel_unsent(&st, id).await?;
        st.dispatcher.notify_schedule_changed();
    }
    if glue_changed {
        st.store
            .add_glue_version(id, &job.glue_type, &job.glue_source, &remark, now)
            .await?;
    }
    Ok(Json(view(st.store.get_job(id).await?)))
}

/// Drops the job's fires not yet sent: the claimed ones, and the prepared ones whose last look
/// at the job is still to come (see [`crate::store::Store::cancel_scheduled`]).
async fn cancel_unsent(st: &AppState, id: i64) -> Result<u64, crate::store::StoreError> {
    let unsent_from = now_ms() + crate::scheduler::CHECK_AHEAD_MS + 1;
    st.store.cancel_scheduled(id, unsent_from).await
}

async fn remove(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    load(&st, &caller, id).await?;
    st.store.delete_job(id).await?;
    cancel_unsent(&st, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn start(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<JobView>, ApiError> {
    let job = load(&st, &caller, id).await?;
    let schedule = Schedule::of_job(&job, &st.settings.timezone)
        .map_err(|e| ApiError::field(e.field, e.refusal))?;
    if matches!(schedule, Schedule::None) {
        return Err(ApiError::bad_request(Reason::NeverFires));
    }
    let next = schedule.first_after(now_ms());
    if next.is_none() {
        return Err(ApiError::bad_request(Reason::NeverFiresAgain));
    }
    cancel_unsent(&st, id).await?;
    st.store.set_job_enabled(id, true, next, now_ms()).await?;
    st.dispatcher.notify_schedule_changed();
    Ok(Json(view(st.store.get_job(id).await?)))
}

async fn stop(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<JobView>, ApiError> {
    load(&st, &caller, id).await?;
    st.store.set_job_enabled(id, false, None, now_ms()).await?;
    cancel_unsent(&st, id).await?;
    Ok(Json(view(st.store.get_job(id).await?)))
}

/// Body of a manual trigger.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerBody {
    /// Replaces the job's parameters for this fire.
    pub params: Option<String>,
    /// Runs on these executors instead of the group's.
    pub addresses: Option<Vec<String>>,
    /// Runs a single shard `{ "index": i, "total": n }`.
    pub shard: Option<ShardSpec>,
}

#[derive(Debug, Deserialize)]
pub struct ShardSpec {
    pub index: i64,
    pub total: i64,
}

#[derive(Debug, Serialize)]
pub struct TriggerAnswer {
    pub fire_id: i64,
    pub run_ids: Vec<i64>,
}

async fn trigger(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
    body: axum::body::Bytes,
) -> Result<Json<TriggerAnswer>, ApiError> {
    let job = load(&st, &caller, id).await?;
    // The body is optional: an empty POST fires with the job's own settings.
    let body: TriggerBody = if body.iter().all(u8::is_ascii_whitespace) {
        TriggerBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?
    };
    // XXL-JOB's vocabulary: a person's "run once" is MANUAL, automation is API.
    let mut req = FireRequest::manual(if caller.console {
        TriggerType::Manual
    } else {
        TriggerType::Api
    });
    if let Some(p) = &body.params {
        check_text("params", p)?;
    }
    req.params = body.params;
    if let Some(addrs) = body.addresses {
        let addrs: Vec<String> = addrs
            .into_iter()
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .collect();
        if addrs.is_empty() {
            return Err(ApiError::field("addresses", Reason::NoAddressGiven));
        }
        for a in &addrs {
            check_executor_address(a)?;
        }
        req.addresses = Some(addrs);
    }
    if let Some(s) = body.shard {
        // The wire carries index and total as 32-bit numbers; the bound is sharding_total's.
        if !(1..=100_000).contains(&s.total) {
            return Err(ApiError::field(
                "shard",
                Refusal::new(Reason::ShardTotal).with("got", s.total),
            ));
        }
        if s.index < 0 || s.index >= s.total {
            return Err(ApiError::field(
                "shard",
                Refusal::new(Reason::ShardIndex)
                    .with("index", s.index)
                    .with("total", s.total),
            ));
        }
        req.shard = Some((s.index, s.total));
    }
    match st.dispatcher.fire(&job, req).await? {
        FireOutcome::Fired { fire_id, run_ids } => Ok(Json(TriggerAnswer { fire_id, run_ids })),
        FireOutcome::AlreadyFired => Err(ApiError::conflict(Reason::FireExists)),
    }
}

async fn glue_versions(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<Vec<crate::store::GlueVersion>>, ApiError> {
    load(&st, &caller, id).await?;
    Ok(Json(st.store.glue_versions(id).await?))
}

async fn checkpoints(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<Vec<Checkpoint>>, ApiError> {
    load(&st, &caller, id).await?;
    Ok(Json(st.store.checkpoints(id).await?))
}

async fn clear_checkpoints(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<serde_json::Value>, ApiError> {
    load(&st, &caller, id).await?;
    let n = st.store.clear_checkpoints(id).await?;
    Ok(Json(serde_json::json!({ "cleared": n })))
}

/// Which online executor would run which item if the job fired now.
#[derive(Debug, Serialize)]
pub struct AssignmentView {
    pub strategy: String,
    pub sharding_total: i64,
    pub executors: Vec<AssignedExecutor>,
}

#[derive(Debug, Serialize)]
pub struct AssignedExecutor {
    pub address: String,
    pub items: Vec<u32>,
}

async fn assignment(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<AssignmentView>, ApiError> {
    let job = load(&st, &caller, id).await?;
    if job.sharding_mode != ShardingMode::Items.as_str() {
        return Err(ApiError::bad_request(Reason::OnlyItemsAssigned));
    }
    let group = st.store.get_group(job.group_id).await?;
    let live = super::groups::live_executors(&st, &group).await?;
    let execs: Vec<sharding::ShardExecutor> = live
        .iter()
        .map(|e| sharding::ShardExecutor {
            address: e.address.clone(),
            weight: e.weight,
            labels: e.labels.clone(),
        })
        .collect();
    let n = job.sharding_total.max(1) as u32;
    let params = ItemParams::parse(&job.item_params, n)
        .map_err(|e| ApiError::bad_request(Refusal::from(e)))?;
    let strategy = sharding::parse_strategy(&job.sharding_strategy)
        .map_err(|e| ApiError::bad_request(Refusal::from(e)))?;
    let a = strategy.assign(&execs, &job.name, n, &params);
    Ok(Json(AssignmentView {
        strategy: strategy.name().to_string(),
        sharding_total: job.sharding_total,
        executors: execs
            .iter()
            .enumerate()
            .map(|(i, e)| AssignedExecutor {
                address: e.address.clone(),
                items: a.items_of(i).to_vec(),
            })
            .collect(),
    }))
}

#[derive(Debug, Deserialize)]
struct NextQuery {
    count: Option<usize>,
}

async fn next_fires(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
    Query(q): Query<NextQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let job = load(&st, &caller, id).await?;
    let schedule = Schedule::of_job(&job, &st.settings.timezone)
        .map_err(|e| ApiError::field(e.field, e.refusal))?;
    let times = schedule.preview(now_ms(), q.count.unwrap_or(5).clamp(1, 100));
    Ok(Json(serde_json::json!({ "times": times })))
}
