-- Failed console logins, kept in the database so every admin behind a load balancer applies the same
-- limit per (username, client address). Rows older than the limit's window are pruned.
CREATE TABLE login_failures (
    id       BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    username VARCHAR(64)  NOT NULL,
    ip       VARCHAR(64)  NOT NULL,
    at       BIGINT       NOT NULL,
    KEY idx_login_failures_key (username, ip, at),
    KEY idx_login_failures_at (at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX idx_sessions_user ON sessions (user_id);
CREATE INDEX idx_sessions_expires ON sessions (expires_at);
