//! `bench --idle-conns N`: what an idle keep-alive connection costs each architecture, up
//! to 100,000 of them on one machine.
//!
//! For each variant, then each peer: start it (1 worker, `--max-conns` above N), open N
//! connections and make one request on each, in waves of `WAVE` (256; so every connection is
//! accepted and has met the codec), measure the server's resident memory (summed over its
//! processes) against its baseline, then make a second request on every connection — the
//! timed answer round — to check that each is still answered.
//! Blocking one-connection-per-worker variants cannot hold idle connections by design and
//! are reported as such.
//!
//! Two limits of one machine stand in the way of 100,000, and both are handled here:
//! - **Ports.** A client has about 28,000 ephemeral ports per source address towards one
//!   server address (`ip_local_port_range`), so connections are spread over several
//!   loopback source addresses (127.0.0.1, 127.0.0.2, … — all of 127/8 is local), each
//!   socket bound with `IP_BIND_ADDRESS_NO_PORT` so the port is chosen at `connect` by the
//!   whole 4-tuple (a plain `bind` to port 0 would reserve the port for good).
//! - **Descriptors.** The client and the server each need one per connection; the harness
//!   raises its `RLIMIT_NOFILE` (the hard limit too when it may, as root) before it starts
//!   the server, which inherits it, or says exactly which limit stops it.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};

use crate::measure::client::tsung::{self, Fleet, Reach};
use crate::measure::hosts::{self, Host};
use crate::measure::{procfs, server};
use crate::model::client::HostLoad;
use crate::model::idle::{Row, ONE_CONN};
use variants::launch::{self, Server};
use variants::peers::{self, Peer};
use variants::Variant;

/// Connections opened from one source address: well inside the ~28,000 ephemeral ports a
/// default `ip_local_port_range` gives each (source, destination) pair.
const PER_SOURCE: usize = 25_000;

/// Descriptors kept free besides the connections (the server's listeners, pipes, files).
const SPARE_FDS: u64 = 1_000;

/// The loopback source address of connection `i`: 127.0.0.(1 + i / PER_SOURCE).
fn source(i: usize) -> io::Result<Ipv4Addr> {
    let host = u8::try_from(1 + i / PER_SOURCE)
        .ok()
        .filter(|h| *h < 255)
        .ok_or_else(|| io::Error::other("more connections than loopback sources"))?;
    Ok(Ipv4Addr::new(127, 0, 0, host))
}

/// A connection from `from` to `to`, its port chosen at connect time.
fn connect(from: Ipv4Addr, to: SocketAddr) -> io::Result<TcpStream> {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    let on: libc::c_int = 1;
    // SAFETY: setsockopt with a valid int option value. Failing is harmless below the
    // port limit of one address, and the connect error says so above it.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    socket.bind(&SocketAddr::V4(SocketAddrV4::new(from, 0)).into())?;
    socket.connect(&to.into())?;
    let stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(stream)
}

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n";

/// Connections opened, and requests in flight, at once: a wave is written, then read.
/// Bounding it keeps the figure about idle connections, not about how deep a burst of N
/// requests queues inside a server (a reactor's links, a worker's batch), which would
/// otherwise grow with N; and it stays under the shortest listen queue here (nginx's 511).
const WAVE: usize = 256;

/// Sends one request on every connection and reads every response, a wave at a time; the
/// number answered.
fn round(conns: &mut [TcpStream]) -> usize {
    let mut answered = 0;
    let mut buf = [0u8; 512];
    for wave in conns.chunks_mut(WAVE) {
        for c in wave.iter_mut() {
            let _ = c.write_all(REQUEST);
        }
        for c in wave.iter_mut() {
            let mut got = Vec::new();
            while !got.ends_with(b"hello, world!") {
                match c.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            answered += usize::from(got.ends_with(b"hello, world!"));
        }
    }
    answered
}

/// Who opens and holds the connections.
pub enum Holder<'a> {
    /// bench itself, from loopback source addresses, the servers here.
    Here,
    /// Tsung's nodes on test hosts, each its share from its own address; the servers in
    /// the server host.
    Fleet {
        fleet: &'a Fleet,
        server_host: &'a Host,
        client_cpus: &'a [usize],
    },
}

/// What one `--idle-conns` run measures, and with what.
pub struct Setup<'a> {
    pub bin_dir: &'a Path,
    pub variants: &'a [Variant],
    pub peers: &'a [Peer],
    /// Connections to hold on each server.
    pub n: usize,
    /// The servers' CPUs.
    pub cpus: &'a [usize],
    pub db: &'a Path,
    pub holder: Holder<'a>,
}

/// How one server is run for N connections.
#[derive(Debug, Clone, PartialEq)]
struct Sizing {
    /// Connections to open (N, or one process's limit for a row that cannot spread).
    n: usize,
    workers: usize,
    /// Each worker's `--max-conns` (a peer's connection table).
    max_conns: usize,
    held_back: Option<String>,
}

/// Sizes a server for `n` connections when one process may hold `cap` of them (its
/// descriptor limit `hard`, less spares): one worker while one holds them all; else, for a
/// model that spreads its connections over worker processes (`spreads`), enough workers
/// that each stays under its limit with a quarter to spare (a reuseport hash is not
/// exactly even; a shared socket's workers stop accepting at `--max-conns` and leave the
/// rest to the others); a model whose one process holds every connection is held to
/// `cap`, and the row says so.
fn sizing(n: usize, spreads: bool, cap: usize, hard: u64) -> Sizing {
    if n <= cap {
        return Sizing {
            n,
            workers: 1,
            max_conns: n + 16,
            held_back: None,
        };
    }
    if spreads {
        return Sizing {
            n,
            workers: (n + n / 4).div_ceil(cap),
            max_conns: cap,
            held_back: None,
        };
    }
    Sizing {
        n: cap,
        workers: 1,
        max_conns: cap + 16,
        held_back: Some(format!(
            "one process holds every connection: {cap} opened, a process may have {hard} descriptors (RLIMIT_NOFILE hard)"
        )),
    }
}

/// What holding the connections showed, before the row is written.
#[derive(Default)]
struct Held {
    held: usize,
    first_round: usize,
    answered: usize,
    open_s: f64,
    round_s: f64,
    round_max_ms: Option<f64>,
    closed_idle: usize,
    client_errors: usize,
    rss_after_kib: u64,
    stopped_by: Option<String>,
    hosts: Vec<HostLoad>,
}

/// Every variant, then every peer.
pub fn run(setup: &Setup) -> Vec<Row> {
    let n = setup.n;
    let fleet = matches!(setup.holder, Holder::Fleet { .. });
    // The client's descriptors (bench's own connections) and the server's, which inherits
    // this limit; with a fleet the client's are its nodes', each under its own limit.
    let hard = match common::cli::fd_hard_limit() {
        Ok(hard) => hard,
        Err(e) => return vec![Row::missing("all", "", e)],
    };
    let raised = common::cli::raise_fd_limit_to(if fleet { hard } else { n as u64 + SPARE_FDS });
    if let Err(e) = raised {
        return vec![Row::missing("all", "", e)];
    }
    let cap = if fleet {
        hard.saturating_sub(SPARE_FDS) as usize
    } else {
        n
    };
    if let Holder::Fleet { fleet, .. } = &setup.holder {
        if let Err(e) = fits_the_fleet(n, fleet.hosts.len(), cap) {
            return vec![Row::missing("all", "", e)];
        }
    }
    let mut rows = Vec::new();
    let models = setup.variants.iter().map(|v| (v.name, v.model, Some(v)));
    let others = setup
        .peers
        .iter()
        .map(|p| (p.name.as_str(), p.what.as_str(), None));
    for (i, (name, model, variant)) in models.chain(others).enumerate() {
        if variant.is_some_and(|v| v.one_conn_per_worker) {
            rows.push(Row::missing(name, model, ONE_CONN.into()));
            continue;
        }
        // A peer's workers are processes as far as archzoo knows (nginx's are).
        let spreads = variant.is_none_or(|v| v.processes && !v.ipc);
        let size = sizing(n, spreads, cap, hard);
        let server_host = match &setup.holder {
            Holder::Here => None,
            Holder::Fleet { server_host, .. } => Some(*server_host),
        };
        // A built-in peer sizes its own connection table from this (nginx's
        // worker_connections), as a model's from --max-conns. nginx closes idle keep-alive
        // connections to make room once fewer than 1/16 of its table is free, so its table
        // gets that sixteenth on top.
        // Spread over workers, each gets the whole of what one process may hold: a shared
        // socket's workers do not take equal shares.
        let per_worker = size.n.div_ceil(size.workers);
        let table = if size.workers > 1 {
            size.max_conns
        } else {
            per_worker + per_worker / 15 + 64
        };
        std::env::set_var(peers::CONNS_ENV, table.to_string());
        let started = match variant {
            Some(v) => {
                let extra = [
                    "--db".to_string(),
                    setup.db.display().to_string(),
                    "--max-conns".to_string(),
                    size.max_conns.to_string(),
                    // Held longer than the slowest fleet takes to open them all.
                    "--keepalive-timeout".to_string(),
                    "600".to_string(),
                ];
                server::start_on(
                    setup.bin_dir,
                    v,
                    size.workers,
                    setup.cpus,
                    &extra,
                    server_host,
                )
            }
            None => server::start_peer(
                &setup.peers[i - setup.variants.len()],
                size.workers,
                setup.cpus,
                setup.db,
                None,
                server_host,
            ),
        };
        let server = match started {
            Ok(s) => s,
            Err(e) => {
                rows.push(Row::missing(name, model, e));
                continue;
            }
        };
        // Where bench's own connections come from: loopback sources, or the bridge's end
        // towards a test host.
        let from = |i: usize| match &setup.holder {
            Holder::Here => source(i),
            Holder::Fleet { .. } => Ok(hosts::bridge_addr()),
        };
        // A burst as wide as a wave first, so that what one wave leaves behind (pools
        // filled, a reactor's IPC buffers grown) is in the baseline, not charged to the
        // idle connections.
        if let Ok(mut burst) = (0..WAVE)
            .map(|i| from(i).and_then(|src| connect(src, server.addr)))
            .collect::<io::Result<Vec<TcpStream>>>()
        {
            round(&mut burst);
            round(&mut burst);
        }
        std::thread::sleep(Duration::from_millis(300));
        let before = server.rss_kib();
        eprintln!(
            "bench: {name}: {} idle connections, {} worker(s)",
            size.n, size.workers
        );
        let held = match &setup.holder {
            Holder::Here => hold_here(server, size.n),
            Holder::Fleet {
                fleet, client_cpus, ..
            } => hold_on_fleet(fleet, client_cpus, server, size.n),
        };
        let held = match held {
            Ok(h) => h,
            Err(e) => {
                rows.push(Row::missing(name, model, e));
                continue;
            }
        };
        rows.push(Row {
            variant: name.to_string(),
            model: model.to_string(),
            missing: None,
            held: held.held,
            rss_before_kib: before,
            rss_after_kib: held.rss_after_kib,
            bytes_per_conn: (held.rss_after_kib.saturating_sub(before) * 1024)
                / held.held.max(1) as u64,
            open_s: held.open_s,
            round_s: held.round_s,
            answered: held.answered,
            first_round: held.first_round,
            stopped_by: held.stopped_by,
            workers: size.workers,
            held_back: size.held_back,
            round_max_ms: held.round_max_ms,
            closed_idle: held.closed_idle,
            client_errors: held.client_errors,
            hosts: held.hosts,
        });
    }
    rows
}

/// bench holds `n` connections itself: opened a wave at a time, each wave answered before
/// the next opens (a listen queue — nginx's is 511 long — is never asked to hold more than
/// one wave); the server's memory read; then one more request on each. The server is
/// stopped before the connections close, so the TIME_WAIT sockets are its own, not the
/// ports the next server's client needs.
fn hold_here(server: Server, n: usize) -> Result<Held, String> {
    let mut conns: Vec<TcpStream> = Vec::with_capacity(n);
    let mut stopped_by = None;
    let mut open_s = 0.0;
    let mut first = 0;
    while conns.len() < n && stopped_by.is_none() {
        let from = conns.len();
        let opening = Instant::now();
        for i in from..n.min(from + WAVE) {
            match source(i).and_then(|src| connect(src, server.addr)) {
                Ok(c) => conns.push(c),
                Err(e) => {
                    stopped_by = Some(format!("stopped at {i}: {e}"));
                    break;
                }
            }
        }
        open_s += opening.elapsed().as_secs_f64();
        first += round(&mut conns[from..]);
    }
    // Let the allocator settle what the burst left (returned buffers, freed pages).
    std::thread::sleep(Duration::from_millis(300) + Duration::from_micros(10 * n as u64));
    let rss_after_kib = server.rss_kib();
    let answering = Instant::now();
    let answered = round(&mut conns);
    let round_s = answering.elapsed().as_secs_f64();
    let _ = server.stop(server::STOP_GRACE);
    Ok(Held {
        held: conns.len(),
        first_round: first,
        answered,
        open_s,
        round_s,
        rss_after_kib,
        stopped_by,
        ..Held::default()
    })
}

/// Whether `n` connections fit `hosts` client hosts: each host's node holds its share under
/// its own descriptor limit (`cap`) and from its one address's ephemeral ports (the odd
/// half of the range, which Tsung's bind-before-connect draws from: `hosts::CLIENT_PORTS`).
fn fits_the_fleet(n: usize, hosts: usize, cap: usize) -> Result<(), String> {
    let ports = usize::from(hosts::CLIENT_PORTS.1 - hosts::CLIENT_PORTS.0) / 2;
    let per_host = cap.min(ports.saturating_sub(SPARE_FDS as usize));
    let share = n.div_ceil(hosts.max(1));
    if share > per_host {
        return Err(format!(
            "{n} connections over {hosts} client hosts is {share} a host; a host's Tsung node may hold {per_host} (its descriptor limit and one address's ephemeral ports): use --client-hosts {} or more",
            n.div_ceil(per_host.max(1))
        ));
    }
    Ok(())
}

/// How long the fleet may go without one more connection before bench stops waiting for
/// the rest (a server that stopped accepting).
const STALL: Duration = Duration::from_secs(15);

/// Tsung's nodes hold `n` connections (see `tsung::idle`): bench watches the server host's
/// TCP sockets in use (its listeners and connections) until `n` are there or no more
/// come, reads the server's memory, then releases the users for the second round; the
/// server is stopped once they are done.
fn hold_on_fleet(
    fleet: &Fleet,
    client_cpus: &[usize],
    server: Server,
    n: usize,
) -> Result<Held, String> {
    let held = fleet_round(fleet, client_cpus, &server, n);
    let _ = server.stop(server::STOP_GRACE);
    held
}

/// [`hold_on_fleet`] up to the figures, the server still running.
fn fleet_round(
    fleet: &Fleet,
    client_cpus: &[usize],
    server: &Server,
    n: usize,
) -> Result<Held, String> {
    let (file, logs) = fleet.run_files("idle")?;
    let release = file.with_extension("release");
    let url = format!("http://{}/", server.addr);
    std::fs::write(&file, tsung::idle::config(fleet, &url, n, &release)?)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let argv = fleet.argv(&file, &logs)?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child =
        launch::spawn_pinned(cmd, client_cpus).map_err(|e| format!("cannot run tsung: {e}"))?;
    let reader = launch::read_stdout(&mut child);
    // Until every connection is established, or none more comes for STALL, or the fleet
    // ended (its nodes failed to start); bounded by a generous rate in any case.
    let opening = Instant::now();
    let bound = STALL + Duration::from_secs(60) + Duration::from_millis(n as u64 * 2);
    let (mut seen, mut grew) = (0, Instant::now());
    let mut stopped_by = None;
    let mut said = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let now = procfs::tcp_in_use(server.pid());
        if said.elapsed() >= Duration::from_secs(10) {
            eprintln!("bench:   {now} of {n} open");
            said = Instant::now();
        }
        if now > seen {
            (seen, grew) = (now, Instant::now());
        }
        if seen >= n {
            break;
        }
        if matches!(child.try_wait(), Ok(Some(_))) {
            stopped_by = Some(format!("the fleet ended with {seen} connections open"));
            break;
        }
        if grew.elapsed() > STALL || opening.elapsed() > bound {
            stopped_by = Some(format!(
                "no new connection for {} s at {seen}",
                grew.elapsed().as_secs()
            ));
            break;
        }
    }
    let open_s = grew.duration_since(opening).as_secs_f64();
    // The last users' first answers, and the allocator's settling.
    std::thread::sleep(Duration::from_millis(1000) + Duration::from_micros(10 * n as u64));
    let rss_after_kib = server.rss_kib();
    std::fs::write(&release, b"").map_err(|e| format!("{}: {e}", release.display()))?;
    // Tsung's controller can outlive its nodes (seen once: all 19,000 users done, every
    // node gone, the controller still waiting minutes later): once no node runs, it gets
    // 10 s to end too, then it is stopped — the nodes' logs are complete by then.
    let namespaces = match &fleet.reach {
        Reach::TestHosts { namespaces, .. } => namespaces.clone(),
        Reach::Ssh => Vec::new(),
    };
    let until = Instant::now() + Duration::from_secs(120) + bound;
    let mut nodes_gone: Option<Instant> = None;
    while Instant::now() < until && launch::running(child.id() as i32) {
        if !namespaces.is_empty() && !namespaces.iter().any(|ns| hosts::running(ns)) {
            if nodes_gone.get_or_insert_with(Instant::now).elapsed() > Duration::from_secs(10) {
                break;
            }
        } else {
            nodes_gone = None;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let (code, _) = launch::wait_pinned(&mut child, Duration::ZERO);
    let text = reader.join().unwrap_or_default();
    let rounds = tsung::log_dir(&text)
        .and_then(|dir| {
            let read = tsung::idle::read(&dir);
            let _ = std::fs::remove_dir_all(&dir);
            read
        })
        .map_err(|e| match code {
            None => "tsung overran its time limit and was killed".to_string(),
            Some(c) => format!("tsung exited with {c}: {e}"),
        })?;
    let hosts = rounds
        .hosts
        .into_iter()
        .map(|mut h| {
            if let Some(f) = fleet.hosts.iter().find(|f| f.tsung_host == h.host) {
                h.host = f.name.clone();
            }
            h
        })
        .collect();
    Ok(Held {
        held: rounds.first as usize,
        first_round: rounds.first as usize,
        answered: rounds.second.saturating_sub(rounds.reopened) as usize,
        closed_idle: rounds.reopened as usize,
        client_errors: rounds.errors as usize,
        open_s,
        round_s: rounds.second_span_s,
        round_max_ms: rounds.second_max_ms,
        rss_after_kib,
        stopped_by,
        hosts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_server_is_sized_to_stay_under_each_process_limit() {
        let one = sizing(5_000, true, 19_000, 20_000);
        assert_eq!((one.n, one.workers, one.held_back), (5_000, 1, None));
        // 100,000 over processes: a quarter to spare, each at most 19,000.
        let spread = sizing(100_000, true, 19_000, 20_000);
        assert_eq!(
            (spread.n, spread.workers, spread.max_conns),
            (100_000, 7, 19_000)
        );
        // One process holds them all: held to its limit, and said so.
        let one_process = sizing(100_000, false, 19_000, 20_000);
        assert_eq!((one_process.n, one_process.workers), (19_000, 1));
        assert!(one_process.held_back.unwrap().contains("20000 descriptors"));
    }

    #[test]
    fn the_fleet_needs_enough_hosts_for_its_share() {
        assert!(fits_the_fleet(100_000, 6, 19_000).is_ok());
        let e = fits_the_fleet(100_000, 2, 19_000).unwrap_err();
        assert!(
            e.contains("50000 a host") && e.contains("--client-hosts 6"),
            "{e}"
        );
    }

    #[test]
    fn connections_spread_over_loopback_sources_in_blocks() {
        assert_eq!(source(0).unwrap(), Ipv4Addr::new(127, 0, 0, 1));
        assert_eq!(source(PER_SOURCE - 1).unwrap(), Ipv4Addr::new(127, 0, 0, 1));
        assert_eq!(source(PER_SOURCE).unwrap(), Ipv4Addr::new(127, 0, 0, 2));
        assert_eq!(source(99_999).unwrap(), Ipv4Addr::new(127, 0, 0, 4));
        assert!(source(254 * PER_SOURCE).is_err());
    }

    #[test]
    fn a_connection_comes_from_its_source_address() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let from = Ipv4Addr::new(127, 0, 0, 3);
        let _client = connect(from, listener.local_addr().unwrap()).unwrap();
        let (_, peer) = listener.accept().unwrap();
        assert_eq!(peer.ip(), from);
    }
}
