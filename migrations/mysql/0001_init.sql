-- Shardline schema (MySQL / MariaDB). Times are epoch milliseconds (BIGINT). Booleans are 0/1 BIGINTs.
-- Keep this file and migrations/sqlite/0001_init.sql describing the same tables and indexes.
-- TEXT columns carry no DEFAULT (MySQL refuses one); the store always writes them explicitly.

CREATE TABLE executor_groups (
    id           BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    appname      VARCHAR(64)  NOT NULL,
    title        VARCHAR(128) NOT NULL,
    address_type VARCHAR(16)  NOT NULL DEFAULT 'AUTO',
    addresses    TEXT         NOT NULL,
    access_token VARCHAR(255) NOT NULL DEFAULT '',
    generation   VARCHAR(16)  NOT NULL DEFAULT 'CLASSIC',
    created_at   BIGINT       NOT NULL,
    updated_at   BIGINT       NOT NULL,
    UNIQUE KEY uk_groups_appname (appname)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE registry (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    appname    VARCHAR(64)  NOT NULL,
    address    VARCHAR(255) NOT NULL,
    meta       TEXT         NOT NULL,
    first_seen BIGINT       NOT NULL,
    updated_at BIGINT       NOT NULL,
    UNIQUE KEY uk_registry (appname, address),
    KEY idx_registry_updated (updated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE jobs (
    id                BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    group_id          BIGINT       NOT NULL,
    name              VARCHAR(255) NOT NULL,
    description       TEXT         NOT NULL,
    schedule_type     VARCHAR(16)  NOT NULL,
    schedule_conf     VARCHAR(255) NOT NULL DEFAULT '',
    timezone          VARCHAR(64)  NOT NULL DEFAULT '',
    handler           VARCHAR(255) NOT NULL DEFAULT '',
    params            TEXT         NOT NULL,
    route_strategy    VARCHAR(32)  NOT NULL,
    block_strategy    VARCHAR(32)  NOT NULL,
    timeout_s         BIGINT       NOT NULL DEFAULT 0,
    retry_count       BIGINT       NOT NULL DEFAULT 0,
    retry_interval_s  BIGINT       NOT NULL DEFAULT 0,
    retry_backoff     BIGINT       NOT NULL DEFAULT 1,
    misfire_strategy  VARCHAR(32)  NOT NULL,
    sharding_mode     VARCHAR(16)  NOT NULL DEFAULT 'NONE',
    sharding_total    BIGINT       NOT NULL DEFAULT 1,
    sharding_strategy VARCHAR(32)  NOT NULL DEFAULT 'AVERAGE',
    item_params       TEXT         NOT NULL,
    max_node          BIGINT       NOT NULL DEFAULT 0,
    resume_checkpoint BIGINT       NOT NULL DEFAULT 0,
    child_job_ids     VARCHAR(1024) NOT NULL DEFAULT '',
    glue_type         VARCHAR(32)  NOT NULL DEFAULT 'BEAN',
    glue_source       MEDIUMTEXT   NOT NULL,
    glue_updated_at   BIGINT       NOT NULL DEFAULT 0,
    alarm_targets     TEXT         NOT NULL,
    enabled           BIGINT       NOT NULL DEFAULT 0,
    next_fire_at      BIGINT       NULL,
    last_fire_at      BIGINT       NULL,
    created_at        BIGINT       NOT NULL,
    updated_at        BIGINT       NOT NULL,
    KEY idx_jobs_group (group_id),
    KEY idx_jobs_due (enabled, next_fire_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE glue_history (
    id          BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id      BIGINT      NOT NULL,
    glue_type   VARCHAR(32) NOT NULL,
    glue_source MEDIUMTEXT  NOT NULL,
    remark      VARCHAR(255) NOT NULL DEFAULT '',
    created_at  BIGINT      NOT NULL,
    KEY idx_glue_history_job (job_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE fires (
    id               BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id           BIGINT       NOT NULL,
    group_id         BIGINT       NOT NULL,
    trigger_type     VARCHAR(16)  NOT NULL,
    planned_at       BIGINT       NOT NULL,
    sched_key        VARCHAR(64)  NULL,
    params           TEXT         NOT NULL,
    state            VARCHAR(16)  NOT NULL,
    total_items      BIGINT       NOT NULL DEFAULT 0,
    message          TEXT         NOT NULL,
    owner            VARCHAR(64)  NOT NULL DEFAULT '',
    claim_expires_at BIGINT       NOT NULL DEFAULT 0,
    parent_fire_id   BIGINT       NULL,
    children_done    BIGINT       NOT NULL DEFAULT 0,
    alarm_state      BIGINT       NOT NULL DEFAULT 0,
    created_at       BIGINT       NOT NULL,
    dispatched_at    BIGINT       NULL,
    finished_at      BIGINT       NULL,
    UNIQUE KEY uk_fires_sched (sched_key),
    KEY idx_fires_job (job_id, planned_at),
    KEY idx_fires_state (state, created_at),
    KEY idx_fires_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE runs (
    id               BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    fire_id          BIGINT       NOT NULL,
    job_id           BIGINT       NOT NULL,
    group_id         BIGINT       NOT NULL,
    shard_index      BIGINT       NOT NULL,
    shard_total      BIGINT       NOT NULL,
    attempt          BIGINT       NOT NULL DEFAULT 0,
    superseded       BIGINT       NOT NULL DEFAULT 0,
    executor_address VARCHAR(255) NOT NULL DEFAULT '',
    handler          VARCHAR(255) NOT NULL DEFAULT '',
    params           TEXT         NOT NULL,
    item_param       TEXT         NULL,
    state            VARCHAR(16)  NOT NULL,
    trigger_code     BIGINT       NOT NULL DEFAULT 0,
    trigger_msg      TEXT         NOT NULL,
    handle_code      BIGINT       NOT NULL DEFAULT 0,
    handle_msg       MEDIUMTEXT   NOT NULL,
    log_date_time    BIGINT       NOT NULL,
    created_at       BIGINT       NOT NULL,
    dispatched_at    BIGINT       NULL,
    finished_at      BIGINT       NULL,
    retry_at         BIGINT       NULL,
    KEY idx_runs_fire (fire_id, shard_index),
    KEY idx_runs_job (job_id, created_at),
    KEY idx_runs_state (state, dispatched_at),
    KEY idx_runs_executor (executor_address, state),
    KEY idx_runs_created (created_at),
    KEY idx_runs_retry (retry_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE checkpoints (
    job_id     BIGINT     NOT NULL,
    item       BIGINT     NOT NULL,
    value      MEDIUMTEXT NOT NULL,
    run_id     BIGINT     NOT NULL,
    updated_at BIGINT     NOT NULL,
    PRIMARY KEY (job_id, item)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE users (
    id                   BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    username             VARCHAR(64)  NOT NULL,
    password_hash        VARCHAR(255) NOT NULL,
    role                 VARCHAR(16)  NOT NULL,
    group_ids            VARCHAR(1024) NOT NULL DEFAULT '',
    must_change_password BIGINT       NOT NULL DEFAULT 0,
    lang                 VARCHAR(16)  NOT NULL DEFAULT 'en',
    created_at           BIGINT       NOT NULL,
    updated_at           BIGINT       NOT NULL,
    UNIQUE KEY uk_users_username (username)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE api_tokens (
    id           BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    user_id      BIGINT       NOT NULL,
    name         VARCHAR(128) NOT NULL,
    token_hash   VARCHAR(64)  NOT NULL,
    prefix       VARCHAR(16)  NOT NULL,
    created_at   BIGINT       NOT NULL,
    last_used_at BIGINT       NULL,
    revoked_at   BIGINT       NULL,
    UNIQUE KEY uk_api_tokens_hash (token_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE sessions (
    id_hash    VARCHAR(64) NOT NULL PRIMARY KEY,
    user_id    BIGINT      NOT NULL,
    csrf_token VARCHAR(64) NOT NULL,
    created_at BIGINT      NOT NULL,
    expires_at BIGINT      NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE daily_report (
    day        VARCHAR(10) NOT NULL PRIMARY KEY,
    succeeded  BIGINT      NOT NULL DEFAULT 0,
    failed     BIGINT      NOT NULL DEFAULT 0,
    running    BIGINT      NOT NULL DEFAULT 0,
    updated_at BIGINT      NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE admin_nodes (
    id           VARCHAR(64)  NOT NULL PRIMARY KEY,
    address      VARCHAR(255) NOT NULL,
    started_at   BIGINT       NOT NULL,
    heartbeat_at BIGINT       NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE counters (
    name  VARCHAR(64) NOT NULL PRIMARY KEY,
    value BIGINT      NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE settings (
    name  VARCHAR(64) NOT NULL PRIMARY KEY,
    value TEXT        NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
