//! The capacity table of an `--slo` run, from its probes.

use std::fmt::Write as _;

use crate::model::cell::{first_seen, Cell, SHORTFALL};
use crate::model::slo::{client_bound, found, Target, MAX_PROBES, START};

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
    for server in first_seen(cells, |c| &c.variant) {
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
            let client = if client_bound(cell) { " (client)" } else { "" };
            match slo.kept(cell) {
                Ok(_) => {
                    if kept.is_none_or(|k| k.rate < cell.rate) {
                        kept = Some(cell);
                    }
                    marks.push(format!("{rate} ✓{client}"));
                }
                // A server that never answered is a failure, not a capacity of 0.
                Err(why) if cell.median().is_none() && kept.is_none() => {
                    failure = Some(why.split_whitespace().collect::<Vec<_>>().join(" "));
                    break;
                }
                Err(_) => {
                    missed = Some(missed.map_or(rate, |m: u32| m.min(rate)));
                    marks.push(format!("{rate} ✗{client}"));
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
                let _ = writeln!(
                    out,
                    "{head} {} | {} | {} | {} |",
                    // The kept probe's rate, "≥" where the client ran out first.
                    found(slo, probes.iter().copied()),
                    slo.latency(cell).map_or("–".into(), |l| format!("{l:.2}")),
                    cell.cpu_us_per_req()
                        .map_or("–".into(), |c| format!("{c:.2}")),
                    marks.join(" ")
                );
            }
        }
    }
    let _ = write!(
        out,
        "\ncapacity: the highest offered rate (oha -q, open loop) at which the corrected {slo} held with no errors and at least {:.0} % of the rate achieved; the search doubles from {START} req/s, then bisects to a 5 % bracket (at most {MAX_PROBES} probes on one server, warmed up once and settled between probes). ✓ kept, ✗ missed; (client): oha used ≥ 90 % of its CPU in that probe and the server less — it measured the client, whose lateness oha counts as latency. A capacity marked ≥ is where the client ran out (the probe above it missed client-bound): the server kept every rate the client could offer.\n",
        SHORTFALL * 100.0
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cell::{Run, Verdict};

    fn probe(rate: u32, p99: f64, verdict: Verdict) -> Cell {
        let mut run = Run::sample(f64::from(rate), 10.0);
        run.outcome.p99_ms = Some(p99);
        run.verdict = verdict;
        Cell {
            rate: Some(rate),
            ..Cell::sample("thread-per-core", vec![run])
        }
    }

    /// A capacity where the client ran out is a lower bound, and says so; the probe that
    /// measured the client is marked.
    #[test]
    fn a_capacity_the_client_limited_reads_at_least() {
        let slo: Target = "p99=10ms".parse().unwrap();
        let client = [
            probe(1_000, 1.0, Verdict::Neither),
            probe(2_000, 2.0, Verdict::Neither),
            probe(4_000, 300.0, Verdict::ClientBound),
        ];
        let text = table(&client, &slo);
        assert!(text.contains("| ≥ 2000 |"), "{text}");
        assert!(text.contains("4000 ✗ (client)"), "{text}");
        let server = [
            probe(1_000, 1.0, Verdict::Neither),
            probe(2_000, 2.0, Verdict::Neither),
            probe(4_000, 300.0, Verdict::ServerBound),
        ];
        let text = table(&server, &slo);
        assert!(text.contains("| 2000 |"), "{text}");
        assert!(text.contains("4000 ✗ |"), "{text}");
    }
}
