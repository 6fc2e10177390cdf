//! `--codec hyper`: the same handler served through hyper 1.x's http1 implementation.
//!
//! hyper parses, frames and writes; this adapter adds the rules archzoo's suite holds every
//! server to and hyper leaves to the application (Host checks, the method set, the body
//! limit), then calls the shared handler. Where RFC 9112 lets a server choose and hyper
//! chose differently from the shared codec, hyper's choice stands and the conformance row
//! says so (`Spec::hyper`): a request with both Content-Length and Transfer-Encoding is read
//! by its chunked framing and the connection closed afterwards; identical repeated
//! Content-Length fields are merged; hyper's own error responses (parse errors) carry only
//! `date` and `content-length`, and a version other than 1.0/1.1 is a 400.
//!
//! Timeouts: hyper's own `header_read_timeout` (a close without 408, idle connections
//! included); `--header-timeout` between the parts of a body, read here (a 408, as the
//! shared codec answers), since hyper has no body timeout; and [`WriteDeadline`] around the
//! socket, since hyper has no write timeout and a client that stops reading must not hold
//! its connection forever.

use std::convert::Infallible;

use crate::sole::Sole;
use common::codec::{ConnConfig, Method, Request, Version, MAX_BODY, MAX_HEAD, MAX_HEADERS};
use common::handler::Later;
use common::response::Response as Reply;
use common::stats;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Incoming};
use hyper::header::{HeaderValue, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HOST, SERVER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::watch;

type HyperResponse = hyper::Response<Full<Bytes>>;

/// Serves one connection with hyper until it closes, or until a stop, which lets an
/// in-flight request finish (hyper's graceful shutdown) and closes an idle connection.
pub async fn serve(stream: Sole, mut stop: watch::Receiver<bool>, config: &'static ConnConfig) {
    stats::connection();
    let mut builder = http1::Builder::new();
    // hyper's own head timeout: it closes (without a 408) a connection whose next head
    // does not arrive in time, idle keep-alive connections included.
    builder
        .max_buf_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .keep_alive(true)
        // A pipelined batch answered in one write, as the shared codec does: hyper holds
        // each flush while unread input is buffered. Stock hyper 1.12 held it for good when
        // the connection then closed with input left (an error answer, or `Connection:
        // close` followed by more requests): vendor/hyper flushes on shutdown (PATCHES.md).
        .pipeline_flush(true)
        .timer(TokioTimer::new())
        .header_read_timeout(config.timeouts.header);
    let stream = WriteDeadline::new(stream, config.timeouts.idle);
    // hyper has no requests-per-connection limit: count them here, and the response that
    // reaches --keepalive-requests carries `Connection: close`, after which hyper closes.
    // A `Cell` the service owns, not a shared counter: hyper calls its service from the
    // connection's own task, one request at a time — no allocation a connection for it.
    let served = std::cell::Cell::new(0u32);
    let service = service_fn(move |req| {
        let n = served.get() + 1;
        served.set(n);
        let last = config.keepalive_requests != 0 && n >= config.keepalive_requests;
        async move {
            let mut resp = handle(req, config).await?;
            if last {
                resp.headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
            }
            Ok::<_, Infallible>(resp)
        }
    });
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    let stopped = tokio::select! {
        _ = conn.as_mut() => false,
        _ = stop.changed() => true,
    };
    if stopped {
        conn.as_mut().graceful_shutdown();
        let _ = conn.await;
    }
}

async fn handle(
    req: hyper::Request<Incoming>,
    config: &'static ConnConfig,
) -> Result<HyperResponse, Infallible> {
    stats::request();
    let method = match *req.method() {
        hyper::Method::GET => Method::Get,
        hyper::Method::HEAD => Method::Head,
        hyper::Method::POST => Method::Post,
        _ => return Ok(reject(501, "only GET, HEAD and POST are implemented")),
    };
    let version = match req.version() {
        hyper::Version::HTTP_10 => Version::Http10,
        hyper::Version::HTTP_11 => Version::Http11,
        _ => return Ok(reject(505, "only HTTP/1.0 and HTTP/1.1")),
    };
    let hosts = req.headers().get_all(HOST).iter().count();
    if version == Version::Http11 && hosts == 0 {
        return Ok(reject(400, "HTTP/1.1 request without Host"));
    }
    if hosts > 1 {
        return Ok(reject(400, "more than one Host field"));
    }
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    if declared > MAX_BODY {
        return Ok(reject(413, "request body over 1 MiB"));
    }
    // Split, so that the head stays borrowed while the body is read: the target and (for
    // the framework stack) the fields go into the handler's request without a copy of
    // their own first — one allocation a request fewer than copying them out before.
    let (head, mut body) = req.into_parts();
    // Read and discard the body, bounded, before answering — as the shared codec does.
    // hyper reads a body only as it is asked for it and has no timeout of its own there: a
    // client that sent its head and then trickles its body, or stops (a slow POST), would
    // hold the connection for good. As in the shared codec, each part of the body must come
    // within `--header-timeout` of the one before, or the answer is a 408 and the close. A
    // request without a body (every GET) arms no timer.
    let mut total = 0u64;
    while !body.is_end_stream() {
        let frame = match tokio::time::timeout(config.timeouts.header, body.frame()).await {
            Err(_elapsed) => return Ok(reject(408, "the request was not received in time")),
            Ok(None) => break,
            Ok(Some(frame)) => frame,
        };
        match frame {
            Ok(frame) => {
                total += frame.data_ref().map_or(0, |d| d.len() as u64);
                if total > MAX_BODY {
                    return Ok(reject(413, "request body over 1 MiB"));
                }
            }
            Err(_) => return Ok(reject(400, "invalid body framing")),
        }
    }
    let target = head.uri.path_and_query().map_or("/", |p| p.as_str());
    let Some(mut request) = Request::new(method, version, target) else {
        return Ok(reject(400, "invalid request target"));
    };
    // The framework stack builds its own header map from these; the raw stack skips it.
    if config.capture_headers {
        for (name, value) in &head.headers {
            request.push_header(name.as_str(), &String::from_utf8_lossy(value.as_bytes()));
        }
    }
    let reply = (config.handler)(&request, config.app);
    let response = match reply.later {
        None => reply.response,
        Some(Later::Wait(wait)) => {
            tokio::time::sleep(wait).await;
            reply.response
        }
        Some(Later::Query(job)) => {
            // Boxed: hyper keeps room for this future in every connection, idle or not.
            let result = Box::pin(crate::database::run(config.app.pg.as_ref(), &job)).await;
            job.answer(reply.response, result)
        }
    };
    Ok(to_hyper(response))
}

fn to_hyper(reply: Reply) -> HyperResponse {
    let body = match reply.body {
        common::response::Body::Static(b) => Bytes::from_static(b),
        common::response::Body::Owned(v) => Bytes::from(v),
    };
    let mut resp = hyper::Response::new(Full::new(body));
    *resp.status_mut() = hyper::StatusCode::from_u16(reply.status).unwrap_or(hyper::StatusCode::OK);
    let headers = resp.headers_mut();
    headers.insert(SERVER, HeaderValue::from_static("archzoo"));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
    for (name, value) in reply.headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    resp
}

/// An error response after which hyper closes the connection.
fn reject(status: u16, why: &str) -> HyperResponse {
    let text = format!("{status} {}: {why}\n", common::response::reason(status));
    let mut resp = to_hyper(Reply::text(status, text));
    resp.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// A stream whose writes fail once they have been blocked for `limit`: hyper has no write
/// timeout, and a client that stops reading must not hold its connection forever. Its
/// shutdown is the close that follows (see `poll_shutdown`).
struct WriteDeadline {
    inner: Sole,
    limit: std::time::Duration,
    stalled: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl WriteDeadline {
    fn new(inner: Sole, limit: std::time::Duration) -> Self {
        WriteDeadline {
            inner,
            limit,
            stalled: None,
        }
    }

    /// Turns a pending write into a timeout error once the deadline has passed.
    fn check<T>(
        &mut self,
        cx: &mut std::task::Context<'_>,
        poll: std::task::Poll<std::io::Result<T>>,
    ) -> std::task::Poll<std::io::Result<T>> {
        use std::future::Future;
        match poll {
            std::task::Poll::Ready(r) => {
                self.stalled = None;
                std::task::Poll::Ready(r)
            }
            std::task::Poll::Pending => {
                let limit = self.limit;
                let timer = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
                if timer.as_mut().poll(cx).is_ready() {
                    let err =
                        std::io::Error::new(std::io::ErrorKind::TimedOut, "peer stopped reading");
                    return std::task::Poll::Ready(Err(err));
                }
                std::task::Poll::Pending
            }
        }
    }
}

impl tokio::io::AsyncRead for WriteDeadline {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut *self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for WriteDeadline {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let poll = std::pin::Pin::new(&mut *self.inner).poll_write(cx, buf);
        self.check(cx, poll)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let poll = std::pin::Pin::new(&mut *self.inner).poll_write_vectored(cx, bufs);
        self.check(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut *self.inner).poll_flush(cx)
    }

    /// Done without a system call: hyper shuts its transport down as the last thing it
    /// does with a connection, and the stream is dropped — closed — right after
    /// ([`serve`] returns). A `shutdown(SHUT_WR)` there sends the FIN the `close` sends one
    /// call later, and costs a system call on every connection that closes (0.99 a
    /// connection without keep-alive, the one call over issue #38's 7). Go's net/http,
    /// which this row stands for, closes without it (its `CloseWrite` only when a request
    /// body was left unread). hyper has flushed its buffer before it asks (vendor/hyper's
    /// patch makes that flush unconditional), so nothing written is held back.
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
