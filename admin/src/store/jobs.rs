//! Jobs and their GLUE source history.

use sqlx::QueryBuilder;

use super::{
    list_page, retry_on_conflict, with_pool, with_read_pool, Done, Store, StoreError, StoreResult,
};
use crate::model::Job;
use crate::refusal::Reason;

/// The assignment of `updated_at` on every edit (two binds: now, now). It always moves forward,
/// even for two edits within one millisecond, because the dispatch path takes an unchanged
/// `updated_at` to mean an unchanged job ([`crate::jobcache`]).
const UPDATED_AT: &str = "updated_at = CASE WHEN updated_at < ? THEN ? ELSE updated_at + 1 END";

pub(crate) const JOB_COLS: &str = "id, group_id, name, description, schedule_type, schedule_conf, timezone, handler, params, route_strategy, block_strategy, timeout_s, retry_count, retry_interval_s, retry_backoff, misfire_strategy, sharding_mode, sharding_total, sharding_strategy, item_params, max_node, resume_checkpoint, child_job_ids, glue_type, glue_source, glue_updated_at, alarm_targets, enabled, next_fire_at, last_fire_at, created_at, updated_at";

/// The columns a client sets, in the order [`bind_job!`] binds them.
const JOB_WRITE_COLS: [&str; 28] = [
    "group_id",
    "name",
    "description",
    "schedule_type",
    "schedule_conf",
    "timezone",
    "handler",
    "params",
    "route_strategy",
    "block_strategy",
    "timeout_s",
    "retry_count",
    "retry_interval_s",
    "retry_backoff",
    "misfire_strategy",
    "sharding_mode",
    "sharding_total",
    "sharding_strategy",
    "item_params",
    "max_node",
    "resume_checkpoint",
    "child_job_ids",
    "glue_type",
    "glue_source",
    "glue_updated_at",
    "alarm_targets",
    "enabled",
    "next_fire_at",
];

/// Binds the [`JOB_WRITE_COLS`] of a job, in order.
macro_rules! bind_job {
    ($q:expr, $j:expr) => {
        $q.bind($j.group_id)
            .bind(&$j.name)
            .bind(&$j.description)
            .bind(&$j.schedule_type)
            .bind(&$j.schedule_conf)
            .bind(&$j.timezone)
            .bind(&$j.handler)
            .bind(&$j.params)
            .bind(&$j.route_strategy)
            .bind(&$j.block_strategy)
            .bind($j.timeout_s)
            .bind($j.retry_count)
            .bind($j.retry_interval_s)
            .bind($j.retry_backoff)
            .bind(&$j.misfire_strategy)
            .bind(&$j.sharding_mode)
            .bind($j.sharding_total)
            .bind(&$j.sharding_strategy)
            .bind(&$j.item_params)
            .bind($j.max_node)
            .bind($j.resume_checkpoint)
            .bind(&$j.child_job_ids)
            .bind(&$j.glue_type)
            .bind(&$j.glue_source)
            .bind($j.glue_updated_at)
            .bind(&$j.alarm_targets)
            .bind($j.enabled)
            .bind($j.next_fire_at)
    };
}

/// Filters of the job list; every field optional.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub group_ids: Option<Vec<i64>>,
    pub group_id: Option<i64>,
    pub name: Option<String>,
    pub handler: Option<String>,
    pub enabled: Option<bool>,
    pub offset: i64,
    pub limit: i64,
}

/// A GLUE version kept when the source changes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, sqlx::FromRow)]
pub struct GlueVersion {
    pub id: i64,
    pub job_id: i64,
    pub glue_type: String,
    pub glue_source: String,
    pub remark: String,
    pub created_at: i64,
}

/// Runs a job write in a transaction with `pool`, and counts it as a job edit
/// ([`Store::job_edits`]) when it changed a row. Evaluates to the write's [`Done`].
macro_rules! counted_edit {
    ($pool:ident, $dialect:expr, $write:expr) => {{
        let mut tx = $pool.begin().await?;
        let done = $write.execute(&mut *tx).await.map(Done::from)?;
        if done.rows_affected() > 0 {
            sqlx::query($dialect.count_job_edit())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        done
    }};
}

impl Store {
    /// Inserts a job (its `id`, `created_at` and `updated_at` are ignored) and returns its id.
    pub async fn create_job(&self, j: &Job, now: i64) -> StoreResult<i64> {
        let sql = format!(
            "INSERT INTO jobs ({}, last_fire_at, created_at, updated_at) VALUES ({}?, ?, ?)",
            JOB_WRITE_COLS.join(", "),
            "?, ".repeat(JOB_WRITE_COLS.len())
        );
        let id = retry_on_conflict(|| async {
            with_pool!(self, pool => bind_job!(sqlx::query(&sql), j)
                .bind(j.last_fire_at).bind(now).bind(now)
                .execute(pool).await.map(Done::from))
        })
        .await?
        .insert_id();
        Ok(id)
    }

    /// Replaces every client-set field of a job; returns `NotFound` for an unknown id.
    pub async fn update_job(&self, j: &Job, now: i64) -> StoreResult<()> {
        let sets: Vec<String> = JOB_WRITE_COLS.iter().map(|c| format!("{c} = ?")).collect();
        let sql = format!(
            "UPDATE jobs SET {}, {UPDATED_AT} WHERE id = ?",
            sets.join(", ")
        );
        let dialect = self.dialect();
        let n = retry_on_conflict(|| async {
            Ok(with_pool!(self, pool => counted_edit!(pool, dialect, bind_job!(sqlx::query(&sql), j)
                .bind(now).bind(now).bind(j.id))))
        })
        .await?
        .rows_affected();
        if n == 0 {
            return Err(StoreError::NotFound(Reason::JobNotFound));
        }
        Ok(())
    }

    /// Turns a job on (with its first planned fire) or off.
    pub async fn set_job_enabled(
        &self,
        id: i64,
        enabled: bool,
        next_fire_at: Option<i64>,
        now: i64,
    ) -> StoreResult<()> {
        let sql =
            format!("UPDATE jobs SET enabled = ?, next_fire_at = ?, {UPDATED_AT} WHERE id = ?");
        let dialect = self.dialect();
        let n = retry_on_conflict(|| async {
            Ok(
                with_pool!(self, pool => counted_edit!(pool, dialect, sqlx::query(&sql)
                .bind(i64::from(enabled)).bind(next_fire_at).bind(now).bind(now).bind(id))),
            )
        })
        .await?
        .rows_affected();
        if n == 0 {
            return Err(StoreError::NotFound(Reason::JobNotFound));
        }
        Ok(())
    }

    pub async fn delete_job(&self, id: i64) -> StoreResult<()> {
        let dialect = self.dialect();
        let n = with_pool!(self, pool => counted_edit!(pool, dialect, sqlx::query("DELETE FROM jobs WHERE id = ?").bind(id)))
            .rows_affected();
        if n == 0 {
            return Err(StoreError::NotFound(Reason::JobNotFound));
        }
        with_pool!(self, pool => {
            sqlx::query("DELETE FROM glue_history WHERE job_id = ?").bind(id).execute(pool).await?;
            sqlx::query("DELETE FROM checkpoints WHERE job_id = ?").bind(id).execute(pool).await?;
        });
        Ok(())
    }

    pub async fn get_job(&self, id: i64) -> StoreResult<Job> {
        let sql = format!("SELECT {JOB_COLS} FROM jobs WHERE id = ?");
        with_read_pool!(self, pool => sqlx::query_as::<_, Job>(&sql).bind(id).fetch_optional(pool).await)?
            .ok_or(StoreError::NotFound(Reason::JobNotFound))
    }

    /// How many times jobs were edited, stopped, started or deleted, ever (creations do not
    /// count: a new job is in no cache). Every such write counts itself in its own transaction,
    /// so while this number stays the same, a job read earlier is still current.
    pub async fn job_edits(&self) -> StoreResult<i64> {
        let n: Option<i64> = with_read_pool!(self, pool => sqlx::query_scalar("SELECT value FROM counters WHERE name = 'job_edits'")
            .fetch_optional(pool).await)?;
        Ok(n.unwrap_or(0))
    }

    /// Several jobs by id (missing ids are simply absent).
    pub async fn get_jobs(&self, ids: &[i64]) -> StoreResult<Vec<Job>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let rows = with_read_pool!(self, pool => {
                let mut qb = QueryBuilder::new(format!("SELECT {JOB_COLS} FROM jobs WHERE 1 = 1"));
                super::fires::push_in(&mut qb, "id", chunk);
                qb.build_query_as::<Job>().fetch_all(pool).await?
            });
            out.extend(rows);
        }
        Ok(out)
    }

    /// Whether each job is enabled and when it was last changed: (id, enabled, updated_at). What
    /// the scheduler checks before sending prepared fires, without reading whole jobs.
    pub async fn job_versions(&self, ids: &[i64]) -> StoreResult<Vec<(i64, i64, i64)>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let rows: Vec<(i64, i64, i64)> = with_read_pool!(self, pool => {
                let mut qb = QueryBuilder::new("SELECT id, enabled, updated_at FROM jobs WHERE 1 = 1");
                super::fires::push_in(&mut qb, "id", chunk);
                qb.build_query_as().fetch_all(pool).await?
            });
            out.extend(rows);
        }
        Ok(out)
    }

    /// Jobs matching `f`, newest first, with the total count of matches (for paging).
    pub async fn list_jobs(&self, f: &JobFilter) -> StoreResult<(Vec<Job>, i64)> {
        fn push_where<'a, DB: sqlx::Database>(qb: &mut QueryBuilder<'a, DB>, f: &'a JobFilter)
        where
            i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
            String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        {
            qb.push(" WHERE 1 = 1");
            if let Some(ids) = &f.group_ids {
                super::fires::push_in(qb, "group_id", ids);
            }
            if let Some(g) = f.group_id {
                qb.push(" AND group_id = ").push_bind(g);
            }
            if let Some(n) = &f.name {
                qb.push(" AND name LIKE ").push_bind(format!("%{n}%"));
            }
            if let Some(h) = &f.handler {
                qb.push(" AND handler LIKE ").push_bind(format!("%{h}%"));
            }
            if let Some(e) = f.enabled {
                qb.push(" AND enabled = ").push_bind(i64::from(e));
            }
        }
        let limit = super::page_limit(f.limit);
        let (rows, total) = list_page!(
            self,
            Job,
            JOB_COLS,
            "jobs",
            push_where,
            f,
            f.offset.max(0),
            limit
        );
        Ok((rows, total))
    }

    pub async fn add_glue_version(
        &self,
        job_id: i64,
        glue_type: &str,
        source: &str,
        remark: &str,
        now: i64,
    ) -> StoreResult<i64> {
        let id = with_pool!(self, pool => sqlx::query("INSERT INTO glue_history (job_id, glue_type, glue_source, remark, created_at) VALUES (?, ?, ?, ?, ?)")
            .bind(job_id).bind(glue_type).bind(source).bind(remark).bind(now)
            .execute(pool).await.map(Done::from))?
        .insert_id();
        Ok(id)
    }

    /// GLUE versions of a job, newest first.
    pub async fn glue_versions(&self, job_id: i64) -> StoreResult<Vec<GlueVersion>> {
        Ok(
            with_read_pool!(self, pool => sqlx::query_as::<_, GlueVersion>("SELECT id, job_id, glue_type, glue_source, remark, created_at FROM glue_history WHERE job_id = ? ORDER BY id DESC")
            .bind(job_id).fetch_all(pool).await)?,
        )
    }
}
