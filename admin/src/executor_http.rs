//! The HTTP client of the executor protocol: JSON POSTs to executors over pooled keep-alive
//! connections.
//!
//! hyper's pooled client, not reqwest: reqwest parsed every request's URL three times (the
//! address given, again in its redirect layer even with redirects off, and once more for the
//! response), 5 % of the admin's instructions at 100 runs a second (callgrind), and executors
//! are plain HTTP (the admin never had a TLS client for them). Webhook alarms keep reqwest.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{header, Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

/// A POST that got no answer: `kind` says why in words the lost-run watch and the logs use
/// ("timed out", "connection refused", "request failed"), `detail` is the error itself.
#[derive(Debug)]
pub struct NoAnswer {
    pub kind: &'static str,
    pub detail: String,
}

/// Pooled connections to executors; cheap to clone (one pool).
#[derive(Clone)]
pub struct ExecutorHttp {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl ExecutorHttp {
    /// `connect_timeout` bounds opening a connection; each request has its own total timeout.
    pub fn new(connect_timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(connect_timeout));
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(64)
            .build(connector);
        ExecutorHttp { client }
    }

    /// POSTs a JSON `body` to `url` (with the access token header unless `token` is empty) and
    /// reads the whole answer, all within `timeout`.
    pub async fn post_json(
        &self,
        url: &str,
        token: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<(StatusCode, Bytes), NoAnswer> {
        let failed = |detail: String| NoAnswer {
            kind: "request failed",
            detail,
        };
        let uri: Uri = url
            .parse()
            .map_err(|e| failed(format!("invalid address: {e}")))?;
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json");
        if !token.is_empty() {
            req = req.header(shardline_executor::protocol::ACCESS_TOKEN_HEADER, token);
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| failed(e.to_string()))?;
        let exchange = async {
            let resp = self.client.request(req).await.map_err(|e| NoAnswer {
                kind: if e.is_connect() {
                    "connection refused"
                } else {
                    "request failed"
                },
                detail: error_chain(&e),
            })?;
            let status = resp.status();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| failed(format!("cannot read answer: {}", error_chain(&e))))?
                .to_bytes();
            Ok((status, bytes))
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(NoAnswer {
                    kind: "timed out",
                    detail: format!("no answer within {} ms", timeout.as_millis()),
                })
            })
    }
}

/// An error with its sources ("client error (Connect): tcp connect error: Connection refused").
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
