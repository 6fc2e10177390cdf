//! `bench --fidelity`'s rules: each model beside the real systems it stands for, on the cells where
//! an architecture shows its signature, and the price of the language and implementation
//! once the architecture is held equal.
//!
//! - **Signatures** — what the architecture predicts whatever the language:
//!   - req/s at `/sleep?ms=20` (a server that blocks a worker per wait is capped at
//!     workers ÷ 20 ms, one that waits without a thread at about connections ÷ 20 ms);
//!   - the ratio of keep-alive to connection-per-request throughput on hello world;
//!   - **balance**: with [`BALANCE_WORKERS`] workers and a connection per request, how the
//!     work spreads over them — workers that each take from one shared socket spread it as
//!     the kernel's wake-ups fall (epoll wakes every waiter and the first one to run takes
//!     what is queued; blocking `accept` wakes one in turn), one socket per worker
//!     (SO_REUSEPORT) spreads it by a hash of the connection, a dispatcher (Node's cluster
//!     master, a reactor) by its own rule. A model counts each worker's requests
//!     (`--stats`); a peer keeps no counts, so its workers' CPU time is read from /proc
//!     (`variants::peers::Workers` says which of its processes are workers);
//!   - **scaling**: `/sum` (CPU-bound) req/s with one worker per server CPU ÷ with one
//!     worker: every architecture here predicts ≈ the number of CPUs (none shares one
//!     interpreter lock across workers); measurable only with ≥ 2 server CPUs, and
//!     reported as n/a with that reason otherwise.
//!
//!   A model and its original **agree** when the original's figure is within ±25 % of the
//!   model's; for balance, when their skews (the work beyond an even split, 0 = even,
//!   1 = one worker did it all) are within 0.25 of each other.
//! - **Cost** — CPU µs per request on hello world, the original's ÷ the model's.
//!
//! This file holds what the comparison is made of (the signatures, the pairs) and when
//! two figures agree; `modes::fidelity` runs the cells, `write::fidelity` draws the table.

use variants::peers;
use variants::VARIANTS;

use super::cell::Cell;

/// Workers of the balance signature: the fewest that can be unequal.
pub const BALANCE_WORKERS: usize = 2;

/// A cell a fidelity run measures for every model and peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    pub workload: &'static str,
    pub keep_alive: bool,
    pub workers: usize,
}

pub const fn sig(workload: &'static str, keep_alive: bool, workers: usize) -> Signature {
    Signature {
        workload,
        keep_alive,
        workers,
    }
}

/// The cells of a run whose servers get `workers` workers on `server_cpus` CPUs, each
/// once: hello world with and without keep-alive and `/sleep` at `workers`, hello world
/// without keep-alive at [`BALANCE_WORKERS`], and — with two CPUs or more to scale over —
/// `/sum` at one worker and at one per CPU.
pub fn cells(workers: usize, server_cpus: usize) -> Vec<Signature> {
    let mut all = vec![
        sig("plaintext", true, workers),
        sig("plaintext", false, workers),
        sig("sleep", true, workers),
        sig("plaintext", false, BALANCE_WORKERS),
    ];
    if server_cpus >= 2 {
        all.extend([sig("sum", true, 1), sig("sum", true, server_cpus)]);
    }
    let mut out: Vec<Signature> = Vec::new();
    for s in all {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// How far apart two figures may be and still agree.
pub const TOLERANCE: f64 = 0.25;

/// The (model, peer) pairs to compare: every built-in peer among `peers` (names) with
/// each model it stands beside, and each `--peer NAME@MODEL` (`beside`: peer → model)
/// with its model.
pub fn pairs<S: AsRef<str>>(
    peers: &[S],
    beside: &[(String, String)],
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for v in VARIANTS {
        for p in peers {
            let p = p.as_ref();
            let given = beside
                .iter()
                .any(|(peer, model)| peer == p && model == v.name);
            if given || peers::beside(v.name).contains(&p) {
                out.push((v.name, p.to_string()));
            }
        }
    }
    out
}

/// The hello-world cell a pair's cost is read from: keep-alive, the run's workers.
pub fn here(workers: usize) -> Signature {
    sig("plaintext", true, workers)
}

/// `name`'s hello-world CPU µs per request (every repetition pooled), as run with
/// `work_us` µs of handler work (0: as it is).
pub fn hello_cpu(cells: &[Cell], name: &str, work_us: u32, workers: usize) -> Option<f64> {
    let s = here(workers);
    cells
        .iter()
        .find(|c| {
            c.variant == name
                && c.work_us == work_us
                && c.rate.is_none()
                && c.workload == s.workload
                && c.keep_alive == s.keep_alive
                && c.workers == s.workers
        })
        .and_then(Cell::pooled_cpu_us)
}

/// `--calibrate`: the µs of CPU a request the model is given (`--work-us`) to cost what its
/// original costs on hello world — the difference, rounded — or why it cannot be: a figure
/// is missing, or the original is the cheaper (work can only add).
pub fn calibration(model_us: Option<f64>, original_us: Option<f64>) -> Result<u32, String> {
    let (m, o) = match (model_us, original_us) {
        (Some(m), Some(o)) => (m, o),
        (None, _) => return Err("no hello-world CPU figure for the model".into()),
        (_, None) => return Err("no hello-world CPU figure for the original".into()),
    };
    if o < m {
        return Err(format!(
            "the original costs less than the model ({o:.1} < {m:.1} µs/req): work can only add"
        ));
    }
    Ok((o - m).round() as u32)
}

/// True when `original` is within [`TOLERANCE`] of `model`.
pub fn agree(model: f64, original: f64) -> bool {
    model > 0.0 && (original / model - 1.0).abs() <= TOLERANCE
}

/// What the architecture predicts at `/sleep?ms=20`: blocking workers wait one request at
/// a time; everyone else waits without a thread.
pub fn sleep_prediction(model: &str, workers: usize, connections: u32) -> f64 {
    let blocking = VARIANTS
        .iter()
        .find(|v| v.name == model)
        .is_some_and(|v| v.blocking_workers);
    let waiting = if blocking {
        workers as f64
    } else {
        f64::from(connections)
    };
    waiting / 0.020
}

/// The share of the work beyond an even split of an imbalance (busiest ÷ mean) over `n`
/// workers: 0 even, 1 one worker did everything.
pub fn skew(imbalance: f64, n: usize) -> f64 {
    if n < 2 {
        return 0.0;
    }
    ((imbalance - 1.0) / (n as f64 - 1.0)).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_is_a_quarter_either_way() {
        assert!(agree(100.0, 125.0) && agree(100.0, 75.0));
        assert!(!agree(100.0, 126.0) && !agree(100.0, 74.0) && !agree(0.0, 0.0));
    }

    #[test]
    fn skew_runs_from_even_to_one_worker_doing_all() {
        assert_eq!(skew(1.0, 2), 0.0);
        assert_eq!(skew(2.0, 2), 1.0);
        assert!((skew(1.5, 3) - 0.25).abs() < 1e-9);
        assert_eq!(skew(3.0, 1), 0.0);
    }

    #[test]
    fn scaling_is_measured_only_with_cpus_to_scale_over() {
        let one = cells(1, 1);
        assert!(one.iter().all(|s| s.workload != "sum"));
        assert!(one.contains(&sig("plaintext", false, BALANCE_WORKERS)));
        let four = cells(4, 4);
        assert!(four.contains(&sig("sum", true, 1)) && four.contains(&sig("sum", true, 4)));
        // With 2 workers the balance cell is the close cell itself: measured once.
        let two = cells(2, 2);
        assert_eq!(
            two.iter()
                .filter(|s| **s == sig("plaintext", false, 2))
                .count(),
            1
        );
    }

    #[test]
    fn predictions_follow_the_architecture() {
        assert_eq!(sleep_prediction("prefork-blocking", 2, 64), 100.0);
        assert_eq!(sleep_prediction("prefork-eventloop", 2, 64), 3200.0);
    }

    #[test]
    fn every_builtin_peer_has_a_model_to_stand_beside() {
        let all: Vec<&str> = peers::BUILTIN.iter().map(|b| b.name).collect();
        let pairs = pairs(&all, &[]);
        for p in &all {
            assert!(pairs.iter().any(|(_, peer)| peer == p), "{p}");
        }
        let mine = super::pairs(&["swoole"], &[("swoole".into(), "reactor-workers".into())]);
        assert_eq!(mine, [("reactor-workers", "swoole".to_string())]);
    }

    #[test]
    fn calibration_is_the_originals_extra_cost() {
        assert_eq!(calibration(Some(8.2), Some(31.9)), Ok(24));
        assert_eq!(calibration(Some(8.0), Some(8.0)), Ok(0));
        assert!(calibration(Some(9.0), Some(5.0))
            .unwrap_err()
            .contains("work can only add"));
        assert!(calibration(None, Some(5.0)).is_err());
    }
}
