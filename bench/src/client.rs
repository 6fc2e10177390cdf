//! The load generators: command lines for `ab`, `wrk` and `oha`, and parsers of what they
//! print.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Client {
    /// ApacheBench: what the posts used. HTTP/1.0, one thread, latency in whole ms.
    Ab,
    /// wrk: HTTP/1.1 keep-alive, Lua scripts (pipelining), latency in µs.
    Wrk,
    /// oha: open loop at a fixed rate (`--rate`), latency measured from when each request
    /// was due, so a stalled server shows in the percentiles (no coordinated omission).
    Oha,
}

impl Client {
    /// The command's own name, as a person types it.
    pub fn command(self) -> &'static str {
        match self {
            Client::Ab => "ab",
            Client::Wrk => "wrk",
            Client::Oha => "oha",
        }
    }
}

/// How long or how much one run sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    Duration(Duration),
    Requests(u64),
}

/// One client invocation.
#[derive(Debug, Clone)]
pub struct Load<'a> {
    pub client: Client,
    pub url: &'a str,
    pub connections: u32,
    pub keep_alive: bool,
    pub amount: Amount,
    /// Requests per pipelined batch (wrk only, through `script`).
    pub pipeline: Option<u32>,
    pub script: &'a Path,
    /// Offered requests per second (oha only): the open loop's fixed rate.
    pub rate: Option<u32>,
}

/// The argument vector (program first) for one run.
pub fn command(load: &Load) -> Result<Vec<String>, String> {
    let mut args: Vec<String> = Vec::new();
    let c = load.connections.to_string();
    match load.client {
        Client::Ab => {
            if load.pipeline.is_some() {
                return Err("ab cannot pipeline requests; use --client wrk".into());
            }
            args.push("ab".into());
            match load.amount {
                // -t stops after the time limit; -n only raises ab's default cap of 50000.
                Amount::Duration(d) => args.extend([
                    "-t".into(),
                    d.as_secs().max(1).to_string(),
                    "-n".into(),
                    "100000000".into(),
                ]),
                Amount::Requests(n) => args.extend(["-n".into(), n.to_string()]),
            }
            args.extend(["-c".into(), c, "-s".into(), "10".into()]);
            if load.keep_alive {
                args.push("-k".into());
            }
        }
        Client::Wrk => {
            let Amount::Duration(d) = load.amount else {
                return Err("wrk runs for a duration; use --duration with --client wrk".into());
            };
            args.extend([
                "wrk".into(),
                "-t1".into(),
                format!("-c{c}"),
                format!("-d{}s", d.as_secs().max(1)),
                "--latency".into(),
                "--timeout".into(),
                "5s".into(),
            ]);
            if !load.keep_alive {
                // wrk always speaks keep-alive; this makes every response close.
                args.extend(["-H".into(), "Connection: close".into()]);
            }
            if load.pipeline.is_some() {
                args.extend(["-s".into(), load.script.display().to_string()]);
            }
        }
        Client::Oha => {
            if load.pipeline.is_some() {
                return Err("oha cannot pipeline requests; use --client wrk".into());
            }
            args.extend([
                oha_path().map_or_else(|| "oha".into(), |p| p.display().to_string()),
                "--no-tui".into(),
                "--output-format".into(),
                "json".into(),
                "-c".into(),
                c,
                "-t".into(),
                "5s".into(),
            ]);
            match load.amount {
                Amount::Duration(d) => {
                    args.extend(["-z".into(), format!("{}s", d.as_secs().max(1))]);
                    // Requests still in flight when time is up are not counted as errors.
                    args.push("-w".into());
                }
                Amount::Requests(n) => args.extend(["-n".into(), n.to_string()]),
            }
            if let Some(rate) = load.rate {
                // Latency from each request's due time, not from when it could be sent.
                args.extend(["-q".into(), rate.to_string(), "--latency-correction".into()]);
            }
            if !load.keep_alive {
                args.push("--disable-keepalive".into());
            }
        }
    }
    args.push(load.url.to_string());
    if let (Client::Wrk, Some(depth)) = (load.client, load.pipeline) {
        args.extend(["--".into(), depth.to_string()]);
    }
    Ok(args)
}

/// Where `oha` is: on the PATH, else where `scripts/bench` installs it
/// (`target/tools/bin`, `cargo install --locked` at a pinned version); `None` if neither.
pub fn oha_path() -> Option<PathBuf> {
    let installed = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/tools/bin/oha"
    ));
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("oha"))
                .find(|p| p.is_file())
        })
        .or_else(|| installed.is_file().then(|| installed.to_path_buf()))
}

/// What a client reported for one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub requests: u64,
    pub rps: f64,
    /// Failed requests (ab), or socket errors of any kind (wrk).
    pub failed: u64,
    pub non_2xx: u64,
    /// wrk's socket-timeout count (ab has none).
    pub timeouts: u64,
    /// Requests ab answered on a kept-alive connection.
    pub keep_alive_requests: Option<u64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// The open loop's further percentiles and maximum (oha), corrected for coordinated
    /// omission.
    pub p90_ms: Option<f64>,
    pub p999_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

fn number_after(text: &str, label: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.trim_end_matches(',').parse().ok())
}

/// Parses ab's report. Its latency table is in whole milliseconds.
pub fn parse_ab(text: &str) -> Result<Outcome, String> {
    let requests = number_after(text, "Complete requests:")
        .ok_or_else(|| format!("no 'Complete requests' in ab output: {}", tail(text)))?;
    let pct = |p: &str| number_after(text, p);
    Ok(Outcome {
        requests: requests as u64,
        rps: number_after(text, "Requests per second:").unwrap_or(0.0),
        failed: number_after(text, "Failed requests:").unwrap_or(0.0) as u64,
        non_2xx: number_after(text, "Non-2xx responses:").unwrap_or(0.0) as u64,
        timeouts: 0,
        keep_alive_requests: number_after(text, "Keep-Alive requests:").map(|n| n as u64),
        p50_ms: pct("50%"),
        p99_ms: pct("99%"),
        p90_ms: pct("90%"),
        p999_ms: None,
        max_ms: pct("100%"),
    })
}

/// Parses wrk's report (run with `--latency`).
pub fn parse_wrk(text: &str) -> Result<Outcome, String> {
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

/// Parses oha's `--output-format json` report: latencies are in seconds; requests are
/// the responses of every status (`statusCodeDistribution`); errors (refused, reset,
/// timed out) are counted apart (`errorDistribution`).
pub fn parse_oha(text: &str) -> Result<Outcome, String> {
    let json: serde_json::Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("oha printed no JSON report ({e}): {}", tail(text)))?;
    let ms = |v: &serde_json::Value| v.as_f64().map(|s| s * 1000.0);
    let statuses = json["statusCodeDistribution"]
        .as_object()
        .ok_or_else(|| format!("no statusCodeDistribution in oha's report: {}", tail(text)))?;
    let count = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let requests: u64 = statuses.values().map(count).sum();
    let non_2xx: u64 = statuses
        .iter()
        .filter(|(code, _)| !code.starts_with('2'))
        .map(|(_, n)| count(n))
        .sum();
    let errors = json["errorDistribution"].as_object();
    let failed: u64 = errors.map_or(0, |e| e.values().map(count).sum());
    let timeouts: u64 = errors.map_or(0, |e| {
        e.iter()
            .filter(|(what, _)| what.to_ascii_lowercase().contains("timeout"))
            .map(|(_, n)| count(n))
            .sum()
    });
    let pct = &json["latencyPercentiles"];
    Ok(Outcome {
        requests,
        // Responses per second: oha's own requestsPerSec counts failed attempts too.
        rps: match json["summary"]["total"].as_f64() {
            Some(total) if total > 0.0 => requests as f64 / total,
            _ => 0.0,
        },
        failed,
        non_2xx,
        timeouts,
        keep_alive_requests: None,
        p50_ms: ms(&pct["p50"]),
        p99_ms: ms(&pct["p99"]),
        p90_ms: ms(&pct["p90"]),
        p999_ms: ms(&pct["p99.9"]),
        max_ms: ms(&json["summary"]["slowest"]),
    })
}

/// The wrk latency after `label`, in milliseconds.
fn latency(text: &str, label: &str) -> Option<f64> {
    millis(
        text.lines()
            .find_map(|l| l.trim_start().strip_prefix(label))?
            .trim(),
    )
}

/// A time such as `182.00us`, `1.37ms` or `2.01s` (wrk's latencies, `--slo`'s targets),
/// in milliseconds.
pub fn millis(value: &str) -> Option<f64> {
    let (number, scale) = if let Some(v) = value.strip_suffix("us") {
        (v, 0.001)
    } else if let Some(v) = value.strip_suffix("ms") {
        (v, 1.0)
    } else if let Some(v) = value.strip_suffix('s') {
        (v, 1000.0)
    } else {
        return None;
    };
    number.parse::<f64>().ok().map(|n| n * scale)
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}
