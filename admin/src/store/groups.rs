//! Executor groups and the registry of live executors.

use sqlx::QueryBuilder;

use super::{with_pool, with_read_pool, Done, Store, StoreError, StoreResult};
use crate::model::{Group, RegistryEntry};
use crate::refusal::{Reason, Refusal};

/// One heartbeat of an executor: it is alive at `at`.
#[derive(Debug, Clone, PartialEq)]
pub struct Beat {
    pub appname: String,
    pub address: String,
    pub meta: String,
    pub at: i64,
}

/// The fields of a group a client sets.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupInput {
    pub appname: String,
    pub title: String,
    pub address_type: String,
    pub addresses: String,
    pub access_token: String,
    pub generation: String,
}

const GROUP_COLS: &str =
    "id, appname, title, address_type, addresses, access_token, generation, created_at, updated_at";

fn appname_used(appname: &str) -> Refusal {
    Refusal::new(Reason::AppnameUsed).with("value", format_args!("{appname:?}"))
}

impl Store {
    pub async fn create_group(&self, g: &GroupInput, now: i64) -> StoreResult<i64> {
        let sql = "INSERT INTO executor_groups (appname, title, address_type, addresses, access_token, generation, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
        let res = with_pool!(self, pool => sqlx::query(sql)
            .bind(&g.appname).bind(&g.title).bind(&g.address_type).bind(&g.addresses)
            .bind(&g.access_token).bind(&g.generation).bind(now).bind(now)
            .execute(pool).await.map(|r| Done::from(r).insert_id()));
        res.map_err(|e| StoreError::unique(e, || appname_used(&g.appname)))
    }

    pub async fn update_group(&self, id: i64, g: &GroupInput, now: i64) -> StoreResult<()> {
        let sql = "UPDATE executor_groups SET appname = ?, title = ?, address_type = ?, addresses = ?, access_token = ?, generation = ?, updated_at = ? WHERE id = ?";
        let res = with_pool!(self, pool => sqlx::query(sql)
            .bind(&g.appname).bind(&g.title).bind(&g.address_type).bind(&g.addresses)
            .bind(&g.access_token).bind(&g.generation).bind(now).bind(id)
            .execute(pool).await.map(|r| Done::from(r).rows_affected()));
        match res {
            Ok(0) => Err(StoreError::NotFound(Reason::GroupNotFound)),
            Ok(_) => Ok(()),
            Err(e) => Err(StoreError::unique(e, || appname_used(&g.appname))),
        }
    }

    /// Deletes a group that has no jobs left.
    pub async fn delete_group(&self, id: i64) -> StoreResult<()> {
        let jobs: i64 = with_pool!(self, pool => sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE group_id = ?")
            .bind(id).fetch_one(pool).await)?;
        if jobs > 0 {
            return Err(StoreError::Conflict(
                Refusal::new(Reason::GroupHasJobs)
                    .with("id", id)
                    .with("jobs", jobs),
            ));
        }
        let n = with_pool!(self, pool => sqlx::query("DELETE FROM executor_groups WHERE id = ?")
            .bind(id).execute(pool).await.map(Done::from))?
        .rows_affected();
        if n == 0 {
            return Err(StoreError::NotFound(Reason::GroupNotFound));
        }
        Ok(())
    }

    pub async fn get_group(&self, id: i64) -> StoreResult<Group> {
        let sql = format!("SELECT {GROUP_COLS} FROM executor_groups WHERE id = ?");
        with_read_pool!(self, pool => sqlx::query_as::<_, Group>(&sql).bind(id).fetch_optional(pool).await)?
            .ok_or(StoreError::NotFound(Reason::GroupNotFound))
    }

    pub async fn group_by_appname(&self, appname: &str) -> StoreResult<Option<Group>> {
        let sql = format!("SELECT {GROUP_COLS} FROM executor_groups WHERE appname = ?");
        Ok(
            with_read_pool!(self, pool => sqlx::query_as::<_, Group>(&sql).bind(appname).fetch_optional(pool).await)?,
        )
    }

    pub async fn list_groups(&self) -> StoreResult<Vec<Group>> {
        let sql = format!("SELECT {GROUP_COLS} FROM executor_groups ORDER BY id");
        Ok(with_read_pool!(self, pool => sqlx::query_as::<_, Group>(&sql).fetch_all(pool).await)?)
    }

    /// Records heartbeats: inserts each executor or refreshes its time and metadata, a chunk of
    /// rows per statement, in one transaction.
    pub async fn upsert_registry_many(&self, beats: &[Beat]) -> StoreResult<()> {
        let tail = self
            .dialect()
            .upsert("appname, address", &["meta", "updated_at"]);
        with_pool!(self, pool => async {
            let mut tx = pool.begin().await?;
            for chunk in super::cached_chunks(beats) {
                let mut qb = QueryBuilder::new(
                    "INSERT INTO registry (appname, address, meta, first_seen, updated_at) ",
                );
                qb.push_values(chunk, |mut b, beat| {
                    b.push_bind(beat.appname.as_str())
                        .push_bind(beat.address.as_str())
                        .push_bind(beat.meta.as_str())
                        .push_bind(beat.at)
                        .push_bind(beat.at);
                });
                qb.push(&tail);
                qb.build().execute(&mut *tx).await?;
            }
            tx.commit().await
        }
        .await)?;
        Ok(())
    }

    pub async fn remove_registry(&self, appname: &str, address: &str) -> StoreResult<u64> {
        Ok(with_pool!(self, pool => sqlx::query("DELETE FROM registry WHERE appname = ? AND address = ?")
            .bind(appname).bind(address).execute(pool).await.map(Done::from))?
        .rows_affected())
    }

    /// Executors of `appname` that beat at or after `alive_since`, sorted by address (the shard
    /// order, as XXL-JOB sorts its address list).
    pub async fn live_executors(
        &self,
        appname: &str,
        alive_since: i64,
    ) -> StoreResult<Vec<RegistryEntry>> {
        let sql = "SELECT id, appname, address, meta, first_seen, updated_at FROM registry WHERE appname = ? AND updated_at >= ? ORDER BY address";
        let mut v = with_read_pool!(self, pool => sqlx::query_as::<_, RegistryEntry>(sql)
            .bind(appname).bind(alive_since).fetch_all(pool).await)?;
        // Byte order, independent of the database collation.
        v.sort_by(|a, b| a.address.cmp(&b.address));
        Ok(v)
    }

    /// Every live executor of every group (for the registry monitor and the console).
    pub async fn all_live_executors(&self, alive_since: i64) -> StoreResult<Vec<RegistryEntry>> {
        let sql = "SELECT id, appname, address, meta, first_seen, updated_at FROM registry WHERE updated_at >= ? ORDER BY appname, address";
        Ok(
            with_read_pool!(self, pool => sqlx::query_as::<_, RegistryEntry>(sql)
            .bind(alive_since).fetch_all(pool).await)?,
        )
    }

    /// Deletes registry rows whose last beat is older than `before`; returns how many.
    pub async fn evict_registry(&self, before: i64) -> StoreResult<u64> {
        Ok(
            with_pool!(self, pool => sqlx::query("DELETE FROM registry WHERE updated_at < ?")
            .bind(before).execute(pool).await.map(Done::from))?
            .rows_affected(),
        )
    }
}
