//! Checkpoints, daily report, admin nodes and counters.

use super::{with_pool, with_read_pool, Done, Store, StoreResult};
use crate::model::{AdminNode, Checkpoint, DailyReport};

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

    /// Deletes runs (and then fires left without runs) created before `before`, in batches so a
    /// large clean-up never holds a long lock. Returns the number of runs deleted.
    pub async fn delete_runs_before(&self, before: i64, batch: i64) -> StoreResult<u64> {
        let mut total = 0;
        loop {
            let ids: Vec<i64> = with_pool!(self, pool => sqlx::query_scalar("SELECT id FROM runs WHERE created_at < ? ORDER BY id LIMIT ?")
                .bind(before).bind(batch).fetch_all(pool).await)?;
            if ids.is_empty() {
                break;
            }
            let max = *ids.last().expect("non-empty");
            let n = with_pool!(self, pool => sqlx::query("DELETE FROM runs WHERE created_at < ? AND id <= ?")
                .bind(before).bind(max).execute(pool).await.map(Done::from))?
            .rows_affected();
            total += n;
        }
        with_pool!(self, pool => sqlx::query("DELETE FROM fires WHERE created_at < ? AND state IN ('succeeded', 'failed')")
            .bind(before).execute(pool).await.map(Done::from))?;
        Ok(total)
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
