//! `bench`: runs the matrix variants × workloads × keep-alive × concurrency, one cell at a
//! time, server and client pinned to separate CPUs, and prints who was the bottleneck.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bench::measure::cell::{CellSpec, Plan, Target};
use bench::measure::client::tsung::{Fleet, FleetHost, Reach};
use bench::measure::client::{self as clients, Amount};
use bench::measure::hosts::{Host, Hosts, Wire};
use bench::measure::procfs;
use bench::model::cell::{Cell, Link};
use bench::model::client::Client;
use bench::model::{fidelity, Results};
use bench::modes::{self, matrix};
use bench::write;
use clap::Parser;
use common::cli::{allowed_cpus, CpuList};
use variants::launch;
use variants::peers::{self, Peer};
use variants::{Variant, VARIANTS, WORKLOADS};

/// Points ab/wrk at every archzoo architecture, fairly, and says who was the bottleneck.
#[derive(Parser, Debug)]
#[command(name = "bench", version, about)]
struct Args {
    /// Variants to run (comma-separated); default: every one (with --peers: the variants
    /// those peers stand beside; with only --peer: none).
    #[arg(long)]
    variants: Option<String>,
    /// Built-in peers — real third-party servers — to run beside the models
    /// (comma-separated): nginx, php-fpm, go-nethttp, node-cluster, gevent, uwsgi, tornado.
    /// scripts/bench installs them.
    #[arg(long)]
    peers: Option<String>,
    /// Any other server as a peer: NAME=COMMAND, with {port} (and optionally {workers},
    /// {db}, {pg}: the pg workloads' database URL) in the command; repeatable. NAME@MODEL=…
    /// stands it beside a model in --fidelity. E.g. 'swoole@coroutine-reuseport=php server.php {port} {workers}'.
    #[arg(long = "peer", value_name = "NAME=COMMAND")]
    peer: Vec<String>,
    /// Each model beside the real systems it stands for (the --peers and --peer NAME@MODEL
    /// given, else every built-in peer installed here): /sleep and keep-alive-vs-close signatures, and the
    /// CPU cost of the original over the model; prints the fidelity table after the matrix.
    #[arg(long)]
    fidelity: bool,
    /// With --fidelity: each model again with the original's extra hello-world CPU per
    /// request as handler work (--work-us), every signature rerun, the residual, and the
    /// capacity of both at p99 ≤ 10 ms (or --slo).
    #[arg(long)]
    calibrate: bool,
    /// Workloads to run: plaintext, json, sum, db, pg, pg-slow, sleep.
    #[arg(long, default_value = "plaintext")]
    workloads: String,
    /// The PostgreSQL database of the pg workloads (a URL). Default: a throwaway cluster
    /// started with scripts/pg for the run, and stopped after it.
    #[arg(long, value_name = "URL")]
    pg: Option<String>,
    /// CPUs for the database of the pg workloads (the cluster bench starts). Default: the
    /// server's, as on the post's one-CPU machine, where waiting overlaps nothing because
    /// the database needs the same CPU; give it CPUs of its own to see the other case.
    #[arg(long)]
    db_cpus: Option<CpuList>,
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
    /// Load generator (--rate and --slo use oha, or tsung when it is asked for).
    #[arg(long, value_enum, default_value = "ab")]
    client: Client,
    /// With --client tsung: N client hosts made here as network namespaces on a private
    /// /24 (10.77.203.0/24), the servers in a host of their own; removed when bench exits.
    /// Or real machines by name (a,b,c), reached over ssh, with --server-addr.
    #[arg(long, value_name = "N|HOSTS")]
    client_hosts: Option<String>,
    /// What the client's packets cross: loopback, veth, or both (the same cell over each,
    /// back to back, and a table of the two side by side). veth: the client (ab, wrk, oha)
    /// in one test host and the server in another (network namespaces on 10.77.203.0/24,
    /// each host's receive path on its own CPUs, as a NIC would put it). Default: loopback;
    /// Tsung's test hosts are veth.
    #[arg(long, value_enum, value_delimiter = ',')]
    link: Vec<Link>,
    /// With real client hosts (--client-hosts a,b,c): this machine's address they reach;
    /// the servers listen on it.
    #[arg(long, value_name = "IPV4")]
    server_addr: Option<std::net::Ipv4Addr>,
    /// Open loop: offer these requests per second (comma-separated), every cell at each,
    /// with oha; latency is measured from when each request was due. With --soak, one
    /// rate, or a share of each server's capacity at --slo (default p99 ≤ 10 ms): 80%.
    #[arg(long, value_delimiter = ',')]
    rate: Vec<modes::soak::Rate>,
    /// Capacity at a latency target, e.g. `p99=5ms`: per variant, the highest offered rate
    /// (oha, open loop) whose corrected percentile stays within it, found by doubling the
    /// rate and then bisecting.
    #[arg(long, value_name = "pNN=TIME")]
    slo: Option<bench::model::slo::Target>,
    /// Pipeline this many requests per connection (wrk only; bench/pipeline.lua).
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=1024))]
    pipeline: Option<u32>,
    /// CPUs for the server (default: all but the last this process may use).
    #[arg(long)]
    server_cpus: Option<CpuList>,
    /// CPUs for the client (default: the last).
    #[arg(long)]
    client_cpus: Option<CpuList>,
    /// µs of CPU every request costs in each model's handler (the servers' --work-us): an
    /// original's per-request cost given to the models. Peers are run as they are.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    work_us: u32,
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
    /// Also count server system calls per request with `perf stat`, in all and by name.
    #[arg(long)]
    syscalls: bool,
    /// Start each cell's server anew (and warm it up) for every measured repetition: the
    /// median is then over starts of the server, not over runs of one start — for figures
    /// a start can sway, such as CPU per connection without keep-alive. The starts go in
    /// rounds (every cell's first, then every cell's second…), so a machine that drifts
    /// during the run sways every cell alike.
    #[arg(long)]
    fresh_server: bool,
    /// With --fresh-server: the row the by-round CPU column divides by (a variant or peer
    /// of this run, e.g. nginx), instead of each group's cheapest row.
    #[arg(long, value_name = "NAME")]
    baseline: Option<String>,
    /// Where the CPU goes: one extra repetition per cell under `perf record` (cpu-clock,
    /// kernel and user stacks), drawn as a flame graph per cell (results/…/flame/) and
    /// sorted into kernel, codec, runtime, allocator and libc.
    #[arg(long)]
    profile: bool,
    /// With --profile: a differential flame graph from variant A to variant B for every
    /// cell they share (red: where B spends more per request).
    #[arg(long, value_name = "A,B", requires = "profile")]
    diff: Option<String>,
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
    /// Instead of the load matrix: an attack on each variant (slowloris: slowhttptest -H,
    /// heads that never end; slowbody: slowhttptest -B, POST bodies that never end) while a
    /// probe checks that normal clients are still served.
    #[arg(long, value_enum)]
    attack: Option<bench::model::attack::Attack>,
    /// Slow connections for --attack.
    #[arg(long, default_value_t = 256)]
    attack_conns: usize,
    /// Instead of the matrix: replay a published comparison — its client command, workload
    /// and worker counts on the models (and the real servers installed here), the run it
    /// did not make, and a verdict for every conclusion it printed. NAME (or several,
    /// comma-separated), `all`, or `list`.
    #[arg(long, value_name = "NAME")]
    post: Option<String>,
    /// Instead of the matrix: each server under one steady open-loop load (--rate) for
    /// DURATION (90s, 10m), sampled every second — memory, descriptors, CPU, each
    /// second's answers and p99 — with the verdicts of a soak test.
    #[arg(long, value_name = "DURATION")]
    soak: Option<String>,
    /// With --soak: faults injected while it runs, e.g.
    /// `kill-worker@30s,stop-worker@60s:2s,restart-db@90s,close-conns@120s`.
    #[arg(long, value_name = "PLAN", requires = "soak")]
    chaos: Option<String>,
    /// Instead of a run: render DIR/report.html and its charts again from
    /// DIR/results.json (an earlier run gets the current page).
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
}

fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("bench: error: {message}");
    std::process::exit(2)
}

/// The flag that makes this run something other than a matrix of servers the harness
/// starts itself, if one was given.
fn not_a_matrix(args: &Args) -> Option<&'static str> {
    [
        (args.url.is_some(), "--url"),
        (args.slo.is_some(), "--slo"),
        (args.soak.is_some(), "--soak"),
        (args.idle_conns.is_some(), "--idle-conns"),
        (args.attack.is_some(), "--attack"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}

fn main() {
    let args: Args = common::cli::parse();
    if let Some(dir) = &args.report {
        let results = Results::load(dir).unwrap_or_else(|e| fail(e));
        match write::page::write(dir, &results) {
            Ok(page) => eprintln!("bench: {}", page.display()),
            Err(e) => fail(e),
        }
        return;
    }
    let posts = posts(&args);
    if args.soak.is_some() {
        for (given, what) in [
            (args.post.is_some(), "--post"),
            (args.idle_conns.is_some(), "--idle-conns"),
            (args.attack.is_some(), "--attack"),
            (args.fidelity, "--fidelity"),
            (
                args.url.is_some(),
                "--url (a soak samples the server it starts)",
            ),
            (args.profile, "--profile"),
            (args.syscalls, "--syscalls"),
            (
                args.client == Client::Tsung,
                "--client tsung (a soak runs oha)",
            ),
        ] {
            if given {
                fail(format!(
                    "--soak holds one steady load on each server: not with {what}"
                ));
            }
        }
    }
    if args.calibrate {
        if !args.fidelity {
            fail("--calibrate calibrates the models of a --fidelity run: give --fidelity too");
        }
        if args.work_us > 0 {
            fail(
                "--calibrate gives each model its original's cost as --work-us: not with --work-us",
            );
        }
        if !clients::tool(Client::Oha).installed() {
            fail("--calibrate finds each server's capacity with oha, which is not installed (scripts/bench --calibrate installs it)");
        }
    } else if args.fidelity && args.slo.is_some() {
        fail(
            "--slo with --fidelity is the target of --calibrate's capacities: give --calibrate too",
        );
    }
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
    let mut peers: Vec<Peer> = Vec::new();
    for name in args.peers.iter().flat_map(|l| l.split(',')).map(str::trim) {
        if !name.is_empty() {
            peers.push(Peer::builtin(name).unwrap_or_else(|e| fail(e)));
        }
    }
    if args.fidelity && args.peers.is_none() && args.peer.is_empty() {
        // Every built-in peer that can start here; the others are named, not hidden.
        for b in peers::BUILTIN {
            match peers::missing(b.name) {
                None => peers.push(Peer::builtin(b.name).unwrap_or_else(|e| fail(e))),
                Some(why) => eprintln!(
                    "bench: --fidelity without {}: {why} (scripts/bench --peers {0} installs it)",
                    b.name
                ),
            }
        }
        if peers.is_empty() {
            fail("--fidelity: no built-in peer is installed (scripts/bench --fidelity --peers nginx,... installs them)");
        }
    }
    for arg in &args.peer {
        let peer = Peer::parse(arg).unwrap_or_else(|e| fail(e));
        if peers.iter().any(|p| p.name == peer.name) || VARIANTS.iter().any(|v| v.name == peer.name)
        {
            fail(format!("--peer: the name '{}' is already taken", peer.name));
        }
        peers.push(peer);
    }
    let variants: Vec<Variant> = match (&args.url, &args.variants) {
        (Some(_), _) => Vec::new(),
        (None, Some(list)) => {
            variants::select(list, VARIANTS, |v| v.name, "variant").unwrap_or_else(|e| fail(e))
        }
        // Peers alone: the models the built-in ones stand beside, in table order.
        (None, None) if !peers.is_empty() => VARIANTS
            .iter()
            .copied()
            .filter(|v| {
                peers.iter().any(|p| {
                    peers::beside(v.name).contains(&p.name.as_str())
                        || p.beside.as_deref() == Some(v.name)
                })
            })
            .collect(),
        (None, None) => VARIANTS
            .iter()
            .copied()
            .filter(|v| v.bench_default)
            .collect(),
    };
    if let Err(e) = modes::post::check_brought(&posts, &peers) {
        fail(e);
    }
    if args.url.is_some() && !peers.is_empty() {
        fail("--url measures one server started elsewhere; it does not take --peers or --peer");
    }
    let mut workloads = variants::select(&args.workloads, WORKLOADS, |w| w.name, "workload")
        .unwrap_or_else(|e| fail(e));
    if !posts.is_empty() {
        // The posts' own workloads (a database for the one that queried one).
        workloads = WORKLOADS
            .iter()
            .copied()
            .filter(|w| posts.iter().any(|p| p.workload == w.name))
            .collect();
    }
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
    if args.syscalls && clients::on_path("perf").is_none() {
        fail("--syscalls needs perf (Debian: apt-get install linux-perf)");
    }
    // Both act on the servers a matrix run starts and measures, so neither goes with a mode
    // that measures otherwise (or a server someone else started).
    for (given, what) in [
        (
            args.fresh_server,
            "--fresh-server restarts the matrix's own servers between repetitions",
        ),
        (args.profile, "--profile samples the matrix's own servers"),
    ] {
        if let Some(other) = given.then(|| not_a_matrix(&args)).flatten() {
            fail(format!("{what}: not with {other}"));
        }
    }
    if args.profile {
        if let Err(why) = bench::measure::profile::check(server_cpus[0]) {
            fail(why);
        }
    }
    // A server named by --diff or --baseline must be one this run measures.
    let measured = |name: &str| {
        variants.iter().any(|v| v.name == name) || peers.iter().any(|p| p.name == name)
    };
    let diff: Option<(String, String)> = args.diff.as_deref().map(|pair| {
        let Some((a, b)) = pair.split_once(',').map(|(a, b)| (a.trim(), b.trim())) else {
            fail(format!("--diff takes two variants, A,B, not '{pair}'"));
        };
        for name in [a, b] {
            if !measured(name) {
                fail(format!(
                    "--diff: '{name}' is not among the servers this run measures"
                ));
            }
        }
        (a.to_string(), b.to_string())
    });
    if args.baseline.is_some() && !args.fresh_server {
        fail("--baseline names the row the by-round CPU column divides by: it needs the rounds of --fresh-server");
    }
    if let Some(name) = args.baseline.as_deref().filter(|n| !measured(n)) {
        fail(format!(
            "--baseline: '{name}' is not among the servers this run measures"
        ));
    }
    // --slo with --fidelity --calibrate is the capacities' target, not an open-loop run.
    let open_loop = !args.rate.is_empty() || (args.slo.is_some() && !args.fidelity);
    let client = if open_loop && args.client == Client::Tsung {
        Client::Tsung
    } else if open_loop {
        if args.client != Client::Ab && args.client != Client::Oha {
            fail("--rate and --slo offer a fixed rate, which only oha does: drop --client");
        }
        Client::Oha
    } else {
        args.client
    };
    if client == Client::Oha && args.pipeline.is_some() {
        fail("--pipeline needs --client wrk (oha sends one request at a time)");
    }
    let links = links(&args, client);
    let tool = client.command();
    if !clients::tool(client).installed() {
        fail(format!(
            "{tool} is not installed (scripts/bench installs ab, wrk and tsung with apt-get, oha with cargo install)"
        ));
    }
    if let Some(list) = &args.db_cpus {
        if args.pg.is_some() {
            fail("--db-cpus places the cluster bench starts: not with --pg");
        }
        if let Some(bad) = list.0.iter().find(|c| !allowed.contains(c)) {
            fail(format!("--db-cpus: CPU {bad} is not available"));
        }
    }
    // The pg workloads' database: the one given, or a cluster for this run (stopped when
    // `cluster` drops at the end), pinned to --db-cpus.
    let (pg, cluster) = match &args.pg {
        _ if !workloads.iter().any(|w| w.needs_database()) => (None, None),
        Some(url) => (Some(url.clone()), None),
        None => {
            let db_cpus = args.db_cpus.as_ref().map_or(&server_cpus, |l| &l.0);
            let cluster = bench::measure::database::start(db_cpus).unwrap_or_else(|e| fail(e));
            eprintln!(
                "bench: PostgreSQL at {} on CPUs {}",
                cluster.url,
                CpuList(db_cpus.clone())
            );
            (Some(cluster.url.clone()), Some(cluster))
        }
    };
    let duration = Duration::from_secs(if args.quick { 1 } else { args.duration });
    // Tsung's client hosts: test hosts made now (removed when `hosts` drops or bench
    // exits), or real machines.
    let clients = client_hosts(&args, client, &server_cpus, &client_cpus);
    // --link veth for a one-process client: its two test hosts (removed when `wire_hosts`
    // drops or bench exits).
    let wire_hosts = (links.contains(&Link::Veth) && clients.fleet.is_none()).then(|| {
        let hosts = Hosts::create(1).unwrap_or_else(|e| fail(e));
        hosts
            .steer(&server_cpus, &client_cpus)
            .unwrap_or_else(|e| fail(e));
        eprintln!(
            "bench: over veth, the client in test host {} at {}, the servers in {} at {}",
            hosts.clients[0].name, hosts.clients[0].addr, hosts.server.name, hosts.server.addr
        );
        hosts
    });
    let plan = Plan {
        work_us: args.work_us,
        cap: None,
        wire: wire_hosts.as_ref().map(|h| Wire {
            server: h.server.clone(),
            client: h.clients[0].clone(),
        }),
        fleet: clients.fleet.clone(),
        server_host: clients.server.clone(),
        pg,
        db_pid: cluster.as_ref().and_then(|c| c.pid().ok()),
        client,
        pipeline: args.pipeline,
        db: args.db.clone(),
        url: args.url.clone(),
        workers: args.workers.map_or(server_cpus.len(), |w| w as usize),
        server_cpus,
        client_cpus,
        warmup: (!args.quick).then(|| Duration::from_secs(1)),
        reps: if args.quick { 1 } else { args.reps },
        fresh_server: args.fresh_server,
        baseline: args.baseline.clone(),
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
        profile: args.profile,
    };
    eprintln!(
        "bench: server on CPUs {} ({} workers), client {} on CPUs {}; {} × {} per cell{}{}",
        CpuList(plan.server_cpus.clone()),
        plan.workers,
        client.command(),
        CpuList(plan.client_cpus.clone()),
        plan.reps,
        match plan.amount {
            Amount::Duration(d) => format!("{}s", d.as_secs()),
            Amount::Requests(n) => format!("{n} requests"),
        },
        plan.warmup
            .map_or(String::new(), |w| format!(", {}s warm-up", w.as_secs())),
        if plan.fresh_server {
            ", the server started anew for each, in rounds across the cells"
        } else {
            ""
        },
    );

    if !posts.is_empty() {
        for (tool, what) in [
            (Client::Ab, "runs each post's own ab command"),
            (Client::Oha, "finds each server's capacity with oha"),
        ] {
            if !clients::tool(tool).installed() {
                fail(format!(
                    "--post {what}, and {} is not installed (scripts/bench --post installs it)",
                    tool.command()
                ));
            }
        }
        let replay = modes::post::Replay {
            quick: args.quick,
            link: links[0],
            brought: &peers,
            slo: capacity_at(&args),
        };
        let mut cells = Vec::new();
        for post in &posts {
            eprintln!(
                "bench: replaying {} (ab -n {} -c {}, {} repetitions a cell)",
                post.title,
                modes::post::requests(post, args.quick),
                post.ab.concurrency,
                modes::post::repetitions(post, plan.reps, args.quick)
            );
            cells.extend(modes::post::run(&plan, post, &replay));
        }
        let closed: Vec<Cell> = cells.iter().filter(|c| c.rate.is_none()).cloned().collect();
        println!("{}", write::table::markdown(&closed));
        print!("{}", write::post::sections(&cells, &replay.slo));
        let mut meta = meta(&args, &plan, &peers);
        meta["client"] = "ab, as the posts ran it; oha for the capacities".into();
        meta["posts"] = posts.iter().map(|p| p.name).collect::<Vec<_>>().into();
        write_results(
            &args.out.join(timestamp()),
            &Results {
                meta,
                cells,
                ..Results::default()
            },
        );
        return;
    }
    if let Some(attack) = args.attack {
        if clients::on_path("slowhttptest").is_none() {
            fail("--attack needs slowhttptest (scripts/bench installs it)");
        }
        let seconds = if args.quick { 6 } else { 15 };
        let rows = modes::attack::run(
            attack,
            &plan.bin_dir,
            &variants,
            plan.workers,
            &plan.server_cpus,
            &plan.client_cpus,
            &args.db,
            args.attack_conns,
            seconds,
        );
        println!("{}", write::attack::table(&rows));
        let mut meta = meta(&args, &plan, &peers);
        meta["client"] = format!(
            "slowhttptest {}, and a probe every 250 ms",
            attack.slowhttptest_args().join(" ")
        )
        .into();
        write_results(
            &args.out.join(timestamp()),
            &Results {
                meta,
                attack: rows,
                ..Results::default()
            },
        );
        return;
    }
    if let Some(n) = args.idle_conns {
        let holder = match (&plan.fleet, &plan.server_host) {
            (Some(fleet), Some(server_host)) => modes::idle::Holder::Fleet {
                fleet,
                server_host,
                client_cpus: &plan.client_cpus,
            },
            _ => modes::idle::Holder::Here,
        };
        let rows = modes::idle::run(&modes::idle::Setup {
            bin_dir: &plan.bin_dir,
            variants: &variants,
            peers: &peers,
            n,
            cpus: &plan.server_cpus,
            db: &args.db,
            holder,
        });
        println!("{}", write::idle::table(&rows));
        print!("{}", write::idle::hosts(&rows));
        let mut meta = meta(&args, &plan, &peers);
        if plan.fleet.is_some() {
            meta["client"] = format!(
                "tsung on {} test hosts, {} connections a second (users that wait for a release)",
                plan.fleet.as_ref().map_or(0, |f| f.hosts.len()),
                bench::measure::client::tsung::idle::ARRIVALS
            )
            .into();
        } else {
            meta["client"] =
                "bench itself, not pinned (connections from 127.0.0.x, in waves of 256)".into();
            meta["client_cpus"] = serde_json::Value::Null;
        }
        write_results(
            &args.out.join(timestamp()),
            &Results {
                meta,
                idle: rows,
                ..Results::default()
            },
        );
        return;
    }

    // The matrix, one cell per combination.
    let targets: Vec<Target> = match &args.url {
        Some(url) => vec![Target::Url(url.clone())],
        None => variants
            .iter()
            .copied()
            .map(Target::Model)
            .chain(peers.iter().cloned().map(Target::Peer))
            .collect(),
    };
    // The jobs of every axis at the given rates: one load each for a soak, the matrix's.
    let jobs_at = |rates: &[Option<u32>]| {
        matrix::jobs(
            &targets,
            plan.workers,
            &matrix::Axes {
                stacks: &stacks,
                workloads: &workloads,
                keep_alive: &keepalive,
                connections: &args.concurrency,
                rates,
                links: &links,
            },
        )
    };
    if let Some(duration) = &args.soak {
        soak(&args, &plan, &peers, &jobs_at(&[None]), duration);
        return;
    }
    if let Some(slo) = args.slo.as_ref().filter(|_| !args.fidelity) {
        // Instead of the matrix: each target's capacity at the latency target.
        let spec = CellSpec {
            stack: stacks[0],
            workload: workloads[0],
            keep_alive: keepalive[0],
            connections: args.concurrency[0],
            workers: plan.workers,
            rate: None,
            link: links[0],
        };
        let cells = modes::slo::run(&plan, &targets, &spec, slo);
        println!("{}", write::slo::table(&cells, slo));
        write_results(
            &args.out.join(timestamp()),
            &Results {
                meta: meta(&args, &plan, &peers),
                cells,
                ..Results::default()
            },
        );
        return;
    }
    // --fidelity measures its own cells: the signatures, at the first concurrency given.
    let jobs = if args.fidelity {
        modes::fidelity::jobs(&targets, &plan, stacks[0], args.concurrency[0], links[0])
    } else {
        let rates: Vec<Option<u32>> = if args.rate.is_empty() {
            vec![None]
        } else {
            args.rate
                .iter()
                .map(|r| match r {
                    modes::soak::Rate::Fixed(n) => Some(*n),
                    modes::soak::Rate::OfCapacity(_) => {
                        fail("--rate N% is a share of each server's capacity: a --soak's rate only")
                    }
                })
                .collect()
        };
        jobs_at(&rates)
    };
    let mut cells = matrix::run(&plan, jobs);
    let pairs = fidelity::pairs(
        &peers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        &beside(&peers),
    );
    // --calibrate: each pair's model again at the original's cost, and both's capacity.
    let capacity_target = capacity_at(&args);
    if args.calibrate {
        let originals: Vec<Target> = peers.iter().cloned().map(Target::Peer).collect();
        let how = modes::fidelity::Calibrate {
            stack: stacks[0],
            connections: args.concurrency[0],
            link: links[0],
            slo: &capacity_target,
            quick: args.quick,
        };
        let calibrated = modes::fidelity::calibrate(&plan, &pairs, &originals, &cells, &how);
        cells.extend(calibrated);
    }
    // The matrix's cells (a --rate run's open-loop ones too), not --calibrate's capacity
    // probes: those are the calibrated table's.
    let shown: Vec<_> = cells
        .iter()
        .filter(|c| !args.calibrate || c.rate.is_none())
        .cloned()
        .collect();
    println!("{}", write::table::markdown(&shown));
    print!("{}", write::link::table(&cells));
    let profiled = write::profile::profiled(&cells);
    print!("{}", write::profile::table(&profiled));
    if args.fidelity {
        let setup = write::fidelity::Setup {
            workers: plan.workers,
            server_cpus: plan.server_cpus.len(),
            connections: args.concurrency[0],
        };
        println!("{}", write::fidelity::table(&cells, &pairs, setup));
        if args.calibrate {
            let calibrated = write::fidelity::calibrated(&cells, &pairs, setup, &capacity_target);
            println!("{calibrated}");
        }
    }
    let dir = args.out.join(timestamp());
    // The flame graphs first, so that report.html links them; an error there is reported
    // after every figure is written.
    let profiles = args
        .profile
        .then(|| write::profile::write_profiles(&dir, &cells, diff.as_ref()));
    write_results(
        &dir,
        &Results {
            meta: meta(&args, &plan, &peers),
            cells,
            ..Results::default()
        },
    );
    match profiles {
        Some(Ok(written)) => {
            for file in written {
                eprintln!("bench: {}", dir.join(file).display());
            }
        }
        Some(Err(e)) => fail(e),
        None => {}
    }
}

/// The posts `--post` names (`all`: the five); `list` prints them and exits. A flag that
/// does not fit a replay is one line and exit 2: a post brings its own client, workload,
/// concurrency and workers.
fn posts(args: &Args) -> Vec<&'static bench::model::post::Post> {
    use bench::model::post::{self, POSTS};
    let Some(name) = args.post.as_deref() else {
        return Vec::new();
    };
    if name == "list" {
        print!("{}", write::post::list());
        std::process::exit(0);
    }
    let others = [
        (args.url.is_some(), "--url"),
        (args.idle_conns.is_some(), "--idle-conns"),
        (args.attack.is_some(), "--attack"),
        (!args.rate.is_empty(), "--rate"),
        (
            args.peers.is_some(),
            "--peers (a post runs the built-in peers its rows name, where installed)",
        ),
        (
            args.db_cpus.is_some(),
            "--db-cpus (a post on a database runs it on the server's CPU and on its own)",
        ),
        (args.fidelity, "--fidelity"),
        (args.client != Client::Ab, "--client"),
        (args.client_hosts.is_some(), "--client-hosts"),
        (args.pipeline.is_some(), "--pipeline"),
        (args.requests.is_some(), "-n"),
        (args.workers.is_some(), "--workers"),
        (args.variants.is_some(), "--variants"),
    ];
    if let Some((_, flag)) = others.iter().find(|(given, _)| *given) {
        fail(format!(
            "--post replays a post with its own client, workload and workers: not with {flag}"
        ));
    }
    if name == "all" {
        return POSTS.iter().collect();
    }
    name.split(',')
        .map(|n| post::named(n.trim()).unwrap_or_else(|e| fail(e)))
        .collect()
}

/// The links the matrix runs each cell over (`--link`): loopback unless asked; Tsung's
/// test hosts are veth and its real hosts a network, nothing else. A link that does not fit
/// the run is one line and exit 2.
fn links(args: &Args, client: Client) -> Vec<Link> {
    let mut links: Vec<Link> = Vec::new();
    for &l in &args.link {
        if !links.contains(&l) {
            links.push(l);
        }
    }
    let real_hosts = args
        .client_hosts
        .as_deref()
        .is_some_and(|h| h.parse::<usize>().is_err());
    if client == Client::Tsung {
        if links.iter().any(|&l| l != Link::Veth) || (real_hosts && !links.is_empty()) {
            fail("--client tsung runs from its client hosts: its link is theirs (--link loopback is for ab, wrk and oha)");
        }
        return vec![if real_hosts {
            Link::Network
        } else {
            Link::Veth
        }];
    }
    if links.is_empty() {
        return vec![Link::Loopback];
    }
    if links.contains(&Link::Veth) {
        if args.url.is_some() {
            fail("--link veth runs the servers in a test host: not with --url");
        }
        if args.idle_conns.is_some() || args.attack.is_some() {
            fail("--link is an axis of the matrix (and --slo, --fidelity): not with --idle-conns or --attack");
        }
    }
    if links.len() > 1 && (args.slo.is_some() || args.fidelity) {
        fail("--slo and --fidelity run over one link: give --link loopback or --link veth");
    }
    links
}

/// Tsung's client hosts (`--client tsung --client-hosts`): N test hosts made here (the
/// `Hosts`, the servers in one of them), or real machines named a,b,c reached over ssh (the
/// servers here, on `--server-addr`); none for the other clients. A flag that does not fit
/// is one line and exit 2.
fn client_hosts(
    args: &Args,
    client: Client,
    server_cpus: &[usize],
    client_cpus: &[usize],
) -> ClientHosts {
    let Some(list) = &args.client_hosts else {
        if client == Client::Tsung {
            fail("--client tsung needs --client-hosts N (N test hosts made here)");
        }
        if args.server_addr.is_some() {
            fail("--server-addr is for real client hosts (--client tsung --client-hosts a,b,c)");
        }
        return ClientHosts::default();
    };
    if client != Client::Tsung {
        fail("--client-hosts is for --client tsung");
    }
    if args.attack.is_some() || args.url.is_some() {
        fail("--client tsung drives the matrix, --rate, --slo and --idle-conns: not --attack or --url yet");
    }
    let Ok(n) = list.parse::<usize>() else {
        return real_hosts(args, list);
    };
    if args.server_addr.is_some() {
        fail("--server-addr is for real client hosts: test hosts have their own addresses");
    }
    let hosts = Hosts::create(n).unwrap_or_else(|e| fail(e));
    hosts
        .steer(server_cpus, client_cpus)
        .unwrap_or_else(|e| fail(e));
    for h in hosts.all() {
        eprintln!("bench: test host {} at {}", h.name, h.addr);
    }
    let fleet = Fleet {
        hosts: hosts
            .clients
            .iter()
            .map(|h| FleetHost {
                name: h.name.clone(),
                tsung_host: h.addr.to_string(),
            })
            .collect(),
        reach: Reach::TestHosts {
            controller: bench::measure::hosts::bridge_addr(),
            namespaces: hosts.clients.iter().map(|h| h.name.clone()).collect(),
            cpus: client_cpus.to_vec(),
        },
        dir: hosts.scratch.clone(),
    };
    ClientHosts {
        server: Some(hosts.server.clone()),
        _test_hosts: Some(hosts),
        fleet: Some(fleet),
        _scratch: None,
    }
}

/// What `--client-hosts` made: kept until bench ends (dropping `test_hosts` removes them,
/// dropping `scratch` its folder).
#[derive(Default)]
struct ClientHosts {
    _test_hosts: Option<Hosts>,
    _scratch: Option<Scratch>,
    fleet: Option<Fleet>,
    /// Where the servers run: a test host, or this machine on `--server-addr`.
    server: Option<Host>,
}

/// A folder removed when bench ends (the configurations Tsung is given for real hosts;
/// its logs are removed as soon as they are read).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Real client machines, `--client-hosts a,b,c`: reached by Tsung's own ssh connector (each
/// with Tsung installed and passwordless ssh from here: docs/bench.md); the servers listen
/// here on `--server-addr`.
fn real_hosts(args: &Args, list: &str) -> ClientHosts {
    let names: Vec<&str> = list.split(',').map(str::trim).collect();
    let valid = |n: &str| {
        !n.is_empty()
            && !n.starts_with('-')
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    };
    if let Some(bad) = names.iter().find(|n| !valid(n)) {
        fail(format!(
            "--client-hosts takes a number of test hosts or host names (a,b,c), not '{bad}'"
        ));
    }
    let Some(addr) = args.server_addr else {
        fail("--client-hosts a,b,c (real machines) needs --server-addr: this machine's address they reach, where the servers listen");
    };
    if args.idle_conns.is_some() {
        fail("--idle-conns across real hosts: not yet (the users' release is a file on this machine); use test hosts");
    }
    let fleet = Fleet {
        hosts: names
            .iter()
            .map(|n| FleetHost {
                name: n.to_string(),
                tsung_host: n.to_string(),
            })
            .collect(),
        reach: Reach::Ssh,
        dir: std::env::temp_dir().join(format!("archzoo-tsung-{}", std::process::id())),
    };
    eprintln!(
        "bench: client hosts {} over ssh, the servers here on {addr}",
        names.join(", ")
    );
    ClientHosts {
        _test_hosts: None,
        _scratch: Some(Scratch(fleet.dir.clone())),
        fleet: Some(fleet),
        server: Some(Host::here(addr)),
    }
}

/// results/<timestamp>/: every figure, the machine, the versions and the command lines,
/// and report.html.
fn write_results(dir: &Path, results: &Results) {
    match write::files::write_files(dir, results) {
        Ok(()) => eprintln!(
            "bench: results in {} (open {})",
            dir.display(),
            dir.join("report.html").display()
        ),
        Err(e) => fail(e),
    }
}

/// `--soak`: each job under one steady load, the tables printed and written.
fn soak(args: &Args, plan: &Plan, peers: &[Peer], jobs: &[(Target, CellSpec)], duration: &str) {
    use bench::model::soak as model;
    let duration = model::seconds(duration)
        .filter(|&s| s >= 1.0)
        .unwrap_or_else(|| {
            fail(format!(
                "--soak takes a duration such as 90s or 10m, not '{duration}'"
            ))
        });
    let [rate] = args.rate[..] else {
        fail("--soak needs one --rate: requests per second (5000) or a share of each server's capacity (80%)");
    };
    let faults = model::parse_plan(args.chaos.as_deref().unwrap_or("")).unwrap_or_else(|e| fail(e));
    if let Some(late) = faults.iter().find(|f| f.at_s >= duration) {
        fail(format!(
            "--chaos: {late} falls after the soak's {duration} s"
        ));
    }
    if !clients::tool(Client::Oha).installed() {
        fail("--soak runs oha, which is not installed (scripts/bench --soak installs it)");
    }
    let needs_db = jobs.iter().any(|(_, s)| s.workload.needs_database());
    if faults.iter().any(|f| f.kind == model::FaultKind::RestartDb) && !needs_db {
        fail("--chaos restart-db restarts the database of the pg workloads: give --workloads pg");
    }
    if faults.iter().any(|f| f.kind == model::FaultKind::RestartDb) && args.pg.is_some() {
        fail("--chaos restart-db restarts the cluster bench starts, not a --pg database of yours");
    }
    let setup = modes::soak::Setup {
        plan,
        duration: Duration::from_secs_f64(duration),
        rate,
        faults: &faults,
        slo: capacity_at(args),
        db_cpus: needs_db.then(|| {
            args.db_cpus
                .as_ref()
                .map_or_else(|| plan.server_cpus.clone(), |l| l.0.clone())
        }),
    };
    let rows = modes::soak::run(&setup, jobs);
    println!("{}", write::soak::table(&rows));
    print!("{}", write::soak::faults_table(&rows));
    let mut meta = meta(args, plan, peers);
    meta["client"] = "oha, open loop, every request recorded (--db-url)".into();
    meta["soak_s"] = duration.into();
    meta["chaos"] = args.chaos.clone().into();
    write_results(
        &args.out.join(timestamp()),
        &Results {
            meta,
            soak: rows,
            ..Results::default()
        },
    );
}

/// The latency target of the capacities `--post` and `--calibrate` search beside their
/// closed-loop cells: `--slo`'s, else p99 ≤ 10 ms.
fn capacity_at(args: &Args) -> bench::model::slo::Target {
    args.slo.unwrap_or(bench::model::slo::CAPACITY_AT)
}

/// The run's set-up, as results.json keeps it: the machine, the versions, the command.
fn meta(args: &Args, plan: &Plan, peers: &[Peer]) -> serde_json::Value {
    let capacities_beside = args.post.is_some() || args.calibrate;
    serde_json::json!({
        // An --slo run's target; with --post or --calibrate, --slo is the target of the
        // capacities they search beside their closed-loop cells (`capacity_at`).
        "slo": args.slo.filter(|_| !capacities_beside),
        "capacity_at": capacities_beside.then(|| capacity_at(args)),
        "machine": procfs::machine(),
        "argv": std::env::args().collect::<Vec<_>>(),
        "started_at": chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        "commit": commit(),
        "fidelity": args.fidelity,
        "calibrate": args.calibrate,
        "beside": beside(peers)
            .into_iter()
            .map(|(p, m)| (p, serde_json::Value::from(m)))
            .collect::<serde_json::Map<_, _>>(),
        "concurrency": args.concurrency,
        "server_cpus": plan.server_cpus,
        "client_cpus": plan.client_cpus,
        "workers": plan.workers,
        "versions": {
            "archzoo": env!("CARGO_PKG_VERSION"),
            "ab": version_line(&["ab", "-V"]),
            "wrk": version_line(&["wrk", "-v"]),
            "oha": clients::oha::path()
                .map_or_else(String::new, |p| version_line(&[&p.display().to_string(), "--version"])),
            "peers": peers
                .iter()
                .map(|p| (p.name.clone(), peer_version(p)))
                .collect::<serde_json::Map<_, _>>(),
        },
    })
}

/// The `--peer NAME@MODEL` pairs: each peer that said which model it stands beside.
fn beside(peers: &[Peer]) -> Vec<(String, String)> {
    peers
        .iter()
        .filter_map(|p| Some((p.name.clone(), p.beside.clone()?)))
        .collect()
}

/// A peer's version line: `peers/run --version NAME` for a built-in one; the command
/// itself for a `--peer` (its version is the user's to know).
fn peer_version(peer: &Peer) -> serde_json::Value {
    if peer.builtin {
        let run = format!("{}/run", peers::DIR);
        version_line(&[run.as_str(), "--version", peer.name.as_str()]).into()
    } else {
        peer.command.clone().into()
    }
}

/// The archzoo commit this run was built from (`git describe`, `-dirty` with local
/// changes), when it runs in its checkout; empty otherwise.
fn commit() -> String {
    Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
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
    chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string()
}
