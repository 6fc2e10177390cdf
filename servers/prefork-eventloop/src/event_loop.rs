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
//! Edge-triggered rules kept here: after a readable edge, read until a read comes back
//! *short* — a short read means the socket buffer is drained, so no extra `read` is spent
//! just to see EAGAIN. A write that does not complete keeps its bytes in the connection's
//! output buffer, and the connection reads nothing more until a writable edge lets it
//! finish: a client that stops reading cannot make the server buffer without bound.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use common::codec::{Conn, Progress};
use common::{linger, listener, shutdown, stats, supervisor};
use mio::net::{TcpListener, TcpStream};
use mio::unix::pipe;
use mio::{Events, Interest, Poll, Token};
use slab::Slab;

const LISTENER: Token = Token(usize::MAX - 1);
const WAKE: Token = Token(usize::MAX - 2);

/// What a connection's state machine wants from the loop after it ran.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// Nothing to do until the next readiness edge.
    Pending,
    /// Call back after this long (a handler's wait, or the end of a lingering close).
    Timer(Instant),
    /// Close and forget the connection.
    Close,
}

/// One client connection's state: the codec plus what the loop must remember between
/// callbacks.
struct Connection {
    stream: TcpStream,
    conn: Conn,
    /// Distinguishes this connection from a later one reusing its slab slot (timers).
    id: u64,
    /// A readable edge arrived and no read since came back short.
    readable: bool,
    /// The handler asked for a wait that has not started (output is flushed first).
    wait_for: Option<Duration>,
    /// A wait is running; its timer resumes the connection.
    waiting: bool,
    /// The codec decided to close: close once the output is written.
    closing: bool,
    /// Lingering close after an error: FIN sent, discarding input until this deadline.
    linger_until: Option<(Instant, usize)>,
}

impl Connection {
    /// Runs the connection as far as it can go without blocking.
    fn advance(&mut self, stopping: bool) -> Next {
        if self.linger_until.is_some() {
            return self.discard();
        }
        loop {
            // Write first: responses go out as soon as they exist.
            if !self.conn.output().is_empty() {
                match self.stream.write(self.conn.output()) {
                    Ok(n) => self.conn.written(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Pending,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Next::Close,
                }
                continue;
            }
            if self.closing {
                return self.on_closing();
            }
            if let Some(wait) = self.wait_for.take() {
                self.waiting = true;
                return Next::Timer(Instant::now() + wait);
            }
            if self.waiting {
                return Next::Pending;
            }
            if stopping && self.conn.is_idle() {
                return Next::Close;
            }
            // on_message: the codec answers everything buffered, in order.
            match self.conn.process() {
                // Forward never happens on a Conn::new() connection; closing is the safe answer.
                Progress::Close | Progress::Forward => self.closing = true,
                Progress::Wait(wait) => self.wait_for = Some(wait),
                Progress::Read if !self.conn.output().is_empty() => {}
                Progress::Read if !self.readable => return Next::Pending,
                Progress::Read => {
                    let buf = self.conn.read_buf();
                    let room = buf.len();
                    match self.stream.read(buf) {
                        Ok(0) => return Next::Close,
                        Ok(n) => {
                            self.conn.filled(n);
                            // A short read drained the socket: wait for the next edge.
                            self.readable = n == room;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.readable = false,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => return Next::Close,
                    }
                }
            }
        }
    }

    /// Output written and the codec wants to close: close, or linger after an error.
    fn on_closing(&mut self) -> Next {
        if !self.conn.should_linger() {
            return Next::Close;
        }
        let _ = self.stream.shutdown(Shutdown::Write);
        let deadline = Instant::now() + linger::TIMEOUT;
        self.linger_until = Some((deadline, 0));
        match self.discard() {
            Next::Pending => Next::Timer(deadline),
            other => other,
        }
    }

    /// Lingering close: read and discard until EOF, the byte limit or the deadline.
    fn discard(&mut self) -> Next {
        let mut scratch = [0u8; 4096];
        loop {
            let Some((deadline, drained)) = self.linger_until.as_mut() else {
                return Next::Close;
            };
            if *drained >= linger::MAX_BYTES || Instant::now() >= *deadline {
                return Next::Close;
            }
            match self.stream.read(&mut scratch) {
                Ok(0) => return Next::Close,
                Ok(n) => *drained += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Pending,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
    }
}

/// A child's loop: its poller, its connections and its timers.
struct EventLoop {
    poll: Poll,
    listener: Option<TcpListener>,
    conns: Slab<Connection>,
    /// (due, slab key, connection id), earliest first.
    timers: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    next_id: u64,
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
            wake,
            _wake_tx: wake_tx,
        })
    }

    fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        while !(self.stopping && self.conns.is_empty()) {
            let timeout = self
                .timers
                .peek()
                .map(|Reverse((due, _, _))| due.saturating_duration_since(Instant::now()));
            match self.poll.poll(&mut events, timeout) {
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
                            self.on_readable(key);
                        } else if event.is_writable() {
                            self.on_writable(key);
                        }
                    }
                }
            }
            self.on_timers();
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
                    entry.insert(Connection {
                        stream,
                        conn: Conn::new(),
                        id: self.next_id,
                        readable: false,
                        wait_for: None,
                        waiting: false,
                        closing: false,
                        linger_until: None,
                    });
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

    fn on_readable(&mut self, key: usize) {
        if let Some(c) = self.conns.get_mut(key) {
            c.readable = true;
        }
        self.advance(key);
    }

    fn on_writable(&mut self, key: usize) {
        self.advance(key);
    }

    /// Runs due timers: a handler's wait ended, or a lingering close ran out of time.
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
            if c.linger_until.is_some() {
                self.on_close(key);
            } else {
                c.waiting = false;
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
            Next::Close => self.on_close(key),
        }
    }

    fn on_close(&mut self, key: usize) {
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
            let _ = self.poll.registry().deregister(&mut l);
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
