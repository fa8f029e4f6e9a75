-- Every run changes state twice (dispatched, then finished), and every change rewrote each index
-- holding `state` or `dispatched_at`. No query looks runs up by executor, so that index goes; the
-- open-run watch looks them up by state and creation time, so the state index carries that
-- instead of the dispatch time (which a dispatch then no longer rewrites).
ALTER TABLE runs DROP INDEX idx_runs_executor, DROP INDEX idx_runs_state, ADD INDEX idx_runs_state (state, created_at);
