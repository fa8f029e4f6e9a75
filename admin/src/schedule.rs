//! When a job fires next, for each schedule type. One place, used by the API (validation, the
//! first planned fire when a job starts) and by the scheduler (the fire after this one).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::cron::{parse_tz, CronExpr};
use crate::model::{Job, ScheduleType};
use crate::refusal::{Reason, Refusal};

/// A job's schedule, parsed once.
#[derive(Debug, Clone)]
pub enum Schedule {
    Cron {
        expr: Box<CronExpr>,
        tz: chrono_tz::Tz,
    },
    /// Every N ms, counted from the previous planned time.
    FixRate(i64),
    /// N ms after the previous fire finished.
    FixDelay(i64),
    None,
}

/// Parsed schedules by their text (type, configuration, time zone), for the scheduler: parsing
/// the cron expression of every due job on every pass was a twentieth of the admin's CPU at
/// 1 000 fires per second. Bounded: emptied when it holds [`ScheduleCache::MAX`] texts.
#[derive(Default)]
pub struct ScheduleCache {
    parsed: Mutex<HashMap<ScheduleText, Arc<Result<Schedule, ScheduleError>>>>,
}

/// A schedule as a job writes it: type, configuration, time zone.
type ScheduleText = (String, String, String);

impl ScheduleCache {
    const MAX: usize = 10_000;

    /// [`Schedule::of_job`], parsed once per distinct text.
    pub fn of_job(&self, job: &Job, default_tz: &str) -> Arc<Result<Schedule, ScheduleError>> {
        let key = (
            job.schedule_type.clone(),
            job.schedule_conf.clone(),
            job.timezone.clone(),
        );
        let mut map = self.parsed.lock().expect("schedule cache poisoned");
        if let Some(s) = map.get(&key) {
            return s.clone();
        }
        if map.len() >= Self::MAX {
            map.clear();
        }
        let parsed = Arc::new(Schedule::of_job(job, default_tz));
        map.insert(key, parsed.clone());
        parsed
    }
}

/// Why a schedule is invalid, naming the field at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleError {
    pub field: &'static str,
    pub refusal: Refusal,
}

impl Schedule {
    /// Parses `schedule_type` + `schedule_conf` + `timezone` (`""` = `default_tz`).
    pub fn parse(
        schedule_type: &str,
        conf: &str,
        timezone: &str,
        default_tz: &str,
    ) -> Result<Schedule, ScheduleError> {
        let ty = ScheduleType::parse(schedule_type).map_err(|refusal| ScheduleError {
            field: "schedule_type",
            refusal,
        })?;
        let seconds = |what: &str| -> Result<i64, ScheduleError> {
            let n: i64 = conf.trim().parse().map_err(|_| ScheduleError {
                field: "schedule_conf",
                refusal: Refusal::new(Reason::WholeSeconds)
                    .with("type", what)
                    .with("value", format_args!("{conf:?}")),
            })?;
            // The text says the bounds: keep them in step.
            if !(1..=365 * 86_400).contains(&n) {
                return Err(ScheduleError {
                    field: "schedule_conf",
                    refusal: Refusal::new(Reason::SecondsRange)
                        .with("type", what)
                        .with("got", n),
                });
            }
            Ok(n * 1000)
        };
        Ok(match ty {
            ScheduleType::Cron => {
                let expr = CronExpr::parse(conf.trim()).map_err(|e| ScheduleError {
                    field: "schedule_conf",
                    refusal: e.into(),
                })?;
                let zone = if timezone.trim().is_empty() {
                    default_tz
                } else {
                    timezone.trim()
                };
                let tz = parse_tz(zone).map_err(|refusal| ScheduleError {
                    field: "timezone",
                    refusal,
                })?;
                Schedule::Cron {
                    expr: Box::new(expr),
                    tz,
                }
            }
            ScheduleType::FixRate => Schedule::FixRate(seconds("FIX_RATE")?),
            ScheduleType::FixDelay => Schedule::FixDelay(seconds("FIX_DELAY")?),
            ScheduleType::None => Schedule::None,
        })
    }

    pub fn of_job(job: &Job, default_tz: &str) -> Result<Schedule, ScheduleError> {
        Schedule::parse(
            &job.schedule_type,
            &job.schedule_conf,
            &job.timezone,
            default_tz,
        )
    }

    /// The first planned fire of a job started at `now`.
    pub fn first_after(&self, now: i64) -> Option<i64> {
        match self {
            Schedule::Cron { expr, tz } => expr.next_after(now, *tz),
            Schedule::FixRate(ms) | Schedule::FixDelay(ms) => Some(now + ms),
            Schedule::None => None,
        }
    }

    /// The planned fire after the one planned at `planned`. FIX_DELAY has none until its fire
    /// finishes (see [`Schedule::after_finish`]).
    pub fn next_after_planned(&self, planned: i64) -> Option<i64> {
        match self {
            Schedule::Cron { expr, tz } => expr.next_after(planned, *tz),
            Schedule::FixRate(ms) => Some(planned + ms),
            Schedule::FixDelay(_) | Schedule::None => None,
        }
    }

    /// For FIX_DELAY: the next fire, `delay` after the previous fire finished at `finished_at`.
    pub fn after_finish(&self, finished_at: i64) -> Option<i64> {
        match self {
            Schedule::FixDelay(ms) => Some(finished_at + ms),
            _ => None,
        }
    }

    /// Up to `n` upcoming planned times after `now` (for previews).
    pub fn preview(&self, now: i64, n: usize) -> Vec<i64> {
        let mut out = Vec::with_capacity(n);
        let mut t = self.first_after(now);
        while let Some(at) = t {
            if out.len() >= n {
                break;
            }
            out.push(at);
            t = match self {
                Schedule::FixDelay(ms) => Some(at + ms),
                _ => self.next_after_planned(at),
            };
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        let s = Schedule::parse("FIX_RATE", "5", "", "UTC").unwrap();
        assert_eq!(s.first_after(1_000), Some(6_000));
        assert_eq!(s.next_after_planned(6_000), Some(11_000));
        assert_eq!(s.preview(0, 3), vec![5_000, 10_000, 15_000]);
        let d = Schedule::parse("FIX_DELAY", "2", "", "UTC").unwrap();
        assert_eq!(d.next_after_planned(10), None);
        assert_eq!(d.after_finish(100), Some(2_100));
        let e = Schedule::parse("FIX_RATE", "0", "", "UTC").unwrap_err();
        assert_eq!(e.field, "schedule_conf");
        let e = Schedule::parse("FIX_RATE", "abc", "", "UTC").unwrap_err();
        assert!(e.refusal.to_string().contains("whole number"));
        assert!(matches!(
            Schedule::parse("NONE", "", "", "UTC").unwrap(),
            Schedule::None
        ));
    }

    #[test]
    fn cron_and_zone_errors() {
        let e = Schedule::parse("CRON", "0 0 * * * ?", "Mars/Base", "UTC").unwrap_err();
        assert_eq!(e.field, "timezone");
        let e = Schedule::parse("CRON", "not cron", "", "UTC").unwrap_err();
        assert_eq!(e.field, "schedule_conf");
        let s = Schedule::parse("CRON", "0 0 * * * ?", "", "UTC").unwrap();
        assert_eq!(s.first_after(0), Some(3_600_000));
    }
}
