//! Paging of the v1 lists (`/jobs`, `/fires`, `/runs`, `/audit`): what a request may ask for and
//! the page it gets.

use serde::Serialize;

use crate::api::ApiError;
use crate::refusal::{Reason, Refusal};

/// Rows per page when a list request names none.
const DEFAULT_PAGE: i64 = 50;

/// The `(offset, limit)` of a list request. A negative offset or a page size below one is refused
/// (such a request means a client's paging is wrong, and an answer would hide it); no `limit`
/// means [`DEFAULT_PAGE`], and one above the store's most is brought down to it, the page
/// reporting the size it gives, so a client pages on.
pub fn requested_page(offset: i64, limit: Option<i64>) -> Result<(i64, i64), ApiError> {
    if offset < 0 {
        return Err(ApiError::field(
            "offset",
            Refusal::new(Reason::AtLeast).with("min", 0),
        ));
    }
    let limit = limit.unwrap_or(DEFAULT_PAGE);
    if limit < 1 {
        return Err(ApiError::field(
            "limit",
            Refusal::new(Reason::AtLeast).with("min", 1),
        ));
    }
    Ok((offset, crate::store::page_limit(limit)))
}

/// One page of a list, with the whole list's `total` and the `offset` and `limit` it was given.
#[derive(Debug, Serialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: i64,
    pub offset: i64,
    pub limit: i64,
}
