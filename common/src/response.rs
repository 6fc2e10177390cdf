//! Response serialisation.
//!
//! Every server writes byte-identical responses: the status line, `Server`, `Date`,
//! `Content-Type`, `Content-Length`, and a `Connection` header only where the keep-alive
//! rules need one (HTTP/1.0 keep-alive, or a close). The `Date` value is formatted at most
//! once a second per thread and reused, as production servers do; formatting it per request
//! would put a calendar computation on the hot path that no real server pays.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

/// A response body: a static slice for the constant routes, owned bytes for computed ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Static(&'static [u8]),
    Owned(Vec<u8>),
}

impl Body {
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Body::Static(b) => b,
            Body::Owned(v) => v,
        }
    }
}

/// What the handler produces; the codec decides the framing headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Body,
    /// Headers beyond the standard ones (the framework stack adds some); empty, and so
    /// free, on the raw stack.
    pub headers: Vec<(&'static str, String)>,
}

impl Response {
    pub fn new(status: u16, content_type: &'static str, body: Body) -> Self {
        Response {
            status,
            content_type,
            body,
            headers: Vec::new(),
        }
    }

    /// A plain-text response, used for errors: the body says what was wrong so that a
    /// person reading `curl -v` output learns the rule that was broken.
    pub fn text(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Response::new(status, "text/plain", Body::Owned(body.into()))
    }
}

/// How the connection continues after this response; decides the `Connection` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// HTTP/1.1 persistent connection: no `Connection` header needed.
    KeepAlive11,
    /// HTTP/1.0 persistent connection: `Connection: keep-alive` must be echoed, or clients
    /// such as `ab -k` assume the server will close.
    KeepAlive10,
    /// The server closes after this response: `Connection: close`.
    Close,
}

/// The standard reason phrase for the statuses archzoo sends.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// Appends the whole response to `out`. `head_only` leaves the body out (HEAD) but keeps
/// the `Content-Length` the body would have had, as RFC 9110 §9.3.2 asks.
pub fn write(out: &mut Vec<u8>, resp: &Response, framing: Framing, head_only: bool) {
    let body = resp.body.as_bytes();
    if resp.status == 200 {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\nServer: archzoo\r\nDate: ");
    } else {
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(itoa::Buffer::new().format(resp.status).as_bytes());
        out.push(b' ');
        out.extend_from_slice(reason(resp.status).as_bytes());
        out.extend_from_slice(b"\r\nServer: archzoo\r\nDate: ");
    }
    with_date(|d| out.extend_from_slice(d));
    out.extend_from_slice(b"\r\nContent-Type: ");
    out.extend_from_slice(resp.content_type.as_bytes());
    out.extend_from_slice(b"\r\nContent-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
    for (name, value) in &resp.headers {
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
    }
    out.extend_from_slice(match framing {
        Framing::KeepAlive11 => &b"\r\n\r\n"[..],
        Framing::KeepAlive10 => b"\r\nConnection: keep-alive\r\n\r\n",
        Framing::Close => b"\r\nConnection: close\r\n\r\n",
    });
    if !head_only {
        out.extend_from_slice(body);
    }
}

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
const DATE_LEN: usize = 29;

struct DateCache {
    second: u64,
    text: [u8; DATE_LEN],
}

thread_local! {
    // One cache per thread: every worker (process, thread or shard) owns its copy, so
    // refreshing it needs no lock and shares no cache line between cores.
    static DATE: RefCell<DateCache> = const {
        RefCell::new(DateCache { second: u64::MAX, text: [0; DATE_LEN] })
    };
}

/// Calls `f` with the current `Date` header value, reformatting it only when the second
/// has changed since the last call on this thread. `SystemTime::now` is a vDSO call on
/// Linux, not a system call, so the check costs tens of nanoseconds.
pub fn with_date<R>(f: impl FnOnce(&[u8]) -> R) -> R {
    let now = SystemTime::now();
    let second = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    DATE.with(|cell| {
        let mut cache = cell.borrow_mut();
        if cache.second != second {
            let text = httpdate::fmt_http_date(now);
            if text.len() == DATE_LEN {
                cache.text.copy_from_slice(text.as_bytes());
            }
            cache.second = second;
        }
        f(&cache.text)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(resp: &Response, framing: Framing, head_only: bool) -> String {
        let mut out = Vec::new();
        write(&mut out, resp, framing, head_only);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn ok_response_has_all_required_headers() {
        let r = Response::new(200, "text/plain", Body::Static(b"hello, world!"));
        let s = render(&r, Framing::KeepAlive11, false);
        assert!(s.starts_with("HTTP/1.1 200 OK\r\nServer: archzoo\r\nDate: "));
        assert!(s.contains("\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\n"));
        assert!(s.ends_with("\r\n\r\nhello, world!"));
        assert!(!s.contains("Connection"));
    }

    #[test]
    fn http10_keep_alive_echoes_connection_header() {
        let r = Response::new(200, "text/plain", Body::Static(b"x"));
        assert!(render(&r, Framing::KeepAlive10, false).contains("\r\nConnection: keep-alive\r\n"));
        assert!(render(&r, Framing::Close, false).contains("\r\nConnection: close\r\n"));
    }

    #[test]
    fn head_keeps_content_length_but_drops_body() {
        let r = Response::new(200, "text/plain", Body::Static(b"hello, world!"));
        let s = render(&r, Framing::KeepAlive11, true);
        assert!(s.contains("Content-Length: 13\r\n"));
        assert!(s.ends_with("\r\n\r\n"));
    }

    #[test]
    fn error_status_line_carries_reason() {
        let r = Response::text(431, "too big\n");
        assert!(render(&r, Framing::Close, false)
            .starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
    }

    #[test]
    fn date_is_imf_fixdate_and_parses() {
        let d = with_date(|d| String::from_utf8(d.to_vec()).unwrap());
        assert_eq!(d.len(), DATE_LEN);
        assert!(d.ends_with(" GMT"));
        let parsed = httpdate::parse_http_date(&d).unwrap();
        let skew = SystemTime::now().duration_since(parsed).unwrap_or_default();
        assert!(skew.as_secs() <= 2);
    }
}
