//! One cell of the matrix, in named steps ([`run_cell`]): the cell as planned, start the
//! server, check its answer, warm up, measure each repetition with the server's CPU time
//! counted around the client, then the instrumented repetitions — `--syscalls` under
//! `perf stat`, `--profile` under `perf record` — each its own, so that no observer slows a
//! measured one; stop it and read its `--stats`. Also what is fixed for a whole run (the
//! [`Plan`]) and what one cell runs besides the server ([`CellSpec`]).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use variants::launch::{self, Server};
use variants::peers::{Peer, Workers};
use variants::{Variant, Workload};

use super::cap::CpuCap;
use super::client::tsung::{Fleet, Reach};
use super::client::{self, Amount, Load};
use super::hosts::{self, CpuWatch, Host, Wire};
use super::{perf, procfs, profile, server};
use crate::model::cell::{self, Cell, CpuSets, Link, Run};
use crate::model::client::Client;
use crate::model::profile::Profile;

/// Everything fixed for the whole matrix.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The load generator, and requests per write when pipelining (wrk).
    pub client: Client,
    pub pipeline: Option<u32>,
    /// The `/db` file every server is started with.
    pub db: PathBuf,
    /// The `/pg` database (`--pg`, or the cluster `bench` started), for the pg workloads.
    pub pg: Option<String>,
    /// The postmaster of the cluster `bench` started: its backends' CPU per request is
    /// measured beside the server's in the pg workloads.
    pub db_pid: Option<i32>,
    /// A server already running elsewhere (`--url`), instead of the variants.
    pub url: Option<String>,
    pub server_cpus: Vec<usize>,
    pub client_cpus: Vec<usize>,
    pub workers: usize,
    pub warmup: Option<Duration>,
    pub reps: u32,
    /// `--fresh-server`: start each cell's server anew for every measured repetition
    /// (warmed up each time), instead of once for all of them.
    pub fresh_server: bool,
    /// `--baseline`: the server the by-round CPU column divides by.
    pub baseline: Option<String>,
    pub amount: Amount,
    pub bin_dir: PathBuf,
    pub script: PathBuf,
    pub syscalls: bool,
    /// `--profile`: one extra repetition per cell under `perf record`.
    pub profile: bool,
    /// A distributed client's hosts (`--client tsung --client-hosts`).
    pub fleet: Option<Fleet>,
    /// The test host the servers run in, when the clients are test hosts.
    pub server_host: Option<Host>,
    /// `--link veth` for a one-process client: the test hosts its cells run across.
    pub wire: Option<Wire>,
    /// A share of one CPU for the server (and the database): a post's capped VM.
    pub cap: Option<std::sync::Arc<CpuCap>>,
    /// `--work-us`: µs of CPU each model spends in its handler a request (0: none).
    pub work_us: u32,
}

impl Plan {
    /// The µs of handler work `target` runs with: the plan's for a model; a peer runs as it
    /// is (it has no such handler).
    pub fn work_us_of(&self, target: &Target) -> u32 {
        match target {
            Target::Model(_) => self.work_us,
            _ => 0,
        }
    }

    /// Where the server of a cell over `link` runs: a test host, this machine on a real
    /// network's address, or (`None`) this machine's loopback.
    pub fn server_host(&self, link: Link) -> Option<&Host> {
        match (link, &self.wire) {
            (Link::Veth, Some(wire)) => Some(&wire.server),
            (Link::Loopback, _) => None,
            _ => self.server_host.as_ref(),
        }
    }

    /// The test host a one-process client runs in over `link` (`None`: here).
    pub fn client_host(&self, link: Link) -> Option<&Host> {
        match (link, &self.wire) {
            (Link::Veth, Some(wire)) => Some(&wire.client),
            _ => None,
        }
    }
}

/// What a cell measures.
#[derive(Debug, Clone)]
pub enum Target {
    /// An archzoo variant.
    Model(Variant),
    /// A real third-party server (`--peers`, `--peer`).
    Peer(Peer),
    /// A server already running elsewhere (`--url`).
    Url(String),
}

impl Target {
    pub fn name(&self) -> &str {
        match self {
            Target::Model(v) => v.name,
            Target::Peer(p) => &p.name,
            Target::Url(_) => "external",
        }
    }

    /// What the target is, for a table's model column: a variant's model, a peer's
    /// description (already "real: …", so no caller adds the prefix again), nothing for a
    /// `--url` server this harness knows nothing of.
    pub fn model(&self) -> String {
        match self {
            Target::Model(v) => v.model.to_string(),
            Target::Peer(p) => p.what.clone(),
            Target::Url(_) => String::new(),
        }
    }

    /// Whether the harness starts this target's server (not a `--url` one).
    fn started(&self) -> bool {
        !matches!(self, Target::Url(_))
    }
}

/// What one cell runs, besides the server: the handler stack, the workload, keep-alive,
/// client connections, the server's workers (the plan's, or a signature's own) and, for
/// the open loop, the offered rate.
#[derive(Debug, Clone, Copy)]
pub struct CellSpec<'a> {
    pub stack: &'a str,
    pub workload: Workload,
    pub keep_alive: bool,
    pub connections: u32,
    pub workers: usize,
    pub rate: Option<u32>,
    /// What the client's packets cross (`--link`).
    pub link: Link,
}

/// Runs one cell, step by step: the cell as planned, start its server, check its answer,
/// warm up, the measured repetitions, the instrumented ones, stop. With `--fresh-server`
/// those steps run once per measured repetition, the instrumented ones after the last.
/// A step that fails says why in the cell, and the cell ends there. (The matrix runs a
/// `--fresh-server` cell's starts in rounds with the other cells' instead: [`begin`],
/// [`one_start`], [`finish`].)
pub fn run_cell(plan: &Plan, target: &Target, spec: &CellSpec) -> Cell {
    let mut cell = begin(plan, target, spec);
    if cell.failure.is_none() {
        if cell.fresh_server {
            for start in 1..=plan.reps {
                if !one_start(plan, target, spec, &mut cell, start == plan.reps) {
                    break;
                }
            }
        } else {
            one_start(plan, target, spec, &mut cell, true);
        }
    }
    finish(&mut cell);
    cell
}

/// The cell as planned, before anything runs; its failure already says `n/a …` when the
/// target cannot run the workload at all.
pub fn begin(plan: &Plan, target: &Target, spec: &CellSpec) -> Cell {
    let mut cell = planned(plan, target, spec);
    cell.failure = not_applicable(plan, target, spec);
    cell
}

/// One start of the cell's server: start, check its answer, warm up, the measured
/// repetitions — one with `--fresh-server`, else all of the plan's — then, when `last`,
/// the instrumented ones; stop. False when a step failed (the cell says why): no later
/// start should follow.
pub fn one_start(
    plan: &Plan,
    target: &Target,
    spec: &CellSpec,
    cell: &mut Cell,
    last: bool,
) -> bool {
    let reps = if cell.fresh_server { 1 } else { plan.reps };
    let mut run = match Started::start(plan, target, spec) {
        Ok(run) => run,
        Err(e) => {
            cell.failure = Some(e);
            return false;
        }
    };
    cell.server_command = run.server.as_ref().map(|s| s.command.clone());
    if let Err(e) = run.validate(cell, matches!(target, Target::Model(_))) {
        cell.failure = Some(e);
        return false;
    }
    run.warm_up();
    run.repetitions(cell, reps);
    if last {
        run.instrumented(cell);
    }
    run.stop(cell);
    cell.failure.is_none()
}

/// What a cell notes once all of its repetitions ran: errors, and CPU stolen from it.
pub fn finish(cell: &mut Cell) {
    note_errors(cell);
    note_steal(cell);
}

/// Runs open-loop probes on one server, started and warmed up once: each probe a cell of
/// its own at the rate `next` asks for, given the probes so far (`None`: done), one run of
/// `amount_at(rate)`, the server settled between probes — a probe that overloaded it
/// leaves a queue the next must not inherit. A server that died is started again for the
/// next probe; one that cannot start, or answers wrongly, ends the probes with that cell.
///
/// One server for them all, as a load test steps one server through its rates: a fresh
/// server a probe cost a start and a warm-up each, a third of a post replay's capacity
/// searches (239 probes in `--post all`).
pub fn run_probes(
    plan: &Plan,
    target: &Target,
    spec: &CellSpec,
    amount_at: impl Fn(u32) -> Amount,
    mut next: impl FnMut(&[Cell]) -> Option<u32>,
) -> Vec<Cell> {
    let mut cells: Vec<Cell> = Vec::new();
    let mut up: Option<Started> = None;
    while let Some(rate) = next(&cells) {
        let probe = CellSpec {
            rate: Some(rate),
            ..*spec
        };
        let mut cell = planned(plan, target, &probe);
        if let Some(why) = not_applicable(plan, target, &probe) {
            cell.failure = Some(why);
            cells.push(cell);
            break;
        }
        let run = match up.take() {
            Some(run) => run,
            None => match Started::start(plan, target, spec) {
                Ok(run) => {
                    if let Err(e) = run.validate(&mut cell, matches!(target, Target::Model(_))) {
                        cell.failure = Some(e);
                        cells.push(cell);
                        break;
                    }
                    if let Some(w) = plan.warmup {
                        let _ = measure(
                            plan,
                            &run.load_at(Amount::Duration(w), probe.rate),
                            None,
                            false,
                            None,
                        );
                        run.settle();
                    }
                    run
                }
                Err(e) => {
                    cell.failure = Some(e);
                    cells.push(cell);
                    break;
                }
            },
        };
        let mut run = run;
        cell.server_command = run.server.as_ref().map(|s| s.command.clone());
        match measure(
            plan,
            &run.load_at(amount_at(rate), probe.rate),
            run.pids().as_deref(),
            false,
            run.db,
        ) {
            Ok(measured) => cell.runs.push(measured),
            Err(e) => cell.failure = Some(e),
        }
        run.settle();
        let alive = run.server.as_mut().is_none_or(Server::alive);
        if alive {
            up = Some(run);
        } else if cell.failure.is_none() {
            cell.failure = Some("the server died during the run".into());
        }
        note_errors(&mut cell);
        note_steal(&mut cell);
        cells.push(cell);
    }
    if let Some(server) = up.and_then(|run| run.server) {
        server.stop(server::STOP_GRACE);
    }
    cells
}

/// The cell before anything ran: what it is, and what its model predicts of it.
fn planned(plan: &Plan, target: &Target, spec: &CellSpec) -> Cell {
    let CellSpec {
        stack,
        workload,
        keep_alive,
        connections,
        workers,
        rate,
        link,
    } = *spec;
    let mut cell = Cell {
        variant: target.name().to_string(),
        model: target.model(),
        stack: stack.to_string(),
        workers,
        server_cpus: plan.server_cpus.clone(),
        client_cpus: plan.client_cpus.clone(),
        workload: workload.name.to_string(),
        keep_alive,
        connections,
        client: plan.client,
        pipeline: plan.pipeline,
        rate,
        link,
        post: None,
        db_apart: false,
        work_us: plan.work_us_of(target),
        fresh_server: plan.fresh_server && target.started(),
        baseline: plan.baseline.as_deref() == Some(target.name()),
        runs: Vec::new(),
        failure: None,
        server_command: None,
        peak_rss_kib: None,
        worker_requests: Vec::new(),
        worker_cpu_secs: Vec::new(),
        counted: None,
        profile: None,
        notes: Vec::new(),
    };
    if let Some(cap) = &plan.cap {
        cell.notes.push(format!(
            "capped at {} % of one CPU (a cgroup's CPU quota), the server and its database together; its CPU % is of that share",
            cap.pct
        ));
    }
    if let Target::Model(v) = target {
        if v.one_conn_per_worker && keep_alive && (workers as u32) < connections {
            let turns = if v.holds_keep_alive {
                "each behind the one a worker holds, for up to 100 requests or 5 idle seconds (as Apache prefork)"
            } else {
                "and while they do every response says `Connection: close` (keep-alive only while nobody waits)"
            };
            cell.notes.push(format!(
                "one connection per worker: only {workers} of {connections} keep-alive connections are served at a time, the rest wait in the accept queue, {turns}"
            ));
        }
    }
    cell
}

/// Why `target` cannot run `workload` at all (`n/a …`), if it cannot.
fn not_applicable(plan: &Plan, target: &Target, spec: &CellSpec) -> Option<String> {
    let workload = &spec.workload;
    let on_test_host = plan
        .server_host(spec.link)
        .is_some_and(|h| h.netns.is_some());
    if on_test_host && workload.needs_database() {
        return Some(
            "n/a (the database listens on this machine's loopback, which a test host cannot reach)"
                .into(),
        );
    }
    let Target::Peer(peer) = target else {
        return None;
    };
    if peer.builtin && workload.needs_database() {
        return Some("n/a (the built-in peers have no /pg route)".into());
    }
    peer.unsupported(workload.name)
        .map(|why| format!("n/a ({why})"))
}

/// Starts `target`'s server for a cell of `spec`: a model with the cell's stack, its
/// databases and the plan's `--work-us`; a peer as its command says; `None` for `--url`,
/// which is not ours to start.
pub fn start_server(
    plan: &Plan,
    target: &Target,
    spec: &CellSpec,
) -> Result<Option<Server>, String> {
    let workload = &spec.workload;
    Ok(match target {
        Target::Peer(peer) => Some(server::start_peer(
            peer,
            spec.workers,
            &plan.server_cpus,
            &plan.db,
            plan.pg.as_deref(),
            plan.server_host(spec.link),
        )?),
        Target::Model(v) => {
            let mut args = vec![
                "--stack".to_string(),
                spec.stack.to_string(),
                "--db".into(),
                plan.db.display().to_string(),
            ];
            if let Some(url) = plan.pg.as_ref().filter(|_| workload.needs_database()) {
                args.extend(["--pg".to_string(), url.clone()]);
            }
            if plan.work_us > 0 {
                args.extend(["--work-us".to_string(), plan.work_us.to_string()]);
            }
            Some(server::start_on(
                &plan.bin_dir,
                v,
                spec.workers,
                &plan.server_cpus,
                &args,
                plan.server_host(spec.link),
            )?)
        }
        Target::Url(_) => None,
    })
}

/// A cell whose server is up (or at a `--url`): what every later step needs.
struct Started<'a> {
    plan: &'a Plan,
    spec: &'a CellSpec<'a>,
    /// None for `--url`: a server that is not ours to start, stop or measure.
    server: Option<Server>,
    /// The workload's address on the server.
    url: String,
    /// The database's postmaster, for the pg workloads.
    db: Option<i32>,
    /// How a peer's workers are told apart, for its balance (a model counts its requests).
    workers_are: Option<Workers>,
    /// Each worker's CPU before the measured repetitions (a peer's).
    cpu_before: Option<Vec<(i32, f64)>>,
}

impl<'a> Started<'a> {
    /// Starts the target's server with the cell's flags (a model with its stack and
    /// databases, a peer as its command says); nothing to start for `--url`.
    fn start(plan: &'a Plan, target: &Target, spec: &'a CellSpec<'a>) -> Result<Self, String> {
        let workload = &spec.workload;
        let server = start_server(plan, target, spec)?;
        if let (Some(cap), Some(s)) = (&plan.cap, &server) {
            cap.add(s.pid())?;
        }
        let base = match (&server, target) {
            (Some(s), _) => format!("http://{}", s.addr),
            (None, Target::Url(url)) => url.trim_end_matches('/').to_string(),
            (None, _) => unreachable!("a started server or a URL"),
        };
        Ok(Started {
            plan,
            spec,
            server,
            url: format!("{base}{}", workload.path),
            db: plan.db_pid.filter(|_| workload.needs_database()),
            workers_are: match target {
                Target::Peer(p) => Some(p.workers_are),
                _ => None,
            },
            cpu_before: None,
        })
    }

    /// Checks the server's answer to the workload. Models must answer exactly as archzoo
    /// does (`strict`); a peer must answer the body right, and the headers it lacks are
    /// noted.
    fn validate(&self, cell: &mut Cell, strict: bool) -> Result<(), String> {
        if let Some(s) = &self.server {
            let notes = server::validate(s.addr, &self.spec.workload, strict)
                .map_err(|e| format!("invalid response: {e}"))?;
            cell.notes.extend(notes);
        }
        Ok(())
    }

    /// One client invocation of this cell.
    fn load(&self, amount: Amount) -> Load<'_> {
        self.load_at(amount, self.spec.rate)
    }

    /// One client invocation at `rate` (open loop) or as fast as it goes (`None`).
    fn load_at(&self, amount: Amount, rate: Option<u32>) -> Load<'_> {
        Load {
            client: self.plan.client,
            url: &self.url,
            connections: self.spec.connections,
            keep_alive: self.spec.keep_alive,
            amount,
            pipeline: self.plan.pipeline,
            script: &self.plan.script,
            rate,
            fleet: self.plan.fleet.as_ref(),
            from: self.plan.client_host(self.spec.link),
            threads: self.plan.client_cpus.len(),
        }
    }

    /// The server's processes and threads now (it may have forked since the start).
    fn pids(&self) -> Option<Vec<i32>> {
        self.server.as_ref().map(|s| procfs::tree(s.pid()))
    }

    fn settle(&self) {
        settle(self.server.as_ref().map(|s| s.addr));
    }

    /// The plan's warm-up, unmeasured.
    fn warm_up(&self) {
        if let Some(w) = self.plan.warmup {
            let _ = measure(
                self.plan,
                &self.load(Amount::Duration(w)),
                None,
                false,
                None,
            );
            self.settle();
        }
    }

    fn worker_cpu(&self, pids: &[i32]) -> Option<Vec<(i32, f64)>> {
        self.workers_are
            .and_then(|w| procfs::worker_cpu(pids, w).ok())
    }

    /// `reps` measured repetitions, each with the server's CPU counted around the client;
    /// a failed one, or a server that died, ends them.
    fn repetitions(&mut self, cell: &mut Cell, reps: u32) {
        let pids = self.pids();
        self.cpu_before = pids.as_deref().and_then(|p| self.worker_cpu(p));
        for _ in 0..reps {
            match measure(
                self.plan,
                &self.load(self.plan.amount),
                pids.as_deref(),
                false,
                self.db,
            ) {
                Ok(run) => cell.runs.push(run),
                Err(e) => {
                    cell.failure = Some(e);
                    break;
                }
            }
            self.settle();
            if let Some(s) = self.server.as_mut() {
                if !s.alive() {
                    cell.failure = Some("the server died during the run".into());
                    break;
                }
            }
        }
    }

    /// The observed repetitions after the measured ones, each its own so that no
    /// observer slows a measured one: `--syscalls` under `perf stat`, `--profile` under
    /// `perf record`.
    fn instrumented(&self, cell: &mut Cell) {
        let Some(pids) = self.pids().filter(|_| cell.failure.is_none()) else {
            return;
        };
        if self.plan.syscalls {
            // Counting by name enables a tracepoint per system call on every thread of the
            // server, which costs each of its context switches: a repetition of its own, so
            // the measured ones run unobserved.
            match measure(
                self.plan,
                &self.load(self.plan.amount),
                Some(&pids),
                true,
                None,
            ) {
                Ok(run) => cell.counted = Some(run),
                Err(e) => cell.notes.push(format!("no system call count: {e}")),
            }
        }
        if self.plan.profile {
            // After the measured repetitions, so that sampling cannot change them.
            let pids = self.pids().unwrap_or(pids);
            match profiled(self.plan, &self.load(self.plan.amount), &pids, cell) {
                Ok(profile) => cell.profile = Some(profile),
                Err(e) => cell.notes.push(format!("no profile: {e}")),
            }
        }
    }

    /// Stops the server and reads what it leaves: its workers' CPU since the first
    /// repetition (a peer's balance), its peak memory, and its `--stats` (each worker's
    /// requests). Over several starts (`--fresh-server`) the cell holds the starts' sums
    /// worker by worker (busiest first, as each start ranks them) and the highest peak.
    fn stop(self, cell: &mut Cell) {
        let Some(s) = &self.server else { return };
        let pids = procfs::tree(s.pid());
        if let (Some(before), Some(after)) = (&self.cpu_before, self.worker_cpu(&pids)) {
            let busiest = procfs::busiest(before, &after, self.spec.workers);
            add_each(&mut cell.worker_cpu_secs, &busiest);
        }
        let peak = procfs::peak_rss_kib(&pids);
        cell.peak_rss_kib = Some(cell.peak_rss_kib.map_or(peak, |p| p.max(peak)));
        let Some(s) = self.server else { return };
        let requests: Vec<u64> = s
            .stop(server::STOP_GRACE)
            .iter()
            .filter_map(|l| l["requests"].as_u64())
            .collect();
        add_each(&mut cell.worker_requests, &requests);
    }
}

/// Adds `more` to `sums` element by element; an empty `sums` (the first start) takes it
/// as it is, and a start with another count of workers replaces it (the last one stands).
fn add_each<T: Copy + std::ops::AddAssign>(sums: &mut Vec<T>, more: &[T]) {
    if sums.len() == more.len() {
        for (sum, m) in sums.iter_mut().zip(more) {
            *sum += *m;
        }
    } else {
        *sums = more.to_vec();
    }
}

/// A note when the hypervisor took [`cell::STEAL_DISTURBS_PCT`] or more of the server's
/// CPUs' time during a repetition: the figures stand, but they measured the host too.
fn note_steal(cell: &mut Cell) {
    let most = cell
        .runs
        .iter()
        .filter_map(|r| r.server_steal_pct)
        .fold(0.0, f64::max);
    if most >= cell::STEAL_DISTURBS_PCT {
        cell.notes.push(format!(
            "the host took up to {most:.0} % of the server's CPUs' time during a repetition (steal): its CPU per request and its latency measured the host too"
        ));
    }
}

/// A note of the first repetition with errors: the figures stand, but say they include them.
fn note_errors(cell: &mut Cell) {
    // A client host whose node stopped mid-run: once per host, from the first run it
    // happened in.
    let mut stopped: Vec<String> = Vec::new();
    for run in &cell.runs {
        for h in &run.outcome.hosts {
            if let Some(at) = h.stopped_at_s.filter(|_| !stopped.contains(&h.host)) {
                stopped.push(h.host.clone());
                cell.notes.push(format!(
                    "client host {}: its Tsung node stopped {at:.1} s into a repetition while the others ran on; its share ends there",
                    h.host
                ));
            }
        }
    }
    for run in &cell.runs {
        let o = &run.outcome;
        if o.failed + o.non_2xx + o.timeouts > 0 {
            cell.notes.push(format!(
                "{} failed, {} non-2xx, {} timeouts in one repetition",
                o.failed, o.non_2xx, o.timeouts
            ));
            break;
        }
    }
}

/// One more repetition of `cell` with the server's CPUs sampled (`--profile`): its
/// samples folded, its speed beside the measured median, its files named after the cell.
fn profiled(plan: &Plan, load: &Load, pids: &[i32], cell: &Cell) -> Result<Profile, String> {
    let recording = profile::Recording::start(&plan.server_cpus)?;
    let run = measure(plan, load, Some(pids), false, None);
    let script = recording.stop(pids)?;
    let run = run?;
    let folded = profile::fold(&script)?;
    if folded.is_empty() {
        return Err("perf recorded no sample of the server's processes".into());
    }
    let mut profile = profile::profile(folded, run.outcome.requests);
    profile.speed_vs_median = cell
        .median()
        .filter(|m| m.outcome.rps > 0.0)
        .map(|m| run.outcome.rps / m.outcome.rps);
    let key = cell.key();
    profile.flamegraph = format!("flame/{key}.svg");
    profile.folded_file = format!("flame/{key}.folded");
    Ok(profile)
}

/// Waits until the server has worked through what the last client left behind. A client
/// stopped by the clock abandons its requests in flight, but a server that takes its
/// connections one at a time (a blocking worker, an event loop blocked on the database)
/// still answers every one of them, in order, before anything new: measured at
/// `pg-slow`, the next repetition of `prefork-blocking` ran at 15 req/s instead of its 45
/// because it spent two of its three seconds on the 99 requests the previous `ab -c 100`
/// had left. One request on a new connection, answered only after those, marks the end.
fn settle(addr: Option<std::net::SocketAddr>) {
    use std::io::{Read, Write};
    let Some(addr) = addr else { return };
    let limit = Duration::from_secs(120);
    let Ok(mut probe) = std::net::TcpStream::connect_timeout(&addr, limit) else {
        return;
    };
    let _ = probe.set_read_timeout(Some(limit));
    if probe
        .write_all(b"GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        .is_ok()
    {
        let _ = probe.read_to_end(&mut Vec::new());
    }
}

/// One client run with the server's (and the client's) CPU accounted around it, the
/// database's when `db` names its postmaster, and the server's system calls when
/// `syscalls` (`perf stat`).
fn measure(
    plan: &Plan,
    load: &Load,
    server_pids: Option<&[i32]>,
    syscalls: bool,
    db: Option<i32>,
) -> Result<Run, String> {
    let argv = client::command(load)?;
    let limit = match load.amount {
        Amount::Duration(d) => d + Duration::from_secs(20),
        Amount::Requests(_) => Duration::from_secs(600),
    };
    // In its test host over veth, here otherwise.
    let mut cmd = match load.from {
        Some(host) => host.command(&argv.iter().map(String::as_str).collect::<Vec<_>>()),
        None => {
            let mut cmd = Command::new(&argv[0]);
            cmd.args(&argv[1..]);
            cmd
        }
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let before = server_pids.map(procfs::usage);
    let sets_before = procfs::cpu_times([&plan.server_cpus, &plan.client_cpus]);
    let db_before = db.map(|pid| procfs::cpu_by_pid(&procfs::tree(pid)));
    let perf = match (syscalls, server_pids) {
        (true, Some(pids)) => perf::start(pids),
        _ => None,
    };
    // A distributed client's nodes run apart from the process started here: each test
    // host's CPU is read from /proc while it runs.
    let watch = load.fleet.and_then(|f| match &f.reach {
        Reach::TestHosts { namespaces, .. } => Some(CpuWatch::start(namespaces.clone())),
        Reach::Ssh => None,
    });
    let started = Instant::now();
    let mut child = launch::spawn_pinned(cmd, &plan.client_cpus)
        .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
    let reader = launch::read_stdout(&mut child);
    let (code, client_cpu) = launch::wait_pinned(&mut child, limit);
    let wall = started.elapsed().as_secs_f64();
    let after = server_pids.map(procfs::usage);
    let sets_after = procfs::cpu_times([&plan.server_cpus, &plan.client_cpus]);
    let [server_set, client_set] = [0, 1].map(|i| sets_after[i].since(&sets_before[i]));
    let db_spent = db_before
        .zip(db)
        .map(|(before, pid)| procfs::cpu_spent(&before, &procfs::cpu_by_pid(&procfs::tree(pid))));
    let counts = perf.map(perf::stop).unwrap_or_default();
    let hosts_cpu = watch.map(CpuWatch::stop);
    let text = reader.join().unwrap_or_default();
    let mut outcome = client::parse(load.client, &text).map_err(|e| match code {
        None => format!("{} overran its time limit and was killed", argv[0]),
        Some(c) => format!("{} exited with {c}: {e}", argv[0]),
    })?;
    let spent = before.zip(after).map(|(b, a)| a.since(&b));
    let per_req = |x: f64| (outcome.requests > 0).then(|| x / outcome.requests as f64);
    // The time the load ran: the client's wall time, except for a distributed client,
    // whose start (a node per host) and end take seconds in which nothing is sent — its
    // span is that of its request logs.
    let busy = match load.fleet {
        Some(_) if outcome.rps > 0.0 => outcome.requests as f64 / outcome.rps,
        _ => wall,
    };
    // Under a cap, of what the cap allows, which the database in it shares: a server and
    // its database held to 40 % of a CPU are saturated at 40 % between them.
    let server_cpu_pct = spent.map(|s| match &plan.cap {
        Some(cap) => 100.0 * (s.cpu_secs + db_spent.unwrap_or(0.0)) / busy / cap.share(),
        None => 100.0 * s.cpu_secs / busy / plan.server_cpus.len().max(1) as f64,
    });
    let mut client_cpu_pct = 100.0 * client_cpu / busy;
    if let Some(fleet) = load.fleet {
        // Each host by the name the run gives it, with its node's CPU. The client's figure
        // for the verdict is the fleet's, not the controller's (it starts and stops the
        // nodes but sends nothing): test hosts share the client CPUs, so their nodes'
        // CPU together over those CPUs; real hosts each have their own, so the busiest
        // one (one saturated host caps the fleet) — but their CPU cannot be read from
        // here, so for them it stays the controller's, the one figure there is.
        let shared = match &fleet.reach {
            Reach::TestHosts { cpus, .. } => Some(cpus.len().max(1) as f64),
            Reach::Ssh => None,
        };
        let mut total = 0.0;
        let mut busiest: f64 = 0.0;
        let stopped = hosts_cpu
            .as_deref()
            .map_or_else(Vec::new, |w| hosts::ended_early(w, 2.0));
        for share in &mut outcome.hosts {
            let Some(i) = fleet.hosts.iter().position(|h| h.tsung_host == share.host) else {
                continue;
            };
            share.host = fleet.hosts[i].name.clone();
            share.cpu_pct = hosts_cpu
                .as_ref()
                .and_then(|c| c.get(i))
                .map(|w| 100.0 * w.cpu_secs / busy);
            share.stopped_at_s = stopped
                .iter()
                .find(|(host, _)| *host == i)
                .map(|(_, at)| *at);
            total += share.cpu_pct.unwrap_or(0.0);
            busiest = busiest.max(share.cpu_pct.unwrap_or(0.0));
        }
        match shared {
            Some(cpus) => client_cpu_pct = total / cpus,
            None if hosts_cpu.is_some() => client_cpu_pct = busiest,
            None => {}
        }
    }
    Ok(Run {
        server_cpu_us_per_req: spent.and_then(|s| per_req(s.cpu_secs * 1e6)),
        db_cpu_us_per_req: db_spent.and_then(|s| per_req(s * 1e6)),
        voluntary_switches_per_req: spent.and_then(|s| per_req(s.voluntary_switches as f64)),
        involuntary_switches_per_req: spent.and_then(|s| per_req(s.involuntary_switches as f64)),
        syscalls_per_req: counts.syscalls.and_then(|n| per_req(n as f64)),
        uring_submissions_per_req: counts.submissions.and_then(|n| per_req(n as f64)),
        syscalls_by_name: counts
            .by_name
            .iter()
            .filter_map(|(name, n)| Some((name.clone(), per_req(*n as f64)?)))
            .collect(),
        verdict: cell::verdict(server_cpu_pct, client_cpu_pct),
        server_cpu_pct,
        client_cpu_pct,
        wall_secs: wall,
        command: argv.join(" "),
        cpu_sets: per_req(1.0).map(|each| CpuSets {
            server_busy_us: server_set.busy_secs * 1e6 * each,
            server_softirq_us: server_set.softirq_secs * 1e6 * each,
            client_busy_us: client_set.busy_secs * 1e6 * each,
            client_softirq_us: client_set.softirq_secs * 1e6 * each,
        }),
        server_steal_pct: (wall > 0.0)
            .then(|| 100.0 * server_set.steal_secs / wall / plan.server_cpus.len().max(1) as f64),
        outcome,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The soak table once read "real: real: nginx …": the peer's description carries
    /// the prefix, so every table's model column takes it from one place.
    #[test]
    fn a_peer_reads_real_once_and_a_model_its_model() {
        let nginx = Target::Peer(Peer::builtin("nginx").unwrap());
        let model = nginx.model();
        assert!(model.starts_with("real: nginx"), "{model}");
        assert_eq!(model.matches("real:").count(), 1, "{model}");
        let v = variants::VARIANTS[0];
        assert_eq!(Target::Model(v).model(), v.model);
        assert_eq!(Target::Url("http://127.0.0.1:1/".into()).model(), "");
    }
}
