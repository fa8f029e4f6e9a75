//! The console over plain HTTP: login, the failed-login limit, cookie flags, CSRF on the REST API,
//! the forced password change, permissions of a console user, language, logout, and the audit
//! entries of logins, password changes and logouts.

mod common;

use std::collections::HashMap;

use common::{TestAdmin, TestDb};
use reqwest::header::{HeaderMap, COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use shardline_admin::store::Store;

const ADMIN_PASSWORD: &str = "admin-password-1";

/// A cookie jar that shows us every `Set-Cookie` (reqwest's own jar hides the flags).
struct Browser {
    http: reqwest::Client,
    base: String,
    cookies: HashMap<String, String>,
    /// The raw `Set-Cookie` values of the last response.
    last_set: Vec<String>,
    /// Sent as `X-Forwarded-Proto` when set.
    proto: Option<&'static str>,
}

struct Page {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Page {
    fn location(&self) -> &str {
        self.headers
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The value of the hidden `csrf` field, or the `csrf-token` meta of the shell.
    fn csrf(&self) -> String {
        for marker in [r#"name="csrf" value=""#, r#"name="csrf-token" content=""#] {
            if let Some(at) = self.body.find(marker) {
                let rest = &self.body[at + marker.len()..];
                return rest[..rest.find('"').unwrap()].to_string();
            }
        }
        panic!("no CSRF token in page: {}", self.body);
    }
}

impl Browser {
    fn new(admin: &TestAdmin) -> Browser {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            base: admin.base.clone(),
            cookies: HashMap::new(),
            last_set: Vec::new(),
            proto: None,
        }
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> Page {
        let mut req = req;
        if !self.cookies.is_empty() {
            let c: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            req = req.header(COOKIE, c.join("; "));
        }
        if let Some(p) = self.proto {
            req = req.header("x-forwarded-proto", p);
        }
        let resp = req.send().await.expect("admin reachable");
        let status = resp.status();
        let headers = resp.headers().clone();
        self.last_set = headers
            .get_all(SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect();
        for c in &self.last_set {
            let first = c.split(';').next().unwrap();
            let (k, v) = first.split_once('=').unwrap();
            if v.is_empty() || c.contains("Max-Age=0") {
                self.cookies.remove(k);
            } else {
                self.cookies.insert(k.to_string(), v.to_string());
            }
        }
        let body = resp.text().await.unwrap_or_default();
        Page {
            status,
            headers,
            body,
        }
    }

    async fn get(&mut self, path: &str) -> Page {
        let req = self.http.get(format!("{}{path}", self.base));
        self.send(req).await
    }

    async fn post_form(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let req = self.http.post(format!("{}{path}", self.base)).form(form);
        self.send(req).await
    }

    /// A REST call with the session cookie and, when given, a CSRF header.
    async fn api(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Value>,
        csrf: Option<&str>,
    ) -> Page {
        let mut req = self
            .http
            .request(method, format!("{}/api/v1{path}", self.base));
        if let Some(t) = csrf {
            req = req.header("x-csrf-token", t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        self.send(req).await
    }

    /// Opens the login page and posts the form; returns the answer to the post.
    async fn login(&mut self, username: &str, password: &str) -> Page {
        let form = self.get("/console/login").await;
        assert_eq!(form.status, 200, "{}", form.body);
        let csrf = form.csrf();
        self.post_form(
            "/console/login",
            &[
                ("username", username),
                ("password", password),
                ("csrf", &csrf),
            ],
        )
        .await
    }

    /// Logs in and returns the session's CSRF token (read from the page shell).
    async fn login_ok(&mut self, username: &str, password: &str) -> String {
        let r = self.login(username, password).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
        assert_eq!(r.location(), "/console/");
        let shell = self.get("/console/").await;
        assert_eq!(shell.status, 200);
        shell.csrf()
    }

    fn set_cookie(&self, name: &str) -> Option<&String> {
        self.last_set
            .iter()
            .find(|c| c.starts_with(&format!("{name}=")))
    }
}

async fn create_user(admin: &TestAdmin, name: &str, groups: &[i64]) -> i64 {
    let u = admin
        .post(
            "/users",
            json!({"username": name, "password": "user-password-1", "role": "USER", "group_ids": groups}),
        )
        .await;
    u["id"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_page_shell_and_cookie_flags() {
    for db in TestDb::all().await {
        let admin = TestAdmin::start(&db).await;
        let mut b = Browser::new(&admin);

        // Without a session the console sends people to the login page.
        let r = b.get("/").await;
        assert_eq!(r.location(), "/console/");
        let r = b.get("/console/").await;
        assert_eq!(r.status, StatusCode::SEE_OTHER);
        assert_eq!(r.location(), "/console/login");

        let page = b.get("/console/login").await;
        assert_eq!(page.status, 200);
        assert!(page.body.contains("id=\"login-form\""));
        let csp = page.headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
        assert_eq!(page.headers["x-frame-options"], "DENY");
        let login_cookie = b.set_cookie("shardline_login").expect("login form cookie");
        assert!(login_cookie.contains("HttpOnly") && login_cookie.contains("SameSite=Lax"));

        let r = b
            .post_form(
                "/console/login",
                &[
                    ("username", "admin"),
                    ("password", ADMIN_PASSWORD),
                    ("csrf", &page.csrf()),
                ],
            )
            .await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
        assert_eq!(r.location(), "/console/");
        let c = b.set_cookie("shardline_session").expect("session cookie");
        assert!(c.contains("; HttpOnly"), "{c}");
        assert!(c.contains("; SameSite=Lax"), "{c}");
        assert!(c.contains("; Path=/"), "{c}");
        assert!(!c.contains("Secure"), "plain HTTP: no Secure flag: {c}");
        let secret = b.cookies["shardline_session"].clone();
        assert!(secret.len() >= 40);
        // Only the hash is stored.
        let store = Store::connect(&db.url).await.unwrap();
        let now = shardline_admin::model::now_ms();
        assert!(store.live_session(&secret, now).await.unwrap().is_none());
        let stored = store
            .live_session(&shardline_admin::auth::token_hash(&secret), now)
            .await
            .unwrap()
            .expect("session stored by hash");

        // The shell carries the session's CSRF token and who is logged in, never the secret.
        let shell = b.get("/console/").await;
        assert_eq!(shell.status, 200);
        assert_eq!(shell.csrf(), stored.csrf_token);
        assert!(shell.body.contains("\"username\":\"admin\""));
        assert!(!shell.body.contains(&secret));
        assert_eq!(shell.headers["cache-control"], "no-store");
        // Already logged in: the login page forwards to the console.
        assert_eq!(b.get("/console/login").await.location(), "/console/");

        // The API takes the cookie.
        let me = b.api(Method::GET, "/users/me", None, None).await;
        assert_eq!(me.status, 200, "{}", me.body);
        assert_eq!(me.json()["username"], "admin");

        // Assets are served with their types.
        let js = b.get("/console/assets/app.js").await;
        assert_eq!(js.status, 200);
        assert!(js.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript"));
        let etag = js.headers["etag"].to_str().unwrap().to_string();
        let again = b
            .send(
                b.http
                    .get(format!("{}/console/assets/app.js", b.base))
                    .header("if-none-match", &etag),
            )
            .await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED);
        assert_eq!(b.get("/console/assets/nope.js").await.status, 404);

        // Behind a TLS proxy the cookie is Secure.
        let mut tls = Browser::new(&admin);
        tls.proto = Some("https");
        let r = tls.login("admin", ADMIN_PASSWORD).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER);
        let c = tls.set_cookie("shardline_session").unwrap();
        assert!(c.ends_with("; Secure"), "{c}");

        store.close().await;
        admin.stop().await;
        db.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_are_limited() {
    for db in TestDb::all().await {
        let admin = TestAdmin::start(&db).await;
        let mut b = Browser::new(&admin);

        // A post without the login form's token is refused (no login CSRF).
        let r = b
            .post_form(
                "/console/login",
                &[("username", "admin"), ("password", ADMIN_PASSWORD)],
            )
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        assert!(!b.cookies.contains_key("shardline_session"));

        // Wrong password, unknown user: the same answer.
        let r = b.login("admin", "wrong-password").await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert!(r.body.contains("Wrong username or password."), "{}", r.body);
        assert!(
            r.body.contains("value=\"admin\""),
            "username kept in the form"
        );
        let r = b.login("nobody", "whatever-1").await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert!(r.body.contains("Wrong username or password."));
        assert!(!b.cookies.contains_key("shardline_session"));

        // Four more failures make five: then even the right password is refused for a while.
        for _ in 0..4 {
            assert_eq!(
                b.login("admin", "wrong-password").await.status,
                StatusCode::UNAUTHORIZED
            );
        }
        let r = b.login("admin", ADMIN_PASSWORD).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.body);
        assert!(r.body.contains("Too many failed logins"), "{}", r.body);
        assert!(!b.cookies.contains_key("shardline_session"));

        // Another username is not locked by admin's failures.
        create_user(&admin, "bob", &[]).await;
        let mut other = Browser::new(&admin);
        other.login_ok("bob", "user-password-1").await;

        // The limit lifts when the failures age out of the window.
        let store = Store::connect(&db.url).await.unwrap();
        let n = store
            .prune_login_failures(shardline_admin::model::now_ms() + 1)
            .await
            .unwrap();
        assert!(n >= 5, "pruned {n}");
        b.login_ok("admin", ADMIN_PASSWORD).await;

        // In Chinese, the error is Chinese.
        let mut zh = Browser::new(&admin);
        let page = zh.get("/console/login?lang=zh").await;
        assert!(page.body.contains("登录"));
        let csrf = page.csrf();
        let r = zh
            .post_form(
                "/console/login",
                &[("username", "admin"), ("password", "x"), ("csrf", &csrf)],
            )
            .await;
        assert!(r.body.contains("用户名或密码错误"), "{}", r.body);

        store.close().await;
        admin.stop().await;
        db.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_with_cookie_needs_csrf_for_changes() {
    for db in TestDb::all().await {
        let admin = TestAdmin::start(&db).await;
        let mut b = Browser::new(&admin);
        let csrf = b.login_ok("admin", ADMIN_PASSWORD).await;

        let body = json!({"appname": "csrf-app", "title": "CSRF"});
        let r = b
            .api(Method::POST, "/groups", Some(body.clone()), None)
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
        assert!(r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("X-CSRF-Token"));
        let r = b
            .api(Method::POST, "/groups", Some(body.clone()), Some("wrong"))
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        let r = b
            .api(Method::POST, "/groups", Some(body.clone()), Some(""))
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        // Nothing was created by the refused requests.
        assert_eq!(admin.get("/groups").await.as_array().unwrap().len(), 0);

        let r = b
            .api(Method::POST, "/groups", Some(body.clone()), Some(&csrf))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let gid = r.json()["id"].as_i64().unwrap();

        // PUT and DELETE need it too; GET does not.
        let r = b
            .api(
                Method::PUT,
                &format!("/groups/{gid}"),
                Some(json!({"title": "x"})),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        let r = b
            .api(Method::DELETE, &format!("/groups/{gid}"), None, None)
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        let r = b
            .api(Method::GET, &format!("/groups/{gid}"), None, None)
            .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["title"], "CSRF");
        let r = b
            .api(Method::DELETE, &format!("/groups/{gid}"), None, Some(&csrf))
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);

        // A bearer token needs no CSRF token, even when a session cookie is also sent.
        let r = b
            .send(
                b.http
                    .post(format!("{}/api/v1/groups", b.base))
                    .bearer_auth(common::API_TOKEN)
                    .json(&json!({"appname": "bearer-app"})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);

        // The language switch is a state change too.
        let r = b
            .send(
                b.http
                    .post(format!("{}/console/lang", b.base))
                    .json(&json!({"lang": "zh"})),
            )
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        let r = b
            .send(
                b.http
                    .post(format!("{}/console/lang", b.base))
                    .header("x-csrf-token", &csrf)
                    .json(&json!({"lang": "klingon"})),
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        // Refused as the API refuses an unknown language, with the code the console translates.
        let body = r.json();
        let err = &body["error"];
        assert_eq!(err["field"], "lang", "{err}");
        assert_eq!(err["code"], "unknown_language", "{err}");
        assert_eq!(err["params"]["value"], "klingon", "{err}");
        let r = b
            .send(
                b.http
                    .post(format!("{}/console/lang", b.base))
                    .header("x-csrf-token", &csrf)
                    .json(&json!({"lang": "zh"})),
            )
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        let me = b.api(Method::GET, "/users/me", None, None).await;
        assert_eq!(me.json()["lang"], "zh");
        let shell = b.get("/console/").await;
        assert!(shell.body.contains("<html lang=\"zh\">"));

        // A forged or expired cookie is a clear 401, not a bearer-token message.
        let mut forged = Browser::new(&admin);
        forged
            .cookies
            .insert("shardline_session".into(), "forged".into());
        let r = forged.api(Method::GET, "/users/me", None, None).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert!(r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("log in again"));

        admin.stop().await;
        db.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_password_change() {
    for db in TestDb::all().await {
        let admin = TestAdmin::start(&db).await;
        let uid = create_user(&admin, "carol", &[]).await;
        let store = Store::connect(&db.url).await.unwrap();
        let hash = shardline_admin::auth::hash_password("one-time-pass").unwrap();
        store
            .set_password(uid, &hash, true, shardline_admin::model::now_ms())
            .await
            .unwrap();

        // A second browser already logged in (before the reset) to check it is logged out later.
        let mut b = Browser::new(&admin);
        let r = b.login("carol", "one-time-pass").await;
        assert_eq!(r.status, StatusCode::SEE_OTHER);
        assert_eq!(r.location(), "/console/password");
        let mut other = Browser::new(&admin);
        assert_eq!(
            other.login("carol", "one-time-pass").await.location(),
            "/console/password"
        );

        // Nothing else works until the password is changed.
        assert_eq!(b.get("/console/").await.location(), "/console/password");
        let r = b.api(Method::GET, "/jobs", None, None).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        assert!(r.body.contains("change your password"));

        let page = b.get("/console/password").await;
        assert_eq!(page.status, 200);
        assert!(page.body.contains("You must choose a new password"));
        let csrf = page.csrf();
        let cases = [
            (
                "one-time-pass",
                "brand-new-pass",
                "brand-new-pass",
                "bad",
                StatusCode::FORBIDDEN,
                "",
            ),
            (
                "wrong",
                "brand-new-pass",
                "brand-new-pass",
                csrf.as_str(),
                StatusCode::BAD_REQUEST,
                "current password is wrong",
            ),
            (
                "one-time-pass",
                "brand-new-pass",
                "brand-new-pasz",
                csrf.as_str(),
                StatusCode::BAD_REQUEST,
                "differ",
            ),
            (
                "one-time-pass",
                "short",
                "short",
                csrf.as_str(),
                StatusCode::BAD_REQUEST,
                "at least 8",
            ),
            (
                "one-time-pass",
                "one-time-pass",
                "one-time-pass",
                csrf.as_str(),
                StatusCode::BAD_REQUEST,
                "must differ",
            ),
            (
                "one-time-pass",
                "brand-new-pass",
                "brand-new-pass",
                csrf.as_str(),
                StatusCode::SEE_OTHER,
                "",
            ),
        ];
        for (current, new, confirm, token, status, text) in cases {
            let r = b
                .post_form(
                    "/console/password",
                    &[
                        ("current", current),
                        ("password", new),
                        ("confirm", confirm),
                        ("csrf", token),
                    ],
                )
                .await;
            assert_eq!(r.status, status, "{}", r.body);
            assert!(r.body.contains(text), "{text}: {}", r.body);
        }
        assert_eq!(
            b.get("/console/password").await.status,
            200,
            "the page stays reachable"
        );

        // Now the console and the API work, and the other session is gone.
        assert_eq!(b.get("/console/").await.status, 200);
        assert_eq!(b.api(Method::GET, "/jobs", None, None).await.status, 200);
        assert_eq!(
            other.api(Method::GET, "/users/me", None, None).await.status,
            StatusCode::UNAUTHORIZED
        );
        let me = store.user_by_name("carol").await.unwrap().unwrap();
        assert_eq!(me.must_change_password, 0);
        let mut fresh = Browser::new(&admin);
        fresh.login_ok("carol", "brand-new-pass").await;
        assert_eq!(
            Browser::new(&admin)
                .login("carol", "one-time-pass")
                .await
                .status,
            StatusCode::UNAUTHORIZED
        );

        store.close().await;
        admin.stop().await;
        db.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_user_sees_only_his_groups() {
    for db in TestDb::all().await {
        let admin = TestAdmin::start(&db).await;
        let mine = admin
            .post(
                "/groups",
                json!({"appname": "mine", "access_token": "group-secret"}),
            )
            .await["id"]
            .as_i64()
            .unwrap();
        let theirs = admin.post("/groups", json!({"appname": "theirs"})).await["id"]
            .as_i64()
            .unwrap();
        for (g, name) in [(mine, "my-job"), (theirs, "their-job")] {
            admin
                .post(
                    "/jobs",
                    json!({"group_id": g, "name": name, "handler": "h", "schedule_type": "NONE"}),
                )
                .await;
        }
        create_user(&admin, "dave", &[mine]).await;
        let mut b = Browser::new(&admin);
        let csrf = b.login_ok("dave", "user-password-1").await;

        let groups = b.api(Method::GET, "/groups", None, None).await.json();
        let groups = groups.as_array().unwrap();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0]["appname"], "mine");
        assert!(
            groups[0].get("access_token").is_none(),
            "no group token for a user"
        );
        let r = b
            .api(Method::GET, &format!("/groups/{theirs}"), None, None)
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        let jobs = b.api(Method::GET, "/jobs", None, None).await.json();
        assert_eq!(jobs["total"], 1);
        assert_eq!(jobs["items"][0]["name"], "my-job");
        let r = b
            .api(
                Method::POST,
                "/jobs",
                Some(
                    json!({"group_id": theirs, "name": "x", "handler": "h", "schedule_type": "NONE"}),
                ),
                Some(&csrf),
            )
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
        assert_eq!(
            b.api(Method::GET, "/users", None, None).await.status,
            StatusCode::FORBIDDEN
        );
        let r = b
            .api(
                Method::POST,
                "/groups",
                Some(json!({"appname": "new"})),
                Some(&csrf),
            )
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);

        // The dashboard counts only his groups; the admin's counts everything.
        let d = b.api(Method::GET, "/dashboard", None, None).await;
        assert_eq!(d.status, 200, "{}", d.body);
        let d = d.json();
        assert_eq!(d["jobs"], 1);
        assert_eq!(d["groups"], 1);
        assert_eq!(d["days"].as_array().unwrap().len(), 7);
        let all = admin.get("/dashboard?days=30").await;
        assert_eq!(all["jobs"], 2);
        assert_eq!(all["groups"], 2);
        assert_eq!(all["days"].as_array().unwrap().len(), 30);
        let (s, _) = admin.call(Method::GET, "/dashboard?days=0", None).await;
        assert_eq!(s, 400);

        // The admin sees the group token.
        let g = admin.get(&format!("/groups/{mine}")).await;
        assert_eq!(g["access_token"], "group-secret");

        admin.stop().await;
        db.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_needs_csrf_and_ends_the_session() {
    for db in TestDb::all().await {
        let admin = TestAdmin::start(&db).await;
        let mut b = Browser::new(&admin);
        let csrf = b.login_ok("admin", ADMIN_PASSWORD).await;
        let secret = b.cookies["shardline_session"].clone();

        // A foreign page posting to logout has no token.
        let r = b.post_form("/console/logout", &[]).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        assert_eq!(b.get("/console/").await.status, 200, "still logged in");

        let r = b.post_form("/console/logout", &[("csrf", &csrf)]).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER);
        assert_eq!(r.location(), "/console/login");
        let c = b.set_cookie("shardline_session").unwrap();
        assert!(c.contains("Max-Age=0"), "{c}");
        assert!(!b.cookies.contains_key("shardline_session"));
        assert_eq!(b.get("/console/").await.location(), "/console/login");

        // The old cookie is dead on the server too.
        b.cookies.insert("shardline_session".into(), secret);
        let r = b.api(Method::GET, "/users/me", None, None).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert_eq!(b.get("/console/").await.location(), "/console/login");

        admin.stop().await;
        db.cleanup().await;
    }
}

/// The console's own changes are in the audit log beside the REST API's: logins (and wrong
/// passwords of existing users), password changes and logouts. An unknown username is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_logins_password_changes_and_logouts_are_audited() {
    for db in TestDb::all().await {
        let kind = db.kind();
        let admin = TestAdmin::start(&db).await;
        create_user(&admin, "erin", &[]).await;
        let mut b = Browser::new(&admin);
        assert_eq!(
            b.login("erin", "wrong-password-1").await.status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            b.login("nobody", "wrong-password-1").await.status,
            StatusCode::UNAUTHORIZED
        );
        // A refused login's entry is written after its answer.
        for _ in 0..100 {
            if admin.get("/audit?username=erin").await["total"] == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let csrf = b.login_ok("erin", "user-password-1").await;
        let page = b.get("/console/password").await;
        let form = [
            ("current", "user-password-1"),
            ("password", "user-password-2"),
            ("confirm", "user-password-2"),
            ("csrf", &page.csrf()),
        ];
        let r = b.post_form("/console/password", &form).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{kind}: {}", r.body);
        let r = b.post_form("/console/logout", &[("csrf", &csrf)]).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{kind}");

        let log = admin.get("/audit?username=erin&limit=10").await;
        let seen: Vec<(String, String, i64, i64)> = log["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["method"].as_str().unwrap().to_string(),
                    e["path"].as_str().unwrap().to_string(),
                    e["status"].as_i64().unwrap(),
                    e["console"].as_i64().unwrap(),
                )
            })
            .collect();
        let entry = |path: &str, status: i64| ("POST".to_string(), path.to_string(), status, 1);
        assert_eq!(
            seen,
            vec![
                entry("/console/logout", 303),
                entry("/console/password", 303),
                entry("/console/login", 303),
                entry("/console/login", 401),
            ],
            "{kind}: newest first"
        );
        let all = admin.get("/audit?limit=1000").await;
        assert!(
            !all.to_string().contains("nobody"),
            "{kind}: an unknown username is not kept"
        );
        admin.stop().await;
        db.cleanup().await;
    }
}
