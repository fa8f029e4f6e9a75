-- What must follow a fire's end (retries or the alarm of a failed fire, the child jobs of a
-- succeeded one, a FIX_DELAY job's next fire, also after a fire skipped as misfired), written in
-- the transaction that ends the fire.
-- The admin that ends the fire does the follow-up at once and deletes the row; a row left by an
-- admin that stopped or died before it could is found by any admin's sweep and done then.
-- Fires with nothing to follow (most of them) write no row here.
CREATE TABLE follow_ups (
    fire_id    INTEGER PRIMARY KEY,
    job_id     INTEGER NOT NULL,
    state      TEXT    NOT NULL,     -- succeeded failed skipped
    created_at INTEGER NOT NULL      -- when the fire ended (epoch ms)
);
CREATE INDEX idx_follow_ups_created ON follow_ups (created_at);
