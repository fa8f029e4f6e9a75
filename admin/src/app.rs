//! Start-up and shutdown of the admin server: opens the store, prepares the secrets, starts the
//! background tasks and serves HTTP until told to stop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::alarm::Alarms;
use crate::api::{self, AppState};
use crate::beats::{self, Beats};
use crate::config::Settings;
use crate::executor_http::ExecutorHttp;
use crate::metrics::Metrics;
use crate::model::{now_ms, AdminNode};
use crate::monitor;
use crate::results;
use crate::scheduler::Scheduler;
use crate::store::{ClearCut, FireEnded, Store};
use crate::trigger::Dispatcher;

/// How often this admin announces itself in `admin_nodes`.
const NODE_BEAT: Duration = Duration::from_secs(5);

/// Secrets printed at first start, for the caller to show the operator once.
#[derive(Debug, Default)]
pub struct FirstStart {
    pub admin_password: Option<String>,
    pub generated_access_token: Option<String>,
}

/// Opens the store and makes sure an admin user and an executor token exist.
pub async fn prepare(settings: &Settings) -> anyhow::Result<(Store, String, FirstStart)> {
    let store = Store::connect(&settings.database_url).await?;
    let mut first = FirstStart::default();
    let access_token = match settings.access_token.as_deref().filter(|t| !t.is_empty()) {
        Some(t) => t.to_string(),
        None if settings.allow_no_token => String::new(),
        None => {
            let mut generated = None;
            let token = store
                .setting_or_insert("executor_access_token", || {
                    let t = crate::auth::random_secret(32);
                    generated = Some(t.clone());
                    t
                })
                .await?;
            // Printed only by the admin that created it (every start would leak it to logs).
            if generated.as_deref() == Some(token.as_str()) {
                first.generated_access_token = Some(token.clone());
            }
            token
        }
    };
    first.admin_password =
        crate::auth::ensure_admin_user(&store, settings.admin_password.as_deref()).await?;
    Ok((store, access_token, first))
}

/// Refuses to start a second admin on one SQLite file (SQLite has no cross-process claims). A node
/// of this host (node ids start with the host name) that announced `local`, the address this
/// admin now listens on, cannot still be listening there: it was killed without removing its row
/// (kill -9, OOM, power loss), and its row is removed, so a restart after a crash is not refused
/// for the 15 s its heartbeat still looks live. Containers sharing one file have host names of
/// their own, and are refused as before.
async fn check_single_admin(store: &Store, node_id: &str, local: &str) -> anyhow::Result<()> {
    if store.supports_cluster() {
        return Ok(());
    }
    fn host(id: &str) -> &str {
        id.rsplit_once('-').map_or(id, |(h, _)| h)
    }
    let now = now_ms();
    for other in store.admin_nodes().await? {
        if other.id == node_id || !other.is_live(now) {
            continue;
        }
        if other.address == local && host(&other.id) == host(node_id) {
            tracing::warn!(node = %other.id, address = %other.address, "the admin that last listened here stopped without saying so; taking its place");
            store.remove_node(&other.id).await?;
            continue;
        }
        // If it was killed elsewhere (another address or host), its row stops counting once its
        // heartbeat is old: say when.
        let gone_at =
            chrono::DateTime::from_timestamp_millis(other.heartbeat_at + AdminNode::DEAD_AFTER_MS)
                .map_or_else(String::new, |t| t.format("%H:%M:%S UTC").to_string());
        anyhow::bail!(
            "another admin ({} at {}) is running on this SQLite database; SQLite supports one admin. \
             Stop it, or use MySQL/MariaDB (SHARDLINE_DATABASE_URL=mysql://…) to run several. \
             If it was killed, it counts as gone from {gone_at} ({} s after its last heartbeat)",
            other.id,
            other.address,
            AdminNode::DEAD_AFTER_MS / 1000
        );
    }
    Ok(())
}

/// Runs the admin on `listener` until `shutdown` resolves.
pub async fn run(
    settings: Settings,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // Settings checked before the database is touched, so a bad one stops the admin at once.
    settings.validate()?;
    let (store, access_token, first) = prepare(&settings).await?;
    if let Some(p) = &first.admin_password {
        println!("================================================================");
        println!(" First start: user 'admin', one-time password: {p}");
        println!(" (change it at first login; set SHARDLINE_ADMIN_PASSWORD to choose it)");
        println!("================================================================");
    }
    if let Some(t) = &first.generated_access_token {
        println!(" Executor access token (XXL-JOB-ACCESS-TOKEN) generated: {t}");
        println!(" Give it to executors, or set SHARDLINE_ACCESS_TOKEN to choose it.");
    }
    serve(settings, store, access_token, listener, shutdown).await
}

/// Serves with an already prepared store.
pub async fn serve(
    settings: Settings,
    store: Store,
    access_token: String,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let settings = Arc::new(settings);
    let local = listener.local_addr()?;
    let node_id = format!("{}-{}", hostname(), crate::auth::random_secret(6));
    check_single_admin(&store, &node_id, &local.to_string()).await?;
    let public = settings
        .public_address
        .clone()
        .unwrap_or_else(|| local.to_string());
    let started = now_ms();
    store
        .heartbeat_node(&node_id, &public, started, started)
        .await?;

    let metrics = Arc::new(Metrics::default());
    let executors = ExecutorHttp::new(settings.dispatch_timeout());
    let alarms = Arc::new(Alarms::new(&settings)?);
    let (events_tx, mut events_rx) = mpsc::unbounded_channel::<FireEnded>();
    let (sink, writer) = results::start(store.clone(), metrics.clone(), events_tx.clone());
    let dispatcher = Arc::new(Dispatcher::new(
        store.clone(),
        executors,
        settings.clone(),
        access_token.clone(),
        metrics.clone(),
        events_tx,
        sink.clone(),
    ));
    let stop = CancellationToken::new();
    let beats = Beats::new(store.clone(), settings.dead_after_ms());
    let beats_task = tokio::spawn(beats::run(beats.clone(), stop.clone()));

    let state = AppState {
        store: store.clone(),
        settings: settings.clone(),
        dispatcher: dispatcher.clone(),
        results: sink,
        beats,
        metrics: metrics.clone(),
        access_token: access_token.into(),
        node_id: node_id.clone().into(),
    };

    // Fires that became final: retries, alarms, child jobs, FIX_DELAY's next fire.
    let events_task = {
        let store = store.clone();
        let dispatcher = dispatcher.clone();
        let settings = settings.clone();
        let alarms = alarms.clone();
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(1_000);
            while events_rx.recv_many(&mut batch, 1_000).await > 0 {
                if let Err(e) =
                    monitor::on_fires_final(&store, &dispatcher, &settings, &alarms, &batch).await
                {
                    tracing::warn!(error = %e, fires = batch.len(), "fire follow-up failed");
                }
                batch.clear();
            }
        })
    };

    let scheduler = Scheduler::new(
        store.clone(),
        dispatcher.clone(),
        settings.clone(),
        node_id.clone(),
    );
    let scheduler_task = tokio::spawn(scheduler.clone().run(stop.clone()));
    let lost_task = tokio::spawn(
        monitor::LostRuns {
            store: store.clone(),
            dispatcher: dispatcher.clone(),
            settings: settings.clone(),
            metrics: metrics.clone(),
            http: dispatcher.http().clone(),
            interval: Duration::from_millis(settings.lost_check_ms.max(100)),
        }
        .run(stop.clone()),
    );
    let registry_task = tokio::spawn(registry_monitor(
        store.clone(),
        settings.clone(),
        metrics.clone(),
        stop.clone(),
    ));
    let node_task = tokio::spawn(node_heartbeat(
        store.clone(),
        dispatcher.clone(),
        node_id.clone(),
        public,
        started,
        stop.clone(),
    ));
    let housekeeping_task =
        tokio::spawn(housekeeping(store.clone(), settings.clone(), stop.clone()));
    let follow_up_task = tokio::spawn(monitor::follow_up_sweep(
        store.clone(),
        dispatcher.clone(),
        settings.clone(),
        alarms.clone(),
        stop.clone(),
    ));

    let app = api::router(state);
    tracing::info!(address = %local, node = %node_id, "shardline admin listening");
    // The peer address feeds the console's per-address login limit.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await?;

    stop.cancel();
    let _ = scheduler_task.await;
    let _ = lost_task.await;
    let _ = registry_task.await;
    let _ = node_task.await;
    let _ = housekeeping_task.await;
    let _ = follow_up_task.await;
    let _ = beats_task.await;
    // The follow-up task holds the dispatcher, and the dispatcher a sink of the writer. What it
    // leaves undone stays in `follow_ups` for the sweep (of another admin, or of this one's
    // next start).
    events_task.abort();
    let _ = events_task.await;
    alarms.drain(Duration::from_secs(10)).await;
    drop(scheduler);
    drop(dispatcher);
    // The writer ends once the last sink (held by the router and the dispatcher, now dropped)
    // is gone.
    let _ = tokio::time::timeout(Duration::from_secs(10), writer).await;
    let _ = store.remove_node(&node_id).await;
    store.close().await;
    Ok(())
}

/// Evicts executors whose beats stopped and keeps the registry gauge current.
async fn registry_monitor(
    store: Store,
    settings: Arc<Settings>,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(settings.registry_sweep_s.max(1)));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let cutoff = now_ms() - settings.dead_after_ms();
        match store.evict_registry(cutoff).await {
            Ok(n) if n > 0 => {
                tracing::info!(evicted = n, "executors evicted after missing heartbeats")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "registry eviction failed"),
        }
        if let Ok(live) = store.all_live_executors(cutoff).await {
            metrics
                .registry_size
                .store(live.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Every minute: the report rows of today and yesterday (dashboard chart). Every hour: runs older
/// than the retention are deleted in batches, so the table never grows without bound.
async fn housekeeping(store: Store, settings: Arc<Settings>, stop: CancellationToken) {
    const DAY_MS: i64 = 86_400_000;
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    let mut last_cleanup = 0i64;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = now_ms();
        let today = now - now.rem_euclid(DAY_MS);
        for start in [today - DAY_MS, today] {
            let day = chrono::DateTime::from_timestamp_millis(start)
                .map(|d| d.format("%Y-%m-%d").to_string())
                .unwrap_or_default();
            if let Err(e) = store
                .refresh_daily_report(&day, start, start + DAY_MS, now)
                .await
            {
                tracing::warn!(error = %e, day, "daily report not refreshed");
            }
        }
        if settings.run_retention_days > 0 && now - last_cleanup > 3_600_000 {
            last_cleanup = now;
            let before = today - settings.run_retention_days * DAY_MS;
            match store
                .clear_fires(None, None, ClearCut::CreatedBefore(before), 1000)
                .await
            {
                Ok((0, _)) => {}
                Ok((fires, runs)) => tracing::info!(fires, runs, "old fires and runs deleted"),
                Err(e) => tracing::warn!(error = %e, "run retention failed"),
            }
            if let Err(e) = store.delete_audit_before(before).await {
                tracing::warn!(error = %e, "audit log retention failed");
            }
        }
    }
}

async fn node_heartbeat(
    store: Store,
    dispatcher: Arc<Dispatcher>,
    id: String,
    address: String,
    started: i64,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(NODE_BEAT);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = now_ms();
        match store.heartbeat_node(&id, &address, started, now).await {
            // The dispatcher checks its runs before sending once the beats stop being written.
            Ok(()) => dispatcher.beat_written(now),
            Err(e) => tracing::warn!(error = %e, "admin node heartbeat failed"),
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "admin".to_string())
}
