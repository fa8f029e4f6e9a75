//! Checks of request fields shared by the v1 handlers: each refuses with a 400 naming the field,
//! before a value the database column could not hold reaches the store.

use crate::api::ApiError;

/// Bytes a TEXT column holds on MySQL.
const MAX_TEXT_BYTES: usize = 65_535;

/// Refuses what the database column could not store (MySQL would fail the write).
pub fn check_len(field: &str, v: &str, max_chars: usize) -> Result<(), ApiError> {
    if v.chars().count() > max_chars {
        return Err(ApiError::field(
            field,
            format!("must be at most {max_chars} characters"),
        ));
    }
    Ok(())
}

/// Refuses text a MySQL `TEXT` column could not store (its limit is in bytes).
pub fn check_text(field: &str, v: &str) -> Result<(), ApiError> {
    if v.len() > MAX_TEXT_BYTES {
        return Err(ApiError::field(
            field,
            format!("must be at most {MAX_TEXT_BYTES} bytes, got {}", v.len()),
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
            format!("must be between {lo} and {hi}, got {v}"),
        ))
    }
}

/// One address in an `addresses` field (a MANUAL group's list, a manual trigger's choice): one an
/// executor could be reached at, and one a run can record.
pub fn check_executor_address(a: &str) -> Result<(), ApiError> {
    if !shardline_executor::protocol::is_http_address(a) {
        return Err(ApiError::field(
            "addresses",
            format!("{a:?} is not an http(s) URL"),
        ));
    }
    check_len(
        "addresses",
        a,
        shardline_executor::protocol::MAX_ADDRESS_CHARS,
    )
}
