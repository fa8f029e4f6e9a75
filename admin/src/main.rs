//! `shardline-admin`: the admin server and its maintenance commands.

use shardline_admin::auth;
use shardline_admin::config::{Cli, Command, TokenCommand, UserCommand};
use shardline_admin::model::{now_ms, Role};
use shardline_admin::store::Store;

fn main() {
    // Before the runtime starts its threads: the setting applies to arenas not yet made.
    limit_malloc_arenas();
    return_freed_memory();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("cannot start the tokio runtime");
    if let Err(e) = runtime.block_on(run()) {
        eprintln!("shardline-admin: {e:#}");
        std::process::exit(1);
    }
}

/// glibc gives each thread that allocates its own arena (up to eight per core); the admin's
/// tokio workers and SQLite's connection threads each kept one, whose free space made up half
/// of the admin's memory under load. Two arenas keep it small without contention showing in
/// the profile.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// glibc returns freed heap memory to the system only from the top of an arena; the pages freed
/// after a burst of runs sit below live allocations and stayed resident (6–8 MiB of the admin's
/// RSS at 1 000 runs/s on SQLite). `malloc_trim` gives back every whole free page, but costs a
/// system call per free region each time, even for pages it gave back before (0.5 % of a core
/// when run every second on an idle admin, 0.2 % at 1 000 runs/s), so it runs only after a second
/// in which the admin used at least 5 % of a core: when bursts of work freed memory.
fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    std::thread::Builder::new()
        .name("malloc-trim".into())
        .spawn(|| {
            const BUSY: std::time::Duration = std::time::Duration::from_millis(50);
            let mut last = cpu_time();
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
                let now = cpu_time();
                if now.saturating_sub(last) >= BUSY {
                    // SAFETY: malloc_trim only releases free memory, under the allocator's locks.
                    unsafe {
                        libc::malloc_trim(0);
                    }
                }
                last = now;
            }
        })
        .expect("cannot start the malloc-trim thread");
}

/// CPU time the whole process used so far (all threads, user and system).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn cpu_time() -> std::time::Duration {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| {
        std::time::Duration::from_secs(t.tv_sec as u64)
            + std::time::Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

async fn run() -> anyhow::Result<()> {
    let cli = Cli::load()?;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SHARDLINE_LOG")
                .unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .with_target(false)
        .init();
    let settings = cli.settings.clone();
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let listener = tokio::net::TcpListener::bind(settings.bind)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", settings.bind))?;
            shardline_admin::app::run(settings, listener, shutdown_signal()).await
        }
        Command::Demo => shardline_admin::demo::run(settings, shutdown_signal()).await,
        Command::Migrate => {
            Store::connect(&settings.database_url).await?;
            println!(
                "migrations applied to {}",
                shardline_admin::store::redact(&settings.database_url)
            );
            Ok(())
        }
        Command::User(cmd) => user_command(&settings.database_url, cmd).await,
        Command::Token(cmd) => token_command(&settings.database_url, cmd).await,
    }
}

async fn user_command(url: &str, cmd: UserCommand) -> anyhow::Result<()> {
    let store = Store::connect(url).await?;
    match cmd {
        UserCommand::Add {
            username,
            role,
            groups,
            password,
        } => {
            Role::parse(&role).map_err(anyhow::Error::msg)?;
            let (password, printed) = match password {
                Some(p) => {
                    auth::check_password_strength(&p).map_err(anyhow::Error::msg)?;
                    (p, false)
                }
                None => (auth::random_secret(16), true),
            };
            let hash = auth::hash_password_async(password.clone()).await?;
            let id = store
                .create_user(&username, &hash, &role, &groups, printed, now_ms())
                .await?;
            println!("user {username} created (id {id}, role {role})");
            if printed {
                println!("one-time password: {password}");
            }
        }
        UserCommand::Passwd { username, password } => {
            let user = store
                .user_by_name(&username)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no user named {username:?}"))?;
            let (password, printed) = match password {
                Some(p) => {
                    auth::check_password_strength(&p).map_err(anyhow::Error::msg)?;
                    (p, false)
                }
                None => (auth::random_secret(16), true),
            };
            let hash = auth::hash_password_async(password.clone()).await?;
            store
                .set_password(user.id, &hash, printed, now_ms())
                .await?;
            println!("password of {username} changed");
            if printed {
                println!("one-time password: {password}");
            }
        }
        UserCommand::List => {
            for u in store.list_users().await? {
                println!(
                    "{}\t{}\t{}\tgroups={}",
                    u.id, u.username, u.role, u.group_ids
                );
            }
        }
    }
    Ok(())
}

async fn token_command(url: &str, cmd: TokenCommand) -> anyhow::Result<()> {
    let store = Store::connect(url).await?;
    match cmd {
        TokenCommand::Create { username, name } => {
            let user = store
                .user_by_name(&username)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no user named {username:?}"))?;
            let (secret, hash, prefix) = auth::new_api_token();
            let id = store
                .create_token(user.id, &name, &hash, &prefix, now_ms())
                .await?;
            println!("token {id} created for {username}; it is shown only now:");
            println!("{secret}");
        }
        TokenCommand::List => {
            for t in store.list_tokens(None).await? {
                let state = if t.revoked_at.is_some() {
                    "revoked"
                } else {
                    "active"
                };
                println!(
                    "{}\tuser={}\t{}\t{}…\t{state}",
                    t.id, t.user_id, t.name, t.prefix
                );
            }
        }
        TokenCommand::Revoke { id } => {
            store.revoke_token(id, now_ms()).await?;
            println!("token {id} revoked");
        }
    }
    Ok(())
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutting down");
}
