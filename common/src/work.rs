//! `--work-us N`: N µs of CPU per request, spent inside the handler — after the request is
//! parsed, before the answer — so that it runs where each model runs its handler (a worker
//! process, a coroutine, a tokio task, a glommio shard). It is how a model is given an
//! original's per-request cost: PHP's or Python's interpreter, which archzoo's Rust handler
//! does not have.
//!
//! The work is arithmetic until N µs have passed on the monotonic clock, read every 64
//! rounds. On a machine whose clock source is the TSC (`tsc`, `kvm-clock`) that read is the
//! vDSO's, not a system call. A deadline rather than a calibrated count of rounds: a count
//! takes longer when the CPU's SMT sibling is busy (the load generator's), a deadline does
//! not — what it cannot do is count CPU time it was preempted out of, which a pinned
//! server's handler rarely is within 50 µs. `black_box` keeps the loop from being folded.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Spends `work` of CPU here, in the calling thread (nothing for zero).
pub fn spend(work: Duration) {
    if work.is_zero() {
        return;
    }
    let until = Instant::now() + work;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while Instant::now() < until {
        for _ in 0..64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x = black_box(x);
        }
    }
    black_box(x);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spending_takes_the_asked_time_and_nothing_for_none() {
        let t = Instant::now();
        spend(Duration::ZERO);
        assert!(t.elapsed() < Duration::from_millis(1));
        let t = Instant::now();
        spend(Duration::from_millis(2));
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(2) && took < Duration::from_millis(50),
            "{took:?}"
        );
    }
}
