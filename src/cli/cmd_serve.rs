//! `qdeck serve`: a Prometheus exporter over every profile, fed by the background poller under
//! the call budget. It opens its profiles read-only and holds no mutating path.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};

use super::args::{Global, ServeArgs};
use super::cmd_watch::profiles;
use super::exit::{CliError, CliResult, FAILED, OK, USAGE};
use super::exposition;
use qdeck_engine::alerts::{self, Monitor, Tracker};
use qdeck_model::config::LoadOptions;
use qdeck_model::domain::now_ms;

pub(super) async fn serve(global: &Global, opts: &LoadOptions, a: ServeArgs) -> CliResult {
    let addr: SocketAddr = a
        .listen
        .parse()
        .map_err(|_| CliError::usage(format!("--listen {:?} is not HOST:PORT", a.listen)))?;
    if !addr.ip().is_loopback() && !a.listen_any {
        return Err(CliError::usage(format!(
            "refusing to listen on {addr}: the metrics name every queue; pass --listen-any to serve other hosts"
        )));
    }
    // Read-only whatever the profiles say: the exporter never changes a broker.
    let any = LoadOptions {
        profile: None,
        read_only: true,
        ..opts.clone()
    };
    let base = qdeck_engine::config_check::load(&any)?;
    let rules = alerts::rules(&base.config).map_err(|e| CliError::new(USAGE, e))?;
    let names = profiles(&base.config, global)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::new(FAILED, format!("cannot listen on {addr}: {e}")))?;
    let bound = listener.local_addr().unwrap_or(addr);
    eprintln!(
        "qdeck serve: http://{bound}/metrics over {} profile(s) with {} alert rule(s)",
        names.len(),
        rules.len()
    );
    let mut monitor = Monitor::new(rules, Tracker::default());
    // The page is rendered when figures arrive, not when Prometheus asks: a scrape copies
    // the last one out, whatever the number of queues.
    let page = Arc::new(Mutex::new(Page::default()));
    let (_polling, mut rx) = super::cmd_watch::poll(&base, &names);
    let fed = page.clone();
    tokio::spawn(async move {
        while let Some(a) = rx.recv().await {
            let now = now_ms();
            monitor.apply(a, now);
            let text = exposition::render(&monitor, now).map(Bytes::from).ok();
            *lock(&fed) = Page {
                open_metrics: text,
                text_format: None,
            };
        }
    });
    let accepting = async {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let m = page.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let m = m.clone();
                    async move { Ok::<_, Infallible>(answer(&req, &m)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    };
    tokio::select! {
        () = accepting => {}
        _ = tokio::signal::ctrl_c() => {}
        () = until(a.duration) => {}
    }
    Ok(OK)
}

async fn until(d: Option<std::time::Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// The last rendered exposition, in OpenMetrics and (made on the first request for it) in
/// the classic text format.
#[derive(Default)]
struct Page {
    open_metrics: Option<Bytes>,
    text_format: Option<Bytes>,
}

impl Page {
    /// The page to send (a `Bytes` clone shares it, it does not copy it).
    fn get(&mut self, open_metrics: bool) -> Option<Bytes> {
        let om = self.open_metrics.clone()?;
        if open_metrics {
            return Some(om);
        }
        Some(
            self.text_format
                .get_or_insert_with(|| {
                    Bytes::from(exposition::as_text_format(&String::from_utf8_lossy(&om)))
                })
                .clone(),
        )
    }
}

/// A poisoned lock still holds the last page, which is what a scrape wants.
fn lock(m: &Mutex<Page>) -> std::sync::MutexGuard<'_, Page> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn answer(req: &Request<Incoming>, m: &Mutex<Page>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, ctype: &'static str, body: Bytes| {
        let mut r = Response::new(Full::new(body));
        *r.status_mut() = status;
        if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    let text = "text/plain; charset=utf-8";
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => {
            let open_metrics = req
                .headers()
                .get(hyper::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.contains("application/openmetrics-text"));
            let ctype = if open_metrics {
                "application/openmetrics-text; version=1.0.0; charset=utf-8"
            } else {
                "text/plain; version=0.0.4; charset=utf-8"
            };
            let body = lock(m).get(open_metrics);
            match body {
                Some(body) => reply(StatusCode::OK, ctype, body),
                // Before the first poll there is nothing to say; Prometheus tries again.
                None => reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    text,
                    Bytes::from_static(b"no poll has answered yet\n"),
                ),
            }
        }
        (&Method::GET, "/healthz") => reply(StatusCode::OK, text, Bytes::from_static(b"ok\n")),
        (&Method::GET, "/") => reply(
            StatusCode::OK,
            text,
            Bytes::from_static(b"qdeck exporter: /metrics, /healthz\n"),
        ),
        (_, "/metrics" | "/healthz" | "/") => reply(
            StatusCode::METHOD_NOT_ALLOWED,
            text,
            Bytes::from_static(b"only GET\n"),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            text,
            Bytes::from_static(b"not found: /metrics, /healthz\n"),
        ),
    }
}
