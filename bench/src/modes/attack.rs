//! `bench --attack slowloris|slowbody`: slow clients against each server, and whether a
//! normal client is still served meanwhile.
//!
//! `slowhttptest -H` (Slowloris) opens many connections and sends a request head a few
//! bytes at a time, never finishing it; `slowhttptest -B` (slow POST, R-U-D-Y) sends a whole
//! head that promises a body and then the body a few bytes at a time. A server that gives a
//! whole worker to each connection starves until its timeout frees them; an event-driven
//! server holds the slow connections at little cost and keeps answering. While the attack
//! runs, a probe makes a fresh request every 250 ms and counts how many are answered within
//! 2 s.
//!
//! Both send their next bytes every 2 s, inside `--header-timeout` (10 s): the head's
//! deadline runs from its start, so Slowloris connections end at 10 s and are opened anew;
//! a body's runs from its last bytes (as nginx's `client_body_timeout`), so slow POST
//! connections live as long as the attack does.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::measure::server;
use crate::model::attack::{Attack, Row};
use variants::launch;
use variants::Variant;

/// One probe: a fresh connection, `GET /`, the answer within 2 s. Its latency if answered.
fn probe(addr: std::net::SocketAddr) -> Option<Duration> {
    let started = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET / HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    got.ends_with(b"hello, world!").then(|| started.elapsed())
}

/// slowhttptest's last verdict ("service available: YES/NO"), colours stripped.
fn verdict(output: &str) -> String {
    let plain: String = {
        let mut out = String::new();
        let mut chars = output.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                // skip an ANSI escape: ESC [ ... letter
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    };
    plain
        .lines()
        .rev()
        .find_map(|l| l.split("service available:").nth(1))
        .map_or_else(|| "?".into(), |v| v.trim().to_string())
}

/// Runs the attack on every variant.
#[allow(clippy::too_many_arguments)]
pub fn run(
    attack: Attack,
    bin_dir: &Path,
    variants: &[Variant],
    workers: usize,
    server_cpus: &[usize],
    client_cpus: &[usize],
    db: &Path,
    connections: usize,
    seconds: u64,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for v in variants {
        let extra = ["--db".to_string(), db.display().to_string()];
        let server = match server::start(bin_dir, v, workers, server_cpus, &extra) {
            Ok(s) => s,
            Err(e) => {
                rows.push(Row::missing(v, attack, workers, format!("FAILED: {e}")));
                continue;
            }
        };
        let url = format!("http://{}/", server.addr);
        let mut cmd = Command::new("slowhttptest");
        cmd.args(attack.slowhttptest_args())
            .args(["-i", "2", "-p", "2"])
            .args([
                "-c",
                &connections.to_string(),
                "-r",
                &connections.to_string(),
            ])
            .args(["-l", &seconds.to_string(), "-u", &url])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut attacker = match launch::spawn_pinned(cmd, client_cpus) {
            Ok(c) => c,
            Err(e) => {
                rows.push(Row::missing(
                    v,
                    attack,
                    workers,
                    format!("cannot run slowhttptest: {e}"),
                ));
                continue;
            }
        };
        let reader = launch::read_stdout(&mut attacker);
        // Let the slow connections pile up, then probe until the attack ends.
        std::thread::sleep(Duration::from_secs(2));
        let until = Instant::now() + Duration::from_secs(seconds.saturating_sub(3).max(1));
        let (mut ok, mut total, mut slowest) = (0, 0, Duration::ZERO);
        while Instant::now() < until {
            total += 1;
            match probe(server.addr) {
                Some(latency) => {
                    ok += 1;
                    slowest = slowest.max(latency);
                }
                None => slowest = slowest.max(Duration::from_secs(2)),
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        let _ = launch::wait_pinned(&mut attacker, Duration::from_secs(seconds + 15));
        let said = verdict(&reader.join().unwrap_or_default());
        let _ = server.stop(server::STOP_GRACE);
        rows.push(Row {
            variant: v.name.to_string(),
            model: v.model.to_string(),
            attack: attack.name(),
            workers,
            missing: None,
            connections,
            probes_answered: ok,
            probes: total,
            slowest_probe_ms: slowest.as_millis() as u64,
            service_available: said,
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    #[test]
    fn verdict_is_the_last_one_without_colours() {
        let out = "\u{1b}[1;32mservice available:\u{1b}[1;32m   \u{1b}[1;32mYES\u{1b}[0m\n\
                   later\n\u{1b}[1;32mservice available:\u{1b}[1;32m   \u{1b}[1;31mNO\u{1b}[0m\n";
        assert_eq!(super::verdict(out), "NO");
        assert_eq!(super::verdict("nothing"), "?");
    }
}
