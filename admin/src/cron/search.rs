//! The next-fire-time search, step for step the one Quartz runs (`getTimeAfter`): it moves a
//! lenient calendar forward field by field, from seconds up to years, restarting from the
//! seconds whenever a coarser field had to move. Every quirk of the result (days skipped in a
//! spring-forward gap, the second occurrence chosen in a fall-back overlap, how `W` treats the
//! month edges) comes from following the same steps on the same calendar arithmetic.

use chrono_tz::Tz;

use super::calendar::{last_day_of_month, CalField, Calendar};
use super::parse::{Field, Parsed, NO_SPEC};

/// Quartz gives up on years beyond this.
const LAST_SEARCH_YEAR: i64 = 2999;
/// A bound on passes, far above what any expression Quartz can finish needs (an expression that
/// never fires walks month by month to the last year: a few thousand passes).
const MAX_PASSES: usize = 200_000;

const SUNDAY: i64 = 1;
const SATURDAY: i64 = 7;

/// First value of `set` that is >= `v` (Java's `tailSet(v).first()`).
fn ceiling(set: &[i32], v: i64) -> Option<i64> {
    let i = set.partition_point(|&x| i64::from(x) < v);
    set.get(i).map(|&x| i64::from(x))
}

fn first(set: &[i32]) -> i64 {
    set.first().map_or(0, |&x| i64::from(x))
}

/// Quartz's DST guard when it moves the hour: if the hour it set did not stick (a gap pushed the
/// time forward), set the next hour instead.
fn set_calendar_hour(cal: &mut Calendar, hour: i64) {
    cal.set(CalField::HourOfDay, hour);
    if cal.get(CalField::HourOfDay) != hour && hour != 24 {
        cal.set(CalField::HourOfDay, hour + 1);
    }
}

/// Moves `day` of month `mon` to the nearest weekday without leaving the month (`W`), and returns
/// it with the instant of that day at `hr:min:sec`.
fn nearest_weekday(
    tz: Tz,
    year: i64,
    mon: i64,
    day: i64,
    hr: i64,
    min: i64,
    sec: i64,
) -> (i64, i64) {
    let mut probe = Calendar::at_fields(tz, year, mon, day);
    let ldom = last_day_of_month(mon, year);
    let dow = probe.get(CalField::DayOfWeek);
    let mut day = day;
    if dow == SATURDAY && day == 1 {
        day += 2;
    } else if dow == SATURDAY {
        day -= 1;
    } else if dow == SUNDAY && day == ldom {
        day -= 2;
    } else if dow == SUNDAY {
        day += 1;
    }
    probe.set(CalField::Second, sec);
    probe.set(CalField::Minute, min);
    probe.set(CalField::HourOfDay, hr);
    probe.set(CalField::DayOfMonth, day);
    probe.set(CalField::Month, mon - 1);
    (day, probe.time())
}

/// Resets the time of day and moves to `day` of zero-based `month` (values may overflow).
fn restart_day(cal: &mut Calendar, day: i64, month: i64) {
    cal.set(CalField::Second, 0);
    cal.set(CalField::Minute, 0);
    cal.set(CalField::HourOfDay, 0);
    cal.set(CalField::DayOfMonth, day);
    cal.set(CalField::Month, month);
}

/// Epoch seconds of the first fire time at or after `start` (epoch seconds), or None.
pub(crate) fn time_after(p: &Parsed, start: i64, tz: Tz, max_year: i64) -> Option<i64> {
    let seconds = p.set(Field::Second);
    let minutes = p.set(Field::Minute);
    let hours = p.set(Field::Hour);
    let days_of_month = p.set(Field::DayOfMonth);
    let months = p.set(Field::Month);
    let days_of_week = p.set(Field::DayOfWeek);
    let years = p.set(Field::Year);
    let dom_spec = !days_of_month.contains(&NO_SPEC);
    let dow_spec = !days_of_week.contains(&NO_SPEC);

    let mut cl = Calendar::at_instant(tz, start);
    for _ in 0..MAX_PASSES {
        if cl.get(CalField::Year) > LAST_SEARCH_YEAR {
            return None;
        }

        // Second.
        let mut sec = cl.get(CalField::Second);
        let mut min = cl.get(CalField::Minute);
        match ceiling(seconds, sec) {
            Some(s) => sec = s,
            None => {
                sec = first(seconds);
                min += 1;
                cl.set(CalField::Minute, min);
            }
        }
        cl.set(CalField::Second, sec);

        // Minute.
        min = cl.get(CalField::Minute);
        let mut hr = cl.get(CalField::HourOfDay);
        let mut t = -1;
        match ceiling(minutes, min) {
            Some(m) => {
                t = min;
                min = m;
            }
            None => {
                min = first(minutes);
                hr += 1;
            }
        }
        if min != t {
            cl.set(CalField::Second, 0);
            cl.set(CalField::Minute, min);
            set_calendar_hour(&mut cl, hr);
            continue;
        }
        cl.set(CalField::Minute, min);

        // Hour.
        hr = cl.get(CalField::HourOfDay);
        let mut day = cl.get(CalField::DayOfMonth);
        t = -1;
        match ceiling(hours, hr) {
            Some(h) => {
                t = hr;
                hr = h;
            }
            None => {
                hr = first(hours);
                day += 1;
            }
        }
        if hr != t {
            cl.set(CalField::Second, 0);
            cl.set(CalField::Minute, 0);
            cl.set(CalField::DayOfMonth, day);
            set_calendar_hour(&mut cl, hr);
            continue;
        }
        cl.set(CalField::HourOfDay, hr);

        // Day.
        day = cl.get(CalField::DayOfMonth);
        let mut mon = cl.get(CalField::Month) + 1;
        t = -1;
        let mut tmon = mon;
        if dom_spec && !dow_spec {
            let next_listed = ceiling(days_of_month, day);
            if p.last_day_of_month {
                t = day;
                let year = cl.get(CalField::Year);
                day = last_day_of_month(mon, year) - i64::from(p.last_day_offset);
                if !p.nearest_weekday {
                    if t > day {
                        mon += 1;
                        if mon > 12 {
                            mon = 1;
                            // Makes the month comparison below fail, as the year moved.
                            tmon = 3333;
                            cl.add_year(1);
                        }
                        day = 1;
                    }
                } else {
                    let (d, when) = nearest_weekday(tz, year, mon, day, hr, min, sec);
                    day = d;
                    if when < start {
                        day = 1;
                        mon += 1;
                    }
                }
            } else if p.nearest_weekday {
                t = day;
                day = first(days_of_month);
                let year = cl.get(CalField::Year);
                let (d, when) = nearest_weekday(tz, year, mon, day, hr, min, sec);
                day = d;
                if when < start {
                    day = first(days_of_month);
                    mon += 1;
                }
            } else if let Some(d) = next_listed {
                t = day;
                day = d;
                // Don't run past the end of a short month such as February.
                if day > last_day_of_month(mon, cl.get(CalField::Year)) {
                    day = first(days_of_month);
                    mon += 1;
                }
            } else {
                day = first(days_of_month);
                mon += 1;
            }
            if day != t || mon != tmon {
                restart_day(&mut cl, day, mon - 1);
                continue;
            }
        } else if dow_spec && !dom_spec {
            if p.last_day_of_week {
                // The last given weekday of the month.
                let dow = first(days_of_week);
                let cdow = cl.get(CalField::DayOfWeek);
                let mut add = 0;
                if cdow < dow {
                    add = dow - cdow;
                }
                if cdow > dow {
                    add = dow + (7 - cdow);
                }
                let lday = last_day_of_month(mon, cl.get(CalField::Year));
                if day + add > lday {
                    restart_day(&mut cl, 1, mon);
                    continue;
                }
                while day + add + 7 <= lday {
                    add += 7;
                }
                day += add;
                if add > 0 {
                    restart_day(&mut cl, day, mon - 1);
                    continue;
                }
            } else if p.nth_day_of_week != 0 {
                // The n-th given weekday of the month.
                let dow = first(days_of_week);
                let cdow = cl.get(CalField::DayOfWeek);
                let mut add = 0;
                if cdow < dow {
                    add = dow - cdow;
                } else if cdow > dow {
                    add = dow + (7 - cdow);
                }
                let shifted = add > 0;
                day += add;
                let mut week_of_month = day / 7;
                if day % 7 > 0 {
                    week_of_month += 1;
                }
                add = (i64::from(p.nth_day_of_week) - week_of_month) * 7;
                day += add;
                if add < 0 || day > last_day_of_month(mon, cl.get(CalField::Year)) {
                    restart_day(&mut cl, 1, mon);
                    continue;
                } else if add > 0 || shifted {
                    restart_day(&mut cl, day, mon - 1);
                    continue;
                }
            } else {
                let cdow = cl.get(CalField::DayOfWeek);
                let dow = ceiling(days_of_week, cdow).unwrap_or_else(|| first(days_of_week));
                let mut add = 0;
                if cdow < dow {
                    add = dow - cdow;
                }
                if cdow > dow {
                    add = dow + (7 - cdow);
                }
                let lday = last_day_of_month(mon, cl.get(CalField::Year));
                if day + add > lday {
                    restart_day(&mut cl, 1, mon);
                    continue;
                } else if add > 0 {
                    restart_day(&mut cl, day + add, mon - 1);
                    continue;
                }
            }
        } else {
            // The parser refuses both or neither of the day fields being '?'.
            return None;
        }
        cl.set(CalField::DayOfMonth, day);

        // Month.
        mon = cl.get(CalField::Month) + 1;
        let mut year = cl.get(CalField::Year);
        t = -1;
        if year > max_year {
            return None;
        }
        match ceiling(months, mon) {
            Some(m) => {
                t = mon;
                mon = m;
            }
            None => {
                mon = first(months);
                year += 1;
            }
        }
        if mon != t {
            restart_day(&mut cl, 1, mon - 1);
            cl.set(CalField::Year, year);
            continue;
        }
        cl.set(CalField::Month, mon - 1);

        // Year.
        year = cl.get(CalField::Year);
        match ceiling(years, year) {
            Some(y) => {
                t = year;
                year = y;
            }
            None => return None,
        }
        if year != t {
            restart_day(&mut cl, 1, 0);
            cl.set(CalField::Year, year);
            continue;
        }
        cl.set(CalField::Year, year);

        return Some(cl.time());
    }
    None
}
