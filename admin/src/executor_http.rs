//! The HTTP client of the executor protocol: JSON POSTs to executors over pooled keep-alive
//! connections.
//!
//! hyper's pooled client, not reqwest: reqwest parsed every request's URL three times (the
//! address given, again in its redirect layer even with redirects off, and once more for the
//! response), 5 % of the admin's instructions at 100 runs a second (callgrind). Executors are
//! mostly plain HTTP, as XXL-JOB's are; one registered at an `https://` address (behind a
//! TLS-terminating proxy) is reached over TLS (rustls, the system's trust store, `SSL_CERT_FILE`
//! honoured), by a second pool built at the first such address.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{header, Method, Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use shardline_executor::protocol::{with_sources, ACCESS_TOKEN_HEADER};

use crate::note::NoteKind;

/// A POST that got no answer: `kind` says why (`ConnectionRefused`, `TimedOut` or
/// `RequestFailed`, the lost-run watch tells a stopped process by the first), `detail` is the
/// error itself.
#[derive(Debug)]
pub struct NoAnswer {
    pub kind: NoteKind,
    pub detail: String,
}

type TlsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Pooled connections to executors; cheap to clone (one pool).
#[derive(Clone)]
pub struct ExecutorHttp {
    client: Client<HttpConnector, Full<Bytes>>,
    /// For `https://` executors, built at the first one: loading the system's trust roots costs
    /// memory an admin whose executors are all plain HTTP need not hold. Holds the error when
    /// the trust store cannot be read, so each dispatch there says why.
    tls: Arc<OnceLock<Result<TlsClient, String>>>,
    connect_timeout: Duration,
}

impl ExecutorHttp {
    /// `connect_timeout` bounds opening a connection; each request has its own total timeout.
    pub fn new(connect_timeout: Duration) -> Self {
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(64)
            .build(connector(connect_timeout));
        ExecutorHttp {
            client,
            tls: Arc::new(OnceLock::new()),
            connect_timeout,
        }
    }

    /// The pool for `https://` executors, built at its first use.
    fn tls(&self) -> Result<&TlsClient, NoAnswer> {
        let built = self.tls.get_or_init(|| {
            let mut plain = connector(self.connect_timeout);
            // The TLS layer asks for `https://` addresses only; the TCP connector must let them by.
            plain.enforce_http(false);
            let tls = hyper_rustls::HttpsConnectorBuilder::new()
                .with_native_roots()
                .map_err(|e| format!("cannot read the system's trust store: {e}"))?
                .https_only()
                .enable_http1()
                .wrap_connector(plain);
            Ok(Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(64)
                .build(tls))
        });
        built.as_ref().map_err(|e| NoAnswer {
            kind: NoteKind::RequestFailed,
            detail: e.clone(),
        })
    }

    /// POSTs a JSON `body` to `url` (with the access token header unless `token` is empty) and
    /// reads the whole answer, all within `timeout`.
    pub async fn post_json(
        &self,
        url: &str,
        token: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<(StatusCode, Bytes), NoAnswer> {
        let failed = |detail: String| NoAnswer {
            kind: NoteKind::RequestFailed,
            detail,
        };
        let uri: Uri = url
            .parse()
            .map_err(|e| failed(format!("invalid address: {e}")))?;
        let https = uri.scheme() == Some(&hyper::http::uri::Scheme::HTTPS);
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json");
        if !token.is_empty() {
            req = req.header(ACCESS_TOKEN_HEADER, token);
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| failed(e.to_string()))?;
        let exchange = async {
            let sent = if https {
                self.tls()?.request(req).await
            } else {
                self.client.request(req).await
            };
            let resp = sent.map_err(|e| NoAnswer {
                kind: if e.is_connect() {
                    NoteKind::ConnectionRefused
                } else {
                    NoteKind::RequestFailed
                },
                detail: with_sources(e.to_string(), &e),
            })?;
            let status = resp.status();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| failed(with_sources(format!("cannot read answer: {e}"), &e)))?
                .to_bytes();
            Ok((status, bytes))
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(NoAnswer {
                    kind: NoteKind::TimedOut,
                    detail: format!("no answer within {} ms", timeout.as_millis()),
                })
            })
    }
}

/// The TCP side of both pools.
fn connector(connect_timeout: Duration) -> HttpConnector {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(connect_timeout));
    connector
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderMap;

    const SHORT: Duration = Duration::from_millis(300);

    #[tokio::test]
    async fn an_answer_comes_back_whole_with_its_status() {
        let app = axum::Router::new().route(
            "/run",
            axum::routing::post(|headers: HeaderMap, body: String| async move {
                let token = headers
                    .get(ACCESS_TOKEN_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                let json = headers
                    .get(header::CONTENT_TYPE)
                    .is_some_and(|v| v == "application/json");
                (
                    axum::http::StatusCode::IM_A_TEAPOT,
                    format!("{token}|{json}|{body}"),
                )
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/run", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let http = ExecutorHttp::new(SHORT);
        let (status, bytes) = http
            .post_json(&url, "secret", Bytes::from_static(br#"{"a":1}"#), SHORT)
            .await
            .unwrap();
        assert_eq!(status, StatusCode::IM_A_TEAPOT);
        assert_eq!(&bytes[..], br#"secret|true|{"a":1}"#);
        let (_, bytes) = http
            .post_json(&url, "", Bytes::from_static(b"{}"), SHORT)
            .await
            .unwrap();
        assert_eq!(&bytes[..], b"|true|{}", "no token header without a token");
    }

    #[tokio::test]
    async fn no_answer_is_named_as_the_lost_run_watch_reads_it() {
        let http = ExecutorHttp::new(SHORT);
        // Nobody listens on a port just released.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/beat", closed.local_addr().unwrap());
        drop(closed);
        let e = http
            .post_json(&url, "", Bytes::new(), SHORT)
            .await
            .unwrap_err();
        assert_eq!(e.kind, NoteKind::ConnectionRefused, "{e:?}");
        assert!(e.detail.contains("Connection refused"), "{e:?}");

        // A listener that accepts and never answers.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/beat", silent.local_addr().unwrap());
        let hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = silent.accept().await {
                held.push(conn);
            }
        });
        let e = http
            .post_json(&url, "", Bytes::new(), SHORT)
            .await
            .unwrap_err();
        assert_eq!(e.kind, NoteKind::TimedOut, "{e:?}");
        hold.abort();

        let e = http
            .post_json("http://bad host/run", "", Bytes::new(), SHORT)
            .await
            .unwrap_err();
        assert_eq!(e.kind, NoteKind::RequestFailed, "{e:?}");
    }
}
