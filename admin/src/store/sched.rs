//! The scheduler's claims on planned fires.
//!
//! A planned fire is claimed by inserting its fire row (state `scheduled`, an owner and a lease)
//! in the same transaction that advances the job's `next_fire_at`. The row's unique `sched_key`
//! (`<job>:<planned ms>`) makes a second claim of the same fire impossible whichever admin tries;
//! the lease lets a surviving admin take over the claims of one that died before dispatching them.

use sqlx::QueryBuilder;

use super::FireEnded;
use super::{
    cached_chunks, padded, update_joined, with_pool, with_read_pool, Dialect, Done, Store,
    StoreResult, ROWS_PER_STATEMENT,
};
use crate::model::{FireState, Job};
use crate::note::Message;

/// One fire a job should get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFire {
    pub planned_at: i64,
    pub trigger_type: &'static str,
}

/// What the scheduler decided for one due job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobPlan {
    pub fires: Vec<PlannedFire>,
    /// The job's next planned time after these fires (`None`: nothing planned yet, e.g. FIX_DELAY
    /// waiting for its fire to finish, or a schedule that never fires again).
    pub next_fire_at: Option<i64>,
    /// Set when the schedule has ended (the job is stopped, as XXL-JOB does).
    pub stop: bool,
}

/// An open run as the lost-run watch sees it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct OpenRun {
    pub id: i64,
    pub fire_id: i64,
    pub job_id: i64,
    pub group_id: i64,
    pub executor_address: String,
    pub created_at: i64,
    pub dispatched_at: Option<i64>,
    /// `triggering` or `running`.
    pub state: String,
}

/// A fire this admin owns and must dispatch at `planned_at`, as read (or returned by the
/// claim's insert) by [`CLAIMED_COLS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedFire {
    pub fire_id: i64,
    pub job_id: i64,
    pub planned_at: i64,
    pub trigger_type: String,
    /// When the fire row was made by a claim: never before its job's last edit, and strictly
    /// after it (see [`claim_stamp`]), so an edit after the claim is one with a later `updated_at`.
    pub claimed_at: i64,
}

/// The columns of a `fires` row read as a [`ClaimedFire`], in its fields' order.
const CLAIMED_COLS: &str = "id, job_id, planned_at, trigger_type, created_at";

/// Read by position, not by name: the rows of MariaDB's prepared `INSERT … RETURNING` carry no
/// column names sqlx can find (`ColumnNotFound`).
impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for ClaimedFire
where
    usize: sqlx::ColumnIndex<R>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        Ok(ClaimedFire {
            fire_id: row.try_get(0)?,
            job_id: row.try_get(1)?,
            planned_at: row.try_get(2)?,
            trigger_type: row.try_get(3)?,
            claimed_at: row.try_get(4)?,
        })
    }
}

/// A job's schedule after a claim, as bound to [`update_joined`]: id, the `next_fire_at` the plan
/// started from (compare-and-set: an edit meanwhile wins), the new `next_fire_at`, the new
/// `last_fire_at` and whether it stays enabled.
type JobAdvance = [Option<i64>; 5];

/// The scheduled fires whose lease ran out. `claim_expires_at > 0` is also the condition of the
/// partial index `idx_fires_lease` on SQLite (only leased fires have an entry), so it must stay.
const EXPIRED_LEASES: &str = "SELECT id FROM fires WHERE claim_expires_at > 0 AND claim_expires_at < ? AND state = 'scheduled' ORDER BY planned_at LIMIT ?";

/// Runs whose retry is due; `retry_at IS NOT NULL` is the condition of the partial index
/// `idx_runs_retry` on SQLite, so it must stay.
const DUE_RETRIES: &str = "SELECT id, retry_at FROM runs WHERE retry_at IS NOT NULL AND retry_at <= ? AND superseded = 0 ORDER BY retry_at LIMIT ?";

/// The columns of a due job that planning reads: its schedule and misfire policy (a whole job is
/// 32 columns, and the claim reads every due job).
const DUE_COLS: &str = "id, group_id, schedule_type, schedule_conf, timezone, misfire_strategy, next_fire_at, last_fire_at, updated_at";

#[derive(sqlx::FromRow)]
struct DueJob {
    id: i64,
    group_id: i64,
    schedule_type: String,
    schedule_conf: String,
    timezone: String,
    misfire_strategy: String,
    next_fire_at: Option<i64>,
    last_fire_at: Option<i64>,
    updated_at: i64,
}

impl From<DueJob> for Job {
    /// A job with the fields planning reads; the others are defaults, never used by it.
    fn from(d: DueJob) -> Job {
        Job {
            id: d.id,
            group_id: d.group_id,
            schedule_type: d.schedule_type,
            schedule_conf: d.schedule_conf,
            timezone: d.timezone,
            misfire_strategy: d.misfire_strategy,
            next_fire_at: d.next_fire_at,
            last_fire_at: d.last_fire_at,
            updated_at: d.updated_at,
            enabled: 1,
            ..Job::default()
        }
    }
}

/// The unique key of a scheduler-made fire.
pub fn sched_key(job_id: i64, planned_at: i64) -> String {
    format!("{job_id}:{planned_at}")
}

/// The `created_at` of a fire a claim at `now` makes for a job last edited at `updated_at`:
/// strictly after that edit even when the job was created or edited in the claim's very
/// millisecond, and never after an edit that follows the claim (every edit sets `updated_at` to
/// at least its own time and past the previous value), so `updated_at < claimed_at` tells the
/// job is unchanged since the claim.
fn claim_stamp(now: i64, updated_at: i64) -> i64 {
    now.max(updated_at + 1)
}

impl Store {
    /// Claims the fires of jobs due before `horizon`: plans them with `plan`, inserts their fire
    /// rows owned by `node` with a lease until `planned_at + lease_ms`, and advances each job, in one
    /// transaction. On MySQL the job rows are locked with `SKIP LOCKED`, so several admins claim
    /// disjoint sets at the same moment. Returns how many jobs were due (at most `limit`) and
    /// the fires claimed for them.
    pub async fn claim_due(
        &self,
        node: &str,
        horizon: i64,
        lease_ms: i64,
        limit: i64,
        now: i64,
        plan: impl Fn(&Job) -> JobPlan,
    ) -> StoreResult<(usize, Vec<ClaimedFire>)> {
        let select = match self.dialect() {
            Dialect::MySql => format!(
                "SELECT {DUE_COLS} FROM jobs WHERE enabled = 1 AND next_fire_at IS NOT NULL AND next_fire_at <= ? ORDER BY next_fire_at LIMIT ? FOR UPDATE SKIP LOCKED"
            ),
            Dialect::Sqlite => format!(
                "SELECT {DUE_COLS} FROM jobs WHERE enabled = 1 AND next_fire_at IS NOT NULL AND next_fire_at <= ? ORDER BY next_fire_at LIMIT ?"
            ),
        };
        let insert_prefix = format!(
            "{} INTO fires (job_id, group_id, trigger_type, planned_at, sched_key, params, state, total_items, message, owner, claim_expires_at, children_done, alarm_state, created_at) ",
            self.dialect().insert_ignore()
        );
        let begin = self.begin_write();
        let dialect = self.dialect();
        let returning = self.insert_returning();
        let (due, mut claimed, keys) = with_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            let jobs: Vec<Job> = sqlx::query_as::<_, DueJob>(&select)
                .bind(horizon).bind(limit).fetch_all(&mut *tx).await?
                .into_iter().map(Job::from).collect();
            let mut rows: Vec<(i64, i64, i64, &'static str, String, i64)> = Vec::new();
            let mut advances: Vec<JobAdvance> = Vec::with_capacity(jobs.len());
            for job in &jobs {
                let p = plan(job);
                for f in &p.fires {
                    rows.push((job.id, job.group_id, f.planned_at, f.trigger_type, sched_key(job.id, f.planned_at), claim_stamp(now, job.updated_at)));
                }
                advances.push([
                    Some(job.id),
                    job.next_fire_at,
                    p.next_fire_at,
                    p.fires.last().map(|f| f.planned_at).or(job.last_fire_at),
                    Some(i64::from(!p.stop)),
                ]);
            }
            // One statement per chunk of jobs instead of one per job: a statement costs a round
            // trip (on SQLite a hand-off to its worker thread), which dominated a pass at 10 000
            // jobs per second.
            for chunk in advances.chunks(ROWS_PER_STATEMENT) {
                update_joined(dialect, "jobs", chunk, |qb| {
                    qb.push("next_fire_at = v.column3, last_fire_at = v.column4, enabled = v.column5");
                }, " AND jobs.next_fire_at = v.column2")
                .build().execute(&mut *tx).await.map(Done::from)?;
            }
            // A job its schedule stops is an edit to the job caches (its `enabled` changed).
            if advances.iter().any(|a| a[4] == Some(0)) {
                sqlx::query(dialect.count_job_edit()).execute(&mut *tx).await?;
            }
            // The rows a fire key already had are skipped (another admin claimed them), so what
            // this pass claimed is what the insert returns, or else what a read by key finds.
            let mut claimed = Vec::new();
            for chunk in cached_chunks(&rows) {
                let mut qb = QueryBuilder::new(insert_prefix.as_str());
                qb.push_values(chunk, |mut b, (job_id, group_id, planned, ty, key, stamp)| {
                    b.push_bind(*job_id).push_bind(*group_id).push_bind(*ty).push_bind(*planned)
                        .push_bind(key.as_str()).push_bind("").push_bind(FireState::Scheduled.as_str())
                        .push_bind(0i64).push_bind("").push_bind(node)
                        .push_bind(*planned + lease_ms).push_bind(0i64).push_bind(0i64).push_bind(*stamp);
                });
                if returning {
                    qb.push(format_args!(" RETURNING {CLAIMED_COLS}"));
                    claimed.extend(qb.build_query_as::<ClaimedFire>().fetch_all(&mut *tx).await?);
                } else {
                    qb.build().execute(&mut *tx).await.map(Done::from)?;
                }
            }
            tx.commit().await?;
            (jobs.len(), claimed, rows.into_iter().map(|r| r.4).collect::<Vec<String>>())
        });
        if !returning {
            claimed = self.claimed_by_keys(node, &keys).await?;
        }
        Ok((due, claimed))
    }

    /// The fires just claimed, read back by key where the insert cannot return them (MySQL).
    async fn claimed_by_keys(&self, node: &str, keys: &[String]) -> StoreResult<Vec<ClaimedFire>> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(500) {
            let rows: Vec<ClaimedFire> = with_pool!(self, pool => {
                let mut qb = QueryBuilder::new(format!("SELECT {CLAIMED_COLS} FROM fires WHERE state = 'scheduled' AND owner = "));
                qb.push_bind(node).push(" AND sched_key IN (");
                // Padded by repeating the last key, to a length whose statement is cached.
                let mut sep = qb.separated(", ");
                for k in padded(chunk, &chunk[chunk.len() - 1]) {
                    sep.push_bind(k.as_str());
                }
                qb.push(")");
                qb.build_query_as().fetch_all(pool).await?
            });
            out.extend(rows);
        }
        Ok(out)
    }

    /// Takes over scheduled fires whose owner's lease ran out (the owner died or stalled).
    pub async fn take_over_expired(
        &self,
        node: &str,
        now: i64,
        lease_ms: i64,
        limit: i64,
    ) -> StoreResult<Vec<ClaimedFire>> {
        // Usually nothing has expired: the look runs on a reader, and the write transaction is
        // only opened for fires to take. It goes by lease: a fire's lease is 0 once it left
        // `scheduled`, so the range holds only scheduled fires, however long the history.
        let candidates: Vec<i64> = with_read_pool!(self, pool => sqlx::query_scalar(EXPIRED_LEASES)
            .bind(now).bind(limit).fetch_all(pool).await)?;
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let begin = self.begin_write();
        let expires = now + lease_ms;
        Ok(with_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            // Compare-and-set on the whole chunk: of two survivors, one wins each fire (the
            // loser's update finds the lease already renewed). The read-back is by the lease just
            // written, so only the fires this statement took are returned.
            let mut upd = QueryBuilder::new("UPDATE fires SET owner = ");
            upd.push_bind(node).push(", claim_expires_at = ").push_bind(expires)
                .push(" WHERE +state = 'scheduled' AND +claim_expires_at < ").push_bind(now);
            super::fires::push_in(&mut upd, "id", &candidates);
            upd.build().execute(&mut *tx).await?;
            let mut sel = QueryBuilder::new(format!("SELECT {CLAIMED_COLS} FROM fires WHERE +state = 'scheduled' AND owner = "));
            sel.push_bind(node).push(" AND claim_expires_at = ").push_bind(expires);
            super::fires::push_in(&mut sel, "id", &candidates);
            sel.push(" ORDER BY planned_at");
            let won: Vec<ClaimedFire> = sel.build_query_as().fetch_all(&mut *tx).await?;
            tx.commit().await?;
            won
        }))
    }

    /// Moves a claimed fire from `scheduled` to `triggering` if `node` still owns it. Only the
    /// admin that wins this step dispatches the fire.
    pub async fn start_claimed(
        &self,
        fire_id: i64,
        node: &str,
        trigger_type: &str,
    ) -> StoreResult<bool> {
        let n = with_pool!(self, pool => sqlx::query(
            "UPDATE fires SET state = 'triggering', trigger_type = ?, claim_expires_at = 0 WHERE id = ? AND state = 'scheduled' AND owner = ?")
            .bind(trigger_type).bind(fire_id).bind(node).execute(pool).await.map(Done::from))?
        .rows_affected();
        Ok(n == 1)
    }

    /// Takes back prepared fires (started, runs stored, nothing sent yet) whose job changed after
    /// they were prepared: their runs go and they are `scheduled` again, to be dispatched with the
    /// job as it is now. Returns the ids taken back. Only the owner calls this, for fires it took
    /// out of a send, so none of them went out. Each gets its lease back, until `planned_at +
    /// lease_ms` as at its claim.
    pub async fn unprepare_fires(
        &self,
        fire_ids: &[i64],
        node: &str,
        lease_ms: i64,
    ) -> StoreResult<Vec<i64>> {
        let mut back = Vec::with_capacity(fire_ids.len());
        for chunk in fire_ids.chunks(500) {
            let begin = self.begin_write();
            let ids: Vec<i64> = with_pool!(self, pool => {
                let mut tx = pool.begin_with(begin).await?;
                let mut sel = QueryBuilder::new("SELECT id FROM fires WHERE +state = 'triggering' AND owner = ");
                sel.push_bind(node);
                super::fires::push_in(&mut sel, "id", chunk);
                let ids: Vec<i64> = sel.build_query_scalar().fetch_all(&mut *tx).await?;
                if !ids.is_empty() {
                    let mut del = QueryBuilder::new("DELETE FROM runs WHERE 1 = 1");
                    super::fires::push_in(&mut del, "fire_id", &ids);
                    del.build().execute(&mut *tx).await?;
                    let mut upd = QueryBuilder::new("UPDATE fires SET state = 'scheduled', total_items = 0, claim_expires_at = planned_at + ");
                    upd.push_bind(lease_ms).push(" WHERE 1 = 1");
                    super::fires::push_in(&mut upd, "id", &ids);
                    upd.build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
                ids
            });
            back.extend(ids);
        }
        Ok(back)
    }

    /// Closes claimed fires without dispatching them (misfired, job stopped or deleted), where
    /// `node` still owns them, a few statements per chunk: an overloaded admin skips thousands of
    /// misfired fires a second, and a statement each made it fall further behind. A skipped
    /// FIX_DELAY fire is an end its job's next fire is planned from: those get a `follow_ups`
    /// row in the same transaction and are returned, for the caller to announce.
    pub async fn skip_claims(
        &self,
        fire_ids: &[i64],
        node: &str,
        message: &Message,
        now: i64,
    ) -> StoreResult<Vec<FireEnded>> {
        let dialect = self.dialect();
        let begin = self.begin_write();
        let mut ended = Vec::new();
        for chunk in fire_ids.chunks(500) {
            let ends = with_pool!(self, pool => {
                let mut tx = pool.begin_with(begin).await?;
                let mut qb = QueryBuilder::new("UPDATE fires SET state = 'skipped', message = ");
                qb.push_bind(&message.text).push(", message_note = ").push_bind(&message.note)
                    .push(", finished_at = ").push_bind(now)
                    .push(", claim_expires_at = 0 WHERE +state = 'scheduled' AND owner = ").push_bind(node);
                super::fires::push_in(&mut qb, "id", chunk);
                qb.build().execute(&mut *tx).await?;
                let mut sel = QueryBuilder::new("SELECT id, job_id FROM fires WHERE state = 'skipped' AND trigger_type = 'FIX_DELAY' AND finished_at = ");
                sel.push_bind(now).push(" AND owner = ").push_bind(node);
                super::fires::push_in(&mut sel, "id", chunk);
                let rows: Vec<(i64, i64)> = sel.build_query_as().fetch_all(&mut *tx).await?;
                let ends: Vec<FireEnded> = rows
                    .into_iter()
                    .map(|(fire_id, job_id)| FireEnded { fire_id, job_id, state: FireState::Skipped, at: now, follow_up: true })
                    .collect();
                let refs: Vec<&FireEnded> = ends.iter().collect();
                for piece in cached_chunks(&refs) {
                    super::fires::follow_ups_insert(dialect, piece).build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
                ends
            });
            ended.extend(ends);
        }
        Ok(ended)
    }

    /// Gives claims back (shutdown): the fire rows still `scheduled` and owned by `node` go, and
    /// each job's next planned time moves back to the earliest of its fires given back (unless
    /// it is earlier already, or the job was stopped), a transaction per chunk of fires. Returns
    /// how many fires were given back. One fire at a time, an admin with a few seconds of claims
    /// at 1 000 fires a second made about 4 000 statements on its way out.
    pub async fn unclaim(&self, fire_ids: &[i64], node: &str) -> StoreResult<u64> {
        let dialect = self.dialect();
        let begin = self.begin_write();
        let lock = match dialect {
            Dialect::Sqlite => "",
            Dialect::MySql => " FOR UPDATE",
        };
        let mut given_back = 0;
        for chunk in fire_ids.chunks(ROWS_PER_STATEMENT) {
            given_back += with_pool!(self, pool => {
                let mut tx = pool.begin_with(begin).await?;
                let mut sel = QueryBuilder::new("SELECT id, job_id, planned_at FROM fires WHERE state = 'scheduled' AND owner = ");
                sel.push_bind(node);
                super::fires::push_in(&mut sel, "id", chunk);
                sel.push(lock);
                let rows: Vec<(i64, i64, i64)> = sel.build_query_as().fetch_all(&mut *tx).await?;
                if !rows.is_empty() {
                    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
                    let mut del = QueryBuilder::new("DELETE FROM fires WHERE 1 = 1");
                    super::fires::push_in(&mut del, "id", &ids);
                    del.build().execute(&mut *tx).await?;
                    let mut earliest: std::collections::BTreeMap<i64, i64> = Default::default();
                    for (_, job, at) in &rows {
                        let e = earliest.entry(*job).or_insert(*at);
                        *e = (*e).min(*at);
                    }
                    let jobs: Vec<[Option<i64>; 2]> =
                        earliest.into_iter().map(|(job, at)| [Some(job), Some(at)]).collect();
                    for part in jobs.chunks(ROWS_PER_STATEMENT) {
                        update_joined(dialect, "jobs", part, |qb| {
                            qb.push("next_fire_at = v.column2");
                        }, " AND jobs.enabled = 1 AND (jobs.next_fire_at IS NULL OR jobs.next_fire_at > v.column2)")
                        .build().execute(&mut *tx).await?;
                    }
                }
                tx.commit().await?;
                rows.len() as u64
            });
        }
        Ok(given_back)
    }

    /// Drops the not yet dispatched fires of a job (it was edited, stopped or deleted): those
    /// claimed, and those the scheduler prepared (runs stored) for `unsent_from` or later, with
    /// their runs. A prepared fire is sent at its planned time after a last look at its job
    /// ([`crate::scheduler::CHECK_AHEAD_MS`] before): one planned earlier than `unsent_from` may
    /// have passed that look and be going out, so it is left to the look (which takes it back
    /// if it saw this change) or to its send.
    pub async fn cancel_scheduled(&self, job_id: i64, unsent_from: i64) -> StoreResult<u64> {
        let begin = self.begin_write();
        let n = with_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM fires WHERE job_id = ? AND (state = 'scheduled' OR (state = 'triggering' AND dispatched_at = 0 AND owner <> '' AND planned_at >= ?))")
                .bind(job_id).bind(unsent_from).fetch_all(&mut *tx).await?;
            if !ids.is_empty() {
                let mut del = QueryBuilder::new("DELETE FROM runs WHERE 1 = 1");
                super::fires::push_in(&mut del, "fire_id", &ids);
                del.build().execute(&mut *tx).await?;
                let mut del = QueryBuilder::new("DELETE FROM fires WHERE 1 = 1");
                super::fires::push_in(&mut del, "id", &ids);
                del.build().execute(&mut *tx).await?;
            }
            tx.commit().await?;
            ids.len() as u64
        });
        Ok(n)
    }

    /// Plans the next FIX_DELAY fire once the previous one, planned at `planned_at`, finished (if
    /// the job still runs, nothing else planned it, and no later fire was claimed meanwhile:
    /// a follow-up done a second time, by the sweep, must not plan a fire beside one running).
    pub async fn plan_after_finish(
        &self,
        job_id: i64,
        planned_at: i64,
        next: i64,
    ) -> StoreResult<()> {
        with_pool!(self, pool => sqlx::query("UPDATE jobs SET next_fire_at = ? WHERE id = ? AND enabled = 1 AND next_fire_at IS NULL AND (last_fire_at IS NULL OR last_fire_at <= ?)")
            .bind(next).bind(job_id).bind(planned_at).execute(pool).await.map(Done::from))?;
        Ok(())
    }

    /// Follow-ups of fires that ended before `before` and are still not done: an admin stopped
    /// or died between a fire's end and its follow-up. Oldest first.
    pub async fn stale_follow_ups(&self, before: i64, limit: i64) -> StoreResult<Vec<FireEnded>> {
        let rows: Vec<(i64, i64, String, i64)> = with_read_pool!(self, pool => sqlx::query_as("SELECT fire_id, job_id, state, created_at FROM follow_ups WHERE created_at < ? ORDER BY created_at LIMIT ?")
            .bind(before).bind(limit).fetch_all(pool).await)?;
        Ok(rows
            .into_iter()
            .map(|(fire_id, job_id, state, at)| FireEnded {
                fire_id,
                job_id,
                // Only ends are written there: succeeded, failed, skipped.
                state: FireState::parse(&state).unwrap_or(FireState::Failed),
                at,
                follow_up: true,
            })
            .collect())
    }

    /// Clears the follow-ups of these ends, done. A fire that ended again since keeps its row.
    pub async fn follow_ups_done(&self, ended: &[FireEnded]) -> StoreResult<()> {
        if !ended.iter().any(|e| e.follow_up) {
            return Ok(());
        }
        with_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            for e in ended.iter().filter(|e| e.follow_up) {
                sqlx::query("DELETE FROM follow_ups WHERE fire_id = ? AND created_at <= ?")
                    .bind(e.fire_id).bind(e.at).execute(&mut *tx).await.map(Done::from)?;
            }
            tx.commit().await?;
        });
        Ok(())
    }

    /// Moves a follow-up's time (its row's `created_at`: the fire's end, until an alarm's claim
    /// makes it the start of the sending lease) from `from` to `to`; false when it is no longer
    /// at `from` (done, or taken over by another admin first).
    pub async fn renew_follow_up(&self, fire_id: i64, from: i64, to: i64) -> StoreResult<bool> {
        let n = with_pool!(self, pool => sqlx::query("UPDATE follow_ups SET created_at = ? WHERE fire_id = ? AND created_at = ?")
            .bind(to).bind(fire_id).bind(from).execute(pool).await.map(Done::from))?
        .rows_affected();
        Ok(n == 1)
    }

    /// Runs whose retry time has come, oldest first.
    pub async fn due_retries(&self, now: i64, limit: i64) -> StoreResult<Vec<(i64, i64)>> {
        Ok(with_read_pool!(self, pool => sqlx::query_as(DUE_RETRIES)
            .bind(now).bind(limit).fetch_all(pool).await)?)
    }

    /// Takes a due retry (compare-and-set on its time, so one admin runs it).
    pub async fn take_retry(&self, run_id: i64, retry_at: i64) -> StoreResult<bool> {
        let n = with_pool!(self, pool => sqlx::query("UPDATE runs SET retry_at = NULL WHERE id = ? AND retry_at = ?")
            .bind(run_id).bind(retry_at).execute(pool).await.map(Done::from))?
        .rows_affected();
        Ok(n == 1)
    }

    /// Plans retries of failed runs and puts their failed fire back to `running`. False (and
    /// nothing changed) when the fire is no longer `failed`: its follow-up was done already.
    pub async fn schedule_retries(
        &self,
        fire_id: i64,
        runs: &[(i64, i64)],
        message: &Message,
    ) -> StoreResult<bool> {
        let moved = with_pool!(self, pool => {
            // Runs before their fire, the order every writer locks them in.
            let mut tx = pool.begin().await?;
            for (run_id, at) in runs {
                sqlx::query("UPDATE runs SET retry_at = ? WHERE id = ?").bind(*at).bind(*run_id).execute(&mut *tx).await.map(Done::from)?;
            }
            let moved = sqlx::query("UPDATE fires SET state = 'running', finished_at = 0, message = ?, message_note = ? WHERE id = ? AND state = 'failed'")
                .bind(&message.text).bind(&message.note).bind(fire_id).execute(&mut *tx).await.map(Done::from)?.rows_affected() == 1;
            if moved {
                tx.commit().await?;
            } else {
                tx.rollback().await?;
            }
            moved
        });
        Ok(moved)
    }

    /// Moves a fire's alarm state (`crate::alarm::state`) from `from` to `to`; true for the one
    /// caller that moved it (so of two admins claiming an alarm, one sends it).
    pub async fn move_alarm_state(&self, fire_id: i64, from: i64, to: i64) -> StoreResult<bool> {
        let n = with_pool!(self, pool => sqlx::query("UPDATE fires SET alarm_state = ? WHERE id = ? AND alarm_state = ?")
            .bind(to).bind(fire_id).bind(from).execute(pool).await.map(Done::from))?
        .rows_affected();
        Ok(n == 1)
    }

    /// Open runs that may be lost: every run an executor accepted, and runs still waiting for
    /// their dispatch since before `unsent_before`. Only what the watch judges them by is read.
    ///
    /// Up to `limit` of them from where `cursor` points: the running ones, then the ones still
    /// `triggering`, each oldest first. The watch pages through them, one page a sweep: the
    /// cursor moves to this page's last run when the page is full, and back to the start after a
    /// shorter one. A page that comes back empty although the cursor was not at the start (the
    /// open runs ended exactly at the previous page's end, or those after it have since ended)
    /// is read again from the start: a sweep is never spent on an empty page while runs are open.
    ///
    /// The watch asks every second, so a page must be a range of the state index read from the
    /// cursor on: the order is the index's own, (state, created_at, id), which the index holds
    /// with the primary key at its end. Paged by id instead, both databases read and sorted the
    /// open runs of a state for each page, up to all of them (a sweep over 20 000 long runs read
    /// all 20 000 to return 5 000: docs/benchmarks.md, thirty-sixth round). MariaDB chose to walk the primary key instead whenever its statistics were
    /// taken while many runs were open, as under load: every sweep then read the whole table (0.4
    /// s for 430 000 runs, growing with the history kept), so on MySQL the index is forced.
    pub async fn open_runs(
        &self,
        unsent_before: i64,
        cursor: &mut OpenRunsCursor,
        limit: i64,
    ) -> StoreResult<Vec<OpenRun>> {
        let sql = open_runs_sql(self.dialect());
        let from = *cursor;
        let (mut page, mut next) = self
            .open_runs_from(&sql, unsent_before, from, limit)
            .await?;
        if page.is_empty() && from != OpenRunsCursor::default() {
            (page, next) = self
                .open_runs_from(&sql, unsent_before, OpenRunsCursor::default(), limit)
                .await?;
        }
        *cursor = next.unwrap_or_default();
        Ok(page)
    }

    /// Up to `limit` open runs from `at` on, running ones then unsent ones, with where the next
    /// page starts when this one is full (`None`: the open runs ended within it).
    async fn open_runs_from(
        &self,
        sql: &str,
        unsent_before: i64,
        mut at: OpenRunsCursor,
        limit: i64,
    ) -> StoreResult<(Vec<OpenRun>, Option<OpenRunsCursor>)> {
        let mut page: Vec<OpenRun> = Vec::new();
        loop {
            let (state, created_before) = if at.triggering {
                ("triggering", unsent_before)
            } else {
                ("running", i64::MAX)
            };
            let (after_created, after_id) = at.after.unwrap_or((i64::MIN, i64::MIN));
            let want = limit.max(1) - page.len() as i64;
            let rows = with_read_pool!(self, pool => sqlx::query_as::<_, OpenRun>(sql)
                .bind(state).bind(created_before).bind(after_created).bind(after_created)
                .bind(after_id).bind(want).fetch_all(pool).await)?;
            let full = rows.len() as i64 == want;
            page.extend(rows);
            if full {
                let last = page.last().expect("a full page has a last run");
                let next = OpenRunsCursor {
                    triggering: at.triggering,
                    after: Some((last.created_at, last.id)),
                };
                return Ok((page, Some(next)));
            }
            if at.triggering {
                return Ok((page, None));
            }
            at = OpenRunsCursor {
                triggering: true,
                after: None,
            };
        }
    }
}

/// Where the lost-run watch's next page of open runs starts ([`Store::open_runs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenRunsCursor {
    /// Past the running runs, among the ones still `triggering`.
    triggering: bool,
    /// The `created_at` and id of the last run read in that state (`None`: from its first).
    after: Option<(i64, i64)>,
}

/// One page of the open runs in one state: `created_at` below a bound, after a run, in the order
/// of `idx_runs_state`. The lower bound on `created_at` is what makes it a range of the index;
/// the `OR` only skips the runs of the same millisecond up to the cursor's.
fn open_runs_sql(dialect: Dialect) -> String {
    let hint = match dialect {
        Dialect::MySql => " FORCE INDEX (idx_runs_state)",
        Dialect::Sqlite => "",
    };
    format!(
        "SELECT id, fire_id, job_id, group_id, executor_address, created_at, \
         NULLIF(dispatched_at, 0) AS dispatched_at, state FROM runs{hint} WHERE state = ? \
         AND created_at < ? AND created_at >= ? AND (created_at > ? OR id > ?) \
         AND superseded = 0 ORDER BY created_at, id LIMIT ?"
    )
}

#[cfg(test)]
mod tests {
    use super::{open_runs_sql, Dialect, Store, DUE_RETRIES, EXPIRED_LEASES};
    use sqlx::{Connection, Row};

    /// A store on a new SQLite file, with the folder that holds it.
    async fn scratch_sqlite() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}/s.db", dir.path().display()))
            .await
            .unwrap();
        (dir, store)
    }

    fn sqlite_reader(store: &Store) -> &sqlx::SqlitePool {
        let crate::store::Db::Sqlite { read, .. } = &store.db else {
            unreachable!("a SQLite URL gives a SQLite store")
        };
        read
    }

    /// A page of the lost-run watch's open runs is a range of the state index read in the index's
    /// order, on both databases: neither sorts every open run of a state for each page. MariaDB
    /// is reached as the integration tests reach it (`admin/tests/common`).
    #[tokio::test]
    async fn open_runs_pages_are_ranges_of_the_state_index() {
        // A page of running runs after (5, 7), as a sweep asks for one.
        macro_rules! binds {
            ($sql:expr) => {
                sqlx::query($sql)
                    .bind("running")
                    .bind(i64::MAX)
                    .bind(5i64)
                    .bind(5i64)
                    .bind(7i64)
                    .bind(100i64)
            };
        }
        let (_dir, store) = scratch_sqlite().await;
        let read = sqlite_reader(&store);
        let plan = format!("EXPLAIN QUERY PLAN {}", open_runs_sql(Dialect::Sqlite));
        let details: Vec<String> = binds!(&plan)
            .fetch_all(read)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>(3))
            .collect();
        assert!(
            details.iter().any(|d| d.contains("idx_runs_state"))
                && !details.iter().any(|d| d.contains("TEMP B-TREE")),
            "{details:?}"
        );
        store.close().await;

        if std::env::var("SHARDLINE_TEST_SKIP_MYSQL").is_ok_and(|v| v == "1") {
            return;
        }
        let server = std::env::var("SHARDLINE_TEST_MYSQL_URL")
            .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_string());
        let name = format!("sl_test_plan_{}", std::process::id());
        let mut admin = sqlx::MySqlConnection::connect(&format!("{server}/mysql"))
            .await
            .expect("MariaDB is reachable");
        sqlx::query(&format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
            .execute(&mut admin)
            .await
            .unwrap();
        let store = Store::connect(&format!("{server}/{name}")).await.unwrap();
        let crate::store::Db::MySql(pool) = &store.db else {
            unreachable!("a MySQL URL gives a MySQL store")
        };
        let plan = format!("EXPLAIN {}", open_runs_sql(Dialect::MySql));
        let rows: Vec<(Option<String>, Option<String>)> = binds!(&plan)
            .fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get("key"), r.get("Extra")))
            .collect();
        store.close().await;
        sqlx::query(&format!("DROP DATABASE `{name}`"))
            .execute(&mut admin)
            .await
            .unwrap();
        assert!(
            rows.iter()
                .all(|(key, extra)| key.as_deref() == Some("idx_runs_state")
                    && !extra.as_deref().unwrap_or("").contains("filesort")),
            "{rows:?}"
        );
    }

    /// The two sweeps run every second over tables that keep their history; each must read its
    /// partial index (a handful of entries), never the table.
    #[tokio::test]
    async fn sweeps_read_their_partial_indexes_on_sqlite() {
        let (_dir, store) = scratch_sqlite().await;
        let read = sqlite_reader(&store);
        for (sql, index) in [
            (EXPIRED_LEASES, "idx_fires_lease"),
            (DUE_RETRIES, "idx_runs_retry"),
        ] {
            let plan: Vec<(i64, i64, i64, String)> =
                sqlx::query_as(&format!("EXPLAIN QUERY PLAN {sql}"))
                    .bind(0i64)
                    .bind(10i64)
                    .fetch_all(read)
                    .await
                    .unwrap();
            let details: Vec<&str> = plan.iter().map(|r| r.3.as_str()).collect();
            assert!(
                details.iter().any(|d| d.contains(index))
                    && !details.iter().any(|d| d.starts_with("SCAN")),
                "{sql}: {details:?}"
            );
        }
    }
}
