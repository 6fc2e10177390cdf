//! `--soak DURATION`: one server under a steady open-loop load for minutes, a sample every
//! second, and the faults `--chaos` injected while it ran — the types, and the verdicts read
//! from them (measured by `modes::soak`).
//!
//! A run of a few seconds says how fast a server is; a soak says whether it stays so:
//! memory that grows a little every second, descriptors that leak, a tail that drifts,
//! and what a dying or stalled worker costs while the load goes on.

use serde::{Deserialize, Serialize};
use variants::Variant;

use super::cell::{is_zero, BOUND_PCT, STEAL_DISTURBS_PCT};

/// One second of a soak: the server as /proc saw it at its end, and the requests that
/// were due in it as the client saw them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Second {
    /// Seconds since the load began (this second is `at_s .. at_s + 1`).
    pub at_s: u32,
    /// Resident memory of every process of the server, KiB.
    pub rss_kib: u64,
    /// Open descriptors of every process of the server.
    pub fds: u64,
    /// Sockets each process of the server holds (its listener and connections), the most
    /// first: how the connections are spread over the workers.
    pub sockets: Vec<u32>,
    /// The server's CPU in this second, in percent of one CPU.
    pub cpu_pct: f64,
    /// Requests due in this second (the open loop's schedule) that were answered with a 2xx.
    pub answered: u64,
    /// Their p99 (from when each was due: coordinated omission corrected), ms.
    pub p99_ms: Option<f64>,
    /// Of the server CPUs' time in this second, the share the host took for something
    /// else while they had work (steal), in percent.
    #[serde(default)]
    pub steal_pct: f64,
    /// The client's CPU in this second (oha, every thread), in percent of one CPU: an open
    /// loop whose client is saturated sends late, and the lateness is counted as latency.
    #[serde(default)]
    pub client_cpu_pct: f64,
    /// How far behind its schedule the client stamped requests in this second, at most,
    /// ms ([`crate::measure::soak::schedule_lag_ms`]): oha stamps a request due when its
    /// scheduler wakes for it, so a starved client's waits, and the p99 above, are short
    /// by up to this.
    #[serde(default)]
    pub client_lag_ms: f64,
}

/// A fault `--chaos` injects: `kill-worker@30s`, `stop-worker@60s:2s` (`stop` for short),
/// `restart-db@90s`, `close-conns@120s`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum FaultKind {
    /// SIGKILL one worker process.
    KillWorker,
    /// SIGSTOP one worker, SIGCONT after `for_ms`: a stall (a GC pause, a blocking call).
    StopWorker { for_ms: u64 },
    /// Restart the PostgreSQL cluster (the `/pg` workloads).
    RestartDb,
    /// Close every client connection at once, as a load balancer that restarts does.
    CloseConns,
}

/// One fault of a plan: what, and when (seconds after the load began).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    #[serde(flatten)]
    pub kind: FaultKind,
    pub at_s: f64,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            FaultKind::KillWorker => write!(f, "kill-worker@{}s", self.at_s),
            FaultKind::StopWorker { for_ms } => {
                write!(f, "stop-worker@{}s:{}s", self.at_s, for_ms as f64 / 1000.0)
            }
            FaultKind::RestartDb => write!(f, "restart-db@{}s", self.at_s),
            FaultKind::CloseConns => write!(f, "close-conns@{}s", self.at_s),
        }
    }
}

/// Parses a `--chaos` plan: faults separated by commas, each `KIND@TIME` (and `:DURATION`
/// for a stop), times such as `30s`, `1.5s`, `2m`, `500ms`.
pub fn parse_plan(text: &str) -> Result<Vec<Fault>, String> {
    let mut faults = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = |why: &str| {
            format!(
                "--chaos: '{part}': {why} (KIND@TIME: kill-worker@30s, stop-worker@60s:2s, restart-db@90s, close-conns@120s)"
            )
        };
        let (kind, when) = part.split_once('@').ok_or_else(|| bad("no @TIME"))?;
        let (at, lasting) = match when.split_once(':') {
            Some((at, lasting)) => (at, Some(lasting)),
            None => (when, None),
        };
        let at_s = seconds(at).ok_or_else(|| bad("not a time"))?;
        let kind = match (kind, lasting) {
            ("kill-worker", None) => FaultKind::KillWorker,
            ("stop-worker" | "stop", Some(d)) => FaultKind::StopWorker {
                for_ms: (seconds(d).ok_or_else(|| bad("not a duration"))? * 1000.0) as u64,
            },
            ("stop-worker" | "stop", None) => return Err(bad("a stop needs :DURATION")),
            ("restart-db", None) => FaultKind::RestartDb,
            ("close-conns", None) => FaultKind::CloseConns,
            (_, Some(_)) => return Err(bad("only a stop takes :DURATION")),
            _ => return Err(bad("unknown fault")),
        };
        faults.push(Fault { kind, at_s });
    }
    faults.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    Ok(faults)
}

/// `30s`, `1.5s`, `2m`, `500ms`, `1h` in seconds.
pub fn seconds(text: &str) -> Option<f64> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = text.strip_suffix('h') {
        (n, 3600.0)
    } else {
        return None;
    };
    let v: f64 = number.parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v * scale)
}

/// What one fault cost, measured around it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultOutcome {
    pub fault: Fault,
    /// What was hit: "worker pid 4242", or why something else was (a one-process server
    /// has no worker to kill: the process is stopped instead).
    pub hit: String,
    /// Requests due from the fault until the rate was back that got no successful answer:
    /// none, a client error, or an error status (those are `failed` too).
    pub lost: u64,
    /// Of those, the ones answered with an error status (a 5xx while the database was
    /// down, a 502 from a reactor whose worker died).
    #[serde(default)]
    pub failed: u64,
    /// From the fault (a stop: from its end) until answers came at 95 % of the offered
    /// rate again, over 100 ms windows; `None`: not within the soak.
    pub recovered_after_ms: Option<u64>,
    /// The p99 of the requests due in the 5 s after the fault, ms.
    pub p99_after_ms: Option<f64>,
    /// How far behind its schedule the client fell in those 5 s, at most, ms: the p99 above
    /// is short by up to this (see [`Second::client_lag_ms`]).
    #[serde(default)]
    pub client_lag_ms: f64,
}

/// One server's soak.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Soak {
    pub variant: String,
    pub model: String,
    pub workers: usize,
    pub workload: String,
    /// µs of CPU the model's handler spent a request (`--work-us`; 0: none): a soak of a
    /// model given a cost per request, so that its capacity is its own and not the
    /// client's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub work_us: u32,
    /// The offered rate, req/s.
    pub rate: u32,
    /// The rate is a share of a capacity the client limited (`--rate N%`): oha ran out of
    /// CPU in the search's probe above it, so the share is of what the client can offer,
    /// and the soak may saturate the client still.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capacity_is_the_clients: bool,
    pub duration_s: u32,
    /// The CPUs the client ran on: its CPU each second is judged against them.
    #[serde(default)]
    pub client_cpus: usize,
    /// Why there are no figures (the server or the client did not run).
    #[serde(default)]
    pub missing: Option<String>,
    #[serde(default)]
    pub seconds: Vec<Second>,
    #[serde(default)]
    pub faults: Vec<FaultOutcome>,
    /// Requests the client sent (answered + errors: oha counts each it started).
    #[serde(default)]
    pub sent: u64,
    /// Requests answered, whatever their status (the failed ones are `failed_statuses`).
    #[serde(default)]
    pub answered: u64,
    #[serde(default)]
    pub errors: u64,
    /// The client's errors by kind, the most first.
    #[serde(default)]
    pub error_kinds: Vec<(String, u64)>,
    /// Answers with a status other than 2xx, by status, the most first: answered, but
    /// failed requests all the same.
    #[serde(default)]
    pub failed_statuses: Vec<(u16, u64)>,
    /// Requests the schedule made due (rate × duration): sent, or lost before sending.
    #[serde(default)]
    pub due: u64,
    /// Requests the server's workers counted (`--stats`; a killed worker's as its master
    /// reports it, from their shared counts); `None` for a peer.
    #[serde(default)]
    pub server_requests: Option<u64>,
    /// p99 of the first and the last minute after the warm-up (a soak under three minutes:
    /// its first and last third), ms.
    #[serde(default)]
    pub p99_first_ms: Option<f64>,
    #[serde(default)]
    pub p99_last_ms: Option<f64>,
    /// What the model predicts a fault does, beside what it did.
    #[serde(default)]
    pub expected: String,
}

/// Seconds of a soak left out of its verdicts: the first minute, or its first tenth when
/// it is shorter than ten minutes (pools filling, caches warming, allocators growing to
/// their working size).
pub fn warm_up_s(duration_s: u32) -> u32 {
    (duration_s / 10).min(60)
}

/// The windows the p99 drift compares, in seconds from the start of the load: the first
/// and the last minute after the warm-up (the first and last third of what follows the
/// warm-up, in a soak under three minutes after it).
pub fn windows(duration_s: u32, warm_up_s: u32) -> [(f64, f64); 2] {
    let d = f64::from(duration_s);
    let w = f64::from(warm_up_s.min(duration_s));
    let window = ((d - w) / 3.0).min(60.0);
    [(w, w + window), (d - window, d)]
}

/// Memory over a soak after its warm-up: the least-squares slope of RSS against time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Growth {
    /// KiB an hour, at the slope.
    pub kib_per_hour: f64,
    /// The slope's growth over the window, as a share of the RSS at its start.
    pub share: f64,
    /// Within noise: under 1 % over the window.
    pub flat: bool,
}

/// Which way memory went after the warm-up. A fall is not a leak: a process reforked
/// after a kill starts small again, and an allocator hands pages back — the verdict must
/// not print a shrinking server as growing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trend {
    Flat,
    Grows,
    Shrinks,
}

impl Growth {
    pub fn trend(&self) -> Trend {
        if self.flat {
            Trend::Flat
        } else if self.share > 0.0 {
            Trend::Grows
        } else {
            Trend::Shrinks
        }
    }
}

/// The memory verdict of `seconds` (after `warm_up_s` of them), `None` with fewer than
/// ten seconds to read.
pub fn memory_growth(seconds: &[Second], warm_up_s: u32) -> Option<Growth> {
    let points: Vec<(f64, f64)> = seconds
        .iter()
        .filter(|s| s.at_s >= warm_up_s && s.rss_kib > 0)
        .map(|s| (f64::from(s.at_s), s.rss_kib as f64))
        .collect();
    if points.len() < 10 {
        return None;
    }
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let span = points[points.len() - 1].0 - points[0].0;
    let start = my - slope * (mx - points[0].0);
    let share = if start > 0.0 {
        slope * span / start
    } else {
        0.0
    };
    Some(Growth {
        kib_per_hour: slope * 3600.0,
        share,
        flat: share.abs() < 0.01,
    })
}

/// Descriptors left open after the warm-up: the median of the last five seconds less the
/// median of the first five (a connection opening or closing at a sample is not a leak).
pub fn fds_leaked(seconds: &[Second], warm_up_s: u32) -> Option<i64> {
    let fds: Vec<u64> = seconds
        .iter()
        .filter(|s| s.at_s >= warm_up_s && s.fds > 0)
        .map(|s| s.fds)
        .collect();
    if fds.len() < 10 {
        return None;
    }
    let median = |v: &[u64]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[v.len() / 2] as i64
    };
    Some(median(&fds[fds.len() - 5..]) - median(&fds[..5]))
}

/// What the model predicts a fault does to it, from its architecture's shape.
pub fn expected(v: &Variant) -> String {
    if !v.processes {
        return "one process: no worker to kill (kill-worker stops the process for 1 s instead) — while it is stopped every connection waits, none is lost; a stop delays everything".into();
    }
    if v.ipc {
        return "client connections stay with the reactors: a killed worker's in-flight requests are answered 502 and the manager starts another; no connection is lost; a stopped worker delays only the requests sent to it".into();
    }
    if v.one_conn_per_worker {
        return "a killed worker loses the one connection it held (its request fails) and the supervisor forks another; a stopped worker holds its connection, the others go on".into();
    }
    let queue = if v.reuseport {
        ", with the connections queued on its own SO_REUSEPORT socket"
    } else {
        ""
    };
    format!("a killed worker loses every connection it held{queue} (their requests in flight fail, the client reconnects to the others) and the supervisor forks another; a stopped worker delays only its own connections")
}

impl Soak {
    /// The p99 of the last minute over the first (after the warm-up).
    pub fn p99_drift(&self) -> Option<f64> {
        match (self.p99_first_ms, self.p99_last_ms) {
            (Some(first), Some(last)) if first > 0.0 => Some(last / first),
            _ => None,
        }
    }

    /// Seconds of the first and of the last window in which the host took
    /// [`STEAL_DISTURBS_PCT`] or more of the server's CPUs. A minute's p99 is its worst
    /// 0.6 s: one such second, at 80 % of capacity, fills a queue that the next seconds
    /// still drain, and the drift then measures the host, not the server.
    pub fn stolen_seconds(&self) -> [usize; 2] {
        self.seconds_in_windows(|s| s.steal_pct >= STEAL_DISTURBS_PCT)
    }

    /// Seconds of the first and of the last window in which the client used
    /// [`BOUND_PCT`] or more of its CPUs. oha schedules each request and counts its latency
    /// from when it was due: a client that cannot keep up sends late, and its own queue
    /// shows as the server's p99. The drift is then the client's.
    pub fn client_bound_seconds(&self) -> [usize; 2] {
        let full = BOUND_PCT * self.client_cpus.max(1) as f64;
        self.seconds_in_windows(|s| s.client_cpu_pct >= full)
    }

    /// Seconds of the first and of the last verdict window for which `disturbed` holds.
    fn seconds_in_windows(&self, disturbed: impl Fn(&Second) -> bool) -> [usize; 2] {
        windows(self.duration_s, warm_up_s(self.duration_s)).map(|(from, to)| {
            self.seconds
                .iter()
                .filter(|s| f64::from(s.at_s) >= from.floor() && f64::from(s.at_s) < to)
                .filter(|s| disturbed(s))
                .count()
        })
    }

    /// The p99 drift as the table says it: the ratio, and when the host stole or the
    /// client ran out of CPU in either window, that it is not the server's to answer for.
    pub fn drift_verdict(&self) -> String {
        let Some(drift) = self.p99_drift() else {
            return "–".into();
        };
        let mut why = Vec::new();
        let [first, last] = self.stolen_seconds();
        if first + last > 0 {
            why.push(format!(
                "the host stole ≥ {STEAL_DISTURBS_PCT:.0} % of the server's CPUs in {first} s of the first window, {last} s of the last"
            ));
        }
        let [first, last] = self.client_bound_seconds();
        if first + last > 0 {
            why.push(format!(
                "the client used ≥ {BOUND_PCT:.0} % of its CPUs in {first} s of the first window, {last} s of the last"
            ));
        }
        if why.is_empty() {
            format!("{drift:.2}×")
        } else {
            format!("{drift:.2}×, not judged: {}", why.join("; "))
        }
    }

    /// Requests made due that the client neither got an answer to nor counted as an
    /// error: "nothing lost" is this at zero. oha waits for every request it started (an
    /// unanswered one times out, an error), so these are requests it never sent — behind
    /// its schedule when time was up — not requests a server lost.
    pub fn vanished(&self) -> i64 {
        self.due as i64 - (self.answered + self.errors) as i64
    }

    /// The server's name as the tables write it: with its handler work, if it had any.
    pub fn name(&self) -> String {
        super::cell::with_work(&self.variant, self.work_us)
    }

    /// A row without figures, and why.
    pub fn missing(variant: &str, model: &str, why: String) -> Soak {
        Soak {
            variant: variant.to_string(),
            model: model.to_string(),
            missing: Some(why),
            ..Soak::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(rss: impl Fn(u32) -> u64) -> Vec<Second> {
        (0..600)
            .map(|at_s| Second {
                at_s,
                rss_kib: rss(at_s),
                fds: 40,
                ..Second::default()
            })
            .collect()
    }

    /// Ten minutes recorded: one server flat but noisy (allocator pages coming and going),
    /// one leaking 2 KiB a second — 7 MiB an hour, 2.3 % over the nine minutes read.
    #[test]
    fn a_leak_is_told_from_noise() {
        let noisy = series(|s| 50_000 + [0, 300, 120, 0, 250, 80][(s % 6) as usize]);
        let g = memory_growth(&noisy, warm_up_s(600)).unwrap();
        assert!(g.flat, "{g:?}");
        assert_eq!(g.trend(), Trend::Flat);
        let leaking = series(|s| 50_000 + 2 * u64::from(s));
        let g = memory_growth(&leaking, warm_up_s(600)).unwrap();
        assert!(!g.flat, "{g:?}");
        assert!((g.kib_per_hour - 7_200.0).abs() < 1.0, "{g:?}");
        assert!((g.share - 0.0213).abs() < 0.001, "{g:?}");
        assert_eq!(g.trend(), Trend::Grows);
        // Too short to say.
        assert_eq!(memory_growth(&leaking[..8], 0), None);
    }

    /// A worker killed at 30 s and reforked: the RSS of all processes falls 2 MiB and stays
    /// there. That is a shrink (the run said "GROWS -1.8 %" before), not a leak.
    #[test]
    fn memory_that_falls_is_a_shrink_not_growth() {
        let reforked = series(|s| if s < 300 { 110_000 } else { 108_000 });
        let g = memory_growth(&reforked, warm_up_s(600)).unwrap();
        assert!(!g.flat, "{g:?}");
        assert!(g.share < 0.0 && g.kib_per_hour < 0.0, "{g:?}");
        assert_eq!(g.trend(), Trend::Shrinks);
    }

    #[test]
    fn descriptors_leaked_are_counted_after_the_warm_up() {
        let mut s = series(|_| 1);
        for (i, second) in s.iter_mut().enumerate() {
            second.fds = 40 + (i as u64) / 100;
        }
        assert_eq!(fds_leaked(&s, 60), Some(5));
        assert_eq!(fds_leaked(&series(|_| 1), 60), Some(0));
    }

    #[test]
    fn a_chaos_plan_parses_and_says_what_is_wrong() {
        let plan = parse_plan(
            "stop-worker@60s:2s, kill-worker@30s,restart-db@1.5m,close-conns@500ms,stop@5s:1s",
        )
        .unwrap();
        assert_eq!(
            plan.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "close-conns@0.5s",
                "stop-worker@5s:1s",
                "kill-worker@30s",
                "stop-worker@60s:2s",
                "restart-db@90s"
            ]
        );
        assert!(parse_plan("kill-worker").unwrap_err().contains("no @TIME"));
        assert!(parse_plan("stop@3s").unwrap_err().contains(":DURATION"));
        assert!(parse_plan("nap@3s").unwrap_err().contains("unknown fault"));
        assert!(parse_plan("kill-worker@soon")
            .unwrap_err()
            .contains("not a time"));
        assert!(parse_plan("kill-worker@3s:1s").is_err());
        assert_eq!(parse_plan("").unwrap(), []);
    }

    #[test]
    fn nothing_lost_is_due_less_answered_and_counted_errors() {
        let soak = Soak {
            due: 10_000,
            answered: 9_990,
            errors: 10,
            p99_first_ms: Some(2.0),
            p99_last_ms: Some(3.0),
            ..Soak::default()
        };
        assert_eq!(soak.vanished(), 0);
        assert_eq!(soak.p99_drift(), Some(1.5));
        assert_eq!(Soak { errors: 4, ..soak }.vanished(), 6);
    }

    /// A ten-minute soak whose last minute's p99 is ten times its first: with a quiet host
    /// that is the server's drift; with one second of the last minute stolen it is not
    /// judged, and the row says where the host took its share.
    #[test]
    fn a_drift_is_not_judged_where_the_host_stole_in_its_window() {
        assert_eq!(windows(600, 60), [(60.0, 120.0), (540.0, 600.0)]);
        assert_eq!(windows(30, 3), [(3.0, 12.0), (21.0, 30.0)]);
        let quiet = Soak {
            duration_s: 600,
            seconds: series(|_| 100_000),
            p99_first_ms: Some(2.0),
            p99_last_ms: Some(20.0),
            ..Soak::default()
        };
        assert_eq!(quiet.stolen_seconds(), [0, 0]);
        assert_eq!(quiet.drift_verdict(), "10.00×");
        let mut stolen = quiet.clone();
        // Steal in the warm-up and between the windows says nothing of either.
        for (at, pct) in [(10, 40.0), (300, 40.0), (570, 12.0), (590, 4.9)] {
            stolen.seconds[at].steal_pct = pct;
        }
        assert_eq!(stolen.stolen_seconds(), [0, 1]);
        let verdict = stolen.drift_verdict();
        assert!(verdict.starts_with("10.00×, not judged"), "{verdict}");
        assert!(
            verdict.contains("0 s of the first window, 1 s of the last"),
            "{verdict}"
        );
        assert_eq!(Soak::default().drift_verdict(), "–");
    }

    /// The same drift with oha on one CPU saturated for two seconds of the first window:
    /// the p99 there is oha's lateness, and the row says so; at 89 % of its CPU it is not.
    #[test]
    fn a_drift_is_not_judged_where_the_client_ran_out_of_cpu() {
        let mut soak = Soak {
            duration_s: 600,
            client_cpus: 1,
            seconds: series(|_| 100_000),
            p99_first_ms: Some(2.0),
            p99_last_ms: Some(20.0),
            ..Soak::default()
        };
        for (at, pct) in [(70, 99.0), (80, 95.0), (550, 89.0)] {
            soak.seconds[at].client_cpu_pct = pct;
        }
        assert_eq!(soak.client_bound_seconds(), [2, 0]);
        let verdict = soak.drift_verdict();
        assert!(
            verdict.contains("not judged: the client used ≥ 90 % of its CPUs in 2 s of the first window, 0 s of the last"),
            "{verdict}"
        );
        // On two CPUs, 99 % is half of them.
        soak.client_cpus = 2;
        assert_eq!(soak.client_bound_seconds(), [0, 0]);
        assert_eq!(soak.drift_verdict(), "10.00×");
    }
}
