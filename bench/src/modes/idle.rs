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
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};

use crate::measure::server;
use crate::model::idle::{Row, ONE_CONN};
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

/// Every variant, then every peer, each with one worker.
pub fn run(
    bin_dir: &Path,
    variants: &[Variant],
    peers: &[Peer],
    n: usize,
    cpus: &[usize],
    db: &Path,
) -> Vec<Row> {
    // The client's descriptors and the server's, which inherits this limit.
    if let Err(e) = common::cli::raise_fd_limit_to(n as u64 + SPARE_FDS) {
        return vec![Row::missing("all", "", e)];
    }
    let mut rows = Vec::new();
    // A built-in peer sizes its own connection table from this (nginx's
    // worker_connections), as a model's from --max-conns. nginx closes idle keep-alive
    // connections to make room once fewer than 1/16 of its table is free, so its table
    // gets that sixteenth on top.
    std::env::set_var(peers::CONNS_ENV, (n + n / 15 + 64).to_string());
    let models = variants.iter().map(|v| (v.name, v.model, Some(v)));
    let others = peers
        .iter()
        .map(|p| (p.name.as_str(), p.what.as_str(), None));
    for (i, (name, model, variant)) in models.chain(others).enumerate() {
        if variant.is_some_and(|v| v.one_conn_per_worker) {
            rows.push(Row::missing(name, model, ONE_CONN.into()));
            continue;
        }
        let started = match variant {
            Some(v) => {
                let extra = [
                    "--db".to_string(),
                    db.display().to_string(),
                    "--max-conns".to_string(),
                    (n + 16).to_string(),
                ];
                server::start(bin_dir, v, 1, cpus, &extra)
            }
            None => server::start_peer(&peers[i - variants.len()], 1, cpus, db, None),
        };
        let server = match started {
            Ok(s) => s,
            Err(e) => {
                rows.push(Row::missing(name, model, e));
                continue;
            }
        };
        // A burst as wide as a wave first, so that what one wave leaves behind (pools
        // filled, a reactor's IPC buffers grown) is in the baseline, not charged to the
        // idle connections.
        if let Ok(mut burst) = (0..WAVE)
            .map(|i| source(i).and_then(|src| connect(src, server.addr)))
            .collect::<io::Result<Vec<TcpStream>>>()
        {
            round(&mut burst);
            round(&mut burst);
        }
        std::thread::sleep(Duration::from_millis(300));
        let before = server.rss_kib();
        // Opened a wave at a time, each wave answered before the next opens: a listen
        // queue (nginx's is 511 long) is never asked to hold more than one wave.
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
        let after = server.rss_kib();
        let answering = Instant::now();
        let second = round(&mut conns);
        let round_s = answering.elapsed().as_secs_f64();
        let held = conns.len();
        // The server closes first, so the TIME_WAIT sockets are its own, not the ports
        // the next variant's client needs.
        let _ = server.stop(server::STOP_GRACE);
        drop(conns);
        rows.push(Row {
            variant: name.to_string(),
            model: model.to_string(),
            missing: None,
            held,
            rss_before_kib: before,
            rss_after_kib: after,
            bytes_per_conn: (after.saturating_sub(before) * 1024) / held.max(1) as u64,
            open_s,
            round_s,
            answered: second,
            first_round: first,
            stopped_by,
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

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
