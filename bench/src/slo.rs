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

use std::fmt::Write as _;
use std::str::FromStr;

use crate::matrix::{self, CellSpec, Plan, Target as Server};
use crate::report::{Cell, SHORTFALL};

/// The first offered rate.
pub const START: u32 = 1_000;
/// Most probes per server: the search's bound in time (with `--duration 3`, about a
/// minute a server).
pub const MAX_PROBES: usize = 14;
/// Highest rate tried: beyond any server here on one core, and oha's own limit nearby.
const MAX_RATE: u32 = 4_096_000;

/// A latency target: a percentile and the most it may be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// 50, 90, 99 or 99.9.
    pub percentile: f64,
    pub limit_ms: f64,
}

impl FromStr for Target {
    type Err = String;
    /// `p99=5ms`, `p99.9=20ms`, `p90=500us`, `p50=1s`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("--slo takes pNN=TIME such as p99=5ms, not '{s}'");
        let (p, t) = s.split_once('=').ok_or_else(bad)?;
        let percentile: f64 = p
            .strip_prefix('p')
            .ok_or_else(bad)?
            .parse()
            .map_err(|_| bad())?;
        if ![50.0, 90.0, 99.0, 99.9].contains(&percentile) {
            return Err(format!(
                "--slo: the percentiles measured are p50, p90, p99 and p99.9, not p{percentile}"
            ));
        }
        let limit_ms = crate::client::millis(t).ok_or_else(bad)?;
        if limit_ms <= 0.0 {
            return Err(bad());
        }
        Ok(Target {
            percentile,
            limit_ms,
        })
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "p{} ≤ {} ms", self.percentile, self.limit_ms)
    }
}

impl Target {
    /// The cell's median-run figure for this percentile, in ms.
    fn latency(&self, cell: &Cell) -> Option<f64> {
        let o = &cell.median()?.outcome;
        if self.percentile == 50.0 {
            o.p50_ms
        } else if self.percentile == 90.0 {
            o.p90_ms
        } else if self.percentile == 99.0 {
            o.p99_ms
        } else {
            o.p999_ms
        }
    }

    /// Whether a probe kept the target: measured, no errors, the rate reached, the
    /// percentile within the limit. `Err` says why not.
    pub fn kept(&self, cell: &Cell) -> Result<f64, String> {
        let Some(run) = cell.median() else {
            return Err(cell.failure.clone().unwrap_or_else(|| "no run".into()));
        };
        let o = &run.outcome;
        if o.failed + o.non_2xx + o.timeouts > 0 {
            return Err(format!("{} errors", o.failed + o.non_2xx + o.timeouts));
        }
        if let Some(share) = cell.shortfall() {
            return Err(format!("achieved {:.0} % of the rate", 100.0 * share));
        }
        let latency = self.latency(cell).ok_or("no latency figure")?;
        if latency > self.limit_ms {
            return Err(format!("p{} {latency:.2} ms", self.percentile));
        }
        Ok(latency)
    }
}

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

/// Searches every server's capacity; the table, and every probe's cell (for
/// results.json and the latency-vs-load chart).
pub fn run(plan: &Plan, servers: &[Server], spec: &CellSpec, slo: &Target) -> (String, Vec<Cell>) {
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
            let cell = matrix::run_cell(
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
    (table(&all, slo), all)
}

/// The capacity table of an `--slo` run from its probes (`cells`, each server's in the
/// order they ran): per server, the highest rate that kept the target, the latency and CPU
/// per request there, and every probe.
pub fn table(cells: &[Cell], slo: &Target) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| variant | model | workload | keep-alive | c | capacity at {slo} (req/s) | p{} there (ms) | CPU µs/req there | probes |\n|---|---|---|---|---:|---:|---:|---:|---|",
        slo.percentile
    );
    for server in crate::report::first_seen(cells, |c| &c.variant) {
        let probes: Vec<&Cell> = cells.iter().filter(|c| c.variant == server).collect();
        let first = probes[0];
        let head = format!(
            "| {server} | {} | {} | {} | {} |",
            first.model,
            first.workload,
            first.keep_alive_label(),
            first.connections
        );
        let (mut kept, mut missed, mut failure): (Option<&Cell>, Option<u32>, Option<String>) =
            (None, None, None);
        let mut marks: Vec<String> = Vec::new();
        for cell in &probes {
            let rate = cell.rate.unwrap_or(0);
            match slo.kept(cell) {
                Ok(_) => {
                    if kept.is_none_or(|k| k.rate < cell.rate) {
                        kept = Some(cell);
                    }
                    marks.push(format!("{rate} ✓"));
                }
                // A server that never answered is a failure, not a capacity of 0.
                Err(why) if cell.median().is_none() && kept.is_none() => {
                    failure = Some(why.split_whitespace().collect::<Vec<_>>().join(" "));
                    break;
                }
                Err(_) => {
                    missed = Some(missed.map_or(rate, |m: u32| m.min(rate)));
                    marks.push(format!("{rate} ✗"));
                }
            }
        }
        match (failure, kept) {
            (Some(why), _) => {
                let _ = writeln!(out, "{head} FAILED: {} | | | |", why.replace('|', "/"));
            }
            (None, None) => {
                let _ = writeln!(
                    out,
                    "{head} < {} | | | {} |",
                    missed.unwrap_or(START),
                    marks.join(" ")
                );
            }
            (None, Some(cell)) => {
                let run = cell.median().expect("a kept probe was measured");
                let _ = writeln!(
                    out,
                    "{head} {} | {} | {} | {} |",
                    cell.rate.unwrap_or(0),
                    slo.latency(cell).map_or("–".into(), |l| format!("{l:.2}")),
                    run.server_cpu_us_per_req
                        .map_or("–".into(), |c| format!("{c:.2}")),
                    marks.join(" ")
                );
            }
        }
    }
    let _ = write!(
        out,
        "\ncapacity: the highest offered rate (oha -q, open loop) at which the corrected {slo} held with no errors and at least {:.0} % of the rate achieved; the search doubles from {START} req/s, then bisects to a 5 % bracket (at most {MAX_PROBES} probes, each a fresh server after a warm-up). ✓ kept, ✗ missed.\n",
        SHORTFALL * 100.0
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_their_units() {
        let t: Target = "p99=5ms".parse().unwrap();
        assert_eq!((t.percentile, t.limit_ms), (99.0, 5.0));
        assert_eq!("p99.9=2s".parse::<Target>().unwrap().limit_ms, 2000.0);
        assert_eq!("p50=500us".parse::<Target>().unwrap().limit_ms, 0.5);
        assert!("p98=5ms".parse::<Target>().is_err());
        assert!("p99=5".parse::<Target>().is_err());
        assert!("99=5ms".parse::<Target>().is_err());
        assert!("p99=-1ms".parse::<Target>().is_err());
    }

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
