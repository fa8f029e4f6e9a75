//! Checkpoints, daily report, clearing old fires (by hand and run retention), admin nodes and
//! settings.

use sqlx::QueryBuilder;

use super::fires::push_in;
use super::{with_pool, with_read_pool, Done, Store, StoreResult};
use crate::model::{AdminNode, Checkpoint, DailyReport};

/// Ended fires: a final state, and nothing left to follow them (a follow-up, an alarm, child jobs
/// or the next FIX_DELAY fire, still needs its fire).
const ENDED: &str = " AND state IN ('succeeded', 'failed', 'skipped') AND NOT EXISTS (SELECT 1 FROM follow_ups u WHERE u.fire_id = fires.id)";

/// Which ended fires [`Store::clear_fires`] deletes: XXL-JOB's "clear logs" choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClearCut {
    /// Those created before this time (epoch ms): "older than a month", run retention.
    CreatedBefore(i64),
    /// Those older than the scope's newest N fires: "keep the newest 10 000".
    KeepNewest(i64),
    /// All of them.
    All,
}

impl Store {
    /// Saves the checkpoint of (job, item), replacing the previous one.
    pub async fn save_checkpoint(
        &self,
        job_id: i64,
        item: i64,
        value: &str,
        run_id: i64,
        now: i64,
    ) -> StoreResult<()> {
        let sql = format!(
            "INSERT INTO checkpoints (job_id, item, value, run_id, updated_at) VALUES (?, ?, ?, ?, ?){}",
            self.dialect()
                .upsert("job_id, item", &["value", "run_id", "updated_at"])
        );
        with_pool!(self, pool => sqlx::query(&sql)
            .bind(job_id).bind(item).bind(value).bind(run_id).bind(now).execute(pool).await.map(Done::from))?;
        Ok(())
    }

    pub async fn checkpoints(&self, job_id: i64) -> StoreResult<Vec<Checkpoint>> {
        Ok(
            with_read_pool!(self, pool => sqlx::query_as::<_, Checkpoint>("SELECT job_id, item, value, run_id, updated_at FROM checkpoints WHERE job_id = ? ORDER BY item")
            .bind(job_id).fetch_all(pool).await)?,
        )
    }

    pub async fn clear_checkpoints(&self, job_id: i64) -> StoreResult<u64> {
        Ok(
            with_pool!(self, pool => sqlx::query("DELETE FROM checkpoints WHERE job_id = ?")
            .bind(job_id).execute(pool).await.map(Done::from))?
            .rows_affected(),
        )
    }

    /// Recomputes the report row of one UTC day from the runs created that day.
    pub async fn refresh_daily_report(
        &self,
        day: &str,
        from_ms: i64,
        to_ms: i64,
        now: i64,
    ) -> StoreResult<()> {
        let rows: Vec<(String, i64)> = with_pool!(self, pool => sqlx::query_as(
            "SELECT state, COUNT(*) FROM runs WHERE created_at >= ? AND created_at < ? AND superseded = 0 GROUP BY state")
            .bind(from_ms).bind(to_ms).fetch_all(pool).await)?;
        let (mut ok, mut failed, mut running) = (0, 0, 0);
        for (state, n) in rows {
            match state.as_str() {
                "succeeded" => ok += n,
                "triggering" | "running" => running += n,
                _ => failed += n,
            }
        }
        let sql = format!(
            "INSERT INTO daily_report (day, succeeded, failed, running, updated_at) VALUES (?, ?, ?, ?, ?){}",
            self.dialect()
                .upsert("day", &["succeeded", "failed", "running", "updated_at"])
        );
        with_pool!(self, pool => sqlx::query(&sql)
            .bind(day).bind(ok).bind(failed).bind(running).bind(now).execute(pool).await.map(Done::from))?;
        Ok(())
    }

    /// Report rows from `from_day` (inclusive, `YYYY-MM-DD`) on, oldest first.
    pub async fn daily_reports(&self, from_day: &str) -> StoreResult<Vec<DailyReport>> {
        Ok(
            with_read_pool!(self, pool => sqlx::query_as::<_, DailyReport>("SELECT day, succeeded, failed, running, updated_at FROM daily_report WHERE day >= ? ORDER BY day")
            .bind(from_day).fetch_all(pool).await)?,
        )
    }

    /// Deletes ended fires (succeeded, failed or skipped, with nothing left to follow them) and
    /// their runs: the fires of `job_id`, else of `groups` (`None`: every group), that `cut`
    /// selects. Open fires are kept whatever their age, so no run in flight loses its row. Works
    /// in batches of `batch` fires, a transaction each, so a large clean-up never holds a long
    /// lock. Returns the fires and runs deleted.
    pub async fn clear_fires(
        &self,
        groups: Option<&[i64]>,
        job_id: Option<i64>,
        cut: ClearCut,
        batch: i64,
    ) -> StoreResult<(u64, u64)> {
        fn scope<'a, DB: sqlx::Database>(
            qb: &mut QueryBuilder<'a, DB>,
            groups: Option<&'a [i64]>,
            job_id: Option<i64>,
        ) where
            i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
            String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        {
            if let Some(job) = job_id {
                qb.push(" AND job_id = ").push_bind(job);
            }
            if let Some(groups) = groups {
                push_in(qb, "group_id", groups);
            }
        }
        // The last id the cut can reach, so that each batch reads a range of ids and a cut that
        // finds nothing does not read the table. "Keep the newest N" counts every fire of the
        // scope, open ones too, as XXL-JOB counts its newest logs.
        let last: Option<i64> = match cut {
            ClearCut::All => Some(i64::MAX),
            ClearCut::CreatedBefore(at) => with_read_pool!(self, pool => {
                let mut qb = QueryBuilder::new("SELECT MAX(id) FROM fires WHERE created_at < ");
                qb.push_bind(at);
                scope(&mut qb, groups, job_id);
                qb.build_query_scalar::<Option<i64>>().fetch_one(pool).await
            })?,
            ClearCut::KeepNewest(n) => with_read_pool!(self, pool => {
                let mut qb = QueryBuilder::new("SELECT id - 1 FROM fires WHERE 1 = 1");
                scope(&mut qb, groups, job_id);
                qb.push(" ORDER BY id DESC LIMIT 1 OFFSET ").push_bind(n.max(1) - 1);
                qb.build_query_scalar().fetch_optional(pool).await
            })?,
        };
        let Some(last) = last else {
            return Ok((0, 0));
        };
        let runs = self.dialect().runs_by_fire();
        let lock = self.dialect().row_lock();
        let begin = self.begin_write();
        let (mut fires_deleted, mut runs_deleted) = (0, 0);
        // Fires are taken in id order after a cursor: the open fires a batch leaves behind are
        // not read again by the next one.
        let mut after = 0;
        loop {
            let done = with_pool!(self, pool => {
                let mut tx = pool.begin_with(begin).await?;
                let mut qb = QueryBuilder::new("SELECT id FROM fires WHERE id > ");
                qb.push_bind(after).push(" AND id <= ").push_bind(last);
                scope(&mut qb, groups, job_id);
                if let ClearCut::CreatedBefore(at) = cut {
                    // Ids follow creation only roughly when several admins insert.
                    qb.push(" AND created_at < ").push_bind(at);
                }
                qb.push(ENDED).push(" ORDER BY id LIMIT ").push_bind(batch);
                let candidates: Vec<i64> = qb.build_query_scalar().fetch_all(&mut *tx).await?;
                let Some(batch_end) = candidates.last().copied() else {
                    tx.rollback().await?;
                    break;
                };
                after = batch_end;
                // Runs before their fires, the order every writer locks them in; the fires'
                // state is checked again under the lock (a retry may have reopened one).
                let mut sel = QueryBuilder::new(format!("SELECT id, fire_id FROM {runs} WHERE 1 = 1"));
                push_in(&mut sel, "fire_id", &candidates);
                sel.push(lock);
                let fire_runs: Vec<(i64, i64)> = sel.build_query_as().fetch_all(&mut *tx).await?;
                let mut sel = QueryBuilder::new("SELECT id FROM fires WHERE 1 = 1");
                push_in(&mut sel, "id", &candidates);
                sel.push(ENDED).push(lock);
                let ended: Vec<i64> = sel.build_query_scalar().fetch_all(&mut *tx).await?;
                let gone: std::collections::HashSet<i64> = ended.iter().copied().collect();
                let run_ids: Vec<i64> = fire_runs
                    .into_iter()
                    .filter(|(_, fire)| gone.contains(fire))
                    .map(|(id, _)| id)
                    .collect();
                for chunk in run_ids.chunks(1000) {
                    let mut del = QueryBuilder::new("DELETE FROM runs WHERE 1 = 1");
                    push_in(&mut del, "id", chunk);
                    runs_deleted += del.build().execute(&mut *tx).await.map(Done::from)?.rows_affected();
                }
                let mut del = QueryBuilder::new("DELETE FROM fires WHERE 1 = 1");
                push_in(&mut del, "id", &ended);
                fires_deleted += del.build().execute(&mut *tx).await.map(Done::from)?.rows_affected();
                tx.commit().await?;
                candidates.len() < batch as usize
            });
            if done {
                break;
            }
        }
        Ok((fires_deleted, runs_deleted))
    }

    /// Announces this admin process (insert or refresh).
    pub async fn heartbeat_node(
        &self,
        id: &str,
        address: &str,
        started_at: i64,
        now: i64,
    ) -> StoreResult<()> {
        let sql = format!(
            "INSERT INTO admin_nodes (id, address, started_at, heartbeat_at) VALUES (?, ?, ?, ?){}",
            self.dialect().upsert("id", &["address", "heartbeat_at"])
        );
        with_pool!(self, pool => sqlx::query(&sql)
            .bind(id).bind(address).bind(started_at).bind(now).execute(pool).await.map(Done::from))?;
        Ok(())
    }

    pub async fn admin_nodes(&self) -> StoreResult<Vec<AdminNode>> {
        Ok(
            with_pool!(self, pool => sqlx::query_as::<_, AdminNode>("SELECT id, address, started_at, heartbeat_at FROM admin_nodes ORDER BY id")
            .fetch_all(pool).await)?,
        )
    }

    pub async fn remove_node(&self, id: &str) -> StoreResult<()> {
        with_pool!(self, pool => sqlx::query("DELETE FROM admin_nodes WHERE id = ?")
            .bind(id).execute(pool).await.map(Done::from))?;
        Ok(())
    }
}

impl Store {
    /// Returns the stored setting, or stores `generate()` if there is none (the first admin to
    /// insert wins; the others read its value).
    pub async fn setting_or_insert(
        &self,
        name: &str,
        generate: impl FnOnce() -> String,
    ) -> StoreResult<String> {
        let sql = format!(
            "{} INTO settings (name, value) VALUES (?, ?)",
            self.dialect().insert_ignore()
        );
        let value = generate();
        with_pool!(self, pool => sqlx::query(&sql).bind(name).bind(&value).execute(pool).await.map(Done::from))?;
        let stored: String = with_pool!(self, pool => sqlx::query_scalar("SELECT value FROM settings WHERE name = ?")
            .bind(name).fetch_one(pool).await)?;
        Ok(stored)
    }
}
