//! `/api/v1/cron/next` (the cron helper), `/api/v1/nodes` (admins in the cluster) and the OpenAPI
//! document.

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};

use super::fields::in_range;
use crate::api::error::{Json, Query};
use crate::api::{ApiError, AppState, Caller};
use crate::cron::{parse_tz, schedule_warnings, CronExpr, Lang};
use crate::model::{now_ms, AdminNode};
use crate::refusal::{Reason, Refusal};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/cron/next", get(cron_next))
        .route("/nodes", get(nodes))
        .route("/openapi.json", get(|| async { axum::Json(openapi()) }))
}

#[derive(Debug, Deserialize)]
struct CronQuery {
    expr: String,
    tz: Option<String>,
    count: Option<usize>,
    after: Option<i64>,
    /// The language of the description and warnings: `en` (default) or `zh`.
    lang: Option<String>,
}

/// Next fire times of a cron expression, with a description and warnings (DST gaps, never fires).
async fn cron_next(
    State(st): State<AppState>,
    _caller: Caller,
    Query(q): Query<CronQuery>,
) -> Result<Json<Value>, ApiError> {
    let expr =
        CronExpr::parse(q.expr.trim()).map_err(|e| ApiError::field("expr", Refusal::from(e)))?;
    let zone =
        q.tz.as_deref()
            .filter(|z| !z.trim().is_empty())
            .unwrap_or(&st.settings.timezone);
    let tz = parse_tz(zone.trim()).map_err(|m| ApiError::field("tz", m))?;
    let count = q.count.unwrap_or(5);
    in_range("count", i64::try_from(count).unwrap_or(i64::MAX), 1, 100)?;
    let lang = match q.lang.as_deref().map(str::trim).filter(|l| !l.is_empty()) {
        None => Lang::En,
        Some(tag) => Lang::parse(tag).ok_or_else(|| {
            ApiError::field(
                "lang",
                Refusal::new(Reason::UnknownLanguage).with("value", tag),
            )
        })?,
    };
    let after = q.after.unwrap_or_else(now_ms);
    let times = expr.upcoming(after, tz, count);
    Ok(Json(json!({
        "times": times,
        "description": expr.describe(lang),
        "timezone": zone,
        "warnings": schedule_warnings(&expr, tz, after, lang),
    })))
}

async fn nodes(
    State(st): State<AppState>,
    _caller: Caller,
) -> Result<Json<Vec<AdminNode>>, ApiError> {
    Ok(Json(st.store.admin_nodes().await?))
}

/// The OpenAPI 3.0 description of `/api/v1`.
pub fn openapi() -> Value {
    let id = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}});
    // Paging of every list (`paging::requested_page`): a limit above the most is brought down to it.
    let offset = json!({"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}});
    let limit = json!({"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "default": 50, "description": "page size; above 1000 gives 1000, and the page's limit says so"}});
    let page = |desc: &str| json!({"description": desc, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Page"}}}});
    let obj = |desc: &str, schema: &str| json!({"description": desc, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}});
    let body = |schema: &str| json!({"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}});
    let errors = json!({
        "400": {"$ref": "#/components/responses/Error"},
        "401": {"$ref": "#/components/responses/Error"},
        "403": {"$ref": "#/components/responses/Error"},
        "404": {"$ref": "#/components/responses/Error"}
    });
    let with_errors = |mut ok: Value| {
        if let (Some(o), Some(e)) = (ok.as_object_mut(), errors.as_object()) {
            for (k, v) in e {
                o.insert(k.clone(), v.clone());
            }
        }
        ok
    };
    json!({
        "openapi": "3.0.3",
        "info": {"title": "Shardline admin API", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Jobs, executor groups, fires and runs of a Shardline admin. Authenticate with `Authorization: Bearer <token>`."},
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "paths": {
            "/groups": {
                "get": {"summary": "List executor groups", "responses": with_errors(json!({"200": obj("groups", "GroupList")}))},
                "post": {"summary": "Create a group (ADMIN)", "requestBody": body("Group"), "responses": with_errors(json!({"201": obj("created", "Group")}))}
            },
            "/groups/{id}": {
                "parameters": [id],
                "get": {"summary": "Get a group", "responses": with_errors(json!({"200": obj("group", "Group")}))},
                "put": {"summary": "Update a group (ADMIN)", "requestBody": body("Group"), "responses": with_errors(json!({"200": obj("group", "Group")}))},
                "delete": {"summary": "Delete a group without jobs (ADMIN)", "responses": with_errors(json!({"204": {"description": "deleted"}}))}
            },
            "/groups/{id}/executors": {"parameters": [id], "get": {"summary": "Live executors of a group with their last heartbeat", "responses": with_errors(json!({"200": obj("executors", "ExecutorList")}))}},
            "/jobs": {
                "get": {"summary": "List jobs", "parameters": [
                    {"name": "group_id", "in": "query", "schema": {"type": "integer"}},
                    {"name": "name", "in": "query", "schema": {"type": "string"}},
                    {"name": "handler", "in": "query", "schema": {"type": "string"}},
                    {"name": "enabled", "in": "query", "schema": {"type": "boolean"}},
                    offset.clone(),
                    limit.clone()],
                    "responses": with_errors(json!({"200": page("jobs")}))},
                "post": {"summary": "Create a job", "requestBody": body("Job"), "responses": with_errors(json!({"201": obj("created", "Job")}))}
            },
            "/jobs/{id}": {
                "parameters": [id],
                "get": {"summary": "Get a job", "responses": with_errors(json!({"200": obj("job", "Job")}))},
                "put": {"summary": "Update a job (fields not sent are kept)", "requestBody": body("Job"), "responses": with_errors(json!({"200": obj("job", "Job"), "409": {"$ref": "#/components/responses/Error"}}))},
                "delete": {"summary": "Delete a job", "responses": with_errors(json!({"204": {"description": "deleted"}}))}
            },
            "/jobs/{id}/start": {"parameters": [id], "post": {"summary": "Start scheduling a job", "responses": with_errors(json!({"200": obj("job", "Job")}))}},
            "/jobs/{id}/stop": {"parameters": [id], "post": {"summary": "Stop scheduling a job", "responses": with_errors(json!({"200": obj("job", "Job")}))}},
            "/jobs/{id}/trigger": {"parameters": [id], "post": {"summary": "Fire a job once now", "requestBody": {"required": false, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/TriggerRequest"}}}},
                "responses": with_errors(json!({"200": obj("the new fire", "TriggerAnswer")}))}},
            "/jobs/{id}/glue": {"parameters": [id], "get": {"summary": "GLUE source versions, newest first", "responses": with_errors(json!({"200": {"description": "versions"}}))}},
            "/jobs/{id}/checkpoints": {"parameters": [id],
                "get": {"summary": "Saved checkpoints per item", "responses": with_errors(json!({"200": {"description": "checkpoints"}}))},
                "delete": {"summary": "Clear the job's checkpoints", "responses": with_errors(json!({"200": {"description": "how many were cleared"}}))}},
            "/jobs/{id}/assignment": {"parameters": [id], "get": {"summary": "Current item assignment of an ITEMS job", "responses": with_errors(json!({"200": {"description": "items per executor"}}))}},
            "/jobs/{id}/next": {"parameters": [id], "get": {"summary": "Next planned fire times", "responses": with_errors(json!({"200": obj("times", "Times")}))}},
            "/fires": {"get": {"summary": "List fires", "parameters": [
                {"name": "job_id", "in": "query", "schema": {"type": "integer"}},
                {"name": "fire_id", "in": "query", "schema": {"type": "integer", "description": "this fire only"}},
                {"name": "state", "in": "query", "schema": {"type": "string", "enum": ["scheduled", "skipped", "triggering", "running", "succeeded", "failed"]}},
                {"name": "from", "in": "query", "schema": {"type": "integer", "description": "planned time from, epoch ms"}},
                {"name": "to", "in": "query", "schema": {"type": "integer", "description": "planned before, epoch ms"}},
                offset.clone(),
                limit.clone()],
                "responses": with_errors(json!({"200": page("fires")}))}},
            "/fires/clear": {"post": {"summary": "Delete ended fires and their runs: of a group or job (else every group the caller has), older than some days, all but the newest N, or all. Open fires, and fires whose alarm or child jobs are still to come, are kept.",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "properties": {
                    "group_id": {"type": "integer"}, "job_id": {"type": "integer"},
                    "older_than_days": {"type": "integer", "minimum": 1}, "keep_newest": {"type": "integer", "minimum": 1}, "all": {"type": "boolean"}},
                    "description": "exactly one of older_than_days, keep_newest and all: true"}}}},
                "responses": with_errors(json!({"200": {"description": "fires and runs deleted", "content": {"application/json": {"schema": {"type": "object", "properties": {"fires": {"type": "integer"}, "runs": {"type": "integer"}}}}}}}))}},
            "/fires/{id}": {"parameters": [id], "get": {"summary": "A fire with its runs and item coverage", "responses": with_errors(json!({"200": obj("fire", "Fire")}))}},
            "/fires/{id}/retry": {"parameters": [id], "post": {"summary": "Re-run the failed or missing items only", "responses": with_errors(json!({"200": {"description": "the new runs"}, "409": {"$ref": "#/components/responses/Error"}}))}},
            "/runs": {"get": {"summary": "List runs", "parameters": [
                {"name": "job_id", "in": "query", "schema": {"type": "integer"}},
                {"name": "fire_id", "in": "query", "schema": {"type": "integer"}},
                {"name": "state", "in": "query", "schema": {"$ref": "#/components/schemas/RunState"}},
                {"name": "from", "in": "query", "schema": {"type": "integer", "description": "created from, epoch ms"}},
                {"name": "to", "in": "query", "schema": {"type": "integer", "description": "created before, epoch ms"}},
                offset.clone(),
                limit.clone()],
                "responses": with_errors(json!({"200": page("runs")}))}},
            "/runs/{id}": {"parameters": [id], "get": {"summary": "Get a run", "responses": with_errors(json!({"200": obj("run", "Run")}))}},
            "/runs/{id}/log": {"parameters": [id, {"name": "from_line", "in": "query", "schema": {"type": "integer", "minimum": 1}}],
                "get": {"summary": "A page of the run's log, read from its executor", "responses": with_errors(json!({"200": {"description": "log page"}, "502": {"$ref": "#/components/responses/Error"}}))}},
            "/runs/{id}/kill": {"parameters": [id], "post": {"summary": "Kill a running run", "responses": with_errors(json!({"200": {"description": "kill result"}, "409": {"$ref": "#/components/responses/Error"}}))}},
            "/users": {
                "get": {"summary": "List users (ADMIN)", "responses": with_errors(json!({"200": {"description": "users"}}))},
                "post": {"summary": "Create a user (ADMIN)", "responses": with_errors(json!({"201": {"description": "created"}}))}},
            "/audit": {"get": {"summary": "The audit log (ADMIN): every request that could change something, by an identified caller, and the console's logins, wrong passwords of existing users, password changes and logouts, newest first (bodies are not kept)", "parameters": [
                {"name": "username", "in": "query", "schema": {"type": "string"}},
                {"name": "from", "in": "query", "schema": {"type": "integer", "description": "created from, epoch ms"}},
                {"name": "to", "in": "query", "schema": {"type": "integer", "description": "created before, epoch ms"}},
                offset.clone(),
                limit.clone()],
                "responses": with_errors(json!({"200": {"description": "audit entries (id, at, user_id, username, console, method, path, status)"}}))}},
            "/users/me": {"get": {"summary": "The calling user", "responses": with_errors(json!({"200": {"description": "user"}}))}},
            "/users/{id}": {"parameters": [id],
                "get": {"summary": "Get a user", "responses": with_errors(json!({"200": {"description": "user"}}))},
                "put": {"summary": "Change role and groups (ADMIN)", "responses": with_errors(json!({"200": {"description": "user"}}))},
                "delete": {"summary": "Delete a user (ADMIN)", "responses": with_errors(json!({"204": {"description": "deleted"}}))}},
            "/users/{id}/password": {"parameters": [id], "post": {"summary": "Set a password", "responses": with_errors(json!({"204": {"description": "changed"}}))}},
            "/tokens": {
                "get": {"summary": "List API tokens (never their secrets)", "responses": with_errors(json!({"200": {"description": "tokens"}}))},
                "post": {"summary": "Create an API token; the secret is in this answer only", "responses": with_errors(json!({"201": {"description": "token with secret"}}))}},
            "/tokens/{id}": {"parameters": [id], "delete": {"summary": "Revoke a token", "responses": with_errors(json!({"204": {"description": "revoked"}}))}},
            "/cron/next": {"get": {"summary": "Next fire times of a Quartz cron expression", "parameters": [
                {"name": "expr", "in": "query", "required": true, "schema": {"type": "string"}},
                {"name": "tz", "in": "query", "schema": {"type": "string"}},
                {"name": "count", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100}},
                {"name": "after", "in": "query", "schema": {"type": "integer", "description": "epoch ms"}},
                {"name": "lang", "in": "query", "schema": {"type": "string", "enum": ["en", "zh"], "default": "en"}, "description": "language of the description and warnings"}],
                "responses": with_errors(json!({"200": obj("times", "Times")}))}},
            "/nodes": {"get": {"summary": "Admin processes sharing this database", "responses": with_errors(json!({"200": {"description": "nodes"}}))}},
            "/dashboard": {"get": {"summary": "The console's first page for the caller's groups: counts, runs per day, running runs, recent failures", "parameters": [
                {"name": "days", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 90}}],
                "responses": with_errors(json!({"200": {"description": "dashboard"}}))}},
            "/openapi.json": {"get": {"summary": "This document", "security": [], "responses": {"200": {"description": "OpenAPI 3.0 document"}}}}
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": {"Error": {"description": "error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}},
            "schemas": {
                "Error": {"type": "object", "properties": {"error": {"type": "object", "properties": {
                    "status": {"type": "integer"}, "message": {"type": "string"}, "field": {"type": "string"},
                    "code": {"type": "string", "description": "the refusal's kind, when it has one (see admin/src/refusal.rs)"},
                    "params": {"type": "object", "additionalProperties": {"type": "string"}, "description": "the values in the message, by name"}}}}},
                "Note": {"type": "object", "nullable": true, "description": "a message the admin wrote itself, as its kind and values (see admin/src/note.rs); null for another's words",
                    "properties": {"code": {"type": "string"}, "params": {"type": "object", "additionalProperties": {"type": "string"}}}},
                "Page": {"type": "object", "properties": {"items": {"type": "array", "items": {}}, "total": {"type": "integer"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}}},
                "Times": {"type": "object", "properties": {"times": {"type": "array", "items": {"type": "integer", "description": "epoch ms"}}}},
                "RunState": {"type": "string", "enum": ["triggering", "running", "succeeded", "failed", "timed_out", "killed", "lost"]},
                "Group": {"type": "object", "properties": {
                    "id": {"type": "integer", "readOnly": true}, "appname": {"type": "string"}, "title": {"type": "string"},
                    "address_type": {"type": "string", "enum": ["AUTO", "MANUAL"]},
                    "addresses": {"type": "array", "items": {"type": "string"}},
                    "access_token": {"type": "string", "description": "shown to admins only"},
                    "generation": {"type": "string", "enum": ["CLASSIC", "V35"]}}},
                "GroupList": {"type": "array", "items": {"$ref": "#/components/schemas/Group"}},
                "ExecutorList": {"type": "array", "items": {"type": "object", "properties": {
                    "address": {"type": "string"}, "last_beat_at": {"type": "integer"}, "first_seen": {"type": "integer"},
                    "weight": {"type": "integer"}, "labels": {"type": "array", "items": {"type": "string"}},
                    "run_batch": {"type": "boolean"}}}},
                "Job": {"type": "object", "properties": {
                    "id": {"type": "integer", "readOnly": true}, "group_id": {"type": "integer"}, "name": {"type": "string"},
                    "description": {"type": "string"},
                    "schedule_type": {"type": "string", "enum": ["CRON", "FIX_RATE", "FIX_DELAY", "NONE"]},
                    "schedule_conf": {"type": "string", "description": "Quartz cron expression, or seconds for FIX_RATE / FIX_DELAY"},
                    "timezone": {"type": "string", "description": "IANA zone; empty = the admin's default"},
                    "handler": {"type": "string"}, "params": {"type": "string"},
                    "route_strategy": {"type": "string", "enum": ["FIRST", "LAST", "ROUND", "RANDOM", "CONSISTENT_HASH", "LEAST_FREQUENTLY_USED", "LEAST_RECENTLY_USED", "FAILOVER", "BUSYOVER", "SHARDING_BROADCAST"]},
                    "block_strategy": {"type": "string", "enum": ["SERIAL_EXECUTION", "DISCARD_LATER", "COVER_EARLY"]},
                    "timeout_s": {"type": "integer"}, "retry_count": {"type": "integer"}, "retry_interval_s": {"type": "integer"},
                    "retry_backoff": {"type": "integer", "description": "interval multiplier per attempt"},
                    "misfire_strategy": {"type": "string", "enum": ["DO_NOTHING", "FIRE_ONCE_NOW"]},
                    "sharding_mode": {"type": "string", "enum": ["NONE", "BROADCAST", "ITEMS"]},
                    "sharding_total": {"type": "integer"},
                    "sharding_strategy": {"type": "string", "enum": ["AVERAGE", "ODEVITY", "ROTATE", "WEIGHTED", "AFFINITY"]},
                    "item_params": {"type": "string", "example": "0=shanghai,1=beijing"},
                    "max_node": {"type": "integer"}, "resume_checkpoint": {"type": "boolean"},
                    "child_job_ids": {"type": "string", "description": "comma list (or JSON array on input)"},
                    "glue_type": {"type": "string", "enum": ["BEAN", "GLUE_SHELL", "GLUE_PYTHON", "GLUE_PYTHON2", "GLUE_NODEJS", "GLUE_POWERSHELL", "GLUE_PHP"]},
                    "glue_source": {"type": "string"}, "alarm_targets": {"type": "string"}, "enabled": {"type": "boolean"},
                    "reset_checkpoints": {"type": "boolean", "writeOnly": true},
                    "next_fire_at": {"type": "integer", "readOnly": true}}},
                "TriggerRequest": {"type": "object", "properties": {
                    "params": {"type": "string"}, "addresses": {"type": "array", "items": {"type": "string"}},
                    "shard": {"type": "object", "properties": {"index": {"type": "integer"}, "total": {"type": "integer"}}}}},
                "TriggerAnswer": {"type": "object", "properties": {"fire_id": {"type": "integer"}, "run_ids": {"type": "array", "items": {"type": "integer"}}}},
                "Run": {"type": "object", "properties": {
                    "id": {"type": "integer"}, "fire_id": {"type": "integer"}, "job_id": {"type": "integer"},
                    "shard_index": {"type": "integer"}, "shard_total": {"type": "integer"}, "attempt": {"type": "integer"},
                    "retries": {"type": "integer", "description": "retries of the item before this run (a failover is an attempt, not a retry)"},
                    "executor_address": {"type": "string"}, "state": {"$ref": "#/components/schemas/RunState"},
                    "trigger_msg": {"type": "string"}, "trigger_note": {"$ref": "#/components/schemas/Note"},
                    "handle_code": {"type": "integer"}, "handle_msg": {"type": "string"}, "handle_note": {"$ref": "#/components/schemas/Note"}}},
                "Fire": {"type": "object", "properties": {
                    "id": {"type": "integer"}, "job_id": {"type": "integer"}, "trigger_type": {"type": "string"},
                    "planned_at": {"type": "integer"}, "state": {"type": "string"},
                    "message": {"type": "string"}, "message_note": {"$ref": "#/components/schemas/Note"},
                    "alarm_state": {"type": "integer", "enum": [0, -1, 1, 2, 3], "description": "as XXL-JOB's alarm_status: 0 not (yet) failed for good, -1 sending, 1 no alarm target, 2 sent, 3 a target did not take it"},
                    "coverage": {"type": "object"}, "runs": {"type": "array", "items": {"$ref": "#/components/schemas/Run"}}}}
            }
        }
    })
}
