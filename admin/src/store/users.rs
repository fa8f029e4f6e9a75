//! Users, API tokens and console sessions.

use super::{with_pool, Done, Store, StoreError, StoreResult};
use crate::model::{ApiToken, User};
use crate::refusal::{Reason, Refusal};

const USER_COLS: &str =
    "id, username, password_hash, role, group_ids, must_change_password, lang, created_at, updated_at";
const TOKEN_COLS: &str =
    "id, user_id, name, token_hash, prefix, created_at, last_used_at, revoked_at";

impl Store {
    pub async fn create_user(
        &self,
        username: &str,
        password_hash: &str,
        role: &str,
        group_ids: &str,
        must_change_password: bool,
        now: i64,
    ) -> StoreResult<i64> {
        let res = with_pool!(self, pool => sqlx::query("INSERT INTO users (username, password_hash, role, group_ids, must_change_password, lang, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'en', ?, ?)")
            .bind(username).bind(password_hash).bind(role).bind(group_ids)
            .bind(i64::from(must_change_password)).bind(now).bind(now)
            .execute(pool).await.map(|r| Done::from(r).insert_id()));
        res.map_err(|e| {
            StoreError::unique(e, || {
                Refusal::new(Reason::UserExists).with("value", format_args!("{username:?}"))
            })
        })
    }

    pub async fn get_user(&self, id: i64) -> StoreResult<User> {
        let sql = format!("SELECT {USER_COLS} FROM users WHERE id = ?");
        with_pool!(self, pool => sqlx::query_as::<_, User>(&sql).bind(id).fetch_optional(pool).await)?
            .ok_or(StoreError::NotFound(Reason::UserNotFound))
    }

    pub async fn user_by_name(&self, username: &str) -> StoreResult<Option<User>> {
        let sql = format!("SELECT {USER_COLS} FROM users WHERE username = ?");
        Ok(
            with_pool!(self, pool => sqlx::query_as::<_, User>(&sql).bind(username).fetch_optional(pool).await)?,
        )
    }

    pub async fn list_users(&self) -> StoreResult<Vec<User>> {
        let sql = format!("SELECT {USER_COLS} FROM users ORDER BY id");
        Ok(with_pool!(self, pool => sqlx::query_as::<_, User>(&sql).fetch_all(pool).await)?)
    }

    pub async fn count_users(&self) -> StoreResult<i64> {
        Ok(
            with_pool!(self, pool => sqlx::query_scalar("SELECT COUNT(*) FROM users").fetch_one(pool).await)?,
        )
    }

    pub async fn update_user_access(
        &self,
        id: i64,
        role: &str,
        group_ids: &str,
        now: i64,
    ) -> StoreResult<()> {
        let n = with_pool!(self, pool => sqlx::query("UPDATE users SET role = ?, group_ids = ?, updated_at = ? WHERE id = ?")
            .bind(role).bind(group_ids).bind(now).bind(id).execute(pool).await.map(Done::from))?
        .rows_affected();
        if n == 0 {
            return Err(StoreError::NotFound(Reason::UserNotFound));
        }
        Ok(())
    }

    pub async fn set_password(
        &self,
        id: i64,
        password_hash: &str,
        must_change: bool,
        now: i64,
    ) -> StoreResult<()> {
        let n = with_pool!(self, pool => sqlx::query("UPDATE users SET password_hash = ?, must_change_password = ?, updated_at = ? WHERE id = ?")
            .bind(password_hash).bind(i64::from(must_change)).bind(now).bind(id).execute(pool).await.map(Done::from))?
        .rows_affected();
        if n == 0 {
            return Err(StoreError::NotFound(Reason::UserNotFound));
        }
        Ok(())
    }

    pub async fn set_user_lang(&self, id: i64, lang: &str) -> StoreResult<()> {
        with_pool!(self, pool => sqlx::query("UPDATE users SET lang = ? WHERE id = ?")
            .bind(lang).bind(id).execute(pool).await.map(Done::from))?;
        Ok(())
    }

    pub async fn delete_user(&self, id: i64) -> StoreResult<()> {
        let n = with_pool!(self, pool => sqlx::query("DELETE FROM users WHERE id = ?")
            .bind(id).execute(pool).await.map(Done::from))?
        .rows_affected();
        if n == 0 {
            return Err(StoreError::NotFound(Reason::UserNotFound));
        }
        with_pool!(self, pool => {
            sqlx::query("DELETE FROM api_tokens WHERE user_id = ?").bind(id).execute(pool).await?;
            sqlx::query("DELETE FROM sessions WHERE user_id = ?").bind(id).execute(pool).await?;
        });
        Ok(())
    }

    pub async fn create_token(
        &self,
        user_id: i64,
        name: &str,
        token_hash: &str,
        prefix: &str,
        now: i64,
    ) -> StoreResult<i64> {
        Ok(with_pool!(self, pool => sqlx::query("INSERT INTO api_tokens (user_id, name, token_hash, prefix, created_at) VALUES (?, ?, ?, ?, ?)")
            .bind(user_id).bind(name).bind(token_hash).bind(prefix).bind(now)
            .execute(pool).await.map(Done::from))?
        .insert_id())
    }

    /// The live (not revoked) token with this hash.
    pub async fn token_by_hash(&self, token_hash: &str) -> StoreResult<Option<ApiToken>> {
        let sql = format!(
            "SELECT {TOKEN_COLS} FROM api_tokens WHERE token_hash = ? AND revoked_at IS NULL"
        );
        Ok(
            with_pool!(self, pool => sqlx::query_as::<_, ApiToken>(&sql).bind(token_hash).fetch_optional(pool).await)?,
        )
    }

    pub async fn touch_token(&self, id: i64, now: i64) -> StoreResult<()> {
        with_pool!(self, pool => sqlx::query("UPDATE api_tokens SET last_used_at = ? WHERE id = ?")
            .bind(now).bind(id).execute(pool).await.map(Done::from))?;
        Ok(())
    }

    /// Tokens of one user, or of everyone when `user_id` is `None`.
    pub async fn list_tokens(&self, user_id: Option<i64>) -> StoreResult<Vec<ApiToken>> {
        let rows = match user_id {
            Some(u) => {
                let sql =
                    format!("SELECT {TOKEN_COLS} FROM api_tokens WHERE user_id = ? ORDER BY id");
                with_pool!(self, pool => sqlx::query_as::<_, ApiToken>(&sql).bind(u).fetch_all(pool).await)?
            }
            None => {
                let sql = format!("SELECT {TOKEN_COLS} FROM api_tokens ORDER BY id");
                with_pool!(self, pool => sqlx::query_as::<_, ApiToken>(&sql).fetch_all(pool).await)?
            }
        };
        Ok(rows)
    }

    pub async fn get_token(&self, id: i64) -> StoreResult<ApiToken> {
        let sql = format!("SELECT {TOKEN_COLS} FROM api_tokens WHERE id = ?");
        with_pool!(self, pool => sqlx::query_as::<_, ApiToken>(&sql).bind(id).fetch_optional(pool).await)?
            .ok_or(StoreError::NotFound(Reason::TokenNotFound))
    }

    pub async fn revoke_token(&self, id: i64, now: i64) -> StoreResult<()> {
        let n = with_pool!(self, pool => sqlx::query("UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
            .bind(now).bind(id).execute(pool).await.map(Done::from))?
        .rows_affected();
        if n == 0 {
            return Err(StoreError::NotFound(Reason::TokenNotFound));
        }
        Ok(())
    }
}
