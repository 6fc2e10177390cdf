//! Buffers lent to a connection only while it has a request in hand.
//!
//! Most connections of a real server sit idle between requests (browsers, mobile clients,
//! long polls), and what an idle connection holds is what a server pays per connection at
//! scale. nginx keeps no request buffer for an idle keep-alive connection: it takes one when
//! bytes arrive and gives it back when the request is answered. The codec does the same:
//! a [`super::Conn`] borrows its input and output buffers from a small per-thread pool when
//! it needs them and returns them as soon as it is idle again (nothing buffered, nothing
//! owed), so an idle connection is its state machine and nothing else.
//!
//! The pool keeps the lending cheap on the hot path — a keep-alive request takes and
//! returns two buffers, a pop and a push on a thread-local list, no allocation, no zeroing —
//! and bounded: it keeps at most [`KEEP`] buffers of each kind per thread and frees the
//! rest. A buffer that grew — pipelined batches outgrow 4 KiB of responses at once — goes
//! back grown, up to [`MAX_KEPT`]: freeing it would make the next batch grow one again,
//! a reallocation and a copy every batch (measured: +30 % CPU per pipelined request on the
//! epoll loops when grown buffers were freed). Larger ones (a huge head) go back to the
//! allocator. Threads that hand connections to each other (tokio's work stealing) return a
//! buffer to whichever thread the connection ends on; the bound keeps that from piling up.

use std::cell::RefCell;

/// Size of a new input buffer, and room of a new output buffer; grown ones are kept up to
/// [`MAX_KEPT`].
pub(super) const SIZE: usize = 4 * 1024;

/// Most buffers of each kind one thread keeps for reuse.
const KEEP: usize = 64;

/// Largest buffer the pool takes back (so at most `KEEP × MAX_KEPT` of each kind per
/// thread, 1 MiB, however the connections come and go).
const MAX_KEPT: usize = 16 * 1024;

/// Room of a new request-target string: a typical path and query.
const TARGET_SIZE: usize = 64;

/// Largest target string the pool takes back.
const MAX_TARGET_KEPT: usize = 1024;

struct Pool {
    /// Input buffers: `SIZE..=MAX_KEPT` bytes long, initialised, contents meaningless.
    input: Vec<Vec<u8>>,
    /// Output buffers: empty, `SIZE..=MAX_KEPT` bytes of capacity.
    output: Vec<Vec<u8>>,
    /// Request-target strings of ended connections: empty, `TARGET_SIZE..=MAX_TARGET_KEPT`
    /// bytes of room. A connection copies its first request's target into one and keeps it
    /// for its later requests; without keep-alive every connection has one request, so
    /// without the pool each allocated and freed one.
    targets: Vec<String>,
}

thread_local! {
    static POOL: RefCell<Pool> = const {
        RefCell::new(Pool { input: Vec::new(), output: Vec::new(), targets: Vec::new() })
    };
}

/// An input buffer of at least [`SIZE`] bytes to read into.
pub(super) fn take_input() -> Vec<u8> {
    POOL.with_borrow_mut(|p| p.input.pop())
        .unwrap_or_else(|| vec![0; SIZE])
}

/// An empty output buffer with room for at least a typical response.
pub(super) fn take_output() -> Vec<u8> {
    POOL.with_borrow_mut(|p| p.output.pop())
        .unwrap_or_else(|| Vec::with_capacity(SIZE))
}

/// Takes back `buf` (leaving an unallocated vector in its place) if it is no larger than
/// [`MAX_KEPT`] and the pool has room; frees it otherwise. Lent again as it is: its length,
/// at least [`SIZE`], is the room a read is offered.
pub(super) fn give_input(buf: &mut Vec<u8>) {
    let buf = std::mem::take(buf);
    if (SIZE..=MAX_KEPT).contains(&buf.len()) {
        keep(buf, |p| &mut p.input);
    }
}

/// Takes back `buf` emptied, as [`give_input`] does for input.
pub(super) fn give_output(buf: &mut Vec<u8>) {
    let mut buf = std::mem::take(buf);
    if (SIZE..=MAX_KEPT).contains(&buf.capacity()) {
        buf.clear();
        keep(buf, |p| &mut p.output);
    }
}

/// Puts `item` on this thread's `list` of the pool if it holds fewer than [`KEEP`];
/// frees it otherwise.
fn keep<T>(item: T, list: fn(&mut Pool) -> &mut Vec<T>) {
    // try_with: a connection dropped while its thread exits just frees what it held.
    let _ = POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        let list = list(&mut p);
        if list.len() < KEEP {
            list.push(item);
        }
    });
}

/// An empty string to copy a request target into.
pub(super) fn take_target() -> String {
    POOL.with_borrow_mut(|p| p.targets.pop())
        .unwrap_or_else(|| String::with_capacity(TARGET_SIZE))
}

/// Takes back an ended connection's target string, emptied, if it is no larger than
/// [`MAX_TARGET_KEPT`] and the pool has room; frees it otherwise.
pub(super) fn give_target(mut target: String) {
    if (TARGET_SIZE..=MAX_TARGET_KEPT).contains(&target.capacity()) {
        target.clear();
        keep(target, |p| &mut p.targets);
    }
}

/// How many input buffers, output buffers and target strings this thread's pool holds
/// (for the codec's tests).
#[cfg(test)]
pub(super) fn pooled() -> (usize, usize, usize) {
    POOL.with_borrow(|p| (p.input.len(), p.output.len(), p.targets.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_returned_target_string_is_lent_again_empty() {
        let mut t = take_target();
        t.push_str("/plaintext");
        let ptr = t.as_ptr();
        give_target(t);
        let again = take_target();
        assert!(again.is_empty());
        assert_eq!(again.as_ptr(), ptr, "the same string comes back");
        give_target("/".repeat(2 * MAX_TARGET_KEPT));
        assert_eq!(
            take_target().capacity(),
            TARGET_SIZE,
            "a huge one was freed"
        );
    }

    #[test]
    fn a_returned_buffer_is_lent_again_and_only_huge_ones_are_freed() {
        let mut a = take_input();
        assert_eq!(a.len(), SIZE);
        let ptr = a.as_ptr();
        give_input(&mut a);
        assert_eq!(a.capacity(), 0, "the connection keeps nothing");
        let again = take_input();
        assert_eq!(again.as_ptr(), ptr, "the same buffer comes back");

        // A buffer grown for a pipelined batch comes back grown; a huge one is freed.
        let mut grown = vec![0u8; 2 * SIZE];
        give_input(&mut grown);
        assert_eq!(take_input().len(), 2 * SIZE);
        let mut huge = vec![0u8; 2 * MAX_KEPT];
        give_input(&mut huge);
        assert_eq!(take_input().len(), SIZE, "a fresh standard buffer instead");

        let mut out = take_output();
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        give_output(&mut out);
        let again = take_output();
        assert!(again.is_empty() && again.capacity() == SIZE);
    }

    #[test]
    fn the_pool_keeps_at_most_its_bound() {
        let mut bufs: Vec<Vec<u8>> = (0..KEEP + 10).map(|_| take_input()).collect();
        for b in &mut bufs {
            give_input(b);
        }
        assert_eq!(POOL.with_borrow(|p| p.input.len()), KEEP);
    }
}
