//! `bench`: runs the matrix variants × workloads × keep-alive × concurrency, one cell at a
//! time, server and client pinned to separate CPUs, and prints who was the bottleneck.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bench::client::{self, Amount, Client, Load};
use bench::report::{self, Cell, Run};
use bench::server;
use bench::{idle, procfs};
use clap::Parser;
use common::cli::{allowed_cpus, CpuList};
use indicatif::{ProgressBar, ProgressStyle};
use variants::launch;
use variants::{Variant, Workload, VARIANTS, WORKLOADS};

/// Points ab/wrk at every archzoo architecture, fairly, and says who was the bottleneck.
#[derive(Parser, Debug)]
#[command(name = "bench", version, about)]
struct Args {
    /// Variants to run (comma-separated); default: every one.
    #[arg(long)]
    variants: Option<String>,
    /// Workloads to run: plaintext, json, sum, db, sleep.
    #[arg(long, default_value = "plaintext")]
    workloads: String,
    /// Handler stacks to run: raw, framework or both.
    #[arg(long, default_value = "raw")]
    stack: String,
    /// The servers' /db database (built on first use).
    #[arg(long, default_value = "data/archzoo.db")]
    db: PathBuf,
    /// Keep-alive modes to run: on, off or both.
    #[arg(long, default_value = "on,off")]
    keepalive: String,
    /// Client connections (comma-separated list).
    #[arg(
        short = 'c',
        long = "concurrency",
        default_value = "64",
        value_delimiter = ','
    )]
    concurrency: Vec<u32>,
    /// Load generator.
    #[arg(long, value_enum, default_value = "ab")]
    client: Client,
    /// Pipeline this many requests per connection (wrk only; bench/pipeline.lua).
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=1024))]
    pipeline: Option<u32>,
    /// CPUs for the server (default: all but the last this process may use).
    #[arg(long)]
    server_cpus: Option<CpuList>,
    /// CPUs for the client (default: the last).
    #[arg(long)]
    client_cpus: Option<CpuList>,
    /// Server workers (default: the number of server CPUs).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    workers: Option<u32>,
    /// Measured repetitions per cell (the median is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    reps: u32,
    /// Seconds per repetition.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=3600))]
    duration: u64,
    /// Requests per repetition instead of a duration (ab only).
    #[arg(short = 'n', long)]
    requests: Option<u64>,
    /// One short repetition per cell, no warm-up: a smoke test.
    #[arg(long)]
    quick: bool,
    /// Measure a server started elsewhere (http://HOST:PORT/) instead of launching one.
    #[arg(long)]
    url: Option<String>,
    /// Also count server system calls per request with `perf stat`.
    #[arg(long)]
    syscalls: bool,
    /// Where results/<timestamp>/ goes.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Directory of the server binaries (default: next to this binary).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Instead of the load matrix: hold this many idle keep-alive connections on each
    /// variant, check every one is still answered, and report memory per connection.
    #[arg(long)]
    idle_conns: Option<usize>,
    /// Instead of the load matrix: an attack on each variant (slowloris: slowhttptest -H)
    /// while a probe checks that normal clients are still served.
    #[arg(long, value_parser = ["slowloris"])]
    attack: Option<String>,
    /// Slow connections for --attack.
    #[arg(long, default_value_t = 256)]
    attack_conns: usize,
}

/// Everything fixed for the whole matrix.
struct Plan {
    server_cpus: Vec<usize>,
    client_cpus: Vec<usize>,
    workers: usize,
    warmup: Option<Duration>,
    reps: u32,
    amount: Amount,
    bin_dir: PathBuf,
    script: PathBuf,
    syscalls: bool,
}

fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("bench: error: {message}");
    std::process::exit(2)
}

fn main() {
    let args: Args = common::cli::parse();
    launch::install_interrupt_handler();
    let allowed = allowed_cpus();
    let server_cpus = args.server_cpus.clone().map_or_else(
        || allowed[..allowed.len().saturating_sub(1).max(1)].to_vec(),
        |l| l.0,
    );
    let client_cpus = args
        .client_cpus
        .clone()
        .map_or_else(|| vec![*allowed.last().unwrap_or(&0)], |l| l.0);
    for cpu in server_cpus.iter().chain(&client_cpus) {
        if !allowed.contains(cpu) {
            fail(format!(
                "CPU {cpu} is not available (allowed: {})",
                CpuList(allowed.clone())
            ));
        }
    }
    let variants: Vec<Variant> = match (&args.url, &args.variants) {
        (Some(_), _) => Vec::new(),
        (None, Some(list)) => {
            variants::select(list, VARIANTS, |v| v.name, "variant").unwrap_or_else(|e| fail(e))
        }
        (None, None) => VARIANTS
            .iter()
            .copied()
            .filter(|v| v.bench_default)
            .collect(),
    };
    let workloads = variants::select(&args.workloads, WORKLOADS, |w| w.name, "workload")
        .unwrap_or_else(|e| fail(e));
    let stacks: Vec<&'static str> = args
        .stack
        .split(',')
        .map(|m| match m.trim() {
            "raw" => "raw",
            "framework" => "framework",
            other => fail(format!("--stack takes raw and/or framework, not '{other}'")),
        })
        .collect();
    let keepalive: Vec<bool> = args
        .keepalive
        .split(',')
        .map(|m| match m.trim() {
            "on" => true,
            "off" => false,
            other => fail(format!("--keepalive takes on and/or off, not '{other}'")),
        })
        .collect();
    if args.syscalls && which("perf").is_none() {
        fail("--syscalls needs perf (Debian: apt-get install linux-perf)");
    }
    for tool in [match args.client {
        Client::Ab => "ab",
        Client::Wrk => "wrk",
    }] {
        if which(tool).is_none() {
            fail(format!(
                "{tool} is not installed (scripts/bench installs apache2-utils and wrk)"
            ));
        }
    }
    let duration = Duration::from_secs(if args.quick { 1 } else { args.duration });
    let plan = Plan {
        workers: args.workers.map_or(server_cpus.len(), |w| w as usize),
        server_cpus,
        client_cpus,
        warmup: (!args.quick).then(|| Duration::from_secs(1)),
        reps: if args.quick { 1 } else { args.reps },
        amount: args
            .requests
            .map_or(Amount::Duration(duration), Amount::Requests),
        bin_dir: args.bin_dir.clone().unwrap_or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf))
                .unwrap_or_else(|| PathBuf::from("target/release"))
        }),
        script: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/pipeline.lua")),
        syscalls: args.syscalls,
    };
    eprintln!(
        "bench: server on CPUs {} ({} workers), client {} on CPUs {}; {} × {} per cell{}",
        CpuList(plan.server_cpus.clone()),
        plan.workers,
        args.client.command(),
        CpuList(plan.client_cpus.clone()),
        plan.reps,
        match plan.amount {
            Amount::Duration(d) => format!("{}s", d.as_secs()),
            Amount::Requests(n) => format!("{n} requests"),
        },
        plan.warmup
            .map_or(String::new(), |w| format!(", {}s warm-up", w.as_secs())),
    );

    if args.attack.is_some() {
        if which("slowhttptest").is_none() {
            fail("--attack needs slowhttptest (scripts/bench installs it)");
        }
        let seconds = if args.quick { 6 } else { 15 };
        println!(
            "{}",
            bench::attack::slowloris(
                &plan.bin_dir,
                &variants,
                plan.workers,
                &plan.server_cpus,
                &plan.client_cpus,
                &args.db,
                args.attack_conns,
                seconds,
            )
        );
        return;
    }
    if let Some(n) = args.idle_conns {
        common::cli::raise_fd_limit();
        println!(
            "{}",
            idle::run(&plan.bin_dir, &variants, n, &plan.server_cpus, &args.db)
        );
        return;
    }

    // The matrix, one cell per combination.
    let mut jobs: Vec<(Option<Variant>, &str, Workload, bool, u32)> = Vec::new();
    let targets: Vec<Option<Variant>> = if args.url.is_some() {
        vec![None]
    } else {
        variants.into_iter().map(Some).collect()
    };
    for target in &targets {
        for &stack in &stacks {
            for workload in &workloads {
                for &ka in &keepalive {
                    for &c in &args.concurrency {
                        jobs.push((*target, stack, *workload, ka, c));
                    }
                }
            }
        }
    }
    let bar = ProgressBar::new(jobs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} cells · {msg} · ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut cells = Vec::new();
    for (target, stack, workload, ka, c) in jobs {
        let name = target.map_or("external", |v| v.name);
        bar.set_message(format!(
            "{name} {stack} {} ka={} c={c}",
            workload.name,
            if ka { "on" } else { "off" }
        ));
        let cell = run_cell(&plan, &args, target.as_ref(), stack, &workload, ka, c);
        if let Some(why) = &cell.failure {
            bar.println(format!("{name} {}: FAILED: {why}", workload.name));
        }
        cells.push(cell);
        bar.inc(1);
    }
    bar.finish_and_clear();

    println!("{}", report::markdown(&cells));
    let dir = args.out.join(timestamp());
    let meta = serde_json::json!({
        "machine": procfs::machine(),
        "started_by": std::env::args().collect::<Vec<_>>().join(" "),
        "server_cpus": plan.server_cpus,
        "client_cpus": plan.client_cpus,
        "workers": plan.workers,
        "versions": {
            "archzoo": env!("CARGO_PKG_VERSION"),
            "ab": version_line(&["ab", "-V"]),
            "wrk": version_line(&["wrk", "-v"]),
        },
    });
    match report::write_files(&dir, &cells, meta) {
        Ok(()) => eprintln!("bench: results in {}", dir.display()),
        Err(e) => fail(e),
    }
}

/// Runs one cell: start, validate, warm up, measure `reps` times, stop.
fn run_cell(
    plan: &Plan,
    args: &Args,
    variant: Option<&Variant>,
    stack: &str,
    workload: &Workload,
    keep_alive: bool,
    connections: u32,
) -> Cell {
    let mut cell = Cell {
        variant: variant.map_or("external".into(), |v| v.name.to_string()),
        model: variant.map_or(String::new(), |v| v.model.to_string()),
        stack: stack.to_string(),
        workers: plan.workers,
        server_cpus: plan.server_cpus.clone(),
        client_cpus: plan.client_cpus.clone(),
        workload: workload.name.to_string(),
        keep_alive,
        connections,
        client: args.client,
        pipeline: args.pipeline,
        runs: Vec::new(),
        failure: None,
        peak_rss_kib: None,
        worker_requests: Vec::new(),
        notes: Vec::new(),
    };
    if let Some(v) = variant {
        if v.one_conn_per_worker && keep_alive && (plan.workers as u32) < connections {
            cell.notes.push(format!(
                "one connection per worker: only {} of {connections} keep-alive connections are served at a time, the rest wait in the accept queue",
                plan.workers
            ));
        }
    }
    let mut server = None;
    let base = match (variant, &args.url) {
        (Some(v), _) => match server::start(
            &plan.bin_dir,
            v,
            plan.workers,
            &plan.server_cpus,
            &[
                "--stack".into(),
                stack.to_string(),
                "--db".into(),
                args.db.display().to_string(),
            ],
        ) {
            Ok(s) => {
                let addr = s.addr;
                server = Some(s);
                format!("http://{addr}")
            }
            Err(e) => {
                cell.failure = Some(e);
                return cell;
            }
        },
        (None, Some(url)) => url.trim_end_matches('/').to_string(),
        (None, None) => unreachable!("a cell has a variant or a URL"),
    };
    let url = format!("{base}{}", workload.path);
    if let Some(s) = &server {
        if let Err(e) = server::validate(s.addr, workload) {
            cell.failure = Some(format!("invalid response: {e}"));
            return cell;
        }
    }
    let pids = server.as_ref().map(|s| procfs::tree(s.pid()));
    let load = |amount| Load {
        client: args.client,
        url: &url,
        connections,
        keep_alive,
        amount,
        pipeline: args.pipeline,
        script: &plan.script,
    };
    if let Some(w) = plan.warmup {
        let _ = measure(plan, &load(Amount::Duration(w)), None);
    }
    for _ in 0..plan.reps {
        match measure(plan, &load(plan.amount), pids.as_deref()) {
            Ok(run) => cell.runs.push(run),
            Err(e) => {
                cell.failure = Some(e);
                break;
            }
        }
        if let Some(s) = server.as_mut() {
            if !s.alive() {
                cell.failure = Some("the server died during the run".into());
                break;
            }
        }
    }
    if let Some(s) = server {
        let pids = procfs::tree(s.pid());
        cell.peak_rss_kib = Some(procfs::peak_rss_kib(&pids));
        cell.worker_requests = s
            .stop(server::STOP_GRACE)
            .iter()
            .filter_map(|l| l["requests"].as_u64())
            .collect();
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
    cell
}

/// One client run with the server's (and the client's) CPU accounted around it.
fn measure(plan: &Plan, load: &Load, server_pids: Option<&[i32]>) -> Result<Run, String> {
    let argv = client::command(load)?;
    let limit = match load.amount {
        Amount::Duration(d) => d + Duration::from_secs(20),
        Amount::Requests(_) => Duration::from_secs(600),
    };
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let before = server_pids.map(procfs::usage);
    let perf = match (plan.syscalls, server_pids) {
        (true, Some(pids)) => start_perf(pids),
        _ => None,
    };
    let started = Instant::now();
    let mut child = launch::spawn_pinned(cmd, &plan.client_cpus)
        .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut out) = stdout {
            let _ = std::io::Read::read_to_string(&mut out, &mut text);
        }
        text
    });
    let (code, client_cpu) = launch::wait_pinned(&mut child, limit);
    let wall = started.elapsed().as_secs_f64();
    let after = server_pids.map(procfs::usage);
    let (syscalls, submissions) = perf.map_or((None, None), stop_perf);
    let text = reader.join().unwrap_or_default();
    let outcome = match load.client {
        Client::Ab => client::parse_ab(&text),
        Client::Wrk => client::parse_wrk(&text),
    }
    .map_err(|e| match code {
        None => format!("{} overran its time limit and was killed", argv[0]),
        Some(c) => format!("{} exited with {c}: {e}", argv[0]),
    })?;
    let spent = before.zip(after).map(|(b, a)| a.since(&b));
    let per_req = |x: f64| (outcome.requests > 0).then(|| x / outcome.requests as f64);
    let server_cpu_pct =
        spent.map(|s| 100.0 * s.cpu_secs / wall / plan.server_cpus.len().max(1) as f64);
    let client_cpu_pct = 100.0 * client_cpu / wall;
    Ok(Run {
        server_cpu_us_per_req: spent.and_then(|s| per_req(s.cpu_secs * 1e6)),
        voluntary_switches_per_req: spent.and_then(|s| per_req(s.voluntary_switches as f64)),
        involuntary_switches_per_req: spent.and_then(|s| per_req(s.involuntary_switches as f64)),
        syscalls_per_req: syscalls.and_then(|n| per_req(n as f64)),
        uring_submissions_per_req: submissions.and_then(|n| per_req(n as f64)),
        verdict: report::verdict(server_cpu_pct, client_cpu_pct),
        server_cpu_pct,
        client_cpu_pct,
        wall_secs: wall,
        command: argv.join(" "),
        outcome,
    })
}

/// The io_uring tracepoint, when this kernel and perf have it: io_uring servers submit
/// work without a system call per operation, so their syscall count alone flatters them.
const URING_SUBMIT: &str = "io_uring:io_uring_submit_req";

/// Whether `perf stat` can count [`URING_SUBMIT`] here (an unknown event fails the
/// whole `perf stat`, so it is probed once rather than risked on every run).
fn uring_event_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        Command::new("perf")
            .args(["stat", "-x,", "-e", URING_SUBMIT, "--", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// `perf stat` counting the server's system calls (and io_uring submissions, where
/// countable) until it is interrupted.
fn start_perf(pids: &[i32]) -> Option<std::process::Child> {
    let list: Vec<String> = pids.iter().map(i32::to_string).collect();
    let mut events = String::from("raw_syscalls:sys_enter");
    if uring_event_available() {
        events.push(',');
        events.push_str(URING_SUBMIT);
    }
    Command::new("perf")
        .args(["stat", "-x,", "-e", &events, "-p", &list.join(",")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ok()
}

/// System calls and io_uring submissions counted (each `None` if not counted).
fn stop_perf(perf: std::process::Child) -> (Option<u64>, Option<u64>) {
    // SAFETY: signals our own child.
    unsafe { libc::kill(perf.id() as i32, libc::SIGINT) };
    let Ok(out) = perf.wait_with_output() else {
        return (None, None);
    };
    let text = String::from_utf8_lossy(&out.stderr);
    let count = |event: &str| {
        text.lines()
            .find(|l| l.contains(event))
            .and_then(|l| l.split(',').next()?.trim().parse().ok())
    };
    (count("raw_syscalls:sys_enter"), count(URING_SUBMIT))
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
}

fn version_line(argv: &[&str]) -> String {
    Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .map(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned()
                + &String::from_utf8_lossy(&o.stderr);
            text.lines().next().unwrap_or("").trim().to_string()
        })
        .unwrap_or_default()
}

/// UTC `YYYYMMDD-HHMMSS`, for the results directory.
fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
