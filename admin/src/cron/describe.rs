//! Plain-language English for a parsed expression, for the console's cron helper.
//!
//! It works from the value sets rather than the text, so equivalent spellings (`*/15`, `0/15`,
//! `0,15,30,45`) read the same.

use super::parse::{Field, Parsed, NO_SPEC};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const ORDINALS: [&str; 5] = ["first", "second", "third", "fourth", "fifth"];

/// The values of a field that can actually occur, without Quartz's `*`/`?` markers.
struct Values {
    values: Vec<i32>,
    min: i32,
    max: i32,
}

/// The shape of a field's value set.
enum Shape {
    All,
    Single(i32),
    /// `start`, `start + step`, ... up to the end of the field's range.
    Every {
        start: i32,
        step: i32,
    },
    List,
}

impl Values {
    fn of(p: &Parsed, field: Field, max_year: i64) -> Values {
        let (min, max) = match field {
            Field::Second | Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::DayOfMonth => (1, 31),
            Field::Month => (1, 12),
            Field::DayOfWeek => (1, 7),
            Field::Year => (1970, i32::try_from(max_year).unwrap_or(i32::MAX)),
        };
        let values = p
            .set(field)
            .iter()
            .copied()
            .filter(|v| (min..=max).contains(v))
            .collect();
        Values { values, min, max }
    }

    fn shape(&self) -> Shape {
        let v = &self.values;
        if v.len() as i64 == i64::from(self.max) - i64::from(self.min) + 1 {
            return Shape::All;
        }
        if v.len() == 1 {
            return Shape::Single(v[0]);
        }
        // A step needs three values to be recognisable, except from the start of the range:
        // {0, 30} seconds is "every 30 seconds", {10, 44} minutes reads better as a list.
        if v.len() >= 3 || (v.len() == 2 && v[0] == 0 && self.min == 0) {
            let step = v[1] - v[0];
            let regular = v.windows(2).all(|w| w[1] - w[0] == step);
            let last = v[v.len() - 1];
            if step > 1 && regular && last + step > self.max {
                return Shape::Every { start: v[0], step };
            }
        }
        Shape::List
    }

    /// "5, 10 and 20 through 25", naming each value with `name`.
    fn list(&self, name: impl Fn(i32) -> String) -> String {
        let mut items = Vec::new();
        let v = &self.values;
        let mut i = 0;
        while i < v.len() {
            let mut j = i;
            while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
                j += 1;
            }
            if j - i >= 2 {
                items.push(format!("{} through {}", name(v[i]), name(v[j])));
                i = j + 1;
            } else {
                items.push(name(v[i]));
                i += 1;
            }
        }
        join(&items)
    }
}

fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {}", init.join(", "), last),
    }
}

fn plural(n: i32, unit: &str) -> String {
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

fn ordinal_day(n: i32) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

pub(crate) fn describe(p: &Parsed, max_year: i64) -> String {
    let (time, fixed) = describe_time(p, max_year);
    let days = describe_days(p, max_year);
    let mut parts = vec![time];
    // "every 5 minutes" already says every day; "at 02:30:00" does not.
    if fixed || days != "every day" {
        parts.push(days);
    }
    let months = Values::of(p, Field::Month, max_year);
    match months.shape() {
        Shape::All => {}
        Shape::Every { start, step } => parts.push(format!(
            "every {} starting in {}",
            plural(step, "month"),
            MONTHS[start as usize - 1]
        )),
        _ => parts.push(format!(
            "in {}",
            months.list(|m| MONTHS[m as usize - 1].to_string())
        )),
    }
    let years = Values::of(p, Field::Year, max_year);
    if years.values.is_empty() {
        parts.push("in no year that can still come".to_string());
    } else {
        match years.shape() {
            Shape::All => {}
            Shape::Every { start, step } => parts.push(format!(
                "every {} starting in {start}",
                plural(step, "year")
            )),
            _ => parts.push(format!("in {}", years.list(|y| y.to_string()))),
        }
    }
    parts.retain(|s| !s.is_empty());
    parts.join(", ")
}

/// The time-of-day part, and whether it names fixed times ("at 10:15:00") rather than a
/// repetition ("every 5 minutes").
fn describe_time(p: &Parsed, max_year: i64) -> (String, bool) {
    let s = Values::of(p, Field::Second, max_year);
    let m = Values::of(p, Field::Minute, max_year);
    let h = Values::of(p, Field::Hour, max_year);
    let (ss, ms, hs) = (s.shape(), m.shape(), h.shape());

    // Fixed times of day: "at 10:15:00 and 14:15:00".
    if let (Shape::Single(sec), Shape::Single(min)) = (&ss, &ms) {
        if h.values.len() <= 6 && !matches!(hs, Shape::All | Shape::Every { .. }) {
            let times: Vec<String> = h
                .values
                .iter()
                .map(|hr| format!("{hr:02}:{min:02}:{sec:02}"))
                .collect();
            return (format!("at {}", join(&times)), true);
        }
    }

    // Once an hour: "every hour at minute 30", "every 2 hours".
    if let (Shape::Single(0), Shape::Single(min)) = (&ss, &ms) {
        let at_minute = if *min == 0 {
            String::new()
        } else {
            format!(" at minute {min}")
        };
        let text = match hs {
            Shape::Every { start, step } => format!("{}{at_minute}", every(start, step, "hour")),
            Shape::All => format!("every hour{at_minute}"),
            _ => format!("every hour{at_minute}, during {}", hours(&h)),
        };
        return (text, false);
    }

    let mut clauses = Vec::new();
    let seconds_repeat = matches!(ss, Shape::All | Shape::Every { .. });
    match ss {
        Shape::All => clauses.push("every second".to_string()),
        Shape::Every { start, step } => clauses.push(every(start, step, "second")),
        // Second 0 goes unsaid: "every 5 minutes" means on the minute.
        Shape::Single(0) => {}
        _ => clauses.push(format!(
            "at {} {}",
            if s.values.len() == 1 {
                "second"
            } else {
                "seconds"
            },
            s.list(|v| v.to_string())
        )),
    }
    let minutes_repeat = matches!(ms, Shape::All | Shape::Every { .. });
    match ms {
        Shape::All if seconds_repeat => {}
        Shape::All => clauses.push("every minute".to_string()),
        Shape::Every { start, step } => clauses.push(every(start, step, "minute")),
        _ => clauses.push(format!(
            "at {} {}",
            if m.values.len() == 1 {
                "minute"
            } else {
                "minutes"
            },
            m.list(|v| v.to_string())
        )),
    }
    match hs {
        Shape::All if seconds_repeat || minutes_repeat => {}
        Shape::All => clauses.push("every hour".to_string()),
        _ => clauses.push(format!("during {}", hours(&h))),
    }
    (clauses.join(", "), false)
}

/// "hours 09 through 17", "hour 14".
fn hours(h: &Values) -> String {
    format!(
        "{} {}",
        if h.values.len() == 1 { "hour" } else { "hours" },
        h.list(|v| format!("{v:02}"))
    )
}

fn every(start: i32, step: i32, unit: &str) -> String {
    let base = format!("every {}", plural(step, unit));
    if start == 0 {
        base
    } else {
        format!("{base} starting at {unit} {start}")
    }
}

fn describe_days(p: &Parsed, max_year: i64) -> String {
    let dom_is_free = p.set(Field::DayOfMonth).contains(&NO_SPEC);
    if !dom_is_free {
        if p.last_day_of_month {
            let n = p.last_day_offset;
            return match (n, p.nearest_weekday) {
                (0, false) => "on the last day of the month".to_string(),
                (0, true) => "on the last weekday of the month".to_string(),
                (n, false) => format!("{} before the last day of the month", plural(n, "day")),
                (n, true) => format!(
                    "on the weekday nearest {} before the last day of the month",
                    plural(n, "day")
                ),
            };
        }
        let dom = Values::of(p, Field::DayOfMonth, max_year);
        if p.nearest_weekday {
            let day = dom.values.first().copied().unwrap_or(1);
            return format!(
                "on the weekday nearest the {} of the month",
                ordinal_day(day)
            );
        }
        return match dom.shape() {
            Shape::All => "every day".to_string(),
            Shape::Every { start, step } => format!(
                "every {} of the month starting on the {}",
                plural(step, "day"),
                ordinal_day(start)
            ),
            _ => format!("on the {} of the month", dom.list(ordinal_day)),
        };
    }
    let dow = Values::of(p, Field::DayOfWeek, max_year);
    let day_name = |d: i32| DAYS[d as usize - 1].to_string();
    let first = p.set(Field::DayOfWeek).first().copied().unwrap_or(1);
    if p.last_day_of_week {
        if (1..=7).contains(&first) {
            return format!("on the last {} of the month", day_name(first));
        }
        return "on no day".to_string();
    }
    if p.nth_day_of_week != 0 {
        if (1..=7).contains(&first) {
            return format!(
                "on the {} {} of the month",
                ORDINALS[p.nth_day_of_week as usize - 1],
                day_name(first)
            );
        }
        return "on no day".to_string();
    }
    match dow.shape() {
        Shape::All => "every day".to_string(),
        _ => format!("on {}", dow.list(day_name)),
    }
}
