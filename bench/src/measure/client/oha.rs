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

/// One answered request of oha's per-request records (`--db-url FILE`): seconds since
/// the run began. oha records only answered requests; errors are its report's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Record {
    /// When it was due (the open loop's schedule), else when it started.
    pub due_s: f64,
    /// When its answer had come.
    pub end_s: f64,
    /// From when it was due to its answer (`--latency-correction`), ms.
    pub latency_ms: f64,
    pub status: u16,
}

/// Calls `each` with every record oha left in the SQLite file `db`, in no set order.
pub fn each_record(db: &Path, mut each: impl FnMut(Record)) -> Result<(), String> {
    let fail = |e: rusqlite::Error| format!("oha's records in {}: {e}", db.display());
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(fail)?;
    let mut query = conn
        .prepare("SELECT COALESCE(start_latency_correction, start), end, status FROM oha")
        .map_err(fail)?;
    let mut rows = query.query([]).map_err(fail)?;
    while let Some(row) = rows.next().map_err(fail)? {
        let due_s: f64 = row.get(0).map_err(fail)?;
        let end_s: f64 = row.get(1).map_err(fail)?;
        // From when it was due, not from when oha could send it (its `duration` column):
        // a request queued behind a stalled connection waited too.
        each(Record {
            due_s,
            end_s,
            latency_ms: (end_s - due_s).max(0.0) * 1000.0,
            status: row.get::<_, i64>(2).map_err(fail)? as u16,
        });
    }
    Ok(())
}

/// The errors of oha's JSON report by kind (`errorDistribution`), the most first.
pub fn error_kinds(text: &str) -> Vec<(String, u64)> {
    let json: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_default();
    let mut kinds: Vec<(String, u64)> = json["errorDistribution"]
        .as_object()
        .map(|e| {
            e.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default();
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    kinds
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
