//! `bench --slo p99=5ms`: each server's **capacity at a latency target** — the highest
//! offered rate (open loop, oha) whose percentile, corrected for coordinated omission,
//! stays within the target. That is the number a person choosing an architecture needs:
//! closed-loop req/s says how fast a client *could* go, not how much load a server takes
//! before its users wait.
//!
//! The search doubles the offered rate from [`START`] until a probe misses the target
//! (latency over it, an error, or a shortfall: less than 95 % of the rate achieved), then
//! bisects between the last rate that passed and the first that failed, stopping at a 5 %
//! bracket; at most [`MAX_PROBES`] probes, each a fresh server (one warm-up, one run).

use std::time::Duration;

use crate::measure::cell::{run_cell, CellSpec, Plan, Target as Server};
use crate::measure::client::Amount;
use crate::model::cell::Cell;
use crate::model::client::Client;
use crate::model::slo::{Target, MAX_PROBES, START};

/// Highest rate tried: beyond any server here on one core, and oha's own limit nearby.
const MAX_RATE: u32 = 4_096_000;

/// The next rate to probe, given the highest that kept the target and the lowest that
/// did not (if any), starting at `start`: double until one fails, then halve the bracket;
/// `None` when the bracket is within 5 % or the ceiling is reached.
pub fn next_rate(kept: Option<u32>, missed: Option<u32>, start: u32) -> Option<u32> {
    match (kept, missed) {
        (None, None) => Some(start.clamp(1, MAX_RATE)),
        (Some(k), None) => (k < MAX_RATE).then(|| k.saturating_mul(2).min(MAX_RATE)),
        (None, Some(m)) => (m > 1).then_some(m / 2),
        (Some(k), Some(m)) => {
            let gap = m.saturating_sub(k);
            (f64::from(gap) > 0.05 * f64::from(m) && gap > 1).then_some(k + gap / 2)
        }
    }
}

/// Requests a probe should hold at least: its percentile is then not decided by the few
/// requests one stall of this machine's CPU delays (at 500 req/s, 2 s are 1,000 requests
/// and their p99 is 10 of them: one 20 ms stall).
const PROBE_REQUESTS: u64 = 5_000;
/// The longest a probe is stretched to hold them.
const PROBE_MAX_SECS: u64 = 8;

/// A probe's duration at `rate`: the plan's, stretched to [`PROBE_REQUESTS`] (at most
/// [`PROBE_MAX_SECS`]) — except a smoke test's probes of 1 s (`--quick`), kept short.
pub fn probe_amount(amount: Amount, rate: u32) -> Amount {
    match amount {
        Amount::Duration(d) if d.as_secs() >= 2 => {
            let needed = PROBE_REQUESTS
                .div_ceil(u64::from(rate.max(1)))
                .min(PROBE_MAX_SECS);
            Amount::Duration(d.max(Duration::from_secs(needed)))
        }
        other => other,
    }
}

/// A capacity search beside a closed-loop run (a post's replay, a calibration): the
/// server's probes with oha — 2 s after a 1 s warm-up, stretched at low rates (`quick`:
/// 1 s, none) — from the rate its closed-loop cell of `spec` in `closed` reached, rounded
/// to a hundred (the search then needs a few probes either side of it, not the doublings
/// up from 1,000), at most `probes` of them.
pub fn beside_closed_loop(
    plan: &Plan,
    server: &Server,
    spec: &CellSpec,
    slo: &Target,
    closed: &[Cell],
    quick: bool,
    probes: usize,
) -> Vec<Cell> {
    let work_us = plan.work_us_of(server);
    let reached = closed
        .iter()
        .find(|c| {
            c.variant == server.name()
                && c.rate.is_none()
                && c.work_us == work_us
                && c.stack == spec.stack
                && c.workload == spec.workload.name
                && c.keep_alive == spec.keep_alive
                && c.connections == spec.connections
                && c.workers == spec.workers
        })
        .and_then(Cell::median)
        .map_or(0.0, |r| r.outcome.rps);
    let start = ((reached / 100.0).round() as u32 * 100).max(100);
    let probe_plan = Plan {
        client: Client::Oha,
        pipeline: None,
        amount: Amount::Duration(Duration::from_secs(if quick { 1 } else { 2 })),
        warmup: (!quick).then(|| Duration::from_secs(1)),
        ..plan.clone()
    };
    search(&probe_plan, server, spec, slo, start, probes)
}

/// Searches every server's capacity: every probe's cell, each server's in the order they
/// ran (for results.json, the capacity table and the latency-vs-load chart).
pub fn run(plan: &Plan, servers: &[Server], spec: &CellSpec, slo: &Target) -> Vec<Cell> {
    servers
        .iter()
        .flat_map(|server| search(plan, server, spec, slo, START, MAX_PROBES))
        .collect()
}

/// One server's search from `start` req/s, at most `probes` probes (fewer than
/// [`MAX_PROBES`] leave a wider bracket): its probes' cells, in the order they ran.
pub fn search(
    plan: &Plan,
    server: &Server,
    spec: &CellSpec,
    slo: &Target,
    start: u32,
    probes: usize,
) -> Vec<Cell> {
    let base = Plan {
        reps: 1,
        ..plan.clone()
    };
    let mut cells = Vec::new();
    let (mut kept, mut missed): (Option<u32>, Option<u32>) = (None, None);
    for _ in 0..probes {
        let Some(rate) = next_rate(kept, missed, start) else {
            break;
        };
        let probe_plan = Plan {
            amount: probe_amount(base.amount, rate),
            ..base.clone()
        };
        let cell = run_cell(
            &probe_plan,
            server,
            &CellSpec {
                rate: Some(rate),
                ..*spec
            },
        );
        let verdict = slo.kept(&cell);
        eprintln!(
            "slo: {} at {rate} req/s: {}",
            server.name(),
            match &verdict {
                Ok(ms) => format!("p{} {ms:.2} ms, kept", slo.percentile),
                Err(why) => format!("missed ({why})"),
            }
        );
        // A server that never answered is a failure, not a capacity of 0.
        let dead = verdict.is_err() && cell.median().is_none() && kept.is_none();
        match verdict {
            Ok(_) => kept = Some(rate),
            Err(_) => missed = Some(rate),
        }
        cells.push(cell);
        if dead {
            break;
        }
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_doubles_then_bisects_to_five_percent() {
        assert_eq!(next_rate(None, None, START), Some(START));
        assert_eq!(next_rate(None, None, 7_300), Some(7_300));
        assert_eq!(next_rate(None, None, 0), Some(1));
        assert_eq!(next_rate(Some(1000), None, START), Some(2000));
        assert_eq!(next_rate(None, Some(1000), START), Some(500));
        assert_eq!(next_rate(Some(8000), Some(16000), START), Some(12000));
        assert_eq!(next_rate(Some(15500), Some(16000), START), None);
        assert_eq!(next_rate(Some(MAX_RATE), None, START), None);
        // A server that passes at 6,100 and fails at 6,400 is found within 5 %.
        let (mut kept, mut missed) = (None, None);
        let mut probes = 0;
        while let Some(rate) = next_rate(kept, missed, START) {
            probes += 1;
            if rate <= 6_100 {
                kept = Some(rate);
            } else {
                missed = Some(rate);
            }
        }
        let (k, m) = (kept.unwrap(), missed.unwrap());
        assert!(k <= 6_100 && m > 6_100 && f64::from(m - k) <= 0.05 * f64::from(m));
        assert!(probes <= MAX_PROBES, "{probes} probes");
    }

    #[test]
    fn a_slow_probe_is_stretched_to_enough_requests() {
        let secs = |a: Amount| match a {
            Amount::Duration(d) => d.as_secs(),
            Amount::Requests(_) => 0,
        };
        let three = Amount::Duration(Duration::from_secs(3));
        assert_eq!(secs(probe_amount(three, 500)), 10_u64.min(PROBE_MAX_SECS));
        assert_eq!(secs(probe_amount(three, 2_000)), 3);
        assert_eq!(secs(probe_amount(three, 100_000)), 3);
        assert_eq!(
            secs(probe_amount(Amount::Duration(Duration::from_secs(1)), 50)),
            1
        );
    }
}
