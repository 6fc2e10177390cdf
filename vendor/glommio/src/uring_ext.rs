//! archzoo patch: raw submissions on the executor's main ring, with tagged completions
//! routed to a per-thread handler.
//!
//! glommio 0.9 drives sockets with one-shot operations: every read that comes back short
//! arms a new readiness poll, one io_uring submission per request. Multishot receive with
//! a provided-buffer ring (Linux 6.0) needs one submission per connection instead, but
//! glommio consumes an operation's source at its first completion and has no API for
//! either. This module is the smallest opening that lets a caller build it outside
//! glommio: it prepares any SQE on the main ring (submitted with glommio's own next
//! flush, so batching is unchanged), names the ring's fd (for `io_uring_register`), and
//! hands every completion whose `user_data` has [`TAG`] set to the thread's handler
//! instead of glommio's source map. Such an operation is counted in the ring until its
//! last completion (one without `IORING_CQE_F_MORE`).
//!
//! The caller owns everything an operation points to for as long as the kernel may use
//! it; that is why [`submit`] is `unsafe`.

use std::{cell::RefCell, io, os::unix::io::RawFd};

/// Bit 63 of `user_data`: a completion for the [`set_handler`] handler. glommio's own
/// `user_data` values are source indexes + 1 and never reach it.
pub const TAG: u64 = 1 << 63;

/// `IORING_CQE_F_MORE`: more completions will follow for this operation.
pub const CQE_F_MORE: u32 = 1 << 1;

/// One submission queue entry, field by field (see `struct io_uring_sqe`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RawSqe {
    /// `IORING_OP_*`.
    pub opcode: u8,
    /// `IOSQE_*` flags.
    pub flags: u8,
    /// `ioprio`: per-opcode flags (e.g. `IORING_RECV_MULTISHOT`).
    pub ioprio: u16,
    /// The file descriptor.
    pub fd: i32,
    /// `off` (or `addr2`).
    pub off: u64,
    /// `addr`: a buffer, or the `user_data` an `ASYNC_CANCEL` targets.
    pub addr: u64,
    /// `len`.
    pub len: u32,
    /// The opcode's flags word (`msg_flags`, `cancel_flags`, …).
    pub op_flags: u32,
    /// Must have [`TAG`] set, or be 0 to ignore the completion.
    pub user_data: u64,
    /// `buf_group` for `IOSQE_BUFFER_SELECT`.
    pub buf_group: u16,
}

type Handler = Box<dyn FnMut(u64, i32, u32) -> bool>;

thread_local! {
    static HANDLER: RefCell<Option<Handler>> = const { RefCell::new(None) };
}

/// Sets this thread's handler for tagged completions: `(user_data, res, flags)`, returning
/// whether it woke a task. It runs inside the reactor: it must not submit or block.
pub fn set_handler(handler: impl FnMut(u64, i32, u32) -> bool + 'static) {
    HANDLER.with(|h| *h.borrow_mut() = Some(Box::new(handler)));
}

pub(crate) fn complete(user_data: u64, res: i32, flags: u32) -> bool {
    HANDLER.with(|h| match h.borrow_mut().as_mut() {
        Some(handler) => handler(user_data, res, flags),
        None => false,
    })
}

/// The current executor's main ring fd (for `io_uring_register`, e.g. a buffer ring).
/// Panics outside an executor.
pub fn main_ring_fd() -> RawFd {
    crate::executor().reactor().sys.main_ring_fd()
}

/// Prepares `sqe` on the current executor's main ring; glommio submits it with its next
/// flush. Panics outside an executor.
///
/// # Safety
/// Whatever the entry points to (buffers, the buffer group) must stay valid until its last
/// completion, and `user_data` must be 0 or carry [`TAG`].
pub unsafe fn submit(sqe: &RawSqe) -> io::Result<()> {
    debug_assert!(sqe.user_data == 0 || sqe.user_data & TAG != 0);
    // SAFETY: forwarded contract.
    unsafe { crate::executor().reactor().sys.submit_raw(sqe) }
}
