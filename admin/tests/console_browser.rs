//! The console in a real browser: Debian's Chromium, headless, driven through chromedriver.
//!
//! One scenario walks what an operator does: log in, create an executor group and a cron job
//! through the forms, read the next fire times, run the job once on a real executor and read its
//! log, kill a long run, switch the language, and see a normal user refused a group he has no right
//! to. Every page is saved as a PNG under `target/console-screenshots/`.
//!
//! chromedriver is required: without it the test fails and says how to install it, unless
//! `SHARDLINE_TEST_SKIP_BROWSER=1` says to skip browser tests on this machine.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{TestAdmin, TestDb, TestExecutor};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use shardline_executor::JobResult;

const ADMIN_PASSWORD: &str = "admin-password-1";
const WAIT: Duration = Duration::from_secs(20);

/// A chromedriver process on a free loopback port, stopped on drop.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]) {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Starts chromedriver, or returns `None` when browser tests are switched off.
async fn start_driver() -> Option<Driver> {
    if std::env::var("SHARDLINE_TEST_SKIP_BROWSER").is_ok_and(|v| v == "1") {
        eprintln!("SHARDLINE_TEST_SKIP_BROWSER=1: console browser test skipped");
        return None;
    }
    let driver = std::env::var_os("CHROMEDRIVER")
        .map(PathBuf::from)
        .or_else(|| find_program(&["chromedriver"]))
        .unwrap_or_else(|| {
            panic!(
                "chromedriver not found: install Debian's packages (apt-get install -y chromium chromium-driver), \
                 set CHROMEDRIVER=/path/to/chromedriver, or set SHARDLINE_TEST_SKIP_BROWSER=1 to skip browser tests"
            )
        });
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let child = Command::new(&driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", driver.display()));
    let d = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(r) = http.get(format!("{}/status", d.url)).send().await {
            if r.status().is_success() {
                return Some(d);
            }
        }
        assert!(
            Instant::now() < deadline,
            "chromedriver at {} did not answer",
            d.url
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Session {
    c: Client,
    base: String,
    shots: PathBuf,
    _profile: tempfile::TempDir,
}

impl Session {
    async fn open(driver: &Driver, base: &str) -> Session {
        let profile = tempfile::tempdir().unwrap();
        let chromium = find_program(&["chromium", "chromium-browser", "google-chrome"])
            .expect("chromium not found: apt-get install -y chromium");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1280,900", "--lang=en-US",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }),
        );
        let c = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&driver.url)
            .await
            .expect("a Chromium session through chromedriver");
        let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/console-screenshots");
        std::fs::create_dir_all(&shots).unwrap();
        let _ = std::fs::remove_file(shots.join("FAILED.png"));
        Session {
            c,
            base: base.to_string(),
            shots,
            _profile: profile,
        }
    }

    async fn goto(&self, path: &str) {
        self.c.goto(&format!("{}{path}", self.base)).await.unwrap();
    }

    /// Waits for the page of `section` to be drawn (the app marks it ready).
    async fn page(&self, section: &str) {
        self.find(&format!(".page[data-page='{section}'][data-ready]"))
            .await;
    }

    async fn find(&self, css: &str) -> fantoccini::elements::Element {
        match self
            .c
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(e) => e,
            Err(e) => {
                // Keep what the browser showed, to see why.
                self.shot("FAILED").await;
                let body = self.c.source().await.unwrap_or_default();
                panic!(
                    "no element {css}: {e}\npage: {}",
                    &body[..body.len().min(3000)]
                );
            }
        }
    }

    async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.unwrap()
    }

    /// Waits until the text of `css` contains `needle`.
    async fn wait_text(&self, css: &str, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(e) = self.c.find(Locator::Css(css)).await {
                if let Ok(t) = e.text().await {
                    if t.contains(needle) {
                        return t;
                    }
                    if Instant::now() > deadline {
                        panic!("{css} never contained {needle:?}; last text: {t:?}");
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "{css} never contained {needle:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn fill(&self, css: &str, value: &str) {
        let e = self.find(css).await;
        e.clear().await.unwrap();
        e.send_keys(value).await.unwrap();
    }

    async fn choose(&self, css: &str, value: &str) {
        self.find(css).await.select_by_value(value).await.unwrap();
    }

    async fn click(&self, css: &str) {
        self.find(css).await.click().await.unwrap();
    }

    async fn shot(&self, name: &str) {
        // Let fonts and the last fetch settle so the picture shows the finished page.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let png = self.c.screenshot().await.unwrap();
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
    }

    async fn login(&self, user: &str, password: &str) {
        self.goto("/console/login").await;
        self.fill("#username", user).await;
        self.fill("#password", password).await;
        self.click("#login-submit").await;
        self.page("dashboard").await;
    }

    async fn logout(&self) {
        self.click("#logout").await;
        self.find("#login-form").await;
    }

    async fn current_hash(&self) -> String {
        let url = self.c.current_url().await.unwrap();
        url.fragment().unwrap_or("").to_string()
    }
}

/// Asks for a user named "bad name" in the users page's dialog, which the browser lets through
/// and the API refuses: the dialog shows `expected` (the field named by its label) and marks the
/// field; then the dialog is closed.
async fn new_user_refused(s: &Session, expected: &str) {
    s.click("#new-user").await;
    s.fill("#f-username", "bad name").await;
    s.fill("#f-password", "long-enough-1").await;
    s.click("#dialog-ok").await;
    s.wait_text(".dialog .form-error", expected).await;
    s.find("#field-username.invalid").await;
    s.click("#dialog-cancel").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operator_walkthrough_in_chromium() {
    let Some(driver) = start_driver().await else {
        return;
    };
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let exec = TestExecutor::start("browser-app", &admin.base, |b| {
        b.handler("hello", |ctx| async move {
            ctx.log(format!("hello {}", ctx.params()));
            ctx.log("second line");
            JobResult::success_with("said hello")
        })
        .handler("items", |ctx| async move {
            let _ = ctx
                .checkpoint(format!("last-id={}", 100 + ctx.shard_index()))
                .await;
            JobResult::success()
        })
        .handler("slow", |ctx| async move {
            for i in 0..600 {
                ctx.log(format!("working {i}"));
                tokio::select! {
                    _ = ctx.cancelled() => return JobResult::fail("stopped"),
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
            JobResult::success()
        })
    })
    .await;

    let s = Session::open(&driver, &admin.base).await;

    // Login page, then a wrong password, then the right one.
    s.goto("/console/login").await;
    s.find("#login-form").await;
    s.shot("01-login").await;
    s.fill("#username", "admin").await;
    s.fill("#password", "not-the-password").await;
    s.click("#login-submit").await;
    assert!(s
        .text("#login-error")
        .await
        .contains("Wrong username or password"));
    s.shot("02-login-failed").await;
    s.fill("#password", ADMIN_PASSWORD).await;
    s.click("#login-submit").await;
    s.page("dashboard").await;
    s.find("#runs-chart").await;
    s.shot("03-dashboard-empty").await;

    // An executor group through the form.
    s.click("#nav-groups").await;
    s.page("groups").await;
    s.shot("04-groups-empty").await;
    s.click("#new-group").await;
    s.find("#group-form").await;
    s.fill("#f-appname", "browser-app").await;
    s.fill("#f-title", "Browser demo").await;
    s.click("#group-save").await;
    s.wait_text("#executors-table", &exec.address).await;
    let gid: i64 = s
        .current_hash()
        .await
        .trim_start_matches("/groups/")
        .parse()
        .unwrap();
    s.shot("05-group-executors").await;

    // A cron job through the form; the helper shows the next five times in the job's zone.
    s.click("#nav-jobs").await;
    s.page("jobs").await;
    s.click("#new-job").await;
    s.find("#job-form").await;
    s.fill("#f-name", "nightly-report").await;
    s.fill("#f-handler", "hello").await;
    s.fill("#f-schedule_conf", "0 0 2 * * ?").await;
    s.fill("#f-timezone", "Asia/Shanghai").await;
    s.find("#cron-times li:nth-child(5)").await;
    let times = s.text("#cron-times").await;
    assert_eq!(times.lines().count(), 5, "{times}");
    assert!(
        times.lines().all(|l| l.ends_with("02:00:00")),
        "02:00 in Asia/Shanghai: {times}"
    );
    s.wait_text("#cron-desc", "at 02:00:00, every day").await;
    s.shot("06-job-form-cron-helper").await;
    // A typo is reported while typing.
    s.fill("#f-schedule_conf", "0 0 25 * * ?").await;
    s.find("#cron-error").await;
    // Named by the form's label, not by the preview's parameter ("expr: ...").
    s.wait_text("#cron-error", "Cron expression / seconds: ")
        .await;
    s.shot("07-cron-helper-error").await;
    s.fill("#f-schedule_conf", "0 0 2 * * ?").await;
    s.find("#cron-times").await;
    // A field the admin refuses is marked, and named by its label, not by its API name.
    s.fill("#f-timezone", "Mars/Olympus").await;
    s.wait_text("#cron-error", "Time zone: unknown time zone 'Mars/Olympus'")
        .await;
    s.click("#job-save").await;
    s.wait_text("#flash", "Time zone: unknown time zone 'Mars/Olympus'")
        .await;
    s.find("#field-timezone.invalid").await;
    s.fill("#f-timezone", "Asia/Shanghai").await;
    s.click("#job-save").await;
    s.find("#job-next li:nth-child(5)").await;
    let jid: i64 = s
        .current_hash()
        .await
        .trim_start_matches("/jobs/")
        .parse()
        .unwrap();
    let job = admin.get(&format!("/jobs/{jid}")).await;
    assert_eq!(job["schedule_conf"], "0 0 2 * * ?");
    assert_eq!(job["timezone"], "Asia/Shanghai");
    assert_eq!(job["group_id"], gid);
    s.shot("08-job-page").await;

    // Start it, then stop it again.
    s.click("#job-toggle").await;
    s.wait_text("#job-status", "Running").await;
    let enabled = admin.get(&format!("/jobs/{jid}")).await["enabled"].clone();
    assert!(enabled == json!(true) || enabled == json!(1), "{enabled}");
    s.click("#job-toggle").await;
    s.wait_text("#job-status", "Stopped").await;

    // Run once with parameters on the chosen executor; the fire succeeds and the log is there.
    s.click("#job-run").await;
    s.find("#run-params").await;
    s.fill("#run-params", "from-browser").await;
    s.click(".run-executor").await;
    s.shot("09-run-once-dialog").await;
    s.click("#dialog-ok").await;
    s.page("fires").await;
    s.wait_text("#coverage-summary", "1/1 succeeded").await;
    let fire_page = s.current_hash().await;
    s.find("#coverage .cell.state-succeeded").await;
    s.shot("10-fire-coverage").await;
    s.click("#coverage .cell").await;
    s.page("runs").await;
    s.wait_text("#run-log", "hello from-browser").await;
    s.wait_text("#log-state", "complete").await;
    assert!(s.text("#run-state").await.contains("Succeeded"));
    assert!(s.text("#run-executor").await.contains(&exec.address));
    assert!(s.text("#run-result").await.contains("said hello"));
    s.shot("11-run-log").await;

    // A long run: its log grows while it runs, and Kill stops it.
    let long = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "long-job", "handler": "slow", "schedule_type": "NONE"}),
        )
        .await;
    let fire = admin
        .post(
            &format!("/jobs/{}/trigger", long["id"].as_i64().unwrap()),
            json!({}),
        )
        .await;
    let run_id = fire["run_ids"][0].as_i64().unwrap();
    s.goto(&format!("/console/#/runs/{run_id}")).await;
    s.wait_text("#run-log", "working 3").await;
    s.wait_text("#log-state", "live").await;
    s.shot("12-run-live-tail").await;
    s.click("#run-kill").await;
    s.click("#dialog-ok").await;
    s.wait_text("#run-state", "Killed").await;
    assert_eq!(
        admin.get(&format!("/runs/{run_id}")).await["state"],
        "killed"
    );
    s.wait_text("#run-result", "killed from the admin: ").await;
    s.shot("13-run-killed").await;
    let killed_run = run_id;
    // Its fire failed; with no alarm target, the fire page says that no alarm was needed.
    let fire_id = fire["fire_id"].as_i64().unwrap();
    for _ in 0..100 {
        if admin.get(&format!("/fires/{fire_id}")).await["alarm_state"] == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    s.goto(&format!("/console/#/fires/{fire_id}")).await;
    s.wait_text("#fire-alarm", "None needed").await;

    // Lists with filters.
    s.goto(&format!("/console/#/runs?job_id={jid}")).await;
    s.page("runs").await;
    s.find("#runs-table").await;
    s.shot("14-runs-list").await;
    s.goto("/console/#/fires").await;
    s.page("fires").await;
    s.find("#fires-table").await;
    s.shot("15-fires-list").await;
    s.goto("/console/#/jobs").await;
    s.page("jobs").await;
    s.wait_text("#jobs-table", "long-job").await;
    s.shot("16-jobs-list").await;
    s.goto("/console/#/").await;
    s.page("dashboard").await;
    s.shot("17-dashboard").await;

    // GLUE editor: a script job, a second version, and the diff of the two.
    let glue = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "glue-job", "glue_type": "GLUE_SHELL", "schedule_type": "NONE",
                   "glue_source": "#!/bin/bash\necho one\n", "glue_remark": "first"}),
        )
        .await;
    s.goto(&format!(
        "/console/#/jobs/{}/glue",
        glue["id"].as_i64().unwrap()
    ))
    .await;
    s.find("#glue-editor").await;
    s.find("#glue-editor")
        .await
        .send_keys("echo two\n")
        .await
        .unwrap();
    s.fill("#f-glue_remark", "add a line").await;
    s.click("#glue-save").await;
    s.wait_text("#glue-history", "add a line").await;
    // Compare the first version (A) with the newest (B).
    let radios =
        s.c.find_all(Locator::Css("input[name='diff-a']"))
            .await
            .unwrap();
    radios.last().unwrap().click().await.unwrap();
    let b_radios =
        s.c.find_all(Locator::Css("input[name='diff-b']"))
            .await
            .unwrap();
    b_radios[1].click().await.unwrap();
    s.click("#glue-compare").await;
    s.wait_text("#glue-diff", "+ echo two").await;
    s.shot("18-glue-diff").await;

    // An ITEMS job: its page shows the item assignment and the checkpoints its items saved, and
    // clears them.
    let items = admin
        .post(
            "/jobs",
            serde_json::json!({"group_id": gid, "name": "items-job", "handler": "items",
                "sharding_mode": "ITEMS", "sharding_total": 2}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let fire = admin
        .post(&format!("/jobs/{items}/trigger"), serde_json::json!({}))
        .await["fire_id"]
        .as_i64()
        .unwrap();
    admin.wait_fire(fire).await;
    s.goto(&format!("/console/#/jobs/{items}")).await;
    s.find("#assignment").await;
    s.wait_text("#checkpoints", "last-id=101").await;
    s.shot("18b-job-checkpoints").await;
    s.click("#checkpoints-clear").await;
    s.click("#dialog-ok").await;
    for _ in 0..100 {
        if admin
            .get(&format!("/jobs/{items}/checkpoints"))
            .await
            .as_array()
            .is_some_and(|a| a.is_empty())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        admin.get(&format!("/jobs/{items}/checkpoints")).await,
        serde_json::json!([])
    );

    // Clearing fires (XXL-JOB's "clear logs"): the dialog starts from the list's job filter;
    // "all fires" of the items job deletes its ended fire and both its runs.
    s.goto(&format!("/console/#/fires?job_id={items}")).await;
    s.page("fires").await;
    s.wait_text("#fires-table", &format!("#{fire}")).await;
    s.click("#fires-clear").await;
    s.choose("#f-clear_cut", "all").await;
    s.shot("18c-fires-clear").await;
    s.click("#dialog-ok").await;
    s.wait_text("#flash", "Deleted: 1 fires, 2 runs").await;
    s.wait_text("#app", "No fire matches").await;
    let (status, _) = admin
        .call(reqwest::Method::GET, &format!("/fires/{fire}"), None)
        .await;
    assert_eq!(status, 404, "the cleared fire is gone");

    // The audit log (admin only) has that change, made in the console by the admin.
    s.click("#nav-audit").await;
    s.page("audit").await;
    s.wait_text("#audit-table", "POST /api/v1/fires/clear")
        .await;
    let row = s.text("#audit-table tbody tr").await;
    assert!(
        row.contains("admin") && row.contains("console") && row.contains("200"),
        "{row}"
    );
    s.shot("18d-audit-log").await;

    // Users and tokens (admin only); a token's secret is shown once.
    s.goto("/console/#/users").await;
    s.page("users").await;
    s.find("#users-table").await;
    s.shot("19-users").await;
    // A user name the browser lets through and the API refuses: the dialog names the field by
    // its label and marks it, as the forms do.
    new_user_refused(&s, "Username: must be 1 to 64 letters, digits or '-_.@'").await;
    // A group deleted while the dialog is open: the API refuses `group_ids`, and the dialog names
    // the groups by their legend and marks them.
    let doomed = admin
        .post("/groups", json!({"appname": "doomed", "title": "Doomed"}))
        .await["id"]
        .as_i64()
        .unwrap();
    s.goto("/console/#/tokens").await;
    s.page("tokens").await;
    s.goto("/console/#/users").await;
    s.page("users").await;
    s.click("#new-user").await;
    s.fill("#f-username", "gina").await;
    s.fill("#f-password", "long-enough-1").await;
    s.click(&format!(".group-check[value='{doomed}']")).await;
    let (status, body) = admin
        .call(reqwest::Method::DELETE, &format!("/groups/{doomed}"), None)
        .await;
    assert_eq!(status, 204, "{body}");
    s.click("#dialog-ok").await;
    s.wait_text(
        ".dialog .form-error",
        &format!("Groups: group {doomed} does not exist"),
    )
    .await;
    s.find("#field-group_ids.invalid").await;
    s.click("#dialog-cancel").await;
    s.goto("/console/#/tokens").await;
    s.page("tokens").await;
    s.click("#new-token").await;
    s.fill("#f-name", "ci").await;
    s.click("#dialog-ok").await;
    let secret = s.text("#token-secret-value").await;
    assert!(secret.starts_with("sl_"), "{secret}");
    s.shot("20-token-created").await;

    // Language: switch to Chinese, and it stays after a reload.
    s.choose("#lang-select", "zh").await;
    s.wait_text("#nav-jobs", "任务管理").await;
    s.goto("/console/#/jobs").await;
    s.page("jobs").await;
    assert_eq!(s.text("#nav-jobs").await, "任务管理");
    s.shot("21-jobs-zh").await;
    s.goto(&format!("/console/#/jobs/{jid}")).await;
    s.find("#job-next").await;
    // The cron helper speaks the console's language, and so does a fire's coverage.
    s.wait_text("#cron-desc", "每天 02:00:00").await;
    // So is a refused field: its label, and the refusal's text by its code (a cron expression's
    // detail is Quartz's own English, its position in the console's words).
    s.fill("#f-schedule_conf", "0 0 25 * * ?").await;
    let err = s.wait_text("#cron-error", "Cron 表达式 / 秒数: ").await;
    assert!(err.contains("（位置 "), "{err}");
    s.fill("#f-schedule_conf", "0 0 2 * * ?").await;
    s.wait_text("#cron-desc", "每天 02:00:00").await;
    s.fill("#f-timezone", "Mars/Olympus").await;
    s.click("#job-save").await;
    s.wait_text("#flash", "时区: 未知的时区 'Mars/Olympus'")
        .await;
    s.wait_text("#cron-error", "时区: 未知的时区 'Mars/Olympus'")
        .await;
    s.find("#field-timezone.invalid").await;
    s.shot("22-job-zh").await;
    s.goto(&format!("/console/#{fire_page}")).await;
    s.wait_text("#coverage-summary", "成功 1/1").await;
    // The admin's own messages on runs and fires are said in the console's language (their
    // notes); an executor's words stay as they came.
    s.goto(&format!("/console/#/runs/{killed_run}")).await;
    s.wait_text("#run-result", "已从调度中心终止：").await;
    s.wait_text(
        "#run-trigger-msg",
        &format!("200 已由执行器 {} 接收", exec.address),
    )
    .await;
    let nobody = admin
        .post(
            "/groups",
            json!({"appname": "nobody-app", "title": "Nobody"}),
        )
        .await;
    let orphan = admin
        .post(
            "/jobs",
            json!({"group_id": nobody["id"], "name": "orphan", "handler": "hello", "schedule_type": "NONE"}),
        )
        .await;
    let orphan_id = orphan["id"].as_i64().unwrap();
    admin
        .call(
            reqwest::Method::POST,
            &format!("/jobs/{orphan_id}/trigger"),
            Some(json!({})),
        )
        .await;
    let orphan_fire = admin.get(&format!("/fires?job_id={orphan_id}")).await["items"][0]["id"]
        .as_i64()
        .expect("the trigger made a fire");
    s.goto(&format!("/console/#/fires/{orphan_fire}")).await;
    s.wait_text("#fire-message", "没有在线的执行器地址").await;
    s.wait_text("#fire-runs", "没有在线的执行器地址").await;
    s.shot("22b-fire-message-zh").await;
    s.goto("/console/#/users").await;
    s.page("users").await;
    new_user_refused(&s, "账号: 须为 1 到 64 个字母、数字或 '-_.@'").await;
    // A job that is not there: the 404 says what was not found.
    s.goto("/console/#/jobs/999999").await;
    s.wait_text(".notice.error", "未找到。 任务不存在").await;
    s.choose("#lang-select", "en").await;
    s.wait_text("#nav-jobs", "Jobs").await;
    // In English, the admin's text as stored.
    s.goto(&format!("/console/#/fires/{orphan_fire}")).await;
    s.wait_text("#fire-message", "no online executor in the group")
        .await;

    // A phone-sized window: the menu folds away.
    s.c.set_window_size(390, 844).await.unwrap();
    s.goto("/console/#/").await;
    s.page("dashboard").await;
    s.shot("23-phone-dashboard").await;
    s.click("#menu-toggle").await;
    s.find("#nav.open").await;
    s.shot("24-phone-menu").await;
    s.c.set_window_size(1280, 900).await.unwrap();

    // A normal user with no right on the group: refused, and told so.
    admin
        .post(
            "/users",
            json!({"username": "frank", "password": "frank-password", "role": "USER", "group_ids": []}),
        )
        .await;
    s.goto("/console/#/").await;
    s.page("dashboard").await;
    s.logout().await;
    s.login("frank", "frank-password").await;
    assert!(
        s.c.find(Locator::Css("#nav-users")).await.is_err(),
        "no Users menu for a normal user"
    );
    s.goto(&format!("/console/#/groups/{gid}")).await;
    let denied = s.text("#forbidden").await;
    assert!(denied.contains("permission"), "{denied}");
    s.shot("25-user-forbidden").await;
    s.goto("/console/#/jobs").await;
    s.page("jobs").await;
    s.shot("26-user-jobs-empty").await;

    s.c.close().await.unwrap();
    drop(driver);
    exec.stop().await;
    admin.stop().await;
    db.cleanup().await;
}
