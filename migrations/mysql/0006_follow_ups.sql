-- What must follow a fire's end (retries or the alarm of a failed fire, the child jobs of a
-- succeeded one, a FIX_DELAY job's next fire, also after a fire skipped as misfired), written in
-- the transaction that ends the fire.
-- The admin that ends the fire does the follow-up at once and deletes the row; a row left by an
-- admin that stopped or died before it could is found by any admin's sweep and done then.
-- Fires with nothing to follow (most of them) write no row here.
CREATE TABLE follow_ups (
    fire_id    BIGINT   NOT NULL PRIMARY KEY,
    job_id     BIGINT   NOT NULL,
    state      CHAR(16) NOT NULL,   -- succeeded failed skipped
    created_at BIGINT   NOT NULL,
    KEY idx_follow_ups_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
