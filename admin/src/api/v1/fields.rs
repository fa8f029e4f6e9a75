//! Checks of request fields shared by the v1 handlers: each refuses with a 400 naming the field,
//! before a value the database column could not hold reaches the store.

use crate::api::ApiError;
use crate::refusal::{Reason, Refusal};

/// Bytes a TEXT column holds on MySQL.
const MAX_TEXT_BYTES: usize = 65_535;

/// A name or title: 1 to `max_chars` characters, after trimming.
pub fn check_name(field: &str, v: &str, max_chars: usize) -> Result<(), ApiError> {
    if v.is_empty() || v.chars().count() > max_chars {
        return Err(ApiError::field(
            field,
            Refusal::new(Reason::Chars).with("max", max_chars),
        ));
    }
    Ok(())
}

/// Refuses what the database column could not store (MySQL would fail the write).
pub fn check_len(field: &str, v: &str, max_chars: usize) -> Result<(), ApiError> {
    if v.chars().count() > max_chars {
        return Err(ApiError::field(
            field,
            Refusal::new(Reason::AtMostChars).with("max", max_chars),
        ));
    }
    Ok(())
}

/// Refuses text a MySQL `TEXT` column could not store (its limit is in bytes).
pub fn check_text(field: &str, v: &str) -> Result<(), ApiError> {
    if v.len() > MAX_TEXT_BYTES {
        return Err(ApiError::field(
            field,
            Refusal::new(Reason::AtMostBytes)
                .with("max", MAX_TEXT_BYTES)
                .with("got", v.len()),
        ));
    }
    Ok(())
}

/// `v` if it lies in `lo..=hi`.
pub fn in_range(field: &str, v: i64, lo: i64, hi: i64) -> Result<i64, ApiError> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(ApiError::field(
            field,
            Refusal::new(Reason::Between)
                .with("lo", lo)
                .with("hi", hi)
                .with("got", v),
        ))
    }
}

/// One address in an `addresses` field (a MANUAL group's list, a manual trigger's choice): one an
/// executor could be reached at, and one a run can record.
pub fn check_executor_address(a: &str) -> Result<(), ApiError> {
    if !shardline_executor::protocol::is_http_address(a) {
        return Err(ApiError::field(
            "addresses",
            Refusal::new(Reason::NotUrl).with("value", format_args!("{a:?}")),
        ));
    }
    check_len(
        "addresses",
        a,
        shardline_executor::protocol::MAX_ADDRESS_CHARS,
    )
}
