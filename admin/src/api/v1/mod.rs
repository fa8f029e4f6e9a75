//! The REST API, version 1: JSON, bearer tokens, described by `/api/v1/openapi.json`.

pub mod dashboard;
mod fields;
pub mod fires;
pub mod groups;
pub mod jobs;
pub mod misc;
mod paging;
pub mod users;

use axum::Router;

use super::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(groups::routes())
        .merge(jobs::routes())
        .merge(fires::routes())
        .merge(users::routes())
        .merge(misc::routes())
        .merge(dashboard::routes())
}
