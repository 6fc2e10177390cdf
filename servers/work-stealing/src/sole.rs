//! A connection's socket that closes without first deleting itself from tokio's epoll set.
//!
//! A dropped `tokio::net::TcpStream` makes an `epoll_ctl(EPOLL_CTL_DEL)` and then closes
//! its descriptor. Closing the only descriptor of a socket removes it from every epoll set
//! by itself, so the delete is a system call (about 1 µs) on every connection that the
//! event loop does not make (issue #38). The vendored tokio's `TcpStream::close_sole`
//! closes first and then releases the registration as a drop would (vendor/tokio,
//! PATCHES.md); [`Sole`] calls it when the connection drops, on every path — an answered
//! `Connection: close`, an error, a stop, the runtime's shutdown. Go's net/http, which this
//! row stands for, makes the delete (`runtime_pollClose`); that call is a cost of its
//! netpoller, not of a task per connection.

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::os::fd::{AsRawFd, RawFd};

use tokio::net::TcpStream;

/// A `TcpStream` whose descriptor is the only one of its socket, closed by `close_sole`.
#[derive(Debug)]
pub struct Sole(ManuallyDrop<TcpStream>);

impl Sole {
    /// # Safety
    ///
    /// `stream`'s descriptor is the only one of its socket and stays so: it came from an
    /// `accept4` with `SOCK_CLOEXEC` in this process, which never forks, and nothing
    /// duplicates it. Otherwise the socket outlives the close in the epoll set, and its
    /// events name a registration already freed.
    pub unsafe fn new(stream: TcpStream) -> Self {
        Sole(ManuallyDrop::new(stream))
    }
}

impl Drop for Sole {
    fn drop(&mut self) {
        // SAFETY: taken once, here, and never used again; `new`'s caller promised the
        // descriptor is the only one of its socket.
        unsafe { ManuallyDrop::take(&mut self.0).close_sole() }
    }
}

impl Deref for Sole {
    type Target = TcpStream;
    fn deref(&self) -> &TcpStream {
        &self.0
    }
}

impl DerefMut for Sole {
    fn deref_mut(&mut self) -> &mut TcpStream {
        &mut self.0
    }
}

impl AsRawFd for Sole {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}
