-- How many retries of its item came before this run. A job's `retry_count` is counted in these,
-- not in attempts: a failover (the item's executor did not answer, or died) is an attempt too,
-- and used to use up the retries the job asked for.
ALTER TABLE runs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
