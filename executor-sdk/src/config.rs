//! Executor configuration: what an executor needs to know about itself and its admins.
//!
//! Build it in code (`ExecutorConfig::new("my-app", vec!["http://admin:8080".into()])` and adjust
//! the public fields) or from the environment with [`ExecutorConfig::from_env`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::protocol::{ExecutorMeta, Generation, MAX_APPNAME_CHARS};

/// A configuration value that cannot work, with the setting it concerns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid executor configuration: {0}")]
pub struct ConfigError(pub String);

impl ConfigError {
    fn new(msg: impl Into<String>) -> Self {
        ConfigError(msg.into())
    }
}

/// Everything an executor needs: identity, admins, listener, logs and limits.
///
/// Defaults follow XXL-JOB where it has one (port 9999, 30 s beats, 3 s admin timeout, 30 days of
/// logs, 5 MiB requests, 90 s idle workers); script (GLUE) jobs are off unless enabled.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// Executor group key; must match the group's appname on the admin.
    pub appname: String,
    /// Admin base addresses, tried in order; may carry a context path
    /// (`http://host:8080/xxl-job-admin`).
    pub admin_addresses: Vec<String>,
    /// Shared access token sent to and expected from the admin; empty disables the check.
    pub access_token: String,
    /// Address the embedded server listens on.
    pub bind: SocketAddr,
    /// Registered address override (`http://10.0.0.5:9999/`), for NAT, Docker or Kubernetes.
    pub address: Option<String>,
    /// IP to put into the registered address instead of the detected one.
    pub ip: Option<String>,
    /// Root folder of run logs, materialised scripts and spooled callbacks.
    pub log_path: PathBuf,
    /// Days of run logs to keep (fewer than 3 disables the clean-up, as in XXL-JOB).
    pub log_retention_days: u32,
    /// Interval between two registrations with the admin.
    pub beat_interval: Duration,
    /// Timeout of one call to an admin.
    pub admin_timeout: Duration,
    /// Whether script (GLUE) jobs may run on this executor.
    pub glue_enabled: bool,
    /// Request shapes of the admin generation spoken to (callback as array or `{callbackList}`).
    pub generation: Generation,
    /// Labels and weight sent with registration (Shardline extension).
    pub meta: ExecutorMeta,
    /// A per-job worker with nothing to do exits after this long.
    pub worker_idle_timeout: Duration,
    /// Largest request body accepted by the embedded server.
    pub max_request_bytes: usize,
    /// Interval between two replays of callbacks spooled while the admin was unreachable.
    pub callback_retry_interval: Duration,
    /// How long a cancelled handler (kill, timeout, cover) may take to return before it is aborted.
    pub kill_grace: Duration,
    /// On shutdown, how long running and queued jobs may take to finish before they are killed.
    pub shutdown_grace: Duration,
    /// How many handlers may run at once on this executor, over all its jobs (`None`: no
    /// limit, as in XXL-JOB). A run beyond the limit waits for a slot; it is running for the
    /// admin meanwhile, and its timeout counts the wait, as the admin's watch does.
    pub max_concurrent_runs: Option<usize>,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            appname: String::new(),
            admin_addresses: vec!["http://127.0.0.1:8080".to_string()],
            access_token: String::new(),
            bind: SocketAddr::from(([0, 0, 0, 0], 9999)),
            address: None,
            ip: None,
            log_path: PathBuf::from("logs/shardline-executor"),
            log_retention_days: 30,
            beat_interval: Duration::from_secs(30),
            admin_timeout: Duration::from_secs(3),
            glue_enabled: false,
            generation: Generation::Classic,
            meta: ExecutorMeta::default(),
            worker_idle_timeout: Duration::from_secs(90),
            max_request_bytes: 5 * 1024 * 1024,
            callback_retry_interval: Duration::from_secs(30),
            kill_grace: Duration::from_secs(2),
            shutdown_grace: Duration::from_secs(5),
            max_concurrent_runs: None,
        }
    }
}

impl ExecutorConfig {
    /// A configuration with the defaults, for `appname` registering with `admin_addresses`.
    pub fn new(appname: impl Into<String>, admin_addresses: Vec<String>) -> Self {
        ExecutorConfig {
            appname: appname.into(),
            admin_addresses,
            ..ExecutorConfig::default()
        }
    }

    /// Reads the configuration from `SHARDLINE_EXECUTOR_*` environment variables, then validates it.
    ///
    /// | variable | meaning | default |
    /// |---|---|---|
    /// | `SHARDLINE_EXECUTOR_APPNAME` | executor group key (required) | – |
    /// | `SHARDLINE_EXECUTOR_ADMIN_ADDRESSES` | comma-separated admin base addresses | `http://127.0.0.1:8080` |
    /// | `SHARDLINE_EXECUTOR_ACCESS_TOKEN` | shared access token | empty (no check) |
    /// | `SHARDLINE_EXECUTOR_BIND` | listen address `ip:port` | `0.0.0.0:9999` |
    /// | `SHARDLINE_EXECUTOR_PORT` | listen port, replaces the port of the bind address | – |
    /// | `SHARDLINE_EXECUTOR_ADDRESS` | registered address override | detected |
    /// | `SHARDLINE_EXECUTOR_IP` | IP used in the registered address | detected |
    /// | `SHARDLINE_EXECUTOR_LOG_PATH` | folder for run logs, scripts, spooled callbacks | `logs/shardline-executor` |
    /// | `SHARDLINE_EXECUTOR_LOG_RETENTION_DAYS` | days of run logs kept | `30` |
    /// | `SHARDLINE_EXECUTOR_BEAT_INTERVAL_SECS` | registration interval | `30` |
    /// | `SHARDLINE_EXECUTOR_ADMIN_TIMEOUT_SECS` | timeout of one admin call | `3` |
    /// | `SHARDLINE_EXECUTOR_GLUE_ENABLED` | allow script jobs (`true`/`false`) | `false` |
    /// | `SHARDLINE_EXECUTOR_GENERATION` | admin generation: `classic` (2.2 – 3.4) or `v35` | `classic` |
    /// | `SHARDLINE_EXECUTOR_LABELS` | comma-separated labels for AFFINITY sharding | none |
    /// | `SHARDLINE_EXECUTOR_WEIGHT` | weight for WEIGHTED sharding (≥ 1) | none |
    /// | `SHARDLINE_EXECUTOR_WORKER_IDLE_TIMEOUT_SECS` | idle worker exit | `90` |
    /// | `SHARDLINE_EXECUTOR_MAX_REQUEST_BYTES` | largest request body | `5242880` |
    /// | `SHARDLINE_EXECUTOR_CALLBACK_RETRY_INTERVAL_SECS` | replay interval of spooled callbacks | `30` |
    /// | `SHARDLINE_EXECUTOR_KILL_GRACE_SECS` | time a cancelled handler gets before abort | `2` |
    /// | `SHARDLINE_EXECUTOR_SHUTDOWN_GRACE_SECS` | time running jobs get on shutdown | `5` |
    /// | `SHARDLINE_EXECUTOR_MAX_CONCURRENT_RUNS` | handlers running at once, over all jobs (≥ 1) | no limit |
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// [`from_env`](Self::from_env) over any key lookup (used by tests and by callers that read
    /// their own configuration source).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| {
            lookup(&format!("SHARDLINE_EXECUTOR_{name}"))
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let mut cfg = ExecutorConfig::default();
        if let Some(v) = get("APPNAME") {
            cfg.appname = v;
        }
        if let Some(v) = get("ADMIN_ADDRESSES") {
            cfg.admin_addresses = split_list(&v);
        }
        if let Some(v) = get("ACCESS_TOKEN") {
            cfg.access_token = v;
        }
        if let Some(v) = get("BIND") {
            cfg.bind = v.parse().map_err(|_| {
                ConfigError::new(format!(
                    "SHARDLINE_EXECUTOR_BIND: {v:?} is not an ip:port address"
                ))
            })?;
        }
        if let Some(v) = get("PORT") {
            cfg.bind.set_port(parse_num("PORT", &v)?);
        }
        cfg.address = get("ADDRESS");
        cfg.ip = get("IP");
        if let Some(v) = get("LOG_PATH") {
            cfg.log_path = PathBuf::from(v);
        }
        if let Some(v) = get("LOG_RETENTION_DAYS") {
            cfg.log_retention_days = parse_num("LOG_RETENTION_DAYS", &v)?;
        }
        if let Some(v) = get("BEAT_INTERVAL_SECS") {
            cfg.beat_interval = secs("BEAT_INTERVAL_SECS", &v)?;
        }
        if let Some(v) = get("ADMIN_TIMEOUT_SECS") {
            cfg.admin_timeout = secs("ADMIN_TIMEOUT_SECS", &v)?;
        }
        if let Some(v) = get("GLUE_ENABLED") {
            cfg.glue_enabled = parse_bool("GLUE_ENABLED", &v)?;
        }
        if let Some(v) = get("GENERATION") {
            cfg.generation = match v.to_ascii_lowercase().as_str() {
                "classic" => Generation::Classic,
                "v35" | "3.5" => Generation::V35,
                _ => {
                    return Err(ConfigError::new(format!(
                        "SHARDLINE_EXECUTOR_GENERATION: {v:?} is neither \"classic\" nor \"v35\""
                    )))
                }
            };
        }
        if let Some(v) = get("LABELS") {
            cfg.meta.labels = split_list(&v);
        }
        if let Some(v) = get("WEIGHT") {
            cfg.meta.weight = Some(parse_num("WEIGHT", &v)?);
        }
        if let Some(v) = get("WORKER_IDLE_TIMEOUT_SECS") {
            cfg.worker_idle_timeout = secs("WORKER_IDLE_TIMEOUT_SECS", &v)?;
        }
        if let Some(v) = get("MAX_REQUEST_BYTES") {
            cfg.max_request_bytes = parse_num("MAX_REQUEST_BYTES", &v)?;
        }
        if let Some(v) = get("CALLBACK_RETRY_INTERVAL_SECS") {
            cfg.callback_retry_interval = secs("CALLBACK_RETRY_INTERVAL_SECS", &v)?;
        }
        if let Some(v) = get("KILL_GRACE_SECS") {
            cfg.kill_grace = secs("KILL_GRACE_SECS", &v)?;
        }
        if let Some(v) = get("SHUTDOWN_GRACE_SECS") {
            cfg.shutdown_grace = secs("SHUTDOWN_GRACE_SECS", &v)?;
        }
        if let Some(v) = get("MAX_CONCURRENT_RUNS") {
            cfg.max_concurrent_runs = Some(parse_num("MAX_CONCURRENT_RUNS", &v)?);
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks that the configuration can work; [`Executor`](crate::Executor) building calls it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let appname = self.appname.trim();
        if appname.is_empty() {
            return Err(ConfigError::new(
                "appname is empty (set SHARDLINE_EXECUTOR_APPNAME or ExecutorConfig::appname)",
            ));
        }
        if appname.chars().count() > MAX_APPNAME_CHARS || appname.chars().any(char::is_whitespace) {
            return Err(ConfigError::new(format!(
                "appname {appname:?} must be at most {MAX_APPNAME_CHARS} characters without spaces"
            )));
        }
        if self.admin_addresses.is_empty() {
            return Err(ConfigError::new("at least one admin address is required"));
        }
        for a in &self.admin_addresses {
            check_http_url("admin address", a)?;
        }
        if let Some(a) = &self.address {
            check_http_url("registered address", a)?;
            // Measured as it is registered (with the trailing '/' the registry adds).
            check_registered_len(&crate::registry::detect_address(Some(a), None, 0))?;
        }
        if let Some(ip) = &self.ip {
            if ip.trim().is_empty() || ip.contains('/') || ip.chars().any(char::is_whitespace) {
                return Err(ConfigError::new(format!("ip {ip:?} is not a host")));
            }
        }
        for (name, d) in [
            ("beat interval", self.beat_interval),
            ("admin timeout", self.admin_timeout),
            ("worker idle timeout", self.worker_idle_timeout),
            ("callback retry interval", self.callback_retry_interval),
        ] {
            if d.is_zero() {
                return Err(ConfigError::new(format!(
                    "{name} must be greater than zero"
                )));
            }
        }
        if self.max_request_bytes < 1024 {
            return Err(ConfigError::new(format!(
                "max request size {} is below 1024 bytes",
                self.max_request_bytes
            )));
        }
        if self.max_concurrent_runs == Some(0) {
            return Err(ConfigError::new(
                "max concurrent runs must be at least 1 (None for no limit)",
            ));
        }
        if self.meta.weight == Some(0) {
            return Err(ConfigError::new("weight must be at least 1"));
        }
        if self.meta.labels.iter().any(|l| l.trim().is_empty()) {
            return Err(ConfigError::new("labels must not be blank"));
        }
        Ok(())
    }
}

fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, ConfigError> {
    v.parse().map_err(|_| {
        ConfigError::new(format!(
            "SHARDLINE_EXECUTOR_{name}: {v:?} is not a valid number"
        ))
    })
}

fn secs(name: &str, v: &str) -> Result<Duration, ConfigError> {
    parse_num::<u64>(name, v).map(Duration::from_secs)
}

fn parse_bool(name: &str, v: &str) -> Result<bool, ConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(ConfigError::new(format!(
            "SHARDLINE_EXECUTOR_{name}: {v:?} is not true or false"
        ))),
    }
}

/// The admin refuses a registration whose address is longer than a run's record of it holds, so
/// an executor with such an address fails at start rather than having every beat refused.
pub(crate) fn check_registered_len(address: &str) -> Result<(), ConfigError> {
    let max = crate::protocol::MAX_ADDRESS_CHARS;
    if address.chars().count() > max {
        return Err(ConfigError::new(format!(
            "registered address must be at most {max} characters, got {}",
            address.chars().count()
        )));
    }
    Ok(())
}

/// The admin refuses a registered address that breaks this rule, so a bad one fails here, at
/// start, and so does an admin address no request could be sent to.
fn check_http_url(what: &str, v: &str) -> Result<(), ConfigError> {
    if crate::protocol::is_http_address(v) {
        Ok(())
    } else {
        Err(ConfigError::new(format!(
            "{what} {v:?} must be an http:// or https:// URL with a host"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (format!("SHARDLINE_EXECUTOR_{k}"), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn env_defaults_and_overrides() {
        let cfg = ExecutorConfig::from_lookup(lookup(&[
            ("APPNAME", "billing"),
            (
                "ADMIN_ADDRESSES",
                "http://a:8080/xxl-job-admin, http://b:8080",
            ),
            ("PORT", "0"),
            ("GLUE_ENABLED", "true"),
            ("GENERATION", "v35"),
            ("LABELS", "shanghai,ssd"),
            ("WEIGHT", "3"),
            ("MAX_CONCURRENT_RUNS", "4"),
        ]))
        .unwrap();
        assert_eq!(cfg.appname, "billing");
        assert_eq!(
            cfg.admin_addresses,
            vec!["http://a:8080/xxl-job-admin", "http://b:8080"]
        );
        assert_eq!(cfg.bind, "0.0.0.0:0".parse().unwrap());
        assert!(cfg.glue_enabled);
        assert_eq!(cfg.generation, Generation::V35);
        assert_eq!(cfg.meta.labels, vec!["shanghai", "ssd"]);
        assert_eq!(cfg.meta.weight, Some(3));
        assert_eq!(cfg.beat_interval, Duration::from_secs(30));
        assert_eq!(cfg.max_request_bytes, 5 * 1024 * 1024);
        assert_eq!(cfg.max_concurrent_runs, Some(4));
        let plain = ExecutorConfig::from_lookup(lookup(&[("APPNAME", "a")])).unwrap();
        assert_eq!(plain.max_concurrent_runs, None, "no limit by default");
    }

    #[test]
    fn env_errors_are_clear() {
        let e = ExecutorConfig::from_lookup(lookup(&[])).unwrap_err();
        assert!(e.to_string().contains("appname is empty"), "{e}");
        let e =
            ExecutorConfig::from_lookup(lookup(&[("APPNAME", "a"), ("PORT", "x")])).unwrap_err();
        assert!(e.to_string().contains("SHARDLINE_EXECUTOR_PORT"), "{e}");
        let e =
            ExecutorConfig::from_lookup(lookup(&[("APPNAME", "a"), ("BIND", "nope")])).unwrap_err();
        assert!(e.to_string().contains("SHARDLINE_EXECUTOR_BIND"), "{e}");
        let e = ExecutorConfig::from_lookup(lookup(&[
            ("APPNAME", "a"),
            ("ADMIN_ADDRESSES", "admin:8080"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("http://"), "{e}");
        let e =
            ExecutorConfig::from_lookup(lookup(&[("APPNAME", "a"), ("GLUE_ENABLED", "perhaps")]))
                .unwrap_err();
        assert!(e.to_string().contains("GLUE_ENABLED"), "{e}");
        for bad in ["0", "-1", "many"] {
            let e = ExecutorConfig::from_lookup(lookup(&[
                ("APPNAME", "a"),
                ("MAX_CONCURRENT_RUNS", bad),
            ]))
            .unwrap_err();
            assert!(
                e.to_string().contains("concurrent runs")
                    || e.to_string().contains("MAX_CONCURRENT_RUNS"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn validate_rejects_unusable_values() {
        let ok = ExecutorConfig::new("app", vec!["http://127.0.0.1:8080".into()]);
        assert!(ok.validate().is_ok());
        let mut c = ok.clone();
        c.appname = "has space".into();
        assert!(c.validate().is_err());
        // The limit is the admin's column's, in characters: 64 two-byte ones fit, 65 do not.
        let mut c = ok.clone();
        c.appname = "é".repeat(64);
        assert!(c.validate().is_ok());
        c.appname = "é".repeat(65);
        assert!(c
            .validate()
            .unwrap_err()
            .0
            .contains("at most 64 characters"));
        let mut c = ok.clone();
        c.admin_addresses.clear();
        assert!(c.validate().is_err());
        let mut c = ok.clone();
        c.beat_interval = Duration::ZERO;
        assert!(c.validate().unwrap_err().0.contains("beat interval"));
        let mut c = ok.clone();
        c.meta.weight = Some(0);
        assert!(c.validate().is_err());
        let mut c = ok.clone();
        c.address = Some("10.0.0.5:9999".into());
        assert!(c.validate().unwrap_err().0.contains("registered address"));
        // One the admin's runs could not record, counted as registered: 255 characters with the
        // '/' the registry adds fit; 255 without it become 256.
        let mut c = ok;
        c.address = Some(format!("http://{}/", "a".repeat(300)));
        assert!(c
            .validate()
            .unwrap_err()
            .0
            .contains("at most 255 characters"));
        c.address = Some(format!("http://{}/", "a".repeat(247)));
        assert!(c.validate().is_ok());
        c.address = Some(format!("http://{}", "a".repeat(248)));
        assert!(c
            .validate()
            .unwrap_err()
            .0
            .contains("at most 255 characters, got 256"));
    }
}
