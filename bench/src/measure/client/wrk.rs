//! wrk: HTTP/1.1 keep-alive, Lua scripts (pipelining), latency in µs.

use super::{number_after, on_path, tail, Amount, Load, Tool};
use crate::model::client::{millis, Outcome};

pub struct Wrk;

impl Tool for Wrk {
    fn argv(&self, load: &Load) -> Result<Vec<String>, String> {
        let Amount::Duration(d) = load.amount else {
            return Err("wrk runs for a duration; use --duration with --client wrk".into());
        };
        let mut args: Vec<String> = vec![
            "wrk".into(),
            // wrk refuses more threads than connections.
            format!(
                "-t{}",
                load.threads.clamp(1, load.connections.max(1) as usize)
            ),
            format!("-c{}", load.connections),
            format!("-d{}s", d.as_secs().max(1)),
            "--latency".into(),
            "--timeout".into(),
            "5s".into(),
        ];
        if !load.keep_alive {
            // wrk always speaks keep-alive; this makes every response close.
            args.extend(["-H".into(), "Connection: close".into()]);
        }
        if load.pipeline.is_some() {
            args.extend(["-s".into(), load.script.display().to_string()]);
        }
        args.push(load.url.to_string());
        if let Some(depth) = load.pipeline {
            args.extend(["--".into(), depth.to_string()]);
        }
        Ok(args)
    }

    fn parse(&self, text: &str) -> Result<Outcome, String> {
        parse(text)
    }

    fn installed(&self) -> bool {
        on_path("wrk").is_some()
    }
}

/// Parses wrk's report (run with `--latency`).
pub fn parse(text: &str) -> Result<Outcome, String> {
    let requests = text
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| format!("no request count in wrk output: {}", tail(text)))?;
    let mut outcome = Outcome {
        requests,
        rps: number_after(text, "Requests/sec:").unwrap_or(0.0),
        non_2xx: number_after(text, "Non-2xx or 3xx responses:").unwrap_or(0.0) as u64,
        p50_ms: latency(text, "50%"),
        p99_ms: latency(text, "99%"),
        p90_ms: latency(text, "90%"),
        ..Outcome::default()
    };
    if let Some(line) = text.lines().find(|l| l.contains("Socket errors:")) {
        // "Socket errors: connect 0, read 31391, write 0, timeout 0"
        let counts: Vec<u64> = line
            .split([',', ':'])
            .filter_map(|part| part.split_whitespace().last()?.parse().ok())
            .collect();
        outcome.failed = counts.iter().sum();
        outcome.timeouts = counts.last().copied().unwrap_or(0);
    }
    Ok(outcome)
}

/// The wrk latency after `label`, in milliseconds.
fn latency(text: &str, label: &str) -> Option<f64> {
    millis(
        text.lines()
            .find_map(|l| l.trim_start().strip_prefix(label))?
            .trim(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::client::Client;
    use std::path::Path;
    use std::time::Duration;

    fn load(connections: u32, threads: usize) -> Load<'static> {
        Load {
            client: Client::Wrk,
            url: "http://127.0.0.1:8080/",
            connections,
            keep_alive: true,
            amount: Amount::Duration(Duration::from_secs(3)),
            pipeline: None,
            script: Path::new("/nonexistent"),
            rate: None,
            fleet: None,
            from: None,
            threads,
        }
    }

    /// One thread per client CPU, so that the client is not one core on a machine with
    /// cores to spare, and never more threads than connections (wrk refuses that).
    #[test]
    fn wrk_runs_a_thread_per_client_cpu_and_no_more_than_connections() {
        let t = |c, n| Wrk.argv(&load(c, n)).unwrap()[1].clone();
        assert_eq!(t(64, 1), "-t1");
        assert_eq!(t(256, 8), "-t8");
        assert_eq!(t(4, 8), "-t4");
        assert_eq!(t(64, 0), "-t1");
    }
}
