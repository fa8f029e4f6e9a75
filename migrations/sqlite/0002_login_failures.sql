-- Failed console logins, kept in the database so every admin behind a load balancer applies the same
-- limit per (username, client address). Rows older than the limit's window are pruned.
CREATE TABLE login_failures (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    username TEXT    NOT NULL,
    ip       TEXT    NOT NULL,
    at       INTEGER NOT NULL
);
CREATE INDEX idx_login_failures_key ON login_failures (username, ip, at);
CREATE INDEX idx_login_failures_at ON login_failures (at);
CREATE INDEX idx_sessions_user ON sessions (user_id);
CREATE INDEX idx_sessions_expires ON sessions (expires_at);
