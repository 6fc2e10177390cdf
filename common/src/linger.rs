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
    let deadline = Instant::now() + TIMEOUT;
    let mut scratch = [0u8; 2048];
    let mut drained = 0;
    while drained < MAX_BYTES {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || set_read_timeout(stream, Some(left)).is_err() {
            return;
        }
        match stream.read(&mut scratch) {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}
