//! A reactor thread: owns client connections and links to every worker.
//!
//! Client connections are `common::evconn::EvConn`s in [`Forward`] mode: the
//! shared codec parses, and each complete request comes out as `Next::Forward`. The
//! reactor frames it, picks a worker with the `--dispatch` rule, and appends it to that
//! worker's link; the response frames coming back are delivered to their connections,
//! which write them — pipelined requests all go on at once, answered in order.
//!
//! The hop is batched both ways: the requests of every connection read in one pass of the
//! loop go to a worker in **one** write at the end of the pass (`end_of_pass`), the worker
//! answers all it read in one write, and one read here takes them all back. Under load
//! the hop then costs a few system calls per batch, not per request; an idle server still
//! answers a lone request at once (the pass ends right after it).
//!
//! A link that breaks (its worker died) answers every request the worker had received
//! with 502: it may have had effects, so it is not retried behind the client's back. A
//! request not yet written to the dead worker is safe to keep: it waits, with those routed
//! to a link that is down, in the link's queue for the restarted worker
//! (`fd-modulo` keeps a connection on its worker); `round-robin` and `idle` prefer links
//! that are up.

use std::collections::{HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use common::codec::{ConnConfig, Forward};
use common::evloop::{Backoff, Core, EventLoop, HOST_TOKENS};
use common::response::Response;
use mio::event::Event;
use mio::net::{UnixListener, UnixStream};
use mio::{Interest, Poll, Token, Waker};
use slab::Slab;

use crate::ipc;

/// How a reactor picks the worker for a request (Swoole's `dispatch_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Dispatch {
    /// Mode 1: each request to the next worker in turn.
    RoundRobin,
    /// Mode 2 (Swoole's long-time default): worker = connection fd modulo workers, so a
    /// keep-alive connection always lands on the same worker.
    FdModulo,
    /// Mode 3: the worker with the fewest requests in flight (from all reactors).
    Idle,
}

// Host tokens, all ≥ HOST_TOKENS (below are client connections); the listener's is
// common::evloop::LISTENER (usize::MAX − 1).
/// Each reactor's waker (the main thread wakes it for a stop, reactor 0 for a handoff).
pub const WAKE_TOKEN: Token = Token(usize::MAX - 2);
const WAKE: Token = WAKE_TOKEN;
const UNIX: Token = Token(usize::MAX - 3);
/// Tokens from here up are worker links (index = token − LINKS).
const LINKS: usize = usize::MAX / 2;
/// Tokens from here up (to LINKS) are worker connections that have not said hello yet.
const GREETING: usize = HOST_TOKENS;

/// One worker as seen from one reactor.
#[derive(Default)]
struct Link {
    stream: Option<UnixStream>,
    /// Framed requests not yet (fully) written; they wait here while the worker is down.
    out: Vec<u8>,
    /// Bytes of `out` already written.
    written: usize,
    /// The requests in `out`: token, and where the frame starts and ends.
    queued: VecDeque<(u64, usize, usize)>,
    /// Requests written to this worker and not answered: lost if it dies.
    sent: HashSet<u64>,
    /// Response frames as they arrive.
    frames: ipc::Frames,
    /// Listed in the reactor's `dirty`: has requests to write at the end of the pass.
    dirty: bool,
    /// Registered for writability too: only while a write found the link full. A Unix
    /// socket wakes a writer's epoll every time its peer takes data off it — here, every
    /// batch a worker reads — so a link always registered for it woke the reactor once a
    /// batch for nothing (a read into an empty link, and on one CPU a switch between the
    /// two processes).
    wants_write: bool,
}

/// A link handed from reactor 0 (which accepts worker connections) to its reactor.
pub type LinkHandoff = (usize, std::os::unix::net::UnixStream);

/// What a reactor needs to start.
pub struct Setup {
    pub id: usize,
    pub listener: std::net::TcpListener,
    /// What each client connection's (forwarding) codec is built from.
    pub conn: ConnConfig,
    /// Reactor 0 accepts the workers' connections and hands each to its reactor.
    pub unix: Option<std::os::unix::net::UnixListener>,
    pub peers: Vec<(mpsc::Sender<LinkHandoff>, Arc<Waker>)>,
    pub inbox: mpsc::Receiver<LinkHandoff>,
    pub poll: Poll,
    pub workers: usize,
    pub dispatch: Dispatch,
    pub stopping: Arc<AtomicBool>,
    /// Requests in flight per worker, across all reactors (Swoole keeps this in shared
    /// memory for dispatch mode 3).
    pub busy: Arc<Vec<AtomicUsize>>,
    /// Round-robin's turn, across all reactors: Swoole's `worker_round_id`, one atomic
    /// counter its reactor threads share. A turn per reactor would send each reactor's
    /// first request to worker 0, wherever the others had just sent theirs.
    pub round: Arc<AtomicUsize>,
}

pub struct Reactor {
    id: usize,
    /// Poller, client listener, client connections (forwarding codecs), stopping flag.
    core: Core<Forward>,
    unix: Option<UnixListener>,
    /// Accept errors on `unix` (EMFILE under a connection flood) retry on a timer.
    unix_backoff: Backoff,
    peers: Vec<(mpsc::Sender<LinkHandoff>, Arc<Waker>)>,
    inbox: mpsc::Receiver<LinkHandoff>,
    greeting: Slab<(UnixStream, ipc::Frames)>,
    links: Vec<Link>,
    /// Links with requests appended in this pass.
    dirty: Vec<usize>,
    /// Connections that got responses in this read of a link: each is advanced once, so
    /// a pipelined batch's answers leave in one write.
    answered: Vec<usize>,
    dispatch: Dispatch,
    round: Arc<AtomicUsize>,
    stop_flag: Arc<AtomicBool>,
    busy: Arc<Vec<AtomicUsize>>,
}

/// A token names a client connection, its generation (so that a late response for a
/// connection that closed, and whose slot was reused, is dropped) and the request's number
/// on it.
fn token(key: usize, id: u64, seq: u16) -> u64 {
    ((key as u64) << 32) | ((id & 0xffff) << 16) | seq as u64
}

/// The connection key and request number a [`token`] was made from (its generation is
/// checked by making the token again).
fn untoken(t: u64) -> (usize, u16) {
    ((t >> 32) as usize, t as u16)
}

impl Reactor {
    pub fn new(setup: Setup) -> io::Result<Self> {
        let core = Core::with_poll(setup.poll, setup.listener, setup.conn, crate::ARCH)?;
        let unix = match setup.unix {
            Some(u) => {
                u.set_nonblocking(true)?;
                let mut u = UnixListener::from_std(u);
                core.poll
                    .registry()
                    .register(&mut u, UNIX, Interest::READABLE)?;
                Some(u)
            }
            None => None,
        };
        Ok(Reactor {
            id: setup.id,
            core,
            unix,
            unix_backoff: Backoff::default(),
            peers: setup.peers,
            inbox: setup.inbox,
            greeting: Slab::new(),
            links: (0..setup.workers).map(|_| Link::default()).collect(),
            dirty: Vec::new(),
            answered: Vec::new(),
            dispatch: setup.dispatch,
            round: setup.round,
            stop_flag: setup.stopping,
            busy: setup.busy,
        })
    }

    /// Runs until a stop was requested and every client connection has finished.
    pub fn run(&mut self) -> io::Result<()> {
        // Requests are counted by the workers; a reactor is not a worker in --stats.
        common::stats::forget_current_thread();
        EventLoop::run(self)
    }

    /// Reactor 0: a worker connected; wait for its hello to learn whose link it is.
    fn on_worker_connect(&mut self) {
        if self.unix_backoff.waiting(Instant::now()) {
            return;
        }
        self.unix_backoff.clear();
        loop {
            let Some(accepted) = self.unix.as_ref().map(UnixListener::accept) else {
                return;
            };
            let mut stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE while clients hold every descriptor: the worker's connection
                    // stays queued and raises no new edge, so come back on a timer.
                    eprintln!(
                        "{}: worker link accept failed: {e}; backing off",
                        crate::ARCH
                    );
                    self.unix_backoff.failed(Instant::now());
                    return;
                }
            };
            let entry = self.greeting.vacant_entry();
            let slot = entry.key();
            if self
                .core
                .poll
                .registry()
                .register(&mut stream, Token(GREETING + slot), Interest::READABLE)
                .is_ok()
            {
                entry.insert((stream, ipc::Frames::default()));
                // The hello may already be there: edge-triggered, so read it now.
                self.on_greeting(slot);
            }
        }
    }

    fn on_greeting(&mut self, slot: usize) {
        let Some((stream, frames)) = self.greeting.get_mut(slot) else {
            return;
        };
        let mut closed = false;
        loop {
            match stream.read(frames.spare()) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => frames.filled(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        let hello = match frames.next_frame() {
            Ok(Some(payload)) => ipc::decode_hello(payload).map_err(|_| ()),
            Ok(None) if !closed => return, // wait for the rest of the hello
            _ => Err(()),
        };
        let (mut stream, _) = self.greeting.remove(slot);
        let _ = self.core.poll.registry().deregister(&mut stream);
        let Ok((worker, reactor)) = hello else {
            return;
        };
        // Back to a std stream: it may belong to another reactor's poller.
        let std_stream = std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(stream));
        let (worker, reactor) = (worker as usize, reactor as usize);
        if reactor == self.id {
            self.attach(worker, std_stream);
        } else if let Some((tx, waker)) = self.peers.get(reactor) {
            let _ = tx.send((worker, std_stream));
            let _ = waker.wake();
        }
    }

    /// Links handed over by reactor 0.
    fn on_handoff(&mut self) {
        while let Ok((worker, stream)) = self.inbox.try_recv() {
            self.attach(worker, stream);
        }
    }

    /// A (re)started worker's link: flush what waited for it.
    fn attach(&mut self, worker: usize, stream: std::os::unix::net::UnixStream) {
        if self.links.get(worker).is_some_and(|l| l.stream.is_some()) {
            // The old link's end of file has not been seen yet: its worker is gone.
            self.on_link_lost(worker);
        }
        let Some(link) = self.links.get_mut(worker) else {
            return;
        };
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let mut stream = UnixStream::from_std(stream);
        let registry = self.core.poll.registry();
        if registry
            .register(&mut stream, Token(LINKS + worker), Interest::READABLE)
            .is_err()
        {
            return;
        }
        link.stream = Some(stream);
        link.wants_write = false;
        link.frames.clear();
        self.flush_link(worker);
    }

    fn on_link_event(&mut self, worker: usize) {
        self.flush_link(worker);
        let Some(link) = self.links.get_mut(worker) else {
            return;
        };
        let Some(stream) = link.stream.as_mut() else {
            return;
        };
        let mut broken = false;
        loop {
            let room = link.frames.spare();
            let asked = room.len();
            match stream.read(room) {
                Ok(0) => {
                    broken = true;
                    break;
                }
                Ok(n) => {
                    link.frames.filled(n);
                    if n < asked {
                        break; // short read: drained
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    broken = true;
                    break;
                }
            }
        }
        let mut answered = std::mem::take(&mut self.answered);
        loop {
            let link = &mut self.links[worker];
            let (t, response) = match link.frames.next_frame() {
                Ok(Some(payload)) => match ipc::decode_response(payload) {
                    Ok(reply) => reply,
                    Err(_) => {
                        broken = true;
                        break;
                    }
                },
                Ok(None) => break,
                Err(_) => {
                    broken = true;
                    break;
                }
            };
            if link.sent.remove(&t) {
                self.busy[worker].fetch_sub(1, Ordering::Relaxed);
            }
            answered.extend(self.deliver(t, response));
        }
        self.answer(answered);
        if broken {
            self.on_link_lost(worker);
        }
    }

    /// Advances each connection that got responses, once.
    fn answer(&mut self, mut keys: Vec<usize>) {
        keys.sort_unstable();
        keys.dedup();
        for &key in &keys {
            self.advance(key);
        }
        keys.clear();
        self.answered = keys;
    }

    /// The worker died (or broke the protocol): the requests it had received get 502;
    /// requests it never got (not yet written) stay queued for its restart.
    fn on_link_lost(&mut self, worker: usize) {
        let link = &mut self.links[worker];
        if let Some(mut stream) = link.stream.take() {
            let _ = self.core.poll.registry().deregister(&mut stream);
        }
        link.frames.clear();
        let mut lost: Vec<u64> = link.sent.drain().collect();
        if let Some(&(t, start, _)) = link.queued.front() {
            if start < link.written {
                // Half a frame reached the dead worker: that request is lost too.
                lost.push(t);
                link.queued.pop_front();
            }
        }
        // What the worker never got moves to the front, for its restart.
        let keep = link
            .queued
            .front()
            .map_or(link.out.len(), |&(_, start, _)| start);
        link.out.drain(..keep);
        for (_, start, end) in link.queued.iter_mut() {
            *start -= keep;
            *end -= keep;
        }
        link.written = 0;
        self.busy[worker].fetch_sub(lost.len(), Ordering::Relaxed);
        let mut answered = std::mem::take(&mut self.answered);
        for t in lost {
            let why =
                format!("502 Bad Gateway: worker {worker} exited while handling the request\n");
            answered.extend(self.deliver(t, Response::text(502, why)));
        }
        self.answer(answered);
    }

    /// Hands a response to its connection; returns the connection to advance, unless the
    /// client left meanwhile.
    fn deliver(&mut self, t: u64, response: Response) -> Option<usize> {
        let (key, seq) = untoken(t);
        let c = self.core.conns.get_mut(key)?;
        (token(key, c.id, seq) == t && c.deliver(seq, response)).then_some(key)
    }

    /// Writes as much of a link's queued requests as the socket takes.
    fn flush_link(&mut self, worker: usize) {
        let Some(link) = self.links.get_mut(worker) else {
            return;
        };
        let Some(stream) = link.stream.as_mut() else {
            return;
        };
        let mut broken = false;
        while link.written < link.out.len() {
            match stream.write(&link.out[link.written..]) {
                Ok(n) => link.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    broken = true;
                    break;
                }
            }
        }
        while let Some(&(t, _, end)) = link.queued.front() {
            if end > link.written {
                break;
            }
            link.sent.insert(t);
            link.queued.pop_front();
        }
        if link.written == link.out.len() {
            link.out.clear();
            link.written = 0;
        }
        // Wait for room only while there is something left to write (see `wants_write`);
        // re-registering reports the link at once if room came meanwhile.
        let blocked = !link.out.is_empty();
        if !broken && blocked != link.wants_write {
            let interest = if blocked {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            let token = Token(LINKS + worker);
            broken = self
                .core
                .poll
                .registry()
                .reregister(stream, token, interest)
                .is_err();
            link.wants_write = blocked;
        }
        if broken {
            self.on_link_lost(worker);
        }
    }

    /// Picks the worker for a request of client `key`.
    fn choose(&mut self, key: usize) -> usize {
        let n = self.links.len();
        let up = |l: &Link| l.stream.is_some();
        match self.dispatch {
            Dispatch::FdModulo => {
                use std::os::fd::AsRawFd;
                let fd = self.core.conns.get(key).map_or(0, |c| c.stream.as_raw_fd());
                fd as usize % n
            }
            Dispatch::RoundRobin => {
                let turn = self.round.fetch_add(1, Ordering::Relaxed);
                // A worker being restarted is skipped (its turn goes to the next one up).
                (0..n)
                    .map(|step| (turn + step) % n)
                    .find(|&w| up(&self.links[w]))
                    .unwrap_or(turn % n)
            }
            Dispatch::Idle => (0..n)
                .min_by_key(|&w| (!up(&self.links[w]), self.busy[w].load(Ordering::Relaxed)))
                .unwrap_or(0),
        }
    }

    /// Appends the request to the chosen worker's link; it is written at the end of the
    /// pass, with the others.
    fn forward(&mut self, key: usize) {
        let worker = self.choose(key);
        let Some(c) = self.core.conns.get(key) else {
            return;
        };
        let t = token(key, c.id, c.conn.forwarded_seq());
        let link = &mut self.links[worker];
        let start = link.out.len();
        ipc::encode_request(&mut link.out, t, c.conn.request());
        link.queued.push_back((t, start, link.out.len()));
        if !link.dirty {
            link.dirty = true;
            self.dirty.push(worker);
        }
        self.busy[worker].fetch_add(1, Ordering::Relaxed);
    }
}

impl EventLoop for Reactor {
    type Mode = Forward;

    fn core(&mut self) -> &mut Core<Forward> {
        &mut self.core
    }

    fn stop_requested(&self) -> bool {
        self.stop_flag.load(Ordering::SeqCst)
    }

    fn on_host_event(&mut self, event: &Event) {
        match event.token() {
            UNIX => self.on_worker_connect(),
            WAKE => self.on_handoff(),
            Token(t) if t >= LINKS => self.on_link_event(t - LINKS),
            Token(t) if t >= GREETING => self.on_greeting(t - GREETING),
            Token(_) => {}
        }
    }

    fn on_forward(&mut self, key: usize) {
        self.forward(key);
    }

    /// The worker-link listener's EMFILE back-off.
    fn host_timer(&self, now: Instant) -> Option<Duration> {
        self.unix_backoff.retry_in(now)
    }

    fn on_host_timer(&mut self, now: Instant) {
        if self.unix_backoff.due(now) {
            self.on_worker_connect();
        }
    }

    /// Every request this pass gathered goes to its worker in one write per link.
    fn end_of_pass(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for &worker in &dirty {
            self.links[worker].dirty = false;
            self.flush_link(worker);
        }
        dirty.clear();
        self.dirty = dirty;
    }
}
