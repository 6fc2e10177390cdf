//! `bench --soak DURATION [--chaos PLAN]`: each server under one steady open-loop load for
//! minutes — oha at `--rate` (or at a share of the capacity `--slo` finds first), every
//! request recorded (`--db-url`) — the server's processes sampled every second, and the
//! faults of `--chaos` injected while the load goes on.
//!
//! One server a soak, started once: what is measured is whether it stays as it began.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::measure::cell::{start_server, CellSpec, Plan, Target};
use crate::measure::client::{self, oha, Amount, Load};
use crate::measure::server;
use crate::measure::soak::{Tally, Targets, Watch};
use crate::model::client::Client;
use crate::model::slo;
use crate::model::soak::{self as model, Fault, Second, Soak};
use variants::launch;

/// The load of a soak: a fixed rate, or a share of each server's capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    Fixed(u32),
    /// A share (0–1) of the capacity at the latency target, searched first.
    OfCapacity(f64),
}

impl std::str::FromStr for Rate {
    type Err = String;
    /// `5000`, or `80%`.
    fn from_str(s: &str) -> Result<Rate, String> {
        let bad = || {
            format!("--rate takes requests per second (5000) or, with --soak, a share of the capacity (80%), not '{s}'")
        };
        match s.strip_suffix('%') {
            Some(pct) => {
                let pct: f64 = pct.parse().map_err(|_| bad())?;
                if !(pct > 0.0 && pct <= 100.0) {
                    return Err(bad());
                }
                Ok(Rate::OfCapacity(pct / 100.0))
            }
            None => match s.parse::<u32>() {
                Ok(n) if n > 0 => Ok(Rate::Fixed(n)),
                _ => Err(bad()),
            },
        }
    }
}

/// What every soak of a run shares.
pub struct Setup<'a> {
    pub plan: &'a Plan,
    pub duration: Duration,
    pub rate: Rate,
    pub faults: &'a [Fault],
    /// The capacity's latency target for `Rate::OfCapacity`.
    pub slo: slo::Target,
    /// The CPUs of the database (`restart-db` places the restarted one there); `None`
    /// when no workload needs one.
    pub db_cpus: Option<Vec<usize>>,
}

/// Soaks every target in turn.
pub fn run(setup: &Setup, targets: &[(Target, CellSpec)]) -> Vec<Soak> {
    targets
        .iter()
        .map(|(target, spec)| one(setup, target, spec))
        .collect()
}

/// The rate to soak `target` at: the fixed one, or its share of the capacity a search
/// finds (2 s probes after a 1 s warm-up), and whether that capacity is where the client
/// ran out rather than the server; `Err` when none kept the target.
fn rate_of(setup: &Setup, target: &Target, spec: &CellSpec) -> Result<(u32, bool), String> {
    let share = match setup.rate {
        Rate::Fixed(n) => return Ok((n, false)),
        Rate::OfCapacity(share) => share,
    };
    let probe_plan = Plan {
        client: Client::Oha,
        pipeline: None,
        amount: Amount::Duration(Duration::from_secs(2)),
        warmup: Some(Duration::from_secs(1)),
        ..setup.plan.clone()
    };
    let probes = crate::modes::slo::search(
        &probe_plan,
        target,
        spec,
        &setup.slo,
        slo::START,
        slo::MAX_PROBES,
    );
    let found = slo::found(&setup.slo, &probes);
    match found.capacity {
        slo::Capacity::Kept(capacity) => {
            if found.clients {
                eprintln!(
                    "soak: {}: {capacity} req/s is where oha ran out of CPU, not the server: the soak's rate is a share of what the client can offer",
                    target.name()
                );
            }
            Ok((((f64::from(capacity) * share) as u32).max(1), found.clients))
        }
        other => Err(format!(
            "no rate to soak at: its capacity at {} is {other}",
            setup.slo
        )),
    }
}

fn one(setup: &Setup, target: &Target, spec: &CellSpec) -> Soak {
    let plan = setup.plan;
    let duration_s = setup.duration.as_secs().max(1) as u32;
    let model_text = target.model();
    let expected = match target {
        Target::Model(v) => model::expected(v),
        Target::Peer(_) => "a real server: measured, not modelled".to_string(),
        Target::Url(_) => String::new(),
    };
    let work_us = plan.work_us_of(target);
    let missing = |why: String| Soak {
        workers: spec.workers,
        workload: spec.workload.name.to_string(),
        work_us,
        duration_s,
        expected: expected.clone(),
        ..Soak::missing(target.name(), &model_text, why)
    };
    let (rate, capacity_is_the_clients) = match rate_of(setup, target, spec) {
        Ok(found) => found,
        Err(why) => return missing(why),
    };
    let server = match start_server(plan, target, spec) {
        Ok(Some(server)) => server,
        Ok(None) => return missing("--soak measures a server it starts: not --url".into()),
        Err(why) => return missing(format!("FAILED: {why}")),
    };
    let dir = match tempdir() {
        Ok(dir) => dir,
        Err(why) => return missing(why),
    };
    let records = dir.join("oha.sqlite");
    let url = format!("http://{}{}", server.addr, spec.workload.path);
    let load = Load {
        client: Client::Oha,
        url: &url,
        connections: spec.connections,
        keep_alive: spec.keep_alive,
        amount: Amount::Duration(setup.duration),
        pipeline: None,
        script: &plan.script,
        rate: Some(rate),
        fleet: None,
        from: None,
        threads: plan.client_cpus.len(),
    };
    let mut argv = match client::command(&load) {
        Ok(argv) => argv,
        Err(why) => return missing(why),
    };
    // Every answered request, for the seconds and the faults: before the URL.
    argv.insert(argv.len() - 1, "--db-url".into());
    argv.insert(argv.len() - 1, records.display().to_string());
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    eprintln!(
        "soak: {} at {rate} req/s for {duration_s} s{}",
        target.name(),
        if setup.faults.is_empty() {
            String::new()
        } else {
            format!(
                ", faults: {}",
                setup
                    .faults
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    let began = Instant::now();
    let mut child = match launch::spawn_pinned(cmd, &plan.client_cpus) {
        Ok(child) => child,
        Err(e) => return missing(format!("cannot run oha: {e}")),
    };
    let watch = Watch::start(
        Targets {
            root: server.pid(),
            port: server.addr.port(),
            db_cpus: setup.db_cpus.clone(),
            watch_cpus: plan.client_cpus.clone(),
            server_cpus: plan.server_cpus.clone(),
            client: child.id() as i32,
        },
        setup.faults.to_vec(),
        began,
    );
    let reader = launch::read_stdout(&mut child);
    // The load, then oha writing every record: a minute or two for millions.
    let (code, _) = launch::wait_pinned(&mut child, setup.duration + Duration::from_secs(300));
    let watched = watch.stop();
    let text = reader.join().unwrap_or_default();
    let stats = server.stop(server::STOP_GRACE);
    let outcome = match client::parse(Client::Oha, &text) {
        Ok(o) => o,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return missing(match code {
                None => "oha overran its time limit and was killed".into(),
                Some(c) => format!("oha exited with {c}: {e}"),
            });
        }
    };
    let mut tally = Tally::new(rate, duration_s, model::warm_up_s(duration_s));
    let read = oha::each_record(&records, |r| tally.add(r));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(why) = read {
        return missing(why);
    }
    let tallied = tally.finish(&watched.hits);
    let seconds = tallied
        .seconds
        .iter()
        .enumerate()
        .map(|(at, &(answered, p99_ms))| {
            let sample = watched.samples.iter().find(|s| s.at_s as usize == at);
            Second {
                at_s: at as u32,
                rss_kib: sample.map_or(0, |s| s.rss_kib),
                fds: sample.map_or(0, |s| s.fds),
                sockets: sample.map_or_else(Vec::new, |s| s.sockets.clone()),
                cpu_pct: sample.map_or(0.0, |s| s.cpu_pct),
                answered,
                p99_ms,
                steal_pct: sample.map_or(0.0, |s| s.steal_pct),
                client_cpu_pct: sample.map_or(0.0, |s| s.client_cpu_pct),
                client_lag_ms: tallied.client_lag_ms.get(at).copied().unwrap_or(0.0),
            }
        })
        .collect();
    let server_requests = matches!(target, Target::Model(_)).then(|| {
        stats
            .iter()
            .filter_map(|l| l["requests"].as_u64())
            .sum::<u64>()
    });
    Soak {
        variant: target.name().to_string(),
        model: model_text,
        workers: spec.workers,
        workload: spec.workload.name.to_string(),
        work_us,
        rate,
        capacity_is_the_clients,
        duration_s,
        client_cpus: plan.client_cpus.len(),
        missing: None,
        seconds,
        faults: tallied.faults,
        sent: outcome.requests + outcome.failed,
        answered: outcome.requests,
        errors: outcome.failed,
        error_kinds: oha::error_kinds(&text),
        failed_statuses: tallied.failed_statuses,
        due: u64::from(rate) * u64::from(duration_s),
        server_requests,
        p99_first_ms: tallied.p99_first_ms,
        p99_last_ms: tallied.p99_last_ms,
        expected,
    }
}

/// A fresh folder for oha's records (under the system's temporary folder).
fn tempdir() -> Result<std::path::PathBuf, String> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("archzoo-soak-{}-{stamp}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_a_number_or_a_share_of_the_capacity() {
        assert_eq!("5000".parse::<Rate>(), Ok(Rate::Fixed(5000)));
        assert_eq!("80%".parse::<Rate>(), Ok(Rate::OfCapacity(0.8)));
        assert!("0".parse::<Rate>().is_err());
        assert!("120%".parse::<Rate>().is_err());
        assert!("fast".parse::<Rate>().unwrap_err().contains("80%"));
    }
}
