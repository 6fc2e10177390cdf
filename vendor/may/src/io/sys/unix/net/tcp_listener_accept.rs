use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use super::super::{add_socket, co_io_result, IoData};
#[cfg(feature = "io_cancel")]
use crate::coroutine_impl::co_cancel_data;
use crate::coroutine_impl::{is_coroutine, CoroutineImpl, EventSource};
use crate::io::AsIoData;
use crate::net::{TcpListener, TcpStream};
use crate::yield_now::yield_with_io;

pub struct TcpListenerAccept<'a> {
    io_data: &'a IoData,
    // archzoo: the listener itself, for its count of queued connections (`accept_queued`).
    listener: &'a TcpListener,
    pub(crate) is_coroutine: bool,
}

impl<'a> TcpListenerAccept<'a> {
    pub fn new(socket: &'a TcpListener) -> io::Result<Self> {
        Ok(TcpListenerAccept {
            io_data: socket.as_io_data(),
            listener: socket,
            is_coroutine: is_coroutine(),
        })
    }

    pub fn done(&mut self) -> io::Result<(TcpStream, SocketAddr)> {
        loop {
            co_io_result(self.is_coroutine)?;

            // archzoo: a wake-up asks the queue again (which clears the io_flag first).
            self.listener.queued().store(UNASKED, Ordering::Relaxed);
            if let Some(accepted) = accept_queued(self.listener)? {
                return Ok(accepted);
            }

            if self.io_data.io_flag.load(Ordering::Relaxed) != 0 {
                continue;
            }

            // the result is still WouldBlock, need to try again
            yield_with_io(self, self.is_coroutine);
        }
    }
}

// archzoo: one accept against the listener's count of queued connections, for both
// `TcpListener::accept`'s first try and the wait for readiness; `Ok(None)` when none is owed
// (the caller parks). Unasked, the io_flag is cleared and then the queue is asked: a
// connection after the question sets the flag, which the park sees, so when the counted
// ones are taken the coroutine parks without asking again. An accept into an empty queue is
// what this saves (see `TcpListener::accept`). Where the kernel cannot say, the count
// stays unasked and every call accepts until EAGAIN, as upstream.
pub(crate) fn accept_queued(listener: &TcpListener) -> io::Result<Option<(TcpStream, SocketAddr)>> {
    let count = listener.queued();
    let mut owed = count.load(Ordering::Relaxed);
    if owed == UNASKED {
        listener.as_io_data().reset();
        owed = queued(listener.inner()).unwrap_or(UNASKED);
    }
    if owed == 0 {
        return Ok(None);
    }
    if owed != UNASKED {
        count.store(owed - 1, Ordering::Relaxed);
    }
    match accept_registered(listener.inner()) {
        Ok(accepted) => Ok(Some(accepted)),
        Err(e) => {
            // raw_os_error is faster than kind
            let raw_err = e.raw_os_error();
            if raw_err == Some(libc::EAGAIN) || raw_err == Some(libc::EWOULDBLOCK) {
                // fewer than counted (another accepter took one): none owed now
                if owed != UNASKED {
                    count.store(0, Ordering::Relaxed);
                }
                Ok(None)
            } else {
                // the connection may still be queued (EMFILE takes none): ask again
                count.store(UNASKED, Ordering::Relaxed);
                Err(e)
            }
        }
    }
}

// archzoo: accepts one connection, non-blocking and registered with the selector (through
// `accept_queued`, the one way in). On Linux the socket is made non-blocking by `accept4` itself (SOCK_NONBLOCK), not by an
// `ioctl(FIONBIO)` after it, and is the sole descriptor of its socket (see `TcpStream`'s
// `Drop`): one system call less a connection, and another at its close.
fn accept_registered(
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
// where it does not say. See `TcpListener::accept` for why it is asked. (The twin of
// archzoo's `common::listener::queued`, which depends on this crate and so cannot lend it.)
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
