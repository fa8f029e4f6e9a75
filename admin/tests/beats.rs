//! Heartbeats written behind (`shardline_admin::beats`), on a fresh SQLite file and a fresh
//! MariaDB database: what an executor and the scheduler see of them.

mod common;

use common::TestDb;
use shardline_admin::beats::Beats;
use shardline_admin::store::{Beat, Store};

/// The time the tests' beats count from: known executors not heard of for the eviction age are
/// forgotten, so beat times must be close to the clock.
fn t0() -> i64 {
    static T0: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *T0.get_or_init(shardline_admin::model::now_ms)
}

/// A beat `at` milliseconds after [`t0`].
fn beat(address: &str, meta: &str, at: i64) -> Beat {
    Beat {
        appname: "beat-app".into(),
        address: address.into(),
        meta: meta.into(),
        at: t0() + at,
    }
}

/// (address, meta, first_seen, updated_at) of every registered executor alive since 0.
async fn rows(store: &Store) -> Vec<(String, String, i64, i64)> {
    store
        .all_live_executors(0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.address, e.meta, e.first_seen - t0(), e.updated_at - t0()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beats_are_written_behind_without_losing_registrations_or_removals() {
    const A: &str = "http://127.0.0.1:9001/";
    const B: &str = "http://127.0.0.1:9002/";
    for db in TestDb::all().await {
        let kind = db.kind();
        let store = Store::connect(&db.url).await.unwrap();
        let beats = Beats::new(store.clone(), 90_000);
        assert_eq!(beats.flush_every().as_millis(), 1_000);

        // A new executor is in the database when its beat returns.
        beats.beat(beat(A, "", 1_000)).await.unwrap();
        assert_eq!(
            rows(&store).await,
            vec![(A.into(), "".into(), 1_000, 1_000)],
            "{kind}"
        );

        // Its next beats wait for the flush; the latest one is written.
        beats.beat(beat(A, "", 2_000)).await.unwrap();
        beats.beat(beat(A, "", 3_000)).await.unwrap();
        assert_eq!(rows(&store).await[0].3, 1_000, "{kind}: written behind");
        beats.flush().await;
        assert_eq!(
            rows(&store).await,
            vec![(A.into(), "".into(), 1_000, 3_000)],
            "{kind}"
        );

        // Changed metadata (weight, labels) is written at once.
        beats.beat(beat(A, r#"{"weight":3}"#, 4_000)).await.unwrap();
        assert_eq!(
            rows(&store).await[0],
            (A.into(), r#"{"weight":3}"#.into(), 1_000, 4_000),
            "{kind}"
        );

        // A removal drops the pending beat: no later flush brings the executor back.
        beats.beat(beat(B, "", 5_000)).await.unwrap();
        beats.beat(beat(B, "", 6_000)).await.unwrap();
        assert_eq!(beats.remove("beat-app", B).await.unwrap(), 1, "{kind}");
        beats.flush().await;
        assert_eq!(rows(&store).await.len(), 1, "{kind}: B stays removed");
        // Registering again after the removal is a new registration, written at once.
        beats.beat(beat(B, "", 7_000)).await.unwrap();
        assert_eq!(
            rows(&store).await[1],
            (B.into(), "".into(), 7_000, 7_000),
            "{kind}"
        );

        // The database fails: the pending beat is kept, and while the failure lasts every beat is
        // written at once and answered with the error.
        beats.beat(beat(A, r#"{"weight":3}"#, 8_000)).await.unwrap();
        db.exec(&["ALTER TABLE registry RENAME TO registry_away"])
            .await;
        beats.flush().await;
        assert!(
            beats.beat(beat(B, "", 9_000)).await.is_err(),
            "{kind}: a beat during the failure reports it"
        );
        db.exec(&["ALTER TABLE registry_away RENAME TO registry"])
            .await;
        beats.flush().await;
        let now = rows(&store).await;
        assert_eq!(
            now[0].3, 8_000,
            "{kind}: the beat kept over the failure is written"
        );
        assert_eq!(now[1].3, 7_000, "{kind}");
        // Written again: the next beat of a known executor waits for the flush as before.
        beats.beat(beat(B, "", 10_000)).await.unwrap();
        assert_eq!(rows(&store).await[1].3, 7_000, "{kind}");
        beats.flush().await;
        assert_eq!(rows(&store).await[1].3, 10_000, "{kind}");

        // Silent for the eviction age (its row may have been evicted meanwhile): the next beat
        // registers it again at once.
        db.exec(&["DELETE FROM registry"]).await;
        beats.beat(beat(B, "", 10_000 + 90_000)).await.unwrap();
        assert_eq!(
            rows(&store).await,
            vec![(B.into(), "".into(), 100_000, 100_000)],
            "{kind}: back after eviction"
        );

        store.close().await;
        db.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_beats_are_one_flush() {
    for db in TestDb::all().await {
        let kind = db.kind();
        let store = Store::connect(&db.url).await.unwrap();
        let beats = Beats::new(store.clone(), 90_000);
        // More executors than one statement's chunk.
        let addresses: Vec<String> = (0..1_200)
            .map(|i| format!("http://127.0.0.2:{}/", 20_000 + i))
            .collect();
        for a in &addresses {
            beats.beat(beat(a, "", 1)).await.unwrap();
        }
        for a in &addresses {
            beats.beat(beat(a, "", 2)).await.unwrap();
        }
        assert!(rows(&store).await.iter().all(|r| r.3 == 1), "{kind}");
        beats.flush().await;
        let after = rows(&store).await;
        assert_eq!(after.len(), 1_200, "{kind}");
        assert!(after.iter().all(|r| r.3 == 2 && r.2 == 1), "{kind}");
        store.close().await;
        db.cleanup().await;
    }
}
