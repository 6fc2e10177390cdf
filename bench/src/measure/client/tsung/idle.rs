//! Tsung holding idle connections (`bench --idle-conns N --client tsung --client-hosts K`):
//! each host's node opens its share of N keep-alive connections from its own address, makes
//! one request on each, and waits — every connection open and quiet — until bench has read
//! the server's memory; then every connection makes one more request at once.
//!
//! - **Arrival**: users arrive at [`ARRIVALS`] a second over the whole fleet, each opening
//!   one connection (Tsung splits users and rate over the hosts).
//! - **The hold**: after its first answer a user blocks in an Erlang `eval` until the
//!   *release file* exists. One process per node polls for the file (every 100 ms) and the
//!   users wait on it with a monitor, so 100,000 users cost no polling of their own; once
//!   the file is there, each goes at a random moment within N ÷ [`RELEASE_RATE`] seconds
//!   (a user that arrives after the release goes on at once).
//! - **Rounds**: the two requests are told apart by their query (`/?round=1`,
//!   `/?round=2`) in each node's protocol log.

use std::fmt::Write as _;
use std::path::Path;

use hdrhistogram::Histogram;

use super::{histogram, node_dumps, split_url, Fleet, MAX_US};
use crate::model::client::HostLoad;

/// Users (connections) started per second over the whole fleet: a node starts about 2,600
/// connections a second on one CPU (docs/bench.md), so a fleet sharing one CPU lags
/// behind this rate rather than waits for it.
pub const ARRIVALS: usize = 5_000;

/// The longest a user waits for the release, in ms: past it, it makes its second request
/// anyway (a bench that died without releasing does not leave nodes waiting forever).
const HOLD_MAX_MS: u64 = 900_000;

/// Second-round requests a second, over the whole fleet, once released: the users go at
/// random moments over `n ÷ RELEASE_RATE` seconds. Each released user asks its node's one
/// session cache (a `gen_server`) for its next request, and a call that waits 5 s kills the
/// user: all at once, 12,824 of a node's 16,666 died; at 5,000 a second over six nodes on
/// one CPU, which answered about 4,200 a second, 6,798 of 100,000 still did, and 17 at
/// 2,000. A quarter of what that CPU answered.
pub const RELEASE_RATE: usize = 1_000;

/// The `eval` that holds a user until `release` exists (see the module's comment), then
/// lets it go at a random moment within `spread_ms`.
fn hold_fun(release: &Path, spread_ms: usize) -> String {
    let file = release.display().to_string().replace('"', "");
    format!(
        "fun({{_Pid, _DynVars}}) -> \
F = &quot;{file}&quot;, \
Poll = fun Poll() -> case filelib:is_file(F) of true -> ok; false -> timer:sleep(100), Poll() end end, \
Waiter = case whereis(archzoo_release) of \
undefined -> New = spawn(fun() -> receive start -> Poll() end end), \
case catch register(archzoo_release, New) of true -> New ! start, New; _ -> exit(New, kill), whereis(archzoo_release) end; \
Found -> Found end, \
case Waiter of undefined -> &quot;go&quot;; _ -> R = erlang:monitor(process, Waiter), \
receive {{'DOWN', R, process, _, _}} -> timer:sleep(rand:uniform({spread})), &quot;go&quot; after {HOLD_MAX_MS} -> &quot;late&quot; end end end.",
        spread = spread_ms.max(1)
    )
}

/// The configuration that holds `n` idle connections to `url` over the fleet until
/// `release` exists.
pub fn config(fleet: &Fleet, url: &str, n: usize, release: &Path) -> Result<String, String> {
    let (host, port, _) = split_url(url)?;
    // The phase is only a bound: once a node has started its share, it stops launching
    // (the last phase with its users all started ends), while a phase that ends first
    // drops the users not yet started — and a node launches more slowly than ARRIVALS
    // (each user is a call to the controller), so its bound is a pessimistic 100 a second.
    let arriving = n.div_ceil(100) as u64 + 30;
    let mut out = String::from(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE tsung SYSTEM \"/usr/share/tsung/tsung-1.0.dtd\">\n<tsung loglevel=\"warning\" dumptraffic=\"protocol_local\">\n  <clients>\n",
    );
    for h in &fleet.hosts {
        // One Erlang VM per host: its share must fit its own descriptor limit (checked
        // by the caller), not spill into a second VM.
        let _ = writeln!(
            out,
            "    <client host=\"{}\" use_controller_vm=\"false\" maxusers=\"{}\"/>",
            h.tsung_host,
            n + 1
        );
    }
    let _ = writeln!(
        out,
        "  </clients>\n  <servers>\n    <server host=\"{host}\" port=\"{port}\" type=\"tcp\"/>\n  </servers>\n  <load duration=\"{}\" unit=\"second\">\n    <arrivalphase phase=\"1\" duration=\"{arriving}\" unit=\"second\">\n      <users maxnumber=\"{n}\" arrivalrate=\"{ARRIVALS}\" unit=\"second\"/>\n    </arrivalphase>\n  </load>",
        arriving + HOLD_MAX_MS / 1000 + 60
    );
    let request = |round: u32| {
        format!("<request><http url=\"/?round={round}\" version=\"1.1\" method=\"GET\"></http></request>")
    };
    let _ = writeln!(
        out,
        "  <sessions>\n    <session name=\"idle\" probability=\"100\" type=\"ts_http\">\n      {}\n      <setdynvars sourcetype=\"eval\" code=\"{}\">\n        <var name=\"released\"/>\n      </setdynvars>\n      {}\n    </session>\n  </sessions>\n</tsung>",
        request(1),
        hold_fun(release, n * 1000 / RELEASE_RATE),
        request(2)
    );
    Ok(out)
}

/// What the fleet's protocol logs say of a hold: answers per round, per host, and how
/// long the second round's answers took.
#[derive(Debug, Clone, PartialEq)]
pub struct Rounds {
    /// Connections answered in the first round (the connections held), and in the second.
    pub first: u64,
    pub second: u64,
    /// Connections the server closed while they were idle: Tsung opens a closed one again
    /// for the next request (its `connect` count beyond the first round's), so a second
    /// answer alone does not prove the connection was held.
    pub reopened: u64,
    /// Tsung's own errors (its `error_*` counters): requests that failed in the client or
    /// on the way — a user that died before it sent, a refused connection — apart from the
    /// server's answers.
    pub errors: u64,
    /// Each host's connections answered in the first round.
    pub hosts: Vec<HostLoad>,
    /// The second round: from its first request's start to its last answer, in seconds.
    pub second_span_s: f64,
    /// The second round's latency: median, p99 and maximum, in ms.
    pub second_p50_ms: Option<f64>,
    pub second_p99_ms: Option<f64>,
    pub second_max_ms: Option<f64>,
}

/// Reads the hold's log folder (a `tsung-N.dump` and a `tsungN@HOST.log` per node).
pub fn read(dir: &Path) -> Result<Rounds, String> {
    let mut hosts = Vec::new();
    let (mut first, mut second) = (0, 0);
    let mut latency: Histogram<u64> = histogram()?;
    let (mut start, mut end) = (f64::INFINITY, 0.0f64);
    for (host, text) in node_dumps(dir)? {
        let mut held = 0;
        for f in text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split(';').collect::<Vec<_>>())
            .filter(|f| f.len() >= 12 && f[6].starts_with('2') && f[11].is_empty())
        {
            let (Ok(at), Ok(ms)) = (f[0].parse::<f64>(), f[8].parse::<f64>()) else {
                continue;
            };
            if f[5].ends_with("round=1") {
                held += 1;
            } else if f[5].ends_with("round=2") {
                second += 1;
                // The log's date is when the answer was logged: the request began `ms`
                // before it.
                start = start.min(at - ms / 1000.0);
                end = end.max(at);
                let us = ((ms * 1000.0).round() as u64).clamp(1, MAX_US);
                latency.record(us).map_err(|e| format!("histogram: {e}"))?;
            }
        }
        first += held;
        hosts.push(HostLoad {
            host,
            requests: held,
            rps: 0.0,
            cpu_pct: None,
            stopped_at_s: None,
        });
    }
    let log = std::fs::read_to_string(dir.join("tsung.log")).unwrap_or_default();
    let connects = count_of(&log, "connect");
    let ms = |q: f64| (second > 0).then(|| latency.value_at_quantile(q) as f64 / 1000.0);
    Ok(Rounds {
        first,
        second,
        reopened: connects.saturating_sub(first),
        errors: super::error_counts(&log).0,
        hosts,
        second_span_s: if second > 0 { end - start } else { 0.0 },
        second_p50_ms: ms(0.5),
        second_p99_ms: ms(0.99),
        second_max_ms: (second > 0).then(|| latency.max() as f64 / 1000.0),
    })
}

/// The events named `name` over the whole run, from `tsung.log`'s statistics: a line per
/// interval, `stats: NAME COUNT MEAN STDDEV MAX MIN …`, COUNT that interval's.
fn count_of(log: &str, name: &str) -> u64 {
    log.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("stats:") && w.next() == Some(name))
                .then(|| w.next()?.parse::<u64>().ok())
                .flatten()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::super::{FleetHost, Reach};
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_hold_opens_n_connections_then_waits_for_the_release_file() {
        let fleet = Fleet {
            hosts: ["10.77.203.11", "10.77.203.12", "10.77.203.13"]
                .iter()
                .map(|h| FleetHost {
                    name: h.to_string(),
                    tsung_host: h.to_string(),
                })
                .collect(),
            reach: Reach::Ssh,
            dir: PathBuf::from("/tmp"),
        };
        let c = config(
            &fleet,
            "http://10.77.203.2:8080/",
            12_000,
            Path::new("/tmp/x/release-1"),
        )
        .unwrap();
        assert!(c.contains("<server host=\"10.77.203.2\" port=\"8080\" type=\"tcp\"/>"));
        assert_eq!(c.matches("<client host=").count(), 3);
        assert!(c.contains("<users maxnumber=\"12000\" arrivalrate=\"5000\" unit=\"second\"/>"));
        assert!(c.contains("<arrivalphase phase=\"1\" duration=\"150\""));
        assert!(c.contains("url=\"/?round=1\"") && c.contains("url=\"/?round=2\""));
        assert!(c.contains("filelib:is_file(F)") && c.contains("&quot;/tmp/x/release-1&quot;"));
        // Released over 12,000 ÷ 1,000 a second.
        assert!(c.contains("timer:sleep(rand:uniform(12000))"), "{c}");
        // The whole of it is one XML attribute: no bare quote or '<' inside the code.
        let code = c
            .split("code=\"")
            .nth(1)
            .unwrap()
            .split("\">")
            .next()
            .unwrap();
        assert!(!code.contains('<'), "{code}");
    }

    #[test]
    fn rounds_are_counted_per_host_from_the_protocol_logs() {
        let dir = std::env::temp_dir().join(format!("archzoo-tsung-idle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let line = |t: f64, url: &str, status: u16, ms: f64, error: &str| {
            format!("{t};<0.1.0>;1;get;10.77.203.2;{url};{status};132;{ms};-;;{error};\n")
        };
        let a = line(1.0, "/?round=1", 200, 1.0, "")
            + &line(1.1, "/?round=1", 200, 1.0, "")
            + &line(5.0, "/?round=2", 200, 10.0, "")
            + &line(5.2, "/?round=2", 200, 30.0, "");
        let b = line(1.0, "/?round=1", 200, 1.0, "")
            + &line(1.2, "/?round=1", 503, 1.0, "")
            + &line(5.1, "/?round=2", 200, 20.0, "");
        std::fs::write(dir.join("tsung-0.dump"), a).unwrap();
        std::fs::write(dir.join("tsung-1.dump"), b).unwrap();
        std::fs::write(dir.join("tsung0@10.77.203.11.log"), "").unwrap();
        std::fs::write(dir.join("tsung1@10.77.203.12.log"), "").unwrap();
        std::fs::write(dir.join("tsung_controller@10.77.203.1.log"), "").unwrap();
        // One connection closed while idle and opened again for the second round.
        std::fs::write(
            dir.join("tsung.log"),
            "stats: connect 3 2.4 1.8 24.2 0.2 0 0\nstats: connect 0 0 0 24.2 0.2 2.4 3\nstats: connect 1 116.2 61.0 298.3 0.2 2.4 3\nstats: connected 0 3\n",
        )
        .unwrap();
        let r = read(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!((r.first, r.second, r.reopened, r.errors), (3, 3, 1, 0));
        assert_eq!(r.hosts[0].host, "10.77.203.11");
        assert_eq!((r.hosts[0].requests, r.hosts[1].requests), (2, 1));
        // From 4.99 (5.0 − 10 ms) to 5.2.
        assert!((r.second_span_s - 0.21).abs() < 1e-6, "{}", r.second_span_s);
        // Three significant digits: 20 ms is held as 20.015.
        assert!((r.second_p50_ms.unwrap() - 20.0).abs() < 0.1);
        assert!((r.second_max_ms.unwrap() - 30.0).abs() < 0.1);
    }
}
