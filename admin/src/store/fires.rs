//! Fires (trigger events) and their runs (one per shard or item and attempt).

use std::collections::{BTreeMap, HashMap, HashSet};

use sqlx::{Connection, QueryBuilder};

use super::{
    cached_chunks, list_page, padded, update_joined, with_pool, with_read_pool, Done, Store,
    StoreResult, ROWS_PER_STATEMENT,
};
use crate::model::{Fire, FireState, Run, RunState};
use crate::note::Message;

// Send and finish times are stored as 0 until they happen (so that setting them rewrites a MySQL
// row in place; migrations/mysql/0004_times_in_place.sql) and read as `None` then. Likewise the
// answer of a run its executor accepted is stored as code 200 with no message, and read as
// `accepted by <address>` with the note `accepted_by` (see `RunUpdate::trigger_msg`); the
// English here is `NoteKind::AcceptedBy`'s, which the store tests hold it to.
const FIRE_COLS: &str = "id, job_id, group_id, trigger_type, planned_at, sched_key, params, state, total_items, message, message_note, owner, claim_expires_at, parent_fire_id, children_done, alarm_state, created_at, NULLIF(dispatched_at, 0) AS dispatched_at, NULLIF(finished_at, 0) AS finished_at";
pub(crate) const RUN_COLS: &str = "id, fire_id, job_id, group_id, shard_index, shard_total, attempt, superseded, executor_address, handler, params, item_param, state, trigger_code, CASE WHEN trigger_code = 200 AND trigger_msg = '' THEN CONCAT('accepted by ', executor_address) ELSE trigger_msg END AS trigger_msg, CASE WHEN trigger_code = 200 AND trigger_msg = '' THEN json_object('code', 'accepted_by', 'params', json_object('address', executor_address)) ELSE trigger_note END AS trigger_note, handle_code, handle_msg, handle_note, log_date_time, created_at, NULLIF(dispatched_at, 0) AS dispatched_at, NULLIF(finished_at, 0) AS finished_at, retry_at, retries";

/// Longest fire message kept; a longer one is cut (at a character boundary).
const MESSAGE_MAX_BYTES: usize = 4000;

/// A run to create (the fire id is filled in by the store).
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    pub shard_index: i64,
    pub shard_total: i64,
    pub attempt: i64,
    /// Retries of the item before this run (failovers are attempts, not retries).
    pub retries: i64,
    pub executor_address: String,
    pub handler: String,
    pub params: String,
    pub item_param: Option<String>,
}

impl NewRun {
    /// The next attempt of `run`'s item (same index, total and parameters) on `executor_address`:
    /// a failover or a retry.
    pub fn next_attempt(run: &Run, executor_address: String) -> NewRun {
        NewRun {
            shard_index: run.shard_index,
            shard_total: run.shard_total,
            attempt: run.attempt + 1,
            retries: run.retries,
            executor_address,
            handler: run.handler.clone(),
            params: run.params.clone(),
            item_param: run.item_param.clone(),
        }
    }
}

/// A claimed fire's planned runs, for [`Store::add_runs_to_fires`].
#[derive(Debug, Clone, PartialEq)]
pub struct FireRuns {
    pub fire_id: i64,
    pub job_id: i64,
    pub group_id: i64,
    /// Empty: the fire fails (nothing could be planned).
    pub runs: Vec<NewRun>,
    /// Why the plan is what it is ("no online executor in the group", maxNode, a probe's log),
    /// kept as the fire's message.
    pub note: Option<Message>,
}

/// The result of sending a run to its executor.
#[derive(Debug, Clone, PartialEq)]
pub struct RunUpdate {
    pub run_id: i64,
    pub fire_id: i64,
    /// `Running` when the executor accepted it, `Failed` otherwise.
    pub state: RunState,
    pub executor_address: String,
    pub trigger_code: i64,
    /// The answer's message; none for the usual acceptance (code 200), which the row keeps
    /// as none and `RUN_COLS` reads back as `accepted by <address>`. Written out, it made every
    /// run's row longer at its answer, and InnoDB moves a row that changes size instead of
    /// updating it in place: the results' update of 300 000 runs took mysqld 7.5 s with the
    /// text and 5.2–5.7 s without (docs/benchmarks.md, twenty-fifth round).
    pub trigger_msg: Message,
    /// When this run's request started.
    pub at: i64,
    /// When the fire's requests started going out (its dispatch round): the fire row keeps the
    /// first such time as its dispatch time.
    pub fire_sent_at: i64,
}

/// How the runs [`Store::add_attempts`] replaces end, written in the transaction that adds their
/// replacements, so that no reader (the results writer refreshing the fire for a sibling's
/// result) sees an item ended without its replacement, which would make the fire look failed.
#[derive(Debug, Clone, Copy)]
pub enum Replacing<'a> {
    /// They have ended already (a retry of a failed run).
    Ended,
    /// They are declared lost with this message, if still open (their executor died).
    Lost(&'a Message),
    /// Their requests got no answer: each one's failed send (matched by run id) is its end, if
    /// it is still `triggering` (shard failover).
    Unanswered(&'a [RunUpdate]),
    /// They are declared lost with this message if still waiting for their first send (an admin
    /// that died stored them): one its admin sent after all ([`Store::claim_sends`]) is kept.
    Unsent(&'a Message),
}

/// A fire whose requests went out, as [`Store::store_results`] sees it.
#[derive(Clone, Copy)]
struct FireSend {
    /// When its requests started going out (the earliest round in the batch).
    at: i64,
    /// Whether an executor accepted one of its runs.
    accepted: bool,
}

/// What happened to one callback item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackOutcome {
    /// The run took this final state.
    Applied { run_id: i64, fire_id: i64 },
    /// The run already had a final result (first result wins).
    Duplicate,
    /// No run has this id.
    Unknown,
}

/// A fire that just reached a final state (children, alarms, retries and FIX_DELAY follow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FireEnded {
    pub fire_id: i64,
    pub job_id: i64,
    pub state: FireState,
    /// When it ended (epoch ms): the time of its `follow_ups` row, which the claim of its
    /// alarm moves on ([`Store::renew_follow_up`]).
    pub at: i64,
    /// Whether something follows (a failure; a success of a job with child jobs or of a
    /// FIX_DELAY job; a FIX_DELAY fire skipped): then a `follow_ups` row was written with the
    /// end, and stays until the follow-up is done ([`Store::follow_ups_done`]).
    pub follow_up: bool,
}

/// Filters of the two history lists, the fires and the runs; a field that is set narrows the list.
#[derive(Debug, Clone, Default)]
pub struct HistoryFilter {
    pub group_ids: Option<Vec<i64>>,
    pub job_id: Option<i64>,
    /// The fire itself in the fire list; its runs in the run list.
    pub fire_id: Option<i64>,
    pub state: Option<String>,
    /// Epoch ms, inclusive: a fire's planned time, a run's creation.
    pub from_ms: Option<i64>,
    /// Epoch ms, exclusive.
    pub to_ms: Option<i64>,
    pub offset: i64,
    pub limit: i64,
}

/// Recomputes the state of the fires `$ids` from their current runs inside the transaction `$tx`
/// and evaluates to the [`FireEnded`] of those that just became final. The fires are read with
/// `$lock` (`FOR UPDATE` on MySQL; SQLite's transaction holds the write lock already).
///
/// `$sends` holds the fires whose requests just went out (fire → send time, whether an executor
/// accepted a run): a fire this moves takes its send time in the same write and leaves the map;
/// the caller writes the others.
///
/// `$known` holds fires whose one run was given its end in this transaction, with that end: a
/// fire of one item among them needs no count of its runs (on MySQL, where the count is a
/// statement of its own).
macro_rules! refresh_in_tx {
    ($tx:ident, $dialect:expr, $ids:expr, $now:expr, $lock:expr, $sends:expr, $known:expr) => {{
        let dialect: super::Dialect = $dialect;
        let chunk: &[i64] = $ids;
        let now: i64 = $now;
        let lock: &str = $lock;
        let sends: &mut HashMap<i64, FireSend> = $sends;
        let known: &HashMap<i64, &str> = $known;
        let mut current: Vec<(i64, i64, String)> = Vec::with_capacity(chunk.len());
        let mut by_fire: std::collections::HashMap<i64, Vec<(String, i64)>> =
            std::collections::HashMap::with_capacity(chunk.len());
        if lock.is_empty() {
            // SQLite: the transaction's write lock covers every row, so one joined read gives
            // each fire with its run counts. (On MySQL a locking read of the join would lock the
            // fires' other runs after the runs of the batch, in the opposite order to a batch
            // holding one of them and waiting for the fire: the two reads below cannot deadlock.)
            let mut qb = QueryBuilder::new("SELECT f.id, f.job_id, f.state, r.state, COUNT(r.id) FROM fires f LEFT JOIN runs r ON r.fire_id = f.id AND r.superseded = 0 WHERE 1 = 1");
            push_in(&mut qb, "f.id", chunk);
            qb.push(" GROUP BY f.id, r.state");
            let rows: Vec<(i64, i64, String, Option<String>, i64)> =
                qb.build_query_as().fetch_all(&mut *$tx).await?;
            for (fire, job, fire_state, run_state, n) in rows {
                let counts = by_fire.entry(fire).or_insert_with(|| {
                    current.push((fire, job, fire_state));
                    Vec::new()
                });
                if let Some(st) = run_state {
                    counts.push((st, n));
                }
            }
        } else {
            let mut qb = QueryBuilder::new("SELECT id, job_id, state, total_items FROM fires WHERE 1 = 1");
            push_in(&mut qb, "id", chunk);
            qb.push(lock);
            let fires: Vec<(i64, i64, String, i64)> = qb.build_query_as().fetch_all(&mut *$tx).await?;
            let mut to_count = Vec::with_capacity(fires.len());
            for (fire, job, fire_state, total) in fires {
                match known.get(&fire) {
                    Some(run_state) if total == 1 => {
                        by_fire.insert(fire, vec![(run_state.to_string(), 1)]);
                    }
                    _ => to_count.push(fire),
                }
                current.push((fire, job, fire_state));
            }
            if !to_count.is_empty() {
                let mut qb = QueryBuilder::new(format!(
                    "SELECT fire_id, state, COUNT(*) FROM {} WHERE superseded = 0",
                    super::Dialect::MySql.runs_by_fire()
                ));
                push_in(&mut qb, "fire_id", &to_count);
                qb.push(" GROUP BY fire_id, state");
                let counts: Vec<(i64, String, i64)> = qb.build_query_as().fetch_all(&mut *$tx).await?;
                for (fire, state, n) in counts {
                    by_fire.entry(fire).or_default().push((state, n));
                }
            }
        }
        // Only the writer that moves the fire out of an open state reports it as final;
        // claimed fires that were never started keep their own state.
        let mut moves: BTreeMap<(&'static str, Option<i64>), Vec<i64>> = BTreeMap::new();
        let mut changed = Vec::new();
        for (fire_id, job_id, old) in &current {
            let state = fire_state_of(by_fire.get(fire_id).map_or(&[][..], Vec::as_slice));
            if old == state.as_str() || old == "scheduled" || old == "skipped" {
                continue;
            }
            let sent_at = sends.remove(fire_id).map(|s| s.at);
            moves
                .entry((state.as_str(), sent_at))
                .or_default()
                .push(*fire_id);
            if matches!(state, FireState::Succeeded | FireState::Failed) {
                changed.push(FireEnded {
                    fire_id: *fire_id,
                    job_id: *job_id,
                    state,
                    at: now,
                    follow_up: state == FireState::Failed,
                });
            }
        }
        for ((state, sent_at), ids) in &moves {
            let finished = matches!(*state, "succeeded" | "failed");
            let mut qb = QueryBuilder::new("UPDATE fires SET state = ");
            qb.push_bind(*state)
                .push(", finished_at = ")
                .push_bind(if finished { now } else { 0 });
            if let Some(at) = sent_at {
                qb.push(", dispatched_at = COALESCE(NULLIF(dispatched_at, 0), ")
                    .push_bind(*at)
                    .push(")");
            }
            qb.push(" WHERE 1 = 1");
            push_in(&mut qb, "id", ids);
            qb.build().execute(&mut *$tx).await?;
        }
        // What follows the ends is written with them, so that an admin that stops before doing
        // it leaves it to be found (migrations/*/00*_follow_ups.sql): every failure, and the
        // successes of jobs with child jobs or a FIX_DELAY schedule (a read of their jobs, by
        // primary key and without locks; most successes have nothing to follow).
        let mut succeeded: Vec<i64> = changed
            .iter()
            .filter(|e| e.state == FireState::Succeeded)
            .map(|e| e.job_id)
            .collect();
        if !succeeded.is_empty() {
            succeeded.sort_unstable();
            succeeded.dedup();
            let mut qb = QueryBuilder::new(
                "SELECT id FROM jobs WHERE (child_job_ids <> '' OR schedule_type = 'FIX_DELAY')",
            );
            push_in(&mut qb, "id", &succeeded);
            let follow: HashSet<i64> = qb.build_query_scalar().fetch_all(&mut *$tx).await?.into_iter().collect();
            for e in changed.iter_mut() {
                e.follow_up |= follow.contains(&e.job_id);
            }
        }
        let follow: Vec<&FireEnded> = changed.iter().filter(|e| e.follow_up).collect();
        for piece in cached_chunks(&follow) {
            follow_ups_insert(dialect, piece).build().execute(&mut *$tx).await?;
        }
        changed
    }};
}

/// Executes an `UPDATE` of [`Store::store_results`] that gives runs their result. Where the
/// dialect has `RETURNING` it adds the runs it finished (run → fire) to `$applied`: the write
/// lock is held from `BEGIN IMMEDIATE`, so the runs returned are those whose first result this
/// is. (On MySQL they were read and locked before.)
macro_rules! finish_runs {
    ($tx:ident, $qb:expr, $returning:expr, $applied:expr) => {{
        let mut qb = $qb;
        if $returning {
            qb.push(" RETURNING id, fire_id");
            let rows: Vec<(i64, i64)> = qb.build_query_as().fetch_all(&mut *$tx).await?;
            $applied.extend(rows);
        } else {
            qb.build().execute(&mut *$tx).await?;
        }
    }};
}

impl Store {
    /// Creates a fire and its runs in one transaction. When `sched_key` is set and a fire with the
    /// same key exists (another admin fired it), nothing is written and `None` is returned.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_fire(
        &self,
        job_id: i64,
        group_id: i64,
        trigger_type: &str,
        planned_at: i64,
        sched_key: Option<&str>,
        params: &str,
        parent_fire_id: Option<i64>,
        runs: &[NewRun],
        now: i64,
    ) -> StoreResult<Option<(i64, Vec<i64>)>> {
        let insert_fire = format!(
            "{} INTO fires (job_id, group_id, trigger_type, planned_at, sched_key, params, state, total_items, message, owner, claim_expires_at, parent_fire_id, children_done, alarm_state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', '', 0, ?, 0, 0, ?)",
            self.dialect().insert_ignore()
        );
        let state = if runs.is_empty() {
            FireState::Failed
        } else {
            FireState::Triggering
        };
        let out = with_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let res = sqlx::query(&insert_fire)
                .bind(job_id).bind(group_id).bind(trigger_type).bind(planned_at).bind(sched_key)
                .bind(params).bind(state.as_str()).bind(runs.len() as i64).bind(parent_fire_id).bind(now)
                .execute(&mut *tx).await.map(Done::from)?;
            if res.rows_affected() == 0 {
                tx.rollback().await?;
                None
            } else {
                let fire_id = res.insert_id();
                let mut ids = Vec::with_capacity(runs.len());
                // One multi-row INSERT per chunk keeps a 1 000-item fire to a handful of statements.
                let rows: Vec<(i64, i64, i64, &NewRun)> =
                    runs.iter().map(|r| (fire_id, job_id, group_id, r)).collect();
                for chunk in cached_chunks(&rows) {
                    runs_insert_rows(chunk, now).build().execute(&mut *tx).await?;
                }
                if !runs.is_empty() {
                    let got: Vec<i64> = sqlx::query_scalar("SELECT id FROM runs WHERE fire_id = ? ORDER BY id")
                        .bind(fire_id).fetch_all(&mut *tx).await?;
                    ids = got;
                }
                tx.commit().await?;
                Some((fire_id, ids))
            }
        });
        Ok(out)
    }

    /// Adds planned runs to many claimed fires in one transaction. Returns the fires it updated
    /// and their stored runs, by fire then item. A fire without runs fails; a note becomes the
    /// fire's message.
    ///
    /// With `start_for`, the fires are still `scheduled` and this also starts them: only those
    /// `start_for` still owns move on (another admin may have taken some over), and only they get
    /// runs and notes. Starting them here instead of in a transaction of its own saves a write of
    /// every fire row per batch.
    pub async fn add_runs_to_fires(
        &self,
        items: &[FireRuns],
        now: i64,
        start_for: Option<&str>,
    ) -> StoreResult<(HashSet<i64>, Vec<Run>)> {
        if items.is_empty() {
            return Ok((HashSet::new(), vec![]));
        }
        // The fires are updated per distinct (item count, state, note), and the runs of all fires
        // go in shared multi-row INSERTs: a statement per fire was a round trip per fire (notes
        // too: a group without executors gave each of its fires one, a statement each).
        type Key<'a> = (i64, &'static str, Option<(&'a str, Option<&'a str>)>);
        let mut by_total: BTreeMap<Key<'_>, Vec<i64>> = BTreeMap::new();
        for f in items {
            let state = if f.runs.is_empty() {
                FireState::Failed
            } else {
                FireState::Triggering
            };
            let note = f
                .note
                .as_ref()
                .map(|n| (truncate(&n.text, MESSAGE_MAX_BYTES), n.note.as_deref()));
            by_total
                .entry((f.runs.len() as i64, state.as_str(), note))
                .or_default()
                .push(f.fire_id);
        }
        // Only the new ids are needed, by fire and item (each fire is new, so an item has one
        // run): the rest of each run is what was just written, and reading whole rows back copied
        // 22 columns per run. They come with the insert where the database can return them.
        let update_returning = self.dialect().update_returning();
        let insert_returning = self.insert_returning();
        let mut ids: std::collections::HashMap<(i64, i64), i64> = std::collections::HashMap::new();
        let begin = self.begin_write();
        let (started, rows) = with_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            let mut started: HashSet<i64> = HashSet::with_capacity(items.len());
            for ((total, state, note), fire_ids) in &by_total {
                for chunk in fire_ids.chunks(500) {
                    // Out of `scheduled`, the claim's lease ends (the takeover's index).
                    let set = || {
                        let mut upd = QueryBuilder::new("UPDATE fires SET claim_expires_at = 0, total_items = ");
                        upd.push_bind(*total).push(", state = ").push_bind(*state);
                        if let Some((text, note)) = note {
                            upd.push(", message = ").push_bind(*text).push(", message_note = ").push_bind(*note);
                        }
                        upd
                    };
                    let mut upd = set();
                    let Some(node) = start_for else {
                        upd.push(" WHERE 1 = 1");
                        push_in(&mut upd, "id", chunk);
                        upd.build().execute(&mut *tx).await?;
                        started.extend(chunk);
                        continue;
                    };
                    // A fire another admin took over has its owner changed, so only ours match.
                    const OWNED: &str = " WHERE +state = 'scheduled' AND owner = ";
                    upd.push(OWNED).push_bind(node);
                    push_in(&mut upd, "id", chunk);
                    if update_returning {
                        upd.push(" RETURNING id");
                        let won: Vec<i64> = upd.build_query_scalar().fetch_all(&mut *tx).await?;
                        started.extend(won);
                        continue;
                    }
                    // MySQL, whose update cannot say which rows it moved: when it moved the
                    // whole chunk (the usual case), all of it was ours, which saves a locking
                    // read of every fire before the update. Otherwise it is undone (a
                    // savepoint), and the fires still ours are locked, then exactly those moved.
                    let mut attempt = tx.begin().await?;
                    let moved = upd.build().execute(&mut *attempt).await.map(Done::from)?.rows_affected();
                    if moved == chunk.len() as u64 {
                        attempt.commit().await?;
                        started.extend(chunk);
                        continue;
                    }
                    attempt.rollback().await?;
                    let mut sel = QueryBuilder::new("SELECT id FROM fires");
                    sel.push(OWNED).push_bind(node);
                    push_in(&mut sel, "id", chunk);
                    sel.push(" FOR UPDATE");
                    let won: Vec<i64> = sel.build_query_scalar().fetch_all(&mut *tx).await?;
                    if !won.is_empty() {
                        let mut upd = set();
                        upd.push(" WHERE 1 = 1");
                        push_in(&mut upd, "id", &won);
                        upd.build().execute(&mut *tx).await?;
                    }
                    started.extend(won);
                }
            }
            let rows: Vec<(i64, i64, i64, &NewRun)> = items
                .iter()
                .filter(|f| started.contains(&f.fire_id))
                .flat_map(|f| f.runs.iter().map(move |r| (f.fire_id, f.job_id, f.group_id, r)))
                .collect();
            for chunk in cached_chunks(&rows) {
                let mut qb = runs_insert_rows(chunk, now);
                if insert_returning {
                    qb.push(" RETURNING id, fire_id, shard_index");
                    let got: Vec<(i64, i64, i64)> = qb.build_query_as().fetch_all(&mut *tx).await?;
                    ids.extend(got.into_iter().map(|(id, fire, item)| ((fire, item), id)));
                } else {
                    qb.build().execute(&mut *tx).await?;
                }
            }
            tx.commit().await?;
            (started, rows)
        });
        if !insert_returning {
            let fire_ids: Vec<i64> = started.iter().copied().collect();
            for chunk in fire_ids.chunks(500) {
                let runs = self.dialect().runs_by_fire();
                let got: Vec<(i64, i64, i64)> = with_read_pool!(self, pool => {
                    let mut qb = QueryBuilder::new(format!("SELECT id, fire_id, shard_index FROM {runs} WHERE superseded = 0"));
                    push_in(&mut qb, "fire_id", chunk);
                    qb.build_query_as().fetch_all(pool).await?
                });
                ids.extend(got.into_iter().map(|(id, fire, item)| ((fire, item), id)));
            }
        }
        let mut out: Vec<Run> = rows
            .into_iter()
            .filter_map(|(fire_id, job_id, group_id, r)| {
                let id = *ids.get(&(fire_id, r.shard_index))?;
                Some(Run {
                    id,
                    fire_id,
                    job_id,
                    group_id,
                    shard_index: r.shard_index,
                    shard_total: r.shard_total,
                    attempt: r.attempt,
                    retries: r.retries,
                    superseded: 0,
                    executor_address: r.executor_address.clone(),
                    handler: r.handler.clone(),
                    params: r.params.clone(),
                    item_param: r.item_param.clone(),
                    state: RunState::Triggering.as_str().to_string(),
                    trigger_code: 0,
                    trigger_msg: String::new(),
                    trigger_note: None,
                    handle_code: 0,
                    handle_msg: String::new(),
                    handle_note: None,
                    log_date_time: now,
                    created_at: now,
                    dispatched_at: None,
                    finished_at: None,
                    retry_at: None,
                })
            })
            .collect();
        out.sort_by_key(|r| (r.fire_id, r.shard_index));
        Ok((started, out))
    }

    /// The current runs of several fires, by fire then item.
    pub async fn runs_of_fires(&self, fire_ids: &[i64]) -> StoreResult<Vec<Run>> {
        let mut out = Vec::new();
        let runs = self.dialect().runs_by_fire();
        for chunk in fire_ids.chunks(500) {
            let rows = with_read_pool!(self, pool => {
                let mut qb = QueryBuilder::new(format!("SELECT {RUN_COLS} FROM {runs} WHERE superseded = 0"));
                push_in(&mut qb, "fire_id", chunk);
                qb.push(" ORDER BY fire_id, shard_index, id");
                qb.build_query_as::<Run>().fetch_all(pool).await?
            });
            out.extend(rows);
        }
        Ok(out)
    }

    /// Runs by id.
    pub async fn runs_by_ids(&self, ids: &[i64]) -> StoreResult<Vec<Run>> {
        let mut out = Vec::new();
        for chunk in ids.chunks(500) {
            let rows = with_read_pool!(self, pool => {
                let mut qb = QueryBuilder::new(format!("SELECT {RUN_COLS} FROM runs WHERE 1 = 1"));
                push_in(&mut qb, "id", chunk);
                qb.push(" ORDER BY id");
                qb.build_query_as::<Run>().fetch_all(pool).await?
            });
            out.extend(rows);
        }
        Ok(out)
    }

    /// Marks as sent at `now` those of the runs `ids` still waiting for their first send (open,
    /// not replaced, no send recorded), and returns them. An admin that sends late claims its
    /// runs so, against another admin declaring them lost to send them again
    /// ([`Replacing::Unsent`]): under the rows' lock, one of the two gets each run, and it is sent
    /// once.
    pub async fn claim_sends(&self, ids: &[i64], now: i64) -> StoreResult<Vec<i64>> {
        let (begin, lock) = (self.begin_write(), self.dialect().row_lock());
        let mut claimed = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let got = with_pool!(self, pool => {
                let mut tx = pool.begin_with(begin).await?;
                let mut sel = QueryBuilder::new(
                    "SELECT id FROM runs WHERE state = 'triggering' AND superseded = 0 AND dispatched_at = 0",
                );
                push_in(&mut sel, "id", chunk);
                sel.push(lock);
                let got: Vec<i64> = sel.build_query_scalar().fetch_all(&mut *tx).await?;
                if !got.is_empty() {
                    let mut upd = QueryBuilder::new("UPDATE runs SET dispatched_at = ");
                    upd.push_bind(now).push(" WHERE 1 = 1");
                    push_in(&mut upd, "id", &got);
                    upd.build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
                got
            });
            claimed.extend(got);
        }
        Ok(claimed)
    }

    /// Adds new attempts to a fire, each replacing one of its runs (retries, failover), in one
    /// transaction, and puts the fire back to `running`. The replaced runs end as `replacing`
    /// says, in the same transaction; one that is to be ended here but has ended already (its
    /// result arrived meanwhile) keeps its end and gets no replacement, nor does one replaced
    /// already or gone. Returns the ids of the new runs.
    pub async fn add_attempts(
        &self,
        fire: &Fire,
        pairs: &[(i64, NewRun)],
        replacing: Replacing<'_>,
        now: i64,
    ) -> StoreResult<Vec<i64>> {
        let ids = with_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            let mut ids = Vec::with_capacity(pairs.len());
            let mut first_sent: Option<i64> = None;
            // An unsent run is ended only while no send is recorded: its admin may have claimed
            // it for a late send (`claim_sends`).
            let end_lost = match replacing {
                Replacing::Unsent(_) => "UPDATE runs SET state = 'lost', handle_code = 500, handle_msg = ?, handle_note = ?, finished_at = ? WHERE id = ? AND state = 'triggering' AND dispatched_at = 0",
                _ => "UPDATE runs SET state = 'lost', handle_code = 500, handle_msg = ?, handle_note = ?, finished_at = ? WHERE id = ? AND state IN ('triggering', 'running')",
            };
            for (replaced, run) in pairs {
                let ended = match replacing {
                    Replacing::Ended => 1,
                    Replacing::Lost(msg) | Replacing::Unsent(msg) => sqlx::query(end_lost)
                        .bind(&msg.text).bind(&msg.note).bind(now).bind(*replaced).execute(&mut *tx).await?.rows_affected(),
                    Replacing::Unanswered(sends) => match sends.iter().find(|u| u.run_id == *replaced) {
                        Some(u) => {
                            first_sent = Some(first_sent.map_or(u.fire_sent_at, |t| t.min(u.fire_sent_at)));
                            sqlx::query("UPDATE runs SET state = ?, executor_address = ?, trigger_code = ?, trigger_msg = ?, trigger_note = ?, handle_msg = ?, handle_note = ?, dispatched_at = ?, finished_at = ? WHERE id = ? AND state = 'triggering'")
                                .bind(RunState::Failed.as_str()).bind(&u.executor_address).bind(u.trigger_code)
                                .bind(&u.trigger_msg.text).bind(&u.trigger_msg.note).bind(&u.trigger_msg.text).bind(&u.trigger_msg.note)
                                .bind(u.at).bind(u.at).bind(*replaced)
                                .execute(&mut *tx).await?.rows_affected()
                        }
                        None => 0,
                    },
                };
                if ended == 0 {
                    continue;
                }
                // A run replaced already (a second "retry" of the same item) or deleted by a
                // clear since the caller read it gets no new attempt: one would be a second
                // dispatch of the item, the other a run whose fire is gone.
                let superseded = sqlx::query("UPDATE runs SET superseded = 1 WHERE id = ? AND superseded = 0")
                    .bind(*replaced).execute(&mut *tx).await?.rows_affected();
                if superseded == 0 {
                    continue;
                }
                let row = [(fire.id, fire.job_id, fire.group_id, run)];
                let res = runs_insert_rows(&row, now)
                    .build().execute(&mut *tx).await.map(Done::from)?;
                ids.push(res.insert_id());
            }
            if !ids.is_empty() {
                // A fire whose first requests all went unanswered takes its send time here.
                sqlx::query("UPDATE fires SET state = ?, finished_at = 0, dispatched_at = COALESCE(NULLIF(dispatched_at, 0), ?) WHERE id = ?")
                    .bind(FireState::Running.as_str()).bind(first_sent.unwrap_or(0)).bind(fire.id)
                    .execute(&mut *tx).await?;
            }
            tx.commit().await?;
            ids
        });
        Ok(ids)
    }

    /// Stores a batch of run results in one transaction: dispatch answers (`sent`) and executor
    /// callbacks (first result wins, `handleCode 0` is not a result), then the new states of the
    /// fires whose runs finished. Returns one outcome per callback item, in order, and the fires
    /// that just became final.
    ///
    /// A run whose answer and callback are both in the batch is written once, and its fire once
    /// (from `triggering` straight to its end): a short run of a busy second costs one run write
    /// and one fire write here instead of two each. An answer never overrides a final result (the
    /// callback may have come first); a failed dispatch is the run's end only if the run is still
    /// `triggering`. A fire with an accepted run becomes `running`; fires are not refreshed for a
    /// failed dispatch, which the dispatcher fails over first. Each fire of `sent` takes its
    /// send time (`dispatched_at`, kept from the first round) in the same write as its state.
    ///
    /// Alike results share one statement. On SQLite (`BEGIN IMMEDIATE`) the updates return the
    /// runs they finished; on MySQL the runs are read first, `FOR UPDATE` in id order, so what is
    /// read is what the updates find.
    pub async fn store_results(
        &self,
        sent: &[RunUpdate],
        callbacks: &[(i64, i32, String)],
        now: i64,
    ) -> StoreResult<(Vec<CallbackOutcome>, Vec<FireEnded>)> {
        if sent.is_empty() && callbacks.is_empty() {
            return Ok((vec![], vec![]));
        }
        let dialect = self.dialect();
        let (begin, lock) = (self.begin_write(), dialect.row_lock());
        let returning = dialect.update_returning();
        let accepted: HashMap<i64, &RunUpdate> = sent
            .iter()
            .filter(|u| u.state == RunState::Running)
            .map(|u| (u.run_id, u))
            .collect();
        // The first result of each run in the batch is the one tried; a later one for the same
        // run is a duplicate (or unknown, as the first). Alike results share one `UPDATE`; a run
        // also accepted in this batch shares one with the runs alike in both.
        enum Item {
            Done(CallbackOutcome),
            Tried(i64),
            Repeated(i64),
        }
        type ResultKey<'a> = (&'static str, i64, &'a str);
        // An answer's message and note (`crate::note`).
        type SentKey<'a> = (&'a str, i64, &'a str, Option<&'a str>);
        let mut tried: HashSet<i64> = HashSet::with_capacity(callbacks.len());
        // The end each tried run would get, for the fires' refresh (MySQL only, see there).
        let mut ends: HashMap<i64, &'static str> = HashMap::new();
        let mut groups: BTreeMap<ResultKey<'_>, Vec<i64>> = BTreeMap::new();
        let mut merged: BTreeMap<(ResultKey<'_>, SentKey<'_>), Vec<[Option<i64>; 2]>> =
            BTreeMap::new();
        let plan: Vec<Item> = callbacks
            .iter()
            .map(|(run_id, code, msg)| {
                let Some(state) = RunState::from_handle_code(*code, msg) else {
                    return Item::Done(CallbackOutcome::Duplicate);
                };
                if !tried.insert(*run_id) {
                    return Item::Repeated(*run_id);
                }
                if !returning {
                    ends.insert(*run_id, state.as_str());
                }
                let key = (state.as_str(), i64::from(*code), truncate(msg, 15_000));
                match accepted.get(run_id) {
                    Some(u) => merged
                        .entry((
                            key,
                            (
                                u.executor_address.as_str(),
                                u.trigger_code,
                                u.trigger_msg.text.as_str(),
                                u.trigger_msg.note.as_deref(),
                            ),
                        ))
                        .or_default()
                        .push([Some(*run_id), Some(u.at)]),
                    None => groups.entry(key).or_default().push(*run_id),
                }
                Item::Tried(*run_id)
            })
            .collect();
        let mut locked: Vec<i64> = tried.iter().copied().collect();
        if !returning {
            locked.extend(sent.iter().map(|u| u.run_id));
        }
        locked.sort_unstable();
        locked.dedup();
        // The fires whose requests went out: they take their send time (and `running` if an
        // executor accepted a run), in the refresh below if it moves them, else after it.
        let mut sends: HashMap<i64, FireSend> = HashMap::new();
        for u in sent {
            let e = sends.entry(u.fire_id).or_insert(FireSend {
                at: u.fire_sent_at,
                accepted: false,
            });
            e.at = e.at.min(u.fire_sent_at);
            e.accepted |= u.state == RunState::Running;
        }
        let outcomes = with_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            // The runs whose result is applied now (run → fire), and the other runs that exist.
            let mut applied: HashMap<i64, i64> = HashMap::with_capacity(tried.len());
            let mut existing: HashSet<i64> = HashSet::new();
            if !returning {
                // Read and lock the runs first (in id order, as every writer does), so what is
                // read is what the updates find.
                for chunk in locked.chunks(500) {
                    let mut qb = QueryBuilder::new("SELECT id, fire_id, state FROM runs WHERE 1 = 1");
                    push_in(&mut qb, "id", chunk);
                    qb.push(lock);
                    let rows: Vec<(i64, i64, String)> = qb.build_query_as().fetch_all(&mut *tx).await?;
                    for (id, fire, st) in rows {
                        if !tried.contains(&id) {
                            continue;
                        }
                        if st == RunState::Triggering.as_str() || st == RunState::Running.as_str() {
                            applied.insert(id, fire);
                        } else {
                            existing.insert(id);
                        }
                    }
                }
            }
            // A few groups per batch: the message is copied so one closure serves both uses.
            let finish = |qb: &mut QueryBuilder<'_, _>, (st, code, msg): &ResultKey<'_>| {
                qb.push("state = ").push_bind(*st).push(", handle_code = ").push_bind(*code)
                    .push(", handle_msg = ").push_bind(msg.to_string())
                    .push(", finished_at = ").push_bind(now);
            };
            // Answer and result of the same run: one write.
            for ((result, (address, code, msg, note)), rows) in &merged {
                for chunk in rows.chunks(ROWS_PER_STATEMENT) {
                    let qb = update_joined(dialect, "runs", chunk, |qb| {
                        qb.push("executor_address = ").push_bind(*address)
                            .push(", trigger_code = ").push_bind(*code)
                            .push(", trigger_msg = ").push_bind(*msg);
                        push_trigger_note(qb, *note);
                        qb.push(", dispatched_at = v.column2, ");
                        finish(qb, result);
                    }, " AND +state IN ('triggering', 'running')");
                    finish_runs!(tx, qb, returning, applied);
                }
            }
            for (result, ids) in &groups {
                for chunk in ids.chunks(500) {
                    let mut qb = QueryBuilder::new("UPDATE runs SET ");
                    finish(&mut qb, result);
                    qb.push(" WHERE +state IN ('triggering', 'running')");
                    push_in(&mut qb, "id", chunk);
                    finish_runs!(tx, qb, returning, applied);
                }
            }
            if returning {
                // Only the runs not updated need a look: finished already, or unknown.
                let mut missing: Vec<i64> =
                    tried.iter().copied().filter(|id| !applied.contains_key(id)).collect();
                missing.sort_unstable();
                for chunk in missing.chunks(500) {
                    let mut qb = QueryBuilder::new("SELECT id FROM runs WHERE 1 = 1");
                    push_in(&mut qb, "id", chunk);
                    let rows: Vec<i64> = qb.build_query_scalar().fetch_all(&mut *tx).await?;
                    existing.extend(rows);
                }
            }
            // Answers not written with a result: alike answers (every run an executor accepted
            // in one round) share a statement, each run keeping its own send time.
            let mut answers: BTreeMap<(&'static str, SentKey<'_>), Vec<[Option<i64>; 2]>> =
                BTreeMap::new();
            for u in sent {
                let written = u.state == RunState::Running
                    && tried.contains(&u.run_id)
                    && applied.contains_key(&u.run_id);
                if !written {
                    answers
                        .entry((u.state.as_str(), (u.executor_address.as_str(), u.trigger_code, u.trigger_msg.text.as_str(), u.trigger_msg.note.as_deref())))
                        .or_default()
                        .push([Some(u.run_id), Some(u.at)]);
                }
            }
            for ((st, (address, code, msg, note)), rows) in &answers {
                let failed = *st == RunState::Failed.as_str();
                for chunk in rows.chunks(ROWS_PER_STATEMENT) {
                    // The state moves only from `triggering`. An accepted run needs one
                    // statement: its state assignment reads only its own column. A failed
                    // dispatch is also the run's end, whose columns are set only if the state
                    // moves, so it is a statement of its own, first.
                    if failed {
                        update_joined(dialect, "runs", chunk, |qb| {
                            qb.push("finished_at = v.column2, handle_msg = ").push_bind(*msg)
                                .push(", handle_note = ").push_bind(*note)
                                .push(", state = ").push_bind(*st);
                        }, " AND state = 'triggering'").build().execute(&mut *tx).await?;
                    }
                    update_joined(dialect, "runs", chunk, |qb| {
                        qb.push("executor_address = ").push_bind(*address)
                            .push(", trigger_code = ").push_bind(*code)
                            .push(", trigger_msg = ").push_bind(*msg);
                        push_trigger_note(qb, *note);
                        qb.push(", dispatched_at = v.column2");
                        if !failed {
                            qb.push(", state = CASE WHEN state = 'triggering' THEN ")
                                .push_bind(*st).push(" ELSE state END");
                        }
                    }, "").build().execute(&mut *tx).await?;
                }
            }
            let out: Vec<CallbackOutcome> = plan.iter().map(|item| match item {
                Item::Done(o) => *o,
                Item::Tried(id) => match applied.get(id) {
                    Some(fire_id) => CallbackOutcome::Applied { run_id: *id, fire_id: *fire_id },
                    None if existing.contains(id) => CallbackOutcome::Duplicate,
                    None => CallbackOutcome::Unknown,
                },
                Item::Repeated(id) if applied.contains_key(id) || existing.contains(id) => {
                    CallbackOutcome::Duplicate
                }
                Item::Repeated(_) => CallbackOutcome::Unknown,
            }).collect();
            let mut ended = Vec::new();
            // The fires with one run ended here, and that end (none on SQLite: `ends` is empty).
            let mut known: HashMap<i64, &str> = HashMap::with_capacity(ends.len());
            let mut twice: HashSet<i64> = HashSet::new();
            for (run, fire) in &applied {
                if let Some(end) = ends.get(run) {
                    if known.insert(*fire, end).is_some() {
                        twice.insert(*fire);
                    }
                }
            }
            for fire in &twice {
                known.remove(fire);
            }
            let mut fires: Vec<i64> = applied.values().copied().collect();
            fires.sort_unstable();
            fires.dedup();
            for chunk in fires.chunks(500) {
                ended.extend(refresh_in_tx!(tx, dialect, chunk, now, lock, &mut sends, &known));
            }
            // By send time (one or two rounds per batch) and whether a run was accepted; the
            // send time is the first one, kept if a later round (a failover) comes.
            let mut rest: BTreeMap<(i64, bool), Vec<i64>> = BTreeMap::new();
            for (fire_id, send) in &sends {
                rest.entry((send.at, send.accepted)).or_default().push(*fire_id);
            }
            for ((at, accepted), mut ids) in rest {
                ids.sort_unstable();
                for chunk in ids.chunks(500) {
                    let mut qb = QueryBuilder::new("UPDATE fires SET dispatched_at = COALESCE(NULLIF(dispatched_at, 0), ");
                    qb.push_bind(at).push(")");
                    // A fire may be `running` already without a send time: a result of its run
                    // came in a batch before the answer.
                    if accepted {
                        qb.push(", state = CASE WHEN state = 'triggering' THEN 'running' ELSE state END WHERE (state = 'triggering' OR dispatched_at = 0)");
                    } else {
                        qb.push(" WHERE dispatched_at = 0");
                    }
                    push_in(&mut qb, "id", chunk);
                    qb.build().execute(&mut *tx).await?;
                }
            }
            tx.commit().await?;
            (out, ended)
        });
        Ok(outcomes)
    }

    /// Sets a run's final state directly (kill, lost, timeout decided by the admin) if it has none yet.
    pub async fn finish_run(
        &self,
        run_id: i64,
        state: RunState,
        code: i64,
        msg: &Message,
        now: i64,
    ) -> StoreResult<bool> {
        let n = with_pool!(self, pool => sqlx::query("UPDATE runs SET state = ?, handle_code = ?, handle_msg = ?, handle_note = ?, finished_at = ? WHERE id = ? AND state IN ('triggering', 'running')")
            .bind(state.as_str()).bind(code).bind(&msg.text).bind(&msg.note).bind(now).bind(run_id)
            .execute(pool).await.map(Done::from))?
        .rows_affected();
        Ok(n > 0)
    }

    /// Recomputes a fire's state from its current (non-superseded) runs. Returns the new state when
    /// the fire just became final (so the caller can trigger children and alarms once).
    pub async fn refresh_fire_state(
        &self,
        fire_id: i64,
        now: i64,
    ) -> StoreResult<Option<FireState>> {
        Ok(self
            .refresh_fire_states(&[fire_id], now)
            .await?
            .into_iter()
            .next()
            .map(|e| e.state))
    }

    /// [`Store::refresh_fire_state`] for many fires, a chunk per transaction. Returns the fires
    /// that just became final.
    ///
    /// The fires are read and locked first (`BEGIN IMMEDIATE` on SQLite, `FOR UPDATE` on MySQL),
    /// so of two writers refreshing the same fire only one sees it change and reports it; the
    /// fires that change are then updated per new state, a few statements per chunk.
    pub async fn refresh_fire_states(
        &self,
        fire_ids: &[i64],
        now: i64,
    ) -> StoreResult<Vec<FireEnded>> {
        let (begin, lock) = (self.begin_write(), self.dialect().row_lock());
        let mut finals = Vec::new();
        for chunk in fire_ids.chunks(500) {
            let changed = with_pool!(self, pool => {
                let mut tx = pool.begin_with(begin).await?;
                let changed = refresh_in_tx!(tx, self.dialect(), chunk, now, lock, &mut HashMap::new(), &HashMap::new());
                tx.commit().await?;
                changed
            });
            finals.extend(changed);
        }
        Ok(finals)
    }

    pub async fn set_fire_message(&self, fire_id: i64, msg: &Message) -> StoreResult<()> {
        with_pool!(self, pool => sqlx::query("UPDATE fires SET message = ?, message_note = ? WHERE id = ?")
            .bind(truncate(&msg.text, MESSAGE_MAX_BYTES)).bind(&msg.note).bind(fire_id).execute(pool).await.map(Done::from))?;
        Ok(())
    }

    pub async fn get_fire(&self, id: i64) -> StoreResult<Option<Fire>> {
        let sql = format!("SELECT {FIRE_COLS} FROM fires WHERE id = ?");
        Ok(
            with_read_pool!(self, pool => sqlx::query_as::<_, Fire>(&sql).bind(id).fetch_optional(pool).await)?,
        )
    }

    /// Several fires by id (missing ids are simply absent).
    pub async fn get_fires(&self, ids: &[i64]) -> StoreResult<Vec<Fire>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let rows = with_read_pool!(self, pool => {
                let mut qb = QueryBuilder::new(format!("SELECT {FIRE_COLS} FROM fires WHERE 1 = 1"));
                push_in(&mut qb, "id", chunk);
                qb.build_query_as::<Fire>().fetch_all(pool).await?
            });
            out.extend(rows);
        }
        Ok(out)
    }

    /// Every run of a fire, superseded attempts included, by item then attempt.
    pub async fn fire_runs(&self, fire_id: i64) -> StoreResult<Vec<Run>> {
        let sql = format!(
            "SELECT {RUN_COLS} FROM runs WHERE fire_id = ? ORDER BY shard_index, attempt, id"
        );
        Ok(
            with_read_pool!(self, pool => sqlx::query_as::<_, Run>(&sql).bind(fire_id).fetch_all(pool).await)?,
        )
    }

    pub async fn get_run(&self, id: i64) -> StoreResult<Option<Run>> {
        let sql = format!("SELECT {RUN_COLS} FROM runs WHERE id = ?");
        Ok(
            with_read_pool!(self, pool => sqlx::query_as::<_, Run>(&sql).bind(id).fetch_optional(pool).await)?,
        )
    }

    /// Fires matching `f`, newest first, with the total count.
    pub async fn list_fires(&self, f: &HistoryFilter) -> StoreResult<(Vec<Fire>, i64)> {
        fn push_where<'a, DB: sqlx::Database>(qb: &mut QueryBuilder<'a, DB>, f: &'a HistoryFilter)
        where
            i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
            String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
            &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        {
            push_history_where(qb, f, "id", "planned_at");
        }
        let limit = super::page_limit(f.limit);
        let out = list_page!(
            self,
            Fire,
            FIRE_COLS,
            "fires",
            push_where,
            f,
            f.offset.max(0),
            limit
        );
        Ok(out)
    }

    /// Runs matching `f`, newest first, with the total count.
    pub async fn list_runs(&self, f: &HistoryFilter) -> StoreResult<(Vec<Run>, i64)> {
        fn push_where<'a, DB: sqlx::Database>(qb: &mut QueryBuilder<'a, DB>, f: &'a HistoryFilter)
        where
            i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
            String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
            &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        {
            push_history_where(qb, f, "fire_id", "created_at");
        }
        let limit = super::page_limit(f.limit);
        let out = list_page!(
            self,
            Run,
            RUN_COLS,
            "runs",
            push_where,
            f,
            f.offset.max(0),
            limit
        );
        Ok(out)
    }
}

/// The `WHERE` of a history list: `fire_col` is the column that names the fire, `time_col` the
/// one `from_ms` and `to_ms` bound.
fn push_history_where<'a, DB: sqlx::Database>(
    qb: &mut QueryBuilder<'a, DB>,
    f: &'a HistoryFilter,
    fire_col: &str,
    time_col: &str,
) where
    i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    qb.push(" WHERE 1 = 1");
    if let Some(ids) = &f.group_ids {
        push_in(qb, "group_id", ids);
    }
    if let Some(j) = f.job_id {
        qb.push(" AND job_id = ").push_bind(j);
    }
    if let Some(id) = f.fire_id {
        qb.push(format!(" AND {fire_col} = ")).push_bind(id);
    }
    if let Some(s) = &f.state {
        qb.push(" AND state = ").push_bind(s.as_str());
    }
    if let Some(t) = f.from_ms {
        qb.push(format!(" AND {time_col} >= ")).push_bind(t);
    }
    if let Some(t) = f.to_ms {
        qb.push(format!(" AND {time_col} < ")).push_bind(t);
    }
}

/// A fire's state from the count of its current runs per state.
fn fire_state_of(counts: &[(String, i64)]) -> FireState {
    let total: i64 = counts.iter().map(|(_, n)| n).sum();
    let count = |s: RunState| {
        counts
            .iter()
            .find(|(st, _)| st == s.as_str())
            .map_or(0, |(_, n)| *n)
    };
    let triggering = count(RunState::Triggering);
    let open = triggering + count(RunState::Running);
    if total == 0 {
        FireState::Failed
    } else if open > 0 {
        if triggering == total {
            FireState::Triggering
        } else {
            FireState::Running
        }
    } else if count(RunState::Succeeded) == total {
        FireState::Succeeded
    } else {
        FireState::Failed
    }
}

/// The `INSERT` of the `follow_ups` rows of `ends`.
pub(crate) fn follow_ups_insert<'a, DB: sqlx::Database>(
    dialect: super::Dialect,
    ends: &'a [&'a FireEnded],
) -> QueryBuilder<'a, DB>
where
    i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    let mut qb = QueryBuilder::new("INSERT INTO follow_ups (fire_id, job_id, state, created_at) ");
    qb.push_values(ends, |mut row, e| {
        row.push_bind(e.fire_id)
            .push_bind(e.job_id)
            .push_bind(e.state.as_str())
            .push_bind(e.at);
    });
    // A fire that ended again (its retries failed) before its last follow-up was cleared: the
    // row takes the new end, which that clearing leaves alone.
    qb.push(dialect.upsert("fire_id", &["state", "created_at"]));
    qb
}

/// The multi-row `INSERT` of new runs (state `triggering`), of one fire or several: (fire id,
/// job id, group id, run).
fn runs_insert_rows<'a, DB: sqlx::Database>(
    rows: &'a [(i64, i64, i64, &'a NewRun)],
    now: i64,
) -> QueryBuilder<'a, DB>
where
    i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    Option<String>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    let mut qb = QueryBuilder::new("INSERT INTO runs (fire_id, job_id, group_id, shard_index, shard_total, attempt, retries, superseded, executor_address, handler, params, item_param, state, trigger_code, trigger_msg, handle_code, handle_msg, log_date_time, created_at) ");
    qb.push_values(rows, |mut b, (fire_id, job_id, group_id, r)| {
        b.push_bind(*fire_id)
            .push_bind(*job_id)
            .push_bind(*group_id)
            .push_bind(r.shard_index)
            .push_bind(r.shard_total)
            .push_bind(r.attempt)
            .push_bind(r.retries)
            .push_bind(0i64)
            .push_bind(r.executor_address.as_str())
            .push_bind(r.handler.as_str())
            .push_bind(r.params.as_str())
            .push_bind(r.item_param.clone())
            .push_bind(RunState::Triggering.as_str())
            .push_bind(0i64)
            .push_bind(String::new())
            .push_bind(0i64)
            .push_bind(String::new())
            .push_bind(now)
            .push_bind(now);
    });
    qb
}

/// Appends ` AND col IN (…)` (or a false condition for an empty list).
///
/// A `state` condition beside such a list is written `+state`: SQLite, without statistics,
/// reckons an equality on the state index cheaper than the list's primary-key lookups and scans
/// every fire or run in that state (tens of thousands at 10 000 fires a second) for each
/// statement; the unary `+` keeps it off that index. MySQL ignores a unary `+`.
///
/// On SQLite the list is one bound JSON array (`IN (SELECT value FROM json_each(?))`): the
/// statement's text is then the same whatever the number of ids, so it is prepared once and
/// cached, where a `?` per id made a new statement, compiled anew, for every length. Elsewhere
/// the list is padded to a length of [`cached_len`].
pub(crate) fn push_in<'a, DB: sqlx::Database>(
    qb: &mut QueryBuilder<'a, DB>,
    col: &str,
    ids: &'a [i64],
) where
    i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    if ids.is_empty() {
        qb.push(" AND 1 = 0");
        return;
    }
    if DB::NAME == "SQLite" {
        use std::fmt::Write;
        let mut list = String::with_capacity(ids.len() * 8 + 2);
        list.push('[');
        for (i, id) in ids.iter().enumerate() {
            let sep = if i > 0 { "," } else { "" };
            let _ = write!(list, "{sep}{id}");
        }
        list.push(']');
        qb.push(format!(" AND {col} IN (SELECT value FROM json_each("))
            .push_bind(list)
            .push("))");
        return;
    }
    // Elsewhere a `?` per id, the list padded to a cached length by repeating its last id.
    qb.push(format!(" AND {col} IN ("));
    let mut sep = qb.separated(", ");
    for id in padded(ids, &ids[ids.len() - 1]) {
        sep.push_bind(*id);
    }
    qb.push(")");
}

/// Sets an answer's note, if it has one. A run's trigger note is NULL until its answer (it is
/// written with the answer only), so an acceptance, which has none, leaves the column out: the
/// statements of the usual answers stay as they were before notes.
fn push_trigger_note<'args, DB: sqlx::Database>(
    qb: &mut QueryBuilder<'args, DB>,
    note: Option<&'args str>,
) where
    &'args str: sqlx::Encode<'args, DB> + sqlx::Type<DB>,
{
    if let Some(note) = note {
        qb.push(", trigger_note = ").push_bind(note);
    }
}

/// Cuts a message to at most `max` bytes on a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
