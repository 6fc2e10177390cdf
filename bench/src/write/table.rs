//! The matrix table: its columns, a row per cell with its figures and verdict, as markdown
//! for stdout (`page` renders the same table as HTML), with the notes and the system calls
//! by name under it.

use std::fmt::Write as _;

use crate::model::cell::{with_work, Cell, Link, Verdict, BOUND_PCT};

/// A figure with `digits` decimals, or "–" when there is none: how every table writes one.
pub(crate) fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

/// A column of the matrix table: its heading, and whether it holds figures (right-aligned,
/// sorted as numbers).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Column {
    pub name: &'static str,
    pub numeric: bool,
}

/// One entry of the table: what it shows, and the number it sorts by when it is a figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub text: String,
    pub sort: Option<f64>,
}

impl Entry {
    fn text(text: impl Into<String>) -> Entry {
        Entry {
            text: text.into(),
            sort: None,
        }
    }

    /// A figure with `digits` decimals, or "–" (sorted last) when there is none.
    fn figure(v: Option<f64>, digits: usize) -> Entry {
        Entry {
            text: opt(v, digits),
            sort: v,
        }
    }
}

/// What a row holds after the cells every row fills (variant … c).
#[derive(Debug, Clone, PartialEq)]
pub enum Figures {
    Measured(Vec<Entry>),
    /// The server does not serve this route (a peer), and why: not a failure.
    NotServed(String),
    Failed(String),
}

/// One row of the matrix table: one cell.
#[derive(Debug, Clone)]
pub struct Row<'a> {
    pub cell: &'a Cell,
    pub head: Vec<Entry>,
    pub figures: Figures,
    /// Who limited the median run (`None`: no run).
    pub verdict: Option<Verdict>,
}

/// The matrix table — its columns follow what the run measured — and the lines that say
/// how to read it. The markdown on stdout and the report page are two renderings of it.
#[derive(Debug, Clone)]
pub struct Table<'a> {
    pub columns: Vec<Column>,
    /// How many columns every row fills, failed or not (variant … c, and the link when a
    /// cell crossed another than loopback): the figures start after them.
    pub head: usize,
    pub rows: Vec<Row<'a>>,
    /// One markdown paragraph per line: the verdicts, the columns, the workloads.
    pub legend: Vec<String>,
}

/// The column of each row's CPU beside its group's cheapest row, round by round.
const BY_ROUND: &str = "CPU × cheapest (by round)";
/// The same beside the row `--baseline` named, where the run has one.
const BY_ROUND_BASELINE: &str = "CPU × baseline (by round)";

/// The row each cell's by-round CPU ratio divides by: its group's `--baseline` row when
/// the run named one and the group holds it, else the group's cheapest (lowest median CPU
/// µs a request); none for a cell whose starts did not run in rounds.
fn by_round_reference<'a>(cells: &'a [Cell], cell: &Cell) -> Option<&'a Cell> {
    if !cell.fresh_server {
        return None;
    }
    let group = || {
        cells
            .iter()
            .filter(|o| o.group() == cell.group() && o.fresh_server)
    };
    group().find(|o| o.baseline).or_else(|| {
        group()
            .filter_map(|o| Some((o.cpu_us_per_req()?, o)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, o)| o)
    })
}

/// The table in the style of the posts, with each row's ratio to the fastest row of its
/// group (same workload, keep-alive, concurrency, client), and how to read it.
pub fn table(cells: &[Cell]) -> Table<'_> {
    // The syscalls column appears when a run counted them (--syscalls).
    let syscalls = cells.iter().any(|c| {
        c.counted
            .as_ref()
            .is_some_and(|r| r.syscalls_per_req.is_some())
    });
    // io_uring submissions next to it when some server made any (thread-per-core).
    let submissions = cells.iter().any(|c| {
        c.counted
            .as_ref()
            .is_some_and(|r| r.uring_submissions_per_req.is_some_and(|n| n > 0.0))
    });
    let column = |name, numeric| Column { name, numeric };
    let mut columns: Vec<Column> = vec![
        column("variant", false),
        column("model", false),
        column("stack", false),
        column("workers", true),
        column("workload", false),
        column("keep-alive", false),
        column("c", true),
    ];
    // The link, when a cell crossed another than loopback (--link veth, Tsung's hosts).
    let over_links = cells.iter().any(|c| c.link != Link::Loopback);
    if over_links {
        columns.push(column("link", false));
    }
    let head = columns.len();
    columns.extend([
        column("req/s (min–max)", true),
        column("× fastest", true),
        column("CPU µs/req", true),
    ]);
    // Starts in rounds (--fresh-server): each row's CPU beside the cheapest's, round by round.
    let by_round = cells.iter().any(|c| c.fresh_server && c.runs.len() > 1);
    let baseline = cells.iter().find(|c| c.baseline && c.fresh_server);
    if by_round {
        columns.push(column(
            if baseline.is_some() {
                BY_ROUND_BASELINE
            } else {
                BY_ROUND
            },
            true,
        ));
    }
    let database = cells
        .iter()
        .any(|c| c.median().is_some_and(|r| r.db_cpu_us_per_req.is_some()));
    if database {
        columns.push(column("database CPU µs/req", true));
    }
    if syscalls {
        columns.push(column("syscalls/req", true));
    }
    if submissions {
        columns.push(column("io_uring subs/req", true));
    }
    columns.push(column("p99 ms", true));
    // The open loop's own columns, when a cell offered a fixed rate (--rate, --slo).
    let open_loop = cells.iter().any(|c| c.rate.is_some());
    if open_loop {
        columns.extend([
            column("offered req/s", true),
            column("achieved", true),
            column("p50 · p90 · p99.9 · max ms", true),
            column("CPU % server · client", true),
            column("errors", true),
        ]);
    }
    columns.extend([column("verdict", false), column("imbalance", true)]);

    let mut rows = Vec::new();
    for cell in cells {
        // A calibrated model (`--work-us`) beside its raw one: the µs it was given.
        let variant = with_work(&cell.variant, cell.work_us);
        let mut head = vec![
            Entry::text(&variant),
            Entry::text(&cell.model),
            Entry::text(&cell.stack),
            Entry::figure(Some(cell.workers as f64), 0),
            Entry::text(&cell.workload),
            Entry::text(cell.keep_alive_label()),
            Entry {
                text: cell.connections_label(),
                sort: Some(f64::from(cell.connections)),
            },
        ];
        if over_links {
            head.push(Entry::text(cell.link.label()));
        }
        let Some(run) = cell.median() else {
            // One line: a server's error page must not break a table.
            let why = cell
                .failure
                .as_deref()
                .unwrap_or("no run")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let figures = if why.starts_with("n/a") {
                Figures::NotServed(why)
            } else {
                Figures::Failed(why)
            };
            rows.push(Row {
                cell,
                head,
                figures,
                verdict: None,
            });
            continue;
        };
        let fastest = cells
            .iter()
            .filter(|o| o.group() == cell.group())
            .filter_map(|o| o.median().map(|r| r.outcome.rps))
            .fold(0.0, f64::max);
        let (lo, hi) = cell.rps_range();
        let ratio = if fastest > 0.0 {
            run.outcome.rps / fastest
        } else {
            0.0
        };
        let mut verdict = run.verdict.label().to_string();
        if run.verdict == Verdict::ClientBound {
            verdict.push_str(" (lower bound)");
        }
        if let Some(share) = cell.shortfall() {
            // Never silent: the offered rate was not reached, and who was saturated says
            // whether the server or the client could not keep up.
            verdict = format!("SHORTFALL {:.0} % · {verdict}", 100.0 * share);
        }
        let mut figures = vec![
            Entry {
                text: format!("{:.0} ({lo:.0}–{hi:.0})", run.outcome.rps),
                sort: Some(run.outcome.rps),
            },
            Entry::figure(Some(ratio), 2),
            Entry::figure(cell.cpu_us_per_req(), 2),
        ];
        if by_round {
            let reference = by_round_reference(cells, cell);
            let ratio = reference.and_then(|o| cell.cpu_ratio_by_round(o));
            let mut entry = Entry::figure(ratio, 2);
            if let Some((lo, hi)) = reference.and_then(|o| cell.cpu_ratio_interval_by_round(o)) {
                entry.text = format!("{} ({lo:.2}–{hi:.2})", entry.text);
            }
            figures.push(entry);
        }
        if database {
            figures.push(Entry::figure(cell.median_of(|r| r.db_cpu_us_per_req), 2));
        }
        let counted = cell.counted.as_ref();
        if syscalls {
            figures.push(Entry::figure(counted.and_then(|r| r.syscalls_per_req), 2));
        }
        if submissions {
            figures.push(Entry::figure(
                counted.and_then(|r| r.uring_submissions_per_req),
                2,
            ));
        }
        figures.push(Entry::figure(run.outcome.p99_ms, 2));
        if open_loop {
            let o = &run.outcome;
            figures.extend([
                Entry {
                    text: cell.rate.map_or("–".into(), |r| r.to_string()),
                    sort: cell.rate.map(f64::from),
                },
                Entry {
                    text: cell.rate.map_or("–".into(), |r| {
                        format!("{:.0} %", 100.0 * o.rps / f64::from(r.max(1)))
                    }),
                    sort: cell.rate.map(|r| o.rps / f64::from(r.max(1))),
                },
                Entry {
                    text: format!(
                        "{} · {} · {} · {}",
                        opt(o.p50_ms, 2),
                        opt(o.p90_ms, 2),
                        opt(o.p999_ms, 2),
                        opt(o.max_ms, 2)
                    ),
                    sort: o.p999_ms,
                },
                Entry {
                    text: format!("{} · {:.0}", opt(run.server_cpu_pct, 0), run.client_cpu_pct),
                    sort: run.server_cpu_pct,
                },
                Entry::figure(Some((o.failed + o.non_2xx + o.timeouts) as f64), 0),
            ]);
        }
        figures.push(Entry::text(verdict));
        figures.push(Entry::figure(cell.imbalance(), 2));
        rows.push(Row {
            cell,
            head,
            figures: Figures::Measured(figures),
            verdict: Some(run.verdict),
        });
    }

    let mut legend = vec![
        format!("server-bound: the server used ≥ {BOUND_PCT:.0} % of its CPUs — the figure measures it."),
        format!("client-bound: the client used ≥ {BOUND_PCT:.0} % of its CPU and the server less — the figure is only a lower bound for the server."),
        "neither: nobody was saturated (too little concurrency, or waiting) — compare CPU µs/req, not req/s.".to_string(),
        "CPU µs/req: server CPU time (all processes and threads) per request — the figure that ranks servers on a small machine.".to_string(),
        "imbalance: busiest worker's requests ÷ the mean (1.00 = even).".to_string(),
    ];
    if by_round {
        let (column, reference) = match baseline {
            Some(b) => (
                BY_ROUND_BASELINE,
                format!("that of {} (--baseline) in its group — where a group lacks it, of the group's row with the lowest CPU µs/req —", b.variant),
            ),
            None => (
                BY_ROUND,
                "that of the row of its group with the lowest CPU µs/req,".to_string(),
            ),
        };
        legend.push(format!("{column}: each start's CPU µs/req ÷ {reference} started in the same round (--fresh-server runs the starts in rounds), the median over the rounds — a drift of the machine divides out, as it does not from two medians. In brackets, from six rounds: the 95 % confidence interval of that median (distribution-free: order statistics of the rounds) — a row whose interval lies within a target is within it on this evidence, one whose interval straddles it is not settled."));
    }
    if database {
        legend.push("database CPU µs/req: the PostgreSQL backends' CPU time per request (pg workloads, the cluster bench started): on the server's CPUs, what waiting for the database cannot overlap.".into());
    }
    if open_loop {
        legend.push("offered: the open loop's fixed rate (oha -q); latency is measured from when each request was due (--latency-correction), so a stall shows in the percentiles instead of slowing the client down. SHORTFALL: the achieved rate stayed under 95 % of the offered one — read the verdict for who could not keep up.".into());
    }
    for w in variants::WORKLOADS {
        if cells.iter().any(|c| c.workload == w.name) {
            legend.push(format!("{} (`{}`): {}.", w.name, w.path, w.shows));
        }
    }
    if over_links {
        legend.push("link: what the client's packets crossed — loopback, veth (a test host to another, over a bridge) or a real network (--client-hosts a,b,c); rows compare within one link (× fastest).".into());
    }
    Table {
        columns,
        head,
        rows,
        legend,
    }
}

/// The table as markdown, for stdout, with its legend, the system calls by name and each
/// cell's notes.
pub fn markdown(cells: &[Cell]) -> String {
    let table = table(cells);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "|{}\n|{}",
        table
            .columns
            .iter()
            .map(|c| format!(" {} |", c.name))
            .collect::<String>(),
        table
            .columns
            .iter()
            .map(|c| if c.numeric { "---:|" } else { "---|" })
            .collect::<String>()
    );
    let pad = " |".repeat(table.columns.len() - table.head);
    for row in &table.rows {
        out.push('|');
        for e in &row.head {
            let _ = write!(out, " {} |", e.text);
        }
        match &row.figures {
            Figures::Measured(figures) => {
                for e in figures {
                    let _ = write!(out, " {} |", e.text);
                }
            }
            // The reason fills the first free column (its " |" is the first of the
            // padding); the rest stay empty.
            Figures::NotServed(why) => {
                let _ = write!(out, " {}{pad}", why.replace('|', "/"));
            }
            Figures::Failed(why) => {
                let _ = write!(out, " FAILED: {}{pad}", why.replace('|', "/"));
            }
        }
        out.push('\n');
    }
    out.push('\n');
    for line in &table.legend {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&by_name(cells));
    out.push_str(&hosts(cells));
    out.push_str(&notes(cells));
    out
}

/// Each cell's notes (a peer's missing headers, a model's queue), a line each.
pub fn notes(cells: &[Cell]) -> String {
    let mut out = String::new();
    for cell in cells {
        for note in &cell.notes {
            let _ = writeln!(
                out,
                "note ({} {}, keep-alive {}, c={}): {note}",
                cell.variant,
                cell.workload,
                cell.keep_alive_label(),
                cell.connections
            );
        }
    }
    out
}

/// A distributed client's hosts per cell (`--client tsung`): each host's requests,
/// req/s and its node's CPU in the median repetition — whether the fleet, or one host of
/// it, limited the run. Empty for a client of one process.
pub fn hosts(cells: &[Cell]) -> String {
    let mut out = String::new();
    for cell in cells {
        let Some(run) = cell.median().filter(|r| !r.outcome.hosts.is_empty()) else {
            continue;
        };
        if out.is_empty() {
            out.push_str("\nclient hosts (tsung: one node per host; CPU in percent of one CPU, its Erlang VM's start included):\n\n| variant | workload | keep-alive | c | host | requests | req/s | host CPU % |\n|---|---|---|---:|---|---:|---:|---:|\n");
        }
        for h in &run.outcome.hosts {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {:.0} | {} |",
                cell.variant,
                cell.workload,
                cell.keep_alive_label(),
                cell.connections_label(),
                match h.stopped_at_s {
                    Some(at) => format!("{} (node stopped at {at:.1} s)", h.host),
                    None => h.host.clone(),
                },
                h.requests,
                h.rps,
                opt(h.cpu_pct, 0)
            );
        }
    }
    out
}

/// The system calls of each cell's counted repetition by name, per request
/// (`--syscalls`): the ones at 0.01 a request or more, most frequent first. Empty without
/// them.
pub fn by_name(cells: &[Cell]) -> String {
    let mut out = String::new();
    for cell in cells {
        let Some(run) = cell
            .counted
            .as_ref()
            .filter(|r| !r.syscalls_by_name.is_empty())
        else {
            continue;
        };
        if out.is_empty() {
            out.push_str("\nsystem calls per request, by name (perf stat, syscalls:sys_enter_*):\n\n| variant | workload | keep-alive | c | by name |\n|---|---|---|---:|---|\n");
        }
        let names: Vec<String> = run
            .syscalls_by_name
            .iter()
            .filter(|(_, n)| *n >= 0.01)
            .map(|(name, n)| format!("{name} {n:.2}"))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            cell.variant,
            cell.workload,
            cell.keep_alive_label(),
            cell.connections_label(),
            names.join(" · ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cell::Run;

    fn cell(variant: &str, run: Option<(f64, Option<f64>, Option<f64>)>) -> Cell {
        Cell {
            failure: run.is_none().then(|| "did not start".into()),
            counted: run.map(|(rps, syscalls, submissions)| Run {
                syscalls_per_req: syscalls,
                uring_submissions_per_req: submissions,
                ..Run::sample(rps, 4.0)
            }),
            ..Cell::sample(
                variant,
                run.into_iter()
                    .map(|(rps, _, _)| Run::sample(rps, 4.0))
                    .collect(),
            )
        }
    }

    /// The table's rows of `text`: each row's cells, without the outer pipes.
    fn rows(text: &str) -> Vec<Vec<String>> {
        text.lines()
            .filter(|l| l.starts_with('|'))
            .map(|l| {
                l.trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().to_string())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn submissions_column_appears_when_a_server_submitted() {
        let cells = [
            cell("epoll", Some((200_000.0, Some(2.2), Some(0.0)))),
            cell("uring", Some((100_000.0, Some(1.05), Some(0.05)))),
            cell("dead", None),
        ];
        let rows = rows(&markdown(&cells));
        let header = &rows[0];
        let at = |name: &str| header.iter().position(|h| h == name).unwrap();
        let (sys, subs) = (at("syscalls/req"), at("io_uring subs/req"));
        assert_eq!(subs, sys + 1);
        // Every row, the failed one included, has as many cells as the header.
        assert!(rows.iter().all(|r| r.len() == header.len()), "{rows:?}");
        assert_eq!(
            (rows[2][sys].as_str(), rows[2][subs].as_str()),
            ("2.20", "0.00")
        );
        assert_eq!(
            (rows[3][sys].as_str(), rows[3][subs].as_str()),
            ("1.05", "0.05")
        );
        assert_eq!(rows[3][at("× fastest")], "0.50");
        assert!(rows[4][at("variant")] == "dead" && rows[4].iter().any(|c| c.contains("FAILED")));
    }

    /// Three rows started in rounds: without a baseline each reads beside the cheapest
    /// (`a`, 1.00); with `--baseline c` beside `c`, round by round, though `c` is not the
    /// cheapest.
    #[test]
    fn the_by_round_column_divides_by_the_baseline_when_one_is_named() {
        let rounds = |cpus: [f64; 3]| {
            let runs = cpus.iter().map(|&c| Run::sample(1000.0, c)).collect();
            move |name: &str| Cell {
                fresh_server: true,
                ..Cell::sample(name, runs)
            }
        };
        let mut cells = [
            rounds([10.0, 20.0, 10.0])("a"),
            rounds([15.0, 30.0, 15.0])("b"),
            rounds([20.0, 40.0, 20.0])("c"),
        ];
        let column = |cells: &[Cell], name: &str| {
            let rows = rows(&markdown(cells));
            let at = rows[0].iter().position(|h| h == name).unwrap();
            rows[2..].iter().map(|r| r[at].clone()).collect::<Vec<_>>()
        };
        assert_eq!(column(&cells, BY_ROUND), ["1.00", "1.50", "2.00"]);
        cells[2].baseline = true;
        assert_eq!(column(&cells, BY_ROUND_BASELINE), ["0.50", "0.75", "1.00"]);
        assert!(markdown(&cells).contains("÷ that of c (--baseline)"));
    }

    /// From six rounds the by-round figure carries its median's 95 % interval: over nine
    /// rounds of ratios 1.01 … 1.09 (in any order), the 2nd and the 8th — 1.02 and 1.08.
    #[test]
    fn the_by_round_column_gives_the_interval_of_its_median() {
        let rounds = |cpus: &[f64]| {
            let runs = cpus.iter().map(|&c| Run::sample(1000.0, c)).collect();
            move |name: &str| Cell {
                fresh_server: true,
                ..Cell::sample(name, runs)
            }
        };
        let base = [10.0; 9];
        let other: Vec<f64> = [5, 1, 9, 3, 7, 2, 8, 4, 6]
            .iter()
            .map(|&i| 10.0 * (1.0 + i as f64 / 100.0))
            .collect();
        let cells = [rounds(&base)("a"), rounds(&other)("b")];
        let rows = rows(&markdown(&cells));
        let at = rows[0].iter().position(|h| h == BY_ROUND).unwrap();
        assert_eq!(rows[2][at], "1.00 (1.00–1.00)");
        assert_eq!(rows[3][at], "1.05 (1.02–1.08)");
    }

    #[test]
    fn no_submissions_column_without_io_uring_work() {
        let cells = [cell("epoll", Some((200_000.0, Some(2.2), Some(0.0))))];
        let text = markdown(&cells);
        assert!(
            text.contains("syscalls/req") && !text.contains("io_uring"),
            "{text}"
        );
        let cells = [cell("epoll", Some((200_000.0, None, None)))];
        assert!(!markdown(&cells).contains("syscalls/req"));
    }
}
