//! `bench --fidelity`: each model beside the real systems it stands for, on the cells where
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

use std::fmt::Write as _;

use variants::peers::{self, Peer, Workers};
use variants::VARIANTS;

use crate::report::Cell;

/// Workers of the balance signature: the fewest that can be unequal.
pub const BALANCE_WORKERS: usize = 2;

/// A cell a fidelity run measures for every model and peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    pub workload: &'static str,
    pub keep_alive: bool,
    pub workers: usize,
}

const fn sig(workload: &'static str, keep_alive: bool, workers: usize) -> Signature {
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
/// each model it stands beside.
pub fn pairs<S: AsRef<str>>(peers: &[S]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for v in VARIANTS {
        for p in peers {
            if peers::beside(v.name).contains(&p.as_ref()) {
                out.push((v.name, p.as_ref().to_string()));
            }
        }
    }
    out
}

/// True when `original` is within [`TOLERANCE`] of `model`.
pub fn agree(model: f64, original: f64) -> bool {
    model > 0.0 && (original / model - 1.0).abs() <= TOLERANCE
}

/// What the architecture predicts at `/sleep?ms=20`: blocking workers wait one request at
/// a time; everyone else waits without a thread.
fn sleep_prediction(model: &str, workers: usize, connections: u32) -> f64 {
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

/// `name`'s measured cell of signature `s`, or why there is none.
fn find<'a>(cells: &'a [Cell], name: &str, s: Signature) -> Result<&'a Cell, String> {
    let cell = cells
        .iter()
        .find(|c| {
            c.variant == name
                && c.workload == s.workload
                && c.keep_alive == s.keep_alive
                && c.workers == s.workers
        })
        .ok_or("not run")?;
    match cell.median() {
        Some(_) => Ok(cell),
        None => Err(cell.failure.clone().unwrap_or_else(|| "no run".into())),
    }
}

/// The median req/s and CPU µs/request of `name`'s cell of signature `s`.
fn figures(cells: &[Cell], name: &str, s: Signature) -> Result<(f64, Option<f64>), String> {
    let run = find(cells, name, s)?
        .median()
        .expect("find returns measured cells");
    Ok((run.outcome.rps, run.server_cpu_us_per_req))
}

fn mark(ok: bool) -> &'static str {
    if ok {
        "✓"
    } else {
        "✗"
    }
}

/// The fidelity table: one row per (model, peer) pair, for a run of `workers` workers
/// on `server_cpus` CPUs at `connections` connections.
pub fn table(
    cells: &[Cell],
    pairs: &[(&str, String)],
    workers: usize,
    server_cpus: usize,
    connections: u32,
) -> String {
    let mut out = String::new();
    out.push_str("| model | original | /sleep?ms=20 req/s: predicted · model · original | agree | keep-alive ÷ close: model · original | agree | balance, 2 workers, close: model · original | agree | /sum scaling 1 → N workers: predicted · model · original | agree | hello-world CPU µs/req: model · original | cost × |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---:|\n");
    let short = |e: &str| {
        let e = e.split_whitespace().collect::<Vec<_>>().join(" ");
        if e.starts_with("n/a") {
            "n/a".to_string()
        } else {
            format!(
                "failed: {}",
                e.chars().take(60).collect::<String>().replace('|', "/")
            )
        }
    };
    // Both sides' figure of one signature, or the first side's reason for having none.
    let both = |model: &str, peer: &str, get: &dyn Fn(&str) -> Result<f64, String>| match (
        get(model),
        get(peer),
    ) {
        (Ok(m), Ok(p)) => Ok((m, p)),
        (Err(e), _) => Err(format!("model {}", short(&e))),
        (_, Err(e)) => Err(short(&e)),
    };
    let shown = |r: Result<(String, bool), String>| match r {
        Ok((figures, ok)) => (figures, mark(ok).to_string()),
        Err(e) => (e, String::new()),
    };
    let here = sig("plaintext", true, workers);
    for (model, peer) in pairs {
        let sleep = shown(
            both(model, peer, &|n| {
                figures(cells, n, sig("sleep", true, workers)).map(|f| f.0)
            })
            .map(|(m, p)| {
                let predicted = sleep_prediction(model, workers, connections);
                (format!("{predicted:.0} · {m:.0} · {p:.0}"), agree(m, p))
            }),
        );
        let ka = shown(
            both(model, peer, &|n| {
                let (on, _) = figures(cells, n, here)?;
                let (off, _) = figures(cells, n, sig("plaintext", false, workers))?;
                Ok(if off > 0.0 { on / off } else { 0.0 })
            })
            .map(|(m, p)| (format!("{m:.2} · {p:.2}"), agree(m, p))),
        );
        let balance = shown(
            both(model, peer, &|n| {
                let cell = find(cells, n, sig("plaintext", false, BALANCE_WORKERS))?;
                if let Ok(Workers::Unseen(why)) = Peer::builtin(n).map(|p| p.workers_are) {
                    return Err(format!("n/a ({why})"));
                }
                cell.worker_balance()
                    .ok_or_else(|| "failed: no per-worker figures".to_string())
            })
            .map(|(m, p)| {
                let (sm, sp) = (skew(m, BALANCE_WORKERS), skew(p, BALANCE_WORKERS));
                (format!("{m:.2} · {p:.2}"), (sm - sp).abs() <= TOLERANCE)
            }),
        );
        let scaling = if server_cpus < 2 {
            (
                format!("n/a (needs ≥ 2 server CPUs; this run has {server_cpus})"),
                String::new(),
            )
        } else {
            shown(
                both(model, peer, &|n| {
                    let (one, _) = figures(cells, n, sig("sum", true, 1))?;
                    let (all, _) = figures(cells, n, sig("sum", true, server_cpus))?;
                    Ok(if one > 0.0 { all / one } else { 0.0 })
                })
                .map(|(m, p)| (format!("{server_cpus} · {m:.2} · {p:.2}"), agree(m, p))),
            )
        };
        let cost = match (figures(cells, model, here), figures(cells, peer, here)) {
            (Ok((_, Some(m))), Ok((_, Some(p)))) if m > 0.0 => {
                (format!("{m:.1} · {p:.1}"), format!("{:.1}", p / m))
            }
            (Err(e), _) | (_, Err(e)) => (short(&e), String::new()),
            _ => ("–".into(), String::new()),
        };
        let _ = writeln!(
            out,
            "| {model} | {peer} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            sleep.0,
            sleep.1,
            ka.0,
            ka.1,
            balance.0,
            balance.1,
            scaling.0,
            scaling.1,
            cost.0,
            cost.1
        );
    }
    let mut unseen: Vec<String> = Vec::new();
    for (_, peer) in pairs {
        if let Ok(Workers::Unseen(why)) = Peer::builtin(peer).map(|p| p.workers_are) {
            let line = format!("balance n/a for {peer}: {why}. ");
            if !unseen.contains(&line) {
                unseen.push(line);
            }
        }
    }
    let _ = write!(
        out,
        "\n{}agree: the original's figure is within ±{tol:.0} % of the model's (balance: skews within {skew:.2}). predicted: workers ÷ 20 ms for blocking workers (prefork-blocking, reactor-workers/sync), connections ÷ 20 ms for everyone else ({workers} worker(s), c={connections}). balance: the busiest worker's requests (a model's --stats) or CPU time (a peer's, from /proc) ÷ the mean over {BALANCE_WORKERS} workers, a connection per request (1.00 even, {BALANCE_WORKERS}.00 one worker took all). scaling: /sum req/s with {server_cpus} worker(s) ÷ with 1, on {server_cpus} server CPU(s). cost ×: the original's CPU per request ÷ the model's — the price of the language and implementation with the architecture held equal.\n",
        unseen.concat(),
        tol = TOLERANCE * 100.0,
        skew = TOLERANCE,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Client;
    use crate::report::Run;

    /// A measured cell of signature `s`: `rps`, 5 µs a request, its workers' CPU.
    fn measured(name: &str, s: Signature, rps: f64, worker_cpu_secs: &[f64]) -> Cell {
        Cell {
            variant: name.into(),
            model: String::new(),
            stack: "raw".into(),
            workers: s.workers,
            server_cpus: vec![0, 1],
            client_cpus: vec![2],
            workload: s.workload.into(),
            keep_alive: s.keep_alive,
            connections: 64,
            client: Client::Ab,
            pipeline: None,
            rate: None,
            runs: vec![Run::sample(rps, 5.0)],
            failure: None,
            server_command: None,
            peak_rss_kib: None,
            worker_requests: Vec::new(),
            worker_cpu_secs: worker_cpu_secs.to_vec(),
            counted: None,
            profile: None,
            notes: Vec::new(),
        }
    }

    /// The cells of one server on 2 CPUs: its balance (busiest, other) and /sum speed-up.
    fn server(name: &str, balance: [f64; 2], speedup: f64) -> Vec<Cell> {
        cells(2, 2)
            .into_iter()
            .map(|s| match (s.workload, s.keep_alive, s.workers) {
                ("plaintext", false, 2) => measured(name, s, 10_000.0, &balance),
                ("sum", _, 2) => measured(name, s, 1_000.0 * speedup, &[]),
                ("sum", _, _) => measured(name, s, 1_000.0, &[]),
                ("sleep", _, _) => measured(name, s, 3_000.0, &[]),
                _ => measured(name, s, 30_000.0, &[]),
            })
            .collect()
    }

    #[test]
    fn the_table_compares_balance_and_scaling_per_pair() {
        let mut all = server("prefork-eventloop", [3.0, 1.0], 1.9);
        all.extend(server("nginx", [2.9, 1.1], 1.95));
        all.extend(server("node-cluster", [2.0, 2.0], 1.2));
        let pairs = [
            ("prefork-eventloop", "nginx".to_string()),
            ("prefork-eventloop", "node-cluster".to_string()),
        ];
        let text = table(&all, &pairs, 2, 2, 64);
        let row = |peer: &str| -> Vec<String> {
            let line = text
                .lines()
                .find(|l| l.contains(&format!("| {peer} |")))
                .unwrap();
            line.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        };
        let nginx = row("nginx");
        assert_eq!(nginx[6], "1.50 · 1.45");
        assert_eq!(nginx[7], "✓");
        assert_eq!(nginx[8], "2 · 1.90 · 1.95");
        assert_eq!(nginx[9], "✓");
        let node = row("node-cluster");
        assert_eq!(node[6], "1.50 · 1.00", "skew 0.5 against 0: they disagree");
        assert_eq!(node[7], "✗");
        assert_eq!(node[9], "✗", "1.2× against 1.9×");
    }

    #[test]
    fn a_peer_whose_workers_cannot_be_told_apart_has_no_balance_figure() {
        let mut all = server("prefork-blocking", [1.0, 1.0], 2.0);
        all.extend(server("uwsgi", [3.9, 1.3], 2.0));
        let text = table(&all, &[("prefork-blocking", "uwsgi".into())], 2, 2, 64);
        let line = text.lines().find(|l| l.contains("| uwsgi |")).unwrap();
        assert!(line.contains("| n/a |  |"), "{line}");
        assert!(
            text.contains("balance n/a for uwsgi: its HTTP router"),
            "{text}"
        );
    }

    #[test]
    fn scaling_on_one_server_cpu_says_why_it_is_not_measured() {
        let all: Vec<Cell> = ["prefork-eventloop", "nginx"]
            .iter()
            .flat_map(|n| {
                cells(1, 1)
                    .into_iter()
                    .map(move |s| measured(n, s, 1.0, &[1.0, 1.0]))
            })
            .collect();
        let text = table(&all, &[("prefork-eventloop", "nginx".into())], 1, 1, 64);
        assert!(text.contains("n/a (needs ≥ 2 server CPUs; this run has 1)"));
        assert!(text.contains("1.00 · 1.00 | ✓"), "{text}");
    }

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
        let pairs = pairs(&all);
        for p in &all {
            assert!(pairs.iter().any(|(_, peer)| peer == p), "{p}");
        }
    }
}
