//! The HTTP/1.x codec: one [`Conn`] per client connection, shared by every server.
//!
//! `Conn` is *sans-I/O*: it owns an input buffer the runtime reads into and an output buffer
//! the runtime writes from, and a state machine in between. The runtime's loop is always the
//! same three steps, whatever the architecture:
//!
//! ```text
//!   read into conn.read_buf() ──► conn.filled(n) ──► conn.process()
//!        ▲                                               │
//!        │        Progress::Read   (flush output first)  │
//!        ├───────────────────────────────────────────────┤
//!        │        Progress::Wait(d) (flush, wait d,      │
//!        │                           call process again) │
//!        └─ close ◄─ Progress::Close (flush, then close) ┘
//! ```
//!
//! `process` handles *every* complete request already buffered before it asks for more
//! bytes, appending each response to one output buffer, so a pipelined batch of 16 requests
//! arriving in one read is answered in order with one write.
//!
//! # The rules it keeps
//! - Keep-alive: HTTP/1.1 stays open unless `Connection: close`; HTTP/1.0 closes unless the
//!   request says `Connection: keep-alive`, and then the response echoes it (with
//!   `Content-Length`, which every response carries). Tokens are case-insensitive.
//! - Bodies (Content-Length or chunked, with extensions and trailers) are read and
//!   discarded before the request is handled, so a malformed body is answered with an error
//!   instead of a 200 followed by garbage; at most [`MAX_BODY`] bytes.
//! - Bad input gets an error response with `Connection: close`, and the connection closes:
//!   400 malformed request line, header, framing (Content-Length with Transfer-Encoding,
//!   repeated or non-numeric Content-Length, a coding other than `chunked`,
//!   Transfer-Encoding on HTTP/1.0, bad chunk framing), missing or repeated Host on
//!   HTTP/1.1; 413 body over [`MAX_BODY`]; 414 request line over [`MAX_HEAD`]; 431 head over
//!   [`MAX_HEAD`] or over [`MAX_HEADERS`] fields; 501 method other than GET/HEAD/POST;
//!   505 HTTP version other than 1.0/1.1. Nothing here panics on any input.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::response::{self, Framing, Response};
use crate::routes::{self, Handler};
use crate::stats;

/// Largest request head (request line + fields) accepted: 8 KiB, as nginx and most servers.
pub const MAX_HEAD: usize = 8 * 1024;
/// Most header fields accepted in one request.
pub const MAX_HEADERS: usize = 64;
/// Largest request body accepted (read and discarded): 1 MiB.
pub const MAX_BODY: u64 = 1024 * 1024;
/// Longest chunk-size line (size and extensions) accepted.
const MAX_CHUNK_LINE: usize = 1024;
/// Most trailer bytes accepted after a chunked body.
const MAX_TRAILERS: usize = 8 * 1024;

/// The input buffer starts small — idle keep-alive connections are the common case and
/// their memory is one of the things archzoo measures — and grows only for large heads.
const INITIAL_BUF: usize = 4 * 1024;
/// A read is always offered at least this much room, so one read can take a whole
/// pipelined batch of small requests.
const MIN_READ: usize = 2 * 1024;
/// The input buffer never grows past this: an accepted head is at most 8 KiB and bodies are
/// discarded as they arrive, so anything bigger would be a bug, not a need.
const MAX_BUF: usize = 32 * 1024;

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// How long a connection may take to send what it owes (`--header-timeout`,
/// `--idle-timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From the first byte of a request head to its end, and between reads of a body: a
    /// slowloris client gets a 408 and the close after this long.
    pub header: Duration,
    /// Between requests on a keep-alive connection: closed after this long.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            header: Duration::from_secs(10),
            idle: Duration::from_secs(60),
        }
    }
}

static TIMEOUTS: OnceLock<Timeouts> = OnceLock::new();

/// Sets the timeouts for this process (once, before workers start).
pub fn set_timeouts(timeouts: Timeouts) {
    let _ = TIMEOUTS.set(timeouts);
}

/// The timeouts in force.
pub fn timeouts() -> Timeouts {
    TIMEOUTS.get().copied().unwrap_or_default()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

/// The parsed request the handler sees. Its target string is reused from request to
/// request, so steady-state parsing allocates nothing.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    pub version: Version,
    target: String,
    /// Byte range of the path inside `target` (absolute-form targets carry a scheme and
    /// authority in front of it).
    path: (usize, usize),
    /// Header fields as sent, captured only for stacks that want them (the framework
    /// layer builds its owned header map from these); empty on the raw stack.
    headers: Vec<(String, String)>,
}

impl Request {
    fn empty() -> Self {
        Request {
            method: Method::Get,
            version: Version::Http11,
            target: String::new(),
            path: (0, 0),
            headers: Vec::new(),
        }
    }

    /// Builds a request outside a connection (tests, and handlers that forward requests).
    pub fn new(method: Method, version: Version, target: &str) -> Option<Self> {
        let mut r = Request::empty();
        r.method = method;
        r.version = version;
        r.set_target(target).then_some(r)
    }

    /// Stores the target and locates its path; false if it is neither origin-form
    /// (`/path?query`) nor absolute-form (`http://host/path?query`).
    fn set_target(&mut self, target: &str) -> bool {
        self.target.clear();
        self.target.push_str(target);
        let path_start = if target.starts_with('/') {
            0
        } else {
            let lower = target.get(..8).unwrap_or(target).to_ascii_lowercase();
            let after_scheme = if lower.starts_with("http://") {
                7
            } else if lower.starts_with("https://") {
                8
            } else {
                return false;
            };
            match target[after_scheme..].find('/') {
                Some(i) => after_scheme + i,
                None => target.len(), // "http://host" means path "/"
            }
        };
        let path_end = target[path_start..]
            .find('?')
            .map_or(target.len(), |i| path_start + i);
        self.path = (path_start, path_end);
        true
    }

    /// The request target exactly as sent.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The path, without query; `/` for an absolute-form target with no path.
    pub fn path(&self) -> &str {
        let p = &self.target[self.path.0..self.path.1];
        if p.is_empty() {
            "/"
        } else {
            p
        }
    }

    /// The query string after `?`, if any.
    pub fn query(&self) -> Option<&str> {
        let rest = &self.target[self.path.1..];
        rest.strip_prefix('?')
    }

    /// Captured header fields (see [`Conn::capture_headers`]).
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// Adds a header field (for runtimes that parse with another library, such as hyper).
    pub fn push_header(&mut self, name: &str, value: &str) {
        self.headers.push((name.to_string(), value.to_string()));
    }
}

/// What the runtime must do next for this connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Write out [`Conn::output`] if non-empty, then read more bytes and call `process`.
    Read,
    /// Write out what is buffered, wait this long the runtime's native way, then call
    /// `process` again: the handler asked for the wait.
    Wait(Duration),
    /// Write out what is buffered, then close the connection.
    Close,
    /// A connection built with [`Conn::forwarding`] has a complete request for someone
    /// else to handle: send [`Conn::request`] on, write out what is buffered, and call
    /// [`Conn::deliver`] with the response when it comes back.
    Forward,
}

/// Why a request is refused: the status and a short explanation for the body.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reject(u16, &'static str);

enum State {
    /// Expecting (more of) a request head.
    Head,
    /// Discarding this many more Content-Length body bytes.
    Length(u64),
    /// Discarding a chunked body.
    Chunked(Chunked),
    /// The head and body are complete: run the handler.
    Dispatch,
    /// The handler asked to wait; this response goes out when `process` is called again.
    Waiting(Response),
    /// The request was forwarded; [`Conn::deliver`] brings its response.
    Forwarded,
    /// A close was decided; nothing more is parsed.
    Closed,
}

/// One client connection's protocol state and buffers.
pub struct Conn {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    out: Vec<u8>,
    out_pos: usize,
    state: State,
    req: Request,
    keep_alive: bool,
    rejected: bool,
    /// When bytes last arrived (or the connection opened, or a delayed response went out).
    last_read: Instant,
    /// When the first byte of the request head being received arrived.
    head_since: Option<Instant>,
    /// None: requests are forwarded, not handled here (see [`Conn::forwarding`]).
    handler: Option<Handler>,
    capture_headers: bool,
}

impl Default for Conn {
    fn default() -> Self {
        Conn::new()
    }
}

impl Conn {
    /// A new connection served by the configured stack (`--stack`). Counts as a
    /// connection in `--stats`.
    pub fn new() -> Self {
        let mut conn = Conn::with_handler(routes::handler());
        conn.capture_headers = routes::stack() == routes::Stack::Framework;
        conn
    }

    /// A new connection served by `handler`.
    pub fn with_handler(handler: Handler) -> Self {
        stats::connection();
        Conn {
            buf: vec![0; INITIAL_BUF],
            start: 0,
            end: 0,
            out: Vec::new(),
            out_pos: 0,
            state: State::Head,
            req: Request::empty(),
            keep_alive: true,
            rejected: false,
            last_read: Instant::now(),
            head_since: None,
            handler: Some(handler),
            capture_headers: false,
        }
    }

    /// A connection whose requests are handled elsewhere (another process): `process`
    /// returns [`Progress::Forward`] for each complete request instead of calling a handler.
    pub fn forwarding() -> Self {
        let mut conn = Conn::new();
        conn.handler = None;
        conn
    }

    /// The request being handled or forwarded.
    pub fn request(&self) -> &Request {
        &self.req
    }

    /// The response to the forwarded request; call `process` next to send it.
    pub fn deliver(&mut self, response: Response) {
        if matches!(self.state, State::Forwarded) {
            self.state = State::Waiting(response);
        }
    }

    /// True while a forwarded request waits for its response.
    pub fn is_forwarded(&self) -> bool {
        matches!(self.state, State::Forwarded)
    }

    /// Free space to read into; never empty while the connection may still read.
    pub fn read_buf(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.buf.len() - self.end < MIN_READ {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < MIN_READ && self.buf.len() < MAX_BUF {
                let grown = (self.buf.len() * 2).min(MAX_BUF);
                self.buf.resize(grown, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// Records that `n` bytes were read into the start of [`Conn::read_buf`].
    pub fn filled(&mut self, n: usize) {
        let now = Instant::now();
        if n > 0 && self.head_since.is_none() && matches!(self.state, State::Head) {
            self.head_since = Some(now);
        }
        self.last_read = now;
        self.end = (self.end + n).min(self.buf.len());
    }

    /// The instant after which the connection has waited too long for its peer: the idle
    /// timeout between requests, the header timeout inside a request (head or body). None
    /// while the server owes the next move (a handler runs, waits, or a response is due).
    pub fn read_deadline(&self) -> Option<Instant> {
        let t = timeouts();
        match self.state {
            State::Head if self.start == self.end && self.head_since.is_none() => {
                Some(self.last_read + t.idle)
            }
            State::Head => Some(self.head_since.unwrap_or(self.last_read) + t.header),
            State::Length(_) | State::Chunked(_) => Some(self.last_read + t.header),
            _ => None,
        }
    }

    /// True while a request has started arriving but is not complete (head or body), or
    /// bytes arrived that did not make a request yet.
    pub fn mid_request(&self) -> bool {
        match self.state {
            State::Head => self.start < self.end || self.head_since.is_some(),
            State::Length(_) | State::Chunked(_) => true,
            _ => false,
        }
    }

    /// True if [`Conn::read_deadline`] has passed at `now`.
    pub fn expired(&self, now: Instant) -> bool {
        self.read_deadline().is_some_and(|d| now >= d)
    }

    /// Gives up on a peer that missed its deadline: a 408 when a request was under way, a
    /// silent close for an idle keep-alive connection. Returns [`Progress::Close`].
    pub fn expire(&mut self) -> Progress {
        match self.state {
            State::Head if self.start == self.end && self.head_since.is_none() => {
                self.state = State::Closed;
                Progress::Close
            }
            State::Head | State::Length(_) | State::Chunked(_) => {
                self.reject(Reject(408, "the request was not received in time"))
            }
            _ => Progress::Close,
        }
    }

    /// Appends `bytes` to the input, as if read from the socket (for runtimes that receive
    /// into their own buffers, and for tests).
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let space = self.read_buf();
            let n = space.len().min(bytes.len());
            space[..n].copy_from_slice(&bytes[..n]);
            self.filled(n);
            bytes = &bytes[n..];
        }
    }

    /// Bytes produced and not yet written to the socket.
    pub fn output(&self) -> &[u8] {
        &self.out[self.out_pos..]
    }

    /// Records that the first `n` bytes of [`Conn::output`] were written.
    pub fn written(&mut self, n: usize) {
        self.out_pos = (self.out_pos + n).min(self.out.len());
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        }
    }

    /// True between requests: nothing buffered, nothing pending. A stopping server may
    /// close such a connection without cutting a request in half.
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Head) && self.start == self.end && self.output().is_empty()
    }

    /// True when the connection is closing because of an error: the client may still be
    /// sending, so the runtime should close with a lingering close (see `linger`).
    pub fn should_linger(&self) -> bool {
        self.rejected
    }

    /// Handles everything the buffer holds and says what the runtime must do next.
    pub fn process(&mut self) -> Progress {
        loop {
            match std::mem::replace(&mut self.state, State::Closed) {
                State::Closed => return Progress::Close,
                State::Head => match self.parse_head() {
                    Ok(Some(next)) => self.state = next,
                    Ok(None) => {
                        self.state = State::Head;
                        return Progress::Read;
                    }
                    Err(reject) => return self.reject(reject),
                },
                State::Length(remaining) => {
                    let take = remaining.min((self.end - self.start) as u64);
                    self.start += take as usize;
                    if remaining > take {
                        self.state = State::Length(remaining - take);
                        return Progress::Read;
                    }
                    self.state = State::Dispatch;
                }
                State::Chunked(mut chunked) => {
                    let (used, result) = chunked.advance(&self.buf[self.start..self.end]);
                    self.start += used;
                    match result {
                        Ok(true) => self.state = State::Dispatch,
                        Ok(false) => {
                            self.state = State::Chunked(chunked);
                            return Progress::Read;
                        }
                        Err(reject) => return self.reject(reject),
                    }
                }
                State::Forwarded => {
                    self.state = State::Forwarded;
                    return Progress::Forward;
                }
                State::Dispatch => {
                    let Some(handler) = self.handler else {
                        self.state = State::Forwarded;
                        return Progress::Forward;
                    };
                    stats::request();
                    let reply = handler(&self.req);
                    match reply.wait {
                        Some(wait) if !wait.is_zero() => {
                            self.state = State::Waiting(reply.response);
                            return Progress::Wait(wait);
                        }
                        _ => self.respond(&reply.response),
                    }
                }
                State::Waiting(response) => {
                    // The idle clock starts when a delayed response goes out.
                    self.last_read = Instant::now();
                    self.respond(&response)
                }
            }
        }
    }

    /// Writes a handler's response and moves on to the next request, or to closing.
    fn respond(&mut self, resp: &Response) {
        let framing = match (self.keep_alive, self.req.version) {
            (false, _) => Framing::Close,
            (true, Version::Http10) => Framing::KeepAlive10,
            (true, Version::Http11) => Framing::KeepAlive11,
        };
        response::write(
            &mut self.out,
            resp,
            framing,
            self.req.method == Method::Head,
        );
        self.state = if self.keep_alive {
            State::Head
        } else {
            State::Closed
        };
    }

    /// Queues an error response and closes: after a framing error the byte stream can no
    /// longer be trusted to contain request boundaries, so it is never parsed further.
    fn reject(&mut self, Reject(status, why): Reject) -> Progress {
        let body = format!("{status} {}: {why}\n", response::reason(status));
        response::write(
            &mut self.out,
            &Response::text(status, body),
            Framing::Close,
            false,
        );
        self.state = State::Closed;
        self.rejected = true;
        Progress::Close
    }

    /// Parses a request head if a complete one is buffered. `Ok(None)`: need more bytes.
    fn parse_head(&mut self) -> Result<Option<State>, Reject> {
        // RFC 9112 §2.2: a server SHOULD ignore empty lines received before a request line
        // (old clients send a CRLF after a POST body).
        loop {
            let rest = &self.buf[self.start..self.end];
            if rest.starts_with(b"\r\n") {
                self.start += 2;
            } else if rest.starts_with(b"\n") {
                self.start += 1;
            } else {
                break;
            }
        }
        let bytes = &self.buf[self.start..self.end];
        if bytes.is_empty() || bytes == b"\r" {
            return Ok(None);
        }
        let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut fields);
        let head_len = match parsed.parse(bytes) {
            Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
            Ok(httparse::Status::Complete(_)) => return Err(too_large(bytes)),
            Ok(httparse::Status::Partial) if bytes.len() >= MAX_HEAD => {
                return Err(too_large(bytes))
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => {
                return Err(Reject(431, "more than 64 header fields"))
            }
            Err(httparse::Error::Version) => return Err(bad_version(bytes)),
            Err(_) => return Err(Reject(400, "malformed request line or header field")),
        };

        // httparse accepts a bare LF as a line end (RFC 9112 §2.2 allows it); archzoo
        // does not, since parsers that disagree on line ends are how requests get
        // smuggled past a proxy.
        if bare_lf(&bytes[..head_len]) {
            return Err(Reject(
                400,
                "bare LF in the request head (lines end with CRLF)",
            ));
        }
        let method = match parsed.method.unwrap_or("") {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            _ => return Err(Reject(501, "only GET, HEAD and POST are implemented")),
        };
        let version = match parsed.version {
            Some(0) => Version::Http10,
            _ => Version::Http11,
        };

        let mut content_length: Option<&[u8]> = None;
        let mut lengths = 0;
        let mut encoding: Option<&[u8]> = None;
        let mut encodings = 0;
        let mut hosts = 0;
        let mut close = false;
        let mut keep_alive = false;
        let mut expect_continue = false;
        for field in parsed.headers.iter() {
            // Dispatch on the name's length first: most fields are skipped after one compare.
            let name = field.name;
            match name.len() {
                14 if name.eq_ignore_ascii_case("content-length") => {
                    lengths += 1;
                    content_length = Some(field.value);
                }
                17 if name.eq_ignore_ascii_case("transfer-encoding") => {
                    encodings += 1;
                    encoding = Some(field.value);
                }
                4 if name.eq_ignore_ascii_case("host") => hosts += 1,
                10 if name.eq_ignore_ascii_case("connection") => {
                    for token in field.value.split(|&b| b == b',') {
                        let token = token.trim_ascii();
                        close |= token.eq_ignore_ascii_case(b"close");
                        keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                    }
                }
                6 if name.eq_ignore_ascii_case("expect") => {
                    expect_continue = field
                        .value
                        .trim_ascii()
                        .eq_ignore_ascii_case(b"100-continue");
                }
                _ => {}
            }
        }

        if encodings > 0 {
            if version == Version::Http10 {
                return Err(Reject(400, "Transfer-Encoding is not defined for HTTP/1.0"));
            }
            if encodings > 1 {
                return Err(Reject(400, "repeated Transfer-Encoding"));
            }
            if lengths > 0 {
                return Err(Reject(400, "both Content-Length and Transfer-Encoding"));
            }
            if !encoding
                .unwrap_or(b"")
                .trim_ascii()
                .eq_ignore_ascii_case(b"chunked")
            {
                return Err(Reject(400, "Transfer-Encoding other than chunked"));
            }
        }
        let body_len = match content_length {
            None => 0,
            Some(_) if lengths > 1 => return Err(Reject(400, "repeated Content-Length")),
            Some(value) => parse_length(value.trim_ascii())?,
        };
        if body_len > MAX_BODY {
            return Err(Reject(413, "request body over 1 MiB"));
        }
        if version == Version::Http11 && hosts == 0 {
            return Err(Reject(400, "HTTP/1.1 request without Host"));
        }
        if hosts > 1 {
            return Err(Reject(400, "more than one Host field"));
        }
        if !self.req.set_target(parsed.path.unwrap_or("")) {
            return Err(Reject(400, "invalid request target"));
        }
        self.req.method = method;
        self.req.version = version;
        self.req.headers.clear();
        if self.capture_headers {
            for field in parsed.headers.iter() {
                let value = String::from_utf8_lossy(field.value).into_owned();
                self.req.headers.push((field.name.to_string(), value));
            }
        }
        self.keep_alive = match version {
            Version::Http11 => !close,
            Version::Http10 => keep_alive && !close,
        };

        self.start += head_len;
        self.head_since = None;
        let has_body = encodings > 0 || body_len > 0;
        // A client that sent `Expect: 100-continue` waits for this before sending the body
        // (curl does for bodies over 1 KiB); one that already sent it loses nothing.
        if has_body && expect_continue && version == Version::Http11 && self.start == self.end {
            self.out.extend_from_slice(CONTINUE);
        }
        Ok(Some(if encodings > 0 {
            State::Chunked(Chunked::default())
        } else if body_len > 0 {
            State::Length(body_len)
        } else {
            State::Dispatch
        }))
    }
}

/// True if some LF in `head` is not preceded by CR.
fn bare_lf(head: &[u8]) -> bool {
    head.iter()
        .enumerate()
        .any(|(i, &b)| b == b'\n' && (i == 0 || head[i - 1] != b'\r'))
}

/// 414 when the request line alone overflows the head limit, else 431.
fn too_large(bytes: &[u8]) -> Reject {
    let limit = &bytes[..bytes.len().min(MAX_HEAD)];
    if limit.contains(&b'\n') {
        Reject(431, "request head over 8 KiB")
    } else {
        Reject(414, "request line over 8 KiB")
    }
}

/// httparse reports any version but 1.0/1.1 as an error; 505 if the request line ends in
/// something shaped like an HTTP version (HTTP/2.0, HTTP/1.2), else it is malformed: 400.
fn bad_version(bytes: &[u8]) -> Reject {
    let line = bytes.split(|&b| b == b'\n').next().unwrap_or(b"");
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let last = line.rsplit(|&b| b == b' ').next().unwrap_or(b"");
    match last.strip_prefix(b"HTTP/") {
        Some([d, ..]) if d.is_ascii_digit() => Reject(505, "only HTTP/1.0 and HTTP/1.1"),
        _ => Reject(400, "malformed request line"),
    }
}

/// Content-Length is 1*DIGIT (RFC 9110 §8.6): no sign, no list, no spaces inside.
fn parse_length(value: &[u8]) -> Result<u64, Reject> {
    const BAD: Reject = Reject(400, "invalid Content-Length");
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return Err(BAD);
    }
    let mut n: u64 = 0;
    for &d in value {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or(BAD)?;
    }
    Ok(n)
}

/// Where a chunked-body decoder stands (RFC 9112 §7.1).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Hex digits of the chunk size.
    #[default]
    Size,
    /// Whitespace between the size and a `;` extension.
    SizeSpace,
    /// A chunk extension, up to CR.
    Extension,
    /// LF ending the size line.
    SizeLf,
    /// Chunk data being skipped.
    Data,
    /// CR after chunk data.
    DataCr,
    /// LF after chunk data.
    DataLf,
    /// Start of a trailer line, or the final CRLF.
    TrailerStart,
    /// Inside a trailer field line.
    Trailer,
    /// LF ending a trailer line.
    TrailerLf,
    /// LF of the final CRLF.
    EndLf,
}

/// A chunked-body decoder that discards the data; strict about framing (CRLF only, hex
/// sizes only, bounded lines), since lenient chunk parsing is how request smuggling starts.
#[derive(Debug, Default, Clone)]
struct Chunked {
    phase: Phase,
    /// Current chunk's size while parsing it; remaining bytes while in `Data`.
    size: u64,
    digits: u32,
    line: usize,
    total: u64,
    trailers: usize,
}

impl Chunked {
    /// Consumes from `input`; returns the bytes used and whether the body is complete.
    fn advance(&mut self, input: &[u8]) -> (usize, Result<bool, Reject>) {
        const BAD_SIZE: Reject = Reject(400, "invalid chunk size");
        const BAD_FRAMING: Reject = Reject(400, "invalid chunked framing");
        let mut i = 0;
        while i < input.len() {
            if self.phase == Phase::Data {
                let take = self.size.min((input.len() - i) as u64);
                i += take as usize;
                self.size -= take;
                if self.size == 0 {
                    self.phase = Phase::DataCr;
                }
                continue;
            }
            let b = input[i];
            i += 1;
            let next = match (self.phase, b) {
                (Phase::Size, _) if b.is_ascii_hexdigit() => {
                    self.digits += 1;
                    if self.digits > 16 {
                        return (i, Err(BAD_SIZE));
                    }
                    self.size = (self.size << 4) | u64::from(hex_value(b));
                    Phase::Size
                }
                (Phase::Size, b'\r') if self.digits > 0 => Phase::SizeLf,
                (Phase::Size, b';') if self.digits > 0 => Phase::Extension,
                (Phase::Size | Phase::SizeSpace, b' ' | b'\t') if self.digits > 0 => {
                    Phase::SizeSpace
                }
                (Phase::SizeSpace, b';') => Phase::Extension,
                (Phase::Size | Phase::SizeSpace, _) => return (i, Err(BAD_SIZE)),
                (Phase::Extension, b'\r') => Phase::SizeLf,
                (Phase::Extension, _) if b == b'\t' || (b >= 0x20 && b != 0x7f) => {
                    self.line += 1;
                    if self.line > MAX_CHUNK_LINE {
                        return (i, Err(Reject(400, "chunk extension too long")));
                    }
                    Phase::Extension
                }
                (Phase::SizeLf, b'\n') => {
                    let size = self.size;
                    self.digits = 0;
                    self.line = 0;
                    if size == 0 {
                        Phase::TrailerStart
                    } else {
                        self.total += size;
                        if self.total > MAX_BODY {
                            return (i, Err(Reject(413, "request body over 1 MiB")));
                        }
                        Phase::Data
                    }
                }
                (Phase::DataCr, b'\r') => Phase::DataLf,
                (Phase::DataLf, b'\n') => {
                    self.size = 0;
                    Phase::Size
                }
                (Phase::TrailerStart, b'\r') => Phase::EndLf,
                (Phase::TrailerStart | Phase::Trailer, _) if b != b'\r' && b != b'\n' && b != 0 => {
                    self.trailers += 1;
                    if self.trailers > MAX_TRAILERS {
                        return (i, Err(Reject(431, "trailer fields over 8 KiB")));
                    }
                    Phase::Trailer
                }
                (Phase::Trailer, b'\r') => Phase::TrailerLf,
                (Phase::TrailerLf, b'\n') => Phase::TrailerStart,
                (Phase::EndLf, b'\n') => return (i, Ok(true)),
                _ => return (i, Err(BAD_FRAMING)),
            };
            self.phase = next;
        }
        (i, Ok(false))
    }
}

fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in one go and processes until the codec wants more or closes.
    fn run(input: &[u8]) -> (String, Progress) {
        let mut c = Conn::new();
        c.feed(input);
        let p = c.process();
        (String::from_utf8_lossy(c.output()).into_owned(), p)
    }

    /// The status of each response in `out`, walking them by their Content-Length.
    fn statuses(mut out: &str) -> Vec<u16> {
        let mut found = Vec::new();
        while let Some(head_end) = out.find("\r\n\r\n") {
            let head = &out[..head_end];
            found.push(head[9..12].parse().unwrap());
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map_or(0, |v| v.parse().unwrap());
            out = &out[head_end + 4 + length..];
        }
        found
    }

    const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

    #[test]
    fn simple_get_keeps_connection_open() {
        let (out, p) = run(GET);
        assert_eq!(p, Progress::Read);
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(out.ends_with("\r\n\r\nhello, world!"));
    }

    #[test]
    fn sixteen_pipelined_requests_answered_in_order_in_one_buffer() {
        let mut input = Vec::new();
        for i in 0..16 {
            let path = if i % 2 == 0 { "/" } else { "/nope" };
            input.extend_from_slice(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        }
        let (out, p) = run(&input);
        assert_eq!(p, Progress::Read);
        let expected: Vec<u16> = (0..16)
            .map(|i| if i % 2 == 0 { 200 } else { 404 })
            .collect();
        assert_eq!(statuses(&out), expected);
    }

    #[test]
    fn byte_at_a_time_gives_one_response() {
        let mut c = Conn::new();
        for (i, b) in GET.iter().enumerate() {
            c.feed(&[*b]);
            assert_eq!(c.process(), Progress::Read);
            assert_eq!(c.output().is_empty(), i + 1 < GET.len());
        }
        assert_eq!(statuses(&String::from_utf8_lossy(c.output())), vec![200]);
    }

    #[test]
    fn http10_closes_unless_keep_alive() {
        let (out, p) = run(b"GET / HTTP/1.0\r\n\r\n");
        assert_eq!(p, Progress::Close);
        assert!(out.contains("Connection: close"));
        let (out, p) = run(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert_eq!(p, Progress::Read);
        assert!(out.contains("Connection: keep-alive\r\n"));
    }

    #[test]
    fn connection_close_token_in_a_list() {
        let (_, p) = run(b"GET / HTTP/1.1\r\nHost: x\r\nconnection: foo, CLOSE\r\n\r\n");
        assert_eq!(p, Progress::Close);
    }

    #[test]
    fn content_length_body_is_skipped_across_reads() {
        let mut c = Conn::new();
        c.feed(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234");
        assert_eq!(c.process(), Progress::Read);
        assert!(c.output().is_empty());
        c.feed(b"56789GET /json HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(c.process(), Progress::Read);
        assert_eq!(
            statuses(&String::from_utf8_lossy(c.output())),
            vec![200, 200]
        );
    }

    #[test]
    fn chunked_body_with_extensions_and_trailers() {
        let req = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
            5;name=value\r\nhello\r\nA ; a=\"b\"\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n\
            GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let (out, p) = run(req);
        assert_eq!(p, Progress::Read);
        assert_eq!(statuses(&out), vec![200, 200]);
        // and the same, one byte at a time
        let mut c = Conn::new();
        for b in req {
            c.feed(&[*b]);
            assert_eq!(c.process(), Progress::Read);
        }
        assert_eq!(
            statuses(&String::from_utf8_lossy(c.output())),
            vec![200, 200]
        );
    }

    #[test]
    fn head_has_length_but_no_body() {
        let (out, _) = run(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(out.contains("Content-Length: 13\r\n"));
        assert!(out.ends_with("\r\n\r\n"));
    }

    #[test]
    fn expect_continue_is_answered_before_the_body() {
        let mut c = Conn::new();
        c.feed(b"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
        assert_eq!(c.process(), Progress::Read);
        assert_eq!(c.output(), CONTINUE);
    }

    fn rejected(input: &[u8]) -> u16 {
        let (out, p) = run(input);
        assert_eq!(p, Progress::Close, "{out}");
        assert!(out.contains("Connection: close"));
        *statuses(&out).last().unwrap()
    }

    #[test]
    fn error_statuses() {
        let cases: &[(&[u8], u16)] = &[
            (b"GET / HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost x\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400),
            (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\nx", 400),
            (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n\r\nx", 400),
            (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400),
            (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\nx\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n11111111111111111\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n200000\r\n", 413),
            (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n", 413),
            (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
            (b"GET / HTTP/1.2\r\nHost: x\r\n\r\n", 505),
            (b"GET / FOO/1.1\r\nHost: x\r\n\r\n", 400),
            (b"PUT / HTTP/1.1\r\nHost: x\r\n\r\n", 501),
            (b"GET nothing HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            (b"GET / HTTP/1.1\nHost: x\n\n", 400),
            (b"GET / HTTP/1.1\r\nHost: x\nA: b\r\n\r\n", 400),
        ];
        for (input, status) in cases {
            assert_eq!(
                rejected(input),
                *status,
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn oversized_heads() {
        let mut long_field = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
        long_field.extend(std::iter::repeat_n(b'a', MAX_HEAD));
        assert_eq!(rejected(&long_field), 431);
        let mut long_uri = b"GET /".to_vec();
        long_uri.extend(std::iter::repeat_n(b'a', MAX_HEAD));
        assert_eq!(rejected(&long_uri), 414);
        let mut many = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
        for i in 0..MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(rejected(&many), 431);
    }

    #[test]
    fn absolute_form_target_routes_on_its_path() {
        let (out, _) = run(b"GET http://example.com/json?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(out.contains("application/json"));
        let r = Request::new(Method::Get, Version::Http11, "/a/b?c=d").unwrap();
        assert_eq!((r.path(), r.query()), ("/a/b", Some("c=d")));
    }

    #[test]
    fn leading_empty_lines_are_ignored() {
        let (out, _) = run(b"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(statuses(&out), vec![200]);
    }

    #[test]
    fn waiting_reply_is_sent_on_the_next_process_call() {
        fn slow(_: &Request) -> crate::routes::Reply {
            crate::routes::Reply::after(Duration::from_millis(5), Response::text(200, "late"))
        }
        let mut c = Conn::with_handler(slow);
        c.feed(GET);
        c.feed(GET);
        assert_eq!(c.process(), Progress::Wait(Duration::from_millis(5)));
        assert!(c.output().is_empty());
        assert_eq!(c.process(), Progress::Wait(Duration::from_millis(5)));
        assert_eq!(c.process(), Progress::Read);
        assert_eq!(
            statuses(&String::from_utf8_lossy(c.output())),
            vec![200, 200]
        );
    }

    #[test]
    fn forwarded_requests_are_answered_in_order() {
        let mut c = Conn::forwarding();
        c.feed(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(c.process(), Progress::Forward);
        assert_eq!(c.request().path(), "/a");
        // Until the response comes back, nothing moves.
        assert_eq!(c.process(), Progress::Forward);
        c.deliver(Response::text(200, "a"));
        assert_eq!(c.process(), Progress::Forward);
        assert_eq!(c.request().path(), "/b");
        c.deliver(Response::text(502, "worker died"));
        assert_eq!(c.process(), Progress::Read);
        assert_eq!(
            statuses(&String::from_utf8_lossy(c.output())),
            vec![200, 502]
        );
    }

    #[test]
    fn deadlines_follow_the_request_phase() {
        let t = timeouts();
        let mut c = Conn::new();
        let idle = c.read_deadline().unwrap();
        assert!(idle > Instant::now() + t.idle - Duration::from_secs(1));
        c.feed(b"GET / HTTP/1.1\r\nHo");
        assert_eq!(c.process(), Progress::Read);
        let head = c.read_deadline().unwrap();
        assert!(head < Instant::now() + t.header + Duration::from_millis(10));
        assert!(!c.expired(Instant::now()));
        assert!(c.expired(head));
        assert_eq!(c.expire(), Progress::Close);
        assert_eq!(statuses(&String::from_utf8_lossy(c.output())), vec![408]);
        // An idle connection closes without a word.
        let mut idle = Conn::new();
        idle.feed(GET);
        idle.process();
        idle.written(idle.output().len());
        assert!(idle.read_deadline().unwrap() > Instant::now() + t.header);
        assert_eq!(idle.expire(), Progress::Close);
        assert!(idle.output().is_empty());
    }

    #[test]
    fn partial_writes_are_tracked() {
        let mut c = Conn::new();
        c.feed(GET);
        c.process();
        let total = c.output().len();
        c.written(10);
        assert_eq!(c.output().len(), total - 10);
        c.written(total - 10);
        assert!(c.output().is_empty());
        assert!(c.is_idle());
    }
}
