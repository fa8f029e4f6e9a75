//! Console sessions: the cookie, its CSRF token, and the failed-login limit.
//!
//! The cookie holds a random id; the database keeps only its SHA-256, so reading the `sessions`
//! table does not let anyone log in. Every state-changing request made with the cookie must repeat
//! the session's CSRF token in `X-CSRF-Token` (or a `csrf` form field): a page of another site can
//! make the browser send the cookie, but it cannot read the token.

use axum::http::{header, HeaderMap, HeaderValue, Method};

use crate::api::{ApiError, AppState};
use crate::auth::{random_secret, token_hash};
use crate::model::{now_ms, User};
use crate::store::sessions::Session;

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "shardline_session";
/// Name of the cookie that carries the login form's anti-forgery token (before any session).
pub const LOGIN_COOKIE: &str = "shardline_login";
/// Header a page sends the session's CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// A session ends after this long without use...
pub const IDLE_MS: i64 = 12 * 3600 * 1000;
/// ...and at the latest this long after login.
pub const MAX_AGE_MS: i64 = 7 * 24 * 3600 * 1000;
/// Failed logins allowed per (username, client address) within [`FAILURE_WINDOW_MS`].
pub const MAX_FAILURES: i64 = 5;
pub const FAILURE_WINDOW_MS: i64 = 15 * 60 * 1000;

/// The value of cookie `name` in the request, if any.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

/// Whether the browser reached us over TLS (the admin itself speaks plain HTTP behind a proxy).
pub fn is_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax, path `/`, Secure over TLS. `max_age` 0 deletes.
pub fn set_cookie(name: &str, value: &str, max_age_s: Option<i64>, secure: bool) -> HeaderValue {
    let mut c = format!("{name}={value}; Path=/; HttpOnly; SameSite=Lax");
    if let Some(age) = max_age_s {
        c.push_str(&format!("; Max-Age={age}"));
    }
    if secure {
        c.push_str("; Secure");
    }
    HeaderValue::from_str(&c).expect("cookie values are alphanumeric")
}

/// A new session for `user_id`: returns the cookie value (shown to the browser only) and the stored row.
pub async fn create(state: &AppState, user_id: i64) -> Result<(String, Session), ApiError> {
    let secret = random_secret(43);
    let now = now_ms();
    let session = Session {
        id_hash: token_hash(&secret),
        user_id,
        csrf_token: random_secret(32),
        created_at: now,
        expires_at: now + IDLE_MS,
    };
    state.store.create_session(&session).await?;
    Ok((secret, session))
}

/// The live session named by the request's cookie, with its user. Refreshes the sliding expiry at
/// most once a minute, so an active console is not one write per request.
pub async fn current(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<Option<(Session, User)>, ApiError> {
    let Some(secret) = cookie(headers, SESSION_COOKIE) else {
        return Ok(None);
    };
    let now = now_ms();
    let Some(mut session) = state.store.live_session(&token_hash(secret), now).await? else {
        return Ok(None);
    };
    if now - session.created_at > MAX_AGE_MS {
        state.store.delete_session(&session.id_hash).await?;
        return Ok(None);
    }
    let want = now + IDLE_MS;
    if want - session.expires_at > 60_000 {
        state.store.extend_session(&session.id_hash, want).await?;
        session.expires_at = want;
    }
    let user = match state.store.get_user(session.user_id).await {
        Ok(u) => u,
        Err(crate::store::StoreError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(Some((session, user)))
}

/// Whether `method` changes state (and so needs the CSRF token).
pub fn is_unsafe(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Constant-time comparison of the presented CSRF token with the session's.
pub fn csrf_ok(session: &Session, presented: Option<&str>) -> bool {
    shardline_executor::protocol::token_matches(&session.csrf_token, presented)
        && presented.is_some_and(|p| !p.is_empty())
}

/// Authenticates a REST call made by the console: `Ok(None)` when the request carries no session
/// cookie (the caller then asks for a bearer token).
pub async fn api_user(
    state: &AppState,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Option<User>, ApiError> {
    if cookie(headers, SESSION_COOKIE).is_none() {
        return Ok(None);
    }
    let Some((session, user)) = current(state, headers).await? else {
        return Err(ApiError::unauthorized(
            "your console session has ended; log in again",
        ));
    };
    if is_unsafe(method) {
        let presented = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        if !csrf_ok(&session, presented) {
            return Err(ApiError::forbidden(
                "missing or wrong X-CSRF-Token header for a request made with the console session",
            ));
        }
    }
    if user.must_change_password != 0 {
        return Err(ApiError::forbidden(
            "change your password first (/console/password)",
        ));
    }
    Ok(Some(user))
}

/// Whether (username, ip) may try to log in now; `Err(minutes)` tells how long to wait.
pub async fn login_allowed(state: &AppState, username: &str, ip: &str) -> Result<(), i64> {
    let now = now_ms();
    match state
        .store
        .login_failures_since(username, ip, now - FAILURE_WINDOW_MS)
        .await
    {
        Ok((n, oldest)) if n >= MAX_FAILURES => {
            let until = oldest.unwrap_or(now) + FAILURE_WINDOW_MS;
            Err(((until - now) as f64 / 60_000.0).ceil().max(1.0) as i64)
        }
        Ok(_) => Ok(()),
        // Failing closed would lock everyone out during a database hiccup; the password check
        // that follows needs the database anyway.
        Err(e) => {
            tracing::warn!(error = %e, "cannot read failed logins");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_parsed() {
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; shardline_session=abc ; b="),
        );
        h.append(
            header::COOKIE,
            HeaderValue::from_static("shardline_login=x"),
        );
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("abc"));
        assert_eq!(cookie(&h, LOGIN_COOKIE), Some("x"));
        assert_eq!(cookie(&h, "b"), None);
        assert_eq!(cookie(&h, "missing"), None);
    }

    #[test]
    fn cookie_flags() {
        let c = set_cookie(SESSION_COOKIE, "v", None, false);
        assert_eq!(
            c.to_str().unwrap(),
            "shardline_session=v; Path=/; HttpOnly; SameSite=Lax"
        );
        let c = set_cookie(SESSION_COOKIE, "", Some(0), true);
        assert!(c.to_str().unwrap().ends_with("; Max-Age=0; Secure"));
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-proto", HeaderValue::from_static("HTTPS, http"));
        assert!(is_https(&h));
        assert!(!is_https(&HeaderMap::new()));
    }

    #[test]
    fn csrf_needs_the_exact_token() {
        let s = Session {
            id_hash: String::new(),
            user_id: 1,
            csrf_token: "tok".into(),
            created_at: 0,
            expires_at: 0,
        };
        assert!(csrf_ok(&s, Some("tok")));
        assert!(!csrf_ok(&s, Some("tok2")));
        assert!(!csrf_ok(&s, None));
        assert!(is_unsafe(&Method::POST) && is_unsafe(&Method::DELETE));
        assert!(!is_unsafe(&Method::GET));
    }
}
