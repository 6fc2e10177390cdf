//! Listening sockets, built the same way for every server (socket2).
//!
//! SO_REUSEADDR is always set so a restarted server can bind while old connections sit in
//! TIME_WAIT. SO_REUSEPORT is the switch between the two accept designs archzoo compares:
//! one socket shared by every worker (one accept queue, any worker may take any
//! connection) or one socket per worker (the kernel hashes each new connection to one
//! worker's queue).

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

/// How long a worker stops accepting after an accept error (EMFILE, ENFILE, ENOBUFS):
/// long enough that a server out of descriptors does not spin on a queue it cannot take
/// from, short enough that a connection freed meanwhile is taken promptly. Every server's
/// accept loop waits this long, in its own runtime's way.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How to build a listening socket.
#[derive(Debug, Clone)]
pub struct ListenOptions {
    pub addr: SocketAddr,
    pub backlog: i32,
    pub reuse_port: bool,
    pub nonblocking: bool,
    pub accept_timeout: Option<Duration>,
    pub write_timeout: Option<Duration>,
}

impl ListenOptions {
    /// Blocking, backlog 1024, no SO_REUSEPORT.
    pub fn new(addr: SocketAddr) -> Self {
        ListenOptions {
            addr,
            backlog: 1024,
            reuse_port: false,
            nonblocking: false,
            accept_timeout: None,
            write_timeout: None,
        }
    }

    pub fn backlog(mut self, backlog: i32) -> Self {
        self.backlog = backlog;
        self
    }

    /// SO_REUSEPORT: several sockets may listen on the same address and port.
    pub fn reuse_port(mut self, on: bool) -> Self {
        self.reuse_port = on;
        self
    }

    /// O_NONBLOCK, for event loops.
    pub fn nonblocking(mut self, on: bool) -> Self {
        self.nonblocking = on;
        self
    }

    /// SO_RCVTIMEO on the listener: a blocking `accept` returns `WouldBlock` after this long
    /// with no connection, so a blocking worker re-checks its stop flag periodically.
    pub fn accept_timeout(mut self, timeout: Duration) -> Self {
        self.accept_timeout = Some(timeout);
        self
    }

    /// SO_SNDTIMEO on the listener, inherited by every accepted socket: a blocking write
    /// to a client that stopped reading fails after this long instead of holding the
    /// worker forever.
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = Some(timeout);
        self
    }

    /// Creates the socket and binds it, without listening yet.
    pub fn bind_socket(&self) -> io::Result<Socket> {
        let socket = Socket::new(
            Domain::for_address(self.addr),
            Type::STREAM,
            Some(Protocol::TCP),
        )?;
        socket.set_reuse_address(true)?;
        if self.reuse_port {
            socket.set_reuse_port(true)?;
        }
        socket.set_nonblocking(self.nonblocking)?;
        // TCP_NODELAY, so a response is not held back by Nagle's algorithm waiting for the
        // client's delayed ACK. Set here once: Linux copies it to every accepted socket,
        // which saves a setsockopt per connection.
        socket.set_tcp_nodelay(true)?;
        if let Some(timeout) = self.accept_timeout {
            socket.set_read_timeout(Some(timeout))?;
        }
        if let Some(timeout) = self.write_timeout {
            socket.set_write_timeout(Some(timeout))?;
        }
        socket.bind(&self.addr.into())?;
        Ok(socket)
    }

    /// Binds and listens.
    pub fn bind(&self) -> io::Result<TcpListener> {
        let socket = self.bind_socket()?;
        socket.listen(self.backlog)?;
        Ok(socket.into())
    }
}

/// How many connections wait in a listening socket's accept queue, as the kernel counts
/// them (`TCP_INFO`: for a listener, `tcpi_unacked` is the queue's length); `None` where
/// the kernel does not say (not a TCP socket).
///
/// Why an event loop asks instead of accepting until `EAGAIN`: Linux's `accept4` builds
/// the new socket — an inode, a dentry, a file — *before* it looks at the queue, and on an
/// empty queue tears it all down again (`__fput` on the way out, the inode freed through
/// RCU). Measured here, an `accept4` that finds nothing costs ~4.5 µs more than an empty
/// system call, this query ~0.4 µs. An edge-triggered loop that drains the queue pays that
/// failed accept once a wake-up — 0.3 to 0.7 times a connection without keep-alive, some
/// 1–3 µs of a ~30 µs connection — and nginx, which accepts one connection a level-
/// triggered event, never does. Asking first and accepting exactly that many costs the
/// same number of system calls and none of the teardown. (io_uring's multishot accept
/// does the same inside the kernel since 6.10: it retries only while the queue is not
/// empty.)
///
/// Safe against races with edge-triggered readiness as long as the readiness is taken
/// (or cleared) *before* the query: a connection that arrives after the query raises a
/// new edge and so another wake-up; one that arrives before it is counted.
pub fn queued(listener: &impl AsFd) -> Option<usize> {
    // SAFETY: `tcp_info` is plain integers, so all zeroes is a valid value; getsockopt
    // writes at most `len` bytes into it and sets `len` to what it wrote.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let fd = listener.as_fd().as_raw_fd();
    // SAFETY: `info` and `len` are valid for writes of `len` bytes and one socklen_t.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            std::ptr::addr_of_mut!(info).cast(),
            &mut len,
        )
    };
    // TCP_LISTEN is 10 in the kernel's state numbering; anything else is not a listener.
    const TCP_LISTEN: u8 = 10;
    let whole = std::mem::offset_of!(libc::tcp_info, tcpi_unacked) + 4;
    (rc == 0 && len as usize >= whole && info.tcpi_state == TCP_LISTEN)
        .then_some(info.tcpi_unacked as usize)
}

/// For designs where every worker binds its own SO_REUSEPORT socket: the master binds one
/// such socket *without listening*. That checks the port is free (one clear error before
/// any worker starts) and turns port 0 into the concrete port every worker then binds. A
/// socket that is bound but not listening is in no accept group and receives no
/// connections, so holding it for the server's lifetime costs nothing.
pub fn reserve_reuseport(addr: SocketAddr) -> io::Result<(Socket, SocketAddr)> {
    let socket = ListenOptions::new(addr).reuse_port(true).bind_socket()?;
    let bound = socket
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("not an IP socket"))?;
    Ok((socket, bound))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_sockets_inherit_nodelay_from_the_listener() {
        let listener = ListenOptions::new("127.0.0.1:0".parse().unwrap())
            .bind()
            .unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert!(
            accepted.nodelay().unwrap(),
            "no setsockopt per connection needed"
        );
    }

    #[test]
    fn queued_counts_the_accept_queue() {
        let listener = ListenOptions::new("127.0.0.1:0".parse().unwrap())
            .bind()
            .unwrap();
        assert_eq!(queued(&listener), Some(0));
        let addr = listener.local_addr().unwrap();
        let clients: Vec<_> = (0..3)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        // The handshake ends in the kernel; on loopback it has ended by the time connect
        // returns, but a loaded machine gets a bounded moment.
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while queued(&listener) != Some(3) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(queued(&listener), Some(3));
        let _ = listener.accept().unwrap();
        assert_eq!(queued(&listener), Some(2));
        drop(clients);
        // A connected (not listening) socket is no listener: the kernel does not say.
        let client = std::net::TcpStream::connect(addr).unwrap();
        assert_eq!(queued(&client), None);
    }

    #[test]
    fn two_reuseport_sockets_share_a_port() {
        let first = ListenOptions::new("127.0.0.1:0".parse().unwrap())
            .reuse_port(true)
            .bind()
            .unwrap();
        let addr = first.local_addr().unwrap();
        let second = ListenOptions::new(addr).reuse_port(true).bind();
        assert!(second.is_ok());
        let plain = ListenOptions::new(addr).bind();
        assert_eq!(plain.unwrap_err().kind(), io::ErrorKind::AddrInUse);
    }

    #[test]
    fn reserved_port_is_shared_only_by_reuseport_sockets() {
        let (_reserved, addr) = reserve_reuseport("127.0.0.1:0".parse().unwrap()).unwrap();
        assert_ne!(addr.port(), 0);
        let worker = ListenOptions::new(addr).reuse_port(true).bind().unwrap();
        let plain = ListenOptions::new(addr).bind();
        assert_eq!(plain.unwrap_err().kind(), io::ErrorKind::AddrInUse);
        // Connections reach the listening worker socket, not the reserved one.
        let _client = std::net::TcpStream::connect(addr).unwrap();
        assert!(worker.accept().is_ok());
    }

    #[test]
    fn accept_timeout_returns_would_block() {
        let l = ListenOptions::new("127.0.0.1:0".parse().unwrap())
            .accept_timeout(Duration::from_millis(50))
            .bind()
            .unwrap();
        let err = l.accept().unwrap_err();
        assert!(matches!(
            err.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ));
    }
}
