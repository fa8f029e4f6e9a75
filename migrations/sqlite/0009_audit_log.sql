-- Who changed what through the REST API and the console (XXL-JOB 3.3's operation log): every
-- request that could change something, with its caller and the answer's status. Bodies are not
-- kept (they may hold passwords and secrets).
CREATE TABLE audit_log (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    at       INTEGER NOT NULL,
    user_id  INTEGER NOT NULL,
    username TEXT    NOT NULL,
    console  INTEGER NOT NULL,
    method   TEXT    NOT NULL,
    path     TEXT    NOT NULL,
    status   INTEGER NOT NULL
);
CREATE INDEX idx_audit_log_at ON audit_log (at);
