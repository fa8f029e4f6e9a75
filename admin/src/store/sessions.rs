//! What the web console needs from the database: login sessions, failed-login counts for the rate
//! limit, and the aggregates of the dashboard.

use sqlx::QueryBuilder;

use super::fires::{push_in, RUN_COLS};
use super::{with_pool, Done, Store, StoreResult};
use crate::model::Run;

/// A console login. Only the SHA-256 of the cookie value is stored, so a copy of the database
/// does not let anyone log in.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Session {
    pub id_hash: String,
    pub user_id: i64,
    /// Sent back by the page in `X-CSRF-Token` on every state-changing request.
    pub csrf_token: String,
    pub created_at: i64,
    pub expires_at: i64,
}

/// Run counts of one period by outcome; superseded attempts are not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunCounts {
    pub succeeded: i64,
    pub failed: i64,
    pub running: i64,
}

impl Store {
    pub async fn create_session(&self, s: &Session) -> StoreResult<()> {
        with_pool!(self, pool => sqlx::query("INSERT INTO sessions (id_hash, user_id, csrf_token, created_at, expires_at) VALUES (?, ?, ?, ?, ?)")
            .bind(&s.id_hash).bind(s.user_id).bind(&s.csrf_token).bind(s.created_at).bind(s.expires_at)
            .execute(pool).await.map(Done::from))?;
        Ok(())
    }

    /// The session with this hash, unless it has expired at `now`.
    pub async fn live_session(&self, id_hash: &str, now: i64) -> StoreResult<Option<Session>> {
        Ok(
            with_pool!(self, pool => sqlx::query_as::<_, Session>("SELECT id_hash, user_id, csrf_token, created_at, expires_at FROM sessions WHERE id_hash = ? AND expires_at > ?")
            .bind(id_hash).bind(now).fetch_optional(pool).await)?,
        )
    }

    /// Moves a session's expiry (sliding expiry of an active user).
    pub async fn extend_session(&self, id_hash: &str, expires_at: i64) -> StoreResult<()> {
        with_pool!(self, pool => sqlx::query("UPDATE sessions SET expires_at = ? WHERE id_hash = ?")
            .bind(expires_at).bind(id_hash).execute(pool).await.map(Done::from))?;
        Ok(())
    }

    pub async fn delete_session(&self, id_hash: &str) -> StoreResult<bool> {
        let n = with_pool!(self, pool => sqlx::query("DELETE FROM sessions WHERE id_hash = ?")
            .bind(id_hash).execute(pool).await.map(Done::from))?
        .rows_affected();
        Ok(n > 0)
    }

    /// Ends every session of a user but `keep` (after a password change, other devices log out).
    pub async fn delete_user_sessions(&self, user_id: i64, keep: Option<&str>) -> StoreResult<u64> {
        let keep = keep.unwrap_or("");
        Ok(
            with_pool!(self, pool => sqlx::query("DELETE FROM sessions WHERE user_id = ? AND id_hash <> ?")
            .bind(user_id).bind(keep).execute(pool).await.map(Done::from))?
            .rows_affected(),
        )
    }

    pub async fn delete_expired_sessions(&self, now: i64) -> StoreResult<u64> {
        Ok(
            with_pool!(self, pool => sqlx::query("DELETE FROM sessions WHERE expires_at <= ?")
            .bind(now).execute(pool).await.map(Done::from))?
            .rows_affected(),
        )
    }

    pub async fn record_login_failure(
        &self,
        username: &str,
        ip: &str,
        now: i64,
    ) -> StoreResult<()> {
        with_pool!(self, pool => sqlx::query("INSERT INTO login_failures (username, ip, at) VALUES (?, ?, ?)")
            .bind(super::fires::truncate(username, 64)).bind(super::fires::truncate(ip, 64)).bind(now)
            .execute(pool).await.map(Done::from))?;
        Ok(())
    }

    /// Failed logins for (username, ip) since `since`, and the time of the oldest of them.
    pub async fn login_failures_since(
        &self,
        username: &str,
        ip: &str,
        since: i64,
    ) -> StoreResult<(i64, Option<i64>)> {
        let row: (i64, Option<i64>) = with_pool!(self, pool => sqlx::query_as("SELECT COUNT(*), MIN(at) FROM login_failures WHERE username = ? AND ip = ? AND at >= ?")
            .bind(super::fires::truncate(username, 64)).bind(super::fires::truncate(ip, 64)).bind(since)
            .fetch_one(pool).await)?;
        Ok(row)
    }

    /// Forgets the failures of (username, ip) after a successful login.
    pub async fn clear_login_failures(&self, username: &str, ip: &str) -> StoreResult<()> {
        with_pool!(self, pool => sqlx::query("DELETE FROM login_failures WHERE username = ? AND ip = ?")
            .bind(super::fires::truncate(username, 64)).bind(super::fires::truncate(ip, 64))
            .execute(pool).await.map(Done::from))?;
        Ok(())
    }

    pub async fn prune_login_failures(&self, before: i64) -> StoreResult<u64> {
        Ok(
            with_pool!(self, pool => sqlx::query("DELETE FROM login_failures WHERE at < ?")
            .bind(before).execute(pool).await.map(Done::from))?
            .rows_affected(),
        )
    }

    /// Jobs in scope (`None` = all groups): how many, and how many are switched on.
    pub async fn count_jobs_in(&self, groups: Option<&[i64]>) -> StoreResult<(i64, i64)> {
        // COUNT, not SUM: MySQL sums integers into DECIMAL.
        let row: (i64, i64) = with_pool!(self, pool => {
            let mut qb = QueryBuilder::new("SELECT COUNT(*), COUNT(CASE WHEN enabled <> 0 THEN 1 END) FROM jobs WHERE 1 = 1");
            if let Some(ids) = groups {
                push_in(&mut qb, "group_id", ids);
            }
            qb.build_query_as().fetch_one(pool).await?
        });
        Ok(row)
    }

    /// Fires in scope created at or after `since`.
    pub async fn count_fires_since(&self, groups: Option<&[i64]>, since: i64) -> StoreResult<i64> {
        Ok(with_pool!(self, pool => {
            let mut qb = QueryBuilder::new("SELECT COUNT(*) FROM fires WHERE created_at >= ");
            qb.push_bind(since);
            if let Some(ids) = groups {
                push_in(&mut qb, "group_id", ids);
            }
            qb.build_query_scalar::<i64>().fetch_one(pool).await?
        }))
    }

    /// Current runs (not superseded) in scope created in `[from, to)`, by outcome.
    pub async fn run_counts(
        &self,
        groups: Option<&[i64]>,
        from: i64,
        to: i64,
    ) -> StoreResult<RunCounts> {
        let rows: Vec<(String, i64)> = with_pool!(self, pool => {
            let mut qb = QueryBuilder::new("SELECT state, COUNT(*) FROM runs WHERE superseded = 0 AND created_at >= ");
            qb.push_bind(from).push(" AND created_at < ").push_bind(to);
            if let Some(ids) = groups {
                push_in(&mut qb, "group_id", ids);
            }
            qb.push(" GROUP BY state");
            qb.build_query_as().fetch_all(pool).await?
        });
        let mut c = RunCounts::default();
        for (state, n) in rows {
            match state.as_str() {
                "succeeded" => c.succeeded += n,
                "triggering" | "running" => c.running += n,
                _ => c.failed += n,
            }
        }
        Ok(c)
    }

    /// The newest current runs in scope whose state is one of `states`.
    pub async fn runs_in_states(
        &self,
        groups: Option<&[i64]>,
        states: &[&str],
        limit: i64,
    ) -> StoreResult<Vec<Run>> {
        if states.is_empty() {
            return Ok(Vec::new());
        }
        let limit = super::page_limit(limit);
        Ok(with_pool!(self, pool => {
            let mut qb = QueryBuilder::new(format!("SELECT {RUN_COLS} FROM runs WHERE superseded = 0 AND state IN ("));
            let mut sep = qb.separated(", ");
            for s in states {
                sep.push_bind(*s);
            }
            qb.push(")");
            if let Some(ids) = groups {
                push_in(&mut qb, "group_id", ids);
            }
            qb.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
            qb.build_query_as::<Run>().fetch_all(pool).await?
        }))
    }

    /// Names of the jobs with these ids (unknown ids are left out).
    pub async fn job_names(&self, ids: &[i64]) -> StoreResult<Vec<(i64, String)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        Ok(with_pool!(self, pool => {
            let mut qb = QueryBuilder::new("SELECT id, name FROM jobs WHERE 1 = 1");
            push_in(&mut qb, "id", ids);
            qb.build_query_as::<(i64, String)>().fetch_all(pool).await?
        }))
    }
}
