//! Alarms reach real receivers: an e-mail through a real SMTP server (aiosmtpd, from PyPI) and a
//! webhook over HTTPS (Python's TLS server, with a certificate of a test CA the admin is told to
//! trust through `SSL_CERT_FILE`); a webhook that does not answer is tried again and the outcome
//! recorded. Bad targets are refused when the job is saved. The same TLS server stands for an
//! admin behind HTTPS, which the SDK's client registers with, and for an executor behind HTTPS,
//! which the admin dispatches to.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{TestAdmin, TestDb, TestExecutor};
use serde_json::{json, Value};
use shardline_executor::JobResult;

/// A child process killed when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Server {
    /// Starts `cmd` and waits until it listens on `port`.
    async fn start(mut cmd: Command, port: u16, what: &str) -> Server {
        let mut server = Server(cmd.spawn().expect("python3 runs"));
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return server;
            }
            if let Some(status) = server.0.try_wait().unwrap() {
                panic!("{what} exited ({status}); is it installed? (.ci/run installs it)");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{what} did not listen on {port}");
    }
}

/// A job that always fails, with no retries, alarming `targets`; triggers it and waits for the
/// fire to fail. Returns the job and fire ids.
async fn failing_fire(admin: &TestAdmin, appname: &str, targets: &str) -> (i64, i64, TestExecutor) {
    let gid = admin
        .post("/groups", json!({"appname": appname, "title": appname}))
        .await["id"]
        .as_i64()
        .unwrap();
    let executor = TestExecutor::start(appname, &admin.base, |b| {
        b.handler("fail", |_| async {
            JobResult::fail("disk full on purpose")
        })
    })
    .await;
    admin.wait_executors(gid, 1).await;
    let job = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "nightly-export", "handler": "fail", "alarm_targets": targets}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let fire = admin.post(&format!("/jobs/{job}/trigger"), json!({})).await["fire_id"]
        .as_i64()
        .unwrap();
    let v = admin.wait_fire(fire).await;
    assert_eq!(v["state"], "failed", "{v}");
    (job, fire, executor)
}

/// Files in `dir` (a receiver writes one per message), waiting up to 10 s for `n` of them.
async fn wait_files(dir: &Path, n: usize) -> Vec<String> {
    for _ in 0..200 {
        let files: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
                    .collect()
            })
            .unwrap_or_default();
        if files.len() >= n {
            return files;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("fewer than {n} message(s) arrived in {}", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_email_alarm_goes_through_the_smtp_relay_once() {
    let tmp = tempfile::tempdir().unwrap();
    let maildir = tmp.path().join("mail");
    let port = free_port();
    let mut smtp = Command::new("python3");
    smtp.args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}")])
        .args(["-c", "aiosmtpd.handlers.Mailbox"])
        .arg(&maildir)
        .stdout(Stdio::null());
    let _smtp = Server::start(smtp, port, "aiosmtpd").await;

    let db = TestDb::sqlite();
    let url = format!("smtp://127.0.0.1:{port}");
    let admin = TestAdmin::start_with(
        &db,
        &[
            "--smtp-url",
            &url,
            "--smtp-from",
            "Shardline <alarms@shardline.test>",
        ],
    )
    .await;
    let (job, fire, executor) = failing_fire(
        &admin,
        "mail-app",
        "ops@example.com, mailto:oncall@example.org",
    )
    .await;

    // One message per address, each naming the job, the fire and the item's failure.
    // The body is quoted-printable (its line is long): soft line breaks undone.
    let mails: Vec<String> = wait_files(&maildir.join("new"), 2)
        .await
        .iter()
        .map(|m| m.replace("=\n", ""))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        wait_files(&maildir.join("new"), 2).await.len(),
        2,
        "one alarm per failed fire and address"
    );
    for to in ["ops@example.com", "oncall@example.org"] {
        let mail = mails
            .iter()
            .find(|m| m.contains(&format!("To: {to}")))
            .unwrap_or_else(|| panic!("no mail to {to}: {mails:?}"));
        assert!(
            mail.contains("From: Shardline <alarms@shardline.test>"),
            "{mail}"
        );
        assert!(
            mail.contains(&format!(
                "Subject: Shardline alarm: job {job} \"nightly-export\" fire {fire} failed"
            )),
            "{mail}"
        );
        assert!(mail.contains("disk full on purpose"), "{mail}");
        assert!(
            mail.contains("\n- item 0 on ") && mail.contains("\nTrigger: API"),
            "a fact a line: {mail}"
        );
    }
    executor.stop().await;
    admin.stop().await;
    db.cleanup().await;
}

/// A test CA and a certificate for 127.0.0.1 signed by it, made once for this test binary with
/// openssl, in a folder kept until the binary ends. The CA is made the trusted store of every
/// client built after this (`SSL_CERT_FILE`): the admin's webhook client (built at its first
/// webhook) and the SDK's client (built with the executor). One CA for every test, so that
/// tests running side by side set the variable to the same file.
fn test_ca() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(
            dir.join("leaf.ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .output()
                .expect("openssl runs");
            assert!(out.status.success(), "openssl {args:?}: {out:?}");
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"][..],
                &ec,
                &[
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.pem",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=shardline test CA",
                ],
            ]
            .concat(),
        );
        openssl(
            &[
                &["req"][..],
                &ec,
                &[
                    "-keyout",
                    "leaf.key",
                    "-out",
                    "leaf.csr",
                    "-subj",
                    "/CN=127.0.0.1",
                ],
            ]
            .concat(),
        );
        openssl(&[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ]);
        std::env::set_var("SSL_CERT_FILE", dir.join("ca.pem"));
        tmp
    })
    .path()
}

/// An HTTPS server (Python's, with the test CA's certificate for 127.0.0.1) that writes the body
/// of every POST to a file of its folder and answers with an XXL-JOB success envelope.
struct HttpsReceiver {
    port: u16,
    out: tempfile::TempDir,
    _server: Server,
}

impl HttpsReceiver {
    async fn start() -> HttpsReceiver {
        let out = tempfile::tempdir().unwrap();
        let ca = test_ca();
        let port = free_port();
        let mut cmd = Command::new("python3");
        cmd.args(["-c", HTTPS_RECEIVER, &port.to_string()])
            .arg(ca.join("leaf.pem"))
            .arg(ca.join("leaf.key"))
            .arg(out.path())
            .stderr(Stdio::null());
        HttpsReceiver {
            port,
            out,
            _server: Server::start(cmd, port, "the HTTPS receiver").await,
        }
    }

    /// The bodies received, waiting up to 10 s for `n` of them.
    async fn bodies(&self, n: usize) -> Vec<String> {
        wait_files(self.out.path(), n).await
    }
}

/// [`HttpsReceiver`]'s script; its arguments: port, certificate, key, output folder.
const HTTPS_RECEIVER: &str = r#"
import http.server, ssl, sys, os, itertools
port, cert, key, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
n = itertools.count()
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers['Content-Length']))
        with open(os.path.join(out, str(next(n))), 'wb') as f:
            f.write(body)
        answer = b'{"code":200,"msg":null,"content":null}'
        self.send_response(200); self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(answer))); self.end_headers()
        self.wfile.write(answer)
srv = http.server.HTTPServer(('127.0.0.1', port), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_webhook_alarm_goes_out_over_https() {
    let hook = HttpsReceiver::start().await;
    let port = hook.port;

    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let (job, fire, executor) = failing_fire(
        &admin,
        "hook-app",
        &format!("https://127.0.0.1:{port}/alarm"),
    )
    .await;
    let bodies = hook.bodies(1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(hook.bodies(1).await.len(), 1, "one alarm");
    let v: Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(v["event"], "fire_failed");
    assert_eq!(v["job_id"], job);
    assert_eq!(v["fire_id"], fire);
    assert_eq!(v["failed_items"][0]["message"], "disk full on purpose");
    executor.stop().await;
    admin.stop().await;
    db.cleanup().await;
}

/// The SDK's client speaks TLS too: an executor given an `https://` admin address (an admin
/// behind a TLS-terminating proxy) registers there, trusting the CA of `SSL_CERT_FILE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_executor_registers_with_an_admin_over_https() {
    let admin = HttpsReceiver::start().await;
    let port = admin.port;
    let executor = TestExecutor::start("tls-app", &format!("https://127.0.0.1:{port}"), |b| {
        b.handler("ok", |_| async { JobResult::success() })
    })
    .await;
    let bodies = admin.bodies(1).await;
    let beat: Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(beat["registryGroup"], "EXECUTOR", "{beat}");
    assert_eq!(beat["registryKey"], "tls-app", "{beat}");
    assert_eq!(beat["registryValue"], executor.address, "{beat}");
    executor.stop().await;
}

/// The admin's executor client speaks TLS too: an executor registered at an `https://` address
/// (behind a TLS-terminating proxy; XXL-JOB's admin reaches such executors) gets its run
/// request over TLS, trusting the CA of `SSL_CERT_FILE`, and its callback ends the fire.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_executor_behind_https_gets_its_runs() {
    let executor = HttpsReceiver::start().await;
    let address = format!("https://127.0.0.1:{}/", executor.port);
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = admin
        .post(
            "/groups",
            json!({"appname": "tls-exec", "title": "tls-exec", "address_type": "MANUAL", "addresses": address}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let job = admin
        .post(
            "/jobs",
            json!({"group_id": gid, "name": "over-tls", "handler": "hello", "params": "p1"}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let trigger = admin.post(&format!("/jobs/{job}/trigger"), json!({})).await;
    let (fire, run) = (
        trigger["fire_id"].as_i64().unwrap(),
        trigger["run_ids"][0].as_i64().unwrap(),
    );
    let bodies = executor.bodies(1).await;
    let request: Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(request["executorHandler"], "hello", "{request}");
    assert_eq!(request["executorParams"], "p1", "{request}");
    assert_eq!(request["logId"], run, "{request}");

    // The executor's result, as a stock executor sends it.
    admin
        .executor_call(
            "/api/callback",
            json!([{"logId": run, "logDateTim": 0, "handleCode": 200, "handleMsg": "done over TLS"}]),
        )
        .await;
    let v = admin.wait_fire(fire).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    let r = admin.get(&format!("/runs/{run}")).await;
    assert_eq!(r["executor_address"], address, "{r}");
    assert_eq!(r["handle_msg"], "done over TLS", "{r}");
    admin.stop().await;
    db.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_alarm_no_target_took_is_recorded_as_failed() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    // Nothing listens there: each of the three tries is refused.
    let closed = format!("http://127.0.0.1:{}/alarm", free_port());
    let (_, down, e1) = failing_fire(&admin, "down-app", &closed).await;
    let (_, quiet, e2) = failing_fire(&admin, "quiet-app", "").await;
    let mut v = Value::Null;
    for _ in 0..150 {
        v = admin.get(&format!("/fires/{down}")).await;
        if v["alarm_state"] != -1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(v["alarm_state"], 3, "failed after its tries: {v}");
    let v = admin.get(&format!("/fires/{quiet}")).await;
    assert_eq!(v["alarm_state"], 1, "no target, none needed: {v}");
    e1.stop().await;
    e2.stop().await;
    admin.stop().await;
    db.cleanup().await;
}

#[tokio::test]
async fn bad_alarm_targets_and_smtp_settings_are_refused() {
    let db = TestDb::sqlite();
    let admin = TestAdmin::start(&db).await;
    let gid = admin
        .post("/groups", json!({"appname": "bad-app", "title": "bad"}))
        .await["id"]
        .as_i64()
        .unwrap();
    let r = admin
        .call(
            reqwest::Method::POST,
            "/jobs",
            Some(json!({"group_id": gid, "name": "j", "handler": "h",
                "alarm_targets": "ops@example.com, pager-team"})),
        )
        .await;
    assert_eq!(r.0, 400, "{r:?}");
    let body = r.1.to_string();
    assert!(
        body.contains("alarm_targets") && body.contains("pager-team"),
        "{body}"
    );
    let jobs = admin.get("/jobs").await;
    assert_eq!(jobs["total"], 0, "nothing stored: {jobs}");
    admin.stop().await;

    // An SMTP relay without a sender, or a URL lettre cannot read, stops the admin at start.
    use clap::Parser;
    for (extra, expect) in [
        (
            &["--smtp-url", "smtp://127.0.0.1:25"][..],
            "SHARDLINE_SMTP_FROM",
        ),
        (
            &["--smtp-url", "smtq://127.0.0.1:25", "--smtp-from", "a@b.c"][..],
            "SHARDLINE_SMTP_URL",
        ),
        (
            &[
                "--smtp-url",
                "smtp://127.0.0.1:25",
                "--smtp-from",
                "not an address",
            ][..],
            "SHARDLINE_SMTP_FROM",
        ),
    ] {
        let mut args = vec!["shardline-admin", "--database-url", &db.url];
        args.extend_from_slice(extra);
        let cli = shardline_admin::config::Cli::parse_from(args);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let err = shardline_admin::app::run(cli.settings, listener, async {})
            .await
            .expect_err("refused");
        assert!(format!("{err:#}").contains(expect), "{extra:?}: {err:#}");
    }
    db.cleanup().await;
}
