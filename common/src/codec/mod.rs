//! The HTTP/1.x codec: one [`Conn`] per client connection, shared by every server.
//!
//! It knows the protocol and nothing of the application: a connection is built from one
//! [`ConnConfig`] (the [`Handler`] to call, timeouts, limits) that the server passes down,
//! and whether it answers its requests itself or hands them on is its [`Mode`] type.
//!
//! - `head` parses and checks a request head; `chunked` decodes a chunked body; this
//!   file is the connection state machine that strings them together with the buffers.
//!
//! `Conn` is *sans-I/O*: it holds an input buffer the runtime reads into and an output buffer
//! the runtime writes from, and a state machine in between. It holds them only while it has
//! something in hand: an idle keep-alive connection gives both back to a per-thread pool
//! (`buffers`), as nginx does, so it costs its state and nothing more. The runtime's loop is always the
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

mod buffers;
mod chunked;
mod head;
mod mode;

use std::time::{Duration, Instant};

use self::chunked::Chunked;
use self::head::BodyFraming;
use crate::handler::{App, Handler, Later};
use crate::pg::{Job, PgError};

use crate::response::{self, Framing, Response};
use crate::stats;

pub use self::mode::{Answer, Forward, Mode};
pub use crate::request::{Method, Request, Version};

/// Largest request head (request line + fields) accepted: 8 KiB, as nginx and most servers.
pub const MAX_HEAD: usize = 8 * 1024;
/// Most header fields accepted in one request.
pub const MAX_HEADERS: usize = 64;
/// Largest request body accepted (read and discarded): 1 MiB.
pub const MAX_BODY: u64 = 1024 * 1024;

/// A read is always offered at least this much room, so one read can take a whole
/// pipelined batch of small requests.
const MIN_READ: usize = 2 * 1024;
/// The input buffer never grows past this: an accepted head is at most 8 KiB and bodies are
/// discarded as they arrive, so anything bigger would be a bug, not a need.
const MAX_BUF: usize = 32 * 1024;

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Most requests of one connection handed on at once ([`Forward`]): a pipelined batch
/// goes to the workers in one piece, and a client that pipelines without end is read no
/// further until its answers drain.
pub const MAX_IN_FLIGHT: usize = 64;

/// How long a connection may take to send what it owes (`--header-timeout`,
/// `--idle-timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From the first byte of a request head to its end, and between reads of a body: a
    /// slowloris client gets a 408 and the close after this long.
    pub header: Duration,
    /// Between requests on a keep-alive connection: closed after this long. Also how long
    /// a peer may refuse to read what it asked for before it is dropped.
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

/// Everything a connection needs to know about the server it belongs to, in one small
/// value: `ServerArgs::resolve` builds it from the flags, each server passes it down to
/// every connection it makes (as mini-redis passes its `Db` into `run`). Nothing in the
/// codec reads a global, so two connections with different settings can live in one
/// process — the codec's tests are built that way.
#[derive(Debug, Clone, Copy)]
pub struct ConnConfig {
    /// What answers a request (`--stack` chooses it).
    pub handler: Handler,
    /// What the handler is given besides the request: the `/db` file, the blocking hook.
    pub app: &'static App,
    /// Keep each request's header fields for the handler (the framework stack builds its
    /// owned header map from them); the raw stack does without and allocates nothing.
    pub capture_headers: bool,
    pub timeouts: Timeouts,
    /// `--max-conns`: connections one worker holds before it stops accepting. The codec
    /// does not count connections; it travels here so that each server's accept loop gets
    /// it from the same value as its connections.
    pub max_conns: usize,
    /// `--keepalive-requests`: the response to this many-th request on a connection says
    /// `Connection: close`, and the connection closes cleanly after it; 0: no limit.
    pub keepalive_requests: u32,
    /// Asked as each response that would keep its connection open is framed; `true` makes
    /// it the last one (`Connection: close`). A server whose worker serves one connection
    /// at a time sets it to "is a client waiting in the accept queue?", so that the worker
    /// hands itself on instead of waiting for this client's next request
    /// (`prefork-blocking --keepalive-queued close`). A plain `fn`, not a closure: the
    /// config is `Copy` and shared by every connection, and the answer is the process's.
    pub yield_keep_alive: Option<fn() -> bool>,
}

impl ConnConfig {
    /// This configuration for the life of the process, for a server whose connections are
    /// tasks or coroutines: each refers to the one copy instead of carrying its own, since
    /// what a task or coroutine captures is part of every idle connection's cost (a copy
    /// pushed tokio's and glommio's futures into the allocator's next size class).
    pub fn shared(self) -> &'static ConnConfig {
        Box::leak(Box::new(self))
    }

    /// `handler` with the default timeouts and limits.
    pub fn new(handler: Handler) -> Self {
        ConnConfig {
            handler,
            app: &NO_APP,
            capture_headers: false,
            timeouts: Timeouts::default(),
            max_conns: 10_000,
            keepalive_requests: 0,
            yield_keep_alive: None,
        }
    }
}

/// The application context of a [`ConnConfig::new`]: no database, no blocking hook.
static NO_APP: App = App::NONE;

/// What the runtime must do next for a connection that answers its own requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Write out [`Conn::output`] if non-empty, then read more bytes and call `process`.
    Read,
    /// Write out what is buffered, wait this long the runtime's native way, then call
    /// `process` again: the handler asked for the wait.
    Wait(Duration),
    /// Write out what is buffered, run this `/pg` job the runtime's way, hand its result
    /// to [`Conn::query_done`], then call `process` again.
    Query(Job),
    /// Write out what is buffered, then close the connection.
    Close,
}

/// What the runtime must do next for a connection in either mode: a [`Progress`], or —
/// only from a [`Forward`] connection — a complete request for someone else to handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Read,
    Wait(Duration),
    Query(Job),
    Close,
    /// Send [`Conn::request`] on (its number is [`Conn::forwarded_seq`]), then call
    /// `process` again: later pipelined requests go on too, without waiting for this one.
    /// [`Conn::deliver`] brings each response back, in any order; they are written in
    /// request order.
    Forward,
    /// Nothing to do until a forwarded request's response is delivered: the connection
    /// closes after it, or [`MAX_IN_FLIGHT`] are out.
    Await,
}

impl From<Progress> for Step {
    fn from(p: Progress) -> Step {
        match p {
            Progress::Read => Step::Read,
            Progress::Wait(d) => Step::Wait(d),
            Progress::Query(job) => Step::Query(job),
            Progress::Close => Step::Close,
        }
    }
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
    /// The handler asked for a database job; its answer is made of this response when the
    /// runtime hands back the result ([`Conn::query_done`]).
    Querying(Job, Box<Response>),
    /// A close was decided; nothing more is parsed.
    Closed,
}

/// One client connection's protocol state and buffers.
pub struct Conn<M: Mode = Answer> {
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
    mode: M,
    capture_headers: bool,
    timeouts: Timeouts,
    /// Requests answered on this connection, and how many it may answer (0: no limit).
    served: u32,
    keepalive_requests: u32,
    yield_keep_alive: Option<fn() -> bool>,
}

impl Conn<Answer> {
    /// A new connection that answers its requests with `config.handler`. Counts as a
    /// connection in `--stats`.
    pub fn new(config: &ConnConfig) -> Self {
        Conn::open(config)
    }
}

impl Conn<Forward> {
    /// A connection whose requests are handled elsewhere (another process): `process`
    /// returns [`Step::Forward`] for each complete request instead of calling a handler.
    pub fn forwarding(config: &ConnConfig) -> Self {
        Conn::open(config)
    }

    /// The number of the request [`Step::Forward`] last handed on: [`Conn::deliver`] takes
    /// its response by it.
    pub fn forwarded_seq(&self) -> u16 {
        let f = &self.mode;
        f.front_seq
            .wrapping_add(f.in_flight.len() as u16)
            .wrapping_sub(1)
    }

    /// The response to forwarded request `seq`; call `process` next to send it (and any
    /// after it that were delivered earlier). False if no such request awaits one.
    pub fn deliver(&mut self, seq: u16, response: Response) -> bool {
        let f = &mut self.mode;
        let index = seq.wrapping_sub(f.front_seq) as usize;
        match f.in_flight.get_mut(index) {
            Some(slot) if slot.response.is_none() => {
                slot.response = Some(response);
                true
            }
            _ => false,
        }
    }

    /// Requests handed on and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.mode.in_flight.len()
    }
}

/// A connection that ends holding its buffers gives them back as an idle one does: one
/// closed after its answer (`Connection: close`, HTTP/1.0, an error) is never idle again,
/// and without keep-alive every connection ends so — freed, its buffers made the next
/// connection's `take_input` allocate and zero 4 KiB anew. The string its request target
/// was copied into goes back too (a connection keeps that one while it lives, idle or
/// not), for the next connection's first request. (The pool frees what it has no room
/// for, and one dropped while its thread exits.)
impl<M: Mode> Drop for Conn<M> {
    fn drop(&mut self) {
        self.give_buffers_back();
        buffers::give_target(self.req.take_target());
    }
}

impl<M: Mode> Conn<M> {
    /// A new connection in mode `M` (for code generic over the mode, such as the shared
    /// epoll loop). Counts as a connection in `--stats`.
    pub fn open(config: &ConnConfig) -> Self {
        stats::connection();
        let mode = M::from_config(config);
        Conn {
            buf: Vec::new(),
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
            mode,
            capture_headers: config.capture_headers,
            timeouts: config.timeouts,
            served: 0,
            keepalive_requests: config.keepalive_requests,
            yield_keep_alive: config.yield_keep_alive,
        }
    }

    /// The request being handled or forwarded.
    pub fn request(&self) -> &Request {
        &self.req
    }

    /// The timeouts this connection keeps (for runtimes that arm their own timers).
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Free space to read into; never empty while the connection may still read. An idle
    /// connection borrows its buffer here, so ask for it when bytes are ready (after the
    /// readiness wait, not across it); if the read then finds nothing, call
    /// [`Conn::unread`] to give the buffer back.
    pub fn read_buf(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.buf.is_empty() {
            self.buf = buffers::take_input();
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

    /// The read offered [`Conn::read_buf`] found nothing to read after all (a spurious
    /// wake-up, `WouldBlock`): an idle connection gives its buffer back.
    pub fn unread(&mut self) {
        self.settle();
    }

    /// Returns the buffers to the pool if the connection is idle: nothing buffered, nothing
    /// to write, nothing owed. The next request borrows them again.
    fn settle(&mut self) {
        if self.is_idle() {
            self.start = 0;
            self.end = 0;
            self.give_buffers_back();
        }
    }

    /// Both buffers back to the pool; the connection holds none until it borrows again.
    fn give_buffers_back(&mut self) {
        buffers::give_input(&mut self.buf);
        buffers::give_output(&mut self.out);
    }

    /// The output buffer, borrowed from the pool if the connection holds none.
    fn out_buf(&mut self) -> &mut Vec<u8> {
        if self.out.capacity() == 0 {
            self.out = buffers::take_output();
        }
        &mut self.out
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

    /// Copies as much of `bytes` into the input as it has room for, as if read from the
    /// socket, and returns how much it took (for runtimes that receive into their own
    /// buffers, and for tests). Less than all of it means: call `process`, then feed the
    /// rest — the buffer does not grow past its bound to take a flood.
    pub fn feed(&mut self, mut bytes: &[u8]) -> usize {
        let mut taken = 0;
        while !bytes.is_empty() {
            let space = self.read_buf();
            let n = space.len().min(bytes.len());
            if n == 0 {
                break;
            }
            space[..n].copy_from_slice(&bytes[..n]);
            self.filled(n);
            bytes = &bytes[n..];
            taken += n;
        }
        taken
    }

    /// The instant after which the connection has waited too long for its peer: the idle
    /// timeout between requests, the header timeout inside a request (head or body). None
    /// while the server owes the next move (a handler runs, waits, or a response is due).
    pub fn read_deadline(&self) -> Option<Instant> {
        let t = self.timeouts;
        if self.mode.hold(0).is_some() {
            return None; // the server owes forwarded responses
        }
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
            self.settle();
        }
    }

    /// True between requests: nothing buffered, nothing pending. A stopping server may
    /// close such a connection without cutting a request in half.
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Head)
            && self.start == self.end
            && self.output().is_empty()
            && self.mode.hold(0).is_none()
    }

    /// True when the connection closes while the client may still be sending — after an
    /// error, or with requests it pipelined past the last one answered (a keep-alive limit,
    /// `Connection: close`): the runtime should close with a lingering close (see
    /// `linger`), or the kernel would answer the unread bytes with a reset that can destroy
    /// the responses still in flight.
    pub fn should_linger(&self) -> bool {
        self.rejected || (matches!(self.state, State::Closed) && self.start < self.end)
    }

    /// What this connection's handler is given: where a runtime finds the `/pg` database
    /// when it runs a [`Progress::Query`].
    pub fn app(&self) -> &'static App {
        self.mode.app()
    }

    /// The result of the job a [`Progress::Query`] asked for: its response goes out at the
    /// next `process`.
    pub fn query_done(&mut self, result: Result<f64, PgError>) {
        self.state = match std::mem::replace(&mut self.state, State::Closed) {
            State::Querying(job, shell) => State::Waiting(job.answer(*shell, result)),
            other => other,
        };
    }

    /// Handles everything the buffer holds and says what the runtime must do next.
    pub fn process(&mut self) -> M::Next {
        let next = self.run();
        // Nothing left to write or parse (a lone empty line, a request whose answer is
        // owed elsewhere and came back empty): the buffers go back now, not at a write.
        if self.output().is_empty() {
            self.settle();
        }
        next
    }

    /// [`Conn::process`] up to the point where the runtime must act.
    fn run(&mut self) -> M::Next {
        // Forwarded requests whose responses came back, in request order.
        let mut wrote = false;
        while let Some((framing, head, response)) = self.mode.next_ready() {
            response::write(self.out_buf(), &response, framing, head);
            wrote = true;
        }
        if wrote {
            // The idle clock starts when the last answer owed goes out.
            self.last_read = Instant::now();
        }
        loop {
            match std::mem::replace(&mut self.state, State::Closed) {
                State::Closed => {
                    self.state = State::Closed;
                    return match self.mode.hold(0) {
                        Some(wait) => wait,
                        None => Progress::Close.into(),
                    };
                }
                State::Head => {
                    if let Some(wait) = self.mode.hold(MAX_IN_FLIGHT - 1) {
                        self.state = State::Head;
                        return wait;
                    }
                    match self.parse_head() {
                        Ok(Some(next)) => self.state = next,
                        Ok(None) => {
                            self.state = State::Head;
                            return Progress::Read.into();
                        }
                        Err(reject) => {
                            self.reject(reject);
                        }
                    }
                }
                State::Length(remaining) => {
                    let take = remaining.min((self.end - self.start) as u64);
                    self.start += take as usize;
                    if remaining > take {
                        self.state = State::Length(remaining - take);
                        return Progress::Read.into();
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
                            return Progress::Read.into();
                        }
                        Err(reject) => {
                            self.reject(reject);
                        }
                    }
                }
                State::Dispatch => match self.mode.dispatch(&self.req) {
                    Err(next) => {
                        let framing = self.framing();
                        self.mode
                            .forwarded(framing, self.req.method == Method::Head);
                        self.state = if self.keep_alive {
                            State::Head
                        } else {
                            State::Closed
                        };
                        return next;
                    }
                    Ok(reply) => {
                        stats::request();
                        match reply.later {
                            Some(Later::Wait(wait)) if !wait.is_zero() => {
                                self.state = State::Waiting(reply.response);
                                return Progress::Wait(wait).into();
                            }
                            Some(Later::Query(job)) => {
                                self.state = State::Querying(job, Box::new(reply.response));
                                return Progress::Query(job).into();
                            }
                            _ => self.respond(&reply.response),
                        }
                    }
                },
                State::Waiting(response) => {
                    // The idle clock starts when a delayed response goes out.
                    self.last_read = Instant::now();
                    self.respond(&response)
                }
                State::Querying(job, response) => {
                    // The runtime has not handed the result back yet: ask again.
                    self.state = State::Querying(job, response);
                    return Progress::Query(job).into();
                }
            }
        }
    }

    /// Counts the current request as served and decides how its response is framed: the
    /// request-count limit, or a server that yields to a waiting client, makes it the last.
    fn framing(&mut self) -> Framing {
        self.served = self.served.saturating_add(1);
        if self.keepalive_requests != 0 && self.served >= self.keepalive_requests {
            // The last request this connection may carry: say so, then close.
            self.keep_alive = false;
        }
        if self.keep_alive && self.yield_keep_alive.is_some_and(|waiting| waiting()) {
            self.keep_alive = false;
        }
        match (self.keep_alive, self.req.version) {
            (false, _) => Framing::Close,
            (true, Version::Http10) => Framing::KeepAlive10,
            (true, Version::Http11) => Framing::KeepAlive11,
        }
    }

    /// Writes a handler's response and moves on to the next request, or to closing.
    fn respond(&mut self, resp: &Response) {
        let framing = self.framing();
        let head = self.req.method == Method::Head;
        response::write(self.out_buf(), resp, framing, head);
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
        // After the answers still owed to forwarded requests before it, if any.
        if let Some(resp) = self
            .mode
            .in_turn(Framing::Close, Response::text(status, body))
        {
            response::write(self.out_buf(), &resp, Framing::Close, false);
        }
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
        let Some(head) = head::parse(bytes, &mut self.req, self.capture_headers)? else {
            return Ok(None);
        };
        self.keep_alive = head.keep_alive;
        self.start += head.len;
        self.head_since = None;
        // A client that sent `Expect: 100-continue` waits for this before sending the body
        // (curl does for bodies over 1 KiB); one that already sent it loses nothing.
        if head.expect_continue && self.start == self.end && self.mode.hold(0).is_none() {
            self.out_buf().extend_from_slice(CONTINUE);
        }
        Ok(Some(match head.body {
            BodyFraming::Chunked => State::Chunked(Chunked::default()),
            BodyFraming::Length(n) => State::Length(n),
            BodyFraming::None => State::Dispatch,
        }))
    }
}

#[cfg(test)]
mod tests;
