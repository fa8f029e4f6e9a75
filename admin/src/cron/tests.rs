use chrono::{Datelike, TimeZone, Timelike};
use chrono_tz::America::New_York;
use chrono_tz::Australia::Lord_Howe;
use chrono_tz::Europe::London;
use proptest::prelude::*;

use super::calendar::last_day_of_month;
use super::parse::{Field, NO_SPEC};
use super::*;

/// Epoch ms of a wall-clock time in `tz` (the earlier instant if it is ambiguous).
fn at(tz: Tz, y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
    tz.with_ymd_and_hms(y, mo, d, h, mi, s)
        .earliest()
        .expect("wall time exists")
        .timestamp_millis()
}

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
    at(Tz::UTC, y, mo, d, h, mi, s)
}

fn expr(s: &str) -> CronExpr {
    CronExpr::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn err(s: &str) -> CronError {
    CronExpr::parse(s).expect_err(s)
}

// ---- parsing errors: what and where ----

#[test]
fn errors_name_the_reason_and_the_position() {
    let cases: &[(&str, usize, &str)] = &[
        ("0 0 25 * * ?", 4, "Hour values must be between 0 and 23"),
        ("0 FOO * * * ?", 2, "Illegal characters for this position: 'FOO'"),
        ("0 0 0 * *", 9, "Unexpected end of expression."),
        ("0 0 0 ? * ?", 10, "'?' can only be specified for Day-of-Month -OR- Day-of-Week."),
        ("0 0 0 * * MON", 6, "Support for specifying both a day-of-week AND a day-of-month parameter is not implemented."),
        ("0 0 0 ? * 6#6", 12, "A numeric value between 1 and 5 must follow the '#' option"),
        ("0 0 0 L-31 * ?", 8, "Offset from last day must be <= 30"),
        ("0 0 0 ? FOO *", 8, "Invalid Month value: 'FOO'"),
        ("0 0 0 ? * MON-FOO", 14, "Invalid Day-of-Week value: 'FOO'"),
        ("0 */70 * * * ?", 4, "Increment > 60 : 70"),
        ("0 0 0 5L * ?", 7, "'L' option is not valid here. (pos=1)"),
        ("0 0 0 ? * 3W", 11, "'W' option is not valid here. (pos=1)"),
        ("0 0 ? * * *", 4, "'?' can only be specified for Day-of-Month or Day-of-Week."),
        ("0 0 0 ?XY * *", 7, "Illegal character after '?': X"),
        ("0 0 0 L,5 * ?", 6, "Support for specifying 'L' and 'LW' with other days of the month is not implemented"),
        ("0 0 0 ? * 1#2,3#4", 10, "Support for specifying multiple \"nth\" days is not implemented."),
        ("0 0 0 32W * ?", 8, "The 'W' option does not make sense with values larger than 31 (max number of days in a month)"),
        ("0 0 0 ? 13 *", 8, "Month values must be between 1 and 12"),
        ("0 0 0 ? * 0", 10, "Day-of-Week values must be between 1 and 7"),
        ("0 0 0 * * ? 2030-2020", 12, "Start year must be less than stop year"),
        ("0 0 0 1- * ?", 8, "Expected a number after '-'"),
        ("0 0 0 ? J *", 8, "Expected a three-letter name, found 'J'"),
        ("0 0 0 & * ?", 6, "Unexpected character: &"),
        // Quartz accepts these, then fails or never returns when asked for a fire time.
        ("L 0 0 * * ?", 0, "No value given for the seconds field"),
        ("0 0 0 0W * ?", 6, "Day of month values must be between 1 and 31"),
    ];
    for &(input, position, message) in cases {
        let e = err(input);
        assert_eq!(
            (e.position, e.message.as_str()),
            (position, message),
            "{input}"
        );
    }
}

#[test]
fn error_display_has_the_position() {
    assert_eq!(
        err("0 FOO * * * ?").to_string(),
        "Illegal characters for this position: 'FOO' (at position 2)"
    );
}

#[test]
fn positions_count_characters_of_the_input() {
    // 'é' is one character (two bytes); the bad hour is the fifth character.
    let e = err("é 0 25 * * ?");
    assert_eq!(e.message, "Unexpected character: É");
    assert_eq!(e.position, 0);
    let e = err("0\t0 25 * * ?");
    assert_eq!(e.position, 4);
}

#[test]
fn accepts_what_quartz_accepts() {
    for s in [
        "0 0 12 ? * wed",
        "0 15 10 ? * MON-FRI",
        "0 0 0 LW * ?",
        "0 0 0 L-3W * ?",
        "0 0 10 ? * 6#3",
        "0 0 10 ? * FRIL",
        "0 0 0 1 1 ? 2030-2032",
        "0 0 0 1 1 ? 2020 anything after the seventh field",
        "  0   0  0 * * ?  ",
        "0 0 0 * * ?X",
        "5X 0 0 * * ?",
        "L,5 0 0 * * ?",
    ] {
        expr(s);
    }
}

#[test]
fn huge_year_ranges_stay_cheap() {
    let e = expr("0 0 0 1 1 ? 2030-2000000000");
    assert_eq!(
        e.next_after(utc(2024, 1, 1, 0, 0, 0), Tz::UTC),
        Some(utc(2030, 1, 1, 0, 0, 0))
    );
}

#[test]
fn source_is_kept() {
    assert_eq!(expr("0 0 12 ? * wed").source(), "0 0 12 ? * wed");
}

// ---- fire times ----

#[test]
fn simple_schedules() {
    let e = expr("0 30 2 * * ?");
    assert_eq!(
        e.next_after(utc(2024, 1, 1, 0, 0, 0), Tz::UTC),
        Some(utc(2024, 1, 1, 2, 30, 0))
    );
    // Strictly after: a start on a fire time gives the next one.
    assert_eq!(
        e.next_after(utc(2024, 1, 1, 2, 30, 0), Tz::UTC),
        Some(utc(2024, 1, 2, 2, 30, 0))
    );
    // Milliseconds: the search starts at the next whole second.
    assert_eq!(
        e.next_after(utc(2024, 1, 1, 2, 29, 59) + 999, Tz::UTC),
        Some(utc(2024, 1, 1, 2, 30, 0))
    );
    assert_eq!(
        expr("*/5 * * * * ?").upcoming(utc(2024, 1, 1, 0, 0, 1), Tz::UTC, 3),
        vec![
            utc(2024, 1, 1, 0, 0, 5),
            utc(2024, 1, 1, 0, 0, 10),
            utc(2024, 1, 1, 0, 0, 15)
        ]
    );
}

#[test]
fn special_days() {
    let start = utc(2024, 1, 1, 0, 0, 0);
    // Third Friday.
    assert_eq!(
        expr("0 0 10 ? * 6#3").upcoming(start, Tz::UTC, 2),
        vec![utc(2024, 1, 19, 10, 0, 0), utc(2024, 2, 16, 10, 0, 0)]
    );
    // Last Friday.
    assert_eq!(
        expr("0 0 10 ? * 6L").next_after(start, Tz::UTC),
        Some(utc(2024, 1, 26, 10, 0, 0))
    );
    // Three days before the last day; February 2024 has 29 days.
    assert_eq!(
        expr("0 0 0 L-3 * ?").upcoming(start, Tz::UTC, 2),
        vec![utc(2024, 1, 28, 0, 0, 0), utc(2024, 2, 26, 0, 0, 0)]
    );
    // June 15 2024 is a Saturday: the nearest weekday is Friday the 14th.
    assert_eq!(
        expr("0 0 12 15W * ?").next_after(utc(2024, 6, 1, 0, 0, 0), Tz::UTC),
        Some(utc(2024, 6, 14, 12, 0, 0))
    );
    // June 1 2024 is a Saturday: 1W does not go back into May, it moves to Monday the 3rd.
    assert_eq!(
        expr("0 0 12 1W * ?").next_after(utc(2024, 5, 20, 0, 0, 0), Tz::UTC),
        Some(utc(2024, 6, 3, 12, 0, 0))
    );
    // The last weekday of August 2024 (the 31st is a Saturday).
    assert_eq!(
        expr("0 0 12 LW * ?").next_after(utc(2024, 8, 1, 0, 0, 0), Tz::UTC),
        Some(utc(2024, 8, 30, 12, 0, 0))
    );
    // Saturday is 7, and a range can wrap around the week.
    assert_eq!(
        expr("0 0 0 ? * FRI-MON").upcoming(utc(2024, 1, 3, 0, 0, 0), Tz::UTC, 4),
        vec![
            utc(2024, 1, 5, 0, 0, 0),
            utc(2024, 1, 6, 0, 0, 0),
            utc(2024, 1, 7, 0, 0, 0),
            utc(2024, 1, 8, 0, 0, 0)
        ]
    );
}

#[test]
fn quirks_match_quartz() {
    let start = utc(2024, 1, 1, 0, 0, 0);
    let same = |a: &str, b: &str| {
        assert_eq!(
            expr(a).upcoming(start, New_York, 20),
            expr(b).upcoming(start, New_York, 20),
            "{a} vs {b}"
        );
    };
    same("0 0 0 ? * MON-FRI/2", "0 0 0 ? * MON-FRI");
    same("*/0 0 0 * * ?", "* 0 0 * * ?");
    same("0 0 22-2 * * ?", "0 0 22,23,0,1,2 * * ?");
    same("0 0 0 ? * L", "0 0 0 ? * SAT");
    same("0 0 0 L-W * ?", "0 0 0 LW * ?");
    same("0 0 0 ? * MONDAY", "0 0 0 ? * MON");
}

#[test]
fn never_firing_expressions_return_none() {
    let start = utc(2024, 1, 1, 0, 0, 0);
    assert_eq!(expr("0 0 0 30 2 ?").next_after(start, Tz::UTC), None);
    assert_eq!(expr("0 0 0 * * ? 2020").next_after(start, Tz::UTC), None);
    assert_eq!(expr("0 0 0 ? * 9#2").next_after(start, Tz::UTC), None);
    assert!(expr("0 0 0 30 2 ?").upcoming(start, Tz::UTC, 5).is_empty());
    let last = expr("0 0 0 1 1 ? 2030").upcoming(start, Tz::UTC, 5);
    assert_eq!(last, vec![utc(2030, 1, 1, 0, 0, 0)]);
}

#[test]
fn spring_forward_gap_skips_the_day() {
    // 2024-03-10: New York jumps from 02:00 to 03:00.
    let fires = expr("0 30 2 * * ?").upcoming(at(New_York, 2024, 3, 9, 12, 0, 0), New_York, 2);
    assert_eq!(
        fires,
        vec![
            at(New_York, 2024, 3, 11, 2, 30, 0),
            at(New_York, 2024, 3, 12, 2, 30, 0)
        ]
    );
    // An hourly schedule just has no 02:30 that day.
    let fires = expr("0 30 * * * ?").upcoming(at(New_York, 2024, 3, 10, 1, 0, 0), New_York, 2);
    assert_eq!(
        fires,
        vec![
            at(New_York, 2024, 3, 10, 1, 30, 0),
            at(New_York, 2024, 3, 10, 3, 30, 0)
        ]
    );
    // Lord Howe moves by 30 minutes (2024-10-06 02:00 -> 02:30).
    let fires = expr("0 15 2 * * ?").upcoming(at(Lord_Howe, 2024, 10, 5, 12, 0, 0), Lord_Howe, 1);
    assert_eq!(fires, vec![at(Lord_Howe, 2024, 10, 7, 2, 15, 0)]);
}

#[test]
fn fall_back_overlap_fires_once_at_the_second_occurrence() {
    // 2024-11-03: New York goes back from 02:00 EDT to 01:00 EST; 01:30 happens twice.
    let e = expr("0 30 1 * * ?");
    let first_0130 = at(New_York, 2024, 11, 3, 1, 30, 0);
    let second_0130 = first_0130 + 3_600_000;
    let fires = e.upcoming(at(New_York, 2024, 11, 2, 12, 0, 0), New_York, 2);
    assert_eq!(
        fires,
        vec![second_0130, at(New_York, 2024, 11, 4, 1, 30, 0)]
    );
    // Every 30 minutes: the first pass through 01:00-01:59 is skipped.
    let fires = expr("0 0/30 * * * ?").upcoming(at(New_York, 2024, 11, 3, 0, 15, 0), New_York, 3);
    assert_eq!(
        fires,
        vec![
            at(New_York, 2024, 11, 3, 0, 30, 0),
            second_0130 - 1_800_000,
            second_0130
        ]
    );
}

#[test]
fn far_future_keeps_daylight_saving() {
    // Beyond the zone table (2099), Java still applies the New York rule: 2110-03-09 has a gap,
    // and after it 02:30 is daylight time (times checked with Quartz).
    let fires = expr("0 30 2 * * ?").upcoming(utc(2110, 3, 8, 0, 0, 0), New_York, 2);
    assert_eq!(
        fires,
        vec![utc(2110, 3, 8, 7, 30, 0), utc(2110, 3, 10, 6, 30, 0)]
    );
}

#[test]
fn next_after_is_fast() {
    let exprs = [
        "0 0/5 * * * ?",
        "0 15 10 ? * MON-FRI",
        "0 0 12 L-2 * ?",
        "0 30 2 ? * 6#3",
        "*/7 * 9-17 * * ?",
    ];
    let parsed: Vec<CronExpr> = exprs.iter().map(|s| expr(s)).collect();
    let started = std::time::Instant::now();
    let mut t = utc(2024, 1, 1, 0, 0, 0);
    let rounds = 2_000;
    for i in 0..rounds {
        let e = &parsed[i % parsed.len()];
        t = e.next_after(t, New_York).expect("fires") - 3_600_000 * 24 * 20;
    }
    let per_call = started.elapsed() / rounds as u32;
    // Generous enough for an unoptimised build on a busy machine; a release build takes a few
    // microseconds.
    assert!(
        per_call < std::time::Duration::from_millis(1),
        "{per_call:?} per call"
    );
}

// ---- descriptions ----

#[test]
fn descriptions() {
    let cases = [
        ("0 30 2 * * ?", "at 02:30:00, every day"),
        ("*/5 * * * * ?", "every 5 seconds"),
        ("* * * * * ?", "every second"),
        ("0 * * * * ?", "every minute"),
        ("0 0 * * * ?", "every hour"),
        ("0 0/5 * * * ?", "every 5 minutes"),
        ("0 30 * * * ?", "every hour at minute 30"),
        ("0 0 */2 * * ?", "every 2 hours"),
        (
            "0 */10 9-17 ? * MON-FRI",
            "every 10 minutes, during hours 09 through 17, on Monday through Friday",
        ),
        (
            "0 15 10,14 ? * MON-FRI",
            "at 10:15:00 and 14:15:00, on Monday through Friday",
        ),
        (
            "0 0 10 ? * 6#3",
            "at 10:00:00, on the third Friday of the month",
        ),
        (
            "0 0 10 ? * 6L",
            "at 10:00:00, on the last Friday of the month",
        ),
        ("0 0 0 L * ?", "at 00:00:00, on the last day of the month"),
        (
            "0 0 0 L-3 * ?",
            "at 00:00:00, 3 days before the last day of the month",
        ),
        (
            "0 0 0 LW * ?",
            "at 00:00:00, on the last weekday of the month",
        ),
        (
            "0 0 0 15W * ?",
            "at 00:00:00, on the weekday nearest the 15th of the month",
        ),
        (
            "0 0 0 1,15 * ?",
            "at 00:00:00, on the 1st and 15th of the month",
        ),
        (
            "0 0 12 1 JAN,JUL ? 2030",
            "at 12:00:00, on the 1st of the month, in January and July, in 2030",
        ),
        (
            "0 0 12 * 3-5 ? 2030-2032",
            "at 12:00:00, every day, in March through May, in 2030 through 2032",
        ),
        ("15 0 12 ? * SUN", "at 12:00:15, on Sunday"),
        (
            "0 30 9-17 * * ?",
            "every hour at minute 30, during hours 09 through 17",
        ),
        ("10,20 * * * * ?", "at seconds 10 and 20, every minute"),
        (
            "0 10/15 * ? * SAT,SUN",
            "every 15 minutes starting at minute 10, on Sunday and Saturday",
        ),
        (
            "0 0 0 1 1 ? 2030/5",
            "at 00:00:00, on the 1st of the month, in January, every 5 years starting in 2030",
        ),
        ("0 0 0 ? * 2-6", "at 00:00:00, on Monday through Friday"),
    ];
    for (input, want) in cases {
        assert_eq!(expr(input).describe(Lang::En), want, "{input}");
    }
}

/// The same readings in Chinese, larger units first.
#[test]
fn descriptions_in_chinese() {
    let cases = [
        ("0 30 2 * * ?", "每天 02:30:00"),
        ("*/5 * * * * ?", "每5秒"),
        ("* * * * * ?", "每秒"),
        ("0 * * * * ?", "每分钟"),
        ("0 0 * * * ?", "每小时"),
        ("0 0/5 * * * ?", "每5分钟"),
        ("0 30 * * * ?", "每小时的第30分钟"),
        ("0 0 */2 * * ?", "每2小时"),
        ("0 0 1/2 * * ?", "从1点起每2小时"),
        ("0 */10 9-17 ? * MON-FRI", "每周一至周五 09至17点，每10分钟"),
        ("0 15 10,14 ? * MON-FRI", "每周一至周五 10:15:00和14:15:00"),
        ("0 0 10 ? * 6#3", "每月第三个周五 10:00:00"),
        ("0 0 10 ? * 6L", "每月最后一个周五 10:00:00"),
        ("0 0 0 L * ?", "每月最后一天 00:00:00"),
        ("0 0 0 L-3 * ?", "每月最后一天的前3天 00:00:00"),
        ("0 0 0 LW * ?", "每月最后一个工作日 00:00:00"),
        ("0 0 0 15W * ?", "每月离15日最近的工作日 00:00:00"),
        ("0 0 0 1,15 * ?", "每月1日和15日 00:00:00"),
        ("0 0 0 1/5 * ?", "每月从1日起每5天 00:00:00"),
        ("0 0 0 1 1/3 ?", "从1月起每3个月 每月1日 00:00:00"),
        (
            "0 0 12 1 JAN,JUL ? 2030",
            "2030年 1月和7月 每月1日 12:00:00",
        ),
        (
            "0 0 12 * 3-5 ? 2030-2032",
            "2030年至2032年 3月至5月 每天 12:00:00",
        ),
        ("15 0 12 ? * SUN", "每周日 12:00:15"),
        ("0 30 9-17 * * ?", "09至17点，每小时的第30分钟"),
        ("10,20 * * * * ?", "每分钟，第10和20秒"),
        ("0 10/15 * ? * SAT,SUN", "每周日和周六 从第10分钟起每15分钟"),
        ("0 0 0 1 1 ? 2030/5", "从2030年起每5年 1月 每月1日 00:00:00"),
        ("0 0 0 ? * 2-6", "每周一至周五 00:00:00"),
        ("0 0 0 1 1 ? 2020", "2020年 1月 每月1日 00:00:00"),
    ];
    for (input, want) in cases {
        assert_eq!(expr(input).describe(Lang::Zh), want, "{input}");
    }
}

#[test]
fn language_tags() {
    for tag in ["en", "EN", "en-US", "en_GB"] {
        assert_eq!(Lang::parse(tag), Some(Lang::En), "{tag}");
    }
    for tag in ["zh", "zh-CN", "zh_cn", " zh-Hans "] {
        assert_eq!(Lang::parse(tag), Some(Lang::Zh), "{tag}");
    }
    for tag in ["", "fr", "english", "z"] {
        assert_eq!(Lang::parse(tag), None, "{tag}");
    }
}

// ---- warnings ----

#[test]
fn warns_about_the_spring_forward_gap() {
    let w = schedule_warnings(
        &expr("0 30 2 * * ?"),
        New_York,
        at(New_York, 2024, 1, 1, 0, 0, 0),
        Lang::En,
    );
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("2024-03-10") && w[0].contains("02:30:00") && w[0].contains("skipped"),
        "{w:?}"
    );
}

#[test]
fn warns_about_the_fall_back_overlap() {
    let w = schedule_warnings(
        &expr("0 30 1 * * ?"),
        New_York,
        at(New_York, 2024, 1, 1, 0, 0, 0),
        Lang::En,
    );
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("2024-11-03") && w[0].contains("fires once"),
        "{w:?}"
    );
    // Lord Howe's clocks move by 30 minutes: 02:00-02:30 is skipped in October, 01:30-02:00 is
    // repeated in April; 02:45 is in neither.
    let from = at(Lord_Howe, 2024, 1, 1, 0, 0, 0);
    let w = schedule_warnings(&expr("0 15 2 * * ?"), Lord_Howe, from, Lang::En);
    assert!(
        w.len() == 1 && w[0].contains("2024-10-06") && w[0].contains("skipped"),
        "{w:?}"
    );
    let w = schedule_warnings(&expr("0 45 1 * * ?"), Lord_Howe, from, Lang::En);
    assert!(
        w.len() == 1 && w[0].contains("2024-04-07") && w[0].contains("fires once"),
        "{w:?}"
    );
    assert!(schedule_warnings(&expr("0 45 2 * * ?"), Lord_Howe, from, Lang::En).is_empty());
}

#[test]
fn no_warning_for_safe_schedules_and_zones() {
    let from = utc(2024, 1, 1, 0, 0, 0);
    assert!(schedule_warnings(&expr("0 30 2 * * ?"), Tz::UTC, from, Lang::En).is_empty());
    assert!(schedule_warnings(&expr("0 0 12 * * ?"), London, from, Lang::En).is_empty());
}

#[test]
fn warns_when_it_never_fires() {
    let w = schedule_warnings(
        &expr("0 0 0 30 2 ?"),
        Tz::UTC,
        utc(2024, 1, 1, 0, 0, 0),
        Lang::En,
    );
    assert_eq!(w.len(), 1);
    assert!(w[0].starts_with("never fires"), "{w:?}");
}

#[test]
fn warnings_in_chinese() {
    let from = at(New_York, 2024, 1, 1, 0, 0, 0);
    let gap = schedule_warnings(&expr("0 30 2 * * ?"), New_York, from, Lang::Zh);
    assert_eq!(
        gap,
        ["2024-03-10 America/New_York 的时钟从 02:00 跳到 03:00：触发时间 02:30:00 当天不存在，会被跳过"]
    );
    let overlap = schedule_warnings(&expr("0 */30 1 * * ?"), New_York, from, Lang::Zh);
    assert_eq!(
        overlap,
        ["2024-11-03 America/New_York 的时钟从 02:00 拨回 01:00：01:00:00 至 01:30:00 的 2 个触发时间 都会出现两次，每个只在第二次出现时触发一次"]
    );
    let never = schedule_warnings(
        &expr("0 0 0 30 2 ?"),
        Tz::UTC,
        utc(2024, 1, 1, 0, 0, 0),
        Lang::Zh,
    );
    assert_eq!(
        never,
        ["永远不会触发：UTC 时区 2024-01-01 00:00:00 之后没有触发时间"]
    );
}

#[test]
fn time_zone_names() {
    assert_eq!(parse_tz("Europe/London"), Ok(London));
    assert_eq!(
        parse_tz("Mars/Base").map_err(|e| e.to_string()),
        Err("unknown time zone 'Mars/Base'".to_string())
    );
}

// ---- properties ----

/// Whether the local time of `ms` in `tz` satisfies every field of `e`, checked directly from the
/// parsed sets rather than by the search.
fn matches_fields(e: &CronExpr, ms: i64, tz: Tz) -> bool {
    let p = &e.parsed;
    // Our offsets rather than chrono-tz's, which stop having DST after 2099 where Java does not.
    let offset = super::calendar::offset_at(tz, ms.div_euclid(1000));
    let local = chrono::DateTime::from_timestamp_millis(ms + offset * 1000)
        .unwrap()
        .naive_utc();
    let has = |f: Field, v: u32| p.set(f).contains(&(v as i32));
    let (y, mo, d) = (local.year(), local.month(), local.day());
    let ldom = last_day_of_month(i64::from(mo), i64::from(y)) as u32;
    let dow = local.weekday().num_days_from_sunday() + 1;
    let weekday = (2..=6).contains(&dow);
    let day_ok = if p.set(Field::DayOfMonth).contains(&NO_SPEC) {
        let want = p.set(Field::DayOfWeek)[0] as u32;
        if p.last_day_of_week {
            dow == want && d + 7 > ldom
        } else if p.nth_day_of_week != 0 {
            dow == want && (d - 1) / 7 + 1 == p.nth_day_of_week as u32
        } else {
            has(Field::DayOfWeek, dow)
        }
    } else {
        let target = if p.last_day_of_month {
            Some(ldom as i64 - i64::from(p.last_day_offset))
        } else if p.nearest_weekday {
            Some(i64::from(p.set(Field::DayOfMonth)[0]))
        } else {
            None
        };
        match (target, p.nearest_weekday) {
            (Some(t), false) => i64::from(d) == t,
            (Some(t), true) => weekday && (i64::from(d) - t).abs() <= 2,
            (None, _) => has(Field::DayOfMonth, d),
        }
    };
    has(Field::Second, local.second())
        && has(Field::Minute, local.minute())
        && has(Field::Hour, local.hour())
        && has(Field::Month, mo)
        && has(Field::Year, y as u32)
        && day_ok
}

fn expression() -> impl Strategy<Value = String> {
    let sec = prop::sample::select(vec!["0", "*/15", "5,45", "10-20/5", "50-10", "*"]);
    let min = prop::sample::select(vec!["0", "30", "*/20", "0-59/7", "55-5", "15,45"]);
    let hour = prop::sample::select(vec!["*", "1", "2", "3", "1-3", "22-2", "*/5", "0,12"]);
    let days = prop::sample::select(vec![
        "* ?",
        "1 ?",
        "31 ?",
        "L ?",
        "L-2 ?",
        "LW ?",
        "15W ?",
        "1W ?",
        "29-3 ?",
        "*/10 ?",
        "? *",
        "? MON-FRI",
        "? 6#3",
        "? 2#5",
        "? 6L",
        "? FRI-MON",
        "? 1,7",
    ]);
    let month = prop::sample::select(vec!["*", "2", "FEB-MAR", "NOV-FEB", "*/4"]);
    let year = prop::sample::select(vec!["", " *", " 2024-2040", " 2030/3"]);
    (sec, min, hour, days, month, year).prop_map(|(s, m, h, d, mo, y)| {
        let (dom, dow) = d.split_once(' ').expect("two day fields");
        format!("{s} {m} {h} {dom} {mo} {dow}{y}")
    })
}

fn zone() -> impl Strategy<Value = Tz> {
    prop::sample::select(vec![
        Tz::UTC,
        New_York,
        London,
        chrono_tz::Asia::Shanghai,
        Lord_Howe,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn fire_times_increase_and_match_the_fields(
        s in expression(),
        tz in zone(),
        start in 1_300_000_000_000i64..4_000_000_000_000,
    ) {
        let e = CronExpr::parse(&s).expect("valid");
        let times = e.upcoming(start, tz, 12);
        let mut previous = start;
        for t in times {
            prop_assert!(t > previous, "{s}: {t} after {previous}");
            prop_assert_eq!(t % 1000, 0);
            prop_assert!(matches_fields(&e, t, tz), "{} at {} in {}", s, t, tz);
            previous = t;
        }
    }

    #[test]
    fn parse_never_panics(s in "[0-9A-Z?*/,#LW -]{0,30}") {
        let _ = CronExpr::parse(&s).map(|e| e.next_after(0, Tz::UTC));
    }
}

#[test]
fn leap_day_schedule() {
    let fires = expr("0 0 0 29 2 ?").upcoming(utc(2024, 3, 1, 0, 0, 0), Tz::UTC, 2);
    assert_eq!(
        fires,
        vec![utc(2028, 2, 29, 0, 0, 0), utc(2032, 2, 29, 0, 0, 0)]
    );
}
