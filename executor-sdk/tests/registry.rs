//! The registry loop and the admin client against a fake admin on loopback: beat contents and
//! headers, beat timing, `registryRemove` on shutdown, failover between admins, context paths, and
//! the failure messages of the client.

mod fake_admin;

use std::time::{Duration, Instant};

use fake_admin::{dead_address, FakeAdmin, Mode};
use serde_json::json;
use shardline_executor::admin_client::AdminClient;
use shardline_executor::protocol::{ExecutorMeta, RegistryRequest};
use shardline_executor::registry;
use tokio_util::sync::CancellationToken;

const BEAT: Duration = Duration::from_millis(200);

fn client(admins: Vec<String>, token: &str) -> AdminClient {
    AdminClient::new(
        reqwest::Client::new(),
        admins,
        token.to_string(),
        Duration::from_secs(2),
    )
}

#[tokio::test]
async fn beats_every_interval_then_deregisters() {
    let admin = FakeAdmin::start().await;
    let request = RegistryRequest::executor("order-sync", "http://10.0.0.5:9999/");
    let stop = CancellationToken::new();
    let started = Instant::now();
    let task = registry::spawn(
        client(vec![admin.base()], "s3cret"),
        request,
        BEAT,
        stop.clone(),
    );

    assert!(
        admin
            .wait_until(Duration::from_secs(5), |c| c.len() >= 5)
            .await
    );
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("registry loop ends after shutdown")
        .unwrap();

    let calls = admin.calls();
    let (last, beats) = calls.split_last().unwrap();
    assert_eq!(last.path, "/api/registryRemove");
    assert!(beats.len() >= 5);
    for beat in beats {
        assert_eq!(beat.path, "/api/registry");
        assert_eq!(
            beat.body,
            json!({"registryGroup":"EXECUTOR","registryKey":"order-sync","registryValue":"http://10.0.0.5:9999/"})
        );
        assert_eq!(beat.header("xxl-job-access-token"), Some("s3cret"));
        assert_eq!(beat.header("content-type"), Some("application/json"));
        assert_eq!(beat.header("xxl-job-appname"), None);
    }
    assert_eq!(last.body, beats[0].body);
    assert_eq!(last.header("xxl-job-access-token"), Some("s3cret"));

    // The first beat goes out at once, the next ones one interval apart (not aligned to the clock).
    assert!(beats[0].at.duration_since(started) < Duration::from_millis(150));
    // Each gap is about one interval (slack for a busy machine); on average it is the interval.
    for pair in beats.windows(2) {
        let gap = pair[1].at.duration_since(pair[0].at);
        assert!(
            gap >= Duration::from_millis(150) && gap <= Duration::from_millis(800),
            "beat gap {gap:?}"
        );
    }
    let span = beats.last().unwrap().at.duration_since(beats[0].at);
    let mean = span / (beats.len() as u32 - 1);
    assert!(
        mean >= Duration::from_millis(180) && mean <= Duration::from_millis(320),
        "mean beat gap {mean:?}"
    );
    // Nothing after the removal.
    tokio::time::sleep(BEAT * 2).await;
    assert_eq!(admin.calls().len(), calls.len());
}

#[tokio::test]
async fn sends_meta_extension_and_appname_header_when_set() {
    let admin = FakeAdmin::start().await;
    let mut request = RegistryRequest::executor("billing", "http://[fd00::5]:9999/");
    request.meta = Some(ExecutorMeta {
        weight: Some(3),
        labels: vec!["shanghai".into()],
        run_batch: false,
    });
    let stop = CancellationToken::new();
    let task = registry::spawn(
        client(vec![admin.base()], "").with_appname("billing"),
        request,
        BEAT,
        stop.clone(),
    );
    assert!(
        admin
            .wait_until(Duration::from_secs(5), |c| !c.is_empty())
            .await
    );
    stop.cancel();
    task.await.unwrap();
    let beat = &admin.calls_to("registry")[0];
    assert_eq!(
        beat.body,
        json!({"registryGroup":"EXECUTOR","registryKey":"billing","registryValue":"http://[fd00::5]:9999/",
               "shardlineMeta":{"weight":3,"labels":["shanghai"]}})
    );
    // No token configured: no token header at all, as a stock admin without a token expects.
    assert_eq!(beat.header("xxl-job-access-token"), None);
    assert_eq!(beat.header("xxl-job-appname"), Some("billing"));
    assert_eq!(admin.calls_to("registryRemove").len(), 1);
}

#[tokio::test]
async fn fails_over_to_the_second_admin_and_stops_at_the_first_success() {
    let dead = dead_address().await;
    let refusing = FakeAdmin::start().await;
    refusing.set_mode(Mode::Fail);
    let live = FakeAdmin::start().await;
    let spare = FakeAdmin::start().await;
    let stop = CancellationToken::new();
    let task = registry::spawn(
        client(vec![dead, refusing.base(), live.base(), spare.base()], "t"),
        RegistryRequest::executor("app", "http://10.0.0.6:9999/"),
        BEAT,
        stop.clone(),
    );
    assert!(
        live.wait_until(Duration::from_secs(5), |c| c.len() >= 2)
            .await
    );
    stop.cancel();
    task.await.unwrap();

    assert!(live.calls_to("registry").len() >= 2);
    assert_eq!(live.calls_to("registryRemove").len(), 1);
    // The admin answering code 500 was tried each time, the one after the first success never.
    assert_eq!(
        refusing.calls_to("registry").len(),
        live.calls_to("registry").len()
    );
    assert!(spare.calls().is_empty());
}

#[tokio::test]
async fn context_path_addresses_with_or_without_trailing_slash() {
    let with_slash = FakeAdmin::start_with_context("/xxl-job-admin").await;
    let c = client(vec![format!("{}/", with_slash.base())], "");
    c.call("registry", &RegistryRequest::executor("a", "http://h:1/"))
        .await
        .unwrap();
    assert_eq!(with_slash.calls()[0].path, "/xxl-job-admin/api/registry");

    let without = FakeAdmin::start_with_context("/jobs/admin").await;
    let c = client(vec![without.base()], "");
    c.call("callback", &json!([])).await.unwrap();
    assert_eq!(without.calls()[0].path, "/jobs/admin/api/callback");
}

#[tokio::test]
async fn keeps_beating_while_the_admin_is_down_and_registers_when_it_returns() {
    let admin = FakeAdmin::start().await;
    admin.down().await;
    let stop = CancellationToken::new();
    let task = registry::spawn(
        client(vec![admin.base()], ""),
        RegistryRequest::executor("app", "http://10.0.0.7:9999/"),
        BEAT,
        stop.clone(),
    );
    tokio::time::sleep(BEAT * 3).await;
    assert!(admin.calls().is_empty());
    admin.up().await;
    assert!(
        admin
            .wait_until(Duration::from_secs(5), |c| !c.is_empty())
            .await,
        "the loop registers once the admin is back"
    );
    stop.cancel();
    task.await.unwrap();
    assert_eq!(admin.calls().last().unwrap().path, "/api/registryRemove");
}

#[tokio::test]
async fn an_incomplete_request_is_never_sent() {
    let admin = FakeAdmin::start().await;
    let stop = CancellationToken::new();
    let task = registry::spawn(
        client(vec![admin.base()], ""),
        RegistryRequest::executor("app", "  "),
        BEAT,
        stop.clone(),
    );
    tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .expect("loop ends on its own")
        .unwrap();
    assert!(admin.calls().is_empty());
}

#[tokio::test]
async fn client_errors_name_each_admin_and_the_reason() {
    let dead = dead_address().await;
    let http_error = FakeAdmin::start().await;
    http_error.set_mode(Mode::HttpError);
    let not_json = FakeAdmin::start().await;
    not_json.set_mode(Mode::NotJson);
    let failing = FakeAdmin::start().await;
    failing.set_mode(Mode::Fail);
    let c = client(
        vec![
            dead.clone(),
            http_error.base(),
            not_json.base(),
            failing.base(),
        ],
        "",
    );
    let err = c
        .call("registry", &RegistryRequest::executor("a", "http://h:1/"))
        .await
        .unwrap_err();
    let parts: Vec<&str> = err.split("; ").collect();
    assert_eq!(parts.len(), 4, "{err}");
    assert!(parts[0].starts_with(&format!("admin {dead}: ")), "{err}");
    assert!(parts[0].to_lowercase().contains("connect"), "{err}");
    assert_eq!(
        parts[1],
        format!(
            "admin {}: http status 503 Service Unavailable: upstream overloaded",
            http_error.base()
        )
    );
    assert!(
        parts[2].starts_with(&format!(
            "admin {}: reply is not an envelope",
            not_json.base()
        )),
        "{err}"
    );
    assert!(parts[2].ends_with("<html>login</html>"), "{err}");
    assert_eq!(
        parts[3],
        format!(
            "admin {}: code 500, msg database unavailable",
            failing.base()
        )
    );
}

#[tokio::test]
async fn client_reads_both_envelope_generations() {
    let classic = FakeAdmin::start().await;
    classic.set_mode(Mode::OkClassic);
    let env = client(vec![classic.base()], "")
        .call("registry", &RegistryRequest::executor("a", "http://h:1/"))
        .await
        .unwrap();
    assert_eq!(env.code, 200);
    assert_eq!(env.payload, None);

    let modern = FakeAdmin::start().await;
    let env = client(vec![modern.base()], "")
        .call("registry", &RegistryRequest::executor("a", "http://h:1/"))
        .await
        .unwrap();
    assert_eq!(env.msg.as_deref(), Some("Success"));
}

#[tokio::test]
async fn a_slow_admin_times_out_and_the_next_one_answers() {
    // A listener that accepts and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = format!("http://{}", silent.local_addr().unwrap());
    let hold = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let live = FakeAdmin::start().await;
    let c = AdminClient::new(
        reqwest::Client::new(),
        vec![silent_addr.clone(), live.base()],
        String::new(),
        Duration::from_millis(300),
    );
    let started = Instant::now();
    c.call("registry", &RegistryRequest::executor("a", "http://h:1/"))
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert_eq!(live.calls().len(), 1);

    let only_silent = AdminClient::new(
        reqwest::Client::new(),
        vec![silent_addr.clone()],
        String::new(),
        Duration::from_millis(200),
    );
    let err = only_silent
        .call("registry", &RegistryRequest::executor("a", "http://h:1/"))
        .await
        .unwrap_err();
    assert!(
        err.starts_with(&format!("admin {silent_addr}: timed out")),
        "{err}"
    );
    hold.abort();
}

#[test]
fn detected_address_has_the_executor_shape() {
    let a = registry::detect_address(None, None, 9999);
    assert!(a.starts_with("http://") && a.ends_with(":9999/"), "{a}");
    assert_eq!(
        registry::detect_address(None, Some("::1"), 9999),
        "http://[::1]:9999/"
    );
    assert_eq!(
        registry::detect_address(Some("http://gateway/exec-1"), Some("10.0.0.1"), 9999),
        "http://gateway/exec-1/"
    );
}
