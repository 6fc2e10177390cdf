//! The results folder: results.json (the model as it is), results.csv (a line per
//! repetition), idle.csv and attack.csv through serde, then the page.

use std::path::Path;

use serde::Serialize;

use crate::model::cell::{Cell, Run};
use crate::model::client::Client;
use crate::model::Results;

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

/// Writes results.json, results.csv, the SVG charts and report.html into `dir`.
pub fn write_files(dir: &Path, results: &Results) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let text = serde_json::to_string_pretty(results).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("results.json"), text).map_err(|e| e.to_string())?;

    let cells = &results.cells;
    if !cells.is_empty() {
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
    }
    // A line per server: each client host's share is in results.json (a list, which a CSV
    // line cannot hold).
    let idle: Vec<_> = results
        .idle
        .iter()
        .cloned()
        .map(|mut r| {
            r.hosts.clear();
            r
        })
        .collect();
    write_csv(&dir.join("idle.csv"), &idle)?;
    write_csv(&dir.join("attack.csv"), &results.attack)?;
    // A soak's seconds, a line each: the series its chart draws.
    let seconds: Vec<SoakSecond> = results
        .soak
        .iter()
        .flat_map(|r| {
            r.seconds.iter().map(|s| SoakSecond {
                variant: &r.variant,
                at_s: s.at_s,
                rss_kib: s.rss_kib,
                fds: s.fds,
                busiest_sockets: s.sockets.first().copied().unwrap_or(0),
                cpu_pct: s.cpu_pct,
                steal_pct: s.steal_pct,
                client_cpu_pct: s.client_cpu_pct,
                client_lag_ms: s.client_lag_ms,
                answered: s.answered,
                p99_ms: s.p99_ms,
            })
        })
        .collect();
    write_csv(&dir.join("soak.csv"), &seconds)?;
    super::page::write(dir, results)?;
    Ok(())
}

/// One second of a soak, as soak.csv has it.
#[derive(Serialize)]
struct SoakSecond<'a> {
    variant: &'a str,
    at_s: u32,
    rss_kib: u64,
    fds: u64,
    /// Sockets of the process holding the most.
    busiest_sockets: u32,
    cpu_pct: f64,
    steal_pct: f64,
    client_cpu_pct: f64,
    client_lag_ms: f64,
    answered: u64,
    p99_ms: Option<f64>,
}

/// `rows` as CSV at `path`, one line each; nothing for no rows.
fn write_csv<T: Serialize>(path: &Path, rows: &[T]) -> Result<(), String> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut csv = csv::Writer::from_path(path).map_err(|e| e.to_string())?;
    for row in rows {
        csv.serialize(row).map_err(|e| e.to_string())?;
    }
    csv.flush().map_err(|e| e.to_string())
}
