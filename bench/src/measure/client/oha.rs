//! oha: the open loop at a fixed rate (`--rate`), latency measured from when each request
//! was due, so a stalled server shows in the percentiles (no coordinated omission).

use std::path::{Path, PathBuf};

use super::{on_path, tail, Amount, Load, Tool};
use crate::model::client::Outcome;

pub struct Oha;

impl Tool for Oha {
    fn argv(&self, load: &Load) -> Result<Vec<String>, String> {
        if load.pipeline.is_some() {
            return Err("oha cannot pipeline requests; use --client wrk".into());
        }
        let mut args: Vec<String> = vec![
            path().map_or_else(|| "oha".into(), |p| p.display().to_string()),
            "--no-tui".into(),
            "--output-format".into(),
            "json".into(),
            "-c".into(),
            load.connections.to_string(),
            "-t".into(),
            "5s".into(),
        ];
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
        args.push(load.url.to_string());
        Ok(args)
    }

    fn parse(&self, text: &str) -> Result<Outcome, String> {
        parse(text)
    }

    fn installed(&self) -> bool {
        path().is_some()
    }
}

/// Where `oha` is: on the PATH, else where `scripts/bench` installs it
/// (`target/tools/bin`, `cargo install --locked` at a pinned version); `None` if neither.
pub fn path() -> Option<PathBuf> {
    let installed = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/tools/bin/oha"
    ));
    on_path("oha").or_else(|| installed.is_file().then(|| installed.to_path_buf()))
}

/// Parses oha's `--output-format json` report: latencies are in seconds; requests are
/// the responses of every status (`statusCodeDistribution`); errors (refused, reset,
/// timed out) are counted apart (`errorDistribution`).
pub fn parse(text: &str) -> Result<Outcome, String> {
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
        hosts: Vec::new(),
    })
}
