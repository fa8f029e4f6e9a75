-- Two indexes hold an entry for every row although their lookups only ever want a few:
-- the lease takeover asks for fires whose lease is set (`claim_expires_at > 0`: scheduled
-- fires only), and the retry sweep for runs with a retry due (`retry_at IS NOT NULL`). As
-- partial indexes, a run's insert writes one index entry less, and a fire's start removes its
-- lease entry instead of moving it to 0. Both lookups state the index's condition, so SQLite
-- still uses them. MySQL has no partial indexes; its indexes stay as they are.
DROP INDEX idx_fires_lease;
CREATE INDEX idx_fires_lease ON fires (claim_expires_at) WHERE claim_expires_at > 0;
DROP INDEX idx_runs_retry;
CREATE INDEX idx_runs_retry ON runs (retry_at) WHERE retry_at IS NOT NULL;
