//! Quartz-compatible cron expressions.
//!
//! XXL-JOB schedules with Quartz's `CronExpression`, so an expression our users bring must fire at
//! exactly the instants it fired there. This module parses the Quartz syntax (6 or 7 fields,
//! seconds first, `* , - / ? L W # LW L-n`, month and day names) and computes next fire times with
//! the same field-by-field search Quartz runs on a lenient Gregorian calendar in the job's time
//! zone, including its daylight-saving behaviour: a wall-clock time that falls in a spring-forward
//! gap does not fire that day, and a time that occurs twice in a fall-back overlap fires once, at
//! the second occurrence. `tests/cron_oracle.rs` checks this against the real Quartz.

mod calendar;
mod describe;
mod parse;
mod search;

use std::fmt;
use std::sync::OnceLock;

use chrono::DateTime;
use chrono_tz::Tz;

use parse::Parsed;

use crate::refusal::{Reason, Refusal};

/// A parsed Quartz cron expression.
#[derive(Clone, Debug)]
pub struct CronExpr {
    source: String,
    parsed: Parsed,
}

/// Why an expression was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError {
    /// 0-based character offset in the input.
    pub position: usize,
    pub message: String,
}

impl CronError {
    fn new(position: usize, message: &str) -> CronError {
        CronError {
            position,
            message: message.to_string(),
        }
    }
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Refusal::from(self.clone()).fmt(f)
    }
}

impl From<CronError> for Refusal {
    fn from(e: CronError) -> Refusal {
        Refusal::new(Reason::Cron)
            .with("detail", e.message)
            .with("pos", e.position)
    }
}

impl std::error::Error for CronError {}

/// Quartz stops looking for fire times a hundred years after the current year.
fn max_year() -> i64 {
    static MAX_YEAR: OnceLock<i64> = OnceLock::new();
    *MAX_YEAR.get_or_init(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let (year, _, _) = calendar::civil_from_days(now.div_euclid(86_400));
        year + 100
    })
}

impl CronExpr {
    /// Parses a Quartz expression (case-insensitive), or says what is wrong and where.
    pub fn parse(expr: &str) -> Result<CronExpr, CronError> {
        let max_year = i32::try_from(max_year()).unwrap_or(i32::MAX);
        let parsed = parse::parse(expr, max_year)?;
        Ok(CronExpr {
            source: expr.to_string(),
            parsed,
        })
    }

    /// First fire time strictly after `after_ms` (epoch ms), Quartz semantics (second resolution:
    /// the search starts at the next whole second), in zone `tz`; None when it never fires again.
    pub fn next_after(&self, after_ms: i64, tz: Tz) -> Option<i64> {
        let start = after_ms.div_euclid(1000).checked_add(1)?;
        search::time_after(&self.parsed, start, tz, max_year())?.checked_mul(1000)
    }

    /// Up to `n` successive fire times after `after_ms`.
    pub fn upcoming(&self, after_ms: i64, tz: Tz, n: usize) -> Vec<i64> {
        let mut times = Vec::with_capacity(n.min(1024));
        let mut after = after_ms;
        while times.len() < n {
            match self.next_after(after, tz) {
                Some(t) => {
                    times.push(t);
                    after = t;
                }
                None => break,
            }
        }
        times
    }

    /// A plain-language description, e.g. "at 02:30:00, every day" / "every 5 seconds", or in
    /// Chinese "每天 02:30:00" / "每5秒".
    pub fn describe(&self, lang: Lang) -> String {
        describe::describe(&self.parsed, max_year(), lang)
    }

    /// The expression as given to [`CronExpr::parse`].
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// The language of a description or a warning: the console's two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    En,
    Zh,
}

impl Lang {
    /// `en` or `zh`, with or without a region (`zh-CN`, `en_US`); None for anything else.
    pub fn parse(tag: &str) -> Option<Lang> {
        let tag = tag.trim().to_ascii_lowercase();
        let primary = tag.split(['-', '_']).next().unwrap_or("");
        match primary {
            "en" => Some(Lang::En),
            "zh" => Some(Lang::Zh),
            _ => None,
        }
    }
}

/// Parses an IANA zone name with a clear error ("unknown time zone 'Mars/Base'").
pub fn parse_tz(name: &str) -> Result<Tz, Refusal> {
    name.trim()
        .parse::<Tz>()
        .map_err(|_| Refusal::new(Reason::UnknownTimeZone).with("value", name))
}

/// How far ahead [`schedule_warnings`] looks for daylight-saving transitions.
const WARNING_HORIZON_DAYS: i64 = 366;

/// Warnings for the console: fire times in the next year that Quartz skips because of a DST gap
/// (for example `0 30 2 * * ?` in America/New_York on the spring-forward day), wall-clock fire
/// times that occur twice and fire once, or "never fires".
pub fn schedule_warnings(expr: &CronExpr, tz: Tz, from_ms: i64, lang: Lang) -> Vec<String> {
    let zone = tz.name();
    let mut warnings = Vec::new();
    if expr.next_after(from_ms, tz).is_none() {
        let from = format_wall(
            from_ms.div_euclid(1000) + calendar::offset_at(tz, from_ms.div_euclid(1000)),
        );
        warnings.push(match lang {
            Lang::En => format!("never fires: no fire time after {from} in {zone}"),
            Lang::Zh => format!("永远不会触发：{zone} 时区 {from} 之后没有触发时间"),
        });
        return warnings;
    }
    let from = from_ms.div_euclid(1000);
    for (at, before, after) in transitions(tz, from, from + WARNING_HORIZON_DAYS * 86_400) {
        // The wall-clock times that are skipped (gap) or repeated (overlap).
        let (low, high) = if after > before {
            (at + before, at + after)
        } else {
            (at + after, at + before)
        };
        // Fire times on the wall clock, ignoring the zone: UTC has no transitions.
        let fires = wall_fires_between(expr, low, high);
        if fires.is_empty() {
            continue;
        }
        let clock = |w: i64| format_wall(w)[11..16].to_string();
        let day = &format_wall(low)[..10];
        let first = &format_wall(fires[0])[11..];
        let last = &format_wall(fires[fires.len() - 1])[11..];
        let n = fires.len();
        let gap = after > before;
        // The clock jumps from `low` to `high`, or goes back from `high` to `low`.
        let (from_clock, to_clock) = if gap {
            (clock(low), clock(high))
        } else {
            (clock(high), clock(low))
        };
        warnings.push(match lang {
            Lang::En => {
                let what = if n == 1 {
                    format!("the fire time {first}")
                } else {
                    format!("the {n} fire times from {first} to {last}")
                };
                match (gap, n == 1) {
                    (true, true) => format!("on {day} clocks in {zone} jump from {from_clock} to {to_clock}: {what} does not exist that day and is skipped"),
                    (true, false) => format!("on {day} clocks in {zone} jump from {from_clock} to {to_clock}: {what} do not exist that day and are skipped"),
                    (false, true) => format!("on {day} clocks in {zone} go back from {from_clock} to {to_clock}: {what} occurs twice and fires once, at the second occurrence"),
                    (false, false) => format!("on {day} clocks in {zone} go back from {from_clock} to {to_clock}: {what} occur twice and fire once each, at the second occurrence"),
                }
            }
            Lang::Zh => {
                let what = if n == 1 {
                    format!("触发时间 {first}")
                } else {
                    format!("{first} 至 {last} 的 {n} 个触发时间")
                };
                let clocks = format!("{day} {zone} 的时钟从 {from_clock}");
                match (gap, n == 1) {
                    (true, true) => format!("{clocks} 跳到 {to_clock}：{what} 当天不存在，会被跳过"),
                    (true, false) => format!("{clocks} 跳到 {to_clock}：{what} 当天都不存在，都会被跳过"),
                    (false, true) => format!("{clocks} 拨回 {to_clock}：{what} 会出现两次，只在第二次出现时触发一次"),
                    (false, false) => format!("{clocks} 拨回 {to_clock}：{what} 都会出现两次，每个只在第二次出现时触发一次"),
                }
            }
        });
    }
    warnings
}

/// Fire times (as wall-clock seconds) in `[low, high)`, at most a thousand.
fn wall_fires_between(expr: &CronExpr, low: i64, high: i64) -> Vec<i64> {
    let mut fires = Vec::new();
    let mut after = (low - 1) * 1000;
    while fires.len() < 1000 {
        match expr.next_after(after, Tz::UTC) {
            Some(t) if t / 1000 < high => {
                fires.push(t / 1000);
                after = t;
            }
            _ => break,
        }
    }
    fires
}

/// Offset changes in `(from, to]` as (instant, offset before, offset after), epoch seconds.
fn transitions(tz: Tz, from: i64, to: i64) -> Vec<(i64, i64, i64)> {
    const STEP: i64 = 6 * 3600;
    let mut found = Vec::new();
    let mut t = from;
    let mut offset = calendar::offset_at(tz, t);
    while t < to {
        let next = (t + STEP).min(to);
        let next_offset = calendar::offset_at(tz, next);
        if next_offset != offset {
            // The change happened in (t, next]: find its first second.
            let (mut lo, mut hi) = (t, next);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if calendar::offset_at(tz, mid) == offset {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            found.push((hi, offset, calendar::offset_at(tz, hi)));
        }
        t = next;
        offset = next_offset;
    }
    found
}

fn format_wall(wall_seconds: i64) -> String {
    DateTime::from_timestamp(wall_seconds, 0)
        .map(|d| d.naive_utc().format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| wall_seconds.to_string())
}

#[cfg(test)]
mod tests;
