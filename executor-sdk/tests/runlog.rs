//! Run logs on a real folder: file layout, line format, paged reads, the neighbouring-day fallback,
//! missing files, retention and concurrent writers.

use std::fs;
use std::time::Duration;

use chrono::{Local, NaiveDate, TimeZone};
use shardline_executor::runlog::{RunLogs, LOG_NOT_EXISTS, MAX_PAGE_BYTES, MAX_PAGE_LINES};
use tokio_util::sync::CancellationToken;

/// Epoch milliseconds of a local wall-clock time.
fn local_ms(y: i32, m: u32, d: u32, h: u32, min: u32, s: u32, ms: i64) -> i64 {
    Local
        .with_ymd_and_hms(y, m, d, h, min, s)
        .earliest()
        .unwrap()
        .timestamp_millis()
        + ms
}

/// `yyyy-MM-dd HH:mm:ss.SSS ` followed by the message.
fn assert_line_format(line: &str, message: &str) {
    let (stamp, rest) = line.split_at(23);
    assert_eq!(rest, format!(" {message}"), "line {line:?}");
    let parsed = chrono::NaiveDateTime::parse_from_str(stamp, "%Y-%m-%d %H:%M:%S%.3f");
    assert!(parsed.is_ok(), "timestamp {stamp:?}");
    assert_eq!(stamp.as_bytes()[19], b'.');
}

#[test]
fn one_file_per_run_in_its_local_day_folder() {
    let dir = tempfile::tempdir().unwrap();
    let logs = RunLogs::new(dir.path().join("joblogs"), 30).unwrap();
    assert_eq!(logs.root(), dir.path().join("joblogs"));
    let t = local_ms(2026, 3, 14, 9, 26, 53, 589);
    let logger = logs.logger(1024, t);
    assert_eq!(
        logger.path(),
        dir.path()
            .join("joblogs")
            .join("2026-03-14")
            .join("1024.log")
    );
    // Nothing is created before the first write.
    assert!(!logger.path().exists());
    logger.log("job started, shard 0/3");
    logger.append_raw(b"raw script output\n");
    logger.log("done\n");
    let text = fs::read_to_string(logger.path()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert_line_format(lines[0], "job started, shard 0/3");
    assert_eq!(lines[1], "raw script output");
    assert_line_format(lines[2], "done");
    assert!(text.ends_with('\n'));
}

#[test]
fn reads_page_by_page_from_a_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let logs = RunLogs::new(dir.path().to_path_buf(), 30).unwrap();
    let t = local_ms(2026, 5, 1, 12, 0, 0, 0);
    let logger = logs.logger(7, t);
    for i in 1..=2500 {
        logger.log(format!("line {i}"));
    }

    let page = logs.read(7, t, 1);
    assert_eq!(page.from_line_num, 1);
    assert_eq!(page.to_line_num, MAX_PAGE_LINES as i32);
    assert!(!page.is_end, "only the admin decides the end");
    let lines: Vec<&str> = page.log_content.lines().collect();
    assert_eq!(lines.len(), MAX_PAGE_LINES);
    assert_line_format(lines[0], "line 1");
    assert_line_format(lines[999], "line 1000");

    let page = logs.read(7, t, 1001);
    assert_eq!((page.from_line_num, page.to_line_num), (1001, 2000));
    assert_line_format(page.log_content.lines().next().unwrap(), "line 1001");

    let page = logs.read(7, t, 2001);
    assert_eq!((page.from_line_num, page.to_line_num), (2001, 2500));
    assert_eq!(page.log_content.lines().count(), 500);
    assert_line_format(page.log_content.lines().last().unwrap(), "line 2500");

    // Nothing new yet: toLineNum stays at from - 1 and the admin polls again.
    let page = logs.read(7, t, 2501);
    assert_eq!((page.from_line_num, page.to_line_num), (2501, 2500));
    assert_eq!(page.log_content, "");
    assert!(!page.is_end);

    logger.log("line 2501");
    let page = logs.read(7, t, 2501);
    assert_eq!(page.to_line_num, 2501);
    assert_line_format(page.log_content.trim_end(), "line 2501");

    // A line number below 1 reads from the start.
    let page = logs.read(7, t, 0);
    assert_eq!((page.from_line_num, page.to_line_num), (1, 1000));
}

#[test]
fn a_page_holds_about_one_mebibyte_at_most() {
    let dir = tempfile::tempdir().unwrap();
    let logs = RunLogs::new(dir.path().to_path_buf(), 30).unwrap();
    let t = local_ms(2026, 5, 1, 12, 0, 0, 0);
    let logger = logs.logger(8, t);
    let chunk = "x".repeat(100 * 1024);
    for i in 0..30 {
        logger.append_raw(format!("{i:02}{chunk}\n").as_bytes());
    }
    let mut from = 1;
    let mut seen = 0;
    while seen < 30 {
        let page = logs.read(8, t, from);
        assert!(page.log_content.len() <= MAX_PAGE_BYTES);
        let n = page.log_content.lines().count();
        assert!(n >= 1, "every page makes progress");
        assert_eq!(page.to_line_num, from + n as i32 - 1);
        for (k, line) in page.log_content.lines().enumerate() {
            assert!(line.starts_with(&format!("{:02}x", seen + k)));
        }
        seen += n;
        from = page.to_line_num + 1;
    }
    assert_eq!(
        logs.read(8, t, 1).to_line_num,
        10,
        "ten 100 KiB lines fit in 1 MiB"
    );
}

#[test]
fn trailing_unfinished_line_is_returned_as_it_stands() {
    let dir = tempfile::tempdir().unwrap();
    let logs = RunLogs::new(dir.path().to_path_buf(), 30).unwrap();
    let t = local_ms(2026, 5, 1, 12, 0, 0, 0);
    let logger = logs.logger(9, t);
    logger.append_raw(b"progress 10%\r\nprogress 20");
    let page = logs.read(9, t, 1);
    assert_eq!(page.to_line_num, 2);
    assert_eq!(page.log_content, "progress 10%\nprogress 20\n");
}

#[test]
fn falls_back_to_the_neighbouring_day_folders() {
    let dir = tempfile::tempdir().unwrap();
    let logs = RunLogs::new(dir.path().to_path_buf(), 30).unwrap();

    // Triggered at 23:59:59.600; the admin stored the time rounded up to the next day.
    let triggered = local_ms(2026, 6, 30, 23, 59, 59, 600);
    logs.logger(100, triggered).log("before midnight");
    assert!(dir.path().join("2026-06-30").join("100.log").exists());
    let rounded = local_ms(2026, 7, 1, 0, 0, 0, 0);
    let page = logs.read(100, rounded, 1);
    assert_eq!(page.to_line_num, 1);
    assert!(page.log_content.ends_with(" before midnight\n"));

    // And the other way round: written just after midnight, asked with a time just before.
    let triggered = local_ms(2026, 7, 1, 0, 0, 0, 200);
    logs.logger(101, triggered).log("after midnight");
    let earlier = local_ms(2026, 6, 30, 23, 59, 59, 999);
    assert_eq!(logs.read(101, earlier, 1).to_line_num, 1);

    // Two days away is not a rounding artefact.
    let far = local_ms(2026, 7, 2, 12, 0, 0, 0);
    assert_eq!(logs.read(100, far, 1).log_content, LOG_NOT_EXISTS);
}

#[test]
fn a_missing_file_ends_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let logs = RunLogs::new(dir.path().to_path_buf(), 30).unwrap();
    let page = logs.read(404, local_ms(2026, 1, 2, 3, 4, 5, 0), 5);
    assert_eq!(page.from_line_num, 5);
    assert_eq!(page.to_line_num, 0);
    assert_eq!(page.log_content, "readLog fail, logFile not exists");
    assert!(page.is_end);
    // Reading creates no folder (XXL-JOB creates the day folder as a side effect).
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_day_folder_removed_meanwhile_is_made_again() {
    let dir = tempfile::tempdir().unwrap();
    let logs = RunLogs::new(dir.path().to_path_buf(), 30).unwrap();
    let t = local_ms(2026, 2, 3, 10, 0, 0, 0);
    logs.logger(1, t).log("first run");
    let folder = dir.path().join("2026-02-03");
    assert!(folder.join("1.log").exists());
    // Retention (or an operator) removes the folder; the next run of that day writes its log all
    // the same, into the folder made again.
    fs::remove_dir_all(&folder).unwrap();
    let logger = logs.logger(2, t);
    logger.log("second run");
    let text = fs::read_to_string(logger.path()).unwrap();
    assert_line_format(text.trim_end(), "second run");
    assert_eq!(logger.path(), folder.join("2.log"));
}

#[test]
fn a_failed_write_does_not_fail_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let logs = RunLogs::new(dir.path().to_path_buf(), 30).unwrap();
    let t = local_ms(2026, 2, 2, 10, 0, 0, 0);
    // A plain file where the day folder should be: every write fails.
    fs::write(dir.path().join("2026-02-02"), "not a folder").unwrap();
    let logger = logs.logger(1, t);
    logger.log("lost line");
    logger.append_raw(b"lost bytes");
    assert!(!logger.path().exists());
    assert!(logs.read(1, t, 1).is_end);
}

#[test]
fn a_bad_root_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    fs::write(&file, "x").unwrap();
    let err = match RunLogs::new(file.join("logs"), 30) {
        Ok(_) => panic!("a root under a file cannot be created"),
        Err(e) => e,
    };
    assert!(
        err.to_string().contains("cannot create the run log folder"),
        "{err}"
    );
}

#[test]
fn concurrent_writers_never_interleave_lines() {
    let dir = tempfile::tempdir().unwrap();
    let logs = RunLogs::new(dir.path().to_path_buf(), 30).unwrap();
    let t = local_ms(2026, 4, 4, 4, 4, 4, 0);
    let shared = logs.logger(55, t);
    let threads: Vec<_> = (0..8)
        .map(|w| {
            // Half the writers share one logger, half open their own on the same run.
            let logger = if w % 2 == 0 {
                shared.clone()
            } else {
                logs.logger(55, t)
            };
            let payload = "p".repeat(w * 100);
            std::thread::spawn(move || {
                for i in 0..500 {
                    logger.log(format!("writer {w} line {i} {payload}"));
                }
            })
        })
        .collect();
    // Read while writing: every page is made of whole, well-formed lines (but the last, which a
    // reader may catch while the kernel is still copying it in).
    let reader = {
        let logs = logs.clone();
        std::thread::spawn(move || {
            for _ in 0..50 {
                let page = logs.read(55, t, 1);
                let lines: Vec<&str> = page.log_content.lines().collect();
                for line in lines.iter().rev().skip(1) {
                    assert!(line.contains(" writer "), "{line:?}");
                }
            }
        })
    };
    for th in threads {
        th.join().unwrap();
    }
    reader.join().unwrap();

    let mut from = 1;
    let mut per_writer = [0usize; 8];
    loop {
        let page = logs.read(55, t, from);
        if page.log_content.is_empty() {
            break;
        }
        for line in page.log_content.lines() {
            let msg = &line[24..];
            let mut parts = msg.split(' ');
            assert_eq!(parts.next(), Some("writer"));
            let w: usize = parts.next().unwrap().parse().unwrap();
            assert_eq!(parts.next(), Some("line"));
            let i: usize = parts.next().unwrap().parse().unwrap();
            assert_eq!(parts.next().unwrap_or(""), "p".repeat(w * 100));
            assert_eq!(i, per_writer[w], "writer {w} lines stay in order");
            per_writer[w] += 1;
        }
        from = page.to_line_num + 1;
    }
    assert_eq!(per_writer, [500; 8]);
}

fn make_folder(root: &std::path::Path, day: NaiveDate) -> std::path::PathBuf {
    let path = root.join(day.format("%Y-%m-%d").to_string());
    fs::create_dir_all(&path).unwrap();
    fs::write(path.join("1.log"), "x\n").unwrap();
    path
}

#[tokio::test]
async fn retention_deletes_only_expired_day_folders() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let today = Local::now().date_naive();
    let days_ago = |n: u64| today.checked_sub_days(chrono::Days::new(n)).unwrap();
    let very_old = make_folder(root, days_ago(400));
    let expired = make_folder(root, days_ago(31));
    let edge = make_folder(root, days_ago(30));
    let recent = make_folder(root, days_ago(1));
    let current = make_folder(root, today);
    for keep in ["gluesource", "callbacklogs", "notes"] {
        fs::create_dir_all(root.join(keep)).unwrap();
        fs::write(root.join(keep).join("f"), "keep").unwrap();
    }

    let logs = RunLogs::new(root.to_path_buf(), 30).unwrap();
    let stop = CancellationToken::new();
    let task = logs.spawn_cleanup(stop.clone());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while (very_old.exists() || expired.exists()) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !very_old.exists() && !expired.exists(),
        "expired folders deleted at start"
    );
    for kept in [&edge, &recent, &current] {
        assert!(kept.join("1.log").exists(), "{} kept", kept.display());
    }
    for keep in ["gluesource", "callbacklogs", "notes"] {
        assert!(root.join(keep).join("f").exists(), "{keep} untouched");
    }
    // The task then sleeps for a day; shutdown ends it promptly.
    assert!(!task.is_finished());
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .expect("clean-up task stops on shutdown")
        .unwrap();
}

#[tokio::test]
async fn retention_below_three_days_is_disabled() {
    let dir = tempfile::tempdir().unwrap();
    let today = Local::now().date_naive();
    let old = make_folder(
        dir.path(),
        today.checked_sub_days(chrono::Days::new(100)).unwrap(),
    );
    let logs = RunLogs::new(dir.path().to_path_buf(), 2).unwrap();
    let stop = CancellationToken::new();
    tokio::time::timeout(Duration::from_secs(2), logs.spawn_cleanup(stop))
        .await
        .expect("a disabled clean-up ends at once")
        .unwrap();
    assert!(old.join("1.log").exists());
}
