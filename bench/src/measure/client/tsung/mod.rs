//! Tsung: the distributed client. A controller (here) starts one node on every client
//! host, splits the users and arrival rates over them and stops them at the end — load
//! beyond what one client process, or one machine, can send.
//!
//! - **Hosts**: test hosts (network namespaces, `measure::hosts`) are reached through a
//!   script that enters the namespace (Tsung's `-r`), named by address (the controller runs
//!   with `-I` and long node names, which need a dotted host); real hosts through ssh,
//!   Tsung's own connector.
//! - **Closed loop** (`-c N`): N users arrive within a tenth of a second, each looping on
//!   one keep-alive connection (or a new connection per request with `Connection: close`)
//!   until its own deadline — ending by itself, so that its node writes out its whole log.
//!   **Open loop** (`--rate R`): R users arrive per second, each sending one request on a
//!   connection of its own.
//! - **Figures**: Tsung's own log gives only means, so every request is logged on its node
//!   (`dumptraffic="protocol_local"`: a line each, the duration in ms) and the nodes' logs
//!   are merged here into one HDR histogram (the `hdrhistogram` crate) for the percentiles,
//!   and counted per node for each host's share.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use hdrhistogram::Histogram;

use super::{on_path, tail, Amount, Load, Tool};
use crate::model::client::{HostLoad, Outcome};

pub mod idle;

pub struct Tsung;

/// Where Tsung's nodes run, and where its files go.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub hosts: Vec<FleetHost>,
    pub reach: Reach,
    /// Configurations, the remote script and Tsung's logs (one folder per run).
    pub dir: PathBuf,
}

/// One client host as Tsung knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetHost {
    /// The name the figures give it (a test host's namespace, a real host's name).
    pub name: String,
    /// What Tsung's `<client host=…>` says: the address of a test host (a dotted name for
    /// the controller's long node names), a real host's name.
    pub tsung_host: String,
}

/// How the controller starts a node on a host.
#[derive(Debug, Clone, PartialEq)]
pub enum Reach {
    /// Test hosts: `ip netns exec NAMESPACE` (through a script Tsung runs as `-r`), each
    /// node pinned to `cpus`; the controller listens on `controller` (the bridge's end).
    TestHosts {
        controller: std::net::Ipv4Addr,
        namespaces: Vec<String>,
        cpus: Vec<usize>,
    },
    /// Real hosts over ssh (Tsung's default connector: passwordless ssh to each, Tsung
    /// installed on each, and the controller's host name resolvable from them).
    Ssh,
}

impl Tool for Tsung {
    fn argv(&self, load: &Load) -> Result<Vec<String>, String> {
        let fleet = load.fleet.ok_or(
            "--client tsung needs --client-hosts (test hosts: a number; real hosts: names)",
        )?;
        if load.pipeline.is_some() {
            return Err("tsung does not pipeline requests; use --client wrk".into());
        }
        let (file, logs) = fleet.run_files("tsung")?;
        std::fs::write(&file, config(fleet, load)?)
            .map_err(|e| format!("{}: {e}", file.display()))?;
        fleet.argv(&file, &logs)
    }

    fn parse(&self, text: &str) -> Result<Outcome, String> {
        let dir = log_dir(text)?;
        let outcome = read_logs(&dir);
        // The per-request logs are large (a line a request) and now read: not kept.
        let _ = std::fs::remove_dir_all(&dir);
        outcome
    }

    fn installed(&self) -> bool {
        on_path("tsung").is_some()
    }
}

impl Fleet {
    /// A new configuration file's path in the fleet's folder, and the log folder of its
    /// run (both numbered: one pair per run, `stem-N.xml` and `logs-N`).
    pub fn run_files(&self, stem: &str) -> Result<(PathBuf, PathBuf), String> {
        static RUN: AtomicU32 = AtomicU32::new(0);
        let n = RUN.fetch_add(1, Ordering::Relaxed);
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        Ok((
            self.dir.join(format!("{stem}-{n}.xml")),
            self.dir.join(format!("logs-{n}")),
        ))
    }

    /// The controller's command line for the configuration `file`, logging under `logs`:
    /// on test hosts, through the script that enters each host, listening on the bridge.
    pub fn argv(&self, file: &Path, logs: &Path) -> Result<Vec<String>, String> {
        let mut argv = vec![
            "tsung".to_string(),
            "-f".into(),
            file.display().to_string(),
            "-l".into(),
            logs.display().to_string(),
            // No web interface on port 8091 while it runs.
            "-n".into(),
        ];
        if let Reach::TestHosts {
            controller,
            namespaces,
            cpus,
        } = &self.reach
        {
            let script = self.dir.join("enter-host.sh");
            std::fs::write(&script, enter_script(&self.hosts, namespaces, cpus))
                .map_err(|e| format!("{}: {e}", script.display()))?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| e.to_string())?;
            argv.extend([
                "-r".into(),
                script.display().to_string(),
                "-I".into(),
                controller.to_string(),
            ]);
        }
        argv.push("start".into());
        Ok(argv)
    }
}

/// The log folder a run of Tsung names on its standard output.
pub fn log_dir(text: &str) -> Result<PathBuf, String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Log directory is:"))
        .map(|d| PathBuf::from(d.trim()))
        .ok_or_else(|| format!("tsung named no log directory: {}", tail(text)))
}

/// The script Tsung runs as its remote shell (`-r`): `SCRIPT HOST COMMAND…` starts the
/// node's command inside that host's namespace, pinned to the client CPUs.
pub fn enter_script(hosts: &[FleetHost], namespaces: &[String], cpus: &[usize]) -> String {
    let mut out = String::from(
        "#!/bin/sh\n# Written by archzoo's bench: Tsung's remote shell for its test hosts.\nhost=$1; shift\ncase $host in\n",
    );
    for (h, ns) in hosts.iter().zip(namespaces) {
        let _ = writeln!(out, "    {}) ns={ns} ;;", h.tsung_host);
    }
    out.push_str("    *) echo \"not an archzoo test host: $host\" >&2; exit 1 ;;\nesac\n");
    let pin = if cpus.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
        format!("taskset -c {} ", list.join(","))
    };
    let _ = writeln!(out, "exec ip netns exec \"$ns\" {pin}sh -c \"$*\"");
    out
}

/// The server's host and port, and the path, of a `http://HOST:PORT/PATH` address.
fn split_url(url: &str) -> Result<(&str, u16, &str), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("tsung takes an http:// address, not {url}"))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (host, port) = authority.rsplit_once(':').unwrap_or((authority, "80"));
    let port = port.parse().map_err(|_| format!("no port in {url}"))?;
    Ok((host, port, if path.is_empty() { "/" } else { path }))
}

/// Whether the user's deadline has come: `go` until it has, then `stop` (a dynamic
/// variable may come back as a binary or a string).
const UNTIL: &str = "fun({_Pid, DynVars}) -> {ok, D} = ts_dynvars:lookup(deadline, DynVars), case erlang:monotonic_time(millisecond) &lt; list_to_integer(if is_binary(D) -> binary_to_list(D); true -> D end) of true -> &quot;go&quot;; false -> &quot;stop&quot; end end.";

/// The configuration of one run: the fleet's hosts, the server, the load (closed or open
/// loop) and the session (one GET of the workload's path).
pub fn config(fleet: &Fleet, load: &Load) -> Result<String, String> {
    let Amount::Duration(d) = load.amount else {
        return Err("tsung runs for a duration; use --duration with --client tsung".into());
    };
    let (host, port, path) = split_url(load.url)?;
    let seconds = d.as_secs().max(1);
    let mut out = String::from(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE tsung SYSTEM \"/usr/share/tsung/tsung-1.0.dtd\">\n",
    );
    // protocol_local: each node logs its own requests (the controller would be the
    // bottleneck at tens of thousands a second); warning: Tsung's own logging is not.
    out.push_str("<tsung loglevel=\"warning\" dumptraffic=\"protocol_local\">\n  <clients>\n");
    for h in &fleet.hosts {
        let _ = writeln!(
            out,
            "    <client host=\"{}\" use_controller_vm=\"false\" maxusers=\"60000\"/>",
            h.tsung_host
        );
    }
    // The load's own duration is only a bound: the users end by themselves when the run's
    // time is up, and only then does each node write out the last of its request log
    // (a node stopped by the clock loses its last buffer, up to a thousand requests).
    let _ = writeln!(
        out,
        "  </clients>\n  <servers>\n    <server host=\"{host}\" port=\"{port}\" type=\"tcp\"/>\n  </servers>\n  <load duration=\"{}\" unit=\"second\">",
        seconds + 30
    );
    match load.rate {
        // Open loop: a user per request, arriving at the rate for the whole run.
        Some(rate) => {
            let _ = writeln!(
                out,
                "    <arrivalphase phase=\"1\" duration=\"{seconds}\" unit=\"second\">\n      <users arrivalrate=\"{rate}\" unit=\"second\"/>\n    </arrivalphase>"
            );
        }
        // Closed loop: the connections' users arrive within a tenth of a second, then
        // loop. (At 1,000 a second, split over two hosts, only 33 of 64 users arrived in
        // the phase's second here: the rate is the hosts' together.)
        None => {
            let c = load.connections.max(1);
            let _ = writeln!(
                out,
                "    <arrivalphase phase=\"1\" duration=\"1\" unit=\"second\">\n      <users maxnumber=\"{c}\" arrivalrate=\"{}\" unit=\"second\"/>\n    </arrivalphase>",
                (c * 10).max(10_000)
            );
        }
    }
    out.push_str("  </load>\n  <sessions>\n    <session name=\"get\" probability=\"100\" type=\"ts_http\">\n");
    let header = if load.keep_alive {
        String::new()
    } else {
        "<http_header name=\"Connection\" value=\"close\"/>".to_string()
    };
    let request = format!(
        "<request><http url=\"{path}\" version=\"1.1\" method=\"GET\">{header}</http></request>"
    );
    if load.rate.is_some() {
        let _ = writeln!(out, "      {request}");
    } else {
        // Each user loops until its own deadline, `seconds` after it arrived (Erlang,
        // evaluated by Tsung on the user's node).
        let _ = writeln!(
            out,
            "      <setdynvars sourcetype=\"eval\" code=\"fun({{_Pid, _DynVars}}) -> integer_to_list(erlang:monotonic_time(millisecond) + {ms}) end.\">\n        <var name=\"deadline\"/>\n      </setdynvars>\n      <repeat name=\"loop\" max_repeat=\"2000000000\">\n        {request}\n        <setdynvars sourcetype=\"eval\" code=\"{UNTIL}\">\n          <var name=\"go\"/>\n        </setdynvars>\n        <while var=\"go\" eq=\"go\"/>\n      </repeat>",
            ms = seconds * 1000
        );
    }
    out.push_str("    </session>\n  </sessions>\n</tsung>\n");
    Ok(out)
}

/// One node's requests, from its protocol log.
struct NodeLog {
    requests: u64,
    non_2xx: u64,
    errors: u64,
    first: f64,
    last: f64,
    latency: Histogram<u64>,
}

/// The longest latency the histograms hold, in µs (a minute); longer ones are clamped.
const MAX_US: u64 = 60_000_000;

/// An empty latency histogram: 1 µs to [`MAX_US`], three significant digits.
fn histogram() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, MAX_US, 3).map_err(|e| format!("histogram: {e}"))
}

/// Reads one node's `tsung-N.dump`: `date;pid;id;method;host;url;status;size;duration
/// (ms);transaction;match;error;tag`, a line per request.
fn read_dump(text: &str) -> Result<NodeLog, String> {
    let mut log = NodeLog {
        requests: 0,
        non_2xx: 0,
        errors: 0,
        first: f64::INFINITY,
        last: 0.0,
        latency: histogram()?,
    };
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let f: Vec<&str> = line.split(';').collect();
        if f.len() < 12 {
            continue;
        }
        let (Ok(date), Ok(ms)) = (f[0].parse::<f64>(), f[8].parse::<f64>()) else {
            continue;
        };
        log.requests += 1;
        log.first = log.first.min(date);
        log.last = log.last.max(date);
        if !f[6].starts_with('2') {
            log.non_2xx += 1;
        }
        if !f[11].is_empty() {
            log.errors += 1;
        }
        let us = ((ms * 1000.0).round() as u64).clamp(1, MAX_US);
        log.latency
            .record(us)
            .map_err(|e| format!("histogram: {e}"))?;
    }
    Ok(log)
}

/// Tsung's error counters from the last `stats: error_…` lines of `tsung.log` (their
/// running totals): connections refused, timeouts, … — requests that never got an answer
/// and so are in no protocol log. `error_abort` (users stopped when the load's time was up,
/// a request in flight) is not an error of the server's.
fn error_counts(log: &str) -> (u64, u64) {
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    for line in log.lines() {
        let mut words = line.split_whitespace();
        if words.next() != Some("stats:") {
            continue;
        }
        let Some(name) = words.next().filter(|n| n.starts_with("error_")) else {
            continue;
        };
        if let Some(total) = words.nth(1).and_then(|t| t.parse().ok()) {
            totals.insert(name, total);
        }
    }
    let failed = totals
        .iter()
        .filter(|(n, _)| **n != "error_abort")
        .map(|(_, v)| v)
        .sum();
    let timeouts = totals
        .iter()
        .filter(|(n, _)| n.contains("timeout"))
        .map(|(_, v)| v)
        .sum();
    (failed, timeouts)
}

/// Each node's host and protocol log (`tsungN@HOST.log` names node N's host; its requests
/// are in `tsung-N.dump`; the controller's own log is no node's), ordered by host; an error
/// when no node ran.
fn node_dumps(dir: &Path) -> Result<Vec<(String, String)>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut nodes = Vec::new();
    for name in entries.filter_map(|e| e.ok()?.file_name().into_string().ok()) {
        let Some((index, host)) = name
            .strip_suffix(".log")
            .and_then(|n| n.strip_prefix("tsung"))
            .and_then(|n| n.split_once('@'))
            .and_then(|(node, host)| Some((node.parse::<u32>().ok()?, host)))
        else {
            continue;
        };
        let dump =
            std::fs::read_to_string(dir.join(format!("tsung-{index}.dump"))).unwrap_or_default();
        nodes.push((host.to_string(), dump));
    }
    if nodes.is_empty() {
        return Err(format!(
            "no Tsung node ran (no node log in {}): see its tsung_controller log there",
            dir.display()
        ));
    }
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(nodes)
}

/// The figures of a run from its log folder: every node's protocol log merged, each
/// node's share, and the error counters.
pub fn read_logs(dir: &Path) -> Result<Outcome, String> {
    let mut nodes: Vec<(String, NodeLog)> = Vec::new();
    for (host, dump) in node_dumps(dir)? {
        nodes.push((host, read_dump(&dump)?));
    }
    let requests: u64 = nodes.iter().map(|(_, n)| n.requests).sum();
    let first = nodes
        .iter()
        .map(|(_, n)| n.first)
        .fold(f64::INFINITY, f64::min);
    let last = nodes.iter().map(|(_, n)| n.last).fold(0.0, f64::max);
    let span = (last - first).max(1e-3);
    let mut all = histogram()?;
    for (_, n) in &nodes {
        all.add(&n.latency).map_err(|e| format!("histogram: {e}"))?;
    }
    let log = std::fs::read_to_string(dir.join("tsung.log")).unwrap_or_default();
    let (failed, timeouts) = error_counts(&log);
    let ms = |q: f64| (requests > 0).then(|| all.value_at_quantile(q) as f64 / 1000.0);
    Ok(Outcome {
        requests,
        rps: if requests > 0 {
            requests as f64 / span
        } else {
            0.0
        },
        failed: failed + nodes.iter().map(|(_, n)| n.errors).sum::<u64>(),
        non_2xx: nodes.iter().map(|(_, n)| n.non_2xx).sum(),
        timeouts,
        keep_alive_requests: None,
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        p90_ms: ms(0.9),
        p999_ms: ms(0.999),
        max_ms: (requests > 0).then(|| all.max() as f64 / 1000.0),
        hosts: nodes
            .iter()
            .map(|(host, n)| HostLoad {
                host: host.clone(),
                requests: n.requests,
                rps: n.requests as f64 / span,
                cpu_pct: None,
                stopped_at_s: None,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn fleet(reach: Reach) -> Fleet {
        Fleet {
            hosts: vec![
                FleetHost {
                    name: "a".into(),
                    tsung_host: "a".into(),
                },
                FleetHost {
                    name: "b".into(),
                    tsung_host: "b".into(),
                },
            ],
            reach,
            dir: PathBuf::from("/tmp"),
        }
    }

    fn load<'a>(fleet: &'a Fleet, keep_alive: bool, rate: Option<u32>) -> Load<'a> {
        Load {
            client: crate::model::client::Client::Tsung,
            url: "http://server.example:8080/sum",
            connections: 64,
            keep_alive,
            amount: Amount::Duration(Duration::from_secs(3)),
            pipeline: None,
            script: Path::new("/nonexistent"),
            rate,
            fleet: Some(fleet),
            from: None,
            threads: 1,
        }
    }

    #[test]
    fn the_configuration_for_real_hosts_names_each_host_and_the_load() {
        let f = fleet(Reach::Ssh);
        let closed = config(&f, &load(&f, true, None)).unwrap();
        assert!(closed.contains("<client host=\"a\" use_controller_vm=\"false\""));
        assert!(closed.contains("<client host=\"b\" use_controller_vm=\"false\""));
        assert!(closed.contains("<server host=\"server.example\" port=\"8080\" type=\"tcp\"/>"));
        assert!(closed.contains("<load duration=\"33\" unit=\"second\">"));
        assert!(closed.contains("erlang:monotonic_time(millisecond) + 3000"));
        assert!(closed.contains("<users maxnumber=\"64\" arrivalrate=\"10000\" unit=\"second\"/>"));
        assert!(closed.contains("<while var=\"go\" eq=\"go\"/>"));
        assert!(closed.contains("<http url=\"/sum\" version=\"1.1\" method=\"GET\"></http>"));
        assert!(closed.contains("dumptraffic=\"protocol_local\""));
        let close = config(&f, &load(&f, false, None)).unwrap();
        assert!(close.contains("<http_header name=\"Connection\" value=\"close\"/>"));
        let open = config(&f, &load(&f, true, Some(5000))).unwrap();
        assert!(open.contains("<users arrivalrate=\"5000\" unit=\"second\"/>"));
        assert!(!open.contains("<repeat "));
        // Real hosts: Tsung's own ssh, no remote script, no -I.
        let argv = Tsung.argv(&load(&f, true, None)).unwrap();
        assert!(!argv.contains(&"-r".to_string()) && !argv.contains(&"-I".to_string()));
        assert_eq!(argv.last().map(String::as_str), Some("start"));
    }

    #[test]
    fn test_hosts_are_entered_by_namespace_and_pinned() {
        let hosts = vec![
            FleetHost {
                name: "azh-c1".into(),
                tsung_host: "10.77.203.11".into(),
            },
            FleetHost {
                name: "azh-c2".into(),
                tsung_host: "10.77.203.12".into(),
            },
        ];
        let s = enter_script(&hosts, &["azh-c1".into(), "azh-c2".into()], &[1]);
        assert!(s.contains("    10.77.203.11) ns=azh-c1 ;;"), "{s}");
        assert!(s.contains("    10.77.203.12) ns=azh-c2 ;;"), "{s}");
        assert!(
            s.contains("exec ip netns exec \"$ns\" taskset -c 1 sh -c \"$*\""),
            "{s}"
        );
    }

    #[test]
    fn node_logs_merge_into_one_histogram_and_a_share_per_host() {
        let dir = std::env::temp_dir().join(format!("archzoo-tsung-logs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let line = |t: f64, status: u16, ms: f64| {
            format!("{t};<0.137.0>;9;get;10.77.203.2;/;{status};132;{ms};-;;;\n")
        };
        let a: String = (0..99)
            .map(|i| line(100.0 + f64::from(i) / 100.0, 200, 1.0))
            .collect::<String>()
            + &line(101.0, 200, 50.0);
        let b: String = (0..50)
            .map(|i| line(100.0 + f64::from(i) / 50.0, 200, 2.0))
            .collect::<String>()
            + &line(102.0, 503, 2.0);
        std::fs::write(dir.join("tsung-0.dump"), a).unwrap();
        std::fs::write(dir.join("tsung-1.dump"), b).unwrap();
        std::fs::write(dir.join("tsung0@10.77.203.11.log"), "").unwrap();
        std::fs::write(dir.join("tsung1@10.77.203.12.log"), "").unwrap();
        std::fs::write(
            dir.join("tsung.log"),
            "stats: error_abort 1 1\nstats: error_connect_econnrefused 2 2\nstats: error_connect_econnrefused 0 3\n",
        )
        .unwrap();
        let o = read_logs(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(o.requests, 151);
        assert_eq!((o.non_2xx, o.failed), (1, 3));
        assert_eq!(o.hosts.len(), 2);
        assert_eq!((o.hosts[0].requests, o.hosts[1].requests), (100, 51));
        assert_eq!(o.hosts[0].host, "10.77.203.11");
        // 99 of host a's are 1 ms, 50 of b's 2 ms: the median is 1 ms, p99 2 ms, max 50.
        assert_eq!(o.p50_ms, Some(1.0));
        assert_eq!(o.p99_ms, Some(2.0));
        assert!((o.max_ms.unwrap() - 50.0).abs() < 0.1, "{:?}", o.max_ms);
        assert!((o.rps - 151.0 / 2.0).abs() < 1.0, "{}", o.rps);
    }
}
