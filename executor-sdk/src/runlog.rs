//! Run logs: one file per run, `{root}/yyyy-MM-dd/{logId}.log`, as XXL-JOB lays them out.
//!
//! The day folder comes from the run's `logDateTime` in the executor's local time zone, so the
//! admin's `/log` request (which carries the same time) finds the file again. Lines are appended
//! with a `yyyy-MM-dd HH:mm:ss.SSS` prefix; script output is appended raw. Reads are paged (XXL-JOB
//! returns the whole rest of the file, which can be hundreds of megabytes). A retention task deletes
//! whole day folders past their age and leaves every other folder (`gluesource`, `callbacklogs`)
//! alone.

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Datelike, Local, NaiveDate, TimeZone, Timelike};
use tokio_util::sync::CancellationToken;

use crate::protocol::LogResult;

/// Most lines returned by one [`RunLogs::read`].
pub const MAX_PAGE_LINES: usize = 1000;
/// Most bytes of log content returned by one [`RunLogs::read`] (a single longer line is cut into
/// pieces of this size, each counted as a line, so paging always moves forward).
pub const MAX_PAGE_BYTES: usize = 1024 * 1024;
/// Below this retention the clean-up is disabled, as in XXL-JOB.
pub const MIN_RETENTION_DAYS: u32 = 3;
/// What `/log` answers for a run whose file is in none of the candidate day folders.
pub const LOG_NOT_EXISTS: &str = "readLog fail, logFile not exists";

const CLEANUP_PERIOD: Duration = Duration::from_secs(24 * 60 * 60);
const DAY_FOLDER_FORMAT: &str = "%Y-%m-%d";

/// The run-log directory of one executor. Cheap to clone.
#[derive(Clone)]
pub struct RunLogs {
    inner: Arc<LogsInner>,
}

struct LogsInner {
    root: PathBuf,
    retention_days: u32,
}

impl RunLogs {
    /// Opens (and creates, if needed) the log root. `retention_days` below
    /// [`MIN_RETENTION_DAYS`] disables the clean-up.
    pub fn new(root: PathBuf, retention_days: u32) -> io::Result<Self> {
        fs::create_dir_all(&root).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create the run log folder {}: {e}", root.display()),
            )
        })?;
        Ok(RunLogs {
            inner: Arc::new(LogsInner {
                root,
                retention_days,
            }),
        })
    }

    /// The log root given to [`RunLogs::new`].
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// A writer for the log of run `log_id` triggered at `log_date_time` (epoch milliseconds).
    /// Nothing touches the disk until the first line is written.
    pub fn logger(&self, log_id: i64, log_date_time: i64) -> RunLogger {
        RunLogger {
            inner: Arc::new(LoggerInner {
                path: self.file_path(day_of(log_date_time), log_id),
                file: Mutex::new(None),
                warned: AtomicBool::new(false),
            }),
        }
    }

    /// Reads one page of a run's log, from the 1-based line `from_line` (values below 1 read from
    /// the first line).
    ///
    /// `toLineNum` is the last line returned, or `from_line - 1` when there is nothing new;
    /// `isEnd` is always false for an existing file because only the admin knows whether the run
    /// has finished. The folder of the neighbouring days is tried too: the admin stores the trigger
    /// time rounded to the second and may send a time on the other side of midnight.
    pub fn read(&self, log_id: i64, log_date_time: i64, from_line: i32) -> LogResult {
        let from = from_line.max(1);
        let day = day_of(log_date_time);
        let candidates = [Some(day), day.pred_opt(), day.succ_opt()];
        for day in candidates.into_iter().flatten() {
            let path = self.file_path(day, log_id);
            match File::open(&path) {
                Ok(file) => {
                    return match read_page(file, from) {
                        Ok((to, content)) => LogResult {
                            from_line_num: from,
                            to_line_num: to,
                            log_content: content,
                            is_end: false,
                        },
                        Err(e) => {
                            tracing::warn!(path = %path.display(), error = %e, "reading run log failed");
                            LogResult {
                                from_line_num: from,
                                to_line_num: from - 1,
                                log_content: format!("readLog fail, {e}"),
                                is_end: true,
                            }
                        }
                    };
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "opening run log failed");
                    return LogResult {
                        from_line_num: from,
                        to_line_num: from - 1,
                        log_content: format!("readLog fail, {e}"),
                        is_end: true,
                    };
                }
            }
        }
        LogResult {
            from_line_num: from_line,
            to_line_num: 0,
            log_content: LOG_NOT_EXISTS.to_string(),
            is_end: true,
        }
    }

    /// Starts the retention task: it cleans at once and then every 24 hours, until `shutdown` is
    /// cancelled. With retention disabled the task ends at once.
    pub fn spawn_cleanup(&self, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
        let logs = self.clone();
        tokio::spawn(async move {
            let days = logs.inner.retention_days;
            if days < MIN_RETENTION_DAYS {
                tracing::debug!(
                    retention_days = days,
                    "run log clean-up disabled (retention below 3 days)"
                );
                return;
            }
            loop {
                let root = logs.inner.root.clone();
                let today = Local::now().date_naive();
                let outcome =
                    tokio::task::spawn_blocking(move || clean_expired(&root, today, days)).await;
                match outcome {
                    Ok(Ok(0)) => {}
                    Ok(Ok(removed)) => {
                        tracing::info!(
                            removed,
                            retention_days = days,
                            "expired run log folders deleted"
                        );
                    }
                    Ok(Err(e)) => tracing::warn!(error = %e, "run log clean-up failed"),
                    Err(e) => tracing::warn!(error = %e, "run log clean-up task failed"),
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(CLEANUP_PERIOD) => {}
                }
            }
        })
    }

    fn file_path(&self, day: NaiveDate, log_id: i64) -> PathBuf {
        self.inner
            .root
            .join(day.format(DAY_FOLDER_FORMAT).to_string())
            .join(format!("{log_id}.log"))
    }
}

/// Appends to one run's log file. Clones share the open file, so lines from concurrent writers
/// never interleave. A failed write is reported through `tracing` (once per logger) and never
/// fails the run.
#[derive(Clone)]
pub struct RunLogger {
    inner: Arc<LoggerInner>,
}

struct LoggerInner {
    path: PathBuf,
    // A std mutex: it is held only for one `write` call, never across an await.
    file: Mutex<Option<File>>,
    warned: AtomicBool,
}

impl RunLogger {
    /// Appends one line with a `yyyy-MM-dd HH:mm:ss.SSS` local-time prefix.
    pub fn log(&self, line: impl AsRef<str>) {
        self.log_lines(&[line.as_ref()]);
    }

    /// Appends several lines with the same time prefix in one write (a run's opening lines).
    pub(crate) fn log_lines(&self, lines: &[&str]) {
        let now = Local::now();
        let mut text = String::with_capacity(lines.iter().map(|l| l.len() + 25).sum());
        for line in lines {
            push_line(&mut text, &now, line);
        }
        self.append_raw(text.as_bytes());
    }

    /// Appends bytes as they are (script output). Pass whole lines where possible: a reader paging
    /// the file while it is written returns a trailing unfinished line as it stands.
    pub fn append_raw(&self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let inner = &self.inner;
        let mut guard = inner.file.lock().unwrap_or_else(|e| e.into_inner());
        let result = match guard.as_mut() {
            Some(file) => file.write_all(bytes),
            None => open_append(&inner.path).and_then(|mut file| {
                let r = file.write_all(bytes);
                *guard = Some(file);
                r
            }),
        };
        if let Err(e) = result {
            // Reopen next time: the folder may have been removed under us.
            *guard = None;
            if !inner.warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(path = %inner.path.display(), error = %e, "writing run log failed");
            }
        }
    }

    /// The file this logger appends to.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }
}

/// Appends `line` with a `yyyy-MM-dd HH:mm:ss.SSS` prefix, field by field: `format("%Y-%m-%d …")`
/// parses its pattern on every call, and every run of every job writes log lines.
fn push_line(text: &mut String, at: &DateTime<Local>, line: &str) {
    let _ = writeln!(
        text,
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03} {}",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.nanosecond() % 1_000_000_000 / 1_000_000,
        line.trim_end_matches(['\r', '\n'])
    );
}

/// Opens a run's log for appending, creating its day folder only when the open finds it missing:
/// checking the folder first cost two system calls (`mkdir`, `stat`) for every run.
fn open_append(path: &Path) -> io::Result<File> {
    let open = || OpenOptions::new().create(true).append(true).open(path);
    match open() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir)?;
            }
            open()
        }
        other => other,
    }
}

/// The local calendar day of an epoch-millisecond time. A missing or nonsensical time (≤ 0, out of
/// range) means today: the run still gets a log, and a read with the same time finds it.
fn day_of(epoch_millis: i64) -> NaiveDate {
    if epoch_millis > 0 {
        if let Some(t) = Local.timestamp_millis_opt(epoch_millis).earliest() {
            return t.date_naive();
        }
    }
    Local::now().date_naive()
}

/// Reads the page that starts at line `from` (≥ 1): returns the last line number included (or
/// `from - 1`) and the content, each line ending with `\n`.
fn read_page(file: File, from: i32) -> io::Result<(i32, String)> {
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    let mut content = String::new();
    let mut line_no: i32 = 0;
    let mut last = from - 1;
    let mut lines = 0usize;
    loop {
        buf.clear();
        // Cap each line so that one enormous line cannot exhaust memory; the remainder counts as
        // the next line, the same way on every read, so line numbers stay stable.
        let n = (&mut reader)
            .take(MAX_PAGE_BYTES as u64)
            .read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        let Some(next) = line_no.checked_add(1) else {
            break;
        };
        line_no = next;
        if line_no < from {
            continue;
        }
        let text = String::from_utf8_lossy(strip_newline(&buf));
        if lines > 0 && content.len() + text.len() + 1 > MAX_PAGE_BYTES {
            break;
        }
        content.push_str(&text);
        content.push('\n');
        lines += 1;
        last = line_no;
        if lines >= MAX_PAGE_LINES {
            break;
        }
    }
    Ok((last, content))
}

fn strip_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A day folder name `yyyy-MM-dd`, strictly (so `gluesource` or `2024-1-5` are never touched).
fn parse_day_folder(name: &str) -> Option<NaiveDate> {
    let day = NaiveDate::parse_from_str(name, DAY_FOLDER_FORMAT).ok()?;
    (day.format(DAY_FOLDER_FORMAT).to_string() == name).then_some(day)
}

/// XXL-JOB's rule: a folder expires when `today > folderDate + retentionDays`.
fn is_expired(day: NaiveDate, today: NaiveDate, retention_days: u32) -> bool {
    today.signed_duration_since(day).num_days() > i64::from(retention_days)
}

/// Deletes the expired day folders under `root`; returns how many were deleted.
fn clean_expired(root: &Path, today: NaiveDate, retention_days: u32) -> io::Result<usize> {
    let mut removed = 0;
    for entry in fs::read_dir(root)? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let name = entry.file_name();
        let Some(day) = name.to_str().and_then(parse_day_folder) else {
            continue;
        };
        if !is_expired(day, today, retention_days) {
            continue;
        }
        match fs::remove_dir_all(entry.path()) {
            Ok(()) => removed += 1,
            Err(e) => {
                tracing::warn!(folder = %entry.path().display(), error = %e, "cannot delete expired run log folder");
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn day_folder_names_are_strict() {
        assert_eq!(parse_day_folder("2026-01-05"), Some(day("2026-01-05")));
        assert_eq!(parse_day_folder("2026-1-5"), None);
        assert_eq!(parse_day_folder("gluesource"), None);
        assert_eq!(parse_day_folder("callbacklogs"), None);
        assert_eq!(parse_day_folder("2026-02-30"), None);
    }

    #[test]
    fn expiry_follows_xxl_job() {
        let today = day("2026-01-31");
        assert!(!is_expired(day("2026-01-01"), today, 30));
        assert!(is_expired(day("2025-12-31"), today, 30));
        assert!(!is_expired(day("2026-02-01"), today, 30));
    }

    #[test]
    fn clean_expired_keeps_other_folders() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "2026-01-01",
            "2025-12-31",
            "gluesource",
            "callbacklogs",
            "2026-01-30",
        ] {
            fs::create_dir(dir.path().join(name)).unwrap();
        }
        fs::write(dir.path().join("2025-12-31").join("1.log"), "x\n").unwrap();
        // A file named like a day is not a folder and stays.
        fs::write(dir.path().join("2020-01-01"), "keep").unwrap();
        let removed = clean_expired(dir.path(), day("2026-01-31"), 30).unwrap();
        assert_eq!(removed, 1);
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "2020-01-01",
                "2026-01-01",
                "2026-01-30",
                "callbacklogs",
                "gluesource"
            ]
        );
    }

    #[test]
    fn nonsense_time_means_today() {
        let today = Local::now().date_naive();
        assert_eq!(day_of(0), today);
        assert_eq!(day_of(-5), today);
        assert_eq!(day_of(i64::MAX), today);
    }

    #[test]
    fn page_splits_giant_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        let mut data = vec![b'a'; MAX_PAGE_BYTES + 10];
        data.extend_from_slice(b"\nend\n");
        fs::write(&path, &data).unwrap();
        let (to, content) = read_page(File::open(&path).unwrap(), 1).unwrap();
        assert_eq!(to, 1);
        assert_eq!(content.len(), MAX_PAGE_BYTES + 1);
        let (to, content) = read_page(File::open(&path).unwrap(), 2).unwrap();
        assert_eq!(to, 3);
        assert_eq!(content, format!("{}\nend\n", "a".repeat(10)));
    }

    #[test]
    fn line_prefix_is_the_xxl_job_time_format() {
        for ms in [0i64, 1_773_480_413_589, 1_773_480_413_001, 946_684_799_999] {
            let at = Local.timestamp_millis_opt(ms).unwrap();
            let mut text = String::new();
            push_line(&mut text, &at, "hello\r\n");
            let expected = format!("{} hello\n", at.format("%Y-%m-%d %H:%M:%S%.3f"));
            assert_eq!(text, expected);
        }
    }

    #[test]
    fn crlf_is_stripped() {
        assert_eq!(strip_newline(b"abc\r\n"), b"abc");
        assert_eq!(strip_newline(b"abc"), b"abc");
    }
}
