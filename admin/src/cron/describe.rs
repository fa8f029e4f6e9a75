//! Plain-language English or Chinese for a parsed expression, for the console's cron helper.
//!
//! It works from the value sets rather than the text, so equivalent spellings (`*/15`, `0/15`,
//! `0,15,30,45`) read the same. One reading of the sets decides what to say; [`Words`] says it in
//! the chosen language (Chinese puts the larger units first: year, month, day, time of day).

use super::parse::{Field, Parsed, NO_SPEC};
use super::Lang;

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
const DAYS_ZH: [&str; 7] = ["周日", "周一", "周二", "周三", "周四", "周五", "周六"];
const ORDINALS: [&str; 5] = ["first", "second", "third", "fourth", "fifth"];
const ORDINALS_ZH: [&str; 5] = ["第一个", "第二个", "第三个", "第四个", "第五个"];

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

/// A unit of repetition.
#[derive(Clone, Copy)]
enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Month,
    Year,
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
}

/// The words of one language.
#[derive(Clone, Copy)]
struct Words(Lang);

impl Words {
    fn zh(self) -> bool {
        self.0 == Lang::Zh
    }

    /// "5, 10 and 20 through 25" / "5、10和20至25", naming each value with `name`.
    fn list(self, values: &Values, name: impl Fn(i32) -> String) -> String {
        let mut items = Vec::new();
        let v = &values.values;
        let mut i = 0;
        while i < v.len() {
            let mut j = i;
            while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
                j += 1;
            }
            if j - i >= 2 {
                items.push(if self.zh() {
                    format!("{}至{}", name(v[i]), name(v[j]))
                } else {
                    format!("{} through {}", name(v[i]), name(v[j]))
                });
                i = j + 1;
            } else {
                items.push(name(v[i]));
                i += 1;
            }
        }
        self.join(&items)
    }

    fn join(self, items: &[String]) -> String {
        let (comma, and) = if self.zh() {
            ("、", "和")
        } else {
            (", ", " and ")
        };
        match items {
            [] => String::new(),
            [one] => one.clone(),
            [init @ .., last] => format!("{}{and}{last}", init.join(comma)),
        }
    }

    /// "minute" / "分钟".
    fn unit(self, unit: Unit) -> &'static str {
        let (en, zh) = match unit {
            Unit::Second => ("second", "秒"),
            Unit::Minute => ("minute", "分钟"),
            Unit::Hour => ("hour", "小时"),
            Unit::Day => ("day", "天"),
            Unit::Month => ("month", "个月"),
            Unit::Year => ("year", "年"),
        };
        if self.zh() {
            zh
        } else {
            en
        }
    }

    /// "5 minutes" / "5分钟".
    fn count(self, n: i32, unit: Unit) -> String {
        let name = self.unit(unit);
        match (self.zh(), n) {
            (true, _) => format!("{n}{name}"),
            (false, 1) => format!("1 {name}"),
            (false, _) => format!("{n} {name}s"),
        }
    }

    /// "every minute", "every 15 minutes starting at minute 10" / "每分钟", "从第10分钟起每15分钟".
    fn every(self, start: i32, step: i32, unit: Unit) -> String {
        let base = match (self.zh(), step) {
            (true, 1) => format!("每{}", self.unit(unit)),
            (true, _) => format!("每{}", self.count(step, unit)),
            (false, 1) => format!("every {}", self.unit(unit)),
            (false, _) => format!("every {}", self.count(step, unit)),
        };
        if start == 0 {
            return base;
        }
        if self.zh() {
            let from = match unit {
                Unit::Hour => format!("{start}点"),
                Unit::Minute => format!("第{start}分钟"),
                _ => format!("第{start}秒"),
            };
            return format!("从{from}起{base}");
        }
        format!("{base} starting at {} {start}", self.unit(unit))
    }

    fn month(self, m: i32) -> String {
        if self.zh() {
            format!("{m}月")
        } else {
            MONTHS[m as usize - 1].to_string()
        }
    }

    fn weekday(self, d: i32) -> String {
        let names = if self.zh() { DAYS_ZH } else { DAYS };
        names[d as usize - 1].to_string()
    }

    /// "15th" / "15日".
    fn day_of_month(self, n: i32) -> String {
        if self.zh() {
            return format!("{n}日");
        }
        let suffix = match (n % 10, n % 100) {
            (1, 11) | (2, 12) | (3, 13) => "th",
            (1, _) => "st",
            (2, _) => "nd",
            (3, _) => "rd",
            _ => "th",
        };
        format!("{n}{suffix}")
    }

    /// "hours 09 through 17" / "09至17点".
    fn hours(self, h: &Values) -> String {
        let list = self.list(h, |v| format!("{v:02}"));
        if self.zh() {
            format!("{list}点")
        } else if h.values.len() == 1 {
            format!("hour {list}")
        } else {
            format!("hours {list}")
        }
    }

    /// "at seconds 10 and 20" / "第10和20秒".
    fn at_values(self, v: &Values, unit: Unit) -> String {
        let list = self.list(v, |x| x.to_string());
        if self.zh() {
            let unit = if matches!(unit, Unit::Second) {
                "秒"
            } else {
                "分钟"
            };
            return format!("第{list}{unit}");
        }
        let unit = match (unit, v.values.len()) {
            (Unit::Second, 1) => "second",
            (Unit::Second, _) => "seconds",
            (_, 1) => "minute",
            _ => "minutes",
        };
        format!("at {unit} {list}")
    }

    /// Joins the parts of a description, given from the smallest unit to the largest.
    fn sentence(self, mut parts: Vec<String>, separator_en: &str, separator_zh: &str) -> String {
        parts.retain(|s| !s.is_empty());
        if self.zh() {
            parts.reverse();
            parts.join(separator_zh)
        } else {
            parts.join(separator_en)
        }
    }
}

pub(crate) fn describe(p: &Parsed, max_year: i64, lang: Lang) -> String {
    let w = Words(lang);
    let (time, fixed) = describe_time(p, max_year, w);
    let (days, every_day) = describe_days(p, max_year, w);
    let mut parts = vec![time];
    // "every 5 minutes" already says every day; "at 02:30:00" does not.
    if fixed || !every_day {
        parts.push(days);
    }
    let months = Values::of(p, Field::Month, max_year);
    match months.shape() {
        Shape::All => {}
        Shape::Every { start, step } if w.zh() => parts.push(format!(
            "从{}起每{}",
            w.month(start),
            w.count(step, Unit::Month)
        )),
        Shape::Every { start, step } => parts.push(format!(
            "every {} starting in {}",
            w.count(step, Unit::Month),
            w.month(start)
        )),
        _ if w.zh() => parts.push(w.list(&months, |m| w.month(m))),
        _ => parts.push(format!("in {}", w.list(&months, |m| w.month(m)))),
    }
    let years = Values::of(p, Field::Year, max_year);
    let year = |y: i32| {
        if w.zh() {
            format!("{y}年")
        } else {
            y.to_string()
        }
    };
    if years.values.is_empty() {
        parts.push(
            if w.zh() {
                "不在任何将来的年份"
            } else {
                "in no year that can still come"
            }
            .to_string(),
        );
    } else {
        match years.shape() {
            Shape::All => {}
            Shape::Every { start, step } if w.zh() => parts.push(format!(
                "从{}起每{}",
                year(start),
                w.count(step, Unit::Year)
            )),
            Shape::Every { start, step } => parts.push(format!(
                "every {} starting in {start}",
                w.count(step, Unit::Year)
            )),
            _ if w.zh() => parts.push(w.list(&years, year)),
            _ => parts.push(format!("in {}", w.list(&years, year))),
        }
    }
    w.sentence(parts, ", ", " ")
}

/// The time-of-day part, and whether it names fixed times ("at 10:15:00") rather than a
/// repetition ("every 5 minutes").
fn describe_time(p: &Parsed, max_year: i64, w: Words) -> (String, bool) {
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
            let times = w.join(&times);
            return (if w.zh() { times } else { format!("at {times}") }, true);
        }
    }

    // Once an hour: "every hour at minute 30", "every 2 hours".
    if let (Shape::Single(0), Shape::Single(min)) = (&ss, &ms) {
        let at_minute = match (*min, w.zh()) {
            (0, _) => String::new(),
            (min, true) => format!("的第{min}分钟"),
            (min, false) => format!(" at minute {min}"),
        };
        let text = match hs {
            Shape::Every { start, step } => {
                format!("{}{at_minute}", w.every(start, step, Unit::Hour))
            }
            Shape::All if w.zh() => format!("每小时{at_minute}"),
            Shape::All => format!("every hour{at_minute}"),
            _ if w.zh() => format!("{}，每小时{at_minute}", w.hours(&h)),
            _ => format!("every hour{at_minute}, during {}", w.hours(&h)),
        };
        return (text, false);
    }

    let mut clauses = Vec::new();
    let seconds_repeat = matches!(ss, Shape::All | Shape::Every { .. });
    match ss {
        Shape::All => clauses.push(w.every(0, 1, Unit::Second)),
        Shape::Every { start, step } => clauses.push(w.every(start, step, Unit::Second)),
        // Second 0 goes unsaid: "every 5 minutes" means on the minute.
        Shape::Single(0) => {}
        _ => clauses.push(w.at_values(&s, Unit::Second)),
    }
    let minutes_repeat = matches!(ms, Shape::All | Shape::Every { .. });
    match ms {
        Shape::All if seconds_repeat => {}
        Shape::All => clauses.push(w.every(0, 1, Unit::Minute)),
        Shape::Every { start, step } => clauses.push(w.every(start, step, Unit::Minute)),
        _ => clauses.push(w.at_values(&m, Unit::Minute)),
    }
    match hs {
        Shape::All if seconds_repeat || minutes_repeat => {}
        Shape::All => clauses.push(w.every(0, 1, Unit::Hour)),
        _ if w.zh() => clauses.push(w.hours(&h)),
        _ => clauses.push(format!("during {}", w.hours(&h))),
    }
    (w.sentence(clauses, ", ", "，"), false)
}

/// The days part, and whether it is every day.
fn describe_days(p: &Parsed, max_year: i64, w: Words) -> (String, bool) {
    let zh = w.zh();
    let text = |en: String, zh_text: String| (if zh { zh_text } else { en }, false);
    let dom_is_free = p.set(Field::DayOfMonth).contains(&NO_SPEC);
    if !dom_is_free {
        if p.last_day_of_month {
            let n = p.last_day_offset;
            let before = w.count(n, Unit::Day);
            return match (n, p.nearest_weekday) {
                (0, false) => text("on the last day of the month".into(), "每月最后一天".into()),
                (0, true) => text(
                    "on the last weekday of the month".into(),
                    "每月最后一个工作日".into(),
                ),
                (_, false) => text(
                    format!("{before} before the last day of the month"),
                    format!("每月最后一天的前{before}"),
                ),
                (_, true) => text(
                    format!("on the weekday nearest {before} before the last day of the month"),
                    format!("每月离最后一天的前{before}最近的工作日"),
                ),
            };
        }
        let dom = Values::of(p, Field::DayOfMonth, max_year);
        if p.nearest_weekday {
            let day = dom.values.first().copied().unwrap_or(1);
            return text(
                format!(
                    "on the weekday nearest the {} of the month",
                    w.day_of_month(day)
                ),
                format!("每月离{}最近的工作日", w.day_of_month(day)),
            );
        }
        return match dom.shape() {
            Shape::All => every_day(w),
            Shape::Every { start, step } => text(
                format!(
                    "every {} of the month starting on the {}",
                    w.count(step, Unit::Day),
                    w.day_of_month(start)
                ),
                format!(
                    "每月从{}起每{}",
                    w.day_of_month(start),
                    w.count(step, Unit::Day)
                ),
            ),
            _ => {
                let days = w.list(&dom, |d| w.day_of_month(d));
                text(format!("on the {days} of the month"), format!("每月{days}"))
            }
        };
    }
    let dow = Values::of(p, Field::DayOfWeek, max_year);
    let first = p.set(Field::DayOfWeek).first().copied().unwrap_or(1);
    let no_day = || text("on no day".into(), "没有任何一天".into());
    if p.last_day_of_week {
        if !(1..=7).contains(&first) {
            return no_day();
        }
        let day = w.weekday(first);
        return text(
            format!("on the last {day} of the month"),
            format!("每月最后一个{day}"),
        );
    }
    if p.nth_day_of_week != 0 {
        if !(1..=7).contains(&first) {
            return no_day();
        }
        let nth = p.nth_day_of_week as usize - 1;
        let day = w.weekday(first);
        return text(
            format!("on the {} {day} of the month", ORDINALS[nth]),
            format!("每月{}{day}", ORDINALS_ZH[nth]),
        );
    }
    match dow.shape() {
        Shape::All => every_day(w),
        _ => {
            let days = w.list(&dow, |d| w.weekday(d));
            text(format!("on {days}"), format!("每{days}"))
        }
    }
}

fn every_day(w: Words) -> (String, bool) {
    let text = if w.zh() { "每天" } else { "every day" };
    (text.to_string(), true)
}
