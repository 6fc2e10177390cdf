//! What the servers whose connections are `may` coroutines share beyond the codec.

use std::time::Duration;

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
