//! Configuration: flags, then `SHARDLINE_*` environment variables, then an optional TOML file,
//! then defaults (the first that sets a value wins).
//!
//! The file uses the flag names with `_` (e.g. `database_url = "mysql://…"`); its path comes from
//! `--config` or `SHARDLINE_CONFIG`. Values from the file are applied as environment defaults before
//! the flags are parsed, so precedence comes out of clap's own `env` handling, in one place.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// Shardline admin: schedules jobs and dispatches them to executors.
#[derive(Debug, Parser)]
#[command(name = "shardline-admin", version, about)]
pub struct Cli {
    /// TOML configuration file (keys are the long flag names with `_`).
    #[arg(long, env = "SHARDLINE_CONFIG", global = true)]
    pub config: Option<String>,

    #[command(flatten)]
    pub settings: Settings,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the admin server (the default).
    Serve,
    /// Run the admin with three demo executors and two demo jobs (a quick look at Shardline).
    Demo,
    /// Apply the database migrations and exit.
    Migrate,
    /// Manage console / API users.
    #[command(subcommand)]
    User(UserCommand),
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user; the password comes from --password or SHARDLINE_NEW_PASSWORD, else a random one
    /// is printed once.
    Add {
        username: String,
        /// ADMIN or USER.
        #[arg(long, default_value = "USER")]
        role: String,
        /// Comma-separated group ids a USER may operate.
        #[arg(long, default_value = "")]
        groups: String,
        #[arg(long, env = "SHARDLINE_NEW_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
    /// Set a user's password.
    Passwd {
        username: String,
        #[arg(long, env = "SHARDLINE_NEW_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
    /// List users.
    List,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create an API token for a user; the secret is printed once.
    Create { username: String, name: String },
    /// List tokens (never their secrets).
    List,
    /// Revoke a token by id.
    Revoke { id: i64 },
}

/// Settings of the server, each a flag, an environment variable and a file key.
#[derive(Debug, Clone, Args)]
pub struct Settings {
    /// Address the HTTP server listens on.
    #[arg(
        long,
        env = "SHARDLINE_BIND",
        default_value = "0.0.0.0:8080",
        global = true
    )]
    pub bind: SocketAddr,

    /// `sqlite://path/file.db` (created when missing) or `mysql://user:pass@host:3306/db`.
    #[arg(
        long,
        env = "SHARDLINE_DATABASE_URL",
        default_value = "sqlite://data/shardline.db",
        global = true
    )]
    pub database_url: String,

    /// Token executors must present (`XXL-JOB-ACCESS-TOKEN`), and that the admin sends them. When
    /// unset, a random one is generated on first start, stored, and printed.
    #[arg(
        long,
        env = "SHARDLINE_ACCESS_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub access_token: Option<String>,

    /// Run without an executor access token (accept any executor). Not for production.
    #[arg(
        long,
        env = "SHARDLINE_ALLOW_NO_TOKEN",
        default_value_t = false,
        global = true
    )]
    pub allow_no_token: bool,

    /// Password of the `admin` user created on first start (else a one-time one is printed).
    #[arg(
        long,
        env = "SHARDLINE_ADMIN_PASSWORD",
        hide_env_values = true,
        global = true
    )]
    pub admin_password: Option<String>,

    /// A bearer token accepted as the admin user, for automation and tests.
    #[arg(
        long,
        env = "SHARDLINE_API_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub api_token: Option<String>,

    /// Seconds without a heartbeat after which an executor is evicted.
    #[arg(
        long,
        env = "SHARDLINE_REGISTRY_DEAD_AFTER_S",
        default_value_t = 90,
        global = true
    )]
    pub registry_dead_after_s: u64,

    /// How often the registry monitor evicts dead executors, in seconds.
    #[arg(
        long,
        env = "SHARDLINE_REGISTRY_SWEEP_S",
        default_value_t = 10,
        global = true
    )]
    pub registry_sweep_s: u64,

    /// Timeout of one admin → executor request, in milliseconds.
    #[arg(
        long,
        env = "SHARDLINE_DISPATCH_TIMEOUT_MS",
        default_value_t = 3000,
        global = true
    )]
    pub dispatch_timeout_ms: u64,

    /// Most runs sent to one executor in one request, for executors that take runs in batches
    /// (the Shardline SDK says so when it registers); 1 sends each run in its own `/run`, as to
    /// every other executor.
    #[arg(
        long,
        env = "SHARDLINE_DISPATCH_BATCH",
        default_value_t = 256,
        global = true
    )]
    pub dispatch_batch: usize,

    /// A fire later than this (ms) follows the job's misfire strategy.
    #[arg(
        long,
        env = "SHARDLINE_MISFIRE_THRESHOLD_MS",
        default_value_t = 5000,
        global = true
    )]
    pub misfire_threshold_ms: i64,

    /// Default time zone of jobs that name none (IANA name).
    #[arg(long, env = "SHARDLINE_TIMEZONE", default_value = "UTC", global = true)]
    pub timezone: String,

    /// Days of runs kept in the database (older ones are deleted daily; 0 keeps everything).
    #[arg(
        long,
        env = "SHARDLINE_RUN_RETENTION_DAYS",
        default_value_t = 30,
        global = true
    )]
    pub run_retention_days: i64,

    /// Address other admins and the console show for this node (defaults to the bind address).
    #[arg(long, env = "SHARDLINE_PUBLIC_ADDRESS", global = true)]
    pub public_address: Option<String>,

    /// How often open runs are checked for lost executors and overdue results, in milliseconds.
    #[arg(
        long,
        env = "SHARDLINE_LOST_CHECK_MS",
        default_value_t = 1000,
        global = true
    )]
    pub lost_check_ms: u64,

    /// SMTP relay for e-mail alarms: `smtps://user:pass@host:465` (TLS),
    /// `smtp://user:pass@host:587?tls=required` (STARTTLS) or `smtp://host:25` (plain, for a relay
    /// on the local network). Unset: e-mail targets are logged, not sent.
    #[arg(
        long,
        env = "SHARDLINE_SMTP_URL",
        hide_env_values = true,
        global = true
    )]
    pub smtp_url: Option<String>,

    /// Sender of e-mail alarms (`alarms@example.com` or `Shardline <alarms@example.com>`).
    #[arg(long, env = "SHARDLINE_SMTP_FROM", global = true)]
    pub smtp_from: Option<String>,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "SHARDLINE_MAX_BODY_BYTES", default_value_t = 5 * 1024 * 1024, global = true)]
    pub max_body_bytes: usize,
}

impl Settings {
    pub fn dispatch_timeout(&self) -> Duration {
        Duration::from_millis(self.dispatch_timeout_ms)
    }

    pub fn dead_after_ms(&self) -> i64 {
        (self.registry_dead_after_s as i64) * 1000
    }

    /// Checks what clap cannot: a usable time zone and sane numbers.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.timezone.parse::<chrono_tz::Tz>().is_err() {
            anyhow::bail!("SHARDLINE_TIMEZONE: unknown time zone {:?}", self.timezone);
        }
        if self.registry_dead_after_s == 0 {
            anyhow::bail!("SHARDLINE_REGISTRY_DEAD_AFTER_S must be at least 1");
        }
        if self.dispatch_timeout_ms == 0 {
            anyhow::bail!("SHARDLINE_DISPATCH_TIMEOUT_MS must be at least 1");
        }
        if self.dispatch_batch == 0 {
            anyhow::bail!("SHARDLINE_DISPATCH_BATCH must be at least 1");
        }
        // The SMTP relay's URL and sender, read as the alarms will read them.
        crate::alarm::Alarms::new(self)?;
        Ok(())
    }
}

impl Cli {
    /// Parses flags, environment and the optional config file.
    pub fn load() -> anyhow::Result<Cli> {
        let args: Vec<String> = std::env::args().collect();
        let file = config_path(&args).or_else(|| std::env::var("SHARDLINE_CONFIG").ok());
        if let Some(path) = file {
            apply_file_defaults(&path)?;
        }
        let cli = Cli::parse_from(args);
        cli.settings.validate()?;
        Ok(cli)
    }
}

/// The value of `--config X` / `--config=X`, found before clap runs.
fn config_path(args: &[String]) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--config" {
            return it.next().cloned();
        }
        if let Some(v) = a.strip_prefix("--config=") {
            return Some(v.to_string());
        }
    }
    None
}

/// Sets `SHARDLINE_<KEY>` for each key of the file that the environment does not set already.
fn apply_file_defaults(path: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read config file {path}: {e}"))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("config file {path}: {e}"))?;
    for (key, value) in table {
        let var = format!("SHARDLINE_{}", key.to_ascii_uppercase().replace('-', "_"));
        let value = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Float(f) => f.to_string(),
            other => {
                anyhow::bail!("config file {path}: key {key:?} has an unsupported value {other}")
            }
        };
        if std::env::var_os(&var).is_none() {
            // Called once at start-up, before any thread is spawned.
            std::env::set_var(var, value);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse() {
        let cli = Cli::parse_from(["shardline-admin"]);
        assert_eq!(cli.settings.bind.port(), 8080);
        assert!(cli.settings.database_url.starts_with("sqlite://"));
        cli.settings.validate().unwrap();
    }

    #[test]
    fn subcommands_parse() {
        let cli = Cli::parse_from(["shardline-admin", "user", "add", "bob", "--role", "ADMIN"]);
        assert!(matches!(
            cli.command,
            Some(Command::User(UserCommand::Add { .. }))
        ));
        assert_eq!(
            config_path(&["x".into(), "--config=a.toml".into()]).as_deref(),
            Some("a.toml")
        );
    }

    #[test]
    fn bad_timezone_refused() {
        let mut s = Cli::parse_from(["shardline-admin"]).settings;
        s.timezone = "Mars/Base".into();
        assert!(s.validate().unwrap_err().to_string().contains("Mars/Base"));
    }
}
