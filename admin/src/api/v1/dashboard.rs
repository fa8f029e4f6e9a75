//! `/api/v1/dashboard`: the numbers of the console's first page, limited to the caller's groups.

use std::collections::{HashMap, HashSet};

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use chrono::{Duration, NaiveDate, TimeZone};
use serde::{Deserialize, Serialize};

use super::fields::in_range;
use crate::api::error::{Json, Query};
use crate::api::{ApiError, AppState, Caller};
use crate::cron::parse_tz;
use crate::model::{now_ms, Run};
use crate::store::sessions::RunCounts;

pub fn routes() -> Router<AppState> {
    Router::new().route("/dashboard", get(dashboard))
}

#[derive(Debug, Deserialize)]
struct DashQuery {
    /// Days of the chart, today included (default 7).
    days: Option<i64>,
}

#[derive(Debug, Serialize)]
pub struct DayCounts {
    /// `YYYY-MM-DD` in the admin's time zone.
    pub day: String,
    #[serde(flatten)]
    pub counts: RunCounts,
}

#[derive(Debug, Serialize)]
pub struct RunLine {
    #[serde(flatten)]
    pub run: Run,
    pub job_name: String,
}

#[derive(Debug, Serialize)]
pub struct Dashboard {
    pub jobs: i64,
    pub jobs_enabled: i64,
    pub groups: i64,
    pub executors_online: i64,
    pub fires_today: i64,
    pub runs_today: RunCounts,
    pub timezone: String,
    pub days: Vec<DayCounts>,
    /// Runs not finished yet, newest first.
    pub running: Vec<RunLine>,
    /// Runs that ended failed, timed out, killed or lost, newest first.
    pub recent_failures: Vec<RunLine>,
}

/// Start (epoch ms) of each of the `n` days ending today, in `tz`, plus the start of tomorrow.
/// Days are calendar days, so a DST change gives a 23- or 25-hour day.
fn day_starts(tz: chrono_tz::Tz, now: i64, n: i64) -> Vec<(NaiveDate, i64)> {
    let today = chrono::Utc
        .timestamp_millis_opt(now)
        .single()
        .unwrap_or_default()
        .with_timezone(&tz)
        .date_naive();
    let start = |d: NaiveDate| {
        let midnight = d.and_hms_opt(0, 0, 0).expect("midnight exists");
        // A zone whose clocks skip midnight starts that day at the first instant that exists.
        tz.from_local_datetime(&midnight)
            .earliest()
            .or_else(|| {
                tz.from_local_datetime(&(midnight + Duration::hours(1)))
                    .earliest()
            })
            .map_or(now, |t| t.timestamp_millis())
    };
    (0..=n)
        .map(|i| today - Duration::days(n - 1 - i))
        .map(|d| (d, start(d)))
        .collect()
}

async fn dashboard(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<DashQuery>,
) -> Result<Json<Dashboard>, ApiError> {
    let days = q.days.unwrap_or(7);
    in_range("days", days, 1, 90)?;
    let scope = caller.group_scope();
    let scope = scope.as_deref();
    let tz = parse_tz(&st.settings.timezone).map_err(ApiError::bad_request)?;
    let now = now_ms();

    let (jobs, jobs_enabled) = st.store.count_jobs_in(scope).await?;
    let groups: Vec<_> = st
        .store
        .list_groups()
        .await?
        .into_iter()
        .filter(|g| caller.user.can_access_group(g.id))
        .collect();
    let live = st
        .store
        .all_live_executors(now - st.settings.dead_after_ms())
        .await?;
    let mut online: HashSet<(String, String)> = HashSet::new();
    for g in &groups {
        if g.address_type == "MANUAL" {
            for a in g.manual_addresses() {
                online.insert((g.appname.clone(), a));
            }
        } else {
            for e in live.iter().filter(|e| e.appname == g.appname) {
                online.insert((g.appname.clone(), e.address.clone()));
            }
        }
    }

    let starts = day_starts(tz, now, days);
    let mut by_day = Vec::with_capacity(days as usize);
    for w in starts.windows(2) {
        let counts = st.store.run_counts(scope, w[0].1, w[1].1).await?;
        by_day.push(DayCounts {
            day: w[0].0.format("%Y-%m-%d").to_string(),
            counts,
        });
    }
    let today_start = starts[starts.len() - 2].1;
    let fires_today = st.store.count_fires_since(scope, today_start).await?;
    let runs_today = by_day.last().map(|d| d.counts).unwrap_or_default();

    let running = st
        .store
        .runs_in_states(scope, &["triggering", "running"], 20)
        .await?;
    let failures = st
        .store
        .runs_in_states(scope, &["failed", "timed_out", "killed", "lost"], 10)
        .await?;
    let mut ids: Vec<i64> = running.iter().chain(&failures).map(|r| r.job_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let names: HashMap<i64, String> = st.store.job_names(&ids).await?.into_iter().collect();
    let line = |run: Run| RunLine {
        job_name: names.get(&run.job_id).cloned().unwrap_or_default(),
        run,
    };
    Ok(Json(Dashboard {
        jobs,
        jobs_enabled,
        groups: groups.len() as i64,
        executors_online: online.len() as i64,
        fires_today,
        runs_today,
        timezone: st.settings.timezone.clone(),
        days: by_day,
        running: running.into_iter().map(line).collect(),
        recent_failures: failures.into_iter().map(line).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_days_in_a_zone() {
        let tz: chrono_tz::Tz = "America/New_York".parse().unwrap();
        // 2024-03-11 12:00 UTC; the 10th was the 23-hour spring-forward day.
        let now = 1_710_158_400_000;
        let d = day_starts(tz, now, 3);
        assert_eq!(d.len(), 4);
        assert_eq!(d[0].0.to_string(), "2024-03-09");
        assert_eq!(d[3].0.to_string(), "2024-03-12");
        assert_eq!(d[2].1 - d[1].1, 23 * 3600 * 1000);
        assert_eq!(d[1].1 - d[0].1, 24 * 3600 * 1000);
        assert!(d[2].1 <= now && now < d[3].1);
    }
}
