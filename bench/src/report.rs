//! Turning runs into verdicts, the matrix table (markdown for stdout; `page` renders the
//! same table as HTML) and the results files.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::client::{Client, Outcome};

/// CPU use (percent of the CPUs a side was given) at which that side is the bottleneck.
pub const BOUND_PCT: f64 = 90.0;

/// Share of an offered rate below which an open-loop cell did not keep up.
pub const SHORTFALL: f64 = 0.95;

/// Who limited a run — the lesson of the `ab -c 1000` post.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    #[serde(default)]
    pub syscalls_by_name: Vec<(String, f64)>,
    pub verdict: Verdict,
    pub command: String,
}

/// One cell of the matrix, with every repetition. Read back from results.json by
/// `bench --report`: fields added since a run was recorded are absent there, so every
/// list defaults to empty (an absent `Option` is `None`).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// The server's command line, as started (a model's binary and flags, a peer's
    /// command with its placeholders filled in); `None` for `--url`.
    pub server_command: Option<String>,
    pub peak_rss_kib: Option<u64>,
    /// Requests per worker from the server's `--stats` (warm-up included).
    #[serde(default)]
    pub worker_requests: Vec<u64>,
    /// CPU seconds of a peer's `workers` busiest workers over the measured repetitions,
    /// busiest first, from /proc (`variants::peers::Workers` says which processes): how
    /// evenly the work spread over a server that keeps no counts (a model's
    /// `worker_requests` say it exactly).
    #[serde(default)]
    pub worker_cpu_secs: Vec<f64>,
    /// `--syscalls`: one extra repetition under `perf stat`, apart from the measured ones —
    /// the hundreds of `syscalls:sys_enter_*` tracepoints it counts cost every context
    /// switch of the server, and slowed the measured figures (reactor-workers ×3 µs/req).
    /// The system-call columns come from it.
    pub counted: Option<Run>,
    /// `--profile`: the samples of one extra repetition and what they say.
    pub profile: Option<crate::profile::Profile>,
    #[serde(default)]
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
        min_max(self.runs.iter().map(|r| r.outcome.rps)).unwrap_or((f64::INFINITY, 0.0))
    }

    /// True when `other` ran the same cell of the matrix for another server: the same
    /// workload, keep-alive, concurrency, client, pipelining, rate, workers and stack —
    /// the cells a chart draws side by side and a differential flame graph compares.
    pub fn beside(&self, other: &Cell) -> bool {
        (self.stack.as_str(), self.workers, self.group())
            == (other.stack.as_str(), other.workers, other.group())
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

/// The smallest and the largest of `values` (none for no values).
pub fn min_max(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |range, v| match range {
        None => Some((v, v)),
        Some((lo, hi)) => Some((f64::min(lo, v), f64::max(hi, v))),
    })
}

/// The distinct values of `key` over `cells`, in the order they first appear: the
/// servers or workloads of a run as it ran them.
pub fn first_seen(cells: &[Cell], key: fn(&Cell) -> &str) -> Vec<&str> {
    let mut seen: Vec<&str> = Vec::new();
    for cell in cells {
        let k = key(cell);
        if !seen.contains(&k) {
            seen.push(k);
        }
    }
    seen
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
    pub rows: Vec<Row<'a>>,
    /// One markdown paragraph per line: the verdicts, the columns, the workloads.
    pub legend: Vec<String>,
}

/// The columns every row fills, failed or not (variant … c).
pub const HEAD_COLUMNS: usize = 7;

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
        column("req/s (min–max)", true),
        column("× fastest", true),
        column("CPU µs/req", true),
    ];
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
        let head = vec![
            Entry::text(&cell.variant),
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
            Entry::figure(run.server_cpu_us_per_req, 2),
        ];
        if database {
            figures.push(Entry::figure(run.db_cpu_us_per_req, 2));
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
    Table {
        columns,
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
    let pad = " |".repeat(table.columns.len() - HEAD_COLUMNS);
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
    for before in cells.iter().filter(|c| &c.variant == a) {
        let Some(after) = cells.iter().find(|c| &c.variant == b && before.beside(c)) else {
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

/// Writes results.json, results.csv, the SVG charts and report.html into `dir`.
pub fn write_files(dir: &Path, results: &crate::page::Results) -> Result<(), String> {
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
    write_csv(&dir.join("idle.csv"), &results.idle)?;
    write_csv(&dir.join("attack.csv"), &results.attack)?;
    crate::page::write(dir, results)?;
    Ok(())
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

/// The profiled cells, each with the label the profile table gives it.
pub fn profiled(cells: &[Cell]) -> Vec<(String, &crate::profile::Profile)> {
    cells
        .iter()
        .filter_map(|c| {
            let p = c.profile.as_ref()?;
            Some((
                format!(
                    "{} {} ka={} c={}",
                    c.variant,
                    c.workload,
                    c.keep_alive_label(),
                    c.connections_label()
                ),
                p,
            ))
        })
        .collect()
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
            server_command: None,
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
