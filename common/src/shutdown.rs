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

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Instant;

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

/// The open connections of one worker, so that a stop can end the idle ones, and a
/// once-a-second sweep the ones whose peer missed a deadline, from another thread
/// (coroutine, thread-per-core and work-stealing servers, whose connections wait inside
/// their runtime where no signal or timer of ours can reach them cheaply).
///
/// Before it waits for bytes, a connection publishes whether it is *parked* (idle between
/// requests) and its deadline; it clears both when bytes arrive. [`ConnRegistry::sweep`]
/// shuts the read side of every connection past its deadline, so its read returns
/// end-of-file and the connection answers 408 (or just closes, if idle). [`ConnRegistry::stop`] sets the stop flag, then shuts the
/// read side of every parked connection, so its pending read returns end-of-file. The
/// two sides store first and check second (sequentially consistent), so either the
/// connection sees the stop before it waits, or the stopper sees it parked: no connection
/// can slip into an endless wait.
#[derive(Debug, Default)]
pub struct ConnRegistry {
    stopping: AtomicBool,
    live: AtomicUsize,
    slots: Mutex<Vec<Option<Slot>>>,
}

/// A registered connection: its fd and the state it publishes.
type Slot = (RawFd, Arc<Published>);

/// What a waiting connection publishes.
#[derive(Debug, Default)]
struct Published {
    parked: AtomicBool,
    /// The wait is a write: the sweep must shut both directions to end it.
    writing: AtomicBool,
    /// Milliseconds since [`epoch`] (plus one; 0: no deadline).
    deadline: std::sync::atomic::AtomicU64,
}

/// The reference instant for deadlines stored as integers.
fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn millis(at: Instant) -> u64 {
    at.saturating_duration_since(epoch()).as_millis() as u64 + 1
}

/// A connection's entry in a [`ConnRegistry`]; dropping it unregisters the connection.
#[derive(Debug)]
pub struct Registration {
    registry: Arc<ConnRegistry>,
    slot: usize,
    published: Arc<Published>,
}

impl ConnRegistry {
    pub fn new() -> Arc<Self> {
        Arc::new(ConnRegistry::default())
    }

    /// Registers an open connection (once per connection, not per request).
    pub fn register(self: &Arc<Self>, fd: RawFd) -> Registration {
        let published = Arc::new(Published::default());
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let slot = slots.iter().position(Option::is_none).unwrap_or_else(|| {
            slots.push(None);
            slots.len() - 1
        });
        slots[slot] = Some((fd, published.clone()));
        self.live.fetch_add(1, SeqCst);
        Registration {
            registry: self.clone(),
            slot,
            published,
        }
    }

    /// True once [`ConnRegistry::stop`] was called.
    pub fn stopping(&self) -> bool {
        self.stopping.load(SeqCst)
    }

    /// Connections still open.
    pub fn live(&self) -> usize {
        self.live.load(SeqCst)
    }

    /// Stops: shuts the listener's read side (a pending accept fails, and this worker's
    /// own socket takes no more connections), then every parked connection's.
    pub fn stop(&self, listener: Option<RawFd>) {
        self.stopping.store(true, SeqCst);
        if let Some(fd) = listener {
            // SAFETY: shutdown(2) on the caller's listening socket.
            unsafe { libc::shutdown(fd, libc::SHUT_RD) };
        }
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        for (fd, published) in slots.iter().flatten() {
            if published.parked.load(SeqCst) {
                // SAFETY: an fd stays registered, hence open, until its connection drops
                // its registration, which needs this lock.
                unsafe { libc::shutdown(*fd, libc::SHUT_RD) };
            }
        }
    }

    /// Ends the wait of every connection past its deadline (call about once a second).
    pub fn sweep(&self, now: Instant) {
        let now = millis(now);
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        for (fd, published) in slots.iter().flatten() {
            let deadline = published.deadline.load(SeqCst);
            if deadline != 0 && deadline <= now {
                published.deadline.store(0, SeqCst);
                // A blocked read ends with SHUT_RD; a blocked write only with SHUT_WR.
                let how = if published.writing.load(SeqCst) {
                    libc::SHUT_RDWR
                } else {
                    libc::SHUT_RD
                };
                // SAFETY: as in `stop`.
                unsafe { libc::shutdown(*fd, how) };
            }
        }
    }
}

impl Registration {
    /// Publishes that the connection waits for bytes until `deadline`, and whether it is
    /// idle between requests. False if it is idle and the worker is stopping: the caller
    /// closes the connection instead of waiting.
    pub fn wait(&self, idle: bool, deadline: Option<Instant>) -> bool {
        self.published
            .deadline
            .store(deadline.map_or(0, millis), SeqCst);
        if !idle {
            return true;
        }
        self.published.parked.store(true, SeqCst);
        if self.registry.stopping() {
            self.published.parked.store(false, SeqCst);
            return false;
        }
        true
    }

    /// Marks the connection as waiting between requests, with no deadline. False if the
    /// worker is stopping.
    pub fn park(&self) -> bool {
        self.wait(true, None)
    }

    /// Publishes that the connection is writing and may block until `deadline` (a peer
    /// that stopped reading): past it, the sweep shuts the socket and the write fails.
    pub fn writing(&self, deadline: Instant) {
        self.published.writing.store(true, SeqCst);
        self.published.deadline.store(millis(deadline), SeqCst);
    }

    /// Writes everything `conn` produced with `write_all` (the runtime's own), published as
    /// a write under the idle deadline: a peer that stops reading is cut off by the sweep
    /// rather than holding the task forever. The output is consumed only once written.
    pub async fn flush(
        &self,
        conn: &mut crate::codec::Conn,
        write_all: impl AsyncFnOnce(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let out = conn.output();
        if out.is_empty() {
            return Ok(());
        }
        let n = out.len();
        self.writing(Instant::now() + conn.timeouts().idle);
        let written = write_all(out).await;
        self.unpark();
        written?;
        conn.written(n);
        Ok(())
    }

    /// Bytes arrived or were written (the wait ended): no longer parked, no deadline.
    pub fn unpark(&self) {
        self.published.parked.store(false, SeqCst);
        self.published.writing.store(false, SeqCst);
        self.published.deadline.store(0, SeqCst);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut slots = self
            .registry
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        slots[self.slot] = None;
        self.registry.live.fetch_sub(1, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn stop_ends_a_parked_connection_and_not_a_busy_one() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _a = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _b = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut parked_conn, _) = listener.accept().unwrap();
        let (busy_conn, _) = listener.accept().unwrap();
        let registry = ConnRegistry::new();
        let parked = registry.register(std::os::fd::AsRawFd::as_raw_fd(&parked_conn));
        let _busy = registry.register(std::os::fd::AsRawFd::as_raw_fd(&busy_conn));
        assert_eq!(registry.live(), 2);
        assert!(parked.park());
        registry.stop(None);
        let mut buf = [0u8; 8];
        assert_eq!(parked_conn.read(&mut buf).unwrap(), 0, "parked read ends");
        assert!(!parked.park(), "no new wait after a stop");
        drop(parked);
        assert_eq!(registry.live(), 1);
    }

    #[test]
    fn sweep_ends_waits_past_their_deadline_only() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _a = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _b = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut late, _) = listener.accept().unwrap();
        let (on_time, _) = listener.accept().unwrap();
        on_time.set_nonblocking(true).unwrap();
        let registry = ConnRegistry::new();
        let l = registry.register(std::os::fd::AsRawFd::as_raw_fd(&late));
        let o = registry.register(std::os::fd::AsRawFd::as_raw_fd(&on_time));
        let now = Instant::now();
        assert!(l.wait(false, Some(now)));
        assert!(o.wait(true, Some(now + std::time::Duration::from_secs(60))));
        registry.sweep(now + std::time::Duration::from_millis(5));
        let mut buf = [0u8; 8];
        assert_eq!(late.read(&mut buf).unwrap(), 0);
        let err = (&on_time).read(&mut buf).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    }
}
