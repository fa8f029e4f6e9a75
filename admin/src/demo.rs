//! `shardline-admin demo`: the admin on SQLite plus three executors in the same process, a
//! broadcast job and an 8-item job, and a line printed for every fire — Shardline doing its job
//! within a minute of `cargo run`, with nothing to install.

use std::time::Duration;

use shardline_executor::{Executor, ExecutorConfig, JobResult};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::model::{now_ms, Job};
use crate::schedule::Schedule;
use crate::store::{GroupInput, Store};

const APPNAME: &str = "shardline-demo";
/// Executors the demo starts.
const EXECUTORS: usize = 3;
/// Rows the demo handler pretends to process.
const ROWS: u64 = 1000;

/// Runs the demo until Ctrl-C.
pub async fn run(
    settings: Settings,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listener = TcpListener::bind(settings.bind)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", settings.bind))?;
    let port = listener.local_addr()?.port();
    let (store, token, first) = crate::app::prepare(&settings).await?;
    let admin_url = format!("http://127.0.0.1:{port}");
    let held = hold_demo_jobs(&store).await?;

    let stop = CancellationToken::new();
    let server_stop = CancellationToken::new();
    let server = {
        let (settings, store, token, stop) = (
            settings.clone(),
            store.clone(),
            token.clone(),
            server_stop.clone(),
        );
        tokio::spawn(async move {
            crate::app::serve(settings, store, token, listener, async move {
                stop.cancelled().await
            })
            .await
        })
    };
    let started = now_ms();
    let mut executors = Vec::new();
    for i in 0..EXECUTORS {
        executors.push(start_executor(i, &admin_url, &token).await?);
    }
    // The jobs are created, or planned again, once the executors are in the registry: a first
    // broadcast prepared before they registered would fail with no executor to send to.
    wait_for_executors(&store, started).await;
    ensure_demo_jobs(&store, &settings, &held).await?;

    println!();
    println!("  Shardline demo is running.");
    println!("  Console:  {admin_url}/   user: admin");
    match &first.admin_password {
        Some(p) => println!("            one-time password: {p}"),
        None => println!("            password: the one you set (SHARDLINE_ADMIN_PASSWORD) or were given at first start"),
    }
    println!("  API:      {admin_url}/api/v1/openapi.json");
    println!("  Jobs:     demo-broadcast (every 5 s on all {EXECUTORS} executors), demo-items (8 items every 10 s)");
    println!("  Ctrl-C to stop.");
    println!();

    let printer = tokio::spawn(print_fires(store.clone(), started, stop.clone()));
    shutdown.await;
    stop.cancel();
    let _ = printer.await;
    // Executors first, so they deregister while the admin still answers.
    for (handle, exec_stop) in executors {
        exec_stop.cancel();
        let _ = handle.await;
    }
    server_stop.cancel();
    server.await??;
    Ok(())
}

/// Waits up to 10 s until the demo's executors have registered since `started` (ms).
async fn wait_for_executors(store: &Store, started: i64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match store.live_executors(APPNAME, started).await {
            Ok(live) if live.len() >= EXECUTORS => return,
            Ok(_) if tokio::time::Instant::now() < deadline => {}
            Ok(live) => {
                tracing::warn!(
                    registered = live.len(),
                    "demo executors not all registered after 10 s; creating the jobs anyway"
                );
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the registry; creating the jobs anyway");
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// On a later run, before the scheduler starts: takes the next planned fire off the demo group's
/// enabled jobs, so that none is planned before the demo's executors registered. Returns them.
async fn hold_demo_jobs(store: &Store) -> anyhow::Result<Vec<Job>> {
    let Some((_, jobs)) = demo_group_jobs(store).await? else {
        return Ok(vec![]);
    };
    // Every enabled one, with or without a planned fire: a demo stopped while holding them
    // left them without one.
    let held: Vec<Job> = jobs.into_iter().filter(|j| j.enabled != 0).collect();
    for job in &held {
        store.set_job_enabled(job.id, true, None, now_ms()).await?;
    }
    Ok(held)
}

/// Creates the demo group and jobs on first run (later runs reuse them), and plans the `held`
/// ones again.
async fn ensure_demo_jobs(store: &Store, settings: &Settings, held: &[Job]) -> anyhow::Result<()> {
    let now = now_ms();
    for job in held {
        let schedule =
            Schedule::of_job(job, &settings.timezone).map_err(|e| anyhow::anyhow!(e.refusal))?;
        // As for a new job below: the scheduler finds it at its next pass.
        store
            .set_job_enabled(job.id, true, schedule.first_after(now + 1_000), now)
            .await?;
    }
    let (group_id, existing) = match demo_group_jobs(store).await? {
        Some(found) => found,
        None => {
            let id = store
                .create_group(
                    &GroupInput {
                        appname: APPNAME.into(),
                        title: "Demo executors".into(),
                        address_type: "AUTO".into(),
                        addresses: String::new(),
                        access_token: String::new(),
                        generation: "CLASSIC".into(),
                    },
                    now,
                )
                .await?;
            (id, Vec::new())
        }
    };
    for (name, conf, mode, total) in [
        ("demo-broadcast", "0/5 * * * * ?", "BROADCAST", 1),
        ("demo-items", "0/10 * * * * ?", "ITEMS", 8),
    ] {
        if existing.iter().any(|j| j.name == name) {
            continue;
        }
        let schedule = Schedule::parse("CRON", conf, "", &settings.timezone)
            .map_err(|e| anyhow::anyhow!(e.refusal))?;
        let job = Job {
            group_id,
            name: name.into(),
            description: "created by `shardline-admin demo`".into(),
            schedule_type: "CRON".into(),
            schedule_conf: conf.into(),
            handler: "demoShardingHandler".into(),
            timeout_s: 60,
            retry_count: 1,
            retry_interval_s: 2,
            retry_backoff: 2,
            sharding_mode: mode.into(),
            sharding_total: total,
            enabled: 1,
            // The running scheduler finds a job created here at its next pass, within a second.
            next_fire_at: schedule.first_after(now + 1_000),
            ..Job::default()
        };
        store.create_job(&job, now).await?;
    }
    Ok(())
}

/// The demo group's id and its jobs, if the group exists.
async fn demo_group_jobs(store: &Store) -> anyhow::Result<Option<(i64, Vec<Job>)>> {
    let Some(group) = store.group_by_appname(APPNAME).await? else {
        return Ok(None);
    };
    let (jobs, _) = store
        .list_jobs(&crate::store::JobFilter {
            group_id: Some(group.id),
            limit: 100,
            ..Default::default()
        })
        .await?;
    Ok(Some((group.id, jobs)))
}

/// One demo executor: processes the rows of its shard, `MOD(id, total) = index`.
async fn start_executor(
    i: usize,
    admin_url: &str,
    token: &str,
) -> anyhow::Result<(tokio::task::JoinHandle<()>, CancellationToken)> {
    let mut cfg = ExecutorConfig::new(APPNAME, vec![admin_url.to_string()]);
    cfg.access_token = token.to_string();
    cfg.bind = "127.0.0.1:0".parse()?;
    cfg.log_path = std::path::PathBuf::from(format!("data/demo-executor-{i}"));
    let executor = Executor::builder(cfg)
        .handler("demoShardingHandler", |ctx| async move {
            let (index, total) = (ctx.shard_index() as u64, ctx.shard_total().max(1) as u64);
            let mine = (1..=ROWS).filter(|id| id % total == index).count();
            ctx.log(format!(
                "shard {index}/{total}: {mine} of {ROWS} rows have MOD(id, {total}) = {index}"
            ));
            tokio::time::sleep(Duration::from_millis(200)).await;
            JobResult::success_with(format!("processed {mine} rows"))
        })
        .build()?;
    let bound = executor.bind().await?;
    let stop = CancellationToken::new();
    let s2 = stop.clone();
    let handle = tokio::spawn(async move {
        if let Err(e) = bound.serve(async move { s2.cancelled().await }).await {
            tracing::error!(error = %e, "demo executor stopped");
        }
    });
    Ok((handle, stop))
}

/// Prints each finished fire planned since `since` (ms; not those of an earlier start) with its
/// coverage.
async fn print_fires(store: Store, since: i64, stop: CancellationToken) {
    let mut printed = std::collections::HashSet::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        let Ok((fires, _)) = store
            .list_fires(&crate::store::HistoryFilter {
                limit: 50,
                ..Default::default()
            })
            .await
        else {
            continue;
        };
        let mut done: Vec<_> = fires
            .into_iter()
            .filter(|f| {
                f.planned_at >= since
                    && !printed.contains(&f.id)
                    && (f.state == "succeeded" || f.state == "failed")
            })
            .collect();
        done.sort_by_key(|f| f.id);
        for f in done {
            let Ok(runs) = store.fire_runs(f.id).await else {
                continue;
            };
            let cov = crate::api::v1::fires::coverage(&f, &runs);
            let name = store
                .get_job(f.job_id)
                .await
                .map(|j| j.name)
                .unwrap_or_default();
            let at = chrono::DateTime::from_timestamp_millis(f.planned_at)
                .map(|t| t.format("%H:%M:%S").to_string())
                .unwrap_or_default();
            println!("  fire #{:<5} {at} {name:<15} {}", f.id, cov.summary);
            printed.insert(f.id);
        }
    }
}
