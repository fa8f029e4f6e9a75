//! `/api/v1/fires` and `/api/v1/runs`: what happened, item by item, and the actions on it
//! (retry failed items, kill, read a run's log).

use std::collections::BTreeMap;

use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use shardline_executor::protocol::LogResult;

use super::paging::{requested_page, Page};
use crate::api::error::{Json, Path, Query};
use crate::api::{ApiError, AppState, Caller};
use crate::model::{now_ms, Fire, FireState, Run, RunState};
use crate::note::{Note, NoteKind};
use crate::refusal::{Reason, Refusal};
use crate::store::{ClearCut, HistoryFilter};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/fires", get(list_fires))
        .route("/fires/clear", post(clear_fires))
        .route("/fires/{id}", get(get_fire))
        .route("/fires/{id}/retry", post(retry_fire))
        .route("/runs", get(list_runs))
        .route("/runs/{id}", get(get_run))
        .route("/runs/{id}/log", get(run_log))
        .route("/runs/{id}/kill", post(kill_run))
}

/// The query of both history lists (`/fires` and `/runs`).
#[derive(Debug, Deserialize)]
struct HistoryQuery {
    job_id: Option<i64>,
    /// The fire itself in `/fires`, its runs in `/runs`.
    fire_id: Option<i64>,
    state: Option<String>,
    /// Epoch ms, inclusive: a fire's planned time, a run's creation.
    from: Option<i64>,
    /// Epoch ms, exclusive.
    to: Option<i64>,
    #[serde(default)]
    offset: i64,
    limit: Option<i64>,
}

impl HistoryQuery {
    /// The store's filter, in the caller's groups; `parse_state` checks `state` (a fire's states
    /// or a run's).
    fn filter<S>(
        self,
        caller: &Caller,
        parse_state: fn(&str) -> Result<S, Refusal>,
    ) -> Result<HistoryFilter, ApiError> {
        let state = self.state.filter(|s| !s.is_empty());
        if let Some(s) = &state {
            parse_state(s).map_err(|e| ApiError::field("state", e))?;
        }
        let (offset, limit) = requested_page(self.offset, self.limit)?;
        Ok(HistoryFilter {
            group_ids: caller.group_scope(),
            job_id: self.job_id,
            fire_id: self.fire_id,
            state,
            from_ms: self.from,
            to_ms: self.to,
            offset,
            limit,
        })
    }
}

async fn list_fires(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<HistoryQuery>,
) -> Result<Json<Page<Fire>>, ApiError> {
    let f = q.filter(&caller, FireState::parse)?;
    let (items, total) = st.store.list_fires(&f).await?;
    Ok(Json(Page {
        items,
        total,
        offset: f.offset,
        limit: f.limit,
    }))
}

/// What to clear: XXL-JOB's "clear logs" (by group or job; older than some time, all but the
/// newest N, or all). Exactly one of `older_than_days`, `keep_newest` and `all`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClearRequest {
    group_id: Option<i64>,
    job_id: Option<i64>,
    older_than_days: Option<i64>,
    keep_newest: Option<i64>,
    #[serde(default)]
    all: bool,
}

#[derive(Debug, Serialize)]
struct ClearAnswer {
    fires: u64,
    runs: u64,
}

/// Deletes ended fires and their runs in the caller's groups (open fires, and fires whose
/// alarm or child jobs are still to come, are kept).
async fn clear_fires(
    State(st): State<AppState>,
    caller: Caller,
    Json(req): Json<ClearRequest>,
) -> Result<Json<ClearAnswer>, ApiError> {
    const DAY_MS: i64 = 86_400_000;
    let cut = match (req.older_than_days, req.keep_newest, req.all) {
        (Some(d), None, false) if d >= 1 => {
            ClearCut::CreatedBefore(now_ms().saturating_sub(d.saturating_mul(DAY_MS)))
        }
        (Some(_), None, false) => {
            return Err(ApiError::field(
                "older_than_days",
                Refusal::new(Reason::AtLeast).with("min", 1),
            ))
        }
        (None, Some(n), false) if n >= 1 => ClearCut::KeepNewest(n),
        (None, Some(_), false) => {
            return Err(ApiError::field(
                "keep_newest",
                Refusal::new(Reason::AtLeast).with("min", 1),
            ))
        }
        (None, None, true) => ClearCut::All,
        _ => return Err(ApiError::bad_request(Reason::OneClearCut)),
    };
    let mut group = req.group_id;
    if let Some(job_id) = req.job_id {
        let job = st.store.get_job(job_id).await?;
        if group.is_some_and(|g| g != job.group_id) {
            return Err(ApiError::field(
                "job_id",
                Refusal::new(Reason::JobNotInGroup)
                    .with("job", job_id)
                    .with("group", group.unwrap_or_default()),
            ));
        }
        group = Some(job.group_id);
    }
    let groups = match group {
        Some(g) => {
            caller.require_group(g)?;
            Some(vec![g])
        }
        None => caller.group_scope(),
    };
    let (fires, runs) = st
        .store
        .clear_fires(groups.as_deref(), req.job_id, cut, 1000)
        .await?;
    tracing::info!(user = %caller.user.username, group = ?group, job = ?req.job_id, ?cut, fires, runs, "fires cleared");
    Ok(Json(ClearAnswer { fires, runs }))
}

/// One item of a fire: its current attempt and how many there were.
#[derive(Debug, Serialize)]
pub struct ItemCoverage {
    pub item: i64,
    pub run_id: i64,
    pub executor_address: String,
    pub state: String,
    pub attempts: i64,
    /// Earlier attempts, e.g. "failed on http://10.0.0.7:9999/".
    pub history: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Coverage {
    pub total: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub running: i64,
    pub missing: i64,
    /// e.g. "8/8 items succeeded" or "7/8 items succeeded, 1 failed".
    pub summary: String,
    pub items: Vec<ItemCoverage>,
}

#[derive(Debug, Serialize)]
pub struct FireView {
    #[serde(flatten)]
    pub fire: Fire,
    pub coverage: Coverage,
    pub runs: Vec<Run>,
}

/// Folds a fire's runs into one line per item, latest attempt first.
pub fn coverage(fire: &Fire, runs: &[Run]) -> Coverage {
    let mut by_item: BTreeMap<i64, Vec<&Run>> = BTreeMap::new();
    for r in runs {
        by_item.entry(r.shard_index).or_default().push(r);
    }
    let mut items = Vec::with_capacity(by_item.len());
    let (mut ok, mut failed, mut running) = (0, 0, 0);
    for (item, mut attempts) in by_item {
        attempts.sort_by_key(|r| (r.superseded == 0, r.attempt, r.id));
        let current = *attempts.last().expect("at least one run per item");
        match RunState::parse(&current.state) {
            Ok(RunState::Succeeded) => ok += 1,
            Ok(RunState::Triggering | RunState::Running) => running += 1,
            _ => failed += 1,
        }
        let history = attempts[..attempts.len() - 1]
            .iter()
            .map(|r| format!("{} on {}", r.state, display_addr(&r.executor_address)))
            .collect();
        items.push(ItemCoverage {
            item,
            run_id: current.id,
            executor_address: current.executor_address.clone(),
            state: current.state.clone(),
            attempts: attempts.len() as i64,
            history,
        });
    }
    let total = fire.total_items.max(items.len() as i64);
    let missing = total - items.len() as i64;
    let noun = if runs.iter().any(|r| r.item_param.is_some()) || total > 1 {
        "items"
    } else {
        "run"
    };
    let mut summary = format!("{ok}/{total} {noun} succeeded");
    if failed > 0 {
        summary.push_str(&format!(", {failed} failed"));
    }
    if running > 0 {
        summary.push_str(&format!(", {running} running"));
    }
    if missing > 0 {
        summary.push_str(&format!(", {missing} missing"));
    }
    if total == 0 {
        // A fire planned no run (a broadcast to a group with no executor online): "0/0 run
        // succeeded" read as a success.
        summary = match fire.message.as_str() {
            "" => "no run".to_string(),
            why => format!("no run: {why}"),
        };
    }
    Coverage {
        total,
        succeeded: ok,
        failed,
        running,
        missing,
        summary,
        items,
    }
}

fn display_addr(a: &str) -> &str {
    if a.is_empty() {
        "(no executor)"
    } else {
        a
    }
}

async fn load_fire(st: &AppState, caller: &Caller, id: i64) -> Result<Fire, ApiError> {
    let fire = st
        .store
        .get_fire(id)
        .await?
        .ok_or_else(|| ApiError::not_found(Reason::FireNotFound))?;
    caller.require_group(fire.group_id)?;
    Ok(fire)
}

async fn get_fire(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<FireView>, ApiError> {
    let fire = load_fire(&st, &caller, id).await?;
    let runs = st.store.fire_runs(id).await?;
    let coverage = coverage(&fire, &runs);
    Ok(Json(FireView {
        fire,
        coverage,
        runs,
    }))
}

#[derive(Debug, Serialize)]
struct RetryAnswer {
    fire_id: i64,
    retried_items: Vec<i64>,
    run_ids: Vec<i64>,
}

/// Re-runs only the items of a fire that did not succeed (failed, timed out, killed, lost).
async fn retry_fire(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<RetryAnswer>, ApiError> {
    let fire = load_fire(&st, &caller, id).await?;
    let runs = st.store.fire_runs(id).await?;
    let current: Vec<Run> = runs
        .iter()
        .filter(|r| r.superseded == 0)
        .filter(|r| {
            RunState::parse(&r.state).is_ok_and(|s| s.is_final() && s != RunState::Succeeded)
        })
        .cloned()
        .collect();
    if current.is_empty() {
        return Err(ApiError::conflict(Reason::NothingToRetry));
    }
    let items = current.iter().map(|r| r.shard_index).collect();
    let run_ids = st.dispatcher.redispatch(&fire, &current).await?;
    Ok(Json(RetryAnswer {
        fire_id: id,
        retried_items: items,
        run_ids,
    }))
}

async fn list_runs(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<HistoryQuery>,
) -> Result<Json<Page<Run>>, ApiError> {
    let f = q.filter(&caller, RunState::parse)?;
    let (items, total) = st.store.list_runs(&f).await?;
    Ok(Json(Page {
        items,
        total,
        offset: f.offset,
        limit: f.limit,
    }))
}

async fn load_run(st: &AppState, caller: &Caller, id: i64) -> Result<Run, ApiError> {
    let run = st
        .store
        .get_run(id)
        .await?
        .ok_or_else(|| ApiError::not_found(Reason::RunNotFound))?;
    caller.require_group(run.group_id)?;
    Ok(run)
}

async fn get_run(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<Run>, ApiError> {
    Ok(Json(load_run(&st, &caller, id).await?))
}

#[derive(Debug, Deserialize)]
struct LogQuery {
    from_line: Option<i32>,
}

#[derive(Debug, Serialize)]
struct LogAnswer {
    run_id: i64,
    from_line: i32,
    to_line: i32,
    content: String,
    /// True when the run is finished and there is nothing more to read (stop polling).
    is_end: bool,
    state: String,
}

/// Reads a page of the run's log from its executor. The executor never says "end" (XXL-JOB lets
/// the admin decide): the log ends when the run is final and a read returns no new line.
async fn run_log(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
    Query(q): Query<LogQuery>,
) -> Result<Json<LogAnswer>, ApiError> {
    let run = load_run(&st, &caller, id).await?;
    let from = q.from_line.unwrap_or(1).max(1);
    if run.executor_address.is_empty() {
        return Err(ApiError::conflict(Reason::NeverSent));
    }
    let log = st.dispatcher.read_log(&run, from).await.map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::BAD_GATEWAY,
            Refusal::new(Reason::LogUnreadable).with("detail", e),
        )
    })?;
    let finished = RunState::parse(&run.state).is_ok_and(RunState::is_final);
    Ok(Json(LogAnswer {
        run_id: run.id,
        from_line: from,
        to_line: log.to_line_num,
        is_end: log_is_end(finished, &log, from),
        content: log.log_content,
        state: run.state,
    }))
}

/// Whether a log read is the last one. Only a finished run's log can end: some executors (pyxxl)
/// set `isEnd` whenever a read reaches the end of the file, also while the run still writes to it.
/// A finished run ends when the executor says so or when the read brought no new line.
fn log_is_end(finished: bool, log: &LogResult, from: i32) -> bool {
    finished && (log.is_end || log.to_line_num < from)
}

#[derive(Debug, Serialize)]
struct KillAnswer {
    run_id: i64,
    message: String,
    state: String,
}

/// Asks the executor to stop the run and records it as killed.
async fn kill_run(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Json<KillAnswer>, ApiError> {
    let run = load_run(&st, &caller, id).await?;
    if RunState::parse(&run.state).is_ok_and(RunState::is_final) {
        return Err(ApiError::conflict(
            Refusal::new(Reason::AlreadyFinished)
                .with("id", id)
                .with("state", &run.state),
        ));
    }
    // The answer says what the run now says: the executor's words (or why the request failed)
    // after "killed from the admin".
    let note = match st.dispatcher.kill(&run).await {
        Ok(m) => Note::new(NoteKind::Killed).with("detail", m),
        Err(e) => Note::new(NoteKind::KillFailed).with("detail", e),
    };
    let message = note.to_string();
    let now = now_ms();
    if st
        .store
        .finish_run(id, RunState::Killed, 500, &note.into(), now)
        .await?
    {
        st.metrics.count_result(RunState::Killed);
        st.dispatcher.refresh(run.fire_id).await?;
    }
    let state = st
        .store
        .get_run(id)
        .await?
        .map(|r| r.state)
        .unwrap_or_default();
    Ok(Json(KillAnswer {
        run_id: id,
        message,
        state,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(to_line_num: i32, is_end: bool) -> LogResult {
        LogResult {
            from_line_num: 3,
            to_line_num,
            log_content: String::new(),
            is_end,
        }
    }

    #[test]
    fn only_a_finished_run_log_ends() {
        // pyxxl says isEnd at the end of the file while the run goes on.
        assert!(!log_is_end(false, &page(4, true), 3));
        assert!(!log_is_end(false, &page(0, false), 3));
        assert!(log_is_end(true, &page(4, true), 3));
        // XXL-JOB's executor never says isEnd: no new line after the run finished is the end.
        assert!(log_is_end(true, &page(0, false), 3));
        assert!(!log_is_end(true, &page(4, false), 3));
    }
}
