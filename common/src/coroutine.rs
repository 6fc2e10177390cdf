//! What the servers whose connections are `may` coroutines share beyond the codec.

use std::time::Duration;

/// How long may's scheduler thread waits in `epoll_wait` when it has no timer due.
///
/// may's default is 10 ms, which wakes an idle scheduler 100 times a second (a process of
/// `coroutine-reuseport` or a `reactor-workers` worker doing nothing made 99 context
/// switches a second). The short wait is for a scheduler with several threads, where a
/// coroutine on one thread can add an I/O timer to another thread's list while that
/// thread sleeps. With one scheduler thread, as [`one_scheduler_thread`] sets up, every
/// timer is added by the thread that computes the next wait, and everything else that
/// hands the thread work (a coroutine woken from another thread, a sleeper's timer) writes
/// its eventfd; the wait is only a safety net, and a second costs one wake-up a second.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// Configures may for one scheduler thread a process, as these servers run it (one Swoole
/// worker, one thread of requests): `stack` bytes a coroutine, the thread pinned to the
/// process's first CPU or not (`pin`: when the supervisor pinned the process — may's
/// default would otherwise pin every process's scheduler to CPU 0), and a scheduler that
/// sleeps while idle (it waits up to a second for I/O). Call before the first coroutine
/// starts.
pub fn one_scheduler_thread(stack: usize, pin: bool) {
    let config = may::config();
    config
        .set_workers(1)
        // may counts a stack in words, not bytes.
        .set_stack_size(stack / std::mem::size_of::<usize>())
        .set_worker_pin(pin);
    config.set_timeout_ns(IDLE_WAIT.as_nanos() as u64);
}

/// Parks the calling coroutine for `wait`, and comes back on the same thread: the
/// thread's scheduler, whose thread-local state (the codec's pools, the request counters)
/// the coroutine's code keeps using — and may have kept the address of, in an optimized
/// build, across the park. Stock `may` resumed a sleeper on its timer thread; the vendored
/// one hands it back to a worker (vendor/may, PATCHES.md change 6). With one scheduler
/// thread a process, as these servers run it, that is the thread it left, and a debug build
/// checks it: the conformance suite runs its `/sleep` rules in debug builds, where the
/// crash the other thread caused in release builds never showed.
pub fn sleep(wait: Duration) {
    let here = std::thread::current().id();
    may::coroutine::sleep(wait);
    debug_assert_eq!(
        std::thread::current().id(),
        here,
        "a coroutine's sleep ended on another thread"
    );
}
