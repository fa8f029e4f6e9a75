//! The REST API's error type and its JSON shape:
//! `{"error": {"status": 400, "message": "...", "field": "schedule_conf", "code": "cron",
//! "params": {...}}}`; `code` and `params` (see `crate::refusal`) come with the refusals the
//! console can translate.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::refusal::{Reason, Refusal};
use crate::store::StoreError;
use crate::trigger::TriggerError;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub field: Option<String>,
    pub refusal: Option<Refusal>,
}

/// What an error says: a refusal with its code, or plain words (details from elsewhere, such as
/// a library's, that have no code).
pub enum Said {
    Words(String),
    Refused(Refusal),
}

impl From<String> for Said {
    fn from(s: String) -> Said {
        Said::Words(s)
    }
}

impl From<&str> for Said {
    fn from(s: &str) -> Said {
        Said::Words(s.to_string())
    }
}

impl From<Refusal> for Said {
    fn from(r: Refusal) -> Said {
        Said::Refused(r)
    }
}

impl From<Reason> for Said {
    fn from(r: Reason) -> Said {
        Said::Refused(r.into())
    }
}

impl ApiError {
    pub fn new(status: StatusCode, said: impl Into<Said>) -> Self {
        let (message, refusal) = match said.into() {
            Said::Words(m) => (m, None),
            Said::Refused(r) => (r.to_string(), Some(r)),
        };
        ApiError {
            status,
            message,
            field: None,
            refusal,
        }
    }

    /// A 400 about one field of the request.
    pub fn field(field: &str, said: impl Into<Said>) -> Self {
        let mut e = Self::new(StatusCode::BAD_REQUEST, said);
        e.message = format!("{field}: {}", e.message);
        e.field = Some(field.to_string());
        e
    }

    pub fn bad_request(said: impl Into<Said>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, said)
    }

    pub fn unauthorized(said: impl Into<Said>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, said)
    }

    pub fn forbidden(said: impl Into<Said>) -> Self {
        Self::new(StatusCode::FORBIDDEN, said)
    }

    /// `what` is one of the `…NotFound` reasons.
    pub fn not_found(what: Reason) -> Self {
        Self::new(StatusCode::NOT_FOUND, what)
    }

    pub fn conflict(said: impl Into<Said>) -> Self {
        Self::new(StatusCode::CONFLICT, said)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut err = json!({ "status": self.status.as_u16(), "message": self.message });
        if let Some(f) = self.field {
            err["field"] = json!(f);
        }
        if let Some(r) = self.refusal {
            let coded = r.to_json();
            err["code"] = coded["code"].clone();
            err["params"] = coded["params"].clone();
        }
        let mut resp = (self.status, axum::Json(json!({ "error": err }))).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        resp
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => ApiError::not_found(what),
            StoreError::Conflict(m) => ApiError::conflict(m),
            e @ (StoreError::Db(_) | StoreError::NotStored(_)) => {
                // Details stay in the server log; the client learns only that it was not its fault.
                tracing::error!(error = %e, "database error");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error (database)",
                )
            }
        }
    }
}

impl From<TriggerError> for ApiError {
    fn from(e: TriggerError) -> Self {
        match e {
            TriggerError::Invalid(m) => ApiError::bad_request(m),
            TriggerError::Store(s) => s.into(),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        let status = match r {
            JsonRejection::MissingJsonContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            JsonRejection::BytesRejection(_) => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, format!("invalid JSON body: {}", r.body_text()))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::bad_request(format!("invalid query string: {}", r.body_text()))
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::bad_request(format!("invalid path: {}", r.body_text()))
    }
}

/// `Json<T>` whose rejections are [`ApiError`]s (JSON, with a clear message).
#[derive(Debug, axum::extract::FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct Json<T>(pub T);

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// `Query<T>` with [`ApiError`] rejections.
#[derive(Debug, axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct Query<T>(pub T);

/// `Path<T>` with [`ApiError`] rejections.
#[derive(Debug, axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);
