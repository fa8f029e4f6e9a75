-- Shardline schema (SQLite). Times are epoch milliseconds (INTEGER). Booleans are 0/1 INTEGERs.
-- Keep this file and migrations/mysql/0001_init.sql describing the same tables and indexes.

CREATE TABLE executor_groups (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    appname      TEXT    NOT NULL UNIQUE,
    title        TEXT    NOT NULL,
    address_type TEXT    NOT NULL DEFAULT 'AUTO',   -- AUTO | MANUAL
    addresses    TEXT    NOT NULL DEFAULT '',       -- MANUAL: comma-separated base URLs
    access_token TEXT    NOT NULL DEFAULT '',       -- per-group token sent to its executors ('' = admin default)
    generation   TEXT    NOT NULL DEFAULT 'CLASSIC',-- CLASSIC (/run) | V35 (/trigger)
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);

CREATE TABLE registry (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    appname    TEXT    NOT NULL,
    address    TEXT    NOT NULL,
    meta       TEXT    NOT NULL DEFAULT '',          -- JSON ExecutorMeta (labels, weight)
    first_seen INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (appname, address)
);
CREATE INDEX idx_registry_updated ON registry (updated_at);

CREATE TABLE jobs (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    group_id            INTEGER NOT NULL REFERENCES executor_groups (id),
    name                TEXT    NOT NULL,
    description         TEXT    NOT NULL DEFAULT '',
    schedule_type       TEXT    NOT NULL,
    schedule_conf       TEXT    NOT NULL DEFAULT '',
    timezone            TEXT    NOT NULL DEFAULT '',
    handler             TEXT    NOT NULL DEFAULT '',
    params              TEXT    NOT NULL DEFAULT '',
    route_strategy      TEXT    NOT NULL,
    block_strategy      TEXT    NOT NULL,
    timeout_s           INTEGER NOT NULL DEFAULT 0,
    retry_count         INTEGER NOT NULL DEFAULT 0,
    retry_interval_s    INTEGER NOT NULL DEFAULT 0,
    retry_backoff       INTEGER NOT NULL DEFAULT 1,     -- multiplier per attempt (1 = fixed interval)
    misfire_strategy    TEXT    NOT NULL,
    sharding_mode       TEXT    NOT NULL DEFAULT 'NONE',
    sharding_total      INTEGER NOT NULL DEFAULT 1,
    sharding_strategy   TEXT    NOT NULL DEFAULT 'AVERAGE',
    item_params         TEXT    NOT NULL DEFAULT '',
    max_node            INTEGER NOT NULL DEFAULT 0,     -- 0 = all executors
    resume_checkpoint   INTEGER NOT NULL DEFAULT 0,     -- next fire starts from the saved checkpoint
    child_job_ids       TEXT    NOT NULL DEFAULT '',
    glue_type           TEXT    NOT NULL DEFAULT 'BEAN',
    glue_source         TEXT    NOT NULL DEFAULT '',
    glue_updated_at     INTEGER NOT NULL DEFAULT 0,
    alarm_targets       TEXT    NOT NULL DEFAULT '',
    enabled             INTEGER NOT NULL DEFAULT 0,
    next_fire_at        INTEGER,                        -- planned time of the next scheduled fire
    last_fire_at        INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
);
CREATE INDEX idx_jobs_group ON jobs (group_id);
CREATE INDEX idx_jobs_due ON jobs (enabled, next_fire_at);

CREATE TABLE glue_history (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id      INTEGER NOT NULL,
    glue_type   TEXT    NOT NULL,
    glue_source TEXT    NOT NULL,
    remark      TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL
);
CREATE INDEX idx_glue_history_job ON glue_history (job_id, id);

-- One trigger event. `sched_key` is set for scheduler-made fires ("<job>:<planned ms>") so the database
-- refuses a second insert of the same planned fire, whichever admin tries.
CREATE TABLE fires (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id          INTEGER NOT NULL,
    group_id        INTEGER NOT NULL,
    trigger_type    TEXT    NOT NULL,     -- CRON FIX_RATE FIX_DELAY MANUAL API RETRY MISFIRE PARENT
    planned_at      INTEGER NOT NULL,
    sched_key       TEXT    UNIQUE,
    params          TEXT    NOT NULL DEFAULT '',
    state           TEXT    NOT NULL,     -- triggering running succeeded failed
    total_items     INTEGER NOT NULL DEFAULT 0,
    message         TEXT    NOT NULL DEFAULT '',
    owner           TEXT    NOT NULL DEFAULT '',
    claim_expires_at INTEGER NOT NULL DEFAULT 0,
    parent_fire_id  INTEGER,
    children_done   INTEGER NOT NULL DEFAULT 0,
    alarm_state     INTEGER NOT NULL DEFAULT 0,  -- 0 none, 1 sent, 2 not needed
    created_at      INTEGER NOT NULL,
    dispatched_at   INTEGER,
    finished_at     INTEGER
);
CREATE INDEX idx_fires_job ON fires (job_id, planned_at);
CREATE INDEX idx_fires_state ON fires (state, created_at);
CREATE INDEX idx_fires_created ON fires (created_at);

-- One run per shard / item and attempt (XXL-JOB's log row; its id is the protocol's logId).
CREATE TABLE runs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    fire_id          INTEGER NOT NULL,
    job_id           INTEGER NOT NULL,
    group_id         INTEGER NOT NULL,
    shard_index      INTEGER NOT NULL,
    shard_total      INTEGER NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    superseded       INTEGER NOT NULL DEFAULT 0,   -- a later attempt of the same item exists
    executor_address TEXT    NOT NULL DEFAULT '',
    handler          TEXT    NOT NULL DEFAULT '',
    params           TEXT    NOT NULL DEFAULT '',
    item_param       TEXT,
    state            TEXT    NOT NULL,             -- triggering running succeeded failed timed_out killed lost
    trigger_code     INTEGER NOT NULL DEFAULT 0,
    trigger_msg      TEXT    NOT NULL DEFAULT '',
    handle_code      INTEGER NOT NULL DEFAULT 0,
    handle_msg       TEXT    NOT NULL DEFAULT '',
    log_date_time    INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    dispatched_at    INTEGER,
    finished_at      INTEGER,
    retry_at         INTEGER                        -- when set, a retry of this run is due then
);
CREATE INDEX idx_runs_fire ON runs (fire_id, shard_index);
CREATE INDEX idx_runs_job ON runs (job_id, created_at);
CREATE INDEX idx_runs_state ON runs (state, dispatched_at);
CREATE INDEX idx_runs_executor ON runs (executor_address, state);
CREATE INDEX idx_runs_created ON runs (created_at);
CREATE INDEX idx_runs_retry ON runs (retry_at);

CREATE TABLE checkpoints (
    job_id     INTEGER NOT NULL,
    item       INTEGER NOT NULL,
    value      TEXT    NOT NULL,
    run_id     INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, item)
);

CREATE TABLE users (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    username             TEXT    NOT NULL UNIQUE,
    password_hash        TEXT    NOT NULL,
    role                 TEXT    NOT NULL,          -- ADMIN | USER
    group_ids            TEXT    NOT NULL DEFAULT '',-- groups a USER may operate (comma list)
    must_change_password INTEGER NOT NULL DEFAULT 0,
    lang                 TEXT    NOT NULL DEFAULT 'en',
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL
);

CREATE TABLE api_tokens (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id      INTEGER NOT NULL,
    name         TEXT    NOT NULL,
    token_hash   TEXT    NOT NULL UNIQUE,           -- SHA-256 hex of the secret
    prefix       TEXT    NOT NULL,                  -- first characters, to recognise a token in lists
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);

CREATE TABLE sessions (
    id_hash    TEXT    PRIMARY KEY,
    user_id    INTEGER NOT NULL,
    csrf_token TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

CREATE TABLE daily_report (
    day        TEXT    PRIMARY KEY,                 -- YYYY-MM-DD (UTC)
    succeeded  INTEGER NOT NULL DEFAULT 0,
    failed     INTEGER NOT NULL DEFAULT 0,
    running    INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL
);

CREATE TABLE admin_nodes (
    id           TEXT    PRIMARY KEY,
    address      TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);

CREATE TABLE counters (
    name  TEXT    PRIMARY KEY,
    value INTEGER NOT NULL
);

-- Values generated once and shared by every admin (e.g. the executor access token).
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
