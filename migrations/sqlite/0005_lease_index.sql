-- The lease takeover looks up the scheduled fires whose owner's lease ran out. It used
-- `idx_fires_state (state, created_at)`, whose entry every change of a fire's state moves: the
-- start, the send, the end. A fire's lease is now 0 once it leaves `scheduled` (no step of a
-- started fire uses it), and the takeover looks fires up by lease, in an index that only the
-- start moves.
-- The console's filter by fire state reads the table instead, as its other filters do.
UPDATE fires SET claim_expires_at = 0 WHERE state <> 'scheduled' AND claim_expires_at <> 0;
DROP INDEX idx_fires_state;
CREATE INDEX idx_fires_lease ON fires (claim_expires_at);
