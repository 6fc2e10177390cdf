//! The load generators by name, and what one reported for a run: the model's side of a
//! client. How each one is run and read is `measure::client`.

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
    /// Tsung: a distributed client — one node per client host (`--client-hosts`), users
    /// split over them by its controller; latency per request from its protocol logs.
    Tsung,
}

impl Client {
    /// The command's own name, as a person types it.
    pub fn command(self) -> &'static str {
        match self {
            Client::Ab => "ab",
            Client::Wrk => "wrk",
            Client::Oha => "oha",
            Client::Tsung => "tsung",
        }
    }
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
    /// A distributed client's hosts, each with its share (Tsung); empty for one process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostLoad>,
}

/// One client host's share of a distributed run: what it sent, and what its node cost it
/// — the figure that says whether the fleet, or one host of it, was the bottleneck.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostLoad {
    /// The host's name (a test host's namespace, or a real host's name).
    pub host: String,
    pub requests: u64,
    pub rps: f64,
    /// The host's Tsung node's CPU time ÷ the run's wall time, in percent of one CPU;
    /// `None` where it cannot be read (a real host).
    pub cpu_pct: Option<f64>,
    /// When its node stopped while the others ran on (killed, crashed), in seconds from
    /// the run's start: its share ends there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at_s: Option<f64>,
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
