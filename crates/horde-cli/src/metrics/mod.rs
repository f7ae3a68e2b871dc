//! `--metrics ADDR`: an HTTP endpoint beside a running `horde send`, `horde recv` or
//! `horde tunnel client|server`. `/metrics` is the OpenMetrics text for Prometheus,
//! `/status.json` the same figures as JSON, and `/` a live page that charts each link
//! and stream from `/status.json` (docs/monitoring.md).

mod openmetrics;
mod streams;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

pub use streams::StreamFeed;

use crate::status::Registry;

const PAGE: &str = include_str!("page.html");
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the endpoint reports on: the process's connections, its streams, its host.
pub struct Exporter {
    pub role: &'static str,
    pub public_key: String,
    pub registry: Registry,
    pub streams: StreamFeed,
    pub host: Option<horde_net::HostStatsHandle>,
}

/// Bind `addr` for the endpoint (before the run starts, so that a taken port is an
/// error at once). The address bound (a port of 0 picks one) is printed to stderr, so
/// that scripts and tests can find it.
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)
        .with_context(|| format!("--metrics {addr}: cannot listen there"))?;
    listener.set_nonblocking(true)?;
    eprintln!(
        "metrics: http://{}/ (OpenMetrics at /metrics)",
        listener.local_addr()?
    );
    Ok(listener)
}

/// Serve the endpoint on `listener` on the current runtime until the task is aborted.
pub fn spawn(
    listener: std::net::TcpListener,
    exporter: Exporter,
) -> Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::from_std(listener)?;
    let exporter = Arc::new(exporter);
    Ok(tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let exporter = Arc::clone(&exporter);
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let exporter = Arc::clone(&exporter);
                    async move { Ok::<_, Infallible>(exporter.respond(req).await) }
                });
                // A client that goes away mid-request ends only its own connection.
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }))
}

impl Exporter {
    async fn respond(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        if req.method() != Method::GET {
            return plain(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n");
        }
        match req.uri().path() {
            "/metrics" => {
                let (snap, host) = self.gather().await;
                let text = openmetrics::render(&snap, &self.streams.figures(), host.as_ref());
                with_type(StatusCode::OK, text, OPENMETRICS)
            }
            "/status.json" => {
                let (snap, host) = self.gather().await;
                let body = serde_json::json!({
                    "status": snap,
                    "streams": self.streams.figures().into_iter().map(|(_, f)| f).collect::<Vec<_>>(),
                    "host": host.map(|h| serde_json::json!({
                        "datagrams_in": h.datagrams_in,
                        "datagrams_out": h.datagrams_out,
                        "reconnects": h.reconnects,
                        "dropped": h.dropped.total(),
                    })),
                });
                with_type(StatusCode::OK, body.to_string(), "application/json")
            }
            "/" | "/index.html" => {
                with_type(StatusCode::OK, PAGE.to_string(), "text/html; charset=utf-8")
            }
            _ => plain(
                StatusCode::NOT_FOUND,
                "not found: try /, /metrics or /status.json\n",
            ),
        }
    }

    async fn gather(&self) -> (crate::status::Snapshot, Option<horde_net::HostStats>) {
        let snap = self.registry.snapshot(self.role, &self.public_key).await;
        let host = match &self.host {
            Some(h) => h.get().await.ok(),
            None => None,
        };
        (snap, host)
    }
}

fn with_type(status: StatusCode, body: String, kind: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    r
}

fn plain(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    with_type(status, body.to_string(), "text/plain; charset=utf-8")
}
