//! Multishot receive into a provided-buffer ring: an io_uring submission or two per
//! connection instead of one per request.
//!
//! glommio 0.9 reads a socket with a direct `recv` and, when it comes back short, arms a
//! one-shot readiness poll — so every keep-alive request costs an io_uring submission on
//! top of its `recv` and `send` (measured: 3.45 syscalls + submissions per request). Here
//! each connection arms one `IORING_OP_RECV` with `IORING_RECV_MULTISHOT` and
//! `IOSQE_BUFFER_SELECT`: the kernel receives into buffers this shard lends it through a
//! buffer ring (`IORING_REGISTER_PBUF_RING`, Linux 5.19; multishot receive 6.0) and posts
//! one completion per arrival, without a new submission. A request then costs its `send`
//! and a share of the executor's ring round trips; returning a buffer is two stores into
//! shared memory.
//!
//! **The first receive is one-shot.** Without keep-alive a connection reads one request and
//! closes; a multishot receive still armed then has to be cancelled (a second submission),
//! and until that cancel completes the ring holds the socket, so its TCP close runs later as
//! io_uring task work instead of in the `close` call. A one-shot receive is over when its
//! data arrives: a connection that closes after one request costs one submission and closes
//! at once. A connection that reads again arms the multishot receive then — one more
//! submission in a keep-alive connection's life.
//!
//! What keeps this bounded and live:
//! - **Flow control.** A connection whose task stops reading (its peer does not read the
//!   answers) would keep taking buffers; at [`MAX_QUEUED`] buffers its receive is
//!   cancelled, and re-armed once the task has read them. Data beyond stays in the socket,
//!   under TCP flow control, as with any other server here.
//! - **Starvation.** When the pool runs low (many such connections), a receive ends with
//!   `ENOBUFS`; connections then read through glommio's own path until buffers return.
//! - **Closing.** An armed receive holds a reference to the socket, so a connection that
//!   ends with one armed cancels it; its slot (and its buffers) are freed at the last
//!   completion, never before — the kernel may write into a buffer until then.
//! - **A full ring.** If the submission queue takes nothing (the kernel is busy), an arm
//!   falls back to glommio's read for that call and a cancel is queued for a retry.
//! - **Old kernels.** If the buffer ring cannot be registered or multishot receive is
//!   refused (`EINVAL`), every connection uses glommio's path, as before.
//!
//! Everything is per shard (thread-local): the pool, the slot table, the handler glommio
//! calls for completions (`glommio::uring_ext`, one of the patches to glommio listed in
//! `vendor/glommio/PATCHES.md`).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU16, Ordering};
use std::task::{Context, Poll, Waker};

use futures_lite::AsyncRead;
use glommio::net::TcpStream;
use glommio::uring_ext::{self, RawSqe, CQE_F_MORE, TAG};
use slab::Slab;

/// Buffers in a shard's pool (a power of two, as the buffer ring requires).
const ENTRIES: u16 = 512;
/// Bytes per buffer: a request head fits in one; larger bodies take several.
const BUF_SIZE: usize = 4096;
/// Buffers one connection may hold unread before its receive is paused.
const MAX_QUEUED: usize = 4;
/// Below this many free buffers, a paused receive is not re-armed (see "Starvation").
const LOW_WATER: u16 = ENTRIES / 8;
/// The buffer group id: each shard registers its own ring on its own io_uring.
const BGID: u16 = 0;

const IORING_OP_ASYNC_CANCEL: u8 = 14;
const IORING_OP_RECV: u8 = 27;
const IOSQE_BUFFER_SELECT: u8 = 1 << 5;
const IORING_RECV_MULTISHOT: u16 = 1 << 1;
const IORING_CQE_F_BUFFER: u32 = 1 << 0;
const IORING_CQE_BUFFER_SHIFT: u32 = 16;
const IORING_REGISTER_PBUF_RING: libc::c_uint = 22;

/// `struct io_uring_buf_reg`.
#[repr(C)]
struct BufReg {
    ring_addr: u64,
    ring_entries: u32,
    bgid: u16,
    flags: u16,
    resv: [u64; 3],
}

/// `struct io_uring_buf`: one ring entry. The ring's tail is the `resv` of entry 0.
#[repr(C)]
struct RingBuf {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

/// The buffers a shard lends the kernel, and the ring that lends them.
///
/// Leaked on purpose: the kernel may write into a buffer until the shard's ring is gone,
/// and the shard lives as long as the process.
struct Pool {
    ring: *mut RingBuf,
    bufs: *mut u8,
    /// Our copy of the ring's tail (the kernel only reads it).
    tail: Cell<u16>,
    /// Buffers lent to the kernel and not yet used by it (estimate for `LOW_WATER`).
    lent: Cell<u16>,
}

impl Pool {
    /// Registers a buffer ring on this executor's io_uring; `None` if the kernel refuses.
    fn register() -> Option<&'static Pool> {
        let ring_layout =
            std::alloc::Layout::from_size_align(ENTRIES as usize * size_of::<RingBuf>(), 4096)
                .ok()?;
        let bufs_layout =
            std::alloc::Layout::from_size_align(ENTRIES as usize * BUF_SIZE, 4096).ok()?;
        // SAFETY: non-zero sizes; the memory is leaked below or freed on failure.
        let (ring, bufs) = unsafe {
            (
                std::alloc::alloc_zeroed(ring_layout) as *mut RingBuf,
                std::alloc::alloc(bufs_layout),
            )
        };
        if ring.is_null() || bufs.is_null() {
            return None;
        }
        let reg = BufReg {
            ring_addr: ring as u64,
            ring_entries: ENTRIES as u32,
            bgid: BGID,
            flags: 0,
            resv: [0; 3],
        };
        // SAFETY: io_uring_register(2) with a valid, page-aligned ring of ENTRIES entries.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                uring_ext::main_ring_fd(),
                IORING_REGISTER_PBUF_RING,
                &reg as *const BufReg,
                1,
            )
        };
        if rc != 0 {
            // SAFETY: allocated above with these layouts, never shared.
            unsafe {
                std::alloc::dealloc(ring as *mut u8, ring_layout);
                std::alloc::dealloc(bufs, bufs_layout);
            }
            return None;
        }
        let pool = Box::leak(Box::new(Pool {
            ring,
            bufs,
            tail: Cell::new(0),
            lent: Cell::new(0),
        }));
        for bid in 0..ENTRIES {
            pool.stage(bid);
        }
        pool.publish();
        Some(pool)
    }

    /// Writes buffer `bid` at the tail (not yet visible to the kernel).
    fn stage(&self, bid: u16) {
        let tail = self.tail.get();
        let slot = (tail & (ENTRIES - 1)) as usize;
        // SAFETY: slot < ENTRIES; the kernel only reads entries below the published tail,
        // and this one is at or past it.
        unsafe {
            let entry = self.ring.add(slot);
            (*entry).addr = self.bufs.add(bid as usize * BUF_SIZE) as u64;
            (*entry).len = BUF_SIZE as u32;
            (*entry).bid = bid;
        }
        self.tail.set(tail.wrapping_add(1));
        self.lent.set(self.lent.get() + 1);
    }

    /// Makes staged buffers visible to the kernel (a release store of the tail).
    fn publish(&self) {
        // SAFETY: the tail is the u16 at offset 14 of the ring, naturally aligned; the
        // kernel reads it with acquire semantics.
        let tail = unsafe { &*((self.ring as *mut u8).add(14) as *const AtomicU16) };
        tail.store(self.tail.get(), Ordering::Release);
    }

    /// Gives buffer `bid` back to the kernel.
    fn recycle(&self, bid: u16) {
        self.stage(bid);
        self.publish();
    }

    /// The bytes the kernel wrote into buffer `bid`.
    fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        debug_assert!(bid < ENTRIES && len <= BUF_SIZE);
        // SAFETY: the kernel handed `bid` back with `len` bytes written, and will not
        // touch it again until it is recycled.
        unsafe { std::slice::from_raw_parts(self.bufs.add(bid as usize * BUF_SIZE), len) }
    }
}

/// One connection's receive, as the completion handler and its task see it.
#[derive(Default)]
struct Slot {
    /// Received buffers not yet read: (buffer id, length), and how far into the first.
    queue: VecDeque<(u16, u32)>,
    offset: usize,
    eof: bool,
    error: Option<i32>,
    /// A receive is armed (until its last completion).
    armed: bool,
    /// A receive was armed before: the next one is multishot ("The first receive is
    /// one-shot" above).
    received: bool,
    /// A cancel was asked for (flow control or close) and has not completed.
    cancelling: bool,
    /// The last receive ended for lack of buffers: read through glommio until they return.
    starved: bool,
    /// The connection is gone: free the slot at the last completion.
    orphan: bool,
    waker: Option<Waker>,
}

struct Shard {
    pool: &'static Pool,
    slots: Slab<Slot>,
    /// Receives to cancel, asked for by the handler (which must not submit).
    cancels: Vec<usize>,
    canceller: Option<Waker>,
    /// Multishot receive was refused (EINVAL): everyone reads through glommio.
    unsupported: bool,
}

thread_local! {
    static SHARD: RefCell<Option<Shard>> = const { RefCell::new(None) };
}

/// Sets up this shard's pool and handler; false (and glommio's path for every connection)
/// when the kernel cannot do it. Call once, inside the shard's executor.
pub fn init() -> bool {
    let Some(pool) = Pool::register() else {
        return false;
    };
    SHARD.with(|s| {
        *s.borrow_mut() = Some(Shard {
            pool,
            slots: Slab::new(),
            cancels: Vec::new(),
            canceller: None,
            unsupported: false,
        })
    });
    glommio::spawn_local(canceller()).detach();
    true
}

/// One completion of a connection's receive (runs inside glommio's reactor: no
/// submissions). The shard's `uring_ext` handler calls it.
pub fn on_completion(user_data: u64, res: i32, flags: u32) -> bool {
    SHARD.with(|s| {
        let mut guard = s.borrow_mut();
        let Some(shard) = guard.as_mut() else {
            return false;
        };
        let key = (user_data & !TAG) as usize;
        let pool = shard.pool;
        let Some(slot) = shard.slots.get_mut(key) else {
            return false;
        };
        if flags & IORING_CQE_F_BUFFER != 0 {
            let bid = (flags >> IORING_CQE_BUFFER_SHIFT) as u16;
            pool.lent.set(pool.lent.get().saturating_sub(1));
            if res > 0 && !slot.orphan {
                slot.queue.push_back((bid, res as u32));
            } else {
                pool.recycle(bid);
            }
        }
        match res {
            0 => slot.eof = true,
            r if r > 0 => {}
            r if r == -libc::ENOBUFS => slot.starved = true,
            r if r == -libc::ECANCELED => {}
            r if r == -libc::EINVAL && !slot.eof => shard.unsupported = true,
            r => slot.error = Some(-r),
        }
        let more = flags & CQE_F_MORE != 0;
        if !more {
            slot.armed = false;
            slot.cancelling = false;
            if slot.orphan {
                for (bid, _) in slot.queue.drain(..) {
                    pool.recycle(bid);
                }
                shard.slots.remove(key);
                return false;
            }
        } else if slot.queue.len() >= MAX_QUEUED && !slot.cancelling {
            // The task is not keeping up (its peer stopped reading): pause this receive.
            slot.cancelling = true;
            shard.cancels.push(key);
            if let Some(w) = shard.canceller.take() {
                w.wake();
            }
        }
        match slot.waker.take() {
            Some(w) => {
                w.wake();
                true
            }
            None => false,
        }
    })
}

/// Submits the cancels the handler asked for (it runs inside the reactor and must not).
async fn canceller() {
    loop {
        let keys = poll_fn(|cx| {
            SHARD.with(|s| {
                let mut guard = s.borrow_mut();
                let shard = guard.as_mut().expect("shard initialised");
                if shard.cancels.is_empty() {
                    shard.canceller = Some(cx.waker().clone());
                    Poll::Pending
                } else {
                    Poll::Ready(std::mem::take(&mut shard.cancels))
                }
            })
        })
        .await;
        let mut failed = false;
        for key in keys {
            failed |= !submit_cancel(key);
        }
        if failed {
            // The ring was full (the cancels were queued again): let the reactor drain it.
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
}

/// Submits a cancel of slot `key`'s receive; if the ring takes none now, queues it for
/// the canceller to retry (an armed receive must not be left behind: it holds the socket).
fn submit_cancel(key: usize) -> bool {
    let sqe = RawSqe {
        opcode: IORING_OP_ASYNC_CANCEL,
        fd: -1,
        addr: TAG | key as u64,
        user_data: 0,
        ..RawSqe::default()
    };
    // SAFETY: a cancel points to nothing; user_data 0 means its completion is ignored.
    if unsafe { uring_ext::submit(&sqe) }.is_ok() {
        return true;
    }
    SHARD.with(|s| {
        if let Some(shard) = s.borrow_mut().as_mut() {
            shard.cancels.push(key);
            if let Some(w) = shard.canceller.take() {
                w.wake();
            }
        }
    });
    false
}

/// A connection's receive side.
pub struct RingRecv {
    /// The connection's slot; `None` when this shard reads through glommio.
    key: Option<usize>,
    fd: i32,
}

impl RingRecv {
    /// Takes a slot for `stream`; the receive is armed at the first read.
    pub fn new(stream: &TcpStream) -> RingRecv {
        use std::os::fd::AsRawFd;
        let key = SHARD.with(|s| {
            s.borrow_mut()
                .as_mut()
                .filter(|s| !s.unsupported)
                .map(|s| s.slots.insert(Slot::default()))
        });
        RingRecv {
            key,
            fd: stream.as_raw_fd(),
        }
    }

    /// Waits until a read would complete at once — bytes, the end of the stream or an
    /// error are queued — without holding a buffer meanwhile, so an idle connection's task
    /// holds none (its bytes wait in the shard's ring until it reads them). Reading through
    /// glommio's path instead (old kernel, starved pool) there is no such wait: it returns
    /// at once and the read waits.
    pub async fn ready(&mut self, stream: &mut TcpStream) {
        let _ = poll_fn(|cx| self.poll(cx, stream, None)).await;
    }

    /// Reads into `buf` like `AsyncRead::read` (0 = end of stream).
    pub async fn read(&mut self, stream: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll(cx, stream, Some(&mut *buf))).await
    }

    /// A read into `buf`, or with no buffer the wait for one to be possible at once
    /// (`Ok(0)` then means only "ready").
    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        stream: &mut TcpStream,
        mut buf: Option<&mut [u8]>,
    ) -> Poll<io::Result<usize>> {
        let Some(key) = self.key else {
            return match buf {
                Some(buf) => Pin::new(stream).poll_read(cx, buf),
                None => Poll::Ready(Ok(0)),
            };
        };
        enum Next {
            Done(io::Result<usize>),
            /// Arm a receive: multishot, or one-shot for the connection's first.
            Arm {
                multishot: bool,
            },
            Glommio,
            Wait,
        }
        let next = SHARD.with(|s| {
            let mut guard = s.borrow_mut();
            let shard = guard.as_mut().expect("shard initialised");
            let pool = shard.pool;
            let unsupported = shard.unsupported;
            let slot = &mut shard.slots[key];
            let ready = !slot.queue.is_empty() || slot.error.is_some() || slot.eof;
            let Some(buf) = buf.as_deref_mut().filter(|_| ready) else {
                if ready {
                    return Next::Done(Ok(0));
                }
                if slot.armed {
                    slot.waker = Some(cx.waker().clone());
                    return Next::Wait;
                }
                if unsupported || (slot.starved && pool.lent.get() < LOW_WATER) {
                    return Next::Glommio;
                }
                slot.starved = false;
                slot.armed = true;
                slot.waker = Some(cx.waker().clone());
                let multishot = std::mem::replace(&mut slot.received, true);
                return Next::Arm { multishot };
            };
            if let Some(&(bid, len)) = slot.queue.front() {
                let data = &pool.bytes(bid, len as usize)[slot.offset..];
                let n = data.len().min(buf.len());
                buf[..n].copy_from_slice(&data[..n]);
                slot.offset += n;
                if slot.offset == len as usize {
                    slot.queue.pop_front();
                    slot.offset = 0;
                    pool.recycle(bid);
                }
                return Next::Done(Ok(n));
            }
            if let Some(e) = slot.error.take() {
                return Next::Done(Err(io::Error::from_raw_os_error(e)));
            }
            Next::Done(Ok(0)) // end of stream
        });
        let glommio = |cx: &mut Context<'_>, stream: &mut TcpStream| match buf {
            Some(buf) => Pin::new(stream).poll_read(cx, buf),
            None => Poll::Ready(Ok(0)),
        };
        match next {
            Next::Done(r) => Poll::Ready(r),
            Next::Wait => Poll::Pending,
            Next::Glommio => glommio(cx, stream),
            Next::Arm { multishot } => {
                let sqe = RawSqe {
                    opcode: IORING_OP_RECV,
                    flags: IOSQE_BUFFER_SELECT,
                    ioprio: if multishot { IORING_RECV_MULTISHOT } else { 0 },
                    fd: self.fd,
                    user_data: TAG | key as u64,
                    buf_group: BGID,
                    ..RawSqe::default()
                };
                // SAFETY: the receive writes only into the pool's buffers (leaked, so
                // valid for good); its completions name this slot, which lives until the
                // last one (see `Drop`).
                match unsafe { uring_ext::submit(&sqe) } {
                    Ok(()) => Poll::Pending,
                    Err(_) => {
                        // The ring takes no submission now: read through glommio this time.
                        self.disarm(key);
                        glommio(cx, stream)
                    }
                }
            }
        }
    }

    fn disarm(&self, key: usize) {
        SHARD.with(|s| {
            if let Some(shard) = s.borrow_mut().as_mut() {
                shard.slots[key].armed = false;
            }
        });
    }
}

impl Drop for RingRecv {
    fn drop(&mut self) {
        let Some(key) = self.key else {
            return;
        };
        let cancel = SHARD.with(|s| {
            let mut guard = s.borrow_mut();
            let shard = guard.as_mut()?;
            let pool = shard.pool;
            let slot = &mut shard.slots[key];
            if slot.armed {
                // The kernel still holds the socket and may fill a buffer: the slot goes
                // at the last completion.
                slot.orphan = true;
                slot.waker = None;
                let first = !slot.cancelling;
                slot.cancelling = true;
                return first.then_some(key);
            }
            for (bid, _) in slot.queue.drain(..) {
                pool.recycle(bid);
            }
            shard.slots.remove(key);
            None
        });
        if let Some(key) = cancel {
            let _ = submit_cancel(key);
        }
    }
}

const _: () = assert!(size_of::<RingBuf>() == 16 && size_of::<BufReg>() == 40);
