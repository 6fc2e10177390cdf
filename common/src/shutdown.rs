//! Graceful stop inside a worker *process*.
//!
//! The supervisor asks a worker to stop with SIGTERM (SIGINT from a terminal reaches every
//! process of the group and means the same). The handler is installed without
//! `SA_RESTART`, so a worker blocked in `accept` or `read` gets `EINTR` and looks at
//! [`requested`]. Two races remain, and both are closed without a system call on the hot
//! path:
//!
//! - the signal lands between the check and a blocking `read` on an idle keep-alive
//!   connection: the worker publishes that connection's fd with [`idle_begin`] before it
//!   reads, and the handler shuts its read side down, so the read returns 0 at once;
//! - the signal lands just before `accept`: the listener carries a receive timeout, so
//!   `accept` returns within a second anyway (see `listener::ListenOptions::accept_timeout`).
//!
//! Event loops register a wake-up fd ([`set_wake_fd`]): the handler writes to it, which is
//! async-signal-safe, and the loop sees it as readiness.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::SeqCst};
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);
static IDLE_FD: AtomicI32 = AtomicI32::new(-1);
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_stop(_signal: libc::c_int) {
    // Only async-signal-safe calls here: atomics, shutdown(2), write(2).
    STOP.store(true, SeqCst);
    let idle = IDLE_FD.load(SeqCst);
    if idle >= 0 {
        // SAFETY: shutdown on an fd number has no memory-safety preconditions.
        unsafe { libc::shutdown(idle, libc::SHUT_RD) };
    }
    let wake = WAKE_FD.load(SeqCst);
    if wake >= 0 {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live local; works for an eventfd or a pipe.
        unsafe { libc::write(wake, (&one as *const u64).cast(), 8) };
    }
}

/// Installs the SIGTERM/SIGINT handler for this process (call it in each worker).
pub fn install() {
    // SAFETY: a zeroed sigaction is valid; the handler only does async-signal-safe work.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_stop as *const () as usize;
        action.sa_flags = 0; // no SA_RESTART: blocking calls must return EINTR
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
    }
}

/// Asks this process to stop, as SIGTERM does, from its own code: a worker whose master is
/// gone (a `reactor-workers` worker whose links all closed) stops the way a signalled one
/// does, and whatever waits in [`StopChannel::wait`] wakes.
pub fn request() {
    on_stop(0);
}

/// True once this process was asked to stop.
pub fn requested() -> bool {
    STOP.load(SeqCst)
}

/// Publishes `fd` as an idle connection about to block in `read`. Returns false if a stop
/// was already requested: the caller should close the connection instead of reading.
pub fn idle_begin(fd: RawFd) -> bool {
    IDLE_FD.store(fd, SeqCst);
    if requested() {
        IDLE_FD.store(-1, SeqCst);
        return false;
    }
    true
}

/// The idle read returned; the fd is no longer the handler's business.
pub fn idle_end() {
    IDLE_FD.store(-1, SeqCst);
}

/// Registers an fd (eventfd or pipe write end) the handler writes to on stop.
pub fn set_wake_fd(fd: RawFd) {
    WAKE_FD.store(fd, SeqCst);
}

/// The stop signal as something a thread can block on: a socket pair whose write end the
/// signal handler writes to ([`set_wake_fd`]). The main thread of the servers whose
/// workers are threads or coroutines waits here, doing the once-a-second deadline sweep
/// meanwhile, then carries the stop to its workers.
#[derive(Debug)]
pub struct StopChannel {
    rx: UnixStream,
    /// Kept open: the signal handler writes to its descriptor.
    tx: UnixStream,
}

impl StopChannel {
    /// Creates the pair and hands its write end to the signal handler. Create it before the
    /// start-up line: once that is out, clients may take every descriptor left.
    pub fn new() -> io::Result<Self> {
        let (rx, tx) = UnixStream::pair()?;
        set_wake_fd(tx.as_raw_fd());
        Ok(StopChannel { rx, tx })
    }

    /// Blocks until a stop is requested; with `every`, calls `tick` about that often
    /// meanwhile (the deadline sweep).
    pub fn wait(&mut self, every: Option<Duration>, mut tick: impl FnMut()) {
        let _ = self.rx.set_read_timeout(every);
        let mut byte = [0u8; 8];
        while !requested() {
            let _ = self.rx.read(&mut byte);
            if every.is_some() {
                tick();
            }
        }
    }
}

impl Drop for StopChannel {
    fn drop(&mut self) {
        // The handler must not write to a descriptor number that may be reused.
        if WAKE_FD.load(SeqCst) == self.tx.as_raw_fd() {
            WAKE_FD.store(-1, SeqCst);
        }
    }
}
