//! `qdeck serve`: a Prometheus exporter over every profile, fed by the background poller under
//! the call budget. It opens its profiles read-only and holds no mutating path.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use tokio::sync::{Notify, Semaphore};

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
    // A deadline past the clock's range would panic inside the HTTP server.
    let day = Duration::from_secs(86_400);
    if a.max_connections == 0
        || a.max_connections > Semaphore::MAX_PERMITS
        || a.header_timeout.is_zero()
        || a.header_timeout > day
    {
        return Err(CliError::usage(format!(
            "--max-connections must be from 1 to {} and --header-timeout from above zero to 1d",
            Semaphore::MAX_PERMITS
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
        let mut clock = tokio::time::interval(qdeck_engine::alerts::monitor::HEALTH_TICK);
        loop {
            let now = now_ms();
            tokio::select! {
                a = rx.recv() => match a {
                    Some(a) => {
                        monitor.apply(a, now);
                    }
                    None => return,
                },
                // Health rules fire on time, not on the next answer.
                _ = clock.tick() => {
                    if monitor.evaluate_health(now).is_empty() {
                        continue;
                    }
                }
            }
            let text = exposition::render(&monitor, now).map(Bytes::from).ok();
            *lock(&fed) = Page {
                open_metrics: text,
                text_format: None,
            };
        }
    });
    let limits = Limits {
        max_connections: a.max_connections,
        header_timeout: a.header_timeout,
    };
    let accepting = accept_loop(listener, limits.max_connections, move |stream| {
        let m = page.clone();
        async move {
            serve_connection(
                hyper_util::rt::TokioIo::new(stream),
                m,
                limits.header_timeout,
            )
            .await;
        }
    });
    tokio::select! {
        () = accepting => {}
        _ = tokio::signal::ctrl_c() => {}
        () = until(a.duration) => {}
    }
    Ok(OK)
}

#[derive(Clone, Copy)]
struct Limits {
    max_connections: usize,
    header_timeout: Duration,
}

/// One HTTP/1 connection. A client that has not sent a whole request head within
/// `header_timeout` (from the connection's start, or from the end of its last answer) is cut
/// off: slow or silent clients would otherwise hold a connection slot for ever.
async fn serve_connection<I>(io: I, page: Arc<Mutex<Page>>, header_timeout: Duration)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req| {
        let m = page.clone();
        async move { Ok::<_, Infallible>(answer(&req, &m)) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(io, svc)
        .await;
}

/// What the accept loop needs of a listener, so a test can stand in one that fails.
trait Accept {
    type Conn: Send + 'static;
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Conn>> + Send;
}

impl Accept for tokio::net::TcpListener {
    type Conn = tokio::net::TcpStream;
    async fn accept(&mut self) -> io::Result<Self::Conn> {
        tokio::net::TcpListener::accept(self).await.map(|(s, _)| s)
    }
}

/// The first and longest waits after a failed accept.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Accepts connections and hands each to `handle` on its own task, at most `max` at once:
/// past the cap, new connections wait in the kernel's backlog until one closes.
///
/// A failed accept that is about the listener or the process (EMFILE, ENFILE, ENOBUFS, ...)
/// fails again at once if retried at once, so the loop waits: until a connection of ours
/// closes (which frees a descriptor) or a backoff doubling up to a second runs out.
/// One that is about the connection being accepted (reset or aborted by the peer) is retried
/// at once.
async fn accept_loop<A, F, Fut>(mut listener: A, max: usize, mut handle: F)
where
    A: Accept,
    F: FnMut(A::Conn) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(max.min(Semaphore::MAX_PERMITS)));
    let closed = Arc::new(Notify::new());
    let mut backoff = ACCEPT_BACKOFF_MIN;
    let mut failing = false;
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok(conn) => {
                if failing {
                    tracing::info!("qdeck serve: accepting connections again");
                }
                failing = false;
                backoff = ACCEPT_BACKOFF_MIN;
                let served = handle(conn);
                let closed = closed.clone();
                tokio::spawn(async move {
                    served.await;
                    drop(slot);
                    closed.notify_waiters();
                });
            }
            Err(e) if is_connection_error(&e) => {}
            Err(e) => {
                drop(slot);
                if !failing {
                    // Once per run of failures, not once per retry.
                    tracing::warn!("qdeck serve: cannot accept a connection ({e}); waiting");
                    failing = true;
                }
                let freed = closed.notified();
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = freed => {}
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
            }
        }
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping
mod tests {
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::sync::oneshot;

    use super::*;

    const EMFILE: i32 = 24;

    /// A listener whose accepts come from a script, then fail with EMFILE for ever; it counts
    /// the calls. Each accept yields first, as a real one may, so a loop that retried at once
    /// would still let the test run (and count its retries).
    struct Scripted {
        script: VecDeque<io::Result<u32>>,
        calls: Arc<AtomicUsize>,
    }

    impl Accept for Scripted {
        type Conn = u32;
        async fn accept(&mut self) -> io::Result<u32> {
            tokio::task::yield_now().await;
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.script
                .pop_front()
                .unwrap_or_else(|| Err(io::Error::from_raw_os_error(EMFILE)))
        }
    }

    async fn settle() {
        for _ in 0..200 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn emfile_waits_instead_of_retrying_at_once() {
        let calls = Arc::new(AtomicUsize::new(0));
        let l = Scripted {
            script: VecDeque::new(),
            calls: calls.clone(),
        };
        tokio::spawn(accept_loop(l, 8, |_| async {}));
        // The clock stands still while tasks can run: a loop that retried at once would have
        // called accept about once per yield by now.
        settle().await;
        assert_eq!(calls.load(Ordering::SeqCst), 1, "retried without waiting");
        // A minute on the paused clock: the waits double up to a second, so tens of tries,
        // not the millions a spinning loop makes.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let n = calls.load(Ordering::SeqCst);
        assert!((2..=70).contains(&n), "{n} accepts in a minute of EMFILE");
    }

    #[tokio::test(start_paused = true)]
    async fn emfile_retries_when_a_connection_closes() {
        let calls = Arc::new(AtomicUsize::new(0));
        let l = Scripted {
            script: VecDeque::from([Ok(0)]),
            calls: calls.clone(),
        };
        let (close, closing) = oneshot::channel::<()>();
        let mut closing = Some(closing);
        tokio::spawn(accept_loop(l, 8, move |_| {
            let closing = closing.take();
            async move {
                if let Some(c) = closing {
                    let _ = c.await;
                }
            }
        }));
        settle().await;
        // One connection served, one EMFILE, now waiting.
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        close.send(()).unwrap();
        settle().await;
        // The closed connection freed a descriptor: tried again without the clock moving.
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reset_connection_is_not_a_reason_to_wait() {
        let calls = Arc::new(AtomicUsize::new(0));
        let reset = || Err(io::Error::from(io::ErrorKind::ConnectionReset));
        let l = Scripted {
            script: VecDeque::from([reset(), reset(), Ok(0)]),
            calls: calls.clone(),
        };
        let served = Arc::new(AtomicUsize::new(0));
        let s = served.clone();
        tokio::spawn(accept_loop(l, 8, move |_| {
            s.fetch_add(1, Ordering::SeqCst);
            async {}
        }));
        settle().await;
        assert_eq!(served.load(Ordering::SeqCst), 1);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_cap_connections_wait_for_a_slot() {
        let calls = Arc::new(AtomicUsize::new(0));
        let l = Scripted {
            script: (0..10).map(Ok).collect(),
            calls: calls.clone(),
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<oneshot::Sender<()>>();
        tokio::spawn(accept_loop(l, 3, move |_| {
            let (done, wait) = oneshot::channel::<()>();
            tx.send(done).unwrap();
            async move {
                let _ = wait.await;
            }
        }));
        settle().await;
        assert_eq!(calls.load(Ordering::SeqCst), 3, "accepted past the cap");
        let first = rx.recv().await.unwrap();
        drop(first);
        settle().await;
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    /// Drives `serve_connection` over an in-memory pipe; the client end is returned.
    fn connection(
        header_timeout: Duration,
    ) -> (tokio::io::DuplexStream, tokio::task::JoinHandle<()>) {
        let (client, server) = tokio::io::duplex(4096);
        let page = Arc::new(Mutex::new(Page::default()));
        let task = tokio::spawn(serve_connection(
            hyper_util::rt::TokioIo::new(server),
            page,
            header_timeout,
        ));
        (client, task)
    }

    /// Reads until the server closes its end, or a (paused-clock) hour passes.
    async fn closed_by_server(client: &mut tokio::io::DuplexStream) -> bool {
        let mut buf = Vec::new();
        tokio::time::timeout(Duration::from_secs(3600), client.read_to_end(&mut buf))
            .await
            .is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_client_is_dropped_at_the_header_timeout() {
        let (mut client, task) = connection(Duration::from_secs(10));
        assert!(
            closed_by_server(&mut client).await,
            "still open after an hour"
        );
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_loris_is_dropped_at_the_header_timeout() {
        let (mut client, task) = connection(Duration::from_secs(10));
        // A byte a second keeps the connection busy but never finishes the head.
        let head =
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let mut sent = 0;
        let dropped = loop {
            if client.write_all(&head[sent..=sent]).await.is_err() {
                break true;
            }
            sent += 1;
            if sent == head.len() {
                break false;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            if task.is_finished() {
                break true;
            }
        };
        assert!(dropped, "the whole trickle was read without a cut");
        assert!(closed_by_server(&mut client).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_prompt_client_is_answered_and_may_keep_the_connection() {
        let (mut client, task) = connection(Duration::from_secs(10));
        client
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 512];
        let n = client.read(&mut buf).await.unwrap();
        let got = String::from_utf8_lossy(&buf[..n]);
        assert!(got.starts_with("HTTP/1.1 200"), "{got}");
        assert!(!task.is_finished());
        // Kept alive, but idle past the timeout: the slot is given back.
        assert!(closed_by_server(&mut client).await);
    }
}
