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

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use self::chunked::Chunked;
use self::head::BodyFraming;
use crate::handler::{App, Handler, Later, Reply};
use crate::pg::{Job, PgError};

use crate::response::{self, Framing, Response};
use crate::stats;

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

/// Who answers the requests a connection parses: the connection itself ([`Answer`]), or
/// another process ([`Forward`]). A type rather than a flag, so that a server whose
/// connections answer themselves is never handed a forwarded request to deal with: its
/// [`Conn::process`] returns a [`Progress`], which has no such case.
pub trait Mode: private::Sealed {
    /// What [`Conn::process`] returns in this mode.
    type Next: From<Progress> + Into<Step> + Copy + std::fmt::Debug + PartialEq;
    /// The mode a connection built from `config` gets.
    fn from_config(config: &ConnConfig) -> Self;
    /// Runs the handler on `req`, or says that the request goes elsewhere.
    fn dispatch(&self, req: &Request) -> Result<Reply, Self::Next>;
    /// What the handler is given (a forwarding connection runs none: nothing).
    fn app(&self) -> &'static App {
        &NO_APP
    }
    /// A request went elsewhere; its response will be written with `framing`.
    fn forwarded(&mut self, _framing: Framing, _head: bool) {}
    /// An answer the connection gives itself (an error) goes out after those still owed
    /// to forwarded requests; given back when none is owed: write it now.
    fn in_turn(&mut self, _framing: Framing, response: Response) -> Option<Response> {
        Some(response)
    }
    /// The oldest forwarded request's response, once it was delivered.
    fn next_ready(&mut self) -> Option<(Framing, bool, Response)> {
        None
    }
    /// What `process` says while more than `room` forwarded requests are unanswered;
    /// `None` when no more than that are.
    fn hold(&self, _room: usize) -> Option<Self::Next> {
        None
    }
}

mod private {
    pub trait Sealed {}
    impl Sealed for super::Answer {}
    impl Sealed for super::Forward {}
}

/// Requests are answered by the connection's own [`Handler`], given its [`App`].
#[derive(Debug, Clone, Copy)]
pub struct Answer(Handler, &'static App);

/// Requests are handed on as they are parsed, up to [`MAX_IN_FLIGHT`] at once (see
/// [`Step::Forward`]); their responses are written in request order.
#[derive(Debug, Default)]
pub struct Forward {
    /// Forwarded requests not yet written back, oldest first: how to frame each response,
    /// and the response once it was delivered. Empty (no allocation) on an idle connection.
    in_flight: VecDeque<InFlight>,
    /// The number of `in_flight`'s front (numbers wrap; at most [`MAX_IN_FLIGHT`] are out).
    front_seq: u16,
}

#[derive(Debug)]
struct InFlight {
    framing: Framing,
    head: bool,
    response: Option<Response>,
}

impl Mode for Answer {
    type Next = Progress;
    fn from_config(config: &ConnConfig) -> Self {
        Answer(config.handler, config.app)
    }
    #[inline]
    fn dispatch(&self, req: &Request) -> Result<Reply, Progress> {
        Ok((self.0)(req, self.1))
    }
    fn app(&self) -> &'static App {
        self.1
    }
}

impl Mode for Forward {
    type Next = Step;
    fn from_config(_: &ConnConfig) -> Self {
        Forward::default()
    }
    #[inline]
    fn dispatch(&self, _: &Request) -> Result<Reply, Step> {
        Err(Step::Forward)
    }
    fn forwarded(&mut self, framing: Framing, head: bool) {
        self.in_flight.push_back(InFlight {
            framing,
            head,
            response: None,
        });
    }
    fn in_turn(&mut self, framing: Framing, response: Response) -> Option<Response> {
        if self.in_flight.is_empty() {
            return Some(response);
        }
        self.in_flight.push_back(InFlight {
            framing,
            head: false,
            response: Some(response),
        });
        None
    }
    fn next_ready(&mut self) -> Option<(Framing, bool, Response)> {
        let response = self.in_flight.front_mut()?.response.take()?;
        let front = self.in_flight.pop_front()?;
        self.front_seq = self.front_seq.wrapping_add(1);
        if self.in_flight.is_empty() {
            // Give the slots back: an idle connection holds no queue.
            self.in_flight = VecDeque::new();
        }
        Some((front.framing, front.head, response))
    }
    fn hold(&self, room: usize) -> Option<Step> {
        (self.in_flight.len() > room).then_some(Step::Await)
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
            buffers::give_input(&mut self.buf);
            buffers::give_output(&mut self.out);
        }
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
mod tests {
    use super::*;
    use crate::response::Body;

    /// The codec's own test handler: `/` says hello, `/json` answers JSON, the rest is 404.
    /// No routes, no stack, no database: the protocol is tested on its own.
    fn hello(req: &Request, _: &App) -> Reply {
        match req.path() {
            "/" => Reply::now(Response::new(
                200,
                "text/plain",
                Body::Static(b"hello, world!"),
            )),
            "/json" => Reply::now(Response::new(200, "application/json", Body::Static(b"{}"))),
            _ => Reply::now(Response::text(404, "not found\n")),
        }
    }

    fn config() -> ConnConfig {
        ConnConfig::new(hello)
    }

    /// Feeds `input` in one go and processes until the codec wants more or closes.
    fn run(input: &[u8]) -> (String, Progress) {
        let mut c = Conn::new(&config());
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

    /// True if the connection holds no buffer of its own.
    fn holds_nothing<M: Mode>(c: &Conn<M>) -> bool {
        c.buf.capacity() == 0 && c.out.capacity() == 0
    }

    #[test]
    fn an_idle_connection_holds_no_buffer() {
        let mut c = Conn::new(&config());
        assert!(holds_nothing(&c), "a new connection borrows nothing yet");
        c.feed(GET);
        assert_eq!(c.process(), Progress::Read);
        assert!(!c.output().is_empty() && !holds_nothing(&c));
        let n = c.output().len();
        c.written(n);
        assert!(
            holds_nothing(&c),
            "answered and written: both buffers go back"
        );

        // Half a request keeps its bytes until the rest arrives.
        c.feed(&GET[..10]);
        assert_eq!(c.process(), Progress::Read);
        assert!(c.buf.capacity() > 0 && c.mid_request());
        c.feed(&GET[10..]);
        assert_eq!(c.process(), Progress::Read);
        let n = c.output().len();
        c.written(n);
        assert!(holds_nothing(&c));

        // A read that found nothing gives the buffer back; a lone empty line too.
        let _ = c.read_buf();
        c.unread();
        assert!(holds_nothing(&c));
        c.feed(b"\r\n");
        assert_eq!(c.process(), Progress::Read);
        assert!(holds_nothing(&c));
    }

    #[test]
    fn output_written_in_parts_is_kept_until_the_last_byte() {
        let mut c = Conn::new(&config());
        c.feed(GET);
        c.process();
        let n = c.output().len();
        c.written(n - 1);
        assert_eq!(c.output(), b"!");
        c.written(1);
        assert!(holds_nothing(&c));
    }

    #[test]
    fn a_forwarding_connection_keeps_its_buffers_while_answers_are_owed() {
        let mut c = Conn::forwarding(&config());
        c.feed(GET);
        assert_eq!(c.process(), Step::Forward);
        assert_eq!(c.process(), Step::Read);
        assert_eq!(c.in_flight(), 1);
        assert!(
            !c.is_idle(),
            "an answer is owed: not idle, whatever it holds"
        );
        let seq = c.forwarded_seq();
        assert!(c.deliver(seq, Response::text(200, "ok")));
        assert_eq!(c.process(), Step::Read);
        let n = c.output().len();
        assert!(n > 0);
        c.written(n);
        assert!(holds_nothing(&c));
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
        let mut c = Conn::new(&config());
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
        let mut c = Conn::new(&config());
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
        let mut c = Conn::new(&config());
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
        let mut c = Conn::new(&config());
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
        fn slow(_: &Request, _: &App) -> Reply {
            Reply::after(Duration::from_millis(5), Response::text(200, "late"))
        }
        let mut c = Conn::new(&ConnConfig::new(slow));
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
    fn forwarded_requests_go_on_at_once_and_are_answered_in_order() {
        let mut c = Conn::forwarding(&config());
        c.feed(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(c.process(), Step::Forward);
        assert_eq!(c.request().path(), "/a");
        let a = c.forwarded_seq();
        // The next pipelined request goes on without waiting for the first answer.
        assert_eq!(c.process(), Step::Forward);
        assert_eq!(c.request().path(), "/b");
        let b = c.forwarded_seq();
        assert_eq!((c.process(), c.in_flight()), (Step::Read, 2));
        assert_eq!(c.read_deadline(), None, "the server owes the next move");
        // /b is answered first, but nothing goes out before /a's answer.
        assert!(c.deliver(b, Response::text(502, "worker died")));
        assert_eq!(c.process(), Step::Read);
        assert!(c.output().is_empty());
        assert!(c.deliver(a, Response::text(200, "a")));
        assert!(
            !c.deliver(a, Response::text(200, "again")),
            "one answer each"
        );
        assert_eq!(c.process(), Step::Read);
        assert_eq!(
            statuses(&String::from_utf8_lossy(c.output())),
            vec![200, 502]
        );
        assert_eq!(c.in_flight(), 0);
        assert!(c.read_deadline().is_some(), "idle again");
    }

    #[test]
    fn forwarding_waits_for_answers_before_closing_and_past_the_cap() {
        let mut c = Conn::forwarding(&config());
        c.feed(b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert_eq!(c.process(), Step::Forward);
        let a = c.forwarded_seq();
        assert_eq!(
            c.process(),
            Step::Await,
            "the answer is owed before the close"
        );
        c.deliver(a, Response::text(200, "a"));
        assert_eq!(c.process(), Step::Close);
        assert!(String::from_utf8_lossy(c.output()).contains("Connection: close"));

        let mut c = Conn::forwarding(&config());
        let one = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        for _ in 0..MAX_IN_FLIGHT + 1 {
            c.feed(one);
        }
        for _ in 0..MAX_IN_FLIGHT {
            assert_eq!(c.process(), Step::Forward);
        }
        assert_eq!(c.process(), Step::Await, "no more than MAX_IN_FLIGHT out");
        let first = c.forwarded_seq().wrapping_sub(MAX_IN_FLIGHT as u16 - 1);
        c.deliver(first, Response::text(200, "ok"));
        assert_eq!(c.process(), Step::Forward, "room again");
    }

    #[test]
    fn an_error_after_forwarded_requests_waits_its_turn() {
        let mut c = Conn::forwarding(&config());
        c.feed(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nBAD\r\n\r\n");
        assert_eq!(c.process(), Step::Forward);
        let a = c.forwarded_seq();
        assert_eq!(c.process(), Step::Await);
        assert!(
            c.output().is_empty(),
            "the 400 must not overtake /a's answer"
        );
        c.deliver(a, Response::text(200, "a"));
        assert_eq!(c.process(), Step::Close);
        assert_eq!(
            statuses(&String::from_utf8_lossy(c.output())),
            vec![200, 400]
        );
    }

    #[test]
    fn forwarded_requests_count_toward_the_keepalive_limit() {
        let mut cfg = config();
        cfg.keepalive_requests = 2;
        let mut c = Conn::forwarding(&cfg);
        let one = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        c.feed(&[&one[..], one, one].concat());
        assert_eq!(c.process(), Step::Forward);
        assert_eq!(c.process(), Step::Forward);
        assert_eq!(c.process(), Step::Await, "the third is never forwarded");
        let last = c.forwarded_seq();
        c.deliver(last.wrapping_sub(1), Response::text(200, "1"));
        c.deliver(last, Response::text(200, "2"));
        assert_eq!(c.process(), Step::Close);
        let out = String::from_utf8_lossy(c.output()).into_owned();
        assert_eq!(statuses(&out), vec![200, 200]);
        assert_eq!(out.matches("Connection: close").count(), 1);
        assert!(
            c.should_linger(),
            "the unread third request asks for a lingering close"
        );
    }

    #[test]
    fn deadlines_follow_the_request_phase() {
        let t = Timeouts::default();
        let mut c = Conn::new(&config());
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
        let mut idle = Conn::new(&config());
        idle.feed(GET);
        idle.process();
        idle.written(idle.output().len());
        assert!(idle.read_deadline().unwrap() > Instant::now() + t.header);
        assert_eq!(idle.expire(), Progress::Close);
        assert!(idle.output().is_empty());
    }

    #[test]
    fn partial_writes_are_tracked() {
        let mut c = Conn::new(&config());
        c.feed(GET);
        c.process();
        let total = c.output().len();
        c.written(10);
        assert_eq!(c.output().len(), total - 10);
        c.written(total - 10);
        assert!(c.output().is_empty());
        assert!(c.is_idle());
    }

    #[test]
    fn feed_takes_what_fits_and_never_spins() {
        let mut c = Conn::new(&config());
        let flood = vec![b'a'; 3 * MAX_BUF];
        let taken = c.feed(&flood);
        assert!(taken > 0 && taken <= MAX_BUF, "took {taken}");
        // Nothing fits until `process` has consumed something.
        assert_eq!(c.feed(&flood), 0);
        assert_eq!(c.process(), Progress::Close);
        assert_eq!(statuses(&String::from_utf8_lossy(c.output())), vec![414]);
    }

    #[test]
    fn connections_with_different_settings_share_a_process() {
        let short = ConnConfig {
            timeouts: Timeouts {
                header: Duration::from_secs(1),
                idle: Duration::from_secs(2),
            },
            ..config()
        };
        let (a, b) = (Conn::new(&short), Conn::new(&config()));
        let now = Instant::now();
        assert!(a.read_deadline().unwrap() < now + Duration::from_secs(3));
        assert!(b.read_deadline().unwrap() > now + Duration::from_secs(59));
        assert_eq!(a.timeouts().idle, Duration::from_secs(2));
    }

    #[test]
    fn headers_are_captured_only_when_asked() {
        let capturing = ConnConfig {
            capture_headers: true,
            ..config()
        };
        for (cfg, expected) in [(config(), 0), (capturing, 2)] {
            let mut c = Conn::new(&cfg);
            c.feed(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\r\n");
            c.process();
            assert_eq!(c.request().headers().len(), expected);
        }
    }

    #[test]
    fn keepalive_request_limit_closes_after_the_nth_response() {
        let limited = ConnConfig {
            keepalive_requests: 3,
            ..config()
        };
        let mut c = Conn::new(&limited);
        for _ in 0..5 {
            c.feed(GET);
        }
        assert_eq!(c.process(), Progress::Close);
        let out = String::from_utf8_lossy(c.output()).into_owned();
        assert_eq!(
            statuses(&out),
            vec![200, 200, 200],
            "the 4th and 5th are not read"
        );
        assert_eq!(out.matches("Connection: close").count(), 1);
        let last = out.rfind("HTTP/1.1 200").unwrap();
        assert!(out[last..].contains("Connection: close"), "{out}");
        assert!(
            c.should_linger(),
            "two requests unread: linger, do not reset"
        );
        // Exactly at the limit, nothing unread: a plain close.
        let mut c = Conn::new(&limited);
        for _ in 0..3 {
            c.feed(GET);
            c.process();
        }
        assert!(!c.should_linger());
    }

    #[test]
    fn a_server_that_yields_makes_the_next_response_the_last() {
        use std::sync::atomic::{AtomicBool, Ordering};
        static WAITING: AtomicBool = AtomicBool::new(false);
        fn waiting() -> bool {
            WAITING.load(Ordering::Relaxed)
        }
        let yielding = ConnConfig {
            yield_keep_alive: Some(waiting),
            ..config()
        };
        let mut c = Conn::new(&yielding);
        c.feed(GET);
        assert_eq!(c.process(), Progress::Read);
        let first = String::from_utf8_lossy(c.output()).into_owned();
        assert!(!first.contains("Connection: close"), "{first}");
        c.written(first.len());
        // Someone queued: the next response says so and the connection ends cleanly.
        WAITING.store(true, Ordering::Relaxed);
        c.feed(GET);
        assert_eq!(c.process(), Progress::Close);
        let second = String::from_utf8_lossy(c.output()).into_owned();
        assert_eq!(statuses(&second), vec![200]);
        assert!(second.contains("Connection: close"), "{second}");
    }
}
