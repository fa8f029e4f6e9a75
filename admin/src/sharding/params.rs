//! Item parameters: `0=shanghai,1=beijing`, one optional value per item, parsed strictly.
//!
//! ElasticJob parses these lazily at every run and accepts oddities (stray trailing commas,
//! duplicate keys where the last wins, keys out of range, any Unicode digit). Shardline parses them
//! when the job is saved, and refuses everything ElasticJob refuses plus those oddities, naming
//! the piece and the reason. The one thing accepted beyond ElasticJob is an empty value (`0=`).

use std::collections::BTreeMap;
use std::fmt;

use crate::refusal::{Reason, Refusal};

/// Parsed item parameters: at most one value per item of `0..n`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ItemParams {
    values: BTreeMap<u32, String>,
}

impl ItemParams {
    /// Parses `key=value` pieces separated by `,`, for a job of `n` items.
    ///
    /// Pieces, keys and values are trimmed of whitespace and control characters. Keys are decimal
    /// integers in `0..n`, each at most once; values may be empty but cannot hold `,` or `=`. The
    /// empty string means no parameters.
    pub fn parse(text: &str, n: u32) -> Result<ItemParams, ItemParamError> {
        let mut values = BTreeMap::new();
        if text.is_empty() {
            return Ok(ItemParams { values });
        }
        let mut seen: BTreeMap<u32, String> = BTreeMap::new();
        for (index, raw) in text.split(',').enumerate() {
            let piece = trim(raw);
            let fail = |reason: String| ItemParamError {
                piece: piece.to_string(),
                reason,
            };
            if piece.is_empty() {
                return Err(fail(format!(
                    "piece {} is empty (a stray or doubled comma)",
                    index + 1
                )));
            }
            let Some((key, value)) = piece.split_once('=') else {
                return Err(fail("missing '=' between item and value".to_string()));
            };
            if value.contains('=') {
                return Err(fail("more than one '='".to_string()));
            }
            let key = trim(key);
            if key.is_empty() {
                return Err(fail("key is empty".to_string()));
            }
            let item = parse_key(key, n).map_err(fail)?;
            if let Some(first) = seen.get(&item) {
                return Err(fail(format!(
                    "duplicate key {item} (already given by \"{first}\")"
                )));
            }
            seen.insert(item, piece.to_string());
            values.insert(item, trim(value).to_string());
        }
        Ok(ItemParams { values })
    }

    /// The value for `item`, if one was given.
    pub fn get(&self, item: u32) -> Option<&str> {
        self.values.get(&item).map(String::as_str)
    }

    /// `(item, value)` pairs, ascending by item.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &str)> {
        self.values.iter().map(|(&k, v)| (k, v.as_str()))
    }

    /// True when no item has a value.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// Formats back to the canonical `0=a,1=b` text, which parses to the same parameters.
impl fmt::Display for ItemParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (item, value)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{item}={value}")?;
        }
        Ok(())
    }
}

/// A piece of an item-parameter string that was refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemParamError {
    /// The offending piece, trimmed.
    pub piece: String,
    /// Why it was refused.
    pub reason: String,
}

impl From<ItemParamError> for Refusal {
    fn from(e: ItemParamError) -> Refusal {
        // The reason itself stays in English: it quotes the piece's syntax.
        Refusal::new(Reason::ItemParam)
            .with("piece", format_args!("{:?}", e.piece))
            .with("detail", e.reason)
    }
}

impl fmt::Display for ItemParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Refusal::from(self.clone()).fmt(f)
    }
}

impl std::error::Error for ItemParamError {}

/// Java's `String.trim` strips every char up to U+0020; Unicode blanks go too, since nobody means
/// a non-breaking space at the edge of a key or value.
fn trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ' || c.is_whitespace() || c.is_control())
}

/// An ASCII decimal item number in `0..n` (leading zeros and a `+` allowed).
fn parse_key(key: &str, n: u32) -> Result<u32, String> {
    let (negative, digits) = match key.as_bytes().first() {
        Some(b'-') => (true, &key[1..]),
        Some(b'+') => (false, &key[1..]),
        _ => (false, key),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("key {key:?} is not an integer"));
    }
    if negative {
        return Err(format!("key {key} is negative: items are 0..{n}"));
    }
    match digits.parse::<u32>() {
        Ok(item) if item < n => Ok(item),
        _ => Err(format!("key {key} is out of range: items are 0..{n}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str, n: u32) -> Vec<(u32, String)> {
        ItemParams::parse(text, n)
            .unwrap_or_else(|e| panic!("{text:?} refused: {e}"))
            .iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect()
    }

    fn err(text: &str, n: u32) -> String {
        match ItemParams::parse(text, n) {
            Ok(p) => panic!("{text:?} accepted as {p:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn pairs(list: &[(u32, &str)]) -> Vec<(u32, String)> {
        list.iter().map(|&(k, v)| (k, v.to_string())).collect()
    }

    #[test]
    fn accepts_what_elasticjob_accepts_within_range() {
        assert!(ItemParams::parse("", 3).unwrap().is_empty());
        assert_eq!(ok("0=A,1=B,2=C", 3), pairs(&[(0, "A"), (1, "B"), (2, "C")]));
        assert_eq!(ok(" 0 = a , 1=b ", 2), pairs(&[(0, "a"), (1, "b")]));
        assert_eq!(ok("+1=x,007=z", 8), pairs(&[(1, "x"), (7, "z")]));
        assert_eq!(ok("0=\u{1}a", 1), pairs(&[(0, "a")]));
        assert_eq!(ok("0=\u{A0}a\u{A0}", 1), pairs(&[(0, "a")]));
    }

    #[test]
    fn empty_values_are_allowed() {
        assert_eq!(ok("0=,1=b", 2), pairs(&[(0, ""), (1, "b")]));
        assert_eq!(ItemParams::parse("0=", 1).unwrap().get(0), Some(""));
    }

    #[test]
    fn refuses_what_elasticjob_refuses() {
        assert_eq!(
            err(",0=a", 2),
            "item parameter \"\": piece 1 is empty (a stray or doubled comma)"
        );
        assert_eq!(
            err("0=a,,1=b", 2),
            "item parameter \"\": piece 2 is empty (a stray or doubled comma)"
        );
        assert_eq!(
            err(" ", 2),
            "item parameter \"\": piece 1 is empty (a stray or doubled comma)"
        );
        assert_eq!(err("0==a", 1), "item parameter \"0==a\": more than one '='");
        assert_eq!(
            err("0=a=b", 1),
            "item parameter \"0=a=b\": more than one '='"
        );
        assert_eq!(err("=", 1), "item parameter \"=\": key is empty");
        assert_eq!(err("=a", 1), "item parameter \"=a\": key is empty");
        assert_eq!(
            err("xxx-xxx", 1),
            "item parameter \"xxx-xxx\": missing '=' between item and value"
        );
        assert_eq!(
            err("xxx=xxx", 1),
            "item parameter \"xxx=xxx\": key \"xxx\" is not an integer"
        );
        assert_eq!(
            err("x=1", 1),
            "item parameter \"x=1\": key \"x\" is not an integer"
        );
        assert_eq!(
            err("2147483648=x", 3),
            "item parameter \"2147483648=x\": key 2147483648 is out of range: items are 0..3"
        );
    }

    #[test]
    fn refuses_what_elasticjob_lets_through() {
        // Trailing commas, which ElasticJob drops silently.
        assert!(err("0=a,", 1).contains("piece 2 is empty"));
        assert!(err(",", 1).contains("piece 1 is empty"));
        // Duplicates, where ElasticJob keeps the last.
        assert_eq!(
            err("0=a,0=b", 2),
            "item parameter \"0=b\": duplicate key 0 (already given by \"0=a\")"
        );
        assert_eq!(
            err("7=a,007=b", 8),
            "item parameter \"007=b\": duplicate key 7 (already given by \"7=a\")"
        );
        // Keys outside 0..n, which ElasticJob keeps and never uses.
        assert_eq!(
            err("-1=y", 3),
            "item parameter \"-1=y\": key -1 is negative: items are 0..3"
        );
        assert_eq!(
            err("3=x", 3),
            "item parameter \"3=x\": key 3 is out of range: items are 0..3"
        );
        assert!(err("0=a", 0).contains("out of range"));
        // Non-ASCII digits, which Java's parseInt accepts.
        assert!(err("\u{661}=x", 3).contains("is not an integer"));
        assert!(err("\u{FF11}=x", 3).contains("is not an integer"));
        assert!(err("1 2=x", 3).contains("is not an integer"));
        assert!(err("+=x", 3).contains("is not an integer"));
    }

    #[test]
    fn display_round_trips() {
        let p = ItemParams::parse(" 2=c, 0=a ,1=", 3).unwrap();
        assert_eq!(p.to_string(), "0=a,1=,2=c");
        assert_eq!(ItemParams::parse(&p.to_string(), 3).unwrap(), p);
    }
}
