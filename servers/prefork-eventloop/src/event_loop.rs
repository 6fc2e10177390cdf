//! One child's event loop: epoll (edge-triggered, through mio) and callbacks.
//!
//! There is no async runtime and no coroutine here: each connection is an explicit state
//! record (`common::evconn::EvConn`) and the loop calls back into it on readiness — that
//! hand-written state is the point of the model, as in Workerman's
//! `onConnect`/`onMessage`/`onClose`.
//!
//! ```text
//!   epoll_wait ─► listener readable ─► accept     (until EAGAIN or --max-conns)
//!              ├► socket readable   ─► advance: read → on_message → write
//!              ├► socket writable   ─► advance: resume a partial write
//!              ├► timer due         ─► advance: send a delayed reply
//!              ├► once a second     ─► sweep: deadlines → 408 / idle close
//!              └► stop pipe         ─► begin_stop (stop accepting, close idle conns)
//!   advance ends in: wait for the next edge │ start a timer │ close
//! ```
//!
//! The per-connection state machine (edge-triggered reads until a short read, bounded
//! output, lingering close) is `common::evconn::EvConn`; the loop itself, the connection
//! table and the accepting socket are `common::evloop` (`EventLoop`, `Core`): shared with
//! the reactors of `reactor-workers`. What is this model's own is small: connections
//! answer their requests in place, and a stop pipe wakes the loop for a graceful stop.

use std::io::{self, Read};
use std::os::fd::AsRawFd;

use common::codec::{Answer, ConnConfig};
use common::evloop::{Core, EventLoop, HOST_TOKENS};
use common::{shutdown, stats, supervisor};
use mio::event::Event;
use mio::unix::pipe;
use mio::{Interest, Token};

/// The stop pipe's token (the signal handler writes to it to wake the loop).
const WAKE: Token = Token(HOST_TOKENS);

/// A child's loop: its poller, listener and connections, and the stop pipe.
struct Child {
    core: Core,
    wake: pipe::Receiver,
    /// Kept open: the stop signal handler writes to it.
    _wake_tx: pipe::Sender,
}

/// Runs one child until it is asked to stop and its connections have finished.
pub fn run(
    listener: std::net::TcpListener,
    config: ConnConfig,
    report: bool,
) -> Result<(), String> {
    shutdown::install();
    let mut child =
        Child::new(listener, config).map_err(|e| format!("cannot start event loop: {e}"))?;
    supervisor::ready();
    child.run().map_err(|e| format!("event loop failed: {e}"))?;
    if report {
        stats::report(crate::ARCH);
    }
    Ok(())
}

impl Child {
    fn new(listener: std::net::TcpListener, config: ConnConfig) -> io::Result<Self> {
        // Core<Answer>: connections answer their requests here, nothing is forwarded.
        let core = Core::new(listener, config, crate::ARCH)?;
        let (wake_tx, mut wake) = pipe::new()?;
        core.poll
            .registry()
            .register(&mut wake, WAKE, Interest::READABLE)?;
        shutdown::set_wake_fd(wake_tx.as_raw_fd());
        Ok(Child {
            core,
            wake,
            _wake_tx: wake_tx,
        })
    }
}

impl EventLoop for Child {
    type Mode = Answer;

    fn core(&mut self) -> &mut Core {
        &mut self.core
    }

    fn stop_requested(&self) -> bool {
        shutdown::requested()
    }

    /// The stop pipe: empty it (the stop itself is seen through `stop_requested`).
    fn on_host_event(&mut self, _event: &Event) {
        let mut scratch = [0u8; 64];
        while matches!(self.wake.read(&mut scratch), Ok(n) if n > 0) {}
    }
}
