-- A fire's and a run's send and finish times are 0 until they happen, not NULL, as on MySQL
-- (where a NULL time set later moves the whole row; see migrations/mysql/0004_times_in_place.sql),
-- so both stores run the same statements. SQLite cannot change a column's default, so both
-- tables are rebuilt; their AUTOINCREMENT counters are carried over, so ids are never reused.
CREATE TABLE fires_new (
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
    dispatched_at   INTEGER NOT NULL DEFAULT 0,  -- 0: not sent yet
    finished_at     INTEGER NOT NULL DEFAULT 0   -- 0: not finished yet
);
INSERT INTO fires_new (id, job_id, group_id, trigger_type, planned_at, sched_key, params, state,
    total_items, message, owner, claim_expires_at, parent_fire_id, children_done, alarm_state,
    created_at, dispatched_at, finished_at)
SELECT id, job_id, group_id, trigger_type, planned_at, sched_key, params, state, total_items,
    message, owner, claim_expires_at, parent_fire_id, children_done, alarm_state, created_at,
    COALESCE(dispatched_at, 0), COALESCE(finished_at, 0)
FROM fires;
DELETE FROM sqlite_sequence WHERE name = 'fires_new';
UPDATE sqlite_sequence SET name = 'fires_new' WHERE name = 'fires';
DROP TABLE fires;
ALTER TABLE fires_new RENAME TO fires;
CREATE INDEX idx_fires_job ON fires (job_id, planned_at);
CREATE INDEX idx_fires_state ON fires (state, created_at);
CREATE INDEX idx_fires_created ON fires (created_at);

CREATE TABLE runs_new (
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
    dispatched_at    INTEGER NOT NULL DEFAULT 0,   -- 0: not sent yet
    finished_at      INTEGER NOT NULL DEFAULT 0,   -- 0: not finished yet
    retry_at         INTEGER                        -- when set, a retry of this run is due then
);
INSERT INTO runs_new (id, fire_id, job_id, group_id, shard_index, shard_total, attempt,
    superseded, executor_address, handler, params, item_param, state, trigger_code, trigger_msg,
    handle_code, handle_msg, log_date_time, created_at, dispatched_at, finished_at, retry_at)
SELECT id, fire_id, job_id, group_id, shard_index, shard_total, attempt, superseded,
    executor_address, handler, params, item_param, state, trigger_code, trigger_msg, handle_code,
    handle_msg, log_date_time, created_at, COALESCE(dispatched_at, 0), COALESCE(finished_at, 0),
    retry_at
FROM runs;
DELETE FROM sqlite_sequence WHERE name = 'runs_new';
UPDATE sqlite_sequence SET name = 'runs_new' WHERE name = 'runs';
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX idx_runs_fire ON runs (fire_id, shard_index);
CREATE INDEX idx_runs_job ON runs (job_id, created_at);
CREATE INDEX idx_runs_state ON runs (state, created_at);
CREATE INDEX idx_runs_created ON runs (created_at);
CREATE INDEX idx_runs_retry ON runs (retry_at);
