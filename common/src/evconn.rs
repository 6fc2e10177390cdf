//! One client connection driven by readiness callbacks (edge-triggered epoll), shared by
//! the event-loop servers (`prefork-eventloop` and the reactors of `reactor-workers`).
//!
//! An [`EvConn`] is the explicit per-connection state an event loop keeps between
//! callbacks: the codec, whether the socket may still hold bytes, a pending wait, a pending
//! close. [`EvConn::advance`] runs it as far as it can go without blocking and tells the
//! loop what to wait for next ([`Next`]).
//!
//! Edge-triggered rules kept here: after a readable edge, read until a read comes back
//! *short* — a short read means the socket buffer is drained, so no extra `read` is spent
//! just to see EAGAIN. A write that does not complete keeps its bytes in the output buffer,
//! and the connection reads nothing more until a writable edge lets it finish: a client
//! that stops reading cannot make the server buffer without bound.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use socket2::SockRef;

use crate::codec::{Answer, Conn, Forward, Mode, Step};
use crate::linger;
use crate::response::Response;

/// What a connection wants from the loop after it ran.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing to do until the next readiness edge (or a delivered response).
    Pending,
    /// Call [`EvConn::on_timer`] at this instant (a handler's wait, or the end of a
    /// lingering close).
    Timer(Instant),
    /// Close and forget the connection.
    Close,
    /// A forwarding connection has a complete request: send [`Conn::request`] on (its
    /// number is [`Conn::forwarded_seq`]) and advance again — later pipelined requests go
    /// on too; [`EvConn::deliver`] brings each response back.
    Forward,
}

/// One client connection's state: the codec plus what the loop must remember between
/// callbacks.
pub struct EvConn<S, M: Mode = Answer> {
    pub stream: S,
    pub conn: Conn<M>,
    /// Distinguishes this connection from a later one reusing its slot (timers, replies).
    pub id: u64,
    /// A readable edge arrived and no read since came back short.
    pub readable: bool,
    /// The peer shut its side (EPOLLRDHUP). A short read no longer means "wait for the
    /// next edge": the FIN may have come with the data, and no further edge will announce
    /// it, so the next read must be made to see end-of-file.
    pub peer_closed: bool,
    /// The handler asked for a wait that has not started (output is flushed first).
    wait_for: Option<Duration>,
    /// A wait is running; its timer resumes the connection.
    waiting: bool,
    /// The codec decided to close: close once the output is written.
    closing: bool,
    /// Lingering close after an error: FIN sent, discarding input until this deadline.
    linger_until: Option<linger::Drain>,
    /// Given up: the peer stopped reading our output and missed its deadline.
    aborted: bool,
    /// Since when a write has been blocked (set only when one would block, so the common
    /// path reads no clock).
    stalled_since: Option<Instant>,
}

impl<S> EvConn<S, Forward> {
    /// The response to forwarded request `seq`; call [`EvConn::advance`] next. False if
    /// the connection awaits no such response.
    pub fn deliver(&mut self, seq: u16, response: Response) -> bool {
        self.conn.deliver(seq, response)
    }
}

impl<S: Read + Write + AsFd, M: Mode> EvConn<S, M> {
    pub fn new(stream: S, conn: Conn<M>, id: u64) -> Self {
        EvConn {
            stream,
            conn,
            id,
            readable: false,
            peer_closed: false,
            wait_for: None,
            waiting: false,
            closing: false,
            linger_until: None,
            aborted: false,
            stalled_since: None,
        }
    }

    /// A timer set by [`Next::Timer`] fired: true if the connection must now close (its
    /// lingering close ran out of time); otherwise call [`EvConn::advance`].
    pub fn on_timer(&mut self) -> bool {
        if self.linger_until.is_some() {
            return true;
        }
        self.waiting = false;
        false
    }

    /// Applies the codec's deadlines (see `Conn::read_deadline`): true if the peer missed
    /// its deadline and the connection now closes (with a 408 if a request was under
    /// way); call [`EvConn::advance`] next to write it and close. Event loops call this
    /// from a once-a-second sweep rather than arming a timer per request.
    pub fn expire_if_due(&mut self, now: Instant) -> bool {
        if let Some(since) = self.stalled_since {
            // The peer stopped reading: the output stays bounded (nothing more is read or
            // processed meanwhile), and after the idle timeout the connection is dropped.
            if now >= since + self.conn.timeouts().idle {
                self.aborted = true;
                return true;
            }
            return false;
        }
        if self.closing || self.linger_until.is_some() || !self.conn.expired(now) {
            return false;
        }
        self.conn.expire();
        self.readable = false;
        true
    }

    /// Runs the connection as far as it can go without blocking.
    pub fn advance(&mut self, stopping: bool) -> Next {
        if self.aborted {
            return Next::Close;
        }
        if self.linger_until.is_some() {
            return self.discard();
        }
        loop {
            // Write first: responses go out as soon as they exist.
            if !self.conn.output().is_empty() {
                match self.stream.write(self.conn.output()) {
                    Ok(n) => {
                        self.conn.written(n);
                        self.stalled_since = None;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.stalled_since.get_or_insert_with(Instant::now);
                        return Next::Pending;
                    }
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
            match self.conn.process().into() {
                Step::Close => self.closing = true,
                Step::Wait(wait) => self.wait_for = Some(wait),
                // Workerman with PDO: the query blocks inside the callback, and with it
                // every other connection of this loop.
                Step::Query(job) => {
                    let result = crate::pg::pool::run_blocking(self.conn.app().pg.as_ref(), &job);
                    self.conn.query_done(result);
                }
                Step::Forward => return Next::Forward,
                Step::Await => return Next::Pending,
                Step::Read if !self.conn.output().is_empty() => {}
                Step::Read if !self.readable => return Next::Pending,
                Step::Read => {
                    let buf = self.conn.read_buf();
                    let room = buf.len();
                    match self.stream.read(buf) {
                        Ok(0) => return Next::Close,
                        Ok(n) => {
                            self.conn.filled(n);
                            // A short read drained the socket: wait for the next edge
                            // (unless the peer closed: then read on, to its EOF).
                            self.readable = n == room || self.peer_closed;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            self.readable = false;
                            self.conn.unread();
                        }
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
        let _ = SockRef::from(&self.stream).shutdown(Shutdown::Write);
        let drain = linger::Drain::start();
        self.linger_until = Some(drain);
        match self.discard() {
            Next::Pending => Next::Timer(drain.deadline()),
            other => other,
        }
    }

    /// Lingering close: read and discard until EOF, the byte limit or the deadline.
    fn discard(&mut self) -> Next {
        let mut scratch = [0u8; 4096];
        loop {
            let Some(drain) = self.linger_until.as_mut() else {
                return Next::Close;
            };
            if drain.left().is_none() {
                return Next::Close;
            }
            let result = self.stream.read(&mut scratch);
            match &result {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Pending,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                _ if drain.read(&result) => {}
                _ => return Next::Close,
            }
        }
    }
}
