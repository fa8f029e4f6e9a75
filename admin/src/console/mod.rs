//! The web console: login and logout, the forced password change, the page shell and its static
//! assets (`web/`, built into the binary). The pages themselves are drawn by `web/app.js`, which
//! talks to `/api/v1` with the session cookie (see [`session`]).

pub mod session;
mod text;

use std::net::SocketAddr;
use std::sync::LazyLock;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{header, Extensions, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::api::{keep_audit, ApiError, AppState};
use crate::auth;
use crate::model::{now_ms, AuditEntry};
use session::{cookie, csrf_ok, is_https, set_cookie, CSRF_HEADER, LOGIN_COOKIE, SESSION_COOKIE};
use text::Key;

pub use text::Lang;

/// The console's login form, also the path its audit entries name.
const LOGIN_PATH: &str = "/console/login";

/// Cookie remembering the language chosen on the login page (before we know the user).
const LANG_COOKIE: &str = "shardline_lang";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/console/") }))
        .route("/console", get(|| async { Redirect::to("/console/") }))
        .route("/console/", get(shell))
        .route(LOGIN_PATH, get(login_page).post(login))
        .route("/console/logout", post(logout))
        .route(
            "/console/password",
            get(password_page).post(change_password),
        )
        .route("/console/lang", post(set_lang))
        .route("/console/assets/{name}", get(asset))
}

/// A file of `web/` served under `/console/assets/`.
struct Asset {
    name: &'static str,
    mime: &'static str,
    body: &'static str,
}

static ASSETS: &[Asset] = &[
    Asset {
        name: "app.js",
        mime: "text/javascript; charset=utf-8",
        body: include_str!("../../../web/app.js"),
    },
    Asset {
        name: "i18n.js",
        mime: "text/javascript; charset=utf-8",
        body: include_str!("../../../web/i18n.js"),
    },
    Asset {
        name: "app.css",
        mime: "text/css; charset=utf-8",
        body: include_str!("../../../web/app.css"),
    },
    Asset {
        name: "favicon.svg",
        mime: "image/svg+xml",
        body: include_str!("../../../web/favicon.svg"),
    },
];

const SHELL: &str = include_str!("../../../web/index.html");
const AUTH_PAGE: &str = include_str!("../../../web/auth.html");

/// Content hash of every asset, for ETags and for cache-busting links in the shell.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    let mut h = Sha256::new();
    for a in ASSETS {
        h.update(a.body.as_bytes());
    }
    hex::encode(&h.finalize()[..8])
});

/// Escapes text for HTML element content and quoted attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Headers of every console page: nothing inline runs, nothing frames us, nothing is cached.
fn page_headers(headers: &mut HeaderMap) {
    let set = |h: &mut HeaderMap, k: &'static str, v: &'static str| {
        h.insert(k, HeaderValue::from_static(v));
    };
    set(
        headers,
        "content-security-policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    );
    set(headers, "x-frame-options", "DENY");
    set(headers, "x-content-type-options", "nosniff");
    set(headers, "referrer-policy", "same-origin");
    set(headers, "cache-control", "no-store");
}

fn html(status: StatusCode, body: String, cookies: Vec<HeaderValue>) -> Response {
    let mut resp = (status, body).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    page_headers(h);
    for c in cookies {
        h.append(header::SET_COOKIE, c);
    }
    resp
}

fn see_other(to: &str, cookies: Vec<HeaderValue>) -> Response {
    let mut resp = Redirect::to(to).into_response();
    for c in cookies {
        resp.headers_mut().append(header::SET_COOKIE, c);
    }
    resp
}

/// The server-rendered page around a login or password form.
fn auth_page(lang: Lang, title: &str, body: &str) -> String {
    AUTH_PAGE
        .replace("{{lang}}", lang.code())
        .replace("{{title}}", &esc(title))
        .replace("{{product}}", lang.t(Key::Product))
        .replace("{{tagline}}", &esc(lang.t(Key::Tagline)))
        .replace("{{v}}", &VERSION)
        .replace("{{body}}", body)
}

fn page_lang(q: Option<&str>, headers: &HeaderMap) -> Lang {
    if let Some(l) = q.filter(|l| !l.is_empty()) {
        return Lang::parse(l);
    }
    if let Some(l) = cookie(headers, LANG_COOKIE) {
        return Lang::parse(l);
    }
    headers
        .get(header::ACCEPT_LANGUAGE)
        .and_then(|v| v.to_str().ok())
        .map_or(Lang::En, Lang::from_accept)
}

/// The client's address as the TCP connection shows it; "-" when the server was not started with
/// connection info (the limit is then per username only).
fn client_ip(ext: &Extensions) -> String {
    ext.get::<ConnectInfo<SocketAddr>>()
        .map_or_else(|| "-".to_string(), |c| c.0.ip().to_string())
}

#[derive(Debug, Default, Deserialize)]
struct LangQuery {
    lang: Option<String>,
}

async fn login_page(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<LangQuery>,
) -> Result<Response, ApiError> {
    if session::current(&st, &headers).await?.is_some() {
        return Ok(see_other("/console/", vec![]));
    }
    let lang = page_lang(q.lang.as_deref(), &headers);
    let mut cookies = Vec::new();
    if q.lang.is_some() {
        cookies.push(set_cookie(
            LANG_COOKIE,
            lang.code(),
            Some(365 * 86400),
            is_https(&headers),
        ));
    }
    Ok(login_form(lang, &headers, "", "", StatusCode::OK, cookies))
}

/// Renders the login form with a fresh (or the current) anti-forgery token.
fn login_form(
    lang: Lang,
    headers: &HeaderMap,
    username: &str,
    error: &str,
    status: StatusCode,
    mut cookies: Vec<HeaderValue>,
) -> Response {
    let token = match cookie(headers, LOGIN_COOKIE) {
        Some(t) if t.len() == 32 && t.chars().all(|c| c.is_ascii_alphanumeric()) => t.to_string(),
        _ => {
            let t = auth::random_secret(32);
            cookies.push(set_cookie(LOGIN_COOKIE, &t, None, is_https(headers)));
            t
        }
    };
    let other = match lang {
        Lang::En => Lang::Zh,
        Lang::Zh => Lang::En,
    };
    let error_html = if error.is_empty() {
        String::new()
    } else {
        format!(
            r#"<p class="form-error" role="alert" id="login-error">{}</p>"#,
            esc(error)
        )
    };
    let body = format!(
        r#"<form method="post" action="/console/login" class="auth-form" id="login-form">
  <h1>{title}</h1>
  {error_html}
  <input type="hidden" name="csrf" value="{token}">
  <label>{user_l}<input name="username" id="username" autocomplete="username" required maxlength="64" value="{username}" autofocus></label>
  <label>{pass_l}<input name="password" id="password" type="password" autocomplete="current-password" required maxlength="256"></label>
  <button type="submit" class="primary" id="login-submit">{submit}</button>
  <p class="lang-switch"><a href="/console/login?lang={other_code}" id="lang-switch">{other_name}</a></p>
</form>"#,
        title = esc(lang.t(Key::LoginTitle)),
        user_l = esc(lang.t(Key::Username)),
        pass_l = esc(lang.t(Key::Password)),
        submit = esc(lang.t(Key::SignIn)),
        username = esc(username),
        other_code = other.code(),
        other_name = esc(lang.t(Key::OtherLang)),
    );
    html(
        status,
        auth_page(lang, lang.t(Key::LoginTitle), &body),
        cookies,
    )
}

#[derive(Debug, Default, Deserialize)]
struct LoginForm {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    csrf: String,
}

/// A hash to check passwords against when the user does not exist, so that an unknown username
/// takes as long as a wrong password (no user enumeration by timing).
static DUMMY_HASH: LazyLock<String> =
    LazyLock::new(|| auth::hash_password("not a real password").unwrap_or_default());

async fn login(
    State(st): State<AppState>,
    headers: HeaderMap,
    ext: Extensions,
    Form(form): Form<LoginForm>,
) -> Result<Response, ApiError> {
    let lang = page_lang(None, &headers);
    let username = form.username.trim().to_string();
    let expected = cookie(&headers, LOGIN_COOKIE).unwrap_or("");
    if expected.is_empty()
        || !shardline_executor::protocol::token_matches(expected, Some(&form.csrf))
    {
        return Ok(login_form(
            lang,
            &headers,
            &username,
            lang.t(Key::FormExpired),
            StatusCode::FORBIDDEN,
            vec![],
        ));
    }
    let ip = client_ip(&ext);
    if let Err(minutes) = session::login_allowed(&st, &username, &ip).await {
        let msg = lang.t(Key::TooMany).replace("{n}", &minutes.to_string());
        return Ok(login_form(
            lang,
            &headers,
            &username,
            &msg,
            StatusCode::TOO_MANY_REQUESTS,
            vec![],
        ));
    }
    let user = st.store.user_by_name(&username).await?;
    let hash = user
        .as_ref()
        .map_or_else(|| DUMMY_HASH.clone(), |u| u.password_hash.clone());
    let ok = auth::verify_password_async(form.password, hash).await && user.is_some();
    let (user, refused) = if ok { (user, None) } else { (None, user) };
    let Some(user) = user else {
        let now = now_ms();
        st.store.record_login_failure(&username, &ip, now).await?;
        // A wrong password for an existing user is kept in the audit log too (how many a
        // client may try is limited above, so this is no unbounded write). Not awaited: the
        // answer must not take longer when the user exists (the dummy hash's reason).
        if let Some(u) = refused {
            let st = st.clone();
            let status = StatusCode::UNAUTHORIZED.as_u16();
            tokio::spawn(async move {
                keep_audit(&st, &AuditEntry::now(&u, true, "POST", LOGIN_PATH, status)).await;
            });
        }
        tracing::info!(username = %username, ip = %ip, "console login failed");
        return Ok(login_form(
            lang,
            &headers,
            &username,
            lang.t(Key::BadCredentials),
            StatusCode::UNAUTHORIZED,
            vec![],
        ));
    };
    let now = now_ms();
    st.store.clear_login_failures(&username, &ip).await?;
    // Housekeeping that costs nothing noticeable at login rates.
    st.store.delete_expired_sessions(now).await?;
    st.store
        .prune_login_failures(now - session::FAILURE_WINDOW_MS)
        .await?;
    let (secret, _) = session::create(&st, user.id).await?;
    tracing::info!(username = %user.username, ip = %ip, "console login");
    let status = StatusCode::SEE_OTHER.as_u16();
    keep_audit(
        &st,
        &AuditEntry::now(&user, true, "POST", LOGIN_PATH, status),
    )
    .await;
    let secure = is_https(&headers);
    let cookies = vec![
        set_cookie(SESSION_COOKIE, &secret, None, secure),
        set_cookie(LOGIN_COOKIE, "", Some(0), secure),
    ];
    let to = if user.must_change_password != 0 {
        "/console/password"
    } else {
        "/console/"
    };
    Ok(see_other(to, cookies))
}

#[derive(Debug, Default, Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// The CSRF token of a form post: the `csrf` field, or the header when the page posts by script.
fn presented_csrf<'a>(headers: &'a HeaderMap, form: &'a str) -> Option<&'a str> {
    if !form.is_empty() {
        return Some(form);
    }
    headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok())
}

async fn logout(
    State(st): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ApiError> {
    let secure = is_https(&headers);
    if let Some((s, user)) = session::current(&st, &headers).await? {
        // Without the token a foreign page could log people out; refuse it.
        if !csrf_ok(&s, presented_csrf(&headers, &form.csrf)) {
            return Err(ApiError::forbidden("missing or wrong CSRF token"));
        }
        st.store.delete_session(&s.id_hash).await?;
        tracing::info!(username = %user.username, "console logout");
        let status = StatusCode::SEE_OTHER.as_u16();
        keep_audit(
            &st,
            &AuditEntry::now(&user, true, "POST", "/console/logout", status),
        )
        .await;
    }
    Ok(see_other(
        "/console/login",
        vec![set_cookie(SESSION_COOKIE, "", Some(0), secure)],
    ))
}

fn password_form(
    lang: Lang,
    csrf: &str,
    forced: bool,
    error: &str,
    status: StatusCode,
) -> Response {
    let notice = if forced {
        format!(
            r#"<p class="form-note">{}</p>"#,
            esc(lang.t(Key::ChangeNotice))
        )
    } else {
        String::new()
    };
    let error_html = if error.is_empty() {
        String::new()
    } else {
        format!(
            r#"<p class="form-error" role="alert" id="password-error">{}</p>"#,
            esc(error)
        )
    };
    let body = format!(
        r#"<form method="post" action="/console/password" class="auth-form" id="password-form">
  <h1>{title}</h1>
  {notice}{error_html}
  <input type="hidden" name="csrf" value="{csrf}">
  <label>{cur}<input name="current" id="current" type="password" autocomplete="current-password" required maxlength="256"></label>
  <label>{new}<input name="password" id="new-password" type="password" autocomplete="new-password" required minlength="8" maxlength="256"></label>
  <label>{confirm}<input name="confirm" id="confirm-password" type="password" autocomplete="new-password" required minlength="8" maxlength="256"></label>
  <button type="submit" class="primary" id="password-submit">{save}</button>
</form>
<form method="post" action="/console/logout" class="auth-aside"><input type="hidden" name="csrf" value="{csrf}"><button type="submit" class="link">{logout}</button></form>"#,
        title = esc(lang.t(Key::ChangeTitle)),
        csrf = esc(csrf),
        cur = esc(lang.t(Key::CurrentPassword)),
        new = esc(lang.t(Key::NewPassword)),
        confirm = esc(lang.t(Key::ConfirmPassword)),
        save = esc(lang.t(Key::Save)),
        logout = esc(lang.t(Key::Logout)),
    );
    html(
        status,
        auth_page(lang, lang.t(Key::ChangeTitle), &body),
        vec![],
    )
}

async fn password_page(
    State(st): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some((s, user)) = session::current(&st, &headers).await? else {
        return Ok(see_other("/console/login", vec![]));
    };
    let lang = Lang::parse(&user.lang);
    Ok(password_form(
        lang,
        &s.csrf_token,
        user.must_change_password != 0,
        "",
        StatusCode::OK,
    ))
}

#[derive(Debug, Default, Deserialize)]
struct PasswordForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    current: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    confirm: String,
}

async fn change_password(
    State(st): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<PasswordForm>,
) -> Result<Response, ApiError> {
    let Some((s, user)) = session::current(&st, &headers).await? else {
        return Ok(see_other("/console/login", vec![]));
    };
    if !csrf_ok(&s, Some(&form.csrf)) {
        return Err(ApiError::forbidden("missing or wrong CSRF token"));
    }
    let lang = Lang::parse(&user.lang);
    let forced = user.must_change_password != 0;
    let fail = |key: Key, status: StatusCode| {
        Ok(password_form(
            lang,
            &s.csrf_token,
            forced,
            lang.t(key),
            status,
        ))
    };
    if !auth::verify_password_async(form.current.clone(), user.password_hash.clone()).await {
        return fail(Key::WrongCurrent, StatusCode::BAD_REQUEST);
    }
    if form.password != form.confirm {
        return fail(Key::Mismatch, StatusCode::BAD_REQUEST);
    }
    if auth::check_password_strength(&form.password).is_err() {
        return fail(Key::TooShort, StatusCode::BAD_REQUEST);
    }
    if form.password == form.current {
        return fail(Key::SamePassword, StatusCode::BAD_REQUEST);
    }
    let hash = auth::hash_password_async(form.password)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    st.store
        .set_password(user.id, &hash, false, now_ms())
        .await?;
    // Whoever knew the old password is logged out everywhere else.
    st.store
        .delete_user_sessions(user.id, Some(&s.id_hash))
        .await?;
    tracing::info!(username = %user.username, "password changed from the console");
    let status = StatusCode::SEE_OTHER.as_u16();
    keep_audit(
        &st,
        &AuditEntry::now(&user, true, "POST", "/console/password", status),
    )
    .await;
    Ok(see_other("/console/", vec![]))
}

async fn shell(State(st): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let Some((s, user)) = session::current(&st, &headers).await? else {
        return Ok(see_other("/console/login", vec![]));
    };
    if user.must_change_password != 0 {
        return Ok(see_other("/console/password", vec![]));
    }
    let lang = Lang::parse(&user.lang);
    let boot = serde_json::json!({
        "user": {
            "id": user.id,
            "username": user.username,
            "role": user.role,
            "group_ids": user.group_list(),
            "lang": lang.code(),
        },
        "timezone": st.settings.timezone,
        "version": env!("CARGO_PKG_VERSION"),
    });
    // `<` escaped so no value can close the <script> element it sits in.
    let boot = boot.to_string().replace('<', "\\u003c");
    let page = SHELL
        .replace("{{lang}}", lang.code())
        .replace("{{csrf}}", &esc(&s.csrf_token))
        .replace("{{v}}", &VERSION)
        .replace("{{boot}}", &boot);
    Ok(html(StatusCode::OK, page, vec![]))
}

#[derive(Debug, Deserialize)]
struct LangBody {
    lang: String,
}

/// Remembers the user's language (called by the page with its CSRF token).
async fn set_lang(
    State(st): State<AppState>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<LangBody>,
) -> Result<StatusCode, ApiError> {
    let Some((s, user)) = session::current(&st, &headers).await? else {
        return Err(ApiError::unauthorized("log in first"));
    };
    if !csrf_ok(&s, headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok())) {
        return Err(ApiError::forbidden("missing or wrong X-CSRF-Token header"));
    }
    let lang = match body.lang.as_str() {
        "en" | "zh" => body.lang.as_str(),
        other => {
            return Err(ApiError::field(
                "lang",
                crate::refusal::Refusal::new(crate::refusal::Reason::UnknownLanguage)
                    .with("value", other),
            ))
        }
    };
    st.store.set_user_lang(user.id, lang).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn asset(
    axum::extract::Path(name): axum::extract::Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(a) = ASSETS.iter().find(|a| a.name == name) else {
        return (StatusCode::NOT_FOUND, "no such asset").into_response();
    };
    let etag = format!("\"{}\"", *VERSION);
    let cached = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == etag);
    let mut resp = if cached {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        a.body.into_response()
    };
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(a.mime));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_html() {
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    /// The texts of one language of `web/i18n.js`, by key (each text as written, quotes and all).
    fn i18n_texts(lang: &str) -> std::collections::BTreeMap<String, String> {
        let src = include_str!("../../../web/i18n.js");
        let start = src
            .find(&format!("\n{lang}: {{"))
            .unwrap_or_else(|| panic!("no {lang} section"));
        let body = &src[start + 1..];
        let end = body.find("\n}").expect("section end");
        body[..end]
            .lines()
            .filter_map(|l| l.trim().strip_prefix('\''))
            .filter_map(|l| l.split_once("':"))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect()
    }

    /// The keys of one language of `web/i18n.js`.
    fn i18n_keys(lang: &str) -> std::collections::BTreeSet<String> {
        i18n_texts(lang).into_keys().collect()
    }

    #[test]
    fn every_label_is_translated() {
        use crate::model::{
            AddressType, MisfireStrategy, Role, RunState, ScheduleType, ShardingMode, TriggerType,
        };
        use shardline_executor::protocol::{BlockStrategy, GlueType};

        let en = i18n_keys("en");
        // The API's refusals and the admin's notes are translated only out of English (below).
        let zh: std::collections::BTreeSet<String> = i18n_keys("zh")
            .into_iter()
            .filter(|k| !k.starts_with("api.") && !k.starts_with("note."))
            .collect();
        assert!(en.len() > 200, "{}", en.len());
        assert_eq!(
            en.symmetric_difference(&zh).collect::<Vec<_>>(),
            Vec::<&String>::new(),
            "keys in one language only"
        );
        // Every literal key the page script asks for.
        let app = include_str!("../../../web/app.js");
        let mut used = 0;
        for (i, _) in app.match_indices("t('") {
            if i > 0
                && (app.as_bytes()[i - 1].is_ascii_alphanumeric() || app.as_bytes()[i - 1] == b'_')
            {
                continue; // e.g. `input('…'`
            }
            let rest = &app[i + 3..];
            let key = &rest[..rest.find('\'').unwrap()];
            if key.ends_with('.') {
                continue; // a prefix completed at run time, checked below
            }
            assert!(
                en.contains(key),
                "app.js uses {key:?}, missing from i18n.js"
            );
            used += 1;
        }
        assert!(used > 200, "{used}");
        // Every value the server can send for the enums the console shows.
        let mut want: Vec<String> = Vec::new();
        want.extend(RunState::ALL.iter().map(|v| format!("state.{v}")));
        want.extend(TriggerType::ALL.iter().map(|v| format!("trigger.{v}")));
        want.extend(ScheduleType::ALL.iter().map(|v| format!("sched.{v}")));
        want.extend(MisfireStrategy::ALL.iter().map(|v| format!("misfire.{v}")));
        want.extend(ShardingMode::ALL.iter().map(|v| format!("mode.{v}")));
        want.extend(AddressType::ALL.iter().map(|v| format!("addr.{v}")));
        want.extend(Role::ALL.iter().map(|v| format!("role.{v}")));
        want.extend(
            crate::route::RouteStrategy::ALL
                .iter()
                .map(|v| format!("route.{}", v.as_str())),
        );
        want.extend(
            BlockStrategy::ALL
                .iter()
                .map(|v| format!("block.{}", v.as_str())),
        );
        want.extend(
            GlueType::ALL
                .iter()
                .filter(|g| **g != GlueType::GlueGroovy)
                .map(|v| format!("glue.{}", v.as_str())),
        );
        {
            use crate::alarm::state::{FAILED, NONE_NEEDED, SENDING, SENT};
            want.extend([SENDING, NONE_NEEDED, SENT, FAILED].map(|v| format!("alarm.{v}")));
        }
        for s in ["AVERAGE", "ODEVITY", "ROTATE", "WEIGHTED", "AFFINITY"] {
            assert!(crate::sharding::parse_strategy(s).is_ok(), "{s}");
            want.push(format!("strategy.{s}"));
        }
        for k in want {
            assert!(en.contains(&k), "no translation for {k}");
        }
    }

    /// The `{name}`s of a text.
    fn placeholders(text: &str) -> std::collections::BTreeSet<&str> {
        text.split('{')
            .skip(1)
            .filter_map(|p| p.split_once('}').map(|(name, _)| name))
            .collect()
    }

    /// Every entry of a catalogue (`crate::coded`) has a Chinese text under `<prefix>.<code>`
    /// using exactly the values its English text uses; English has no such key (the admin's own
    /// text is shown).
    fn every_entry_is_translated<K: crate::coded::Kind>(prefix: &str, all: &[K]) {
        let prefix = format!("{prefix}.");
        assert!(
            !i18n_keys("en").iter().any(|k| k.starts_with(&prefix)),
            "{prefix} keys in en"
        );
        let zh: std::collections::BTreeMap<String, String> = i18n_texts("zh")
            .into_iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .collect();
        assert_eq!(zh.len(), all.len(), "{:?}", zh.keys());
        for r in all {
            let text = zh
                .get(&format!("{prefix}{}", r.code()))
                .unwrap_or_else(|| panic!("no zh text for {:?}", r.code()));
            assert_eq!(
                placeholders(text),
                placeholders(r.en()),
                "{:?}: the zh text must use the values the English one does",
                r.code()
            );
        }
    }

    #[test]
    fn every_refusal_is_translated_with_its_values() {
        every_entry_is_translated("api", crate::refusal::Reason::ALL);
    }

    #[test]
    fn every_note_is_translated_with_its_values() {
        every_entry_is_translated("note", crate::note::NoteKind::ALL);
    }

    #[test]
    fn every_asset_is_present() {
        for a in ASSETS {
            assert!(!a.body.is_empty(), "{} is empty", a.name);
        }
        assert!(SHELL.contains("{{csrf}}") && SHELL.contains("{{boot}}"));
        assert!(AUTH_PAGE.contains("{{body}}"));
    }
}
