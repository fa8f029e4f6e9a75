//! The console's queries (sessions, failed logins, dashboard aggregates) on a fresh SQLite file and
//! a fresh MariaDB database.

mod common;

use common::TestDb;
use shardline_admin::model::{Job, RunState};
use shardline_admin::store::sessions::{RunCounts, Session};
use shardline_admin::store::{GroupInput, NewRun, Replacing, Store};

fn group(appname: &str) -> GroupInput {
    GroupInput {
        appname: appname.to_string(),
        title: appname.to_string(),
        address_type: "AUTO".to_string(),
        addresses: String::new(),
        access_token: String::new(),
        generation: "CLASSIC".to_string(),
    }
}

fn job(group_id: i64, name: &str, enabled: bool) -> Job {
    Job {
        group_id,
        name: name.to_string(),
        handler: "h".into(),
        enabled: i64::from(enabled),
        ..Job::default()
    }
}

fn session(hash: &str, user_id: i64, created: i64, expires: i64) -> Session {
    Session {
        id_hash: hash.to_string(),
        user_id,
        csrf_token: format!("csrf-{hash}"),
        created_at: created,
        expires_at: expires,
    }
}

async fn each_db<F, Fut>(f: F)
where
    F: Fn(Store) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for db in TestDb::all().await {
        let store = Store::connect(&db.url)
            .await
            .unwrap_or_else(|e| panic!("{}: {e:#}", db.kind()));
        f(store.clone()).await;
        store.close().await;
        db.cleanup().await;
    }
}

#[tokio::test]
async fn sessions_live_expire_and_end() {
    each_db(|store| async move {
        let now = 1_700_000_000_000;
        store
            .create_session(&session("a", 1, now, now + 1000))
            .await
            .unwrap();
        store
            .create_session(&session("b", 1, now, now + 5000))
            .await
            .unwrap();
        store
            .create_session(&session("c", 2, now, now + 5000))
            .await
            .unwrap();
        // The same id twice is refused by the primary key.
        assert!(store
            .create_session(&session("a", 3, now, now + 1))
            .await
            .is_err());

        let a = store.live_session("a", now).await.unwrap().expect("live");
        assert_eq!(a, session("a", 1, now, now + 1000));
        assert!(
            store.live_session("a", now + 1000).await.unwrap().is_none(),
            "expired at its instant"
        );
        assert!(store.live_session("zzz", now).await.unwrap().is_none());

        store.extend_session("a", now + 9000).await.unwrap();
        assert_eq!(
            store
                .live_session("a", now + 2000)
                .await
                .unwrap()
                .unwrap()
                .expires_at,
            now + 9000
        );

        // Ending every session of user 1 but the current one.
        assert_eq!(store.delete_user_sessions(1, Some("a")).await.unwrap(), 1);
        assert!(store.live_session("b", now).await.unwrap().is_none());
        assert!(store.live_session("a", now).await.unwrap().is_some());
        assert!(store.live_session("c", now).await.unwrap().is_some());

        assert!(store.delete_session("a").await.unwrap());
        assert!(!store.delete_session("a").await.unwrap());
        assert_eq!(store.delete_expired_sessions(now + 4999).await.unwrap(), 0);
        assert_eq!(store.delete_expired_sessions(now + 5000).await.unwrap(), 1);
        assert!(store.live_session("c", now).await.unwrap().is_none());

        // Deleting a user ends their sessions.
        let uid = store
            .create_user("eve", "x", "USER", "", false, now)
            .await
            .unwrap();
        store
            .create_session(&session("e", uid, now, now + 5000))
            .await
            .unwrap();
        store.delete_user(uid).await.unwrap();
        assert!(store.live_session("e", now).await.unwrap().is_none());
    })
    .await;
}

#[tokio::test]
async fn failed_logins_count_per_user_and_address() {
    each_db(|store| async move {
        let t = 1_700_000_000_000;
        for i in 0..3 {
            store
                .record_login_failure("admin", "10.0.0.1", t + i)
                .await
                .unwrap();
        }
        store
            .record_login_failure("admin", "10.0.0.2", t + 5)
            .await
            .unwrap();
        store
            .record_login_failure("bob", "10.0.0.1", t + 6)
            .await
            .unwrap();
        assert_eq!(
            store
                .login_failures_since("admin", "10.0.0.1", t)
                .await
                .unwrap(),
            (3, Some(t))
        );
        assert_eq!(
            store
                .login_failures_since("admin", "10.0.0.1", t + 1)
                .await
                .unwrap(),
            (2, Some(t + 1))
        );
        assert_eq!(
            store
                .login_failures_since("admin", "10.0.0.2", t)
                .await
                .unwrap(),
            (1, Some(t + 5))
        );
        assert_eq!(
            store
                .login_failures_since("carol", "10.0.0.1", t)
                .await
                .unwrap(),
            (0, None)
        );

        // Very long names are cut, not refused, and still counted together.
        let long = "x".repeat(300);
        store
            .record_login_failure(&long, "10.0.0.1", t)
            .await
            .unwrap();
        store
            .record_login_failure(&long, "10.0.0.1", t)
            .await
            .unwrap();
        assert_eq!(
            store
                .login_failures_since(&long, "10.0.0.1", t)
                .await
                .unwrap()
                .0,
            2
        );

        store
            .clear_login_failures("admin", "10.0.0.1")
            .await
            .unwrap();
        assert_eq!(
            store
                .login_failures_since("admin", "10.0.0.1", 0)
                .await
                .unwrap()
                .0,
            0
        );
        assert_eq!(
            store
                .login_failures_since("admin", "10.0.0.2", 0)
                .await
                .unwrap()
                .0,
            1
        );

        assert_eq!(store.prune_login_failures(t + 6).await.unwrap(), 3);
        assert_eq!(
            store
                .login_failures_since("bob", "10.0.0.1", 0)
                .await
                .unwrap()
                .0,
            1
        );
    })
    .await;
}

#[tokio::test]
async fn dashboard_aggregates_respect_scope() {
    each_db(|store| async move {
        let t = 1_700_000_000_000;
        let g1 = store.create_group(&group("one"), t).await.unwrap();
        let g2 = store.create_group(&group("two"), t).await.unwrap();
        let j1 = store.create_job(&job(g1, "alpha", true), t).await.unwrap();
        let j2 = store.create_job(&job(g1, "beta", false), t).await.unwrap();
        let j3 = store.create_job(&job(g2, "gamma", true), t).await.unwrap();

        assert_eq!(store.count_jobs_in(None).await.unwrap(), (3, 2));
        assert_eq!(store.count_jobs_in(Some(&[g1])).await.unwrap(), (2, 1));
        assert_eq!(store.count_jobs_in(Some(&[])).await.unwrap(), (0, 0));

        let run = |i: i64| NewRun {
            shard_index: i,
            shard_total: 3,
            attempt: 0,
            retries: 0,
            executor_address: "http://127.0.0.1:9/".into(),
            handler: "h".into(),
            params: String::new(),
            item_param: None,
        };
        // Fire 1 (group 1, day 0): item 0 succeeds, 1 fails, 2 still running.
        let (_, r1) = store
            .create_fire(
                j1,
                g1,
                "MANUAL",
                t,
                None,
                "",
                None,
                &[run(0), run(1), run(2)],
                t,
            )
            .await
            .unwrap()
            .unwrap();
        store
            .finish_run(r1[0], RunState::Succeeded, 200, &"ok".into(), t + 10)
            .await
            .unwrap();
        store
            .finish_run(r1[1], RunState::Failed, 500, &"boom".into(), t + 11)
            .await
            .unwrap();
        // Fire 2 (group 2, one day later): timed out.
        let day = 86_400_000;
        let (_, r2) = store
            .create_fire(j3, g2, "CRON", t + day, None, "", None, &[run(0)], t + day)
            .await
            .unwrap()
            .unwrap();
        store
            .finish_run(
                r2[0],
                RunState::TimedOut,
                502,
                &"too slow".into(),
                t + day + 5,
            )
            .await
            .unwrap();
        // A retry supersedes the failed item 1 of fire 1 and succeeds: only the retry counts.
        let fire1 = store
            .get_fire(store.get_run(r1[1]).await.unwrap().unwrap().fire_id)
            .await
            .unwrap()
            .unwrap();
        let retry = NewRun {
            attempt: 1,
            retries: 1,
            ..run(1)
        };
        let r3 = store
            .add_attempts(&fire1, &[(r1[1], retry)], Replacing::Ended, t + 20)
            .await
            .unwrap();
        let stored = store.get_run(r3[0]).await.unwrap().unwrap();
        assert_eq!((stored.attempt, stored.retries), (1, 1));
        store
            .finish_run(r3[0], RunState::Succeeded, 200, &"ok".into(), t + 30)
            .await
            .unwrap();

        assert_eq!(
            store.run_counts(None, t, t + day).await.unwrap(),
            RunCounts {
                succeeded: 2,
                failed: 0,
                running: 1
            }
        );
        assert_eq!(
            store.run_counts(None, t, t + 2 * day).await.unwrap(),
            RunCounts {
                succeeded: 2,
                failed: 1,
                running: 1
            }
        );
        assert_eq!(
            store.run_counts(Some(&[g2]), t, t + 2 * day).await.unwrap(),
            RunCounts {
                succeeded: 0,
                failed: 1,
                running: 0
            }
        );
        assert_eq!(
            store
                .run_counts(None, t + 2 * day, t + 3 * day)
                .await
                .unwrap(),
            RunCounts::default()
        );

        assert_eq!(store.count_fires_since(None, t).await.unwrap(), 2);
        assert_eq!(store.count_fires_since(None, t + 1).await.unwrap(), 1);
        assert_eq!(
            store.count_fires_since(Some(&[g1]), t + 1).await.unwrap(),
            0
        );

        let running = store
            .runs_in_states(None, &["triggering", "running"], 10)
            .await
            .unwrap();
        assert_eq!(
            running.iter().map(|r| r.id).collect::<Vec<_>>(),
            vec![r1[2]]
        );
        let failed = store
            .runs_in_states(None, &["failed", "timed_out", "killed", "lost"], 10)
            .await
            .unwrap();
        // The superseded failure is not "recent failures" any more: it was retried.
        assert_eq!(failed.iter().map(|r| r.id).collect::<Vec<_>>(), vec![r2[0]]);
        assert!(store
            .runs_in_states(Some(&[g1]), &["timed_out"], 10)
            .await
            .unwrap()
            .is_empty());
        assert!(store
            .runs_in_states(None, &[], 10)
            .await
            .unwrap()
            .is_empty());

        let mut names = store.job_names(&[j3, j1, 999]).await.unwrap();
        names.sort();
        assert_eq!(
            names,
            vec![(j1, "alpha".to_string()), (j3, "gamma".to_string())]
        );
        assert!(store.job_names(&[]).await.unwrap().is_empty());
        let _ = j2;
    })
    .await;
}
