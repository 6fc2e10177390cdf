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

use crate::measure::cell::{run_cell, CellSpec, Plan, Target as Server};
use crate::model::cell::Cell;
use crate::model::slo::{Target, MAX_PROBES, START};

/// Highest rate tried: beyond any server here on one core, and oha's own limit nearby.
const MAX_RATE: u32 = 4_096_000;

/// The next rate to probe, given the highest that kept the target and the lowest that
/// did not (if any): double until one fails, then halve the bracket; `None` when the
/// bracket is within 5 % or the ceiling is reached.
pub fn next_rate(kept: Option<u32>, missed: Option<u32>) -> Option<u32> {
    match (kept, missed) {
        (None, None) => Some(START),
        (Some(k), None) => (k < MAX_RATE).then(|| k.saturating_mul(2).min(MAX_RATE)),
        (None, Some(m)) => (m > 1).then_some(m / 2),
        (Some(k), Some(m)) => {
            let gap = m.saturating_sub(k);
            (f64::from(gap) > 0.05 * f64::from(m) && gap > 1).then_some(k + gap / 2)
        }
    }
}

/// Searches every server's capacity: every probe's cell, each server's in the order they
/// ran (for results.json, the capacity table and the latency-vs-load chart).
pub fn run(plan: &Plan, servers: &[Server], spec: &CellSpec, slo: &Target) -> Vec<Cell> {
    let probe_plan = Plan {
        reps: 1,
        ..plan.clone()
    };
    let mut all = Vec::new();
    for server in servers {
        let (mut kept, mut missed): (Option<u32>, Option<u32>) = (None, None);
        for _ in 0..MAX_PROBES {
            let Some(rate) = next_rate(kept, missed) else {
                break;
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
            all.push(cell);
            if dead {
                break;
            }
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_doubles_then_bisects_to_five_percent() {
        assert_eq!(next_rate(None, None), Some(START));
        assert_eq!(next_rate(Some(1000), None), Some(2000));
        assert_eq!(next_rate(None, Some(1000)), Some(500));
        assert_eq!(next_rate(Some(8000), Some(16000)), Some(12000));
        assert_eq!(next_rate(Some(15500), Some(16000)), None);
        assert_eq!(next_rate(Some(MAX_RATE), None), None);
        // A server that passes at 6,100 and fails at 6,400 is found within 5 %.
        let (mut kept, mut missed) = (None, None);
        let mut probes = 0;
        while let Some(rate) = next_rate(kept, missed) {
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
}
