//! The executor's HTTP client for the admin API (`{admin}/api/registry`, `registryRemove`,
//! `callback`, and the Shardline extension calls).
//!
//! Several admin addresses may be configured (an admin cluster sharing one database): a call goes to
//! each in order and the first that answers envelope code 200 wins, as XXL-JOB's executors do.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderValue, CONTENT_TYPE};
use serde::Serialize;

use crate::protocol::{with_sources, Envelope, ACCESS_TOKEN_HEADER, APPNAME_HEADER};

/// Longest part of an unexpected reply body quoted in an error message.
const BODY_EXCERPT_CHARS: usize = 200;

/// A cheap, cloneable handle that posts JSON to the configured admins.
#[derive(Clone)]
pub struct AdminClient {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    client: reqwest::Client,
    /// Base addresses with any trailing slash removed, so that `{base}/api/{uri}` is well formed
    /// with or without a context path (`http://host:8080/xxl-job-admin/`).
    admins: Vec<String>,
    access_token: String,
    appname: Option<String>,
    timeout: Duration,
}

impl AdminClient {
    /// Builds a client over a shared `reqwest::Client` (one keep-alive pool for the process).
    ///
    /// Blank addresses are ignored. An empty `access_token` sends no token header, which is what a
    /// stock admin without a token expects. `timeout` bounds each attempt against one admin.
    pub fn new(
        client: reqwest::Client,
        admins: Vec<String>,
        access_token: String,
        timeout: Duration,
    ) -> Self {
        let admins = admins
            .iter()
            .map(|a| a.trim().trim_end_matches('/').to_string())
            .filter(|a| !a.is_empty())
            .collect();
        AdminClient {
            inner: Arc::new(Inner {
                client,
                admins,
                access_token,
                appname: None,
                timeout,
            }),
        }
    }

    /// Also sends the `XXL-JOB-APPNAME` header, which an XXL-JOB 3.5 admin requires next to the
    /// token (it looks the group's token up by appname). Older admins ignore the header.
    pub fn with_appname(self, appname: impl Into<String>) -> Self {
        let mut inner = Inner::clone(&self.inner);
        inner.appname = Some(appname.into());
        AdminClient {
            inner: Arc::new(inner),
        }
    }

    /// The admin base addresses, normalised (no trailing slash), in the order they are tried.
    pub fn admins(&self) -> &[String] {
        &self.inner.admins
    }

    /// POST `{admin}/api/{uri}` to each admin in order until one answers code 200.
    ///
    /// The error names every admin tried and why it failed (transport error, HTTP status, a body
    /// that is not an envelope, or an envelope code other than 200).
    pub async fn call<B: Serialize + ?Sized>(
        &self,
        uri: &str,
        body: &B,
    ) -> Result<Envelope<serde_json::Value>, String> {
        let inner = &self.inner;
        if inner.admins.is_empty() {
            return Err("no admin address configured".to_string());
        }
        // Serialize once: the same bytes go to every admin tried.
        let body = serde_json::to_vec(body)
            .map_err(|e| format!("cannot encode the {uri} request: {e}"))?;
        let uri = uri.trim_start_matches('/');
        let mut errors = String::new();
        for admin in &inner.admins {
            match self.call_one(admin, uri, &body).await {
                Ok(envelope) => return Ok(envelope),
                Err(e) => {
                    tracing::debug!(admin = %admin, uri, error = %e, "admin call failed");
                    if !errors.is_empty() {
                        errors.push_str("; ");
                    }
                    let _ = write!(errors, "admin {admin}: {e}");
                }
            }
        }
        Err(errors)
    }

    async fn call_one(
        &self,
        admin: &str,
        uri: &str,
        body: &[u8],
    ) -> Result<Envelope<serde_json::Value>, String> {
        let inner = &self.inner;
        let url = format!("{admin}/api/{uri}");
        let mut request = inner
            .client
            .post(&url)
            .timeout(inner.timeout)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(body.to_vec());
        if !inner.access_token.is_empty() {
            request = request.header(ACCESS_TOKEN_HEADER, inner.access_token.as_str());
        }
        if let Some(appname) = &inner.appname {
            request = request.header(APPNAME_HEADER, appname.as_str());
        }
        let response = request.send().await.map_err(|e| transport_error(&e))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| format!("reading the reply failed: {}", transport_error(&e)))?;
        if status != reqwest::StatusCode::OK {
            return Err(format!("http status {status}: {}", excerpt(&text)));
        }
        let envelope: Envelope<serde_json::Value> = serde_json::from_str(&text)
            .map_err(|e| format!("reply is not an envelope ({e}): {}", excerpt(&text)))?;
        if !envelope.is_success() {
            return Err(format!(
                "code {}, msg {}",
                envelope.code,
                envelope.msg.as_deref().unwrap_or("<none>")
            ));
        }
        Ok(envelope)
    }
}

/// reqwest's `Display` hides the cause ("error sending request"); include the source chain so the
/// log says "connection refused" or "timed out".
fn transport_error(e: &reqwest::Error) -> String {
    let head = if e.is_timeout() {
        "timed out".to_string()
    } else {
        e.to_string()
    };
    with_sources(head, e)
}

fn excerpt(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return "<empty body>".to_string();
    }
    let mut out: String = text.chars().take(BODY_EXCERPT_CHARS).collect();
    if text.chars().count() > BODY_EXCERPT_CHARS {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_normalised() {
        let c = AdminClient::new(
            reqwest::Client::new(),
            vec![
                "http://a:8080/xxl-job-admin/".into(),
                "  ".into(),
                " http://b:8080 ".into(),
            ],
            String::new(),
            Duration::from_secs(3),
        );
        assert_eq!(c.admins(), ["http://a:8080/xxl-job-admin", "http://b:8080"]);
    }

    #[tokio::test]
    async fn no_admin_is_an_error() {
        let c = AdminClient::new(
            reqwest::Client::new(),
            vec![],
            String::new(),
            Duration::from_secs(1),
        );
        let err = c
            .call("registry", &serde_json::json!({}))
            .await
            .unwrap_err();
        assert_eq!(err, "no admin address configured");
    }

    #[test]
    fn excerpt_is_bounded() {
        assert_eq!(excerpt("  "), "<empty body>");
        let long = "x".repeat(500);
        assert_eq!(excerpt(&long).chars().count(), BODY_EXCERPT_CHARS + 1);
    }
}
