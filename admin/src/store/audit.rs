//! The audit log: who changed what through the REST API and the console.

use sqlx::QueryBuilder;

use super::fires::truncate;
use super::{list_page, with_pool, with_read_pool, Done, Store, StoreResult};
use crate::model::AuditEntry;

/// Filters of the audit log list, newest first.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub username: Option<String>,
    /// Time from, epoch ms (inclusive).
    pub from_ms: Option<i64>,
    /// Time to, epoch ms (exclusive).
    pub to_ms: Option<i64>,
    pub offset: i64,
    pub limit: i64,
}

impl Store {
    /// Keeps one request (the `id` of `entry` is not used); a method or path longer than its
    /// column (8 and 512 bytes on MySQL) is cut there, on both databases alike, so that MySQL
    /// does not refuse the entry.
    pub async fn record_audit(&self, entry: &AuditEntry) -> StoreResult<()> {
        with_pool!(self, pool => sqlx::query("INSERT INTO audit_log (at, user_id, username, console, method, path, status) VALUES (?, ?, ?, ?, ?, ?, ?)")
            .bind(entry.at).bind(entry.user_id).bind(&entry.username).bind(entry.console)
            .bind(truncate(&entry.method, 8)).bind(truncate(&entry.path, 512)).bind(entry.status)
            .execute(pool).await.map(Done::from))?;
        Ok(())
    }

    /// A page of the audit log, newest first, and how many entries match.
    pub async fn list_audit(&self, f: &AuditFilter) -> StoreResult<(Vec<AuditEntry>, i64)> {
        fn push_where<'a, DB: sqlx::Database>(qb: &mut QueryBuilder<'a, DB>, f: &'a AuditFilter)
        where
            i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
            &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        {
            qb.push(" WHERE 1 = 1");
            if let Some(u) = &f.username {
                qb.push(" AND username = ").push_bind(u.as_str());
            }
            if let Some(t) = f.from_ms {
                qb.push(" AND at >= ").push_bind(t);
            }
            if let Some(t) = f.to_ms {
                qb.push(" AND at < ").push_bind(t);
            }
        }
        let limit = super::page_limit(f.limit);
        Ok(list_page!(
            self,
            AuditEntry,
            "id, at, user_id, username, console, method, path, status",
            "audit_log",
            push_where,
            f,
            f.offset.max(0),
            limit
        ))
    }

    /// Deletes the entries older than `before` (run retention). Returns how many.
    pub async fn delete_audit_before(&self, before: i64) -> StoreResult<u64> {
        Ok(
            with_pool!(self, pool => sqlx::query("DELETE FROM audit_log WHERE at < ?")
            .bind(before).execute(pool).await.map(Done::from))?
            .rows_affected(),
        )
    }
}
