//! Listening sockets, built the same way for every server (socket2).
//!
//! SO_REUSEADDR is always set so a restarted server can bind while old connections sit in
//! TIME_WAIT. SO_REUSEPORT is the switch between the two accept designs archzoo compares:
//! one socket shared by every worker (one accept queue, any worker may take any
//! connection) or one socket per worker (the kernel hashes each new connection to one
//! worker's queue).

use std::io;
use std::net::{SocketAddr, TcpListener};
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
