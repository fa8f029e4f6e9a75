-- Who changed what through the REST API and the console (XXL-JOB 3.3's operation log): every
-- request that could change something, with its caller and the answer's status. Bodies are not
-- kept (they may hold passwords and secrets).
CREATE TABLE audit_log (
    id       BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at       BIGINT       NOT NULL,
    user_id  BIGINT       NOT NULL,
    username VARCHAR(64)  NOT NULL,
    console  BIGINT       NOT NULL,
    method   VARCHAR(8)   NOT NULL,
    path     VARCHAR(512) NOT NULL,
    status   BIGINT       NOT NULL,
    KEY idx_audit_log_at (at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
