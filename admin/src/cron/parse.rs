//! Parser for Quartz cron expressions.
//!
//! The rules follow what Quartz 2.3's `CronExpression` accepts, quirks included, because the
//! contract is "an expression means what it meant in XXL-JOB". Examples of accepted quirks:
//! `MON-FRI/2` is `MON-FRI` (the step after a named range is ignored), `5X` is `5` (trailing
//! characters after a plain value are ignored), `FRI-MON` wraps around the week, `*/0` is `*`.
//! Where Quartz accepts an expression and then fails or hangs when asked for a fire time (an empty
//! seconds field such as `L`, or `0W`), we refuse it at parse time instead.

use std::collections::BTreeSet;

use super::CronError;

/// Marker Quartz stores for `?`.
pub(crate) const NO_SPEC: i32 = 98;
/// Marker Quartz stores for a bare `*` (next to the filled-in values).
pub(crate) const ALL_SPEC: i32 = 99;

/// The seven positions of an expression, in order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Field {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
    Year,
}

impl Field {
    const ALL: [Field; 7] = [
        Field::Second,
        Field::Minute,
        Field::Hour,
        Field::DayOfMonth,
        Field::Month,
        Field::DayOfWeek,
        Field::Year,
    ];

    fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Field::Second => "seconds",
            Field::Minute => "minutes",
            Field::Hour => "hours",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
            Field::Year => "year",
        }
    }
}

/// The parsed form: one sorted value set per field plus the special-day flags, exactly the state
/// Quartz keeps, so that the fire-time search can follow Quartz step by step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub sets: [Vec<i32>; 7],
    /// `nL` in day-of-week: the last weekday n of the month.
    pub last_day_of_week: bool,
    /// `n#k` in day-of-week: the k-th weekday n of the month (0 when unused).
    pub nth_day_of_week: i32,
    /// `L` in day-of-month.
    pub last_day_of_month: bool,
    /// `W` in day-of-month (`15W`, `LW`).
    pub nearest_weekday: bool,
    /// `L-n` in day-of-month.
    pub last_day_offset: i32,
}

impl Parsed {
    pub(crate) fn set(&self, field: Field) -> &[i32] {
        &self.sets[field.index()]
    }
}

/// The upper-cased expression with, for every character, its offset in the caller's input, so
/// errors point at the caller's text even when upper-casing changed the length.
struct Source {
    chars: Vec<char>,
    origin: Vec<usize>,
    input_len: usize,
}

impl Source {
    fn new(input: &str) -> Source {
        let mut chars = Vec::with_capacity(input.len());
        let mut origin = Vec::with_capacity(input.len());
        let mut input_len = 0;
        for (offset, c) in input.chars().enumerate() {
            for u in c.to_uppercase() {
                chars.push(u);
                origin.push(offset);
            }
            input_len = offset + 1;
        }
        Source {
            chars,
            origin,
            input_len,
        }
    }

    /// Offset in the caller's input of upper-cased index `i` (the end of the input past the end).
    fn position(&self, i: usize) -> usize {
        self.origin.get(i).copied().unwrap_or(self.input_len)
    }
}

/// One comma-separated part of a field, with where it starts in the upper-cased expression.
struct Part<'a> {
    s: &'a [char],
    start: usize,
}

impl Part<'_> {
    fn len(&self) -> usize {
        self.s.len()
    }

    fn at(&self, i: usize) -> Option<char> {
        self.s.get(i).copied()
    }

    fn text(&self, from: usize, to: usize) -> String {
        self.s[from.min(self.len())..to.min(self.len())]
            .iter()
            .collect()
    }

    fn equals(&self, text: &str) -> bool {
        self.s.iter().copied().eq(text.chars())
    }
}

struct Parser<'a> {
    src: &'a Source,
    sets: [BTreeSet<i32>; 7],
    last_day_of_week: bool,
    nth_day_of_week: i32,
    last_day_of_month: bool,
    nearest_weekday: bool,
    last_day_offset: i32,
    max_year: i32,
}

pub(crate) fn parse(input: &str, max_year: i32) -> Result<Parsed, CronError> {
    let src = Source::new(input);
    let mut p = Parser {
        src: &src,
        sets: Default::default(),
        last_day_of_week: false,
        nth_day_of_week: 0,
        last_day_of_month: false,
        nearest_weekday: false,
        last_day_offset: 0,
        max_year,
    };

    // Fields are separated by spaces and tabs only; anything past the seventh field is ignored,
    // as Quartz does.
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < src.chars.len() {
        if src.chars[i] == ' ' || src.chars[i] == '\t' {
            i += 1;
            continue;
        }
        let start = i;
        while i < src.chars.len() && src.chars[i] != ' ' && src.chars[i] != '\t' {
            i += 1;
        }
        tokens.push((start, i));
    }

    for (&field, &(start, end)) in Field::ALL.iter().zip(tokens.iter()) {
        let token = &src.chars[start..end];
        let has = |c: char| token.contains(&c);
        if field == Field::DayOfMonth && has('L') && token.len() > 1 && has(',') {
            return Err(p.error(
                start,
                "Support for specifying 'L' and 'LW' with other days of the month is not implemented",
            ));
        }
        if field == Field::DayOfWeek && has('L') && token.len() > 1 && has(',') {
            return Err(p.error(
                start,
                "Support for specifying 'L' with other days of the week is not implemented",
            ));
        }
        if field == Field::DayOfWeek && token.iter().filter(|&&c| c == '#').count() > 1 {
            return Err(p.error(
                start,
                "Support for specifying multiple \"nth\" days is not implemented.",
            ));
        }
        // Empty parts ("1,,2") are skipped, like Java's StringTokenizer does.
        let mut part_start = start;
        for (k, &c) in token.iter().enumerate() {
            if c == ',' {
                if part_start < start + k {
                    p.store(
                        &Part {
                            s: &src.chars[part_start..start + k],
                            start: part_start,
                        },
                        field,
                    )?;
                }
                part_start = start + k + 1;
            }
        }
        if part_start < end {
            p.store(
                &Part {
                    s: &src.chars[part_start..end],
                    start: part_start,
                },
                field,
            )?;
        }
    }

    if tokens.len() < 6 {
        return Err(CronError::new(
            src.input_len,
            "Unexpected end of expression.",
        ));
    }
    if tokens.len() == 6 {
        let star = ['*'];
        p.store(
            &Part {
                s: &star,
                start: src.chars.len(),
            },
            Field::Year,
        )?;
    }

    let dom_spec = !p.sets[Field::DayOfMonth.index()].contains(&NO_SPEC);
    let dow_spec = !p.sets[Field::DayOfWeek.index()].contains(&NO_SPEC);
    if dom_spec == dow_spec {
        let at = tokens.get(3).map_or(0, |&(s, _)| src.position(s));
        return Err(CronError::new(
            at,
            "Support for specifying both a day-of-week AND a day-of-month parameter is not implemented.",
        ));
    }

    // Quartz accepts these, then throws or loops forever when asked for a fire time.
    for field in [
        Field::Second,
        Field::Minute,
        Field::Hour,
        Field::Month,
        Field::DayOfWeek,
    ] {
        if p.sets[field.index()].is_empty() {
            let at = tokens[field.index()].0;
            return Err(p.error(
                at,
                &format!("No value given for the {} field", field.name()),
            ));
        }
    }
    if p.sets[Field::DayOfMonth.index()].is_empty() && !p.last_day_of_month {
        let at = tokens[Field::DayOfMonth.index()].0;
        return Err(p.error(at, "No value given for the day-of-month field"));
    }

    Ok(Parsed {
        sets: p.sets.map(|s| s.into_iter().collect()),
        last_day_of_week: p.last_day_of_week,
        nth_day_of_week: p.nth_day_of_week,
        last_day_of_month: p.last_day_of_month,
        nearest_weekday: p.nearest_weekday,
        last_day_offset: p.last_day_offset,
    })
}

fn month_number(s: &str) -> i32 {
    const NAMES: [&str; 12] = [
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ];
    NAMES.iter().position(|&n| n == s).map_or(-1, |i| i as i32)
}

fn day_of_week_number(s: &str) -> i32 {
    const NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
    NAMES
        .iter()
        .position(|&n| n == s)
        .map_or(-1, |i| i as i32 + 1)
}

/// `^L-[0-9]*W?$`: the forms that start with a letter but are not names.
fn is_last_day_form(part: &Part) -> bool {
    if part.equals("L") || part.equals("LW") {
        return true;
    }
    let s = part.s;
    if s.len() < 2 || s[0] != 'L' || s[1] != '-' {
        return false;
    }
    let rest = &s[2..];
    let rest = rest.strip_suffix(&['W']).unwrap_or(rest);
    rest.iter().all(|c| c.is_ascii_digit())
}

/// Java's `Integer.parseInt`: optional sign, at least one digit, no overflow.
fn parse_int(s: &[char]) -> Option<i32> {
    let (negative, digits) = match s.first() {
        Some('-') => (true, &s[1..]),
        Some('+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for c in digits {
        value = value * 10 + i64::from(c.to_digit(10)?);
        if value > i64::from(i32::MAX) + 1 {
            return None;
        }
    }
    let value = if negative { -value } else { value };
    i32::try_from(value).ok()
}

impl Parser<'_> {
    fn error(&self, upper_index: usize, message: &str) -> CronError {
        CronError::new(self.src.position(upper_index), message)
    }

    fn err_at(&self, part: &Part, i: usize, message: &str) -> CronError {
        self.error(part.start + i, message)
    }

    /// Three letters starting at `i`, or an error when the part is shorter.
    fn name_at(&self, part: &Part, i: usize) -> Result<String, CronError> {
        if i + 3 > part.len() {
            return Err(self.err_at(
                part,
                i,
                &format!(
                    "Expected a three-letter name, found '{}'",
                    part.text(i, part.len())
                ),
            ));
        }
        Ok(part.text(i, i + 3))
    }

    /// A single digit, as Quartz reads the first digit of a range end or step.
    fn digit_at(&self, part: &Part, i: usize, what: &str) -> Result<i32, CronError> {
        match part.at(i) {
            Some(c) if c.is_ascii_digit() => Ok(c as i32 - '0' as i32),
            Some(c) => Err(self.err_at(part, i, &format!("Expected a number {what}, found '{c}'"))),
            None => Err(self.err_at(part, i, &format!("Expected a number {what}"))),
        }
    }

    /// Reads the digits at `i` after an already-read leading value `v` (Quartz's `getValue`):
    /// returns the number and the position after it (one past the end when the part ends).
    fn value_at(&self, v: i32, part: &Part, mut i: usize) -> Result<(i32, usize), CronError> {
        let from = i;
        if i >= part.len() {
            return Err(self.err_at(part, i, "Unexpected end of value"));
        }
        let mut value = i64::from(v);
        while let Some(c) = part.at(i).filter(char::is_ascii_digit) {
            value = value * 10 + i64::from(c as u8 - b'0');
            if value > i64::from(i32::MAX) {
                return Err(self.err_at(part, from, "Number too large"));
            }
            i += 1;
        }
        let pos = if i < part.len() { i } else { i + 1 };
        Ok((value as i32, pos))
    }

    fn store(&mut self, part: &Part, field: Field) -> Result<(), CronError> {
        let c = part.s[0];

        if c.is_ascii_uppercase() && !is_last_day_form(part) {
            return self.store_name(part, field);
        }

        if c == '?' {
            let i = 1;
            if i + 1 < part.len() {
                let next = part.s[i];
                return Err(self.err_at(part, i, &format!("Illegal character after '?': {next}")));
            }
            if field != Field::DayOfWeek && field != Field::DayOfMonth {
                return Err(self.err_at(
                    part,
                    0,
                    "'?' can only be specified for Day-of-Month or Day-of-Week.",
                ));
            }
            if field == Field::DayOfWeek && !self.last_day_of_month {
                match self.sets[Field::DayOfMonth.index()].last() {
                    Some(&NO_SPEC) => {
                        return Err(self.err_at(
                            part,
                            0,
                            "'?' can only be specified for Day-of-Month -OR- Day-of-Week.",
                        ))
                    }
                    Some(_) => {}
                    None => {
                        return Err(self.err_at(
                            part,
                            0,
                            "No value given for the day-of-month field",
                        ))
                    }
                }
            }
            return self.add_to_set(part, 0, NO_SPEC, -1, 0, field);
        }

        if c == '*' || c == '/' {
            let mut i = 0;
            if c == '*' && part.len() == 1 {
                return self.add_to_set(part, 0, ALL_SPEC, -1, 0, field);
            }
            if c == '/' && part.len() == 1 {
                return Err(self.err_at(part, 0, "'/' must be followed by an integer."));
            }
            if c == '*' {
                i += 1;
            }
            let mut incr = 1;
            if part.s[i] == '/' {
                i += 1;
                if i >= part.len() {
                    return Err(self.err_at(part, i, "Unexpected end of string."));
                }
                incr = parse_int(&part.s[i..]).ok_or_else(|| {
                    self.err_at(
                        part,
                        i,
                        &format!("Illegal increment: '{}'", part.text(i, part.len())),
                    )
                })?;
                self.check_increment_range(part, incr, field, i)?;
            }
            return self.add_to_set(part, 0, ALL_SPEC, -1, incr, field);
        }

        if c == 'L' {
            let mut i = 1;
            if field == Field::DayOfMonth {
                self.last_day_of_month = true;
            }
            if field == Field::DayOfWeek {
                self.add_to_set(part, 0, 7, 7, 0, field)?;
            }
            if field == Field::DayOfMonth && part.len() > i {
                if part.s[i] == '-' {
                    let (offset, pos) = self.value_at(0, part, i + 1)?;
                    if offset > 30 {
                        return Err(self.err_at(part, i + 1, "Offset from last day must be <= 30"));
                    }
                    self.last_day_offset = offset;
                    i = pos;
                }
                if part.at(i) == Some('W') {
                    self.nearest_weekday = true;
                }
            }
            return Ok(());
        }

        if c.is_ascii_digit() {
            let mut val = c as i32 - '0' as i32;
            let mut i = 1;
            if i >= part.len() {
                return self.add_to_set(part, 0, val, -1, -1, field);
            }
            if part.s[i].is_ascii_digit() {
                (val, i) = self.value_at(val, part, i)?;
            }
            return self.check_next(part, i, val, field);
        }

        Err(self.err_at(part, 0, &format!("Unexpected character: {c}")))
    }

    /// A part that starts with a letter: month or day names (with `-`, `#` or `L` after a day name).
    fn store_name(&mut self, part: &Part, field: Field) -> Result<(), CronError> {
        let mut i = 0;
        let sub = self.name_at(part, i)?;
        let sval;
        let mut eval = -1;
        match field {
            Field::Month => {
                sval = month_number(&sub) + 1;
                if sval <= 0 {
                    return Err(self.err_at(part, i, &format!("Invalid Month value: '{sub}'")));
                }
                if part.at(i + 3) == Some('-') {
                    i += 4;
                    let sub = self.name_at(part, i)?;
                    eval = month_number(&sub) + 1;
                    if eval <= 0 {
                        return Err(self.err_at(part, i, &format!("Invalid Month value: '{sub}'")));
                    }
                }
            }
            Field::DayOfWeek => {
                sval = day_of_week_number(&sub);
                if sval < 0 {
                    return Err(self.err_at(
                        part,
                        i,
                        &format!("Invalid Day-of-Week value: '{sub}'"),
                    ));
                }
                match part.at(i + 3) {
                    Some('-') => {
                        i += 4;
                        let sub = self.name_at(part, i)?;
                        eval = day_of_week_number(&sub);
                        if eval < 0 {
                            return Err(self.err_at(
                                part,
                                i,
                                &format!("Invalid Day-of-Week value: '{sub}'"),
                            ));
                        }
                    }
                    Some('#') => {
                        i += 4;
                        self.nth_day_of_week = self.nth_after_hash(part, i)?;
                    }
                    Some('L') => self.last_day_of_week = true,
                    _ => {}
                }
            }
            _ => {
                return Err(self.err_at(
                    part,
                    i,
                    &format!("Illegal characters for this position: '{sub}'"),
                ))
            }
        }
        let incr = if eval != -1 { 1 } else { 0 };
        self.add_to_set(part, 0, sval, eval, incr, field)
    }

    fn nth_after_hash(&self, part: &Part, i: usize) -> Result<i32, CronError> {
        match parse_int(&part.s[i.min(part.len())..]) {
            Some(n) if (1..=5).contains(&n) => Ok(n),
            _ => Err(self.err_at(
                part,
                i,
                "A numeric value between 1 and 5 must follow the '#' option",
            )),
        }
    }

    /// What may follow a number: `L`, `W`, `#n`, `-end[/step]`, `/step`; anything else is ignored.
    fn check_next(
        &mut self,
        part: &Part,
        pos: usize,
        val: i32,
        field: Field,
    ) -> Result<(), CronError> {
        let mut i = pos;
        let Some(c) = part.at(i) else {
            return self.add_to_set(part, 0, val, -1, -1, field);
        };
        let set = field.index();
        match c {
            'L' => {
                if field != Field::DayOfWeek {
                    return Err(self.err_at(
                        part,
                        i,
                        &format!("'L' option is not valid here. (pos={i})"),
                    ));
                }
                if !(1..=7).contains(&val) {
                    return Err(self.err_at(part, 0, "Day-of-Week values must be between 1 and 7"));
                }
                self.last_day_of_week = true;
                self.sets[set].insert(val);
                Ok(())
            }
            'W' => {
                if field != Field::DayOfMonth {
                    return Err(self.err_at(
                        part,
                        i,
                        &format!("'W' option is not valid here. (pos={i})"),
                    ));
                }
                if val > 31 {
                    return Err(self.err_at(
                        part,
                        i,
                        "The 'W' option does not make sense with values larger than 31 (max number of days in a month)",
                    ));
                }
                if val < 1 {
                    // Quartz accepts 0W and then never returns from the fire-time search.
                    return Err(self.err_at(
                        part,
                        0,
                        "Day of month values must be between 1 and 31",
                    ));
                }
                self.nearest_weekday = true;
                self.sets[set].insert(val);
                Ok(())
            }
            '#' => {
                if field != Field::DayOfWeek {
                    return Err(self.err_at(
                        part,
                        i,
                        &format!("'#' option is not valid here. (pos={i})"),
                    ));
                }
                self.nth_day_of_week = self.nth_after_hash(part, i + 1)?;
                self.sets[set].insert(val);
                Ok(())
            }
            '-' => {
                i += 1;
                let v = self.digit_at(part, i, "after '-'")?;
                let mut end = v;
                i += 1;
                if i >= part.len() {
                    return self.add_to_set(part, 0, val, end, 1, field);
                }
                if part.s[i].is_ascii_digit() {
                    (end, i) = self.value_at(v, part, i)?;
                }
                if part.at(i) == Some('/') {
                    i += 1;
                    let v2 = self.digit_at(part, i, "after '/'")?;
                    i += 1;
                    if i >= part.len() {
                        return self.add_to_set(part, 0, val, end, v2, field);
                    }
                    if part.s[i].is_ascii_digit() {
                        let (v3, _) = self.value_at(v2, part, i)?;
                        return self.add_to_set(part, 0, val, end, v3, field);
                    }
                    return self.add_to_set(part, 0, val, end, v2, field);
                }
                self.add_to_set(part, 0, val, end, 1, field)
            }
            '/' => {
                if i + 1 >= part.len() {
                    return Err(self.err_at(part, i, "'/' must be followed by an integer."));
                }
                i += 1;
                let v2 = self.digit_at(part, i, "after '/'")?;
                i += 1;
                if i >= part.len() {
                    self.check_increment_range(part, v2, field, i)?;
                    return self.add_to_set(part, 0, val, -1, v2, field);
                }
                let c = part.s[i];
                if c.is_ascii_digit() {
                    let (v3, _) = self.value_at(v2, part, i)?;
                    self.check_increment_range(part, v3, field, i)?;
                    return self.add_to_set(part, 0, val, -1, v3, field);
                }
                Err(self.err_at(part, i, &format!("Unexpected character '{c}' after '/'")))
            }
            _ => self.add_to_set(part, 0, val, -1, 0, field),
        }
    }

    fn check_increment_range(
        &self,
        part: &Part,
        incr: i32,
        field: Field,
        i: usize,
    ) -> Result<(), CronError> {
        let message = match field {
            Field::Second | Field::Minute if incr > 59 => format!("Increment > 60 : {incr}"),
            Field::Hour if incr > 23 => format!("Increment > 24 : {incr}"),
            Field::DayOfMonth if incr > 31 => format!("Increment > 31 : {incr}"),
            Field::DayOfWeek if incr > 7 => format!("Increment > 7 : {incr}"),
            Field::Month if incr > 12 => format!("Increment > 12 : {incr}"),
            _ => return Ok(()),
        };
        Err(self.err_at(part, i, &message))
    }

    /// Adds `val`, or `val..=end` stepping by `incr` (wrapping past the field's maximum when
    /// `end < val`), to the field's set. `incr` 0 or -1 means a single value.
    fn add_to_set(
        &mut self,
        part: &Part,
        at: usize,
        val: i32,
        end: i32,
        incr: i32,
        field: Field,
    ) -> Result<(), CronError> {
        // Markers for `*` and `?` are exempt; values never come negative from the syntax.
        let (lo, hi, message) = match field {
            Field::Second | Field::Minute => {
                (0, 59, "Minute and Second values must be between 0 and 59")
            }
            Field::Hour => (0, 23, "Hour values must be between 0 and 23"),
            Field::DayOfMonth => (1, 31, "Day of month values must be between 1 and 31"),
            Field::Month => (1, 12, "Month values must be between 1 and 12"),
            Field::DayOfWeek => (1, 7, "Day-of-Week values must be between 1 and 7"),
            Field::Year => (i32::MIN, i32::MAX, ""),
        };
        let marker = val == ALL_SPEC
            || (val == NO_SPEC && matches!(field, Field::DayOfMonth | Field::DayOfWeek));
        let out_of_range = (!marker && (!(lo..=hi).contains(&val) || end > hi)).then_some(message);
        if let Some(message) = out_of_range {
            return Err(self.err_at(part, at, message));
        }

        let set = &mut self.sets[field.index()];
        if (incr == 0 || incr == -1) && val != ALL_SPEC {
            set.insert(val);
            return Ok(());
        }

        let mut incr = incr;
        if val == ALL_SPEC && incr <= 0 {
            incr = 1;
            set.insert(ALL_SPEC);
        }
        let (min, max) = match field {
            Field::Second | Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::DayOfMonth => (1, 31),
            Field::Month => (1, 12),
            Field::DayOfWeek => (1, 7),
            Field::Year => (1970, self.max_year),
        };
        let start = if val == -1 || val == ALL_SPEC {
            min
        } else {
            val
        };
        let mut stop = if end == -1 { max } else { end };

        // A range whose end is below its start wraps around: 22-2 in hours is 22,23,0,1,2.
        let mut modulus = None;
        if stop < start {
            let m = match field {
                Field::Second | Field::Minute => 60,
                Field::Hour => 24,
                Field::Month => 12,
                Field::DayOfWeek => 7,
                Field::DayOfMonth => 31,
                Field::Year => {
                    return Err(self.err_at(part, at, "Start year must be less than stop year"))
                }
            };
            stop += m;
            modulus = Some(m);
        }
        if field == Field::Year {
            // Years past the search horizon never fire; don't fill a set with millions of them.
            stop = stop.min(self.max_year.saturating_add(1));
        }
        let set = &mut self.sets[field.index()];
        let mut i = start;
        while i <= stop {
            match modulus {
                None => set.insert(i),
                Some(m) => {
                    let mut v = i % m;
                    // One-based fields keep their maximum instead of 0.
                    if v == 0
                        && matches!(field, Field::Month | Field::DayOfWeek | Field::DayOfMonth)
                    {
                        v = m;
                    }
                    set.insert(v)
                }
            };
            match i.checked_add(incr) {
                Some(next) => i = next,
                None => break,
            }
        }
        Ok(())
    }
}
