//! The XXL-JOB executor protocol (releases 2.2 – 3.4, plus the 3.5 spellings), as serde types.
//!
//! This module is the single copy of the wire format: the SDK serves and sends these types and the
//! admin (`shardline-admin`) uses the very same ones. The rules, from the reference:
//!
//! * Be liberal in what we accept: Gson omits null fields, so every string may be missing (or
//!   `null`); `logDateTim` (≤ 3.4) and `logDateTime` (3.5) are both read; callbacks arrive as an array
//!   or as `{"callbackList": [...]}`; the envelope payload is read from `data` (3.3+) or `content`
//!   (≤ 3.2).
//! * Be conservative in what we send: the envelope carries the payload under both `data` and
//!   `content`; requests carry every field (one third-party executor answers 400 otherwise) and both
//!   date spellings.
//! * Shardline extensions are extra, optional JSON fields (prefixed `shardline`) that stock peers ignore.

use serde::de::{DeserializeOwned, Deserializer};
use serde::ser::{SerializeMap, SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};

/// Header carrying the shared access token (compared in constant time, value only).
pub const ACCESS_TOKEN_HEADER: &str = "XXL-JOB-ACCESS-TOKEN";
/// Header added by XXL-JOB 3.5 next to the token; accepted, never required.
pub const APPNAME_HEADER: &str = "XXL-JOB-APPNAME";

/// `handleCode` / envelope code for success.
pub const CODE_SUCCESS: i32 = 200;
/// `handleCode` / envelope code for failure.
pub const CODE_FAIL: i32 = 500;
/// `handleCode` for a run stopped by its timeout.
pub const CODE_TIMEOUT: i32 = 502;

/// `registryGroup` value used by every executor.
pub const REGISTRY_GROUP_EXECUTOR: &str = "EXECUTOR";

/// Deserializes a string that may be missing or `null` into `String` (empty when absent).
fn nullable_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// Deserializes an integer that may be `null` (some peers send it) into its default.
fn nullable_num<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

fn default_one() -> i32 {
    1
}

fn default_from_line() -> i32 {
    1
}

/// The response envelope: `ReturnT` (≤ 3.2, payload in `content`) and `Response` (3.3+, payload in
/// `data`) at once. Always sent with HTTP 200; errors live only in `code`.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope<T> {
    pub code: i32,
    pub msg: Option<String>,
    pub payload: Option<T>,
}

impl<T> Envelope<T> {
    pub fn success(payload: Option<T>) -> Self {
        Envelope {
            code: CODE_SUCCESS,
            msg: None,
            payload,
        }
    }

    pub fn fail(msg: impl Into<String>) -> Self {
        Envelope {
            code: CODE_FAIL,
            msg: Some(msg.into()),
            payload: None,
        }
    }

    pub fn is_success(&self) -> bool {
        self.code == CODE_SUCCESS
    }
}

impl Envelope<()> {
    /// A success with no payload (`data` and `content` both `null`, which every peer accepts).
    pub fn ok() -> Self {
        Envelope::success(None)
    }
}

impl<T: Serialize> Serialize for Envelope<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Envelope", 4)?;
        st.serialize_field("code", &self.code)?;
        st.serialize_field("msg", &self.msg)?;
        st.serialize_field("data", &self.payload)?;
        st.serialize_field("content", &self.payload)?;
        st.end()
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Envelope<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            #[serde(default)]
            code: i32,
            #[serde(default)]
            msg: Option<String>,
            #[serde(default)]
            data: Option<serde_json::Value>,
            #[serde(default)]
            content: Option<serde_json::Value>,
        }
        let raw = Raw::deserialize(d)?;
        // `data` wins when both are present; a null `data` falls back to `content`.
        let value = match (raw.data, raw.content) {
            (Some(v), _) if !v.is_null() => Some(v),
            (_, Some(v)) if !v.is_null() => Some(v),
            _ => None,
        };
        let payload = match value {
            Some(v) => Some(serde_json::from_value(v).map_err(serde::de::Error::custom)?),
            None => None,
        };
        Ok(Envelope {
            code: raw.code,
            msg: raw.msg,
            payload,
        })
    }
}

/// `TriggerParam` / `TriggerRequest`: the body of `POST /run` (and `/trigger`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerRequest {
    pub job_id: i64,
    #[serde(default, deserialize_with = "nullable_string")]
    pub executor_handler: String,
    #[serde(default, deserialize_with = "nullable_string")]
    pub executor_params: String,
    #[serde(default, deserialize_with = "nullable_string")]
    pub executor_block_strategy: String,
    #[serde(default, deserialize_with = "nullable_num")]
    pub executor_timeout: i32,
    pub log_id: i64,
    #[serde(default, deserialize_with = "nullable_num")]
    pub log_date_time: i64,
    #[serde(default, deserialize_with = "nullable_string")]
    pub glue_type: String,
    #[serde(default, deserialize_with = "nullable_string")]
    pub glue_source: String,
    #[serde(default, deserialize_with = "nullable_num")]
    pub glue_updatetime: i64,
    #[serde(default, deserialize_with = "nullable_num")]
    pub broadcast_index: i32,
    #[serde(default = "default_one")]
    pub broadcast_total: i32,
    /// Extension: the last checkpoint saved for this (job, item), handed to a retry, a failover run
    /// or (if the job asks) the next fire.
    #[serde(default, rename = "shardlineCheckpoint")]
    pub checkpoint: Option<String>,
    /// Extension: stable key of (job, fire, item) for deduplicating side effects.
    #[serde(default, rename = "shardlineIdempotencyKey")]
    pub idempotency_key: Option<String>,
    /// Extension: the item parameter of this shard item (`0=a,1=b` → `a` for item 0).
    #[serde(default, rename = "shardlineItemParam")]
    pub item_param: Option<String>,
}

impl Serialize for TriggerRequest {
    // Hand-written so that every one of the eleven stock fields is always present (one third-party
    // executor answers 400 otherwise) while the extensions appear only when set.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("jobId", &self.job_id)?;
        m.serialize_entry("executorHandler", &self.executor_handler)?;
        m.serialize_entry("executorParams", &self.executor_params)?;
        m.serialize_entry("executorBlockStrategy", &self.executor_block_strategy)?;
        m.serialize_entry("executorTimeout", &self.executor_timeout)?;
        m.serialize_entry("logId", &self.log_id)?;
        m.serialize_entry("logDateTime", &self.log_date_time)?;
        m.serialize_entry("glueType", &self.glue_type)?;
        m.serialize_entry("glueSource", &self.glue_source)?;
        m.serialize_entry("glueUpdatetime", &self.glue_updatetime)?;
        m.serialize_entry("broadcastIndex", &self.broadcast_index)?;
        m.serialize_entry("broadcastTotal", &self.broadcast_total)?;
        if let Some(c) = &self.checkpoint {
            m.serialize_entry("shardlineCheckpoint", c)?;
        }
        if let Some(k) = &self.idempotency_key {
            m.serialize_entry("shardlineIdempotencyKey", k)?;
        }
        if let Some(p) = &self.item_param {
            m.serialize_entry("shardlineItemParam", p)?;
        }
        m.end()
    }
}

impl TriggerRequest {
    /// A BEAN trigger with the defaults XXL-JOB uses for the optional fields.
    pub fn bean(job_id: i64, log_id: i64, handler: impl Into<String>) -> Self {
        TriggerRequest {
            job_id,
            executor_handler: handler.into(),
            executor_params: String::new(),
            executor_block_strategy: BlockStrategy::SerialExecution.as_str().to_string(),
            executor_timeout: 0,
            log_id,
            log_date_time: 0,
            glue_type: GlueType::Bean.as_str().to_string(),
            glue_source: String::new(),
            glue_updatetime: 0,
            broadcast_index: 0,
            broadcast_total: 1,
            checkpoint: None,
            idempotency_key: None,
            item_param: None,
        }
    }
}

/// Body of `/idleBeat` and `/kill`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobIdRequest {
    pub job_id: i64,
}

/// `/idleBeat` request.
pub type IdleBeatRequest = JobIdRequest;
/// `/kill` request.
pub type KillRequest = JobIdRequest;

/// `LogParam` / `LogRequest`: body of `POST /log`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "LogRequestWire")]
pub struct LogRequest {
    pub log_id: i64,
    /// `logDateTim` up to 3.4, `logDateTime` in 3.5.
    pub log_date_time: i64,
    pub from_line_num: i32,
}

/// The two date spellings are separate fields here: we send both at once, and serde's `alias`
/// would refuse such a body as a duplicate field.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogRequestWire {
    log_id: i64,
    #[serde(default, rename = "logDateTim")]
    log_date_tim: Option<i64>,
    #[serde(default)]
    log_date_time: Option<i64>,
    #[serde(default = "default_from_line")]
    from_line_num: i32,
}

impl From<LogRequestWire> for LogRequest {
    fn from(w: LogRequestWire) -> Self {
        LogRequest {
            log_id: w.log_id,
            log_date_time: w.log_date_time.or(w.log_date_tim).unwrap_or_default(),
            from_line_num: w.from_line_num,
        }
    }
}

impl Serialize for LogRequest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("LogRequest", 4)?;
        st.serialize_field("logId", &self.log_id)?;
        st.serialize_field("logDateTim", &self.log_date_time)?;
        st.serialize_field("logDateTime", &self.log_date_time)?;
        st.serialize_field("fromLineNum", &self.from_line_num)?;
        st.end()
    }
}

/// `LogResult` / `LogData`: payload of a `/log` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogResult {
    #[serde(default, deserialize_with = "nullable_num")]
    pub from_line_num: i32,
    #[serde(default, deserialize_with = "nullable_num")]
    pub to_line_num: i32,
    #[serde(default, deserialize_with = "nullable_string")]
    pub log_content: String,
    /// Gson keeps the `is` prefix (`isEnd`); Jackson drops it (`end`).
    #[serde(
        default,
        rename = "isEnd",
        alias = "end",
        deserialize_with = "nullable_num"
    )]
    pub is_end: bool,
}

/// `RegistryParam` / `RegistryRequest`: body of `/api/registry` and `/api/registryRemove`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistryRequest {
    #[serde(default, deserialize_with = "nullable_string")]
    pub registry_group: String,
    #[serde(default, deserialize_with = "nullable_string")]
    pub registry_key: String,
    #[serde(default, deserialize_with = "nullable_string")]
    pub registry_value: String,
    /// Extension: executor metadata used by the admin's sharding strategies (labels for AFFINITY,
    /// weight for WEIGHTED). Stock admins ignore it.
    #[serde(
        default,
        rename = "shardlineMeta",
        skip_serializing_if = "Option::is_none"
    )]
    pub meta: Option<ExecutorMeta>,
}

impl RegistryRequest {
    pub fn executor(appname: impl Into<String>, address: impl Into<String>) -> Self {
        RegistryRequest {
            registry_group: REGISTRY_GROUP_EXECUTOR.to_string(),
            registry_key: appname.into(),
            registry_value: address.into(),
            meta: None,
        }
    }

    /// XXL-JOB answers "Illegal Argument." when any of the three fields is blank.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.registry_group.trim().is_empty()
            || self.registry_key.trim().is_empty()
            || self.registry_value.trim().is_empty()
        {
            return Err("Illegal Argument.");
        }
        Ok(())
    }
}

/// Executor metadata sent with registration (a Shardline extension).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecutorMeta {
    /// Relative capacity for the WEIGHTED strategy (≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Labels matched against item parameters by the AFFINITY strategy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// The executor takes many runs in one request at [`RUN_BATCH_ROUTE`]. Set by the SDK, which
    /// always serves that route; an executor that does not say so gets one `/run` per run.
    #[serde(default, rename = "runBatch", skip_serializing_if = "is_false")]
    pub run_batch: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Extension route of an executor that registered with [`ExecutorMeta::run_batch`]: the body is a
/// JSON array of [`TriggerRequest`]s, the answer an envelope whose payload is one envelope per
/// request, in order, each what `/run` would have answered for it. A burst of runs for one
/// executor then costs a few requests instead of one each.
pub const RUN_BATCH_ROUTE: &str = "shardline/run";

/// `HandleCallbackParam` / `CallbackRequest` / `CallbackData`: one result reported by an executor.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "CallbackItemWire")]
pub struct CallbackItem {
    pub log_id: i64,
    /// `logDateTim` up to 3.4, `logDateTime` in 3.5. Only ever used to find the log folder.
    pub log_date_time: i64,
    pub handle_code: i32,
    pub handle_msg: String,
}

/// Both date spellings as separate fields, since we send both at once (see [`LogRequestWire`]).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallbackItemWire {
    log_id: i64,
    #[serde(default, rename = "logDateTim")]
    log_date_tim: Option<i64>,
    #[serde(default)]
    log_date_time: Option<i64>,
    #[serde(default, deserialize_with = "nullable_num")]
    handle_code: i32,
    #[serde(default, deserialize_with = "nullable_string")]
    handle_msg: String,
}

impl From<CallbackItemWire> for CallbackItem {
    fn from(w: CallbackItemWire) -> Self {
        CallbackItem {
            log_id: w.log_id,
            log_date_time: w.log_date_time.or(w.log_date_tim).unwrap_or_default(),
            handle_code: w.handle_code,
            handle_msg: w.handle_msg,
        }
    }
}

impl Serialize for CallbackItem {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("CallbackItem", 5)?;
        st.serialize_field("logId", &self.log_id)?;
        st.serialize_field("logDateTim", &self.log_date_time)?;
        st.serialize_field("logDateTime", &self.log_date_time)?;
        st.serialize_field("handleCode", &self.handle_code)?;
        st.serialize_field("handleMsg", &self.handle_msg)?;
        st.end()
    }
}

/// Body of `/api/callback`: an array (≤ 3.4) or `{"callbackList": [...]}` (3.5).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum CallbackBody {
    List(Vec<CallbackItem>),
    Wrapped {
        #[serde(rename = "callbackList", default)]
        callback_list: Vec<CallbackItem>,
    },
}

impl CallbackBody {
    pub fn into_items(self) -> Vec<CallbackItem> {
        match self {
            CallbackBody::List(v) => v,
            CallbackBody::Wrapped { callback_list } => callback_list,
        }
    }
}

impl Serialize for CallbackBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CallbackBody::List(v) => v.serialize(s),
            CallbackBody::Wrapped { callback_list } => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("callbackList", callback_list)?;
                m.end()
            }
        }
    }
}

/// Extension call `POST {admin}/api/shardline/checkpoint`: a handler saved progress for its item.
/// Stock admins never receive it (the SDK only sends it when the trigger carried Shardline fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointRequest {
    pub log_id: i64,
    pub value: String,
}

/// Largest checkpoint value accepted, in bytes.
pub const MAX_CHECKPOINT_BYTES: usize = 64 * 1024;

/// Which request shapes to use when talking to an admin whose generation matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Generation {
    /// XXL-JOB 2.2 – 3.4: callback as a JSON array, trigger route `/run`.
    #[default]
    Classic,
    /// XXL-JOB 3.5: callback as `{callbackList}`, trigger route `/trigger`.
    V35,
}

impl Generation {
    pub fn callback_body(self, items: Vec<CallbackItem>) -> CallbackBody {
        match self {
            Generation::Classic => CallbackBody::List(items),
            Generation::V35 => CallbackBody::Wrapped {
                callback_list: items,
            },
        }
    }

    pub fn trigger_route(self) -> &'static str {
        match self {
            Generation::Classic => "run",
            Generation::V35 => "trigger",
        }
    }
}

/// What to do with a trigger that arrives while the job is running on this executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BlockStrategy {
    SerialExecution,
    DiscardLater,
    CoverEarly,
}

impl BlockStrategy {
    pub const ALL: [BlockStrategy; 3] = [
        BlockStrategy::SerialExecution,
        BlockStrategy::DiscardLater,
        BlockStrategy::CoverEarly,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BlockStrategy::SerialExecution => "SERIAL_EXECUTION",
            BlockStrategy::DiscardLater => "DISCARD_LATER",
            BlockStrategy::CoverEarly => "COVER_EARLY",
        }
    }

    /// Strict parse, for configuration that a person typed.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.as_str() == s)
    }

    /// Lenient parse of the wire field: XXL-JOB treats any unknown value as serial execution.
    pub fn from_wire(s: &str) -> Self {
        Self::parse(s).unwrap_or(BlockStrategy::SerialExecution)
    }
}

/// How the handler of a trigger is found: a registered (BEAN) handler or a script (GLUE) source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum GlueType {
    Bean,
    GlueGroovy,
    GlueShell,
    GluePython,
    GluePython2,
    GlueNodejs,
    GluePowershell,
    GluePhp,
}

impl GlueType {
    pub const ALL: [GlueType; 8] = [
        GlueType::Bean,
        GlueType::GlueGroovy,
        GlueType::GlueShell,
        GlueType::GluePython,
        GlueType::GluePython2,
        GlueType::GlueNodejs,
        GlueType::GluePowershell,
        GlueType::GluePhp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GlueType::Bean => "BEAN",
            GlueType::GlueGroovy => "GLUE_GROOVY",
            GlueType::GlueShell => "GLUE_SHELL",
            GlueType::GluePython => "GLUE_PYTHON",
            GlueType::GluePython2 => "GLUE_PYTHON2",
            GlueType::GlueNodejs => "GLUE_NODEJS",
            GlueType::GluePowershell => "GLUE_POWERSHELL",
            GlueType::GluePhp => "GLUE_PHP",
        }
    }

    /// Parses the wire value; an empty value means BEAN (what a missing field meant in XXL-JOB).
    pub fn parse(s: &str) -> Option<Self> {
        if s.is_empty() {
            return Some(GlueType::Bean);
        }
        Self::ALL.into_iter().find(|g| g.as_str() == s)
    }

    /// The interpreter and file suffix of a script type; `None` for BEAN and GROOVY.
    pub fn script(self) -> Option<(&'static str, &'static str)> {
        match self {
            GlueType::GlueShell => Some(("bash", ".sh")),
            GlueType::GluePython => Some(("python3", ".py")),
            GlueType::GluePython2 => Some(("python", ".py")),
            GlueType::GlueNodejs => Some(("node", ".js")),
            GlueType::GluePowershell => Some(("pwsh", ".ps1")),
            GlueType::GluePhp => Some(("php", ".php")),
            GlueType::Bean | GlueType::GlueGroovy => None,
        }
    }
}

/// How a call between admin and executor that got no answer is described: `head` (the error, or
/// what it means, such as "timed out") and then every source of `e` (an HTTP client's own
/// message hides the cause, "connection refused" among them, which readers of the text look for).
pub fn with_sources(head: impl Into<String>, e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = head.into();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Compares an access token in constant time. An empty expected token disables the check, as in
/// XXL-JOB (callers that require a token refuse an empty one at configuration time).
pub fn token_matches(expected: &str, presented: Option<&str>) -> bool {
    use subtle::ConstantTimeEq;
    if expected.is_empty() {
        return true;
    }
    let presented = presented.unwrap_or("");
    // `ct_eq` on slices of different length returns false without leaking where they differ.
    bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
}

/// Most characters of an appname (an executor group's name, a registration's `registryKey`): the
/// column that stores it is `VARCHAR(64)`, as XXL-JOB's `xxl_job_group.app_name`. The admin refuses
/// a longer one where it comes in (a group's save, a registration), and the SDK at start.
pub const MAX_APPNAME_CHARS: usize = 64;

/// Most characters of an executor's address: a run records the address it was sent to in a
/// column of this size, so the admin refuses a longer one where it comes in (a registration, a
/// manual group's list, a trigger's chosen executors), and the SDK at start.
pub const MAX_ADDRESS_CHARS: usize = 255;

/// Whether `a` can be an executor's or an admin's address: an absolute http(s) URL with a host,
/// without the comma that separates a list of addresses. The SDK checks its configuration by it,
/// and the admin the addresses that come in (a registration, a manual group's list, a trigger's
/// chosen executors), so that a bad one is refused with its reason where it is given instead of
/// failing every request sent to it.
pub fn is_http_address(a: &str) -> bool {
    let a = a.trim();
    !a.contains(',')
        && a.parse::<axum::http::Uri>().is_ok_and(|u| {
            matches!(u.scheme_str(), Some("http" | "https"))
                && u.host().is_some_and(|h| !h.is_empty())
        })
}

/// The `maxNode` rule shared by the SDK (which applies it to each shard it receives) and the admin
/// (which dispatches only the shards that would run).
///
/// Returns `Ok(None)` when the parameter does not ask for it (not JSON, or no `maxNode` key),
/// `Ok(Some(m))` for a valid `1 ≤ m ≤ shard_total`, and an error message otherwise.
pub fn parse_max_node(params: &str, shard_total: i32) -> Result<Option<i32>, String> {
    let trimmed = params.trim();
    if !trimmed.starts_with('{') {
        return Ok(None);
    }
    let Ok(value) = serde_json::from_str::<serde_json::Value>(trimmed) else {
        // A parameter that merely looks like JSON stays a plain string, as before maxNode existed.
        return Ok(None);
    };
    let Some(raw) = value.get("maxNode") else {
        return Ok(None);
    };
    let m = match raw {
        serde_json::Value::Number(n) => n.as_i64().filter(|_| n.is_i64() || n.is_u64()),
        serde_json::Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    let Some(m) = m else {
        return Err(format!("invalid maxNode {raw}: not an integer"));
    };
    if m < 1 {
        return Err(format!("invalid maxNode {m}: must be at least 1"));
    }
    if m > i64::from(shard_total) {
        return Err(format!(
            "invalid maxNode {m}: larger than shardTotal {shard_total}"
        ));
    }
    Ok(Some(m as i32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What may name an executor or an admin: what a request can be sent to, and nothing that
    /// would split a comma-separated list of addresses.
    #[test]
    fn an_address_is_an_http_url_with_a_host() {
        for good in [
            "http://127.0.0.1:9999/",
            "http://10.0.0.1:9999",
            " https://exec.example.com:8443/xxl/ ",
            "http://[::1]:9999/",
        ] {
            assert!(is_http_address(good), "{good:?}");
        }
        for bad in [
            "not a url/",
            "127.0.0.1:9999/",
            "ftp://10.0.0.1/",
            "http://",
            "http:///run",
            "http://bad host:9999/",
            "http://10.0.0.1:9999/,http://10.0.0.2:9999/",
            "",
        ] {
            assert!(!is_http_address(bad), "{bad:?}");
        }
    }

    #[test]
    fn envelope_emits_both_payload_keys() {
        let e = Envelope::success(Some("x".to_string()));
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v, json!({"code":200,"msg":null,"data":"x","content":"x"}));
        let ok = serde_json::to_value(Envelope::ok()).unwrap();
        assert_eq!(
            ok,
            json!({"code":200,"msg":null,"data":null,"content":null})
        );
    }

    #[test]
    fn envelope_reads_every_generation() {
        // 2.x executor: only code
        let e: Envelope<LogResult> = serde_json::from_str(r#"{"code":200}"#).unwrap();
        assert!(e.is_success() && e.payload.is_none());
        // 2.x: content
        let e: Envelope<LogResult> = serde_json::from_str(
            r#"{"code":200,"msg":null,"content":{"fromLineNum":1,"toLineNum":2,"logContent":"a\nb\n","isEnd":false}}"#,
        )
        .unwrap();
        assert_eq!(e.payload.unwrap().to_line_num, 2);
        // 3.3+: data, Jackson-style extra field
        let e: Envelope<LogResult> = serde_json::from_str(
            r#"{"code":200,"msg":"Success","data":{"fromLineNum":3,"toLineNum":3,"logContent":"c","end":true},"success":true}"#,
        )
        .unwrap();
        let p = e.payload.unwrap();
        assert!(p.is_end);
        assert_eq!(p.from_line_num, 3);
        // data null, content set
        let e: Envelope<String> =
            serde_json::from_str(r#"{"code":500,"msg":"m","data":null,"content":"c"}"#).unwrap();
        assert_eq!(e.payload.as_deref(), Some("c"));
        assert_eq!(e.msg.as_deref(), Some("m"));
    }

    #[test]
    fn trigger_request_accepts_missing_and_null_fields() {
        let t: TriggerRequest = serde_json::from_value(json!({
            "jobId": 7, "logId": 1024, "executorHandler": null, "glueSource": null
        }))
        .unwrap();
        assert_eq!(t.job_id, 7);
        assert_eq!(t.executor_handler, "");
        assert_eq!(t.broadcast_total, 1);
        assert_eq!(t.checkpoint, None);
    }

    #[test]
    fn trigger_request_round_trip_has_all_eleven_fields() {
        let sample = json!({"jobId":7,"executorHandler":"demoJobHandler","executorParams":"a=1",
            "executorBlockStrategy":"SERIAL_EXECUTION","executorTimeout":0,"logId":1024,
            "logDateTime":1750000000123i64,"glueType":"BEAN","glueSource":"",
            "glueUpdatetime":1749990000000i64,"broadcastIndex":0,"broadcastTotal":1});
        let t: TriggerRequest = serde_json::from_value(sample.clone()).unwrap();
        assert_eq!(serde_json::to_value(&t).unwrap(), sample);
        let mut with_ext = t.clone();
        with_ext.checkpoint = Some("id=42".into());
        with_ext.idempotency_key = Some("7:99:0".into());
        let v = serde_json::to_value(&with_ext).unwrap();
        assert_eq!(v["shardlineCheckpoint"], "id=42");
        let back: TriggerRequest = serde_json::from_value(v).unwrap();
        assert_eq!(back, with_ext);
    }

    #[test]
    fn log_request_both_spellings() {
        let a: LogRequest =
            serde_json::from_str(r#"{"logId":5,"logDateTim":100,"fromLineNum":3}"#).unwrap();
        let b: LogRequest =
            serde_json::from_str(r#"{"logId":5,"logDateTime":100,"fromLineNum":3}"#).unwrap();
        assert_eq!(a, b);
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(v["logDateTim"], 100);
        assert_eq!(v["logDateTime"], 100);
        // What we send (both spellings at once) must read back.
        let back: LogRequest = serde_json::from_value(v).unwrap();
        assert_eq!(back, a);
    }

    #[test]
    fn callback_item_round_trip_with_both_spellings() {
        let item = CallbackItem {
            log_id: 3,
            log_date_time: 1_750_000_000_123,
            handle_code: 500,
            handle_msg: "boom".into(),
        };
        let text = serde_json::to_string(&vec![item.clone()]).unwrap();
        let back: CallbackBody = serde_json::from_str(&text).unwrap();
        assert_eq!(back.into_items(), vec![item]);
        let null_date: CallbackItem =
            serde_json::from_str(r#"{"logId":1,"logDateTim":null,"handleCode":200}"#).unwrap();
        assert_eq!(null_date.log_date_time, 0);
    }

    #[test]
    fn callback_body_both_shapes() {
        let a: CallbackBody = serde_json::from_str(
            r#"[{"logId":1024,"logDateTim":1750000000123,"handleCode":200,"handleMsg":"ok"}]"#,
        )
        .unwrap();
        let b: CallbackBody = serde_json::from_str(
            r#"{"callbackList":[{"logId":1024,"logDateTime":1750000000123,"handleCode":200,"handleMsg":"ok"}]}"#,
        )
        .unwrap();
        assert_eq!(a.clone().into_items(), b.clone().into_items());
        // missing handleMsg is fine
        let c: CallbackBody = serde_json::from_str(r#"[{"logId":1,"handleCode":500}]"#).unwrap();
        assert_eq!(c.into_items()[0].handle_msg, "");
        let wrapped = serde_json::to_value(Generation::V35.callback_body(a.into_items())).unwrap();
        assert!(wrapped["callbackList"].is_array());
        assert_eq!(wrapped["callbackList"][0]["logDateTim"], 1750000000123i64);
    }

    #[test]
    fn registry_round_trip_and_validation() {
        let r: RegistryRequest = serde_json::from_str(
            r#"{"registryGroup":"EXECUTOR","registryKey":"xxl-job-executor-sample","registryValue":"http://10.0.0.5:9999/"}"#,
        )
        .unwrap();
        assert!(r.validate().is_ok());
        assert!(!serde_json::to_string(&r).unwrap().contains("shardlineMeta"));
        let bad: RegistryRequest = serde_json::from_str(r#"{"registryGroup":"EXECUTOR"}"#).unwrap();
        assert_eq!(bad.validate(), Err("Illegal Argument."));
    }

    #[test]
    fn enums_parse() {
        assert_eq!(
            BlockStrategy::from_wire("nonsense"),
            BlockStrategy::SerialExecution
        );
        assert_eq!(
            BlockStrategy::parse("COVER_EARLY"),
            Some(BlockStrategy::CoverEarly)
        );
        assert_eq!(GlueType::parse(""), Some(GlueType::Bean));
        assert_eq!(
            GlueType::parse("GLUE_SHELL").unwrap().script(),
            Some(("bash", ".sh"))
        );
        assert_eq!(GlueType::parse("GLUE_JAVA"), None);
    }

    #[test]
    fn token_check() {
        assert!(token_matches("", None));
        assert!(token_matches("s3cret", Some("s3cret")));
        assert!(!token_matches("s3cret", Some("s3cre")));
        assert!(!token_matches("s3cret", None));
    }

    #[test]
    fn max_node_rule() {
        assert_eq!(parse_max_node("plain", 4), Ok(None));
        assert_eq!(parse_max_node("{\"a\":1}", 4), Ok(None));
        assert_eq!(parse_max_node("{not json", 4), Ok(None));
        assert_eq!(parse_max_node("{\"maxNode\":2}", 4), Ok(Some(2)));
        assert_eq!(parse_max_node("{\"maxNode\":\"3\"}", 4), Ok(Some(3)));
        assert!(parse_max_node("{\"maxNode\":0}", 4)
            .unwrap_err()
            .contains("at least 1"));
        assert!(parse_max_node("{\"maxNode\":5}", 4)
            .unwrap_err()
            .contains("larger than"));
        assert!(parse_max_node("{\"maxNode\":\"x\"}", 4)
            .unwrap_err()
            .contains("not an integer"));
        assert!(parse_max_node("{\"maxNode\":1.5}", 4).is_err());
    }
}
