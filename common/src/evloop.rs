//! The epoll (mio) event loop that every loop of archzoo shares: the table of client
//! connections with their timers and deadline sweep ([`ConnTable`]), the listening socket
//! with its accept loop, `--max-conns` pause and EMFILE back-off ([`Acceptor`]), and the
//! loop itself ([`EventLoop::run`]: poll, stop, dispatch, timers, accept retry) over a
//! [`Core`] of those. What a loop does with a complete request — answer it
//! (a [`crate::codec::Answer`] loop) or forward it to a worker (a [`crate::codec::Forward`] one) — and any sockets of its own
//! (a stop pipe, worker links) stay in the server, behind the [`EventLoop`] callbacks.
//!
//! ```text
//!   poll ─► listener readable ─► accept  (until EAGAIN, --max-conns or EMFILE → back off)
//!        ├► connection event  ─► advance: read → answer/forward → write │ timer │ close
//!        ├► host token        ─► EventLoop::on_host_event (stop pipe, worker links, …)
//!        ├► timers, sweep     ─► advance / close  (delayed replies, 408, idle close)
//!        └► stop requested    ─► begin_stop: stop accepting, close idle connections
//! ```

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Registry, Token};
use slab::Slab;

use crate::codec::{Answer, Conn, ConnConfig, Mode};
use crate::evconn::{EvConn, Next};
use crate::listener::{self, ACCEPT_BACKOFF};

/// How often connection deadlines are checked.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The listener's token in every loop.
pub const LISTENER: Token = Token(usize::MAX - 1);
/// Tokens from here up (except [`LISTENER`]) belong to the host ([`EventLoop::on_host_event`]);
/// below are client connections (their [`ConnTable`] keys).
pub const HOST_TOKENS: usize = usize::MAX / 4;

/// What every loop owns: its poller, its listener, its connections, and whether it stops.
pub struct Core<M: Mode = Answer> {
    pub poll: Poll,
    pub acceptor: Acceptor,
    pub conns: ConnTable<M>,
    /// A stop was requested: no more accepting; the loop ends once `conns` is empty.
    pub stopping: bool,
    /// What each accepted connection's codec is built from.
    config: ConnConfig,
    /// For log lines.
    arch: &'static str,
}

impl<M: Mode> Core<M> {
    /// A poller with `listener` registered under [`LISTENER`].
    pub fn new(
        listener: std::net::TcpListener,
        config: ConnConfig,
        arch: &'static str,
    ) -> io::Result<Self> {
        Core::with_poll(Poll::new()?, listener, config, arch)
    }

    /// The same over a poller made earlier (whose registry others needed first, e.g. for
    /// a `mio::Waker`).
    pub fn with_poll(
        poll: Poll,
        listener: std::net::TcpListener,
        config: ConnConfig,
        arch: &'static str,
    ) -> io::Result<Self> {
        let acceptor = Acceptor::new(listener, poll.registry(), LISTENER)?;
        Ok(Core {
            poll,
            acceptor,
            conns: ConnTable::with_capacity(config.max_conns),
            stopping: false,
            config,
            arch,
        })
    }
}

/// A server's epoll loop: the shared run loop and connection handling as provided
/// methods, over the server's [`Core`] and its callbacks.
pub trait EventLoop {
    /// Whether this loop's connections answer their requests or forward them.
    type Mode: Mode;

    fn core(&mut self) -> &mut Core<Self::Mode>;

    /// Whether the process was asked to stop (checked after every poll).
    fn stop_requested(&self) -> bool;

    /// An event on one of the host's own tokens (≥ [`HOST_TOKENS`]).
    fn on_host_event(&mut self, event: &Event);

    /// A connection holds a complete request to forward ([`Action::Forward`]). Only a
    /// [`crate::codec::Forward`] loop's connections produce one, so the others need not
    /// say anything about it.
    fn on_forward(&mut self, key: usize) {
        self.close(key);
    }

    /// When the host's own timer is due (for the poll timeout).
    fn host_timer(&self, _now: Instant) -> Option<Duration> {
        None
    }

    /// After every poll: run the host's due timers.
    fn on_host_timer(&mut self, _now: Instant) {}

    /// Once per pass, after every event and timer of one poll was handled: the moment to
    /// write what the pass gathered (a reactor sends each worker the requests of every
    /// connection it read, in one write).
    fn end_of_pass(&mut self) {}

    /// Runs until a stop was requested and every connection has finished.
    fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        loop {
            let now = Instant::now();
            let host_timer = self.host_timer(now);
            let core = self.core();
            if core.stopping && core.conns.is_empty() {
                return Ok(());
            }
            let timeout = [core.acceptor.retry_in(now), host_timer]
                .into_iter()
                .flatten()
                .fold(core.conns.timeout(now), Duration::min);
            match core.poll.poll(&mut events, Some(timeout)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            if self.stop_requested() && !self.core().stopping {
                self.begin_stop();
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    Token(t) if t >= HOST_TOKENS => self.on_host_event(event),
                    Token(key) => {
                        let closed = event.is_read_closed() || event.is_error();
                        self.core().conns.on_event(key, event.is_readable(), closed);
                        self.advance(key);
                    }
                }
            }
            self.on_timers();
            let now = Instant::now();
            if self.core().acceptor.retry_due(now) {
                self.accept();
            }
            self.on_host_timer(now);
            self.end_of_pass();
        }
    }

    /// Accepts until the queue is empty. On a shared socket this loop may lose every
    /// race to a sibling woken by the same connection: that is the thundering herd.
    fn accept(&mut self) {
        let core = self.core();
        core.acceptor.accept(
            core.poll.registry(),
            &mut core.conns,
            &core.config,
            core.arch,
        );
    }

    /// Drives connection `key` as far as it goes and carries out what it asks for: every
    /// pipelined request it holds is forwarded before it waits.
    fn advance(&mut self, key: usize) {
        loop {
            let core = self.core();
            match core.conns.advance(key, core.stopping) {
                Action::Idle => return,
                Action::Forward => self.on_forward(key),
                Action::Close => return self.close(key),
            }
        }
    }

    /// Closes connection `key`; below `--max-conns` again, accepting resumes.
    fn close(&mut self, key: usize) {
        let core = self.core();
        core.conns.close(key);
        if !core.stopping {
            core.acceptor.resume(core.poll.registry());
        }
    }

    /// Due timers (a handler's wait ended, a lingering close ran out) and the deadline
    /// sweep (slowloris → 408, idle keep-alive → close).
    fn on_timers(&mut self) {
        let (advance, close) = self.core().conns.due(Instant::now());
        for key in close {
            self.close(key);
        }
        for key in advance {
            self.advance(key);
        }
    }

    /// Stop accepting (the socket may stay open in siblings and the master) and close every
    /// idle connection; busy ones close when their request is answered.
    fn begin_stop(&mut self) {
        let core = self.core();
        core.stopping = true;
        core.acceptor.stop(core.poll.registry());
        for key in core.conns.keys() {
            self.advance(key);
        }
    }
}

/// What the loop must do for a connection after it ran.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing until its next event, timer or delivered response.
    Idle,
    /// Close it ([`ConnTable::close`]).
    Close,
    /// Send its complete request on ([`Next::Forward`]).
    Forward,
}

/// Most connection entries reserved up front (see [`ConnTable::with_capacity`]): the
/// descriptor limit of a process (`fs.nr_open`'s default); past it the table grows.
const MAX_RESERVED: usize = 1 << 20;

/// Client connections keyed by their epoll token, with their timers.
pub struct ConnTable<M: Mode = Answer> {
    conns: Slab<EvConn<TcpStream, M>>,
    /// (due, key, connection id), earliest first.
    timers: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    next_id: u64,
    next_sweep: Instant,
}

impl<M: Mode> Default for ConnTable<M> {
    fn default() -> Self {
        ConnTable::new()
    }
}

impl<M: Mode> ConnTable<M> {
    pub fn new() -> Self {
        ConnTable::with_capacity(1024)
    }

    /// A table with room for `max_conns` connections reserved up front, as nginx allocates
    /// its `worker_connections` array once: reserved address space costs nothing until a
    /// connection uses its entry, whereas a table grown by doubling leaves the arrays it
    /// outgrew behind in the allocator (measured: ~550 bytes per connection at 5,000).
    pub fn with_capacity(max_conns: usize) -> Self {
        ConnTable {
            conns: Slab::with_capacity(max_conns.min(MAX_RESERVED)),
            timers: BinaryHeap::new(),
            next_id: 0,
            next_sweep: Instant::now() + SWEEP_EVERY,
        }
    }

    pub fn len(&self) -> usize {
        self.conns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    pub fn get(&self, key: usize) -> Option<&EvConn<TcpStream, M>> {
        self.conns.get(key)
    }

    pub fn get_mut(&mut self, key: usize) -> Option<&mut EvConn<TcpStream, M>> {
        self.conns.get_mut(key)
    }

    /// Every key, for a pass over all connections (a stop).
    pub fn keys(&self) -> Vec<usize> {
        self.conns.iter().map(|(k, _)| k).collect()
    }

    /// Records a readiness event: readable (or closed, which must be read to its end).
    pub fn on_event(&mut self, key: usize, readable: bool, closed: bool) {
        if let Some(c) = self.conns.get_mut(key) {
            c.readable |= readable || closed;
            c.peer_closed |= closed;
        }
    }

    /// Registers an accepted connection under a fresh key.
    fn insert(
        &mut self,
        registry: &Registry,
        mut stream: TcpStream,
        conn: Conn<M>,
    ) -> io::Result<usize> {
        let entry = self.conns.vacant_entry();
        let key = entry.key();
        // Both interests at once and edge-triggered: no epoll_ctl is needed later when a
        // write blocks.
        registry.register(
            &mut stream,
            Token(key),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        self.next_id += 1;
        entry.insert(EvConn::new(stream, conn, self.next_id));
        Ok(key)
    }

    /// Runs connection `key` as far as it goes; arms its timer if it asks for one.
    pub fn advance(&mut self, key: usize, stopping: bool) -> Action {
        let Some(c) = self.conns.get_mut(key) else {
            return Action::Idle;
        };
        match c.advance(stopping) {
            Next::Pending => Action::Idle,
            Next::Timer(due) => {
                self.timers.push(Reverse((due, key, c.id)));
                Action::Idle
            }
            Next::Close => Action::Close,
            Next::Forward => Action::Forward,
        }
    }

    /// Closes and forgets connection `key`. No `epoll_ctl(DEL)` first: closing a socket's
    /// only descriptor takes it out of the epoll set, and no process forks while it holds
    /// client sockets (workers are forked before they accept), so the descriptor is the
    /// only one — a system call per connection saved.
    pub fn close(&mut self, key: usize) {
        self.conns.try_remove(key);
    }

    /// How long the loop may block: until the next timer or the next deadline sweep.
    pub fn timeout(&self, now: Instant) -> Duration {
        self.timers
            .peek()
            .map_or(self.next_sweep, |Reverse((due, _, _))| {
                (*due).min(self.next_sweep)
            })
            .saturating_duration_since(now)
    }

    /// Due timers (a handler's wait ended, a lingering close ran out) and, once a second,
    /// the deadline sweep (slowloris → 408, idle keep-alive → close). Returns the keys to
    /// advance and the keys to close. One pass a second over every connection costs less
    /// than a timer per request.
    pub fn due(&mut self, now: Instant) -> (Vec<usize>, Vec<usize>) {
        let (mut advance, mut close) = (Vec::new(), Vec::new());
        while let Some(&Reverse((due, key, id))) = self.timers.peek() {
            if due > now {
                break;
            }
            self.timers.pop();
            if let Some(c) = self.conns.get_mut(key).filter(|c| c.id == id) {
                if c.on_timer() {
                    close.push(key);
                } else {
                    advance.push(key);
                }
            }
        }
        if now >= self.next_sweep {
            for (key, c) in self.conns.iter_mut() {
                if c.expire_if_due(now) {
                    advance.push(key);
                }
            }
            self.next_sweep = now + SWEEP_EVERY;
        }
        (advance, close)
    }
}

/// A loop's listening socket: accepts into a [`ConnTable`] up to `--max-conns`, where it
/// leaves the poll set so new connections wait in the kernel's queue.
pub struct Acceptor {
    listener: Option<TcpListener>,
    token: Token,
    paused: bool,
    backoff: Backoff,
}

/// The retry timer of an edge-triggered listener after an accept error (EMFILE/ENFILE).
///
/// The connections still queued raise no new edge, so a loop that only waits for
/// readiness would never accept them: it must come back by itself. Every listener an
/// epoll loop accepts from needs one (client sockets, and the reactor's Unix socket for
/// worker links — losing that edge once left a restarted worker unconnected for good).
#[derive(Debug, Default)]
pub struct Backoff {
    retry_at: Option<Instant>,
}

impl Backoff {
    /// True while backing off: do not accept yet.
    pub fn waiting(&self, now: Instant) -> bool {
        self.retry_at.is_some_and(|t| now < t)
    }

    /// An accept failed: try again after [`ACCEPT_BACKOFF`].
    pub fn failed(&mut self, now: Instant) {
        self.retry_at = Some(now + ACCEPT_BACKOFF);
    }

    /// Accepting again (called when the retry is taken).
    pub fn clear(&mut self) {
        self.retry_at = None;
    }

    /// How long until the retry is due (for the poll timeout); `None` when not backing off.
    pub fn retry_in(&self, now: Instant) -> Option<Duration> {
        self.retry_at.map(|t| t.saturating_duration_since(now))
    }

    /// True when a retry is due: call the accept again.
    pub fn due(&self, now: Instant) -> bool {
        self.retry_at.is_some_and(|t| now >= t)
    }
}

impl Acceptor {
    pub fn new(
        listener: std::net::TcpListener,
        registry: &Registry,
        token: Token,
    ) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(listener);
        registry.register(&mut listener, token, Interest::READABLE)?;
        Ok(Acceptor {
            listener: Some(listener),
            token,
            paused: false,
            backoff: Backoff::default(),
        })
    }

    /// Accepts every connection the queue holds (edge-triggered: the wake-up must take them
    /// all) or until the table is full; each connection gets a codec built from `config`.
    /// The queue's length is asked first ([`listener::queued`]) and exactly that many are
    /// accepted: no `accept4` runs into an empty queue, the costliest failed call there is.
    /// A connection that comes after the question raises a new edge. On a shared socket an
    /// accept may still come back empty — a sibling won the race for the same wake-up
    /// (thundering herd).
    pub fn accept<M: Mode>(
        &mut self,
        registry: &Registry,
        table: &mut ConnTable<M>,
        config: &ConnConfig,
        arch: &str,
    ) {
        if self.backoff.waiting(Instant::now()) {
            return;
        }
        self.backoff.clear();
        let Some(socket) = self.listener.as_ref() else {
            return;
        };
        let mut left = listener::queued(socket).unwrap_or(usize::MAX);
        while left > 0 {
            left -= 1;
            if table.len() >= config.max_conns {
                self.pause(registry);
                return;
            }
            match socket.accept() {
                Ok((stream, _)) => {
                    let _ = table.insert(registry, stream, Conn::open(config));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // Interrupted took nothing from the queue: that connection is still owed.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => left += 1,
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                Err(e) => {
                    // EMFILE/ENFILE: back off instead of spinning, and come back on a
                    // timer (see `retry_in`): queued connections raise no new edge.
                    eprintln!("{arch}: accept failed: {e}; backing off");
                    self.backoff.failed(Instant::now());
                    return;
                }
            }
        }
    }

    /// How long until a backed-off accept should be retried (for the poll timeout).
    pub fn retry_in(&self, now: Instant) -> Option<Duration> {
        self.backoff.retry_in(now)
    }

    /// True when a backed-off accept is due: call [`Acceptor::accept`].
    pub fn retry_due(&self, now: Instant) -> bool {
        self.backoff.due(now)
    }

    fn pause(&mut self, registry: &Registry) {
        if let Some(l) = self.listener.as_mut() {
            if !self.paused && registry.deregister(l).is_ok() {
                self.paused = true;
            }
        }
    }

    /// A connection closed: below the limit again, the listener rejoins the poll set (an
    /// edge is reported at once if connections are queued).
    pub fn resume(&mut self, registry: &Registry) {
        if let Some(l) = self.listener.as_mut() {
            if self.paused && registry.register(l, self.token, Interest::READABLE).is_ok() {
                self.paused = false;
            }
        }
    }

    /// Stops accepting for good (the socket itself may stay open elsewhere).
    pub fn stop(&mut self, registry: &Registry) {
        if let Some(mut l) = self.listener.take() {
            if !self.paused {
                let _ = registry.deregister(&mut l);
            }
        }
    }
}
