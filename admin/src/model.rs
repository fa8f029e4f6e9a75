//! Domain types shared by the store, the API and the scheduler: rows as they are stored, and the
//! closed vocabularies (schedule type, run state…) with their wire spellings.

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, the unit of every stored time.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Declares a closed vocabulary stored and sent as SCREAMING or snake strings.
macro_rules! vocabulary {
    ($(#[$m:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            pub fn parse(s: &str) -> Result<Self, crate::refusal::Refusal> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(crate::refusal::Refusal::one_of(other, &[$($text),+])),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                $name::parse(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

vocabulary!(
    /// When a job fires by itself.
    ScheduleType {
        Cron => "CRON",
        FixRate => "FIX_RATE",
        FixDelay => "FIX_DELAY",
        None => "NONE",
    }
);

vocabulary!(
    /// What happens to a fire that is more than the misfire threshold late.
    MisfireStrategy {
        DoNothing => "DO_NOTHING",
        FireOnceNow => "FIRE_ONCE_NOW",
    }
);

vocabulary!(
    /// How a fire is split across executors.
    ShardingMode {
        None => "NONE",
        Broadcast => "BROADCAST",
        Items => "ITEMS",
    }
);

vocabulary!(
    /// Whether a group's executors register themselves or are listed by hand.
    AddressType {
        Auto => "AUTO",
        Manual => "MANUAL",
    }
);

vocabulary!(
    /// Why a fire happened.
    TriggerType {
        Cron => "CRON",
        FixRate => "FIX_RATE",
        FixDelay => "FIX_DELAY",
        Manual => "MANUAL",
        Api => "API",
        Retry => "RETRY",
        Misfire => "MISFIRE",
        Parent => "PARENT",
    }
);

vocabulary!(
    /// The state of one run (one shard or item on one executor, one attempt).
    RunState {
        Triggering => "triggering",
        Running => "running",
        Succeeded => "succeeded",
        Failed => "failed",
        TimedOut => "timed_out",
        Killed => "killed",
        Lost => "lost",
    }
);

impl RunState {
    pub fn is_final(self) -> bool {
        !matches!(self, RunState::Triggering | RunState::Running)
    }

    /// The final state an executor's `handleCode` means. `0` is not a result (XXL-JOB uses it for
    /// "still running"), so it maps to `None`.
    pub fn from_handle_code(code: i32, msg: &str) -> Option<RunState> {
        match code {
            0 => None,
            200 => Some(RunState::Succeeded),
            502 => Some(RunState::TimedOut),
            _ if msg.contains("killed") => Some(RunState::Killed),
            _ => Some(RunState::Failed),
        }
    }
}

vocabulary!(
    /// The state of a fire, derived from its runs.
    FireState {
        Scheduled => "scheduled",
        Skipped => "skipped",
        Triggering => "triggering",
        Running => "running",
        Succeeded => "succeeded",
        Failed => "failed",
    }
);

vocabulary!(
    /// A user's role: admins do everything, users operate the groups they were given.
    Role {
        Admin => "ADMIN",
        User => "USER",
    }
);

/// An executor group (XXL-JOB's 执行器).
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct Group {
    pub id: i64,
    pub appname: String,
    pub title: String,
    pub address_type: String,
    pub addresses: String,
    #[serde(skip)]
    pub access_token: String,
    pub generation: String,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Group {
    /// Manual addresses as a sorted list.
    pub fn manual_addresses(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .addresses
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

/// A registered executor instance as last seen.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct RegistryEntry {
    pub id: i64,
    pub appname: String,
    pub address: String,
    pub meta: String,
    pub first_seen: i64,
    pub updated_at: i64,
}

/// A job (任务) as stored.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct Job {
    pub id: i64,
    pub group_id: i64,
    pub name: String,
    pub description: String,
    pub schedule_type: String,
    pub schedule_conf: String,
    pub timezone: String,
    pub handler: String,
    pub params: String,
    pub route_strategy: String,
    pub block_strategy: String,
    pub timeout_s: i64,
    pub retry_count: i64,
    pub retry_interval_s: i64,
    pub retry_backoff: i64,
    pub misfire_strategy: String,
    pub sharding_mode: String,
    pub sharding_total: i64,
    pub sharding_strategy: String,
    pub item_params: String,
    pub max_node: i64,
    pub resume_checkpoint: i64,
    pub child_job_ids: String,
    pub glue_type: String,
    pub glue_source: String,
    pub glue_updated_at: i64,
    pub alarm_targets: String,
    pub enabled: i64,
    pub next_fire_at: Option<i64>,
    pub last_fire_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Default for Job {
    /// A job as the API creates it when a field is not given: no schedule, FIRST route, serial
    /// execution, no sharding, a BEAN handler still to be named.
    fn default() -> Self {
        Job {
            id: 0,
            group_id: 0,
            name: String::new(),
            description: String::new(),
            schedule_type: ScheduleType::None.as_str().into(),
            schedule_conf: String::new(),
            timezone: String::new(),
            handler: String::new(),
            params: String::new(),
            route_strategy: "FIRST".into(),
            block_strategy: "SERIAL_EXECUTION".into(),
            timeout_s: 0,
            retry_count: 0,
            retry_interval_s: 0,
            retry_backoff: 1,
            misfire_strategy: MisfireStrategy::DoNothing.as_str().into(),
            sharding_mode: ShardingMode::None.as_str().into(),
            sharding_total: 1,
            sharding_strategy: "AVERAGE".into(),
            item_params: String::new(),
            max_node: 0,
            resume_checkpoint: 0,
            child_job_ids: String::new(),
            glue_type: "BEAN".into(),
            glue_source: String::new(),
            glue_updated_at: 0,
            alarm_targets: String::new(),
            enabled: 0,
            next_fire_at: None,
            last_fire_at: None,
            created_at: 0,
            updated_at: 0,
        }
    }
}

impl Job {
    pub fn child_ids(&self) -> Vec<i64> {
        self.child_job_ids
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect()
    }
}

/// One trigger event of a job.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct Fire {
    pub id: i64,
    pub job_id: i64,
    pub group_id: i64,
    pub trigger_type: String,
    pub planned_at: i64,
    pub sched_key: Option<String>,
    pub params: String,
    pub state: String,
    pub total_items: i64,
    pub message: String,
    /// The message as a code and its values, when the admin wrote it (`crate::note`).
    #[serde(serialize_with = "crate::note::serialize_stored")]
    pub message_note: Option<String>,
    pub owner: String,
    /// The owner's lease on a `scheduled` fire (epoch ms); 0 once the fire left `scheduled`.
    pub claim_expires_at: i64,
    pub parent_fire_id: Option<i64>,
    pub children_done: i64,
    pub alarm_state: i64,
    pub created_at: i64,
    pub dispatched_at: Option<i64>,
    pub finished_at: Option<i64>,
}

/// One run: a shard or item of a fire on one executor (one attempt). Its id is the protocol's logId.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct Run {
    pub id: i64,
    pub fire_id: i64,
    pub job_id: i64,
    pub group_id: i64,
    pub shard_index: i64,
    pub shard_total: i64,
    pub attempt: i64,
    /// Retries of the item before this run (failovers are attempts, not retries).
    pub retries: i64,
    pub superseded: i64,
    pub executor_address: String,
    pub handler: String,
    pub params: String,
    pub item_param: Option<String>,
    pub state: String,
    pub trigger_code: i64,
    pub trigger_msg: String,
    /// The trigger message as a code and its values, when the admin wrote it (`crate::note`).
    #[serde(serialize_with = "crate::note::serialize_stored")]
    pub trigger_note: Option<String>,
    pub handle_code: i64,
    pub handle_msg: String,
    /// The handle message as a code and its values, when the admin wrote it (`crate::note`).
    #[serde(serialize_with = "crate::note::serialize_stored")]
    pub handle_note: Option<String>,
    pub log_date_time: i64,
    pub created_at: i64,
    pub dispatched_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub retry_at: Option<i64>,
}

/// A console / API user.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct User {
    pub id: i64,
    pub username: String,
    #[serde(skip)]
    pub password_hash: String,
    pub role: String,
    pub group_ids: String,
    pub must_change_password: i64,
    pub lang: String,
    pub created_at: i64,
    pub updated_at: i64,
}

impl User {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin.as_str()
    }

    pub fn group_list(&self) -> Vec<i64> {
        self.group_ids
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect()
    }

    /// Whether this user may see and operate the jobs of a group.
    pub fn can_access_group(&self, group_id: i64) -> bool {
        self.is_admin() || self.group_list().contains(&group_id)
    }
}

/// An API token (the secret itself is never stored).
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct ApiToken {
    pub id: i64,
    pub user_id: i64,
    pub name: String,
    #[serde(skip)]
    pub token_hash: String,
    pub prefix: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// A saved checkpoint of one item of a job.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct Checkpoint {
    pub job_id: i64,
    pub item: i64,
    pub value: String,
    pub run_id: i64,
    pub updated_at: i64,
}

/// One request that could change something, as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    /// The caller's user (requests whose caller was not identified are not kept).
    pub user_id: i64,
    pub username: String,
    /// 1 when made in the console, 0 with an API token.
    pub console: i64,
    pub method: String,
    pub path: String,
    pub status: i64,
}

impl AuditEntry {
    /// An entry for a request of `user` answered now with `status`.
    pub fn now(user: &User, console: bool, method: &str, path: &str, status: u16) -> AuditEntry {
        AuditEntry {
            id: 0,
            at: now_ms(),
            user_id: user.id,
            username: user.username.clone(),
            console: i64::from(console),
            method: method.to_string(),
            path: path.to_string(),
            status: i64::from(status),
        }
    }
}

/// A row of the daily report (dashboard chart).
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct DailyReport {
    pub day: String,
    pub succeeded: i64,
    pub failed: i64,
    pub running: i64,
    pub updated_at: i64,
}

/// An admin process, as it announces itself.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct AdminNode {
    pub id: String,
    pub address: String,
    pub started_at: i64,
    pub heartbeat_at: i64,
}

impl AdminNode {
    /// A node silent for longer is considered gone: three of its 5 s beats missed.
    pub const DEAD_AFTER_MS: i64 = 15_000;

    /// Whether the node has beaten within `DEAD_AFTER_MS` of `now` (ms).
    pub fn is_live(&self, now: i64) -> bool {
        now - self.heartbeat_at < Self::DEAD_AFTER_MS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabulary_round_trip() {
        for s in ScheduleType::ALL {
            assert_eq!(ScheduleType::parse(s.as_str()), Ok(*s));
        }
        let err = ScheduleType::parse("HOURLY").unwrap_err();
        assert!(
            err.to_string().contains("CRON, FIX_RATE, FIX_DELAY, NONE"),
            "{err}"
        );
        assert_eq!(
            serde_json::to_string(&RunState::TimedOut).unwrap(),
            "\"timed_out\""
        );
    }

    #[test]
    fn handle_codes() {
        assert_eq!(RunState::from_handle_code(0, ""), None);
        assert_eq!(
            RunState::from_handle_code(200, ""),
            Some(RunState::Succeeded)
        );
        assert_eq!(
            RunState::from_handle_code(502, ""),
            Some(RunState::TimedOut)
        );
        assert_eq!(
            RunState::from_handle_code(409, "conflict"),
            Some(RunState::Failed)
        );
        assert_eq!(
            RunState::from_handle_code(500, "scheduling center kill job. [job running, killed]"),
            Some(RunState::Killed)
        );
    }
}
