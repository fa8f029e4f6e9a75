//! A calendar in a time zone that behaves like Java's lenient `GregorianCalendar`, which is what
//! Quartz's fire-time search runs on.
//!
//! The behaviour that matters:
//! - Setting a field only records it; the next read normalises all fields together (day 32 of
//!   January is February 1, hour 24 is the next day's 00:00) and re-resolves the wall-clock time
//!   to an instant.
//! - Resolving a wall-clock time that does not exist (spring-forward gap) uses the offset from
//!   before the transition, so 02:30 in a one-hour gap becomes 03:30 of the new offset.
//! - Resolving a wall-clock time that exists twice (fall-back overlap) uses the offset from after
//!   the transition, i.e. the later of the two instants. Because Quartz re-sets fields on every
//!   pass, a search that starts in the first occurrence jumps to the second one.

use chrono::{DateTime, NaiveDateTime, Offset, TimeZone};
use chrono_tz::{GapInfo, Tz};

const DAY: i64 = 86_400;

/// Days since 1970-01-01 of a proleptic Gregorian date (month 1..=12; `day` may be any value).
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468 + (day - 1)
}

/// The date (year, month 1..=12, day) of a day count since 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

pub(crate) fn is_leap_year(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// Length of `month` (1..=12) in `year`.
pub(crate) fn last_day_of_month(month: i64, year: i64) -> i64 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Day of week, Java numbering: 1 = Sunday ... 7 = Saturday.
pub(crate) fn day_of_week(days: i64) -> i64 {
    // 1970-01-01 was a Thursday (5).
    (days + 4).rem_euclid(7) + 1
}

// The zone tables we use end with the 2099 transitions, while Java keeps applying the zone's
// last rule. Rules are written as "second Sunday of March" and the like, so a year with the same
// leap-ness and the same weekday on January 1 has the same transitions: later years borrow the
// offsets of such a year before 2100.
const TABLE_END_YEAR: i64 = 2100;
const LAST_DAY_IN_TABLE: i64 = 47_482; // 2100-01-01

/// Days to subtract from a date on or after 2100 to land on a calendar-identical year before it.
fn equivalent_year_shift(days: i64) -> i64 {
    if days < LAST_DAY_IN_TABLE {
        return 0;
    }
    let (year, _, _) = civil_from_days(days);
    let jan1 = days_from_civil(year, 1, 1);
    let leap = is_leap_year(year);
    let weekday = day_of_week(jan1);
    for candidate in (TABLE_END_YEAR - 28..TABLE_END_YEAR).rev() {
        let c_jan1 = days_from_civil(candidate, 1, 1);
        if is_leap_year(candidate) == leap && day_of_week(c_jan1) == weekday {
            return jan1 - c_jan1;
        }
    }
    0
}

fn naive(seconds: i64) -> Option<NaiveDateTime> {
    DateTime::from_timestamp(seconds, 0).map(|d| d.naive_utc())
}

/// Offset (seconds east of UTC) in effect at the instant `utc` (epoch seconds).
pub(crate) fn offset_at(tz: Tz, utc: i64) -> i64 {
    let shift = equivalent_year_shift(utc.div_euclid(DAY)) * DAY;
    match naive(utc - shift) {
        Some(n) => i64::from(tz.offset_from_utc_datetime(&n).fix().local_minus_utc()),
        None => 0,
    }
}

/// The instant Java gives a wall-clock time (local seconds since the epoch) in `tz`.
pub(crate) fn resolve_wall(tz: Tz, wall: i64) -> i64 {
    let shift = equivalent_year_shift(wall.div_euclid(DAY)) * DAY;
    let Some(local) = naive(wall - shift) else {
        return wall;
    };
    let seconds = |o: &chrono_tz::TzOffset| i64::from(o.fix().local_minus_utc());
    match tz.offset_from_local_datetime(&local) {
        chrono::LocalResult::Single(o) => wall - seconds(&o),
        // The later instant: the offset after the transition is the smaller one.
        chrono::LocalResult::Ambiguous(a, b) => wall - seconds(&a).min(seconds(&b)),
        chrono::LocalResult::None => {
            let before = GapInfo::new(&local, &tz)
                .and_then(|g| g.begin)
                .map(|(_, o)| seconds(&o))
                .unwrap_or_else(|| offset_at(tz, wall - shift - DAY));
            wall - before
        }
    }
}

/// The calendar fields Quartz reads and writes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum CalField {
    Year,
    /// Zero-based, as in Java.
    Month,
    DayOfMonth,
    HourOfDay,
    Minute,
    Second,
    /// 1 = Sunday ... 7 = Saturday (read only).
    DayOfWeek,
}

#[derive(Clone, Debug)]
pub(crate) struct Calendar {
    tz: Tz,
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    day_of_week: i64,
    /// Epoch seconds of the normalised fields.
    instant: i64,
    /// Fields were set since the last normalisation.
    dirty: bool,
}

impl Calendar {
    /// A calendar at `instant` (epoch seconds) whose fields count as set, the state Quartz
    /// creates with `setTime` followed by `set(MILLISECOND, 0)`.
    pub(crate) fn at_instant(tz: Tz, instant: i64) -> Calendar {
        let mut cal = Calendar {
            tz,
            year: 1970,
            month: 0,
            day: 1,
            hour: 0,
            minute: 0,
            second: 0,
            day_of_week: 5,
            instant,
            dirty: false,
        };
        cal.fields_from_instant();
        cal.dirty = true;
        cal
    }

    /// A calendar whose fields are set to this wall-clock time (month one-based here).
    pub(crate) fn at_fields(tz: Tz, year: i64, month: i64, day: i64) -> Calendar {
        Calendar {
            tz,
            year,
            month: month - 1,
            day,
            hour: 0,
            minute: 0,
            second: 0,
            day_of_week: 5,
            instant: 0,
            dirty: true,
        }
    }

    pub(crate) fn set(&mut self, field: CalField, value: i64) {
        match field {
            CalField::Year => self.year = value,
            CalField::Month => self.month = value,
            CalField::DayOfMonth => self.day = value,
            CalField::HourOfDay => self.hour = value,
            CalField::Minute => self.minute = value,
            CalField::Second => self.second = value,
            CalField::DayOfWeek => return,
        }
        self.dirty = true;
    }

    pub(crate) fn get(&mut self, field: CalField) -> i64 {
        self.complete();
        match field {
            CalField::Year => self.year,
            CalField::Month => self.month,
            CalField::DayOfMonth => self.day,
            CalField::HourOfDay => self.hour,
            CalField::Minute => self.minute,
            CalField::Second => self.second,
            CalField::DayOfWeek => self.day_of_week,
        }
    }

    /// Java's `add(YEAR, 1)`: normalise, add, and pin February 29 to the 28th.
    pub(crate) fn add_year(&mut self, amount: i64) {
        self.complete();
        self.year += amount;
        let len = last_day_of_month(self.month + 1, self.year);
        if self.day > len {
            self.day = len;
        }
        self.dirty = true;
    }

    /// Epoch seconds of the current fields.
    pub(crate) fn time(&mut self) -> i64 {
        self.complete();
        self.instant
    }

    fn complete(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        // Lenient normalisation: months beyond 0..=11 move the year, then days and time of day
        // are plain arithmetic on a day count.
        let year = self.year + self.month.div_euclid(12);
        let month = self.month.rem_euclid(12) + 1;
        // Keep absurd values (from pathological expressions) inside what the date code handles;
        // the search stops long before such years anyway.
        let year = year.clamp(-100_000, 100_000);
        let days = days_from_civil(year, month, 1)
            .saturating_add(self.day.clamp(-10_000_000, 10_000_000) - 1);
        let time_of_day = self.hour * 3600 + self.minute * 60 + self.second;
        let wall = days * DAY + time_of_day;
        self.instant = resolve_wall(self.tz, wall);
        self.fields_from_instant();
    }

    fn fields_from_instant(&mut self) {
        let local = self.instant + offset_at(self.tz, self.instant);
        let days = local.div_euclid(DAY);
        let secs = local.rem_euclid(DAY);
        let (year, month, day) = civil_from_days(days);
        self.year = year;
        self.month = month - 1;
        self.day = day;
        self.hour = secs / 3600;
        self.minute = secs % 3600 / 60;
        self.second = secs % 60;
        self.day_of_week = day_of_week(days);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip() {
        for days in [-800_000, -1, 0, 1, 59, 365, 11_016, 47_482, 400_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(day_of_week(days_from_civil(2024, 3, 10)), 1); // a Sunday
    }

    #[test]
    fn lenient_day_overflow() {
        let mut cal = Calendar::at_fields(Tz::UTC, 2023, 2, 31);
        assert_eq!(cal.get(CalField::Month), 2); // March, zero-based
        assert_eq!(cal.get(CalField::DayOfMonth), 3);
        cal.set(CalField::HourOfDay, 24);
        assert_eq!(cal.get(CalField::DayOfMonth), 4);
        assert_eq!(cal.get(CalField::HourOfDay), 0);
    }

    #[test]
    fn gap_moves_forward_and_overlap_takes_the_later_instant() {
        let ny = chrono_tz::America::New_York;
        // 2024-03-10 02:30 does not exist in New York: it becomes 03:30 EDT (07:30 UTC).
        let wall = days_from_civil(2024, 3, 10) * DAY + 2 * 3600 + 1800;
        assert_eq!(
            resolve_wall(ny, wall),
            days_from_civil(2024, 3, 10) * DAY + 7 * 3600 + 1800
        );
        // 2024-11-03 01:30 exists twice: EST (06:30 UTC) is chosen.
        let wall = days_from_civil(2024, 11, 3) * DAY + 3600 + 1800;
        assert_eq!(
            resolve_wall(ny, wall),
            days_from_civil(2024, 11, 3) * DAY + 6 * 3600 + 1800
        );
    }

    #[test]
    fn rules_continue_after_the_table() {
        let ny = chrono_tz::America::New_York;
        // Summer 2110 is daylight time, as Java computes it from the zone's last rule.
        let july = days_from_civil(2110, 7, 1) * DAY;
        assert_eq!(offset_at(ny, july), -4 * 3600);
        let january = days_from_civil(2110, 1, 15) * DAY;
        assert_eq!(offset_at(ny, january), -5 * 3600);
    }
}
