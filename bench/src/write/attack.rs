//! The `--attack` table and how to read it.

use std::fmt::Write as _;

use crate::model::attack::Row;

/// How to read [`table`], for the report page.
pub const READING: &str = "slowhttptest holds the slow connections open — -H (Slowloris) \
sends each request head a few bytes at a time and never finishes it, -B (slow POST) sends a \
whole head and then its body a few bytes at a time — while a probe makes a fresh request every \
250 ms and waits at most 2 s for the answer. A server that gives a worker to each connection \
serves nobody else until a timeout frees them (a head must be complete within the header \
timeout; a body may take as long as no gap between its parts is longer), and the attacker \
opens new ones as fast as they close; an event-driven one holds the slow connections at \
little cost and answers every probe.";

/// The markdown table of `rows`.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| variant | model | attack | workers | slow connections | probes answered | slowest probe ms | slowhttptest: service available |\n|---|---|---|---:|---:|---:|---:|---|"
    );
    for r in rows {
        let _ = match &r.missing {
            Some(why) => writeln!(
                out,
                "| {} | {} | {} | {} | {why} | | | |",
                r.variant, r.model, r.attack, r.workers
            ),
            None => writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} of {} | {} | {} |",
                r.variant,
                r.model,
                r.attack,
                r.workers,
                r.connections,
                r.probes_answered,
                r.probes,
                r.slowest_probe_ms,
                r.service_available
            ),
        };
    }
    out
}
