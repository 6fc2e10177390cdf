//! A pool of `/pg` connections over a blocking stream — `std`'s (a worker that blocks, as
//! PHP's PDO does) or `may`'s (a coroutine that yields, as Swoole's hooked PDO does). The
//! protocol is [`super::wire`]'s; what differs between the two is only the stream and how
//! a request waits for a free connection ([`Gate`]).
//!
//! Connections are opened on demand up to the pool's size and kept while they stay
//! usable; a pooled connection that fails as a stale one would (the database restarted
//! while it was idle) is replaced once before the request is answered 503.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use super::wire::{drive, Session};
use super::{Job, PgError, Target, CONNECT_LIMIT, READ_LIMIT};

/// A socket the pool can open.
pub trait Dial: Read + Write + Sized {
    /// Connects within `timeout`, with Nagle off and reads bounded by [`READ_LIMIT`].
    fn dial(addr: &SocketAddr, timeout: Duration) -> std::io::Result<Self>;
}

/// How a request waits for one of the pool's `size` connections: a counting semaphore of
/// the runtime's kind.
pub trait Gate: Sync {
    fn new(size: usize) -> Self;
    /// Takes a place; false when none came free within `limit`.
    fn enter(&self, limit: Duration) -> bool;
    fn leave(&self);
}

/// A pool of connections to one database.
pub struct Pool<S, G> {
    target: Target,
    idle: Mutex<Vec<(S, Session)>>,
    gate: G,
}

impl<S: Dial, G: Gate> Pool<S, G> {
    pub fn new(target: Target) -> Self {
        let gate = G::new(target.pool);
        Pool {
            target,
            idle: Mutex::new(Vec::new()),
            gate,
        }
    }

    /// Runs `job` on a pooled connection: its sum, or why the database could not answer.
    pub fn run(&self, job: &Job) -> Result<f64, PgError> {
        if !self.gate.enter(self.target.wait) {
            return Err(PgError::PoolTimeout(self.target.wait));
        }
        let result = self.run_entered(job);
        self.gate.leave();
        result
    }

    fn run_entered(&self, job: &Job) -> Result<f64, PgError> {
        let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let reused = pooled.is_some();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => self.open()?,
        };
        let mut result = query(&mut conn, job);
        if reused && result.as_ref().is_err_and(PgError::maybe_stale) {
            conn = self.open()?;
            result = query(&mut conn, job);
        }
        if conn.1.reusable() {
            self.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(conn);
        }
        result
    }

    /// Opens, authenticates and prepares a new connection.
    fn open(&self) -> Result<(S, Session), PgError> {
        let mut stream = S::dial(&self.target.addr, CONNECT_LIMIT).map_err(PgError::Unreachable)?;
        let mut session = Session::connect(&self.target);
        drive(&mut stream, &mut session)?;
        Ok((stream, session))
    }
}

fn query<S: Read + Write>(conn: &mut (S, Session), job: &Job) -> Result<f64, PgError> {
    let (stream, session) = conn;
    session.start(job);
    drive(stream, session)?;
    session.take_sum()
}

impl Dial for std::net::TcpStream {
    fn dial(addr: &SocketAddr, timeout: Duration) -> std::io::Result<Self> {
        let stream = std::net::TcpStream::connect_timeout(addr, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(READ_LIMIT))?;
        stream.set_write_timeout(Some(READ_LIMIT))?;
        Ok(stream)
    }
}

/// A thread's wait: a mutex-guarded count and a condition variable. In the blocking
/// models one thread owns the pool and never waits here.
pub struct Counting {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Gate for Counting {
    fn new(size: usize) -> Self {
        Counting {
            free: Mutex::new(size),
            freed: Condvar::new(),
        }
    }

    fn enter(&self, limit: Duration) -> bool {
        let free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let (mut free, _) = self
            .freed
            .wait_timeout_while(free, limit, |free| *free == 0)
            .unwrap_or_else(|e| e.into_inner());
        if *free == 0 {
            return false;
        }
        *free -= 1;
        true
    }

    fn leave(&self) {
        *self.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.freed.notify_one();
    }
}

/// The pool of a worker that blocks: one per process (every blocking model's worker is a
/// process; it is made on first use, after the fork).
pub fn blocking(target: &Target) -> &'static Pool<std::net::TcpStream, Counting> {
    static POOL: OnceLock<Pool<std::net::TcpStream, Counting>> = OnceLock::new();
    POOL.get_or_init(|| Pool::new(target.clone()))
}

/// Runs `job` the blocking way: the calling thread waits in the kernel for each answer.
pub fn run_blocking(target: Option<&Target>, job: &Job) -> Result<f64, PgError> {
    blocking(target.ok_or(PgError::NotConfigured)?).run(job)
}

#[cfg(feature = "may")]
mod coroutine {
    use super::*;

    impl Dial for may::net::TcpStream {
        fn dial(addr: &SocketAddr, timeout: Duration) -> std::io::Result<Self> {
            let stream = may::net::TcpStream::connect_timeout(addr, timeout)?;
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(READ_LIMIT))?;
            stream.set_write_timeout(Some(READ_LIMIT))?;
            Ok(stream)
        }
    }

    /// A coroutine's wait: `may`'s semaphore parks the coroutine, not its thread.
    pub struct Parked(may::sync::Semphore);

    impl Gate for Parked {
        fn new(size: usize) -> Self {
            Parked(may::sync::Semphore::new(size))
        }

        fn enter(&self, limit: Duration) -> bool {
            self.0.wait_timeout(limit)
        }

        fn leave(&self) {
            self.0.post();
        }
    }

    /// The pool of a process whose requests are coroutines (its workers' scheduler).
    pub fn coroutines(target: &Target) -> &'static Pool<may::net::TcpStream, Parked> {
        static POOL: OnceLock<Pool<may::net::TcpStream, Parked>> = OnceLock::new();
        POOL.get_or_init(|| Pool::new(target.clone()))
    }

    /// Runs `job` the coroutine way: the coroutine yields at every wait for the database.
    pub fn run_coroutine(target: Option<&Target>, job: &Job) -> Result<f64, PgError> {
        coroutines(target.ok_or(PgError::NotConfigured)?).run(job)
    }
}

#[cfg(feature = "may")]
pub use coroutine::{coroutines, run_coroutine, Parked};
