//! Loopback beside veth (`--link loopback,veth`): each cell that ran over both, its two
//! figures side by side — req/s, the server's own CPU per request, the server's and the
//! client's CPUs as a whole with their softirq part, p99 — and how to read them.

use std::fmt::Write as _;

use super::table::opt;
use crate::model::cell::{Cell, Link, Run};

/// How to read the table: what each link charges to whom.
pub const READING: &str = "Loopback and veth, the same cell back to back. On loopback a send queues the packet on the *sending* CPU and the kernel's receive path runs there: the client's CPU runs the server's TCP receive for every request, the server's CPU the client's for every answer, and neither side's figure is its own. Over veth (two test hosts, a bridge between them) each host's receive path is steered (RPS) to its own CPUs, as a NIC's interrupt lands on the receiver's: each side pays for what it receives, plus the bridge's hop. \"server CPUs\" and \"client CPUs\" count every non-idle moment of those CPUs (/proc/stat) per request, whoever used it — the receive path that runs in a softirq while the server's process sleeps shows there and not in the process's own CPU time; the softirq part is in brackets. A model's ranking that holds on both links is the architecture's; one that changes is the link's.";

/// The loopback cell and its veth twin, for every cell that ran over both.
pub fn twins(cells: &[Cell]) -> Vec<(&Cell, &Cell)> {
    let same = |a: &Cell, b: &Cell| {
        let (ga, gb) = (a.group(), b.group());
        (
            &a.variant, &a.stack, a.workers, ga.0, ga.1, ga.2, ga.3, ga.4, ga.5,
        ) == (
            &b.variant, &b.stack, b.workers, gb.0, gb.1, gb.2, gb.3, gb.4, gb.5,
        )
    };
    cells
        .iter()
        .filter(|c| c.link == Link::Loopback)
        .filter_map(|a| {
            cells
                .iter()
                .find(|b| b.link == Link::Veth && same(a, b))
                .map(|b| (a, b))
        })
        .collect()
}

fn pair(a: Option<f64>, b: Option<f64>, digits: usize) -> String {
    format!("{} · {}", opt(a, digits), opt(b, digits))
}

/// A CPU set's busy µs per request with its softirq part: `41.2 (9.8)`.
fn with_softirq(busy: Option<f64>, softirq: Option<f64>) -> String {
    match (busy, softirq) {
        (Some(b), Some(s)) => format!("{b:.1} ({s:.1})"),
        _ => "–".into(),
    }
}

/// The markdown table (with its reading), or nothing when no cell ran over both links.
pub fn table(cells: &[Cell]) -> String {
    let twins = twins(cells);
    if twins.is_empty() {
        return String::new();
    }
    let mut out = format!("\n{READING}\n\n");
    out.push_str("| variant | workload | keep-alive | c | req/s loopback · veth | veth ÷ loopback | server process CPU µs/req loopback · veth | server CPUs µs/req (softirq) loopback · veth | client CPUs µs/req (softirq) loopback · veth | p99 ms loopback · veth |\n");
    out.push_str("|---|---|---|--:|--:|--:|--:|--:|--:|--:|\n");
    for (lo, veth) in twins {
        let (a, b) = (lo.median(), veth.median());
        let rps = |r: Option<&Run>| r.map(|r| r.outcome.rps);
        let ratio = rps(a)
            .zip(rps(b))
            .filter(|(a, _)| *a > 0.0)
            .map_or("–".to_string(), |(a, b)| format!("{:.2}", b / a));
        let sets = |r: Option<&Run>, server: bool| {
            let s = r.and_then(|r| r.cpu_sets);
            if server {
                with_softirq(s.map(|s| s.server_busy_us), s.map(|s| s.server_softirq_us))
            } else {
                with_softirq(s.map(|s| s.client_busy_us), s.map(|s| s.client_softirq_us))
            }
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {ratio} | {} | {} · {} | {} · {} | {} |",
            lo.variant,
            lo.workload,
            lo.keep_alive_label(),
            lo.connections_label(),
            pair(rps(a), rps(b), 0),
            pair(
                a.and_then(|r| r.server_cpu_us_per_req),
                b.and_then(|r| r.server_cpu_us_per_req),
                2
            ),
            sets(a, true),
            sets(b, true),
            sets(a, false),
            sets(b, false),
            pair(
                a.and_then(|r| r.outcome.p99_ms),
                b.and_then(|r| r.outcome.p99_ms),
                2
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cell::CpuSets;

    fn cell(variant: &str, link: Link, rps: f64) -> Cell {
        let run = Run {
            cpu_sets: Some(CpuSets {
                server_busy_us: 20.0,
                server_softirq_us: 4.0,
                client_busy_us: 30.0,
                client_softirq_us: 6.0,
            }),
            ..Run::sample(rps, 10.0)
        };
        Cell {
            link,
            connections: 8,
            ..Cell::sample(variant, vec![run])
        }
    }

    #[test]
    fn each_cell_meets_its_twin_over_the_other_link() {
        let cells = vec![
            cell("a", Link::Loopback, 1000.0),
            cell("a", Link::Veth, 800.0),
            cell("b", Link::Loopback, 900.0),
        ];
        let twins = twins(&cells);
        assert_eq!(twins.len(), 1);
        assert_eq!(
            (twins[0].0.link, twins[0].1.link),
            (Link::Loopback, Link::Veth)
        );
        let text = table(&cells);
        assert!(text.contains("| a | plaintext | on | 8 | 1000 · 800 | 0.80 | 10.00 · 10.00 | 20.0 (4.0) · 20.0 (4.0) | 30.0 (6.0) · 30.0 (6.0) |"), "{text}");
        assert!(!text.contains("| b |"), "{text}");
        assert_eq!(table(&cells[2..]), "");
    }
}
