//! Turning runs into verdicts, a table, files and charts.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::client::{Client, Outcome};

/// CPU use (percent of the CPUs a side was given) at which that side is the bottleneck.
pub const BOUND_PCT: f64 = 90.0;

/// Share of an offered rate below which an open-loop cell did not keep up.
pub const SHORTFALL: f64 = 0.95;

/// Who limited a run — the lesson of the `ab -c 1000` post.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The server used ≥ 90 % of its CPUs: the figure measures the server.
    ServerBound,
    /// The client used ≥ 90 % of its CPU and the server did not: the figure is only a
    /// lower bound for the server.
    ClientBound,
    /// Neither was saturated: too little concurrency, or everyone was waiting.
    Neither,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::ServerBound => "server-bound",
            Verdict::ClientBound => "client-bound",
            Verdict::Neither => "neither",
        }
    }
}

/// The verdict rule. `server_pct` is None when the server is not ours to measure (`--url`).
pub fn verdict(server_pct: Option<f64>, client_pct: f64) -> Verdict {
    match server_pct {
        Some(s) if s >= BOUND_PCT => Verdict::ServerBound,
        _ if client_pct >= BOUND_PCT => Verdict::ClientBound,
        _ => Verdict::Neither,
    }
}

/// One repetition.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub outcome: Outcome,
    pub wall_secs: f64,
    /// Server CPU time ÷ wall time ÷ server CPUs, in percent.
    pub server_cpu_pct: Option<f64>,
    /// Client CPU time ÷ wall time, in percent of one CPU (ab and `wrk -t1` are one thread).
    pub client_cpu_pct: f64,
    pub server_cpu_us_per_req: Option<f64>,
    /// The database's CPU time per request (its backends, pg workloads): on the server's
    /// CPUs it is what waiting could not overlap.
    pub db_cpu_us_per_req: Option<f64>,
    pub voluntary_switches_per_req: Option<f64>,
    pub involuntary_switches_per_req: Option<f64>,
    pub syscalls_per_req: Option<f64>,
    /// io_uring submissions per request (`--syscalls`, where perf can count them): work
    /// handed to the kernel without a system call of its own.
    pub uring_submissions_per_req: Option<f64>,
    /// System calls per request by name (`--syscalls`), most frequent first.
    pub syscalls_by_name: Vec<(String, f64)>,
    pub verdict: Verdict,
    pub command: String,
}

/// One cell of the matrix, with every repetition.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub variant: String,
    pub model: String,
    /// `raw` or `framework` (the server's `--stack`).
    pub stack: String,
    pub workers: usize,
    pub server_cpus: Vec<usize>,
    pub client_cpus: Vec<usize>,
    pub workload: String,
    pub keep_alive: bool,
    pub connections: u32,
    pub client: Client,
    pub pipeline: Option<u32>,
    /// Offered requests per second (the open loop, `--rate`); `None`: closed loop.
    pub rate: Option<u32>,
    pub runs: Vec<Run>,
    /// Why the cell has no figures (failed validation, did not start, died).
    pub failure: Option<String>,
    pub peak_rss_kib: Option<u64>,
    /// Requests per worker from the server's `--stats` (warm-up included).
    pub worker_requests: Vec<u64>,
    /// CPU seconds of a peer's `workers` busiest workers over the measured repetitions,
    /// busiest first, from /proc (`variants::peers::Workers` says which processes): how
    /// evenly the work spread over a server that keeps no counts (a model's
    /// `worker_requests` say it exactly).
    pub worker_cpu_secs: Vec<f64>,
    /// `--syscalls`: one extra repetition under `perf stat`, apart from the measured ones —
    /// the hundreds of `syscalls:sys_enter_*` tracepoints it counts cost every context
    /// switch of the server, and slowed the measured figures (reactor-workers ×3 µs/req).
    /// The system-call columns come from it.
    pub counted: Option<Run>,
    /// `--profile`: the samples of one extra repetition and what they say.
    pub profile: Option<crate::profile::Profile>,
    pub notes: Vec<String>,
}

impl Cell {
    /// The repetition with the median req/s.
    pub fn median(&self) -> Option<&Run> {
        let mut runs: Vec<&Run> = self.runs.iter().collect();
        runs.sort_by(|a, b| a.outcome.rps.total_cmp(&b.outcome.rps));
        runs.get(runs.len() / 2).copied()
    }

    pub fn rps_range(&self) -> (f64, f64) {
        let rps = self.runs.iter().map(|r| r.outcome.rps);
        (
            rps.clone().fold(f64::INFINITY, f64::min),
            rps.fold(0.0, f64::max),
        )
    }

    /// Busiest worker's requests ÷ the mean: 1.0 is a perfect spread.
    pub fn imbalance(&self) -> Option<f64> {
        let requests: Vec<f64> = self.worker_requests.iter().map(|&r| r as f64).collect();
        busiest_over_mean(&requests)
    }

    /// How unevenly the work spread over the workers, busiest ÷ mean (1.0 even, `workers`
    /// one worker did everything): from the requests each worker counted where it counts
    /// them (the models' `--stats`), else from each worker's CPU time (a peer).
    pub fn worker_balance(&self) -> Option<f64> {
        self.imbalance()
            .or_else(|| busiest_over_mean(&self.worker_cpu_secs))
    }

    /// `on` or `off`, as the tables write keep-alive.
    pub fn keep_alive_label(&self) -> &'static str {
        if self.keep_alive {
            "on"
        } else {
            "off"
        }
    }

    /// Client connections as the tables write them: `64`, or `64 ×16` when pipelined.
    pub fn connections_label(&self) -> String {
        match self.pipeline {
            Some(p) => format!("{} ×{p}", self.connections),
            None => self.connections.to_string(),
        }
    }

    /// Achieved ÷ offered rate of the median run, when an open-loop cell reached less
    /// than [`SHORTFALL`] of what it offered.
    pub fn shortfall(&self) -> Option<f64> {
        let offered = f64::from(self.rate?);
        let share = self.median()?.outcome.rps / offered;
        (share < SHORTFALL).then_some(share)
    }

    /// A name for the cell's files (`flame/<key>.svg`): what makes it differ from every
    /// other cell of a run, in a file name's characters.
    pub fn key(&self) -> String {
        let mut key = format!(
            "{}-{}-{}-ka-{}-c{}",
            self.variant,
            self.stack,
            self.workload,
            self.keep_alive_label(),
            self.connections
        );
        if let Some(p) = self.pipeline {
            key.push_str(&format!("x{p}"));
        }
        if let Some(r) = self.rate {
            key.push_str(&format!("-r{r}"));
        }
        key.push_str(&format!("-w{}", self.workers));
        key.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    fn group(&self) -> (String, bool, u32, Client, Option<u32>, Option<u32>) {
        (
            self.workload.clone(),
            self.keep_alive,
            self.connections,
            self.client,
            self.pipeline,
            self.rate,
        )
    }
}

/// The largest of `values` ÷ their mean, for two values or more (one is always even).
fn busiest_over_mean(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let max = values.iter().copied().fold(0.0, f64::max);
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    (mean > 0.0).then(|| max / mean)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

/// The table in the style of the posts, with each row's ratio to the fastest row of its
/// group (same workload, keep-alive, concurrency, client), and one line per verdict.
pub fn markdown(cells: &[Cell]) -> String {
    let mut out = String::new();
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
    // The columns, in order, with their alignment: the header, the separator and the
    // padding of a failed row all come from this one list.
    let mut columns: Vec<(&str, bool)> = vec![
        ("variant", false),
        ("model", false),
        ("stack", false),
        ("workers", true),
        ("workload", false),
        ("keep-alive", false),
        ("c", true),
        ("req/s (min–max)", true),
        ("× fastest", true),
        ("CPU µs/req", true),
    ];
    let database = cells
        .iter()
        .any(|c| c.median().is_some_and(|r| r.db_cpu_us_per_req.is_some()));
    if database {
        columns.push(("database CPU µs/req", true));
    }
    if syscalls {
        columns.push(("syscalls/req", true));
    }
    if submissions {
        columns.push(("io_uring subs/req", true));
    }
    columns.push(("p99 ms", true));
    // The open loop's own columns, when a cell offered a fixed rate (--rate, --slo).
    let open_loop = cells.iter().any(|c| c.rate.is_some());
    if open_loop {
        columns.extend([
            ("offered req/s", true),
            ("achieved", true),
            ("p50 · p90 · p99.9 · max ms", true),
            ("CPU % server · client", true),
            ("errors", true),
        ]);
    }
    columns.extend([("verdict", false), ("imbalance", true)]);
    /// The columns every row fills, failed or not (variant … c).
    const HEAD_COLUMNS: usize = 7;
    let _ = writeln!(
        out,
        "|{}\n|{}",
        columns
            .iter()
            .map(|(h, _)| format!(" {h} |"))
            .collect::<String>(),
        columns
            .iter()
            .map(|&(_, right)| if right { "---:|" } else { "---|" })
            .collect::<String>()
    );
    for cell in cells {
        let ka = cell.keep_alive_label();
        let c = cell.connections_label();
        let head = format!(
            "| {} | {} | {} | {} | {} | {ka} | {c} |",
            cell.variant, cell.model, cell.stack, cell.workers, cell.workload
        );
        let Some(run) = cell.median() else {
            // One line, no pipe: a server's error page must not break the table.
            let why = cell
                .failure
                .as_deref()
                .unwrap_or("no run")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .replace('|', "/");
            let why = why.as_str();
            if why.starts_with("n/a") {
                // Not a failure: the peer does not serve this route (and says why).
                let pad = " |".repeat(columns.len() - HEAD_COLUMNS);
                let _ = writeln!(out, "{head} {why}{pad}");
                continue;
            }
            // The failure fills the first free column (its " |" is the first of these);
            // the rest stay empty.
            let pad = " |".repeat(columns.len() - HEAD_COLUMNS);
            let _ = writeln!(out, "{head} FAILED: {why}{pad}");
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
        let mut latency = String::new();
        if open_loop {
            let o = &run.outcome;
            let _ = write!(
                latency,
                " {} | {} | {} · {} · {} · {} | {} · {:.0} | {} |",
                cell.rate.map_or("–".into(), |r| r.to_string()),
                cell.rate.map_or("–".into(), |r| format!(
                    "{:.0} %",
                    100.0 * o.rps / f64::from(r.max(1))
                )),
                opt(o.p50_ms, 2),
                opt(o.p90_ms, 2),
                opt(o.p999_ms, 2),
                opt(o.max_ms, 2),
                opt(run.server_cpu_pct, 0),
                run.client_cpu_pct,
                o.failed + o.non_2xx + o.timeouts,
            );
        }
        let mut sys = String::new();
        if database {
            let _ = write!(sys, " {} |", opt(run.db_cpu_us_per_req, 2));
        }
        let counted = cell.counted.as_ref();
        if syscalls {
            let _ = write!(
                sys,
                " {} |",
                opt(counted.and_then(|r| r.syscalls_per_req), 2)
            );
        }
        if submissions {
            let _ = write!(
                sys,
                " {} |",
                opt(counted.and_then(|r| r.uring_submissions_per_req), 2)
            );
        }
        let _ = writeln!(
            out,
            "{head} {:.0} ({:.0}–{:.0}) | {ratio:.2} | {} |{sys} {} |{latency} {verdict} | {} |",
            run.outcome.rps,
            lo,
            hi,
            opt(run.server_cpu_us_per_req, 2),
            opt(run.outcome.p99_ms, 2),
            opt(cell.imbalance(), 2),
        );
    }
    out.push('\n');
    out.push_str(&format!(
        "server-bound: the server used ≥ {BOUND_PCT:.0} % of its CPUs — the figure measures it.\n\
         client-bound: the client used ≥ {BOUND_PCT:.0} % of its CPU and the server less — the figure is only a lower bound for the server.\n\
         neither: nobody was saturated (too little concurrency, or waiting) — compare CPU µs/req, not req/s.\n\
         CPU µs/req: server CPU time (all processes and threads) per request — the figure that ranks servers on a small machine.\n\
         imbalance: busiest worker's requests ÷ the mean (1.00 = even).\n"
    ));
    if database {
        out.push_str("database CPU µs/req: the PostgreSQL backends' CPU time per request (pg workloads, the cluster bench started): on the server's CPUs, what waiting for the database cannot overlap.\n");
    }
    if open_loop {
        out.push_str(
            "offered: the open loop's fixed rate (oha -q); latency is measured from when each request was due (--latency-correction), so a stall shows in the percentiles instead of slowing the client down. SHORTFALL: the achieved rate stayed under 95 % of the offered one — read the verdict for who could not keep up.\n",
        );
    }
    for w in variants::WORKLOADS {
        if cells.iter().any(|c| c.workload == w.name) {
            let _ = writeln!(out, "{} (`{}`): {}.", w.name, w.path, w.shows);
        }
    }
    out.push_str(&by_name(cells));
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

/// One line of results.csv: one repetition of one cell (a failed cell gets one line with
/// its failure). The header is the field names, so the columns cannot drift apart from
/// the values.
#[derive(Debug, serde::Serialize)]
struct CsvRow<'a> {
    variant: &'a str,
    model: &'a str,
    stack: &'a str,
    workers: usize,
    workload: &'a str,
    keep_alive: bool,
    connections: u32,
    client: Client,
    pipeline: Option<u32>,
    rep: usize,
    /// The extra repetition under `perf stat` (`--syscalls`), not a measured one.
    counted: bool,
    requests: u64,
    rps: String,
    failed: u64,
    non_2xx: u64,
    timeouts: u64,
    p50_ms: Option<String>,
    p99_ms: Option<String>,
    rate: Option<u32>,
    p90_ms: Option<String>,
    p999_ms: Option<String>,
    max_ms: Option<String>,
    server_cpu_pct: Option<String>,
    client_cpu_pct: Option<String>,
    server_cpu_us_per_req: Option<String>,
    db_cpu_us_per_req: Option<String>,
    voluntary_switches_per_req: Option<String>,
    involuntary_switches_per_req: Option<String>,
    syscalls_per_req: Option<String>,
    uring_submissions_per_req: Option<String>,
    /// `name=per_request` pairs, `;`-separated (`--syscalls`).
    syscalls_by_name: String,
    peak_rss_kib: Option<u64>,
    imbalance: Option<String>,
    verdict: &'a str,
    failure: &'a str,
    command: &'a str,
}

impl<'a> CsvRow<'a> {
    fn new(cell: &'a Cell, rep: usize, run: Option<&'a Run>, counted: bool) -> Self {
        let num = |v: Option<f64>| v.map(|v| format!("{v:.4}"));
        let o = run.map(|r| r.outcome.clone()).unwrap_or_default();
        CsvRow {
            variant: &cell.variant,
            model: &cell.model,
            stack: &cell.stack,
            workers: cell.workers,
            workload: &cell.workload,
            keep_alive: cell.keep_alive,
            connections: cell.connections,
            client: cell.client,
            pipeline: cell.pipeline,
            rep,
            counted,
            requests: o.requests,
            rps: format!("{:.1}", o.rps),
            failed: o.failed,
            non_2xx: o.non_2xx,
            timeouts: o.timeouts,
            p50_ms: num(o.p50_ms),
            p99_ms: num(o.p99_ms),
            rate: cell.rate,
            p90_ms: num(o.p90_ms),
            p999_ms: num(o.p999_ms),
            max_ms: num(o.max_ms),
            server_cpu_pct: num(run.and_then(|r| r.server_cpu_pct)),
            client_cpu_pct: num(run.map(|r| r.client_cpu_pct)),
            server_cpu_us_per_req: num(run.and_then(|r| r.server_cpu_us_per_req)),
            db_cpu_us_per_req: num(run.and_then(|r| r.db_cpu_us_per_req)),
            voluntary_switches_per_req: num(run.and_then(|r| r.voluntary_switches_per_req)),
            involuntary_switches_per_req: num(run.and_then(|r| r.involuntary_switches_per_req)),
            syscalls_per_req: num(run.and_then(|r| r.syscalls_per_req)),
            uring_submissions_per_req: num(run.and_then(|r| r.uring_submissions_per_req)),
            syscalls_by_name: run.map_or(String::new(), |r| {
                r.syscalls_by_name
                    .iter()
                    .map(|(name, n)| format!("{name}={n:.4}"))
                    .collect::<Vec<_>>()
                    .join(";")
            }),
            peak_rss_kib: cell.peak_rss_kib,
            imbalance: num(cell.imbalance()),
            verdict: run.map_or("", |r| r.verdict.label()),
            failure: cell.failure.as_deref().unwrap_or(""),
            command: run.map_or("", |r| r.command.as_str()),
        }
    }
}

/// `--profile`'s files in `dir/flame/`: each profiled cell's flame graph and folded
/// stacks (at the names its profile carries), and with `diff` = (A, B) a differential
/// flame graph from A to B for every cell the two share. Returns the files written.
pub fn write_profiles(
    dir: &Path,
    cells: &[Cell],
    diff: Option<&(String, String)>,
) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir.join("flame")).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut written = Vec::new();
    for cell in cells {
        let Some(p) = &cell.profile else { continue };
        let title = format!(
            "{} — {} {}, keep-alive {}, c={}",
            cell.variant,
            cell.stack,
            cell.workload,
            cell.keep_alive_label(),
            cell.connections_label()
        );
        crate::profile::flamegraph(p, &title, &dir.join(&p.flamegraph))?;
        let folded: String = p.folded.iter().map(|(s, n)| format!("{s} {n}\n")).collect();
        std::fs::write(dir.join(&p.folded_file), folded).map_err(|e| e.to_string())?;
        written.push(p.flamegraph.clone());
    }
    let Some((a, b)) = diff else {
        return Ok(written);
    };
    let graphs = written.len();
    let same = |x: &Cell, y: &Cell| {
        (x.stack.as_str(), x.workers, x.group()) == (y.stack.as_str(), y.workers, y.group())
    };
    for before in cells.iter().filter(|c| &c.variant == a) {
        let Some(after) = cells.iter().find(|c| &c.variant == b && same(before, c)) else {
            continue;
        };
        let (Some(pa), Some(pb)) = (&before.profile, &after.profile) else {
            continue;
        };
        let rest = before.key();
        let rest = rest.strip_prefix(a.as_str()).unwrap_or(&rest);
        let file = format!("flame/diff-{a}-vs-{b}{rest}.svg");
        let title = format!(
            "{a} → {b} — {} {}, keep-alive {}, c={}",
            before.stack,
            before.workload,
            before.keep_alive_label(),
            before.connections_label()
        );
        crate::profile::differential(pa, pb, &title, &dir.join(&file))?;
        written.push(file);
    }
    if written.len() == graphs {
        return Err(format!(
            "--diff {a},{b}: the two share no profiled cell (same workload, keep-alive, concurrency, stack, workers)"
        ));
    }
    Ok(written)
}

/// Writes results.json, results.csv and the SVG charts into `dir`.
pub fn write_files(dir: &Path, cells: &[Cell], meta: serde_json::Value) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // An --slo run's target, drawn across its curves when it is a p99 one.
    let slo_ms = (meta["slo"]["percentile"].as_f64() == Some(99.0))
        .then(|| meta["slo"]["limit_ms"].as_f64())
        .flatten();
    let json = serde_json::json!({ "meta": meta, "cells": cells });
    let text = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("results.json"), text).map_err(|e| e.to_string())?;

    let mut csv = csv::Writer::from_path(dir.join("results.csv")).map_err(|e| e.to_string())?;
    for cell in cells {
        let runs: Vec<Option<&Run>> = if cell.runs.is_empty() {
            vec![None]
        } else {
            cell.runs.iter().map(Some).collect()
        };
        for (rep, run) in runs.into_iter().enumerate() {
            csv.serialize(CsvRow::new(cell, rep, run, false))
                .map_err(|e| e.to_string())?;
        }
        if let Some(counted) = &cell.counted {
            // The --syscalls repetition: its own line, marked, after the measured ones.
            csv.serialize(CsvRow::new(cell, cell.runs.len(), Some(counted), true))
                .map_err(|e| e.to_string())?;
        }
    }
    csv.flush().map_err(|e| e.to_string())?;

    let label = |c: &Cell| {
        format!(
            "{}{} · {} · ka {} · c{}",
            c.variant,
            if c.stack == "raw" { "" } else { " (framework)" },
            c.workload,
            if c.keep_alive { "on" } else { "off" },
            c.connections
        )
    };
    let measured: Vec<&Cell> = cells.iter().filter(|c| c.median().is_some()).collect();
    let rps: Vec<(String, f64)> = measured
        .iter()
        .map(|c| (label(c), c.median().map_or(0.0, |r| r.outcome.rps)))
        .collect();
    bar_chart(
        &dir.join("req_per_sec.svg"),
        "requests per second (median)",
        "req/s",
        &rps,
    )?;
    latency_charts(dir, cells, slo_ms)?;
    let cpu: Vec<(String, f64)> = measured
        .iter()
        .filter_map(|c| Some((label(c), c.median()?.server_cpu_us_per_req?)))
        .collect();
    if !cpu.is_empty() {
        bar_chart(
            &dir.join("cpu_us_per_req.svg"),
            "server CPU time per request (median run)",
            "µs/request",
            &cpu,
        )?;
    }
    Ok(())
}

/// One point of a latency-vs-load line: offered rate, p99 ms, and whether the rate was
/// reached.
type LoadPoint = (f64, f64, bool);

/// Latency against load, one SVG per workload and keep-alive mode that ran the open loop
/// (`latency_<workload>_ka-<on|off>.svg`): x the offered rate, y the corrected p99 on a log
/// scale, a line per server; a shortfall point is drawn hollow (the rate was not reached);
/// an `--slo` p99 target is a dashed horizontal line.
fn latency_charts(dir: &Path, cells: &[Cell], slo_ms: Option<f64>) -> Result<(), String> {
    use plotters::prelude::*;
    let mut groups: Vec<(String, bool)> = Vec::new();
    for c in cells
        .iter()
        .filter(|c| c.rate.is_some() && c.median().is_some())
    {
        if !groups.contains(&(c.workload.clone(), c.keep_alive)) {
            groups.push((c.workload.clone(), c.keep_alive));
        }
    }
    for (workload, ka) in groups {
        let ka_name = if ka { "on" } else { "off" };
        let path = dir.join(format!("latency_{workload}_ka-{ka_name}.svg"));
        let err = |e: &dyn std::fmt::Display| format!("chart {}: {e}", path.display());
        // Per server, its points sorted by rate.
        let mut lines: Vec<(String, Vec<LoadPoint>)> = Vec::new();
        for c in cells
            .iter()
            .filter(|c| c.workload == workload && c.keep_alive == ka)
        {
            let (Some(rate), Some(p99)) = (c.rate, c.median().and_then(|r| r.outcome.p99_ms))
            else {
                continue;
            };
            let point = (f64::from(rate), p99.max(0.001), c.shortfall().is_none());
            match lines.iter_mut().find(|l| l.0 == c.variant) {
                Some(l) => l.1.push(point),
                None => lines.push((c.variant.clone(), vec![point])),
            }
        }
        for l in &mut lines {
            l.1.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let xmax = lines
            .iter()
            .flat_map(|l| l.1.iter().map(|p| p.0))
            .fold(1.0, f64::max)
            * 1.05;
        let (ymin, ymax) = lines
            .iter()
            .flat_map(|l| l.1.iter().map(|p| p.1))
            .chain(slo_ms)
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), y| {
                (lo.min(y), hi.max(y))
            });
        let root = SVGBackend::new(&path, (1000, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{workload}, keep-alive {ka_name}: p99 latency against offered load (open loop, corrected)"),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..xmax, ((ymin * 0.8)..(ymax * 1.25)).log_scale())
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("offered requests per second")
            .y_desc("p99 ms (log)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y}"))
            .draw()
            .map_err(|e| err(&e))?;
        for (i, (name, points)) in lines.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    points.iter().map(|p| (p.0, p.1)),
                    color.stroke_width(2),
                ))
                .map_err(|e| err(&e))?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color));
            chart
                .draw_series(points.iter().map(|&(x, y, reached)| {
                    let style = if reached {
                        color.filled()
                    } else {
                        color.stroke_width(2)
                    };
                    Circle::new((x, y), 4, style)
                }))
                .map_err(|e| err(&e))?;
        }
        if let Some(limit) = slo_ms {
            // Dashes drawn as short segments: the target every curve is read against.
            let step = xmax / 60.0;
            chart
                .draw_series((0..60).step_by(2).map(|i| {
                    let x = f64::from(i) * step;
                    PathElement::new([(x, limit), (x + step, limit)], RED.stroke_width(2))
                }))
                .map_err(|e| err(&e))?
                .label(format!("target p99 ≤ {limit} ms"))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], RED));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(())
}

/// A horizontal bar chart, one bar per row, in an SVG file.
fn bar_chart(path: &Path, title: &str, unit: &str, rows: &[(String, f64)]) -> Result<(), String> {
    use plotters::prelude::*;
    if rows.is_empty() {
        return Ok(());
    }
    let height = 90 + rows.len() as u32 * 26;
    let root = SVGBackend::new(path, (1000, height)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("chart {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let max = rows.iter().map(|r| r.1).fold(0.0, f64::max).max(1e-9) * 1.08;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(380)
        .build_cartesian_2d(0f64..max, (0..rows.len()).into_segmented())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(rows.len())
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => rows.get(*i).map_or(String::new(), |r| r.0.clone()),
            _ => String::new(),
        })
        .x_desc(unit)
        .draw()
        .map_err(|e| err(&e))?;
    chart
        .draw_series(rows.iter().enumerate().map(|(i, (_, v))| {
            Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (*v, SegmentValue::Exact(i + 1)),
                ],
                BLUE.mix(0.55).filled(),
            )
        }))
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
impl Run {
    /// A client-bound repetition of 1,000 requests at `rps`, `cpu_us` each, for the tests
    /// of the tables built from runs.
    pub(crate) fn sample(rps: f64, cpu_us: f64) -> Run {
        Run {
            outcome: Outcome {
                requests: 1000,
                rps,
                ..Outcome::default()
            },
            wall_secs: 1.0,
            server_cpu_pct: Some(50.0),
            client_cpu_pct: 99.0,
            server_cpu_us_per_req: Some(cpu_us),
            db_cpu_us_per_req: None,
            voluntary_switches_per_req: None,
            involuntary_switches_per_req: None,
            syscalls_per_req: None,
            uring_submissions_per_req: None,
            syscalls_by_name: Vec::new(),
            verdict: Verdict::ClientBound,
            command: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_rule() {
        assert_eq!(verdict(Some(95.0), 99.0), Verdict::ServerBound);
        assert_eq!(verdict(Some(60.0), 97.0), Verdict::ClientBound);
        assert_eq!(verdict(Some(60.0), 40.0), Verdict::Neither);
        assert_eq!(verdict(None, 95.0), Verdict::ClientBound);
        assert_eq!(verdict(Some(89.9), 89.9), Verdict::Neither);
    }

    fn cell(variant: &str, run: Option<(f64, Option<f64>, Option<f64>)>) -> Cell {
        Cell {
            variant: variant.into(),
            model: "m".into(),
            stack: "raw".into(),
            workers: 1,
            server_cpus: vec![0],
            client_cpus: vec![1],
            workload: "plaintext".into(),
            keep_alive: true,
            connections: 64,
            client: Client::Wrk,
            pipeline: None,
            rate: None,
            runs: run
                .into_iter()
                .map(|(rps, _, _)| Run::sample(rps, 4.0))
                .collect(),
            failure: run.is_none().then(|| "did not start".into()),
            peak_rss_kib: None,
            worker_requests: Vec::new(),
            worker_cpu_secs: Vec::new(),
            counted: run.map(|(rps, syscalls, submissions)| Run {
                syscalls_per_req: syscalls,
                uring_submissions_per_req: submissions,
                ..Run::sample(rps, 4.0)
            }),
            profile: None,
            notes: Vec::new(),
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
