//! The REST API, version 1: JSON, bearer tokens, described by `/api/v1/openapi.json`.

use axum::Router;

use super::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
}
