//! `shardline-admin`: the admin server and its maintenance commands.

use shardline_admin::auth;
use shardline_admin::config::{Cli, Command, TokenCommand, UserCommand};
use shardline_admin::model::{now_ms, Role};
use shardline_admin::store::Store;

/// jemalloc, for the admin's own allocations and SQLite's alike (it replaces `malloc` in the whole
/// process). Under load the admin allocates and frees in bursts of every size (a second's run
/// requests, statements with hundreds of parameters, rows); glibc spent a quarter of the admin's
/// CPU at 10 000 runs/s sorting and merging its free lists (`_int_malloc`, `unlink_chunk`,
/// `malloc_consolidate`), jemalloc's per-thread caches and size classes far less (see
/// docs/benchmarks.md, ninth round).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its first allocation. One arena: the admin has a few busy
/// threads, and each arena keeps memory of its own. Freed pages go back to the system after a
/// second (the default is ten), so the memory of a burst does not stay resident. Each thread
/// (tokio's workers, and the one thread of each SQLite connection) caches freed blocks of up to
/// 4 KiB only, and a quarter as many of each size as by default: RSS at 1 000 runs a second was
/// about 2 MiB lower, and the CPU measured no different (docs/benchmarks.md, twenty-third
/// round).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static malloc_conf: &[u8; 87] =
    b"narenas:1,dirty_decay_ms:1000,muzzy_decay_ms:0,tcache_max:4096,lg_tcache_nslots_mul:-2\0";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("cannot start the tokio runtime");
    if let Err(e) = runtime.block_on(run()) {
        eprintln!("shardline-admin: {e:#}");
        std::process::exit(1);
    }
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
