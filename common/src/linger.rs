//! Lingering close: how a server closes after an error without losing its answer.
//!
//! When a server closes a socket whose receive queue still holds unread bytes (the rest of
//! a 9 KiB head after a 431, a body after a 413), the kernel sends RST instead of FIN, and
//! the client's kernel may throw away the error response before the client reads it. So
//! after an error the server shuts its write side (FIN after the response), then reads and
//! discards for a bounded time and amount, as Apache's and nginx's lingering close do.
//! An orderly close (HTTP/1.0, `Connection: close`) needs none of this and pays nothing.

use std::io::Read;
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// Longest time spent draining a closing connection.
pub const TIMEOUT: Duration = Duration::from_secs(1);
/// Most bytes drained from a closing connection.
pub const MAX_BYTES: usize = 4 << 20;

/// One lingering close's budget: until end-of-file, [`TIMEOUT`] in all or [`MAX_BYTES`]
/// drained, whichever comes first. Every server drains through one of these — with its own
/// runtime's reads (blocking, coroutine, tokio, io_uring, epoll) — so the bounds are the
/// same everywhere and written once.
#[derive(Debug, Clone, Copy)]
pub struct Drain {
    deadline: Instant,
    drained: usize,
}

impl Drain {
    /// Starts the clock: call right after shutting the write side.
    pub fn start() -> Self {
        Drain {
            deadline: Instant::now() + TIMEOUT,
            drained: 0,
        }
    }

    /// How long the next read may wait; `None` once the budget is spent (close now).
    pub fn left(&self) -> Option<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        (!left.is_zero() && self.drained < MAX_BYTES).then_some(left)
    }

    /// When the budget runs out (for loops that arm a timer instead of waiting).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Records what a read returned: false when draining is over (end-of-file, an error,
    /// or the byte budget spent).
    pub fn read(&mut self, result: &std::io::Result<usize>) -> bool {
        match result {
            Ok(n) if *n > 0 => {
                self.drained += n;
                self.drained < MAX_BYTES
            }
            _ => false,
        }
    }
}

/// Lingering close for a blocking socket (the connection is closed when dropped).
pub fn blocking(mut stream: TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    drain(&mut stream, TcpStream::set_read_timeout);
}

/// Reads and discards until end-of-file, [`TIMEOUT`] or [`MAX_BYTES`], for any stream
/// whose reads block with a settable timeout (std sockets, `may` coroutine sockets). The
/// scratch buffer stays small: it lives on the caller's stack, a coroutine's included.
pub fn drain<S: Read>(
    stream: &mut S,
    set_read_timeout: impl Fn(&S, Option<Duration>) -> std::io::Result<()>,
) {
    let mut drain = Drain::start();
    let mut scratch = [0u8; 2048];
    while let Some(left) = drain.left() {
        if set_read_timeout(stream, Some(left)).is_err() || !drain.read(&stream.read(&mut scratch))
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_ends_at_eof_an_error_or_its_byte_budget() {
        let mut d = Drain::start();
        assert!(d.left().is_some_and(|l| l <= TIMEOUT));
        assert!(d.read(&Ok(1024)));
        assert!(!d.read(&Ok(0)), "end-of-file ends it");
        assert!(!Drain::start().read(&Err(std::io::ErrorKind::ConnectionReset.into())));
        let mut big = Drain::start();
        assert!(!big.read(&Ok(MAX_BYTES)), "the byte budget ends it");
        assert!(big.left().is_none());
    }
}
