//! ApacheBench (`ab`): what the posts used — HTTP/1.0, one thread, latency in whole ms.

use super::{number_after, on_path, tail, Amount, Load, Tool};
use crate::model::client::Outcome;

pub struct Ab;

impl Tool for Ab {
    fn argv(&self, load: &Load) -> Result<Vec<String>, String> {
        if load.pipeline.is_some() {
            return Err("ab cannot pipeline requests; use --client wrk".into());
        }
        let mut args: Vec<String> = vec!["ab".into()];
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
        args.extend([
            "-c".into(),
            load.connections.to_string(),
            "-s".into(),
            "10".into(),
        ]);
        if load.keep_alive {
            args.push("-k".into());
        }
        args.push(load.url.to_string());
        Ok(args)
    }

    fn parse(&self, text: &str) -> Result<Outcome, String> {
        parse(text)
    }

    fn installed(&self) -> bool {
        on_path("ab").is_some()
    }
}

/// Parses ab's report. Its latency table is in whole milliseconds.
pub fn parse(text: &str) -> Result<Outcome, String> {
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
        hosts: Vec::new(),
    })
}
