//! `bench --slo p99=5ms`: each server's **capacity at a latency target** — the highest
//! offered rate (open loop, oha) whose percentile, corrected for coordinated omission,
//! stays within the target. That is the number a person choosing an architecture needs:
//! closed-loop req/s says how fast a client *could* go, not how much load a server takes
//! before its users wait.
//!
//! The search doubles the offered rate from [`START`] until a probe misses the target
//! (latency over it, an error, or a shortfall: less than 95 % of the rate achieved), then
//! bisects between the last rate that passed and the first that failed, stopping at a 5 %
//! bracket; at most [`MAX_PROBES`] probes, one run each, on one server started and warmed
//! up once and settled between probes (`measure::cell::run_probes`).

use std::time::Duration;

use crate::measure::cell::{run_probes, CellSpec, Plan, Target as Server};
use crate::measure::client::Amount;
use crate::model::cell::{Cell, STEAL_DISTURBS_PCT};
use crate::model::client::Client;
use crate::model::slo::{Target, MAX_PROBES, START};

/// Highest rate tried: beyond any server here on one core, and oha's own limit nearby.
const MAX_RATE: u32 = 4_096_000;

/// How far below its start a search halves before it stops: a server that keeps no rate
/// down to a 64th of where it started (a 128th of its closed loop's rate, in a search
/// beside one) misses its target for another reason than load — one connection per worker
/// behind a queue of keep-alive connections, say — and lower rates only take longer to
/// probe (each stretched to 8 s). The capacity is then "below" the lowest rate probed.
const FLOOR_DIVISOR: u32 = 64;

/// The next rate to probe, given the highest that kept the target and the lowest that
/// did not (if any), starting at `start`: double until one fails, then halve the bracket;
/// `None` when the bracket is within 5 %, the ceiling is reached, or nothing kept down to
/// `FLOOR_DIVISOR` below the start.
pub fn next_rate(kept: Option<u32>, missed: Option<u32>, start: u32) -> Option<u32> {
    match (kept, missed) {
        (None, None) => Some(start.clamp(1, MAX_RATE)),
        (Some(k), None) => (k < MAX_RATE).then(|| k.saturating_mul(2).min(MAX_RATE)),
        (None, Some(m)) => (m > 1 && m / 2 >= start / FLOOR_DIVISOR).then_some(m / 2),
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

/// A probe's duration at `rate`: the plan's, stretched to `PROBE_REQUESTS` (at most
/// `PROBE_MAX_SECS`) — except a smoke test's probes of 1 s (`--quick`), kept short.
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
/// 1 s, none) — from half the rate its closed-loop cell of `spec` in `closed` reached,
/// rounded to a hundred (the search then needs a few probes either side of it, not the
/// doublings up from 1,000), at most `probes` of them. Half, because a closed loop runs
/// at saturation, where an open loop's queue grows without end: a probe at the closed
/// loop's own rate is a probe spent (in a `--post all` run, 32 searches of 32 missed it).
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
    let start = ((reached / 200.0).round() as u32 * 100).max(100);
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

/// One capacity search's state: the highest rate that kept the target, the lowest that
/// missed, and the rates probed again.
///
/// A probe that missed while the host took [`STEAL_DISTURBS_PCT`] of the server's CPUs
/// or more (steal) is probed again, once per rate and at most [`AGAIN`] times a search:
/// on this VM the host takes a fifth to a third of a CPU for minutes at a time, and a
/// server at 1,000 req/s then has a p99 of 24 ms instead of 2 — a miss that says nothing
/// of the server would halve the search's rate, and its capacity, for nothing. A second
/// miss stands (its cell says how much the host took).
#[derive(Debug, Default)]
struct Search {
    start: u32,
    kept: Option<u32>,
    missed: Option<u32>,
    again: Vec<u32>,
}

/// Most probes again in one search: its time stays bounded on a host that steals all along.
const AGAIN: usize = 3;

impl Search {
    /// Takes the last probe — its rate, whether it kept the target, and whether the host
    /// disturbed it — and says the next rate, `None` when the search is done.
    fn next(&mut self, last: Option<(u32, bool, bool)>) -> Option<u32> {
        if let Some((rate, kept, disturbed)) = last {
            if !kept && disturbed && self.again.len() < AGAIN && !self.again.contains(&rate) {
                self.again.push(rate);
                return Some(rate);
            }
            if kept {
                self.kept = Some(rate);
            } else {
                self.missed = Some(rate);
            }
        }
        next_rate(self.kept, self.missed, self.start)
    }
}

/// One server's search from `start` req/s, at most `probes` probes (fewer than
/// [`MAX_PROBES`] leave a wider bracket) besides those probed again, on one server
/// started for them all: its probes' cells, in the order they ran.
pub fn search(
    plan: &Plan,
    server: &Server,
    spec: &CellSpec,
    slo: &Target,
    start: u32,
    probes: usize,
) -> Vec<Cell> {
    let mut state = Search {
        start,
        ..Search::default()
    };
    let amount = plan.amount;
    run_probes(
        plan,
        server,
        spec,
        |rate| probe_amount(amount, rate),
        |done| {
            let Some(cell) = done.last() else {
                return state.next(None);
            };
            let rate = cell.rate.unwrap_or(0);
            let verdict = slo.kept(cell);
            let steal = cell
                .median()
                .and_then(|r| r.server_steal_pct)
                .unwrap_or(0.0);
            let disturbed = steal >= STEAL_DISTURBS_PCT;
            eprintln!(
                "slo: {} at {rate} req/s: {}{}",
                server.name(),
                match &verdict {
                    Ok(ms) => format!("p{} {ms:.2} ms, kept", slo.percentile),
                    Err(why) => format!("missed ({why})"),
                },
                if disturbed {
                    format!(", the host took {steal:.0} % of the server's CPUs")
                } else {
                    String::new()
                }
            );
            // A server that never answered is a failure, not a capacity of 0.
            if verdict.is_err() && cell.median().is_none() && state.kept.is_none() {
                return None;
            }
            if done.len() >= probes + state.again.len() {
                return None;
            }
            state.next(Some((rate, verdict.is_ok(), disturbed)))
        },
    )
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
        // Nothing kept from 1,000 down: the search stops at 15 (a 64th), not at 1.
        let mut missed = None;
        let mut lowest = START;
        while let Some(rate) = next_rate(None, missed, START) {
            missed = Some(rate);
            lowest = rate;
        }
        assert_eq!(lowest, 15);
        assert_eq!(
            next_rate(None, Some(2), 1),
            Some(1),
            "a start of 1 still halves"
        );
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
    fn a_miss_the_host_disturbed_is_probed_again_once() {
        let mut search = Search {
            start: 8_000,
            ..Search::default()
        };
        assert_eq!(search.next(None), Some(8_000));
        // Missed with steal: the same rate again, which keeps this time.
        assert_eq!(search.next(Some((8_000, false, true))), Some(8_000));
        assert_eq!(search.next(Some((8_000, true, false))), Some(16_000));
        // Missed again with steal at 16,000: probed again; missed a second time, it stands.
        assert_eq!(search.next(Some((16_000, false, true))), Some(16_000));
        assert_eq!(search.next(Some((16_000, false, true))), Some(12_000));
        // An undisturbed miss is not probed again.
        assert_eq!(search.next(Some((12_000, false, false))), Some(10_000));
        // At most AGAIN rates a search.
        assert_eq!(search.next(Some((10_000, false, true))), Some(10_000));
        assert_eq!(search.next(Some((10_000, true, false))), Some(11_000));
        assert_eq!(search.again.len(), AGAIN);
        assert_eq!(search.next(Some((11_000, false, true))), Some(10_500));
        assert_eq!((search.kept, search.missed), (Some(10_000), Some(11_000)));
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
