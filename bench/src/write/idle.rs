//! The `--idle-conns` table and how to read it.

use std::fmt::Write as _;

use crate::model::idle::{Row, ONE_CONN};

/// How to read [`table`], for the report page.
pub const READING: &str = "Each server runs one worker. Its resident memory (every process, \
summed) is measured after a warm-up burst and again once N keep-alive connections have each \
made a request and gone quiet; the difference over N is what one idle connection costs it. \
Then every connection makes one more request: the answer round shows they are all still \
served, and how long one pass over all of them takes. A model with one connection per \
worker holds no idle connection at all: its workers wait for them. With `--client tsung \
--client-hosts K` the connections come from K test hosts, each its share from its own \
address, and the second round asks on every connection at once. One process may open only \
so many descriptors (RLIMIT_NOFILE): a model that spreads connections over worker processes \
runs enough of them that each stays under it (the workers column); a model whose one \
process holds every connection — one runtime's threads, or a reactor whose master owns \
each client connection — cannot pass it, and its row says so.";

/// The markdown table of `rows`.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| variant | model | workers | idle connections | RSS before (MiB) | RSS after (MiB) | bytes per connection | open (s) | answer round (s) | still answered |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in rows {
        let (name, model) = (&r.variant, &r.model);
        match &r.missing {
            Some(why) if why == ONE_CONN => {
                let _ = writeln!(
                    out,
                    "| {name} | {model} | – | – | – | – | {why} | – | – | – |"
                );
            }
            Some(why) => {
                let _ = writeln!(out, "| {name} | {model} | | FAILED: {why} | | | | | | |");
            }
            None => {
                let closed = (r.closed_idle > 0)
                    .then(|| format!("{} closed by the server while idle", r.closed_idle));
                let client = (r.client_errors > 0).then(|| {
                    format!(
                        "{} failed in the client (its own errors, before or without an answer)",
                        r.client_errors
                    )
                });
                let note: String = [&closed, &client, &r.stopped_by, &r.held_back]
                    .into_iter()
                    .flatten()
                    .map(|s| format!("; {s}"))
                    .collect();
                let slowest = r
                    .round_max_ms
                    .map_or(String::new(), |ms| format!(", slowest {ms:.0} ms"));
                let _ = writeln!(
                    out,
                    "| {name} | {model} | {} | {} | {:.1} | {:.1} | {} | {:.2} | {:.2} | {} of {} (first round {}{slowest}){note} |",
                    r.workers.max(1),
                    r.held,
                    r.rss_before_kib as f64 / 1024.0,
                    r.rss_after_kib as f64 / 1024.0,
                    r.bytes_per_conn,
                    r.open_s,
                    r.round_s,
                    r.answered,
                    r.held,
                    r.first_round,
                );
            }
        }
    }
    out
}

/// Each client host's share of the connections (a distributed client's run); empty for
/// bench's own.
pub fn hosts(rows: &[Row]) -> String {
    let mut out = String::new();
    for r in rows.iter().filter(|r| !r.hosts.is_empty()) {
        if out.is_empty() {
            out.push_str("\nclient hosts (tsung: one node per host, each from its own address):\n\n| variant | host | connections held |\n|---|---|---:|\n");
        }
        for h in &r.hosts {
            let _ = writeln!(out, "| {} | {} | {} |", r.variant, h.host, h.requests);
        }
    }
    out
}
