//! The store conformance suite: every test runs on a fresh SQLite file and a fresh MariaDB database.

mod common;

use common::TestDb;
use shardline_admin::model::{Fire, Job, RunState};
use shardline_admin::note::{Message, Note, NoteKind};
use shardline_admin::refusal::Reason;
use shardline_admin::store::{
    Beat, CallbackOutcome, ClearCut, FireRuns, GroupInput, HistoryFilter, JobFilter, JobPlan,
    NewRun, OpenRunsCursor, PlannedFire, Replacing, RunUpdate, Store, StoreError,
};

fn group(appname: &str) -> GroupInput {
    GroupInput {
        appname: appname.to_string(),
        title: "Demo".to_string(),
        address_type: "AUTO".to_string(),
        addresses: String::new(),
        access_token: String::new(),
        generation: "CLASSIC".to_string(),
    }
}

fn job(group_id: i64, name: &str) -> Job {
    Job {
        group_id,
        name: name.to_string(),
        schedule_type: "CRON".into(),
        schedule_conf: "0 * * * * ?".into(),
        timezone: "UTC".into(),
        handler: "demoJobHandler".into(),
        params: "p=1".into(),
        ..Job::default()
    }
}

fn run(index: i64, total: i64, addr: &str) -> NewRun {
    NewRun {
        shard_index: index,
        shard_total: total,
        attempt: 0,
        retries: 0,
        executor_address: addr.to_string(),
        handler: "h".into(),
        params: String::new(),
        item_param: None,
    }
}

/// Acceptances by executor `a` of the runs `ids` of `fire`, sent at `sent_at`, answered at `at`.
fn accepted_on_a(fire: i64, ids: &[i64], sent_at: i64, at: i64) -> Vec<RunUpdate> {
    ids.iter()
        .map(|&run_id| RunUpdate {
            run_id,
            fire_id: fire,
            state: RunState::Running,
            executor_address: "a".into(),
            trigger_code: 200,
            trigger_msg: "accepted".into(),
            at,
            fire_sent_at: sent_at,
        })
        .collect()
}

/// A claimed fire's runs, without a note.
fn fire_runs(fire_id: i64, job_id: i64, group_id: i64, runs: Vec<NewRun>) -> FireRuns {
    FireRuns {
        fire_id,
        job_id,
        group_id,
        runs,
        note: None,
    }
}

/// A fire triggered by hand at `at` with one run (item 0 of 1): its id and the run's.
async fn one_run_fire(s: &Store, job: i64, g: i64, at: i64) -> (i64, i64) {
    let (fire, ids) = s
        .create_fire(job, g, "MANUAL", at, None, "", None, &[run(0, 1, "a")], at)
        .await
        .unwrap()
        .unwrap();
    (fire, ids[0])
}

/// A group `app-<name>`, a job `<name>` of it, and a CRON fire of that job planned at 1 000 with
/// `runs`: the fire's id and its runs' ids, by item.
async fn fire_of_new_job(s: &Store, name: &str, runs: &[NewRun]) -> (i64, Vec<i64>) {
    let g = s
        .create_group(&group(&format!("app-{name}")), 1)
        .await
        .unwrap();
    let j = s.create_job(&job(g, name), 1).await.unwrap();
    s.create_fire(j, g, "CRON", 1_000, None, "", None, runs, 100)
        .await
        .unwrap()
        .unwrap()
}

/// A job of group `g`, enabled and due at `at`, created and edited at `now`.
async fn due_job(s: &Store, g: i64, name: &str, at: i64, now: i64) -> i64 {
    let id = s.create_job(&job(g, name), now).await.unwrap();
    s.set_job_enabled(id, true, Some(at), now).await.unwrap();
    id
}

/// A plan of one CRON fire at `at`.
fn one_fire(at: i64, next_fire_at: Option<i64>, stop: bool) -> JobPlan {
    JobPlan {
        fires: vec![PlannedFire {
            planned_at: at,
            trigger_type: "CRON",
        }],
        next_fire_at,
        stop,
    }
}

/// Runs `body` against each database kind, and on MariaDB also as on MySQL, whose inserts
/// cannot return the rows they wrote.
async fn each_db<F, Fut>(body: F)
where
    F: Fn(Store, &'static str) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut dbs: Vec<(TestDb, bool)> = TestDb::all()
        .await
        .into_iter()
        .map(|d| (d, false))
        .collect();
    if dbs.iter().any(|(d, _)| d.kind() == "mysql") {
        dbs.push((TestDb::mysql().await, true));
    }
    for (db, read_back) in dbs {
        let mut store = Store::connect(&db.url).await.expect("connect + migrate");
        let mut kind = db.kind();
        if read_back {
            store = store.reading_back_inserts();
            kind = "mysql (inserts read back)";
        }
        body(store.clone(), kind).await;
        store.close().await;
        db.cleanup().await;
    }
}

#[tokio::test]
async fn groups_and_registry() {
    each_db(|s, kind| async move {
        let id = s.create_group(&group("app-a"), 1).await.unwrap();
        let dup = s.create_group(&group("app-a"), 1).await.unwrap_err();
        assert!(
            matches!(dup, StoreError::Conflict(ref m) if m.to_string().contains("app-a")),
            "{kind}: {dup}"
        );
        assert_eq!(s.get_group(id).await.unwrap().appname, "app-a");
        assert!(matches!(
            s.get_group(999).await,
            Err(StoreError::NotFound(Reason::GroupNotFound))
        ));

        // Heartbeats: upsert refreshes, order is by address, eviction by age.
        let beat = |address: &str, meta: &str, at: i64| Beat {
            appname: "app-a".into(),
            address: address.into(),
            meta: meta.into(),
            at,
        };
        s.upsert_registry_many(&[
            beat("http://10.0.0.9:9999/", "", 1_000),
            beat("http://10.0.0.10:9999/", "", 1_000),
        ])
        .await
        .unwrap();
        s.upsert_registry_many(&[beat("http://10.0.0.9:9999/", "{\"weight\":3}", 5_000)])
            .await
            .unwrap();
        let live = s.live_executors("app-a", 0).await.unwrap();
        let addrs: Vec<_> = live.iter().map(|e| e.address.as_str()).collect();
        assert_eq!(
            addrs,
            ["http://10.0.0.10:9999/", "http://10.0.0.9:9999/"],
            "{kind}"
        );
        assert_eq!(live[1].meta, "{\"weight\":3}");
        assert_eq!(live[1].first_seen, 1_000);
        assert_eq!(s.live_executors("app-a", 2_000).await.unwrap().len(), 1);
        assert_eq!(s.evict_registry(2_000).await.unwrap(), 1);
        assert_eq!(
            s.remove_registry("app-a", "http://10.0.0.9:9999/")
                .await
                .unwrap(),
            1
        );
        assert!(s.live_executors("app-a", 0).await.unwrap().is_empty());

        // A group with jobs cannot be deleted.
        s.create_job(&job(id, "j"), 1).await.unwrap();
        assert!(matches!(
            s.delete_group(id).await,
            Err(StoreError::Conflict(_))
        ));
    })
    .await;
}

/// A late send and another admin's "sent again" of the same unsent run exclude each other: a run
/// claimed for its send (`claim_sends`) is not declared lost and replaced
/// (`Replacing::Unsent`), and a run replaced so is not claimed; a run with a send recorded is
/// neither.
#[tokio::test]
async fn a_late_send_and_a_send_again_exclude_each_other() {
    each_db(|s, _| async move {
        let (fire, ids) = fire_of_new_job(
            &s,
            "late-send",
            &[run(0, 3, "a"), run(1, 3, "b"), run(2, 3, "c")],
        )
        .await;
        let f = s.get_fire(fire).await.unwrap().unwrap();
        let again = |id: i64| {
            (
                id,
                NewRun {
                    attempt: 1,
                    ..run(0, 3, "a")
                },
            )
        };
        // Run 0 is claimed by its late admin: claimed once, and not replaced after.
        assert_eq!(s.claim_sends(&ids[..1], 200).await.unwrap(), vec![ids[0]]);
        assert!(s.claim_sends(&ids[..1], 201).await.unwrap().is_empty());
        let replaced = s
            .add_attempts(
                &f,
                &[again(ids[0])],
                Replacing::Unsent(&"lost: unsent".into()),
                210,
            )
            .await
            .unwrap();
        assert!(replaced.is_empty(), "a claimed run is not sent again");
        let r0 = s.get_run(ids[0]).await.unwrap().unwrap();
        assert_eq!(
            (r0.state.as_str(), r0.dispatched_at),
            ("triggering", Some(200))
        );
        // Run 1 is replaced first: its late admin does not get it.
        let replaced = s
            .add_attempts(
                &f,
                &[again(ids[1])],
                Replacing::Unsent(&"lost: unsent".into()),
                220,
            )
            .await
            .unwrap();
        assert_eq!(replaced.len(), 1);
        assert!(s.claim_sends(&ids[1..2], 230).await.unwrap().is_empty());
        let r1 = s.get_run(ids[1]).await.unwrap().unwrap();
        assert_eq!((r1.state.as_str(), r1.superseded), ("lost", 1));
        // Run 2's send is recorded (its acceptance): neither claimed nor replaced.
        s.store_results(&accepted_on_a(fire, &ids[2..], 240, 240), &[], 240)
            .await
            .unwrap();
        assert!(s.claim_sends(&ids[2..], 250).await.unwrap().is_empty());
        let replaced = s
            .add_attempts(
                &f,
                &[again(ids[2])],
                Replacing::Unsent(&"lost: unsent".into()),
                260,
            )
            .await
            .unwrap();
        assert!(
            replaced.is_empty(),
            "a run with a send recorded is not sent again"
        );
    })
    .await;
}

#[tokio::test]
async fn jobs_crud_and_filters() {
    each_db(|s, kind| async move {
        let g = s.create_group(&group("app-b"), 1).await.unwrap();
        let a = s.create_job(&job(g, "nightly-report"), 10).await.unwrap();
        let b = s.create_job(&job(g, "cleanup"), 10).await.unwrap();
        let mut ja = s.get_job(a).await.unwrap();
        assert_eq!(ja.params, "p=1");
        ja.params = "long ".repeat(2000);
        ja.glue_source = "echo hi\n".repeat(10_000);
        s.update_job(&ja, 20).await.unwrap();
        let back = s.get_job(a).await.unwrap();
        assert_eq!(back.params, ja.params, "{kind}: long TEXT survives");
        assert_eq!(back.glue_source.len(), ja.glue_source.len());
        assert_eq!(back.updated_at, 20);
        // A second edit within the same millisecond still moves `updated_at` forward: the
        // dispatch path's job cache takes an unchanged `updated_at` for an unchanged job.
        s.update_job(&back, 20).await.unwrap();
        assert_eq!(s.get_job(a).await.unwrap().updated_at, 21, "{kind}");

        s.set_job_enabled(b, true, Some(12345), 30).await.unwrap();
        let (rows, total) = s
            .list_jobs(&JobFilter {
                enabled: Some(true),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!((rows.len(), total), (1, 1));
        assert_eq!(rows[0].next_fire_at, Some(12345));
        let (rows, _) = s
            .list_jobs(&JobFilter {
                name: Some("report".into()),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(rows[0].id, a);
        let (rows, total) = s
            .list_jobs(&JobFilter {
                group_ids: Some(vec![]),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!((rows.len(), total), (0, 0));

        s.add_glue_version(a, "GLUE_SHELL", "echo 1", "v1", 1)
            .await
            .unwrap();
        s.add_glue_version(a, "GLUE_SHELL", "echo 2", "v2", 2)
            .await
            .unwrap();
        let versions = s.glue_versions(a).await.unwrap();
        assert_eq!(versions[0].remark, "v2");

        s.delete_job(a).await.unwrap();
        assert!(matches!(
            s.get_job(a).await,
            Err(StoreError::NotFound(Reason::JobNotFound))
        ));
        assert!(matches!(
            s.delete_job(a).await,
            Err(StoreError::NotFound(Reason::JobNotFound))
        ));
    })
    .await;
}

/// Every edit, stop, start and deletion counts itself, and the dispatch path's job cache answers
/// from memory while the count stays, and sees each of those changes at its next lookup.
#[tokio::test]
async fn job_edits_count_and_the_job_cache() {
    each_db(|s, kind| async move {
        let g = s.create_group(&group("app-cache"), 1).await.unwrap();
        let a = s.create_job(&job(g, "a"), 10).await.unwrap();
        let b = s.create_job(&job(g, "b"), 10).await.unwrap();
        let start = s.job_edits().await.unwrap();
        let cache = shardline_admin::jobcache::JobCache::default();
        let got = cache.get(&s, &[a, b]).await.unwrap();
        assert_eq!(got[&a].params, "p=1", "{kind}");
        assert_eq!(cache.len(), 2);
        // A creation is not an edit (a new job is in no cache).
        let c = s.create_job(&job(g, "c"), 11).await.unwrap();
        assert_eq!(s.job_edits().await.unwrap(), start, "{kind}");
        assert_eq!(cache.get(&s, &[a, b, c]).await.unwrap().len(), 3);

        let mut ja = s.get_job(a).await.unwrap();
        ja.params = "p=2".into();
        s.update_job(&ja, 20).await.unwrap();
        assert_eq!(
            s.job_edits().await.unwrap(),
            start + 1,
            "{kind}: an edit counts"
        );
        assert_eq!(
            cache.get(&s, &[a]).await.unwrap()[&a].params,
            "p=2",
            "{kind}"
        );

        s.set_job_enabled(b, true, Some(5), 30).await.unwrap();
        assert_eq!(
            s.job_edits().await.unwrap(),
            start + 2,
            "{kind}: a start counts"
        );
        assert_eq!(cache.get(&s, &[b]).await.unwrap()[&b].enabled, 1, "{kind}");

        s.delete_job(c).await.unwrap();
        assert_eq!(
            s.job_edits().await.unwrap(),
            start + 3,
            "{kind}: a deletion counts"
        );
        let got = cache.get(&s, &[a, b, c]).await.unwrap();
        assert!(!got.contains_key(&c), "{kind}: a deleted job is gone");
        assert_eq!(cache.len(), 2, "{kind}");

        // A refused write counts nothing.
        assert!(s.delete_job(c).await.is_err());
        assert_eq!(s.job_edits().await.unwrap(), start + 3, "{kind}");
    })
    .await;
}

/// Storing the runs of claimed fires starts them, but only those this admin still owns and
/// that are still `scheduled`: a fire another admin took over, or one already started, gets no
/// runs and is left as it is.
#[tokio::test]
async fn storing_runs_starts_only_the_fires_still_owned() {
    each_db(|s, kind| async move {
        let g = s.create_group(&group("app-start"), 1).await.unwrap();
        let t = 5_000;
        let mut fire = Vec::new();
        for (name, node) in [("mine", "n1"), ("theirs", "n2")] {
            let j = due_job(&s, g, name, t + 1_000, t).await;
            let (_, claimed) = s
                .claim_due(node, t + 1_000, 10_000, 10, t, |_| {
                    one_fire(t + 1_000, Some(t + 2_000), false)
                })
                .await
                .unwrap();
            assert_eq!(claimed.len(), 1, "{kind}");
            fire.push((claimed[0].fire_id, j));
        }
        // Both fires have a note; only the fire n1 starts keeps it.
        let max_node = Note::new(NoteKind::MaxNode).with("max", 2).with("count", 3);
        let items: Vec<FireRuns> = fire
            .iter()
            .map(|(f, j)| FireRuns {
                note: Some(max_node.clone().into()),
                ..fire_runs(*f, *j, g, vec![run(0, 2, "a"), run(1, 2, "b")])
            })
            .collect();
        let (started, runs) = s.add_runs_to_fires(&items, t, Some("n1")).await.unwrap();
        assert_eq!(started, [fire[0].0].into(), "{kind}: only n1's fire starts");
        assert_eq!(runs.len(), 2, "{kind}");
        assert!(runs.iter().all(|r| r.fire_id == fire[0].0), "{kind}");
        let mine = s.get_fire(fire[0].0).await.unwrap().unwrap();
        assert_eq!(
            (mine.state.as_str(), mine.total_items, mine.message.as_str()),
            ("triggering", 2, "maxNode=2: 2 of 3 executors called"),
            "{kind}"
        );
        assert_eq!(
            note_of(&mine.message_note),
            Some(max_node.to_json()),
            "{kind}"
        );
        let theirs = s.get_fire(fire[1].0).await.unwrap().unwrap();
        assert_eq!(
            (theirs.state.as_str(), theirs.message.as_str()),
            ("scheduled", ""),
            "{kind}: n2's fire is untouched"
        );
        assert!(
            s.runs_of_fires(&[fire[1].0]).await.unwrap().is_empty(),
            "{kind}"
        );
        // Started already: a second start gets nothing.
        let (started, runs) = s
            .add_runs_to_fires(&items[..1], t, Some("n1"))
            .await
            .unwrap();
        assert!(started.is_empty() && runs.is_empty(), "{kind}");
        assert_eq!(
            s.runs_of_fires(&[fire[0].0]).await.unwrap().len(),
            2,
            "{kind}"
        );
        // An edit of the job: the prepared fire, not sent yet, is dropped with its runs only if
        // it is planned at or after `unsent_from` (its last look at the job is still to come).
        let (mine, mine_job) = fire[0];
        assert_eq!(
            s.cancel_scheduled(mine_job, t + 1_001).await.unwrap(),
            0,
            "{kind}"
        );
        assert!(s.get_fire(mine).await.unwrap().is_some(), "{kind}");
        assert_eq!(
            s.cancel_scheduled(mine_job, t + 1_000).await.unwrap(),
            1,
            "{kind}"
        );
        assert!(s.get_fire(mine).await.unwrap().is_none(), "{kind}");
        assert!(s.runs_of_fires(&[mine]).await.unwrap().is_empty(), "{kind}");
    })
    .await;
}

/// A shutdown gives its claims back in one go: the fires still `scheduled` and its own go, and
/// each running job is due again at the earliest of them (more fires than one statement takes,
/// so a job's fires span two transactions); a started fire, another admin's fire and a stopped
/// job's schedule are left as they are.
#[tokio::test]
async fn claims_are_given_back_together_at_shutdown() {
    each_db(|s, kind| async move {
        let g = s.create_group(&group("app-unclaim"), 1).await.unwrap();
        let t = 5_000;
        let mut jobs = Vec::new();
        for i in 0..300 {
            jobs.push(due_job(&s, g, &format!("j{i}"), t + 1_000, t).await);
        }
        // Two fires per job, t+1000 and t+2000; the job is due next at t+3000.
        let two_fires = |_: &Job| JobPlan {
            fires: [t + 1_000, t + 2_000]
                .into_iter()
                .map(|planned_at| PlannedFire {
                    planned_at,
                    trigger_type: "CRON",
                })
                .collect(),
            next_fire_at: Some(t + 3_000),
            stop: false,
        };
        let (_, mut mine) = s
            .claim_due("n1", t + 1_000, 10_000, 1_000, t, two_fires)
            .await
            .unwrap();
        assert_eq!(mine.len(), 600, "{kind}");
        // Another admin's claim.
        let theirs_job = due_job(&s, g, "theirs", t + 1_000, t).await;
        let (_, theirs) = s
            .claim_due("n2", t + 1_000, 10_000, 10, t, two_fires)
            .await
            .unwrap();
        assert_eq!(theirs.len(), 2, "{kind}");
        // The first job's first fire is started (its runs stored): not given back.
        mine.sort_by_key(|c| (c.planned_at, c.fire_id));
        let started = mine
            .iter()
            .find(|c| c.job_id == jobs[0] && c.planned_at == t + 1_000)
            .unwrap()
            .fire_id;
        s.add_runs_to_fires(
            &[fire_runs(started, jobs[0], g, vec![run(0, 1, "a")])],
            t,
            Some("n1"),
        )
        .await
        .unwrap();
        // The last job is stopped meanwhile: its claims go, its schedule stays stopped.
        s.set_job_enabled(jobs[299], false, None, t).await.unwrap();
        let ids: Vec<i64> = mine
            .iter()
            .map(|c| c.fire_id)
            .chain(theirs.iter().map(|c| c.fire_id))
            .collect();
        let given_back = s.unclaim(&ids, "n1").await.unwrap();
        assert_eq!(
            given_back, 599,
            "{kind}: every scheduled fire of n1 but the started one"
        );
        for c in &mine {
            let row = s.get_fire(c.fire_id).await.unwrap();
            assert_eq!(
                row.is_some(),
                c.fire_id == started,
                "{kind}: fire {}",
                c.fire_id
            );
        }
        for c in &theirs {
            assert!(
                s.get_fire(c.fire_id).await.unwrap().is_some(),
                "{kind}: n2 keeps its claims"
            );
        }
        let next = |j: Job| (j.enabled, j.next_fire_at);
        assert_eq!(
            next(s.get_job(jobs[0]).await.unwrap()),
            (1, Some(t + 2_000)),
            "{kind}"
        );
        for j in &jobs[1..299] {
            assert_eq!(
                next(s.get_job(*j).await.unwrap()),
                (1, Some(t + 1_000)),
                "{kind}: job {j}"
            );
        }
        assert_eq!(
            next(s.get_job(jobs[299]).await.unwrap()),
            (0, None),
            "{kind}"
        );
        assert_eq!(
            next(s.get_job(theirs_job).await.unwrap()),
            (1, Some(t + 3_000)),
            "{kind}"
        );
        // Given back already: nothing more to give.
        assert_eq!(s.unclaim(&ids, "n1").await.unwrap(), 0, "{kind}");
    })
    .await;
}

/// A fire holds its claim's lease only while it is `scheduled`: the start (alone or with the
/// runs) and a skip set it to 0, so the takeover, which looks fires up by lease, finds only the
/// scheduled fires whose owner stopped renewing; a fire taken back to `scheduled` gets its lease
/// again and can be taken over like any other.
#[tokio::test]
async fn a_lease_is_held_only_while_scheduled() {
    each_db(|s, kind| async move {
        let g = s.create_group(&group("app-lease"), 1).await.unwrap();
        let (t, lease) = (5_000, 3_000);
        let mut fires = Vec::new();
        for name in ["started", "prepared", "skipped", "waiting"] {
            let j = due_job(&s, g, name, t + 1_000, t).await;
            let (_, claimed) = s
                .claim_due("n1", t + 1_000, lease, 10, t, |_| {
                    one_fire(t + 1_000, Some(t + 2_000), false)
                })
                .await
                .unwrap();
            assert_eq!(claimed.len(), 1, "{kind}");
            fires.push((claimed[0].fire_id, j));
        }
        let ids: Vec<i64> = fires.iter().map(|f| f.0).collect();
        let leases = |got: Vec<Fire>| -> Vec<(i64, String, i64)> {
            let mut out: Vec<_> = got
                .into_iter()
                .map(|f| (f.id, f.state, f.claim_expires_at))
                .collect();
            out.sort();
            out
        };
        assert!(
            s.start_claimed(ids[0], "n1", "CRON").await.unwrap(),
            "{kind}"
        );
        let items = [fire_runs(ids[1], fires[1].1, g, vec![run(0, 1, "a")])];
        let (started, _) = s.add_runs_to_fires(&items, t, Some("n1")).await.unwrap();
        assert_eq!(started, [ids[1]].into(), "{kind}");
        s.skip_claims(&ids[2..3], "n1", &"misfired".into(), t)
            .await
            .unwrap();
        let until = t + 1_000 + lease;
        assert_eq!(
            leases(s.get_fires(&ids).await.unwrap()),
            [
                (ids[0], "triggering".to_string(), 0),
                (ids[1], "triggering".to_string(), 0),
                (ids[2], "skipped".to_string(), 0),
                (ids[3], "scheduled".to_string(), until),
            ],
            "{kind}"
        );
        // n1 stops renewing: once the lease has run out only the waiting fire is taken over.
        let taken_at = |now: i64| {
            let s = &s;
            async move {
                let taken = s.take_over_expired("n2", now, lease, 10).await.unwrap();
                taken.iter().map(|c| c.fire_id).collect::<Vec<i64>>()
            }
        };
        assert_eq!(taken_at(until).await, Vec::<i64>::new(), "{kind}");
        assert_eq!(taken_at(until + 1).await, [ids[3]], "{kind}");
        // A prepared fire taken back gets the lease of its claim, and a survivor can take it.
        assert_eq!(
            s.unprepare_fires(&ids[1..2], "n1", lease).await.unwrap(),
            [ids[1]],
            "{kind}"
        );
        assert_eq!(
            leases(s.get_fires(&ids[1..2]).await.unwrap()),
            [(ids[1], "scheduled".to_string(), until)],
            "{kind}"
        );
        assert_eq!(taken_at(until + 1).await, [ids[1]], "{kind}");
    })
    .await;
}

/// A claim is stamped strictly after its job's last edit and before any edit that follows it,
/// even within one millisecond: the scheduler tells a job its own schedule stopped (the last fire
/// still runs) from one stopped by someone after the claim by `updated_at < claimed_at`.
#[tokio::test]
async fn a_claim_is_ordered_against_edits_in_its_millisecond() {
    each_db(|s, kind| async move {
        let g = s.create_group(&group("app-stamp"), 1).await.unwrap();
        let t = 5_000;
        let last = due_job(&s, g, "last", t + 1_000, t).await;
        let other = due_job(&s, g, "other", t + 1_000, t).await;
        let (due, claimed) = s
            .claim_due("n1", t + 1_000, 10_000, 10, t, |j| {
                // `last` has no time after this fire: the claim stops it.
                one_fire(
                    t + 1_000,
                    (j.id == other).then_some(t + 2_000),
                    j.id == last,
                )
            })
            .await
            .unwrap();
        assert_eq!((due, claimed.len()), (2, 2), "{kind}");
        let stamp = |id: i64| claimed.iter().find(|c| c.job_id == id).unwrap().claimed_at;
        let ended = s.get_job(last).await.unwrap();
        assert_eq!((ended.enabled, ended.next_fire_at), (0, None), "{kind}");
        assert!(
            ended.updated_at < stamp(last),
            "{kind}: edited at {}, claimed at {}: the stop is the claim's own",
            ended.updated_at,
            stamp(last)
        );
        // Stopped by someone in the claim's millisecond: an edit after the claim.
        s.set_job_enabled(other, false, None, t).await.unwrap();
        let stopped = s.get_job(other).await.unwrap();
        assert!(
            stopped.updated_at >= stamp(other),
            "{kind}: edited at {}, claimed at {}: the stop follows the claim",
            stopped.updated_at,
            stamp(other)
        );
    })
    .await;
}

#[tokio::test]
async fn fires_runs_and_callbacks() {
    each_db(|s, kind| async move {
        let g = s.create_group(&group("app-c"), 1).await.unwrap();
        let j = s.create_job(&job(g, "sharded"), 1).await.unwrap();
        let runs = vec![run(0, 3, "a"), run(1, 3, "b"), run(2, 3, "c")];
        let (fire, ids) = s
            .create_fire(
                j,
                g,
                "CRON",
                60_000,
                Some(&format!("{j}:60000")),
                "",
                None,
                &runs,
                100,
            )
            .await
            .unwrap()
            .expect("first insert wins");
        assert_eq!(ids.len(), 3);
        // The same planned fire cannot be inserted twice (another admin got there first).
        let again = s
            .create_fire(
                j,
                g,
                "CRON",
                60_000,
                Some(&format!("{j}:60000")),
                "",
                None,
                &runs,
                100,
            )
            .await
            .unwrap();
        assert!(again.is_none(), "{kind}: duplicate planned fire refused");

        let updates: Vec<RunUpdate> = ids
            .iter()
            .zip(["a", "b", "c"])
            .map(|(id, a)| RunUpdate {
                run_id: *id,
                state: if a == "c" {
                    RunState::Failed
                } else {
                    RunState::Running
                },
                executor_address: a.to_string(),
                trigger_code: if a == "c" { 500 } else { 200 },
                trigger_msg: format!("sent to {a}").into(),
                at: 110,
                fire_id: fire,
                fire_sent_at: 105,
            })
            .collect();
        s.store_results(&updates, &[], 112).await.unwrap();
        let sent = s.get_fire(fire).await.unwrap().unwrap();
        assert_eq!(
            (sent.state.as_str(), sent.dispatched_at),
            ("running", Some(105)),
            "{kind}: a fire with an accepted run is running"
        );
        assert_eq!(s.refresh_fire_state(fire, 120).await.unwrap(), None);

        let (out, ended) = s
            .store_results(
                &[],
                &[
                    (ids[0], 200, "ok".into()),
                    (ids[1], 0, "still running".into()),
                    (ids[0], 500, "late duplicate".into()),
                    (999_999, 200, "unknown".into()),
                ],
                130,
            )
            .await
            .unwrap();
        assert!(ended.is_empty(), "{kind}: one run still open");
        assert_eq!(
            out[0],
            CallbackOutcome::Applied {
                run_id: ids[0],
                fire_id: fire
            }
        );
        assert_eq!(
            out[1],
            CallbackOutcome::Duplicate,
            "handleCode 0 is not a result"
        );
        assert_eq!(out[2], CallbackOutcome::Duplicate, "first result wins");
        assert_eq!(out[3], CallbackOutcome::Unknown);
        // A later batch: a result for a run already finished (in an earlier batch, or by its
        // failed dispatch) changes nothing, and an unknown run stays unknown when repeated.
        let (again, _) = s
            .store_results(
                &[],
                &[
                    (ids[0], 500, "too late".into()),
                    (999_998, 200, "unknown".into()),
                    (ids[2], 200, "after a failed dispatch".into()),
                    (999_998, 500, "unknown again".into()),
                ],
                135,
            )
            .await
            .unwrap();
        assert_eq!(
            again,
            vec![
                CallbackOutcome::Duplicate,
                CallbackOutcome::Unknown,
                CallbackOutcome::Duplicate,
                CallbackOutcome::Unknown,
            ]
        );
        let r0 = s.get_run(ids[0]).await.unwrap().unwrap();
        assert_eq!(
            (r0.state.as_str(), r0.handle_msg.as_str()),
            ("succeeded", "ok")
        );
        let r2 = s.get_run(ids[2]).await.unwrap().unwrap();
        assert_eq!(r2.state, "failed");
        assert_eq!(r2.trigger_msg, "sent to c");

        let (_, ended) = s
            .store_results(&[], &[(ids[1], 200, "ok".into())], 140)
            .await
            .unwrap();
        assert_eq!(
            ended
                .iter()
                .map(|e| (e.fire_id, e.state.as_str()))
                .collect::<Vec<_>>(),
            vec![(fire, "failed")]
        );
        // Reported once only.
        assert_eq!(s.refresh_fire_state(fire, 151).await.unwrap(), None);

        // A failover attempt supersedes the failed run; the fire succeeds when it does.
        let f = s.get_fire(fire).await.unwrap().unwrap();
        let new_ids = s
            .add_attempts(
                &f,
                &[(
                    ids[2],
                    NewRun {
                        attempt: 1,
                        ..run(2, 3, "b")
                    },
                )],
                Replacing::Ended,
                160,
            )
            .await
            .unwrap();
        let (_, ended) = s
            .store_results(&[], &[(new_ids[0], 200, "ok".into())], 170)
            .await
            .unwrap();
        assert_eq!(
            ended
                .iter()
                .map(|e| (e.fire_id, e.state.as_str()))
                .collect::<Vec<_>>(),
            vec![(fire, "succeeded")]
        );
        let all = s.fire_runs(fire).await.unwrap();
        assert_eq!(all.len(), 4);

        // Declaring a run lost and replacing it is one step; a run that already has its result
        // is neither declared lost nor replaced.
        let (fire2, ids2) = s
            .create_fire(
                j,
                g,
                "MANUAL",
                70_000,
                None,
                "",
                None,
                &[run(0, 2, "a"), run(1, 2, "b")],
                200,
            )
            .await
            .unwrap()
            .unwrap();
        s.store_results(&[], &[(ids2[1], 200, "ok".into())], 210)
            .await
            .unwrap();
        let f2 = s.get_fire(fire2).await.unwrap().unwrap();
        let replaced = s
            .add_attempts(
                &f2,
                &[
                    (
                        ids2[0],
                        NewRun {
                            attempt: 1,
                            ..run(0, 2, "b")
                        },
                    ),
                    (
                        ids2[1],
                        NewRun {
                            attempt: 1,
                            ..run(1, 2, "a")
                        },
                    ),
                ],
                Replacing::Lost(&"lost: executor a stopped answering".into()),
                220,
            )
            .await
            .unwrap();
        assert_eq!(replaced.len(), 1, "{kind}: only the open run is replaced");
        let lost = s.get_run(ids2[0]).await.unwrap().unwrap();
        assert_eq!((lost.state.as_str(), lost.superseded), ("lost", 1));
        let done = s.get_run(ids2[1]).await.unwrap().unwrap();
        assert_eq!((done.state.as_str(), done.superseded), ("succeeded", 0));

        let (list, total) = s
            .list_runs(&HistoryFilter {
                job_id: Some(j),
                state: Some("succeeded".into()),
                limit: 2,
                ..Default::default()
            })
            .await
            .unwrap();
        // Three succeeded runs of the first fire, one of the second.
        assert_eq!((list.len(), total), (2, 4), "{kind}");
        let (fires, n) = s
            .list_fires(&HistoryFilter {
                job_id: Some(j),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!((fires.len(), n), (2, 2));
        let (fires, n) = s
            .list_fires(&HistoryFilter {
                job_id: Some(j),
                from_ms: Some(65_000),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            (fires.len(), n, fires[0].id),
            (1, 1, fire2),
            "planned-time filter"
        );
        // `fire_id` names the fire itself in the fire list and its runs in the run list.
        let by_fire = HistoryFilter {
            fire_id: Some(fire2),
            limit: 10,
            ..Default::default()
        };
        let (fires, n) = s.list_fires(&by_fire).await.unwrap();
        assert_eq!((fires.len(), n, fires[0].id), (1, 1, fire2), "{kind}");
        let (runs, n) = s.list_runs(&by_fire).await.unwrap();
        // Its two items and the attempt that replaced the lost one.
        assert_eq!((runs.len(), n), (3, 3), "{kind}");
        assert!(runs.iter().all(|r| r.fire_id == fire2), "{kind}");
    })
    .await;
}

/// Multi-row statements come in lengths that are powers of two: inserts are split (5 runs are
/// 4 + 1), joined updates padded with rows that match nothing (3 answers are 4 rows), and on
/// MySQL lists of ids padded by repeating the last. None of it may touch another row.
#[tokio::test]
async fn what_follows_a_fires_end_is_written_with_it() {
    each_db(|s, kind| async move {
        let g = s.create_group(&group("app-f"), 1).await.unwrap();
        let plain = s.create_job(&job(g, "plain"), 1).await.unwrap();
        let parent = s
            .create_job(
                &Job {
                    child_job_ids: plain.to_string(),
                    ..job(g, "parent")
                },
                1,
            )
            .await
            .unwrap();
        let delayed = s
            .create_job(
                &Job {
                    schedule_type: "FIX_DELAY".into(),
                    schedule_conf: "5".into(),
                    ..job(g, "delayed")
                },
                1,
            )
            .await
            .unwrap();
        // One fire per case, each with one run ended by its result at `at`.
        let end = |job: i64, code: i32, at: i64| {
            let s = s.clone();
            async move {
                let (fire, run_id) = one_run_fire(&s, job, g, at).await;
                let (_, ended) = s
                    .store_results(&[], &[(run_id, code, "r".into())], at + 1)
                    .await
                    .unwrap();
                assert_eq!(ended.len(), 1, "{kind}: the fire ended");
                assert_eq!((ended[0].fire_id, ended[0].at), (fire, at + 1));
                ended[0]
            }
        };
        let ok_plain = end(plain, 200, 100).await;
        let failed_plain = end(plain, 500, 200).await;
        let ok_parent = end(parent, 200, 300).await;
        let ok_delayed = end(delayed, 200, 400).await;
        assert_eq!(
            [&ok_plain, &failed_plain, &ok_parent, &ok_delayed].map(|e| e.follow_up),
            [false, true, true, true],
            "{kind}: a failure, child jobs and FIX_DELAY have something to follow"
        );
        let fires = |v: Vec<shardline_admin::store::FireEnded>| {
            v.iter()
                .map(|e| (e.fire_id, e.state.as_str(), e.at))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            fires(s.stale_follow_ups(10_000, 100).await.unwrap()),
            fires(vec![failed_plain, ok_parent, ok_delayed]),
            "{kind}: undone follow-ups, oldest first"
        );
        assert!(s.stale_follow_ups(201, 100).await.unwrap().is_empty());

        // The failed fire's items are retried: the fire is open again, once.
        assert!(s
            .schedule_retries(failed_plain.fire_id, &[], &"retrying".into())
            .await
            .unwrap());
        assert!(
            !s.schedule_retries(failed_plain.fire_id, &[], &"again".into())
                .await
                .unwrap(),
            "{kind}: a follow-up done twice retries once"
        );
        // Clearing the first end while the retried fire already ended again keeps the new end.
        let (fire2, ids2) = (
            failed_plain.fire_id,
            s.fire_runs(failed_plain.fire_id).await.unwrap(),
        );
        let f = s.get_fire(fire2).await.unwrap().unwrap();
        let retry = s
            .add_attempts(
                &f,
                &[(
                    ids2[0].id,
                    NewRun {
                        attempt: 1,
                        ..run(0, 1, "b")
                    },
                )],
                Replacing::Ended,
                500,
            )
            .await
            .unwrap();
        let (_, again) = s
            .store_results(&[], &[(retry[0], 500, "still failing".into())], 600)
            .await
            .unwrap();
        assert_eq!(again.len(), 1, "{kind}: ended again");
        s.follow_ups_done(&[failed_plain, ok_parent]).await.unwrap();
        assert_eq!(
            fires(s.stale_follow_ups(10_000, 100).await.unwrap()),
            fires(vec![ok_delayed, again[0]]),
            "{kind}: the new end stays"
        );
        s.follow_ups_done(&[ok_delayed, again[0]]).await.unwrap();
        assert!(s.stale_follow_ups(10_000, 100).await.unwrap().is_empty());
    })
    .await;
}

#[tokio::test]
async fn statements_of_cached_lengths_write_exactly_their_rows() {
    each_db(|s, kind| async move {
        let runs: Vec<NewRun> = (0..5).map(|i| run(i, 5, "a")).collect();
        let (fire, ids) = fire_of_new_job(&s, "pad", &runs).await;
        let stored = s.fire_runs(fire).await.unwrap();
        assert_eq!(
            stored
                .iter()
                .map(|r| (r.id, r.shard_index))
                .collect::<Vec<_>>(),
            ids.iter().copied().zip(0..5).collect::<Vec<_>>(),
            "{kind}: five runs stored once each, in item order"
        );
        s.store_results(&accepted_on_a(fire, &ids[..3], 110, 111), &[], 112)
            .await
            .unwrap();
        let (out, ended) = s
            .store_results(
                &[],
                &ids[..3]
                    .iter()
                    .map(|&id| (id, 200, "ok".to_string()))
                    .collect::<Vec<_>>(),
                120,
            )
            .await
            .unwrap();
        assert!(ended.is_empty(), "{kind}: two runs still open");
        assert!(
            out.iter()
                .all(|o| matches!(o, CallbackOutcome::Applied { .. })),
            "{kind}: {out:?}"
        );
        let states: Vec<(String, Option<i64>)> = s
            .fire_runs(fire)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.state, r.dispatched_at))
            .collect();
        let done = ("succeeded".to_string(), Some(111));
        let open = ("triggering".to_string(), None);
        assert_eq!(
            states,
            vec![done.clone(), done.clone(), done, open.clone(), open],
            "{kind}: only the three runs answered and finished changed"
        );
    })
    .await;
}

/// A request that got no answer is stored with its failover attempt, in one transaction: a
/// sibling's result stored after it finds the item replaced, not failed, so the fire stays
/// open (stored apart, the fire looked failed and was reported so before its failover).
#[tokio::test]
async fn an_unanswered_request_is_stored_with_its_failover() {
    each_db(|s, kind| async move {
        let (fire, ids) =
            fire_of_new_job(&s, "unanswered", &[run(0, 2, "a"), run(1, 2, "dead")]).await;
        let unanswered = RunUpdate {
            run_id: ids[1],
            fire_id: fire,
            state: RunState::Failed,
            executor_address: "dead".into(),
            trigger_code: 500,
            trigger_msg: "dead: connection refused".into(),
            at: 111,
            fire_sent_at: 110,
        };
        let f = s.get_fire(fire).await.unwrap().unwrap();
        let new = s
            .add_attempts(
                &f,
                &[(
                    ids[1],
                    NewRun {
                        attempt: 1,
                        ..run(1, 2, "b")
                    },
                )],
                Replacing::Unanswered(std::slice::from_ref(&unanswered)),
                120,
            )
            .await
            .unwrap();
        assert_eq!(new.len(), 1, "{kind}");
        let old = s.get_run(ids[1]).await.unwrap().unwrap();
        assert_eq!(
            (
                old.state.as_str(),
                old.superseded,
                old.trigger_code,
                old.trigger_msg.as_str(),
                old.dispatched_at,
                old.finished_at
            ),
            (
                "failed",
                1,
                500,
                "dead: connection refused",
                Some(111),
                Some(111)
            ),
            "{kind}"
        );
        let f = s.get_fire(fire).await.unwrap().unwrap();
        assert_eq!(
            (f.state.as_str(), f.dispatched_at),
            ("running", Some(110)),
            "{kind}"
        );
        // The sibling's answer and result: the fire stays open for the new attempt.
        let accepted = RunUpdate {
            run_id: ids[0],
            state: RunState::Running,
            executor_address: "a".into(),
            trigger_code: 200,
            trigger_msg: "accepted by a".into(),
            ..unanswered.clone()
        };
        let (_, ended) = s
            .store_results(&[accepted], &[(ids[0], 200, "ok".into())], 130)
            .await
            .unwrap();
        assert!(ended.is_empty(), "{kind}: {ended:?}");
        assert_eq!(
            s.get_fire(fire).await.unwrap().unwrap().state,
            "running",
            "{kind}"
        );
        let (_, ended) = s
            .store_results(&[], &[(new[0], 200, "ok".into())], 140)
            .await
            .unwrap();
        assert_eq!(ended.len(), 1, "{kind}");
        assert_eq!(
            s.get_fire(fire).await.unwrap().unwrap().state,
            "succeeded",
            "{kind}"
        );
        // A request already ended is not ended again, and gets no replacement.
        let f = s.get_fire(fire).await.unwrap().unwrap();
        let again = s
            .add_attempts(
                &f,
                &[(
                    ids[0],
                    NewRun {
                        attempt: 1,
                        ..run(0, 2, "b")
                    },
                )],
                Replacing::Unanswered(&[RunUpdate {
                    run_id: ids[0],
                    ..unanswered.clone()
                }]),
                150,
            )
            .await
            .unwrap();
        assert!(again.is_empty(), "{kind}");
        assert_eq!(
            s.get_run(ids[0]).await.unwrap().unwrap().state,
            "succeeded",
            "{kind}"
        );
    })
    .await;
}

#[tokio::test]
async fn an_answer_and_a_result_in_one_batch_are_written_together() {
    each_db(|s, kind| async move {
        let g = s.create_group(&group("app-both"), 1).await.unwrap();
        let j = s.create_job(&job(g, "both"), 1).await.unwrap();
        let fire_of = |planned: i64, runs: Vec<NewRun>| {
            let s = s.clone();
            async move {
                s.create_fire(j, g, "CRON", planned, None, "", None, &runs, 100)
                    .await
                    .unwrap()
                    .unwrap()
            }
        };
        let accepted = |run_id: i64, fire_id: i64, addr: &str| RunUpdate {
            run_id,
            fire_id,
            state: RunState::Running,
            executor_address: addr.to_string(),
            trigger_code: 200,
            trigger_msg: format!("accepted by {addr}").into(),
            at: 111,
            fire_sent_at: 110,
        };
        // One fire of one run: its answer and result in the same batch.
        let (one, one_runs) = fire_of(1_000, vec![run(0, 1, "a")]).await;
        // A fire of two runs whose result came in an earlier batch than its answer, and a run
        // answered with a duplicate result in the batch.
        let (two, two_runs) = fire_of(2_000, vec![run(0, 2, "a"), run(1, 2, "b")]).await;
        s.store_results(&[], &[(two_runs[0], 200, "done early".into())], 105)
            .await
            .unwrap();
        // A fire whose one request was refused.
        let (three, three_runs) = fire_of(3_000, vec![run(0, 1, "c")]).await;

        let (out, ended) = s
            .store_results(
                &[
                    accepted(one_runs[0], one, "a"),
                    accepted(two_runs[0], two, "a"),
                    accepted(two_runs[1], two, "b"),
                    RunUpdate {
                        state: RunState::Failed,
                        trigger_code: 500,
                        trigger_msg: "refused by c: busy".into(),
                        ..accepted(three_runs[0], three, "c")
                    },
                ],
                &[
                    (one_runs[0], 200, "ok".into()),
                    (two_runs[0], 500, "late duplicate".into()),
                ],
                120,
            )
            .await
            .unwrap();
        assert_eq!(
            out,
            vec![
                CallbackOutcome::Applied {
                    run_id: one_runs[0],
                    fire_id: one
                },
                CallbackOutcome::Duplicate,
            ],
            "{kind}"
        );
        assert_eq!(
            ended
                .iter()
                .map(|e| (e.fire_id, e.state.as_str()))
                .collect::<Vec<_>>(),
            vec![(one, "succeeded")],
            "{kind}"
        );
        let r = s.get_run(one_runs[0]).await.unwrap().unwrap();
        assert_eq!(
            (
                r.state.as_str(),
                r.handle_msg.as_str(),
                r.trigger_code,
                r.trigger_msg.as_str(),
                r.dispatched_at,
                r.finished_at
            ),
            (
                "succeeded",
                "ok",
                200,
                "accepted by a",
                Some(111),
                Some(120)
            ),
            "{kind}: answer and result both stored"
        );
        let f = s.get_fire(one).await.unwrap().unwrap();
        assert_eq!(
            (f.state.as_str(), f.dispatched_at, f.finished_at),
            ("succeeded", Some(110), Some(120)),
            "{kind}: the fire went from triggering to its end in one write"
        );
        // The early result stays; the answer is still recorded, and the other run is running.
        let early = s.get_run(two_runs[0]).await.unwrap().unwrap();
        assert_eq!(
            (
                early.state.as_str(),
                early.handle_msg.as_str(),
                early.trigger_msg.as_str(),
                early.dispatched_at
            ),
            ("succeeded", "done early", "accepted by a", Some(111)),
            "{kind}"
        );
        let other = s.get_run(two_runs[1]).await.unwrap().unwrap();
        assert_eq!(other.state, "running", "{kind}");
        let f = s.get_fire(two).await.unwrap().unwrap();
        assert_eq!(
            (f.state.as_str(), f.dispatched_at),
            ("running", Some(110)),
            "{kind}"
        );
        // A refused run ends the run, not the fire (the dispatcher fails it over first), and
        // its fire is not running.
        let refused = s.get_run(three_runs[0]).await.unwrap().unwrap();
        assert_eq!(
            (refused.state.as_str(), refused.trigger_code),
            ("failed", 500),
            "{kind}"
        );
        let f = s.get_fire(three).await.unwrap().unwrap();
        assert_eq!(
            (f.state.as_str(), f.dispatched_at),
            ("triggering", Some(110)),
            "{kind}: a refused fire was sent all the same"
        );
        // A later round of the same fire keeps the first send time.
        let later = RunUpdate {
            at: 131,
            fire_sent_at: 130,
            ..accepted(two_runs[1], two, "b")
        };
        s.store_results(&[later], &[], 135).await.unwrap();
        let f = s.get_fire(two).await.unwrap().unwrap();
        assert_eq!(f.dispatched_at, Some(110), "{kind}");
    })
    .await;
}

/// Runs `sql` (one statement, one bound id) on a connection of its own, past the store, and
/// returns the text of its first row's first column, if it has a row: what a row holds, not
/// what the store makes of it.
async fn raw(db: &TestDb, sql: &str, id: i64) -> Option<String> {
    if db.kind() == "mysql" {
        let pool = sqlx::MySqlPool::connect(&db.url).await.unwrap();
        let v = sqlx::query_scalar(sql)
            .bind(id)
            .fetch_optional(&pool)
            .await
            .unwrap();
        pool.close().await;
        v
    } else {
        let pool = sqlx::SqlitePool::connect(&db.url).await.unwrap();
        let v = sqlx::query_scalar(sql)
            .bind(id)
            .fetch_optional(&pool)
            .await
            .unwrap();
        pool.close().await;
        v
    }
}

/// The results writer keeps an acceptance back for its run's result and writes both together;
/// a refusal is stored at once, an acceptance whose result does not come within
/// `ANSWER_HOLD` is stored alone, `flush_all` and the writer's end store every one held.
#[tokio::test]
async fn the_writer_holds_an_acceptance_for_its_result() {
    use shardline_admin::metrics::Metrics;
    use shardline_admin::results::{self, ANSWER_HOLD};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    each_db(|s, kind| async move {
        let g = s.create_group(&group("app-held"), 1).await.unwrap();
        let j = s.create_job(&job(g, "held"), 1).await.unwrap();
        let runs: Vec<NewRun> = (0..5).map(|i| run(i, 5, "a")).collect();
        let (fire, ids) = s
            .create_fire(j, g, "CRON", 1_000, None, "", None, &runs, 100)
            .await
            .unwrap()
            .unwrap();
        let accepted = |run_id: i64| RunUpdate {
            run_id,
            fire_id: fire,
            state: RunState::Running,
            executor_address: "a".into(),
            trigger_code: 200,
            trigger_msg: Default::default(),
            at: 111,
            fire_sent_at: 110,
        };
        let (events, mut ended) = tokio::sync::mpsc::unbounded_channel();
        let (sink, writer) = results::start(s.clone(), Arc::new(Metrics::default()), events);
        let state = |id: i64| {
            let s = s.clone();
            async move {
                let r = s.get_run(id).await.unwrap().unwrap();
                (
                    r.state.as_str().to_string(),
                    r.executor_address,
                    r.dispatched_at,
                )
            }
        };
        let triggering = ("triggering".to_string(), "a".to_string(), None);
        let running = ("running".to_string(), "a".to_string(), Some(111));

        for id in &ids[..4] {
            sink.sent(accepted(*id));
        }
        sink.sent(RunUpdate {
            state: RunState::Failed,
            trigger_code: 500,
            trigger_msg: "refused by a: busy".into(),
            ..accepted(ids[4])
        });
        assert!(sink.flush().await, "{kind}");
        assert_eq!(
            state(ids[4]).await.0,
            "failed",
            "{kind}: a refusal is stored at once"
        );
        for id in &ids[..4] {
            assert_eq!(state(*id).await, triggering, "{kind}: acceptances held");
        }

        // A result: its run's answer is written with it.
        assert!(sink.submit(vec![(ids[0], 200, "ok".into())]));
        assert!(sink.flush().await, "{kind}");
        let r = s.get_run(ids[0]).await.unwrap().unwrap();
        assert_eq!(
            (
                r.state.as_str(),
                r.handle_msg.as_str(),
                r.executor_address.as_str()
            ),
            ("succeeded", "ok", "a"),
            "{kind}"
        );
        assert_eq!(
            (r.trigger_code, r.dispatched_at, r.finished_at.is_some()),
            (200, Some(111), true),
            "{kind}"
        );
        assert_eq!(
            state(ids[1]).await,
            triggering,
            "{kind}: the others still held"
        );

        // flush_all stores every acceptance held.
        assert!(sink.flush_all().await, "{kind}");
        for id in &ids[1..4] {
            assert_eq!(state(*id).await, running, "{kind}: stored by flush_all");
        }

        // An acceptance whose result does not come is stored alone once it has waited.
        let (fire2, ids2) = s
            .create_fire(
                j,
                g,
                "CRON",
                2_000,
                None,
                "",
                None,
                &[run(0, 2, "a"), run(1, 2, "a")],
                100,
            )
            .await
            .unwrap()
            .unwrap();
        let held = Instant::now();
        sink.sent(RunUpdate {
            fire_id: fire2,
            ..accepted(ids2[0])
        });
        while state(ids2[0]).await == triggering {
            assert!(held.elapsed() < ANSWER_HOLD * 5, "{kind}: never stored");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            held.elapsed() >= ANSWER_HOLD,
            "{kind}: stored after {:?}",
            held.elapsed()
        );
        assert_eq!(state(ids2[0]).await, running, "{kind}");

        // The writer's end stores what it still holds.
        sink.sent(RunUpdate {
            fire_id: fire2,
            ..accepted(ids2[1])
        });
        drop(sink);
        writer.await.unwrap();
        assert_eq!(state(ids2[1]).await, running, "{kind}: stored at the end");

        // Neither fire has all its results: none was reported ended.
        assert!(ended.try_recv().is_err(), "{kind}: no fire ended");
    })
    .await;
}

/// A stored note, as JSON.
fn note_of(stored: &Option<String>) -> Option<serde_json::Value> {
    stored
        .as_deref()
        .map(|j| serde_json::from_str(j).expect("a note is JSON"))
}

#[tokio::test]
async fn an_accepted_answer_is_stored_without_its_message_and_read_with_it() {
    for db in TestDb::all().await {
        let kind = db.kind();
        let s = Store::connect(&db.url).await.expect("connect + migrate");
        let (fire, runs) = fire_of_new_job(
            &s,
            "msg",
            &[
                run(0, 3, "http://e1:9999/"),
                run(1, 3, "http://e2:9999/"),
                run(2, 3, "http://e3:9999/"),
            ],
        )
        .await;
        let answer = |run_id: i64, addr: &str, code: i64, msg: Message| RunUpdate {
            run_id,
            fire_id: fire,
            state: if code == 200 {
                RunState::Running
            } else {
                RunState::Failed
            },
            executor_address: addr.to_string(),
            trigger_code: code,
            trigger_msg: msg,
            at: 111,
            fire_sent_at: 110,
        };
        let refused = Note::new(NoteKind::RefusedBy)
            .with("address", "http://e3:9999/")
            .with("detail", "busy");
        s.store_results(
            &[
                // Accepted, with its result in the same batch (one write) ...
                answer(runs[0], "http://e1:9999/", 200, Message::default()),
                // ... accepted, its result still to come (the answer written alone) ...
                answer(runs[1], "http://e2:9999/", 200, Message::default()),
                // ... and refused, whose message says something else, with its note.
                answer(runs[2], "http://e3:9999/", 500, refused.clone().into()),
            ],
            &[(runs[0], 200, "ok".into())],
            120,
        )
        .await
        .unwrap();
        let stored = "SELECT trigger_msg FROM runs WHERE id = ?";
        for (id, addr) in [(runs[0], "http://e1:9999/"), (runs[1], "http://e2:9999/")] {
            assert_eq!(
                raw(&db, stored, id).await.as_deref(),
                Some(""),
                "{kind}: run {id} row"
            );
            let r = s.get_run(id).await.unwrap().unwrap();
            // The English the query writes is the note's text.
            let accepted = Note::new(NoteKind::AcceptedBy).with("address", addr);
            assert_eq!(
                (r.trigger_code, r.trigger_msg.as_str()),
                (200, accepted.to_string().as_str()),
                "{kind}: run {id} as read"
            );
            assert_eq!(
                note_of(&r.trigger_note),
                Some(accepted.to_json()),
                "{kind}: run {id}"
            );
            assert_eq!(
                r.handle_note, None,
                "{kind}: an executor's result has no note"
            );
        }
        assert_eq!(
            raw(&db, stored, runs[2]).await.as_deref(),
            Some("refused by http://e3:9999/: busy"),
            "{kind}"
        );
        let r = s.get_run(runs[2]).await.unwrap().unwrap();
        assert_eq!(r.trigger_msg, "refused by http://e3:9999/: busy", "{kind}");
        // A refused dispatch is also the run's end: its result says the same, note and all.
        assert_eq!(
            (r.state.as_str(), r.handle_msg.as_str()),
            ("failed", r.trigger_msg.as_str()),
            "{kind}"
        );
        assert_eq!(note_of(&r.trigger_note), Some(refused.to_json()), "{kind}");
        assert_eq!(note_of(&r.handle_note), Some(refused.to_json()), "{kind}");
        // A run the admin ends keeps the note of why.
        let lost = Note::new(NoteKind::LostNoAnswer).with("address", "http://e2:9999/");
        assert!(s
            .finish_run(runs[1], RunState::Lost, 500, &lost.clone().into(), 130)
            .await
            .unwrap());
        let r = s.get_run(runs[1]).await.unwrap().unwrap();
        assert_eq!(
            r.handle_msg, "lost: executor http://e2:9999/ stopped answering",
            "{kind}"
        );
        assert_eq!(note_of(&r.handle_note), Some(lost.to_json()), "{kind}");
        // A row that holds the text (written before it was left out) reads the same.
        let old = "UPDATE runs SET trigger_msg = 'accepted by http://e2:9999/' WHERE id = ?";
        assert_eq!(raw(&db, old, runs[1]).await, None);
        let r = s.get_run(runs[1]).await.unwrap().unwrap();
        assert_eq!(r.trigger_msg, "accepted by http://e2:9999/", "{kind}");
        s.close().await;
        db.cleanup().await;
    }
}

#[tokio::test]
async fn users_tokens_checkpoints_reports() {
    each_db(|s, kind| async move {
        let u = s
            .create_user("alice", "hash", "USER", "1,2", false, 1)
            .await
            .unwrap();
        assert!(matches!(
            s.create_user("alice", "hash", "USER", "", false, 1).await,
            Err(StoreError::Conflict(_))
        ));
        let user = s.user_by_name("alice").await.unwrap().unwrap();
        assert!(user.can_access_group(2) && !user.can_access_group(3));
        let t = s.create_token(u, "ci", "abc123", "sl_ab", 5).await.unwrap();
        assert_eq!(s.token_by_hash("abc123").await.unwrap().unwrap().id, t);
        s.revoke_token(t, 6).await.unwrap();
        assert!(s.token_by_hash("abc123").await.unwrap().is_none(), "{kind}");

        s.save_checkpoint(7, 0, "id=10", 1, 1).await.unwrap();
        s.save_checkpoint(7, 0, "id=20", 2, 2).await.unwrap();
        s.save_checkpoint(7, 1, "id=5", 3, 2).await.unwrap();
        let cps = s.checkpoints(7).await.unwrap();
        assert_eq!(cps.len(), 2);
        assert_eq!(cps[0].value, "id=20");
        assert_eq!(s.clear_checkpoints(7).await.unwrap(), 2);

        s.refresh_daily_report("2026-11-30", 0, i64::MAX, 1)
            .await
            .unwrap();
        s.refresh_daily_report("2026-11-30", 0, i64::MAX, 2)
            .await
            .unwrap();
        assert_eq!(s.daily_reports("2026-11-01").await.unwrap().len(), 1);

        s.heartbeat_node("node-a", "127.0.0.1:8080", 1, 1)
            .await
            .unwrap();
        s.heartbeat_node("node-a", "127.0.0.1:8080", 1, 9)
            .await
            .unwrap();
        assert_eq!(s.admin_nodes().await.unwrap()[0].heartbeat_at, 9);
    })
    .await;
}

/// A database made before send and finish times were stored as 0 until set (migration 4) and
/// before leases were 0 outside `scheduled` (migration 5): migrating it keeps every fire's and
/// run's times, "not yet" stays `None`, only a scheduled fire keeps its lease, and ids are not
/// reused (the tables are rebuilt on SQLite, whose AUTOINCREMENT counters must be carried over).
#[tokio::test]
async fn migrating_an_older_database_keeps_rows_ids_and_leases() {
    let rows = [
        "INSERT INTO fires (id, job_id, group_id, trigger_type, planned_at, sched_key, params, state, message, owner, claim_expires_at, created_at, dispatched_at, finished_at) VALUES (1, 1, 1, 'CRON', 1000, '1:1000', '', 'triggering', '', 'n1', 4000, 900, NULL, NULL)",
        "INSERT INTO fires (id, job_id, group_id, trigger_type, planned_at, sched_key, params, state, message, owner, claim_expires_at, created_at, dispatched_at, finished_at) VALUES (2, 1, 1, 'CRON', 2000, '1:2000', '', 'succeeded', '', 'n1', 5000, 1900, 2001, 2050)",
        "INSERT INTO fires (id, job_id, group_id, trigger_type, planned_at, sched_key, params, state, message, owner, claim_expires_at, created_at) VALUES (3, 1, 1, 'CRON', 3000, '1:3000', '', 'scheduled', '', 'n1', 6000, 2900)",
        "INSERT INTO fires (id, job_id, group_id, trigger_type, planned_at, params, state, message, created_at) VALUES (4, 1, 1, 'MANUAL', 3000, '', 'failed', '', 3000)",
        "DELETE FROM fires WHERE id = 4",
        "INSERT INTO runs (id, fire_id, job_id, group_id, shard_index, shard_total, params, state, trigger_msg, handle_msg, log_date_time, created_at, dispatched_at, finished_at) VALUES (1, 1, 1, 1, 0, 1, '', 'triggering', '', '', 900, 900, NULL, NULL)",
        "INSERT INTO runs (id, fire_id, job_id, group_id, shard_index, shard_total, params, state, trigger_msg, handle_msg, log_date_time, created_at, dispatched_at, finished_at) VALUES (2, 2, 1, 1, 0, 1, '', 'succeeded', '', '', 1900, 1900, 2001, 2049)",
        "INSERT INTO runs (id, fire_id, job_id, group_id, shard_index, shard_total, params, state, trigger_msg, handle_msg, log_date_time, created_at) VALUES (3, 2, 1, 1, 1, 2, '', 'failed', '', '', 1900, 1900)",
        "DELETE FROM runs WHERE id = 3",
    ];
    for db in TestDb::all().await {
        let kind = db.kind();
        // The schema as it was: the migrations before the fourth, from a copy of their folder.
        let old = tempfile::tempdir().unwrap();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../migrations")
            .join(kind);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            if name.as_str() < "0004" {
                std::fs::copy(&path, old.path().join(name)).unwrap();
            }
        }
        let migrator = sqlx::migrate::Migrator::new(old.path()).await.unwrap();
        if kind == "mysql" {
            let pool = sqlx::MySqlPool::connect(&db.url).await.unwrap();
            migrator.run(&pool).await.unwrap();
            for sql in rows {
                sqlx::query(sql).execute(&pool).await.unwrap();
            }
            pool.close().await;
        } else {
            let opts: sqlx::sqlite::SqliteConnectOptions = db.url.parse().unwrap();
            let pool = sqlx::SqlitePool::connect_with(opts.create_if_missing(true))
                .await
                .unwrap();
            migrator.run(&pool).await.unwrap();
            for sql in rows {
                sqlx::query(sql).execute(&pool).await.unwrap();
            }
            pool.close().await;
        }

        let s = Store::connect(&db.url).await.expect("migrates");
        let mut leases: Vec<_> = s
            .get_fires(&[1, 2, 3])
            .await
            .unwrap()
            .iter()
            .map(|f| (f.id, f.claim_expires_at))
            .collect();
        leases.sort();
        assert_eq!(leases, [(1, 0), (2, 0), (3, 6000)], "{kind}");
        let fires = s.get_fires(&[1, 2]).await.unwrap();
        let runs = s.runs_by_ids(&[1, 2]).await.unwrap();
        let fire_times: Vec<_> = fires
            .iter()
            .map(|f| (f.id, f.state.as_str(), f.dispatched_at, f.finished_at))
            .collect();
        let run_times: Vec<_> = runs
            .iter()
            .map(|r| (r.id, r.state.as_str(), r.dispatched_at, r.finished_at))
            .collect();
        let expected = |finished| {
            vec![
                (1, "triggering", None, None),
                (2, "succeeded", Some(2001), Some(finished)),
            ]
        };
        assert_eq!(
            (fire_times, run_times),
            (expected(2050), expected(2049)),
            "{kind}"
        );
        // The deleted last rows' ids stay used.
        let (fire, runs) = s
            .create_fire(
                1,
                1,
                "MANUAL",
                4000,
                None,
                "",
                None,
                &[run(0, 1, "a")],
                4000,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!((fire, runs), (5, vec![4]), "{kind}");
        let new = s.get_fire(fire).await.unwrap().unwrap();
        assert_eq!((new.dispatched_at, new.finished_at), (None, None), "{kind}");
        s.close().await;
        db.cleanup().await;
    }
}

/// Clearing fires (XXL-JOB's "clear logs"; run retention uses it too) deletes ended fires and
/// their runs in the scope and cut asked for: never an open fire, nor one whose follow-up (its
/// alarm, child jobs) is still to come; skipped fires go as well.
/// A batch of results ends each fire by its current runs, whether one run ended it or
/// several (on MySQL a fire of one item ended in the batch is not counted again).
#[tokio::test]
async fn a_batch_ends_fires_of_one_item_and_of_several() {
    each_db(|s, kind| async move {
        let g = s.create_group(&group("app-ends"), 1).await.unwrap();
        let j = s.create_job(&job(g, "ends"), 1).await.unwrap();
        let (ok, ok_run) = one_run_fire(&s, j, g, 100).await;
        let (bad, bad_run) = one_run_fire(&s, j, g, 200).await;
        let two = |at: i64| {
            let s = s.clone();
            async move {
                s.create_fire(
                    j,
                    g,
                    "MANUAL",
                    at,
                    None,
                    "",
                    None,
                    &[run(0, 2, "a"), run(1, 2, "b")],
                    at,
                )
                .await
                .unwrap()
                .unwrap()
            }
        };
        let (both, both_runs) = two(300).await;
        let (half, half_runs) = two(400).await;
        // A retried one-item fire: its first attempt replaced, the second ends it.
        let (retried, first) = one_run_fire(&s, j, g, 500).await;
        s.finish_run(first, RunState::Failed, 500, &"boom".into(), 501)
            .await
            .unwrap();
        let f = s.get_fire(retried).await.unwrap().unwrap();
        let second = s
            .add_attempts(
                &f,
                &[(
                    first,
                    NewRun {
                        attempt: 1,
                        retries: 1,
                        ..run(0, 1, "b")
                    },
                )],
                Replacing::Ended,
                502,
            )
            .await
            .unwrap()[0];
        let results = vec![
            (ok_run, 200, "ok".to_string()),
            (bad_run, 500, "boom".to_string()),
            (both_runs[0], 200, String::new()),
            (both_runs[1], 500, "boom".to_string()),
            (half_runs[0], 200, String::new()),
            (second, 200, String::new()),
        ];
        let (_, ended) = s.store_results(&[], &results, 600).await.unwrap();
        let mut ended: Vec<(i64, &str)> = ended
            .iter()
            .map(|e| (e.fire_id, e.state.as_str()))
            .collect();
        ended.sort_unstable();
        assert_eq!(
            ended,
            vec![
                (ok, "succeeded"),
                (bad, "failed"),
                (both, "failed"),
                (retried, "succeeded")
            ],
            "{kind}"
        );
        let state = |id: i64| {
            let s = s.clone();
            async move { s.get_fire(id).await.unwrap().unwrap().state }
        };
        assert_eq!(
            state(half).await,
            "running",
            "{kind}: one of two items ended"
        );
        assert_eq!(state(retried).await, "succeeded", "{kind}");
    })
    .await;
}

/// Two retries of one failed item that read it before either replaced it (two "retry failed
/// items" requests at once) dispatch it once, and a retry read before a clear deleted its fire
/// adds no run without a fire.
#[tokio::test]
async fn a_run_is_replaced_once_and_never_after_its_fire_was_cleared() {
    each_db(|s, kind| async move {
        let g = s.create_group(&group("app-replace"), 1).await.unwrap();
        let j = s.create_job(&job(g, "replace"), 1).await.unwrap();
        let failed_fire = |at: i64| {
            let s = s.clone();
            async move {
                let (fire, run_id) = one_run_fire(&s, j, g, at).await;
                s.finish_run(run_id, RunState::Failed, 500, &"boom".into(), at + 1)
                    .await
                    .unwrap();
                s.refresh_fire_state(fire, at + 1).await.unwrap();
                (s.get_fire(fire).await.unwrap().unwrap(), run_id)
            }
        };
        let retry = |fire: Fire, run_id: i64| {
            let s = s.clone();
            async move {
                let next = NewRun {
                    attempt: 1,
                    retries: 1,
                    ..run(0, 1, "b")
                };
                s.add_attempts(&fire, &[(run_id, next)], Replacing::Ended, 500)
                    .await
                    .unwrap()
            }
        };

        let (fire, run_id) = failed_fire(100).await;
        assert_eq!(retry(fire.clone(), run_id).await.len(), 1, "{kind}");
        assert!(
            retry(fire.clone(), run_id).await.is_empty(),
            "{kind}: the item was replaced already"
        );
        assert_eq!(s.fire_runs(fire.id).await.unwrap().len(), 2, "{kind}");

        let (fire, run_id) = failed_fire(200).await;
        s.follow_ups_done(&s.stale_follow_ups(i64::MAX, 10).await.unwrap())
            .await
            .unwrap();
        let got = s
            .clear_fires(None, Some(j), ClearCut::CreatedBefore(300), 10)
            .await
            .unwrap();
        assert_eq!(got, (1, 1), "{kind}");
        assert!(retry(fire.clone(), run_id).await.is_empty(), "{kind}");
        assert!(
            s.fire_runs(fire.id).await.unwrap().is_empty(),
            "{kind}: no run without its fire"
        );
    })
    .await;
}

/// The ids of the next page of open runs from `cursor`, which moves on.
async fn open_page(
    s: &Store,
    unsent_before: i64,
    cursor: &mut OpenRunsCursor,
    limit: i64,
) -> Vec<i64> {
    s.open_runs(unsent_before, cursor, limit)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect()
}

/// The lost-run watch reads the open runs a page a sweep and must come round to every one of
/// them, never spending a sweep on an empty page while runs are open. The pages follow the state
/// index: running runs, then unsent ones, each oldest first, runs of one millisecond by id.
#[tokio::test]
async fn open_runs_are_read_a_page_at_a_time_and_round_again() {
    each_db(|s, kind| async move {
        let g = s.create_group(&group("app-open"), 1).await.unwrap();
        let j = s.create_job(&job(g, "open"), 1).await.unwrap();
        let mut unsent = Vec::new();
        for at in 1..=5 {
            unsent.push(one_run_fire(&s, j, g, at * 100).await.1);
        }
        // Three items made in one millisecond, after the others, and accepted.
        let items = [run(0, 3, "a"), run(1, 3, "a"), run(2, 3, "a")];
        let (fire, running) = s
            .create_fire(j, g, "MANUAL", 600, None, "", None, &items, 600)
            .await
            .unwrap()
            .unwrap();
        s.store_results(&accepted_on_a(fire, &running, 605, 610), &[], 612)
            .await
            .unwrap();
        let (t, r) = (running.clone(), unsent.clone());

        let mut c = OpenRunsCursor::default();
        let all: Vec<i64> = t.iter().chain(&r).copied().collect();
        assert_eq!(open_page(&s, 10_000, &mut c, 10).await, all, "{kind}");
        assert_eq!(c, OpenRunsCursor::default(), "{kind}: a short page ends the round");
        // A page ends inside a millisecond, and between the states.
        for want in [vec![t[0], t[1]], vec![t[2], r[0]], vec![r[1], r[2]], vec![r[3], r[4]]] {
            assert_eq!(open_page(&s, 10_000, &mut c, 2).await, want, "{kind}");
        }
        // The open runs ended exactly at the page's end: after it comes the first page again.
        assert_eq!(open_page(&s, 10_000, &mut c, 2).await, vec![t[0], t[1]], "{kind}");
        assert_eq!(
            open_page(&s, 450, &mut OpenRunsCursor::default(), 10).await,
            all[..7].to_vec(),
            "{kind}: a run not yet sent is open only once it had its time to be; an accepted one always"
        );

        // A short page ends the round.
        let mut c = OpenRunsCursor::default();
        for want in [&all[..3], &all[3..6], &all[6..]] {
            assert_eq!(open_page(&s, 10_000, &mut c, 3).await, want.to_vec(), "{kind}");
        }
        assert_eq!(open_page(&s, 10_000, &mut c, 3).await, all[..3].to_vec(), "{kind}");
        // A cursor whose later runs have all ended since comes round too.
        assert_eq!(open_page(&s, 10_000, &mut c, 3).await, all[3..6].to_vec(), "{kind}");
        for id in [r[3], r[4]] {
            s.finish_run(id, RunState::Lost, 500, &"gone".into(), 1_000)
                .await
                .unwrap();
        }
        assert_eq!(open_page(&s, 10_000, &mut c, 3).await, all[..3].to_vec(), "{kind}");

        for id in all {
            s.finish_run(id, RunState::Lost, 500, &"gone".into(), 1_000)
                .await
                .unwrap();
        }
        assert_eq!(open_page(&s, 10_000, &mut c, 3).await, Vec::<i64>::new(), "{kind}: none open");
        assert_eq!(c, OpenRunsCursor::default(), "{kind}");
    })
    .await;
}

#[tokio::test]
async fn clearing_fires_keeps_open_ones_and_those_still_followed() {
    each_db(|s, kind| async move {
        let g1 = s.create_group(&group("app-clear"), 1).await.unwrap();
        let g2 = s.create_group(&group("app-other"), 1).await.unwrap();
        let j1 = s.create_job(&job(g1, "clear-1"), 1).await.unwrap();
        let j2 = s.create_job(&job(g1, "clear-2"), 1).await.unwrap();
        let j3 = s.create_job(&job(g2, "clear-3"), 1).await.unwrap();
        // A fire of one run, created at `at`, its run ended as `end` (or left open).
        let fire = |job: i64, g: i64, at: i64, end: Option<RunState>| {
            let s = s.clone();
            async move {
                let (fire, run_id) = one_run_fire(&s, job, g, at).await;
                if let Some(state) = end {
                    s.finish_run(run_id, state, 200, &"".into(), at + 1)
                        .await
                        .unwrap();
                    s.refresh_fire_state(fire, at + 1).await.unwrap();
                }
                fire
            }
        };
        let ok_old = fire(j1, g1, 100, Some(RunState::Succeeded)).await;
        let failed_old = fire(j1, g1, 200, Some(RunState::Failed)).await;
        let open_old = fire(j1, g1, 300, None).await;
        let other_job = fire(j2, g1, 100, Some(RunState::Succeeded)).await;
        let other_group = fire(j3, g2, 100, Some(RunState::Succeeded)).await;
        let ok_new = fire(j1, g1, 10_000, Some(RunState::Succeeded)).await;
        let t = 20_000;
        let skipper = due_job(&s, g1, "clear-skipped", t + 1_000, t).await;
        let (_, claimed) = s
            .claim_due("n1", t + 1_000, 10_000, 10, t, |_| {
                one_fire(t + 1_000, None, true)
            })
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1, "{kind}");
        assert_eq!(claimed[0].job_id, skipper, "{kind}");
        let skipped = claimed[0].fire_id;
        s.skip_claims(&[skipped], "n1", &"misfired".into(), t)
            .await
            .unwrap();
        let exists = |id: i64| {
            let s = s.clone();
            async move { s.get_fire(id).await.unwrap().is_some() }
        };

        // Older than 1 000 in job 1: the failed fire's alarm is still to come, the open one runs.
        let cut = ClearCut::CreatedBefore(1_000);
        let got = s.clear_fires(Some(&[g1]), Some(j1), cut, 1).await.unwrap();
        assert_eq!(got, (1, 1), "{kind}");
        assert!(!exists(ok_old).await, "{kind}");
        assert!(exists(failed_old).await && exists(open_old).await, "{kind}");
        assert!(s.fire_runs(ok_old).await.unwrap().is_empty(), "{kind}");
        let followed = s.stale_follow_ups(i64::MAX, 10).await.unwrap();
        assert_eq!(followed.len(), 1, "{kind}: {followed:?}");
        s.follow_ups_done(&followed).await.unwrap();
        let got = s.clear_fires(Some(&[g1]), Some(j1), cut, 1).await.unwrap();
        assert_eq!(
            got,
            (1, 1),
            "{kind}: its follow-up done, the failed fire goes"
        );
        assert_eq!(s.fire_runs(open_old).await.unwrap().len(), 1, "{kind}");

        // All but the newest two of group 1 (the skipped fire and the new one): the other
        // job's fire goes, the open fire stays.
        let got = s
            .clear_fires(Some(&[g1]), None, ClearCut::KeepNewest(2), 1_000)
            .await
            .unwrap();
        assert_eq!(got, (1, 1), "{kind}");
        assert!(!exists(other_job).await && exists(open_old).await, "{kind}");
        assert!(exists(skipped).await && exists(ok_new).await, "{kind}");

        // Everything ended, in every group, in batches of two.
        let got = s.clear_fires(None, None, ClearCut::All, 2).await.unwrap();
        assert_eq!(got, (3, 2), "{kind}: the skipped fire has no run");
        for id in [skipped, ok_new, other_group] {
            assert!(!exists(id).await, "{kind}: fire {id}");
        }
        assert!(exists(open_old).await, "{kind}");
        assert_eq!(s.fire_runs(open_old).await.unwrap().len(), 1, "{kind}");
        // Nothing older than the newest five exists.
        let got = s.clear_fires(None, None, ClearCut::KeepNewest(5), 10).await;
        assert_eq!(got.unwrap(), (0, 0), "{kind}");
    })
    .await;
}
