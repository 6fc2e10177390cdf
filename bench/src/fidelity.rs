//! `bench --fidelity`: each model beside the real systems it stands for, on the cells where
//! an architecture shows its signature, and the price of the language and implementation
//! once the architecture is held equal.
//!
//! - **Signatures** — what the architecture predicts whatever the language: req/s at
//!   `/sleep?ms=20` (a server that blocks a worker per wait is capped at workers ÷ 20 ms,
//!   one that waits without a thread at about connections ÷ 20 ms), and the ratio of
//!   keep-alive to connection-per-request throughput on hello world. A model and its
//!   original **agree** when the original's figure is within ±25 % of the model's.
//! - **Cost** — CPU µs per request on hello world, the original's ÷ the model's.

use std::fmt::Write as _;

use variants::peers::{self, Peer};
use variants::VARIANTS;

use crate::report::Cell;

/// The cells a fidelity run measures for every model and peer: (workload, keep-alive).
pub const CELLS: [(&str, bool); 3] = [("plaintext", true), ("plaintext", false), ("sleep", true)];

/// How far apart two figures may be and still agree.
pub const TOLERANCE: f64 = 0.25;

/// The (model, peer) pairs to compare: every built-in peer with each model it stands beside.
pub fn pairs(peers: &[Peer]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for v in VARIANTS {
        for p in peers {
            if peers::beside(v.name).contains(&p.name.as_str()) {
                out.push((v.name, p.name.clone()));
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

/// The median req/s and CPU µs/request of `name`'s cell, or why there is none.
fn figures(
    cells: &[Cell],
    name: &str,
    workload: &str,
    keep_alive: bool,
) -> Result<(f64, Option<f64>), String> {
    let cell = cells
        .iter()
        .find(|c| c.variant == name && c.workload == workload && c.keep_alive == keep_alive)
        .ok_or("not run")?;
    match cell.median() {
        Some(run) => Ok((run.outcome.rps, run.server_cpu_us_per_req)),
        None => Err(cell.failure.clone().unwrap_or_else(|| "no run".into())),
    }
}

fn mark(ok: bool) -> &'static str {
    if ok {
        "✓"
    } else {
        "✗"
    }
}

/// The fidelity table: one row per (model, peer) pair.
pub fn table(cells: &[Cell], pairs: &[(&str, String)], workers: usize, connections: u32) -> String {
    let mut out = String::new();
    out.push_str("| model | original | /sleep?ms=20 req/s: predicted · model · original | agree | keep-alive ÷ close: model · original | agree | hello-world CPU µs/req: model · original | cost × |\n");
    out.push_str("|---|---|---|---|---|---|---|---:|\n");
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
    for (model, peer) in pairs {
        let sleep = match (
            figures(cells, model, "sleep", true),
            figures(cells, peer, "sleep", true),
        ) {
            (Ok((m, _)), Ok((p, _))) => {
                let predicted = sleep_prediction(model, workers, connections);
                (
                    format!("{predicted:.0} · {m:.0} · {p:.0}"),
                    mark(agree(m, p)).to_string(),
                )
            }
            (Err(e), _) => (format!("model {}", short(&e)), String::new()),
            (_, Err(e)) => (short(&e), String::new()),
        };
        let ratio = |name: &str| -> Result<f64, String> {
            let (on, _) = figures(cells, name, "plaintext", true)?;
            let (off, _) = figures(cells, name, "plaintext", false)?;
            Ok(if off > 0.0 { on / off } else { 0.0 })
        };
        let ka = match (ratio(model), ratio(peer)) {
            (Ok(m), Ok(p)) => (format!("{m:.2} · {p:.2}"), mark(agree(m, p)).to_string()),
            (Err(e), _) | (_, Err(e)) => (short(&e), String::new()),
        };
        let cost = match (
            figures(cells, model, "plaintext", true),
            figures(cells, peer, "plaintext", true),
        ) {
            (Ok((_, Some(m))), Ok((_, Some(p)))) if m > 0.0 => {
                (format!("{m:.1} · {p:.1}"), format!("{:.1}", p / m))
            }
            (Err(e), _) | (_, Err(e)) => (short(&e), String::new()),
            _ => ("–".into(), String::new()),
        };
        let _ = writeln!(
            out,
            "| {model} | {peer} | {} | {} | {} | {} | {} | {} |",
            sleep.0, sleep.1, ka.0, ka.1, cost.0, cost.1
        );
    }
    let _ = write!(
        out,
        "\nagree: the original's figure is within ±{:.0} % of the model's. predicted: workers ÷ 20 ms for blocking workers (prefork-blocking, reactor-workers/sync), connections ÷ 20 ms for everyone else ({workers} worker(s), c={connections}). cost ×: the original's CPU per request ÷ the model's — the price of the language and implementation with the architecture held equal.\n",
        TOLERANCE * 100.0
    );
    out
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
    fn predictions_follow_the_architecture() {
        assert_eq!(sleep_prediction("prefork-blocking", 2, 64), 100.0);
        assert_eq!(sleep_prediction("prefork-eventloop", 2, 64), 3200.0);
    }

    #[test]
    fn every_builtin_peer_has_a_model_to_stand_beside() {
        let all: Vec<Peer> = peers::BUILTIN
            .iter()
            .map(|b| Peer::builtin(b.name).unwrap())
            .collect();
        let pairs = pairs(&all);
        for p in &all {
            assert!(pairs.iter().any(|(_, peer)| *peer == p.name), "{}", p.name);
        }
    }
}
