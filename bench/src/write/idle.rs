//! The `--idle-conns` table and how to read it.

use std::fmt::Write as _;

use crate::model::idle::{Row, ONE_CONN};

/// How to read [`table`], for the report page.
pub const READING: &str = "Each server runs one worker. Its resident memory (every process, \
summed) is measured after a warm-up burst and again once N keep-alive connections have each \
made a request and gone quiet; the difference over N is what one idle connection costs it. \
Then every connection makes one more request: the answer round shows they are all still \
served, and how long one pass over all of them takes. A model with one connection per \
worker holds no idle connection at all: its workers wait for them.";

/// The markdown table of `rows`.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| variant | model | idle connections | RSS before (MiB) | RSS after (MiB) | bytes per connection | open (s) | answer round (s) | still answered |\n|---|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in rows {
        let (name, model) = (&r.variant, &r.model);
        match &r.missing {
            Some(why) if why == ONE_CONN => {
                let _ = writeln!(out, "| {name} | {model} | – | – | – | {why} | – | – | – |");
            }
            Some(why) => {
                let _ = writeln!(out, "| {name} | {model} | FAILED: {why} | | | | | | |");
            }
            None => {
                let note = r
                    .stopped_by
                    .as_ref()
                    .map_or(String::new(), |s| format!("; {s}"));
                let _ = writeln!(
                    out,
                    "| {name} | {model} | {} | {:.1} | {:.1} | {} | {:.2} | {:.2} | {} of {} (first round {}){note} |",
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
