//! Multishot accept: one io_uring submission takes every connection a shard's listener
//! gets, with no system call per connection.
//!
//! glommio 0.9 accepts with a direct `accept(2)` and, when the queue is empty, an io_uring
//! accept: without keep-alive that was an `accept` system call and most of a submission
//! per connection (0.98 and ~0.8, issue #38). `IORING_OP_ACCEPT` with
//! `IORING_ACCEPT_MULTISHOT` (Linux 5.19) stays armed and posts one completion per
//! connection, its new descriptor in `res`, until it is cancelled or fails; the accepts run
//! as the ring's task work, batched with the shard's other completions.
//!
//! What keeps it equivalent to an accept loop:
//! - **`--max-conns`.** At the limit the shard cancels the accept ([`RingAccept::pause`]),
//!   so new connections wait in the listen queue, as they do on every other row; a
//!   connection the kernel accepted before the cancel took effect is held, accepted but
//!   not served, until one closes.
//! - **Errors** (EMFILE, ENFILE, ENOMEM) end a multishot accept: the error goes to the
//!   accept loop, which logs and backs off, and the next accept arms a new one.
//! - **Stop.** The registry's `shutdown(SHUT_RD)` of the listener ends the accept with an
//!   error; the loop sees the stop and leaves. Descriptors accepted but never taken are
//!   closed, also those whose completion arrives after the acceptor is gone.
//! - **Old kernels.** An `EINVAL` before any connection means multishot accept is refused:
//!   [`RingAccept::refused`] says so and the shard accepts through glommio.
//!
//! The completions come through the shard's `glommio::uring_ext` handler, told apart from
//! the receives' by [`TAG_ACCEPT`].

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::os::fd::RawFd;
use std::task::{Poll, Waker};

use glommio::uring_ext::{self, RawSqe, CQE_F_MORE, TAG};

/// The `user_data` of a shard's accept: bit 62 beside the handler's bit 63 (the receives'
/// are a slab key under [`TAG`], far below bit 62).
pub const TAG_ACCEPT: u64 = TAG | 1 << 62;

const IORING_OP_ASYNC_CANCEL: u8 = 14;
const IORING_OP_ACCEPT: u8 = 13;
const IORING_ACCEPT_MULTISHOT: u16 = 1 << 0;

/// The shard's acceptor as the completion handler and the accept loop see it.
#[derive(Default)]
struct State {
    /// Completions not yet taken: a descriptor, or a negated errno.
    accepted: VecDeque<i32>,
    /// A multishot accept is armed (until its last completion).
    armed: bool,
    /// Its cancel was submitted and has not completed.
    cancelling: bool,
    /// A connection was accepted: an `EINVAL` after that is the listener's shutdown.
    accepted_one: bool,
    /// The kernel refused multishot accept.
    refused: bool,
    waker: Option<Waker>,
}

thread_local! {
    /// `None` before [`RingAccept::new`] and after its drop.
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// A shard's listener, accepted from with one multishot accept.
pub struct RingAccept {
    listener: RawFd,
}

impl RingAccept {
    /// The acceptor of `listener` (owned by the caller, open for this value's life); the
    /// accept is armed at the first [`accept`](Self::accept). One per shard thread.
    pub fn new(listener: RawFd) -> RingAccept {
        STATE.with(|s| *s.borrow_mut() = Some(State::default()));
        RingAccept { listener }
    }

    /// The kernel refused multishot accept: accept some other way.
    pub fn refused(&self) -> bool {
        STATE.with(|s| s.borrow().as_ref().is_some_and(|s| s.refused))
    }

    /// The next accepted connection's descriptor (the caller owns it), or the error that
    /// ended the multishot accept.
    pub async fn accept(&self) -> io::Result<RawFd> {
        poll_fn(|cx| {
            let arm = STATE.with(|s| {
                let mut guard = s.borrow_mut();
                let state = guard.as_mut().expect("acceptor initialised");
                if let Some(res) = state.accepted.pop_front() {
                    return Err(res);
                }
                state.waker = Some(cx.waker().clone());
                let arm = !state.armed;
                state.armed = true;
                Ok(arm)
            });
            let arm = match arm {
                Err(fd) if fd >= 0 => return Poll::Ready(Ok(fd)),
                Err(errno) => return Poll::Ready(Err(io::Error::from_raw_os_error(-errno))),
                Ok(arm) => arm,
            };
            if arm {
                let sqe = RawSqe {
                    opcode: IORING_OP_ACCEPT,
                    ioprio: IORING_ACCEPT_MULTISHOT,
                    fd: self.listener,
                    // No peer address asked for (addr and addr2 0); glommio's own accept
                    // does not give one either.
                    op_flags: libc::SOCK_CLOEXEC as u32,
                    user_data: TAG_ACCEPT,
                    ..RawSqe::default()
                };
                // SAFETY: the accept points to no memory; its completions carry
                // TAG_ACCEPT, which `on_completion` handles even after this is dropped.
                if unsafe { uring_ext::submit(&sqe) }.is_err() {
                    // The submission queue is full: glommio flushes it on its next pass.
                    STATE.with(|s| {
                        if let Some(state) = s.borrow_mut().as_mut() {
                            state.armed = false;
                        }
                    });
                    cx.waker().wake_by_ref();
                }
            }
            Poll::Pending
        })
        .await
    }

    /// At `--max-conns`: cancels the armed accept, so new connections stay in the listen
    /// queue until [`accept`](Self::accept) is called again.
    pub fn pause(&self) {
        let cancel = STATE.with(|s| {
            let mut guard = s.borrow_mut();
            let state = guard.as_mut()?;
            let cancel = state.armed && !state.cancelling;
            state.cancelling |= cancel;
            cancel.then_some(())
        });
        if cancel.is_some() && !submit_cancel() {
            // Not submitted (a full ring): asked again at the next pause.
            STATE.with(|s| {
                if let Some(state) = s.borrow_mut().as_mut() {
                    state.cancelling = false;
                }
            });
        }
    }
}

impl Drop for RingAccept {
    fn drop(&mut self) {
        let Some(state) = STATE.with(|s| s.borrow_mut().take()) else {
            return;
        };
        for fd in state.accepted.into_iter().filter(|fd| *fd >= 0) {
            close(fd);
        }
        if state.armed && !state.cancelling {
            // Best effort: the shard is ending, and its ring with it.
            let _ = submit_cancel();
        }
    }
}

/// Submits a cancel of the shard's accept; false if the ring took nothing.
fn submit_cancel() -> bool {
    let sqe = RawSqe {
        opcode: IORING_OP_ASYNC_CANCEL,
        fd: -1,
        addr: TAG_ACCEPT,
        user_data: 0,
        ..RawSqe::default()
    };
    // SAFETY: a cancel points to nothing; user_data 0 means its completion is ignored.
    unsafe { uring_ext::submit(&sqe) }.is_ok()
}

/// One completion of the shard's accept (runs inside glommio's reactor: no submissions).
pub fn on_completion(res: i32, flags: u32) -> bool {
    STATE.with(|s| {
        let mut guard = s.borrow_mut();
        let Some(state) = guard.as_mut() else {
            // The acceptor is gone: nobody will take this connection.
            if res >= 0 {
                close(res);
            }
            return false;
        };
        if flags & CQE_F_MORE == 0 {
            state.armed = false;
            state.cancelling = false;
        }
        match res {
            fd if fd >= 0 => {
                state.accepted_one = true;
                state.accepted.push_back(fd);
            }
            // Paused for --max-conns: nothing to report.
            e if e == -libc::ECANCELED => return false,
            e if e == -libc::EINVAL && !state.accepted_one => {
                state.refused = true;
                state.accepted.push_back(e);
            }
            e => state.accepted.push_back(e),
        }
        match state.waker.take() {
            Some(w) => {
                w.wake();
                true
            }
            None => false,
        }
    })
}

fn close(fd: RawFd) {
    // SAFETY: a descriptor the kernel accepted for this shard that nothing else holds.
    unsafe { libc::close(fd) };
}
