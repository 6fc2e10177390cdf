//! The open connections of one worker, published so that another thread can end their
//! waits: on a stop (the idle ones) and past a deadline (the once-a-second sweep).

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How often the owner of a registry sweeps it for missed deadlines: a peer is cut off at
/// most this long after its deadline, and no timer is armed per request.
pub const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The open connections of one worker, so that a stop can end the idle ones, and a
/// once-a-second sweep the ones whose peer missed a deadline, from another thread
/// (coroutine, thread-per-core and work-stealing servers, whose connections wait inside
/// their runtime where no signal or timer of ours can reach them cheaply).
///
/// Before it waits for bytes, a connection publishes whether it is *parked* (idle between
/// requests) and its deadline; it clears both when bytes arrive. [`ConnRegistry::sweep`]
/// shuts the read side of every connection past its deadline, so its read returns
/// end-of-file and the connection answers 408 (or just closes, if idle).
/// [`ConnRegistry::stop`] sets the stop flag, then shuts the read side of every parked
/// connection, so its pending read returns end-of-file. The
/// two sides store first and check second (sequentially consistent), so either the
/// connection sees the stop before it waits, or the stopper sees it parked: no connection
/// can slip into an endless wait.
#[derive(Debug, Default)]
pub struct ConnRegistry {
    stopping: AtomicBool,
    live: AtomicUsize,
    slots: Mutex<Slots>,
}

/// A registered connection: its fd and the state it publishes.
type Slot = (RawFd, Arc<Published>);

/// The registry's table. A new connection takes a vacant slot and the [`Published`] its
/// last connection left there — no allocation, no search: a scan for the first free slot
/// cost one step per open connection below it, and every connection allocated its own.
#[derive(Debug, Default)]
struct Slots {
    /// Every slot: a registered connection's, or `None`.
    all: Vec<Option<Slot>>,
    /// The vacant slots, each with the state its last connection published, for reuse.
    vacant: Vec<(usize, Arc<Published>)>,
}

/// What a waiting connection publishes.
#[derive(Debug, Default)]
struct Published {
    parked: AtomicBool,
    /// The wait is a write: the sweep must shut both directions to end it.
    writing: AtomicBool,
    /// Milliseconds since [`epoch`] (plus one; 0: no deadline).
    deadline: std::sync::atomic::AtomicU64,
}

impl Published {
    /// As new, for the next connection of a reused slot.
    fn reset(&self) {
        self.parked.store(false, SeqCst);
        self.writing.store(false, SeqCst);
        self.deadline.store(0, SeqCst);
    }
}

/// The reference instant for deadlines stored as integers.
fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// `at` in whole milliseconds since [`epoch`], plus one (0 means "no deadline"), rounded
/// down: for the sweep's "now".
fn millis(at: Instant) -> u64 {
    at.saturating_duration_since(epoch()).as_millis() as u64 + 1
}

/// The same rounded up: for a deadline, so that the sweep (which compares it with
/// [`millis`] of now) never fires before the deadline itself. Rounded down, a sweep in the
/// deadline's own millisecond ended a wait the connection did not yet count as expired,
/// and it closed without its 408.
fn millis_up(at: Instant) -> u64 {
    let nanos = at.saturating_duration_since(epoch()).as_nanos();
    nanos.div_ceil(1_000_000) as u64 + 1
}

/// A registered connection: its socket and its entry in the [`ConnRegistry`].
///
/// The fields drop in declaration order: the entry first (unregistering the descriptor,
/// under the registry's lock), then the socket (closing it). So `stop` and `sweep`, which
/// call `shutdown(2)` on registered descriptors under that lock, never act on a closed
/// descriptor number that the kernel may already have given to another socket.
#[derive(Debug)]
pub struct Tracked<S> {
    pub entry: Registration,
    pub stream: S,
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

    /// Registers an open connection's socket (once per connection, not per request): the
    /// socket and its registration travel together from here on, so the order in which
    /// they are dropped — and with it the safety of `stop` and `sweep` — is fixed by the
    /// type, not by the order of a caller's variables.
    pub fn track<S: AsRawFd>(self: &Arc<Self>, stream: S) -> Tracked<S> {
        Tracked {
            entry: self.register(stream.as_raw_fd()),
            stream,
        }
    }

    /// Registers a descriptor. Private: a registration must not outlive its socket, which
    /// [`Tracked`] guarantees.
    fn register(self: &Arc<Self>, fd: RawFd) -> Registration {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let (slot, published) = match slots.vacant.pop() {
            // Its last registration may not have dropped its own handle yet (it gives the
            // slot back before), but it writes nothing more: reset here is the last word.
            Some((slot, published)) => {
                published.reset();
                (slot, published)
            }
            None => {
                slots.all.push(None);
                (slots.all.len() - 1, Arc::new(Published::default()))
            }
        };
        slots.all[slot] = Some((fd, published.clone()));
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
        for (fd, published) in slots.all.iter().flatten() {
            if published.parked.load(SeqCst) {
                // SAFETY: an fd stays registered, hence open, until its `Tracked` drops the
                // registration (before the socket, by field order), which needs this lock.
                unsafe { libc::shutdown(*fd, libc::SHUT_RD) };
            }
        }
    }

    /// Ends the wait of every connection past its deadline (call about once a second).
    pub fn sweep(&self, now: Instant) {
        let now = millis(now);
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        for (fd, published) in slots.all.iter().flatten() {
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
            .store(deadline.map_or(0, millis_up), SeqCst);
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
        self.published.deadline.store(millis_up(deadline), SeqCst);
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
        if let Some((_, published)) = slots.all[self.slot].take() {
            slots.vacant.push((self.slot, published));
        }
        self.registry.live.fetch_sub(1, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A connection takes the slot (and the published state) its predecessor left, as new:
    /// what the last one published — parked, a deadline — does not carry over, so neither
    /// a stop nor a sweep ends the new one's wait; the table does not grow.
    #[test]
    fn a_reused_slot_starts_clean() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&conn);
        let registry = ConnRegistry::new();
        let first = registry.register(fd);
        assert!(first.wait(true, Some(Instant::now())));
        let slot = first.slot;
        drop(first);
        assert_eq!(registry.live(), 0);
        let second = registry.register(fd);
        assert_eq!(second.slot, slot);
        assert_eq!(registry.slots.lock().unwrap().all.len(), 1);
        assert_eq!(registry.live(), 1);
        // Busy (not parked, no deadline): the stop and a sweep long after leave it alone.
        registry.sweep(Instant::now() + std::time::Duration::from_secs(3600));
        registry.stop(None);
        conn.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        let read = conn.read(&mut byte);
        assert!(
            matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "{read:?}"
        );
        drop(second);
    }

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

    #[test]
    fn the_sweep_never_ends_a_wait_before_its_deadline() {
        let base = epoch() + std::time::Duration::from_millis(10);
        for micros in [0u64, 1, 300, 700, 999] {
            let deadline = base + std::time::Duration::from_micros(micros);
            for before in [1u64, 200, 900] {
                let now = deadline - std::time::Duration::from_micros(before);
                assert!(
                    millis_up(deadline) > millis(now),
                    "{micros} µs, {before} µs early"
                );
            }
            assert!(millis_up(deadline) <= millis(deadline + std::time::Duration::from_millis(1)));
        }
    }
}
