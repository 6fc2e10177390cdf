use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::super::{add_socket, co_io_result, IoData};
#[cfg(feature = "io_cancel")]
use crate::coroutine_impl::co_cancel_data;
use crate::coroutine_impl::{is_coroutine, CoroutineImpl, EventSource};
use crate::io::AsIoData;
use crate::net::{TcpListener, TcpStream};
use crate::yield_now::yield_with_io;

pub struct TcpListenerAccept<'a> {
    io_data: &'a IoData,
    socket: &'a std::net::TcpListener,
    // archzoo: the listener's count of queued connections (see `TcpListener::accept`).
    queued: &'a AtomicUsize,
    pub(crate) is_coroutine: bool,
}

impl<'a> TcpListenerAccept<'a> {
    pub fn new(socket: &'a TcpListener) -> io::Result<Self> {
        Ok(TcpListenerAccept {
            io_data: socket.as_io_data(),
            socket: socket.inner(),
            queued: socket.queued(),
            is_coroutine: is_coroutine(),
        })
    }

    pub fn done(&mut self) -> io::Result<(TcpStream, SocketAddr)> {
        loop {
            co_io_result(self.is_coroutine)?;

            // clear the io_flag
            self.io_data.io_flag.store(0, Ordering::Relaxed);

            // archzoo: ask the queue after the reset; accept only if it holds one.
            let owed = queued(self.socket).unwrap_or(UNASKED);
            if owed != UNASKED {
                self.queued.store(owed.saturating_sub(1), Ordering::Relaxed);
            }
            if owed > 0 {
                match accept_registered(self.socket) {
                    Ok(accepted) => return Ok(accepted),
                    Err(e) => {
                        // raw_os_error is faster than kind
                        let raw_err = e.raw_os_error();
                        if raw_err == Some(libc::EAGAIN) || raw_err == Some(libc::EWOULDBLOCK) {
                            // do nothing here
                            if owed != UNASKED {
                                self.queued.store(0, Ordering::Relaxed);
                            }
                        } else {
                            // The connection may still be queued (EMFILE takes none).
                            self.queued.store(UNASKED, Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                }
            }

            if self.io_data.io_flag.load(Ordering::Relaxed) != 0 {
                continue;
            }

            // the result is still WouldBlock, need to try again
            yield_with_io(self, self.is_coroutine);
        }
    }
}

// archzoo: accepts one connection, non-blocking and registered with the selector: the one
// way in for both `TcpListener::accept`'s first try and the wait for readiness. On Linux the
// socket is made non-blocking by `accept4` itself (SOCK_NONBLOCK), not by an
// `ioctl(FIONBIO)` after it, and is the sole descriptor of its socket (see `TcpStream`'s
// `Drop`): one system call less a connection, and another at its close.
pub(crate) fn accept_registered(
    listener: &std::net::TcpListener,
) -> io::Result<(TcpStream, SocketAddr)> {
    let (s, a) = accept(listener)?;
    #[cfg(target_os = "linux")]
    {
        add_socket(&s).map(|io| (TcpStream::from_accepted(s, io), a))
    }
    #[cfg(not(target_os = "linux"))]
    {
        s.set_nonblocking(true)?;
        add_socket(&s).map(|io| (TcpStream::from_stream(s, io), a))
    }
}

// archzoo: `TcpListener::queued` before the accept queue was asked, and for good where the
// kernel cannot say.
pub(crate) const UNASKED: usize = usize::MAX;

// archzoo: how many connections wait in the listener's accept queue, as the kernel counts
// them (`TCP_INFO`: for a listening socket `tcpi_unacked` is the queue's length); `None`
// where it does not say. See `TcpListener::accept` for why it is asked.
#[cfg(target_os = "linux")]
pub(crate) fn queued(listener: &std::net::TcpListener) -> Option<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: `tcp_info` is plain integers (all zeroes is a value); getsockopt writes at
    // most `len` bytes into it and stores in `len` how many it wrote.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            std::ptr::addr_of_mut!(info).cast(),
            &mut len,
        )
    };
    // 10 is TCP_LISTEN in the kernel's numbering of states.
    let whole = std::mem::offset_of!(libc::tcp_info, tcpi_unacked) + 4;
    (rc == 0 && len as usize >= whole && info.tcpi_state == 10).then_some(info.tcpi_unacked as usize)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn queued(_listener: &std::net::TcpListener) -> Option<usize> {
    None
}

#[cfg(target_os = "linux")]
fn accept(listener: &std::net::TcpListener) -> io::Result<(std::net::TcpStream, SocketAddr)> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: `accept4` writes at most `len` bytes of address into the storage
    // `try_init` hands it, and returns a new descriptor that nothing else owns.
    let (fd, addr) = unsafe {
        socket2::SockAddr::try_init(|storage, len| {
            let fd = libc::accept4(
                listener.as_raw_fd(),
                storage.cast(),
                len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            );
            if fd < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(fd)
            }
        })?
    };
    // SAFETY: `fd` is the descriptor `accept4` just returned, owned by nothing else.
    let stream = unsafe { std::net::TcpStream::from_raw_fd(fd) };
    let addr = addr
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "accept4: not an IP address"))?;
    Ok((stream, addr))
}

#[cfg(not(target_os = "linux"))]
fn accept(listener: &std::net::TcpListener) -> io::Result<(std::net::TcpStream, SocketAddr)> {
    listener.accept()
}

impl EventSource for TcpListenerAccept<'_> {
    fn subscribe(&mut self, co: CoroutineImpl) {
        #[cfg(feature = "io_cancel")]
        let cancel = co_cancel_data(&co);
        let io_data = self.io_data;
        // if there is no timer we don't need to call add_io_timer
        io_data.co.store(co);

        // there is event happened
        if io_data.io_flag.load(Ordering::Acquire) != 0 {
            #[allow(clippy::needless_return)]
            return io_data.fast_schedule();
        }

        #[cfg(feature = "io_cancel")]
        {
            // register the cancel io data
            cancel.set_io((*io_data).clone());
            // re-check the cancel status
            if cancel.is_canceled() {
                unsafe { cancel.cancel() };
            }
        }
    }
}
