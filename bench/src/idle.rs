//! `bench --idle-conns N`: what an idle keep-alive connection costs each architecture.
//!
//! For each variant: start it, open N connections and make one request on each (so every
//! connection is accepted and has met the codec), measure the server's resident memory
//! (summed over its processes) against the baseline, then make a second request on every
//! connection to check that each is still answered. Blocking one-connection-per-worker
//! variants cannot hold idle connections by design and are reported as such.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use crate::server;
use variants::Variant;

/// Resident memory (VmRSS) summed over `pids`, in KiB.
fn rss_kib(pids: &[i32]) -> u64 {
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .sum()
}

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n";

/// Sends one request on every connection, then reads every response; the number answered.
fn round(conns: &mut [TcpStream]) -> usize {
    for c in conns.iter_mut() {
        let _ = c.write_all(REQUEST);
    }
    let mut answered = 0;
    let mut buf = [0u8; 512];
    for c in conns.iter_mut() {
        let mut got = Vec::new();
        while !got.ends_with(b"hello, world!") {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        answered += usize::from(got.ends_with(b"hello, world!"));
    }
    answered
}

/// The markdown table for every variant.
pub fn run(bin_dir: &Path, variants: &[Variant], n: usize, cpus: &[usize], db: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| variant | model | idle connections | RSS before (MiB) | RSS after (MiB) | bytes per connection | still answered |\n|---|---|---:|---:|---:|---:|---:|"
    );
    for v in variants {
        if v.one_conn_per_worker {
            let _ = writeln!(
                out,
                "| {} | {} | – | – | – | one connection per worker | – |",
                v.name, v.model
            );
            continue;
        }
        let extra = ["--db".to_string(), db.display().to_string()];
        let server = match server::start(bin_dir, v, 1, cpus, &extra) {
            Ok(s) => s,
            Err(e) => {
                let _ = writeln!(out, "| {} | {} | FAILED: {e} | | | | |", v.name, v.model);
                continue;
            }
        };
        let pids = crate::procfs::tree(server.pid());
        std::thread::sleep(Duration::from_millis(200));
        let before = rss_kib(&pids);
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            match TcpStream::connect(server.addr) {
                Ok(c) => {
                    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
                    conns.push(c);
                }
                Err(_) => break,
            }
        }
        let first = round(&mut conns);
        std::thread::sleep(Duration::from_millis(300));
        let after = rss_kib(&crate::procfs::tree(server.pid()));
        let second = round(&mut conns);
        let held = conns.len();
        drop(conns);
        let _ = server.stop(server::STOP_GRACE);
        let per_conn = (after.saturating_sub(before) * 1024) / held.max(1) as u64;
        let _ = writeln!(
            out,
            "| {} | {} | {held} | {:.1} | {:.1} | {per_conn} | {} of {held} (first round {first}) |",
            v.name,
            v.model,
            before as f64 / 1024.0,
            after as f64 / 1024.0,
            second,
        );
    }
    out
}
