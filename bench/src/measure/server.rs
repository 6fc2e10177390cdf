//! Starting one server for one cell of the matrix (with the shared launcher,
//! `variants::launch`), and checking its answer before it is measured.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::hosts::Host;
use variants::launch::{self, Launch, Server};
use variants::peers::{self, Peer};
use variants::{Variant, Workload};

/// How long a stopping server may take before its group is killed (the servers' own grace
/// is 5 s).
pub const STOP_GRACE: Duration = Duration::from_secs(7);

/// Starts `variant` from `bin_dir` on a free port with `--stats` and `workers`, pinned to
/// `cpus`, and waits for its start-up line.
pub fn start(
    bin_dir: &Path,
    variant: &Variant,
    workers: usize,
    cpus: &[usize],
    extra: &[String],
) -> Result<Server, String> {
    start_on(bin_dir, variant, workers, cpus, extra, None)
}

/// [`start`] on a host (`host`: on its address, inside its namespace for a test host) or,
/// for `None`, on loopback here.
pub fn start_on(
    bin_dir: &Path,
    variant: &Variant,
    workers: usize,
    cpus: &[usize],
    extra: &[String],
    host: Option<&Host>,
) -> Result<Server, String> {
    let path = bin_dir.join(variant.binary);
    if !path.exists() {
        return Err(format!(
            "no binary {} (build with --release)",
            path.display()
        ));
    }
    let launch = match host {
        Some(h) => Launch::new_on(&path, h.addr.into()),
        None => Launch::new(&path),
    }
    .args(["--stats", "--workers", &workers.to_string()])
    .args(variant.args)
    .args(extra)
    .pin(cpus);
    match host.and_then(|h| h.netns.as_ref()) {
        Some(ns) => launch.in_namespace(ns),
        None => launch,
    }
    .start()
    .map_err(|e| format!("did not start: {e}"))
}

/// Starts a peer on a free port with `workers` workers (its `/db` on `db`, the `/pg`
/// database's URL for a `{pg}` in its command), pinned to `cpus` like a model; on a test
/// host (`host`: inside its namespace, on its address — `{host}` in its command, and
/// `peers/run`'s address) or, for `None`, on loopback here.
pub fn start_peer(
    peer: &Peer,
    workers: usize,
    cpus: &[usize],
    db: &Path,
    pg: Option<&str>,
    host: Option<&Host>,
) -> Result<Server, String> {
    let port = launch::free_port().map_err(|e| format!("no free port: {e}"))?;
    let peers_dir = std::fs::canonicalize(peers::DIR)
        .unwrap_or_else(|_| PathBuf::from(peers::DIR))
        .display()
        .to_string();
    let db = std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf());
    let command = peer
        .command_line(port, workers, &db.display().to_string(), &peers_dir)
        .replace("{pg}", pg.unwrap_or(""));
    let addr = host.map_or(std::net::Ipv4Addr::LOCALHOST, |h| h.addr);
    let launch = Launch::shell(&command.replace("{host}", &addr.to_string()))
        .env(peers::HOST_ENV, &addr.to_string())
        .pin(cpus);
    match host.and_then(|h| h.netns.as_ref()) {
        Some(ns) => launch.in_namespace(ns),
        None => launch,
    }
    .start_at(SocketAddr::from((addr, port)))
    .map_err(|e| format!("{} did not start: {e}", peer.name))
}

/// Checks the server's answer before measuring it: status 200 and the exact body, and —
/// `strict`, for archzoo's own servers — the `Server` and `Date` headers. A server that
/// answers wrongly is not worth a figure. A peer's missing headers are returned as notes
/// (the posts' servers differ there, and the table says so rather than refusing them).
pub fn validate(
    addr: SocketAddr,
    workload: &Workload,
    strict: bool,
) -> Result<Vec<String>, String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("cannot connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n",
        workload.path
    );
    s.write_all(request.as_bytes())
        .map_err(|e| format!("cannot send: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .map_err(|e| format!("no complete answer: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no response head")?;
    let status = head.lines().next().unwrap_or("");
    if !status.contains(" 200 ") {
        return Err(format!("status line {status:?}: {}", body.trim()));
    }
    let has = |name: &str| {
        head.lines().any(|l| {
            l.split_once(':')
                .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        })
    };
    let missing: Vec<&str> = ["Server", "Date", "Content-Type"]
        .into_iter()
        .filter(|h| !has(h))
        .collect();
    if strict && missing.iter().any(|h| *h != "Content-Type") {
        return Err("missing Server or Date header".into());
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Err("a chunked body: the load generators compare lengths".into());
    }
    if !(workload.check)(body.as_bytes()) {
        return Err(format!("body {body:?}"));
    }
    Ok(if missing.is_empty() {
        Vec::new()
    } else {
        vec![format!("its response lacks {}", missing.join(", "))]
    })
}
