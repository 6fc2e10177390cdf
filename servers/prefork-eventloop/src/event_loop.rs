//! One child's event loop: epoll (edge-triggered, through mio) and callbacks.
//!
//! There is no async runtime and no coroutine here: each connection is an explicit state
//! record ([`Connection`]) and the loop calls back into it on readiness — that hand-written
//! state is the point of the model, as in Workerman's `onConnect`/`onMessage`/`onClose`.
//!
//! ```text
//!   epoll_wait ─► listener readable ─► on_accept   (accept until EAGAIN)
//!              ├► socket readable   ─► on_readable ─► advance: read → on_message → write
//!              ├► socket writable   ─► on_writable ─► advance: resume a partial write
//!              ├► timer due         ─► on_timer    ─► advance: send a delayed reply
//!              └► stop pipe         ─► begin_stop  (stop accepting, close idle conns)
//!   advance ends in: wait for the next edge │ start a timer │ on_close
//! ```
//!
//! The per-connection state machine itself (edge-triggered reads until a short read,
//! bounded output, lingering close) is `common::evconn::EvConn`, shared with the reactors
//! of `reactor-workers`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::time::Instant;

use common::codec::Conn;
use common::evconn::{EvConn, Next};
use common::{listener, shutdown, stats, supervisor};
use mio::net::{TcpListener, TcpStream};
use mio::unix::pipe;
use mio::{Events, Interest, Poll, Token};
use slab::Slab;

const LISTENER: Token = Token(usize::MAX - 1);
const WAKE: Token = Token(usize::MAX - 2);
/// How often connection deadlines are checked.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// A child's loop: its poller, its connections and its timers.
struct EventLoop {
    poll: Poll,
    listener: Option<TcpListener>,
    conns: Slab<EvConn<TcpStream>>,
    /// (due, slab key, connection id), earliest first.
    timers: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    next_id: u64,
    stopping: bool,
    /// At `--max-conns`: the listener is out of the poll set until a connection closes.
    paused: bool,
    wake: pipe::Receiver,
    /// Kept open: the stop signal handler writes to it.
    _wake_tx: pipe::Sender,
}

/// Runs one child until it is asked to stop and its connections have finished.
pub fn run(listener: std::net::TcpListener, report: bool) -> Result<(), String> {
    shutdown::install();
    let mut el = EventLoop::new(listener).map_err(|e| format!("cannot start event loop: {e}"))?;
    supervisor::ready();
    el.run().map_err(|e| format!("event loop failed: {e}"))?;
    if report {
        stats::report(crate::ARCH);
    }
    Ok(())
}

impl EventLoop {
    fn new(listener: std::net::TcpListener) -> io::Result<Self> {
        let poll = Poll::new()?;
        listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(listener);
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let (wake_tx, mut wake) = pipe::new()?;
        poll.registry()
            .register(&mut wake, WAKE, Interest::READABLE)?;
        shutdown::set_wake_fd(wake_tx.as_raw_fd());
        Ok(EventLoop {
            poll,
            listener: Some(listener),
            conns: Slab::with_capacity(1024),
            timers: BinaryHeap::new(),
            next_id: 0,
            stopping: false,
            paused: false,
            wake,
            _wake_tx: wake_tx,
        })
    }

    fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let mut next_sweep = Instant::now() + SWEEP_EVERY;
        while !(self.stopping && self.conns.is_empty()) {
            // Wake at least once a second for the deadline sweep.
            let now = Instant::now();
            let timeout = self
                .timers
                .peek()
                .map_or(next_sweep, |Reverse((due, _, _))| (*due).min(next_sweep))
                .saturating_duration_since(now);
            match self.poll.poll(&mut events, Some(timeout)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            if shutdown::requested() && !self.stopping {
                self.begin_stop();
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.on_accept(),
                    WAKE => self.drain_wake(),
                    Token(key) => {
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            self.on_readable(key, event.is_read_closed() || event.is_error());
                        } else if event.is_writable() {
                            self.on_writable(key);
                        }
                    }
                }
            }
            self.on_timers();
            if Instant::now() >= next_sweep {
                self.sweep();
                next_sweep = Instant::now() + SWEEP_EVERY;
            }
        }
        Ok(())
    }

    /// Accepts until the queue is empty. On a shared socket this child may lose every
    /// race to a sibling woken by the same connection: that is the thundering herd.
    fn on_accept(&mut self) {
        let Some(listener) = self.listener.as_ref() else {
            return;
        };
        loop {
            if self.conns.len() >= common::cli::max_conns() {
                // At the limit: stop accepting and leave new connections queued in the
                // kernel instead of accepting and failing them.
                self.pause_accepting();
                return;
            }
            match listener.accept() {
                Ok((mut stream, _)) => {
                    let _ = listener::tune_accepted(&stream);
                    let entry = self.conns.vacant_entry();
                    let key = entry.key();
                    // Both interests at once and edge-triggered: no epoll_ctl is needed
                    // later when a write blocks.
                    if self
                        .poll
                        .registry()
                        .register(
                            &mut stream,
                            Token(key),
                            Interest::READABLE | Interest::WRITABLE,
                        )
                        .is_err()
                    {
                        continue;
                    }
                    self.next_id += 1;
                    entry.insert(EvConn::new(stream, Conn::new(), self.next_id));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => {
                    // EMFILE/ENFILE: stop for this round instead of spinning.
                    eprintln!("{}: accept failed: {e}", crate::ARCH);
                    return;
                }
            }
        }
    }

    fn on_readable(&mut self, key: usize, peer_closed: bool) {
        if let Some(c) = self.conns.get_mut(key) {
            c.readable = true;
            c.peer_closed |= peer_closed;
        }
        self.advance(key);
    }

    fn on_writable(&mut self, key: usize) {
        self.advance(key);
    }

    /// Runs due timers: a handler's wait ended, or a lingering close ran out of time.
    /// Closes the connections whose peer missed a deadline (slowloris: 408; idle
    /// keep-alive: silently). One pass a second over all connections costs less than a
    /// timer per request.
    fn sweep(&mut self) {
        let now = Instant::now();
        let due: Vec<usize> = self
            .conns
            .iter_mut()
            .filter_map(|(key, c)| c.expire_if_due(now).then_some(key))
            .collect();
        for key in due {
            self.advance(key);
        }
    }

    fn on_timers(&mut self) {
        let now = Instant::now();
        while let Some(&Reverse((due, key, id))) = self.timers.peek() {
            if due > now {
                break;
            }
            self.timers.pop();
            let Some(c) = self.conns.get_mut(key).filter(|c| c.id == id) else {
                continue;
            };
            if c.on_timer() {
                self.on_close(key);
            } else {
                self.advance(key);
            }
        }
    }

    /// Drives one connection and carries out what it asks for.
    fn advance(&mut self, key: usize) {
        let stopping = self.stopping;
        let Some(c) = self.conns.get_mut(key) else {
            return;
        };
        match c.advance(stopping) {
            Next::Pending => {}
            Next::Timer(due) => self.timers.push(Reverse((due, key, c.id))),
            // Conn::new() connections handle their requests here: nothing is forwarded.
            Next::Close | Next::Forward => self.on_close(key),
        }
    }

    fn pause_accepting(&mut self) {
        if let Some(l) = self.listener.as_mut() {
            if !self.paused && self.poll.registry().deregister(l).is_ok() {
                self.paused = true;
            }
        }
    }

    /// Below the limit again: the listener rejoins the poll set (an edge is reported at
    /// once if connections are queued).
    fn resume_accepting(&mut self) {
        if let Some(l) = self.listener.as_mut() {
            if self.paused
                && self
                    .poll
                    .registry()
                    .register(l, LISTENER, Interest::READABLE)
                    .is_ok()
            {
                self.paused = false;
            }
        }
    }

    fn on_close(&mut self, key: usize) {
        if self.paused && !self.stopping {
            self.resume_accepting();
        }
        if self.conns.contains(key) {
            let mut c = self.conns.remove(key);
            let _ = self.poll.registry().deregister(&mut c.stream);
        }
    }

    /// Stop accepting (the socket stays open in the siblings and the master) and close
    /// every idle connection; busy ones close when their request is answered.
    fn begin_stop(&mut self) {
        self.stopping = true;
        if let Some(mut l) = self.listener.take() {
            if !self.paused {
                let _ = self.poll.registry().deregister(&mut l);
            }
        }
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            self.advance(key);
        }
    }

    fn drain_wake(&mut self) {
        let mut scratch = [0u8; 64];
        while matches!(self.wake.read(&mut scratch), Ok(n) if n > 0) {}
    }
}
