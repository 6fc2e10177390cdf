//! One child's event loop: epoll (edge-triggered, through mio) and callbacks.
//!
//! There is no async runtime and no coroutine here: each connection is an explicit state
//! record (`common::evconn::EvConn`) and the loop calls back into it on readiness — that
//! hand-written state is the point of the model, as in Workerman's
//! `onConnect`/`onMessage`/`onClose`.
//!
//! ```text
//!   epoll_wait ─► listener readable ─► on_accept   (accept until EAGAIN or --max-conns)
//!              ├► socket readable   ─► on_readable ─► advance: read → on_message → write
//!              ├► socket writable   ─► on_writable ─► advance: resume a partial write
//!              ├► timer due         ─► on_timer    ─► advance: send a delayed reply
//!              ├► once a second     ─► sweep       ─► deadlines: 408 / idle close
//!              └► stop pipe         ─► begin_stop  (stop accepting, close idle conns)
//!   advance ends in: wait for the next edge │ start a timer │ on_close
//! ```
//!
//! The per-connection state machine (edge-triggered reads until a short read, bounded
//! output, lingering close) is `common::evconn::EvConn`, and the connection table and
//! accepting socket are `common::evloop`: shared with the reactors of `reactor-workers`.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::time::Instant;

use common::codec::Conn;
use common::evloop::{Acceptor, Action, ConnTable};
use common::{shutdown, stats, supervisor};
use mio::unix::pipe;
use mio::{Events, Interest, Poll, Token};

const LISTENER: Token = Token(usize::MAX - 1);
const WAKE: Token = Token(usize::MAX - 2);

/// A child's loop: its poller, its listener and its connections.
struct EventLoop {
    poll: Poll,
    acceptor: Acceptor,
    conns: ConnTable,
    stopping: bool,
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
        let acceptor = Acceptor::new(listener, poll.registry(), LISTENER)?;
        let (wake_tx, mut wake) = pipe::new()?;
        poll.registry()
            .register(&mut wake, WAKE, Interest::READABLE)?;
        shutdown::set_wake_fd(wake_tx.as_raw_fd());
        Ok(EventLoop {
            poll,
            acceptor,
            conns: ConnTable::new(),
            stopping: false,
            wake,
            _wake_tx: wake_tx,
        })
    }

    fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        while !(self.stopping && self.conns.is_empty()) {
            let now = Instant::now();
            let timeout = self.conns.timeout(now);
            let timeout = self
                .acceptor
                .retry_in(now)
                .map_or(timeout, |r| r.min(timeout));
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
                        let closed = event.is_read_closed() || event.is_error();
                        if event.is_readable() || closed {
                            self.on_readable(key, closed);
                        } else if event.is_writable() {
                            self.on_writable(key);
                        }
                    }
                }
            }
            self.on_timers();
            if self.acceptor.retry_due(Instant::now()) {
                self.on_accept();
            }
        }
        Ok(())
    }

    /// Accepts until the queue is empty. On a shared socket this child may lose every
    /// race to a sibling woken by the same connection: that is the thundering herd.
    fn on_accept(&mut self) {
        self.acceptor.accept(
            self.poll.registry(),
            &mut self.conns,
            Conn::new,
            crate::ARCH,
        );
    }

    fn on_readable(&mut self, key: usize, peer_closed: bool) {
        self.conns.on_event(key, true, peer_closed);
        self.advance(key);
    }

    fn on_writable(&mut self, key: usize) {
        self.advance(key);
    }

    /// Due timers (a handler's wait ended, a lingering close ran out) and the deadline
    /// sweep (slowloris → 408, idle keep-alive → close).
    fn on_timers(&mut self) {
        let (advance, close) = self.conns.due(Instant::now());
        for key in close {
            self.on_close(key);
        }
        for key in advance {
            self.advance(key);
        }
    }

    /// Drives one connection and carries out what it asks for.
    fn advance(&mut self, key: usize) {
        match self.conns.advance(key, self.stopping) {
            Action::Idle => {}
            // Conn::new() connections answer their requests here: nothing is forwarded.
            Action::Close | Action::Forward => self.on_close(key),
        }
    }

    fn on_close(&mut self, key: usize) {
        self.conns.close(key, self.poll.registry());
        if !self.stopping {
            self.acceptor.resume(self.poll.registry());
        }
    }

    /// Stop accepting (the socket stays open in the siblings and the master) and close
    /// every idle connection; busy ones close when their request is answered.
    fn begin_stop(&mut self) {
        self.stopping = true;
        self.acceptor.stop(self.poll.registry());
        for key in self.conns.keys() {
            self.advance(key);
        }
    }

    fn drain_wake(&mut self) {
        let mut scratch = [0u8; 64];
        while matches!(self.wake.read(&mut scratch), Ok(n) if n > 0) {}
    }
}
