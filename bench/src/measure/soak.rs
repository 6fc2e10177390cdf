//! What a soak measures beside its client: the server's processes once a second (memory,
//! descriptors, sockets, CPU) and the faults of a `--chaos` plan, each injected at its time
//! — one thread beside the load, on the client's CPUs — and, after the load, the client's
//! per-request records tallied into seconds, windows and faults.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::client::oha::Record;
use super::{database, procfs};
use crate::model::soak::{Fault, FaultKind, FaultOutcome};

/// The server's side of one second.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    pub at_s: u32,
    pub rss_kib: u64,
    pub fds: u64,
    pub sockets: Vec<u32>,
    pub cpu_pct: f64,
    /// Of the server CPUs' time in this second, the share the host ran something else
    /// while they had work (/proc/stat's steal), in percent.
    pub steal_pct: f64,
    /// The client's CPU in this second (every thread of it), in percent of one CPU: when it
    /// nears all of the client's CPUs, the second's p99 is the client's queue, not the
    /// server's.
    pub client_cpu_pct: f64,
}

/// What the faults are aimed at.
#[derive(Debug, Clone)]
pub struct Targets {
    /// The server's first process (its workers are its descendants).
    pub root: i32,
    /// The port the client connects to: `close-conns` cuts the client's side of each
    /// connection to it.
    pub port: u16,
    /// The CPUs a restarted database goes back to; `None`: no database in this soak.
    pub db_cpus: Option<Vec<usize>>,
    /// The CPUs this thread runs on (the client's: never the server's).
    pub watch_cpus: Vec<usize>,
    /// The server's CPUs, whose steal is sampled every second.
    pub server_cpus: Vec<usize>,
    /// The client's process, whose CPU is sampled every second beside the server's.
    pub client: i32,
}

/// The thread watching a soak.
pub struct Watch {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Watched>,
}

/// What it saw and did.
#[derive(Debug, Default)]
pub struct Watched {
    pub samples: Vec<Sample>,
    /// Each fault injected and what it hit.
    pub hits: Vec<(Fault, String)>,
}

/// A fault injected whose outcome comes later (a database restart takes a second or two:
/// the samples go on meanwhile).
enum Hit {
    Now(String),
    Later(JoinHandle<String>),
}

impl Watch {
    /// Starts watching the server of `targets` from `began` (when its client was spawned; the
    /// faults and the seconds then go by the client's own clock, from its first socket),
    /// injecting `faults` at their times.
    pub fn start(targets: Targets, faults: Vec<Fault>, began: Instant) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let handle = std::thread::spawn(move || watch(&targets, faults, began, &stopped));
        Watch { stop, handle }
    }

    /// Stops watching (every process it stopped is continued) and says what it saw.
    pub fn stop(self) -> Watched {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().unwrap_or_default()
    }
}

fn watch(targets: &Targets, mut faults: Vec<Fault>, began: Instant, stop: &AtomicBool) -> Watched {
    let _ = variants::launch::set_affinity(0, &targets.watch_cpus);
    let began = client_clock(targets.client, began, stop);
    faults.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    let mut pending = faults.into_iter().peekable();
    let mut hits: Vec<(Fault, Hit)> = Vec::new();
    // Whom to continue, and when.
    let mut resume: Vec<(Instant, i32)> = Vec::new();
    let mut samples = Vec::new();
    let mut sampler = Sampler::start(targets);
    let mut next_sample = 1u32;
    while !stop.load(Ordering::SeqCst) {
        let now = began.elapsed();
        resume.retain(|&(until, pid)| {
            if Instant::now() < until {
                return true;
            }
            // SAFETY: continues a process this thread stopped.
            unsafe { libc::kill(pid, libc::SIGCONT) };
            false
        });
        while let Some(fault) = pending.next_if(|f| f.at_s <= now.as_secs_f64()) {
            let hit = inject(targets, &fault, &mut resume);
            hits.push((fault, hit));
        }
        if now >= Duration::from_secs(u64::from(next_sample)) {
            samples.push(sampler.take(targets, next_sample - 1));
            next_sample += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The client stops at its last second by its own clock, which this one follows by the
    // moments it took to open its first socket: the last second may have ended before
    // this thread looked. It is sampled now (the server still runs) rather than missed.
    if began.elapsed().as_secs_f64() >= f64::from(next_sample) - 0.5 {
        samples.push(sampler.take(targets, next_sample - 1));
    }
    for (_, pid) in resume {
        // SAFETY: continues a process this thread stopped.
        unsafe { libc::kill(pid, libc::SIGCONT) };
    }
    Watched {
        samples,
        hits: hits
            .into_iter()
            .map(|(fault, hit)| {
                let what = match hit {
                    Hit::Now(what) => what,
                    Hit::Later(handle) => handle
                        .join()
                        .unwrap_or_else(|_| "the restart panicked".into()),
                };
                (fault, what)
            })
            .collect(),
    }
}

/// The server's processes now: memory, descriptors, and each one's sockets.
fn sample(root: i32) -> Sample {
    let pids = procfs::tree(root);
    let mut fds = 0;
    let mut sockets = Vec::new();
    for &pid in &pids {
        let (all, socks) = descriptors(pid);
        fds += all;
        sockets.push(socks);
    }
    sockets.sort_unstable_by(|a, b| b.cmp(a));
    Sample {
        at_s: 0,
        rss_kib: variants::launch::status_kib(&pids, "VmRSS"),
        fds,
        sockets,
        cpu_pct: 0.0,
        steal_pct: 0.0,
        client_cpu_pct: 0.0,
    }
}

/// Open descriptors of `pid`, and how many of them are sockets.
fn descriptors(pid: i32) -> (u64, u32) {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return (0, 0);
    };
    let (mut all, mut sockets) = (0, 0);
    for entry in dir.flatten() {
        all += 1;
        if std::fs::read_link(entry.path())
            .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
        {
            sockets += 1;
        }
    }
    (all, sockets)
}

/// What a sample's CPU figures count from: the previous sample's readings.
struct Sampler {
    server_was: Vec<(i32, f64)>,
    client_was: Vec<(i32, f64)>,
    host: procfs::CpuTimes,
    host_at: Instant,
}

impl Sampler {
    fn start(targets: &Targets) -> Sampler {
        let [host] = procfs::cpu_times([&targets.server_cpus]);
        Sampler {
            server_was: procfs::cpu_by_pid(&procfs::tree(targets.root)),
            client_was: procfs::cpu_by_pid(&[targets.client]),
            host,
            host_at: Instant::now(),
        }
    }

    /// The server now, and the CPU it, the client and the host spent since the last one:
    /// the sample of second `at_s`.
    fn take(&mut self, targets: &Targets, at_s: u32) -> Sample {
        let server_now = procfs::cpu_by_pid(&procfs::tree(targets.root));
        let client_now = procfs::cpu_by_pid(&[targets.client]);
        let spent = procfs::cpu_spent(&self.server_was, &server_now);
        let client_spent = procfs::cpu_spent(&self.client_was, &client_now);
        (self.server_was, self.client_was) = (server_now, client_now);
        let [host_now] = procfs::cpu_times([&targets.server_cpus]);
        let span = self.host_at.elapsed().as_secs_f64() * targets.server_cpus.len().max(1) as f64;
        let stolen = host_now.since(&self.host).steal_secs;
        (self.host, self.host_at) = (host_now, Instant::now());
        let mut sample = sample(targets.root);
        sample.at_s = at_s;
        sample.cpu_pct = 100.0 * spent;
        sample.client_cpu_pct = 100.0 * client_spent;
        sample.steal_pct = if span > 0.0 {
            100.0 * stolen / span
        } else {
            0.0
        };
        sample
    }
}

/// When the client's clock started, which its records' times count from. oha takes its
/// `Instant` once its runtime is up, just before its first connection: 3–6 ms after it was
/// spawned on an idle host here, 20–37 ms with five soaks side by side, more on a busier
/// one. A fault timed from the spawn fell that much early in the records' seconds, its
/// longest waits before the 5 s window read after it (CI, with the stop also cut short:
/// a p99 of 847 ms after a 1 s stop). The faults and the seconds go by the client's clock:
/// from the first socket it holds, looked for every millisecond for up to 5 s; else (the
/// client died, or never connected) from `spawned`.
fn client_clock(client: i32, spawned: Instant, stop: &AtomicBool) -> Instant {
    while spawned.elapsed() < Duration::from_secs(5) && !stop.load(Ordering::SeqCst) {
        if descriptors(client).1 > 0 {
            return Instant::now();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    spawned
}

/// The worker a fault hits: of the server's processes that have no child (a worker, not
/// its master or manager), the one holding the most sockets; `None` for a one-process
/// server.
fn busiest_worker(root: i32) -> Option<(i32, u32)> {
    let pids = procfs::tree(root);
    let parents: Vec<i32> = pids
        .iter()
        .filter_map(|&p| {
            variants::launch::stat_fields(std::path::Path::new(&format!("/proc/{p}")))?
                .get(1)?
                .parse()
                .ok()
        })
        .collect();
    pids.iter()
        .filter(|&&p| p != root && !parents.contains(&p))
        .map(|&p| (p, descriptors(p).1))
        .max_by_key(|&(p, sockets)| (sockets, -p))
}

/// Injects `fault` now, saying what it hit.
fn inject(targets: &Targets, fault: &Fault, resume: &mut Vec<(Instant, i32)>) -> Hit {
    let root = targets.root;
    let stop_for = |pid: i32, ms: u64, resume: &mut Vec<(Instant, i32)>| {
        // SAFETY: stops a process of the server this soak started.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        // From the stop itself, not from when this pass of the loop began: on a busy host
        // this thread may have waited between the two, and the stop would be that much
        // shorter than asked.
        resume.push((Instant::now() + Duration::from_millis(ms), pid));
    };
    match fault.kind {
        FaultKind::KillWorker => match busiest_worker(root) {
            Some((pid, sockets)) => {
                // SAFETY: kills a worker of the server this soak started.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                Hit::Now(format!("worker pid {pid} ({sockets} sockets), killed"))
            }
            None => {
                stop_for(root, 1000, resume);
                Hit::Now(format!(
                    "the process (pid {root}): one process has no worker to kill — stopped for 1 s instead"
                ))
            }
        },
        FaultKind::StopWorker { for_ms } => match busiest_worker(root) {
            Some((pid, sockets)) => {
                stop_for(pid, for_ms, resume);
                Hit::Now(format!("worker pid {pid} ({sockets} sockets), stopped"))
            }
            None => {
                stop_for(root, for_ms, resume);
                Hit::Now(format!(
                    "the process (pid {root}): one process, no worker apart — the whole server stopped"
                ))
            }
        },
        FaultKind::RestartDb => match targets.db_cpus.clone() {
            Some(cpus) => Hit::Later(std::thread::spawn(move || {
                let started = Instant::now();
                match variants::database::Cluster::restart_running()
                    .and_then(|pid| database::place(pid, &cpus).map(|()| pid))
                {
                    Ok(pid) => format!(
                        "PostgreSQL restarted in {:.1} s (postmaster pid {pid})",
                        started.elapsed().as_secs_f64()
                    ),
                    Err(e) => format!("PostgreSQL not restarted: {e}"),
                }
            })),
            None => Hit::Now("nothing: no database in this soak's workload".into()),
        },
        FaultKind::CloseConns => {
            let filter = format!("( dport = :{} )", targets.port);
            match Command::new("ss")
                .args(["-K", "-t", "-n", "state", "established", &filter])
                .output()
            {
                Ok(out) if out.status.success() => {
                    let cut = String::from_utf8_lossy(&out.stdout)
                        .lines()
                        .skip(1)
                        .filter(|l| !l.trim().is_empty())
                        .count();
                    Hit::Now(format!("{cut} client connections cut (ss -K)"))
                }
                Ok(out) => Hit::Now(format!(
                    "no connection cut: ss -K failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
                Err(e) => Hit::Now(format!("no connection cut: cannot run ss: {e}")),
            }
        }
    }
}

/// The client's records of a soak, tallied as they are read: per second (by when each
/// request was due), per 100 ms (answers by when they came, for recovery), and the
/// windows the verdicts compare.
pub struct Tally {
    rate: u32,
    duration_s: u32,
    per_second: Vec<(u64, Histogram<u64>)>,
    /// Answers by the 100 ms in which they came.
    answered_in: Vec<u32>,
    /// Successful answers by the 100 ms in which their requests were due.
    due_in: Vec<u32>,
    /// Answers with an error status by the 100 ms in which their requests were due.
    failed_in: Vec<u32>,
    /// Answers with an error status, by status.
    failed_statuses: std::collections::BTreeMap<u16, u64>,
    /// Every answered request by the millisecond its client stamped it due.
    stamped: Vec<u32>,
    first: (f64, f64, Histogram<u64>),
    last: (f64, f64, Histogram<u64>),
}

/// A latency histogram in µs, 1 µs to 10 minutes, two significant figures.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 2).expect("valid bounds")
}

fn p99_ms(h: &Histogram<u64>) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_quantile(0.99) as f64 / 1000.0)
}

/// What the records came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Tallied {
    /// Per second: requests due in it that were answered, and their p99 (ms).
    pub seconds: Vec<(u64, Option<f64>)>,
    pub p99_first_ms: Option<f64>,
    pub p99_last_ms: Option<f64>,
    pub faults: Vec<FaultOutcome>,
    /// Answers with an error status, by status, the most first.
    pub failed_statuses: Vec<(u16, u64)>,
    /// Per second: how far behind its schedule the client was, at most, ms.
    pub client_lag_ms: Vec<f64>,
}

impl Tally {
    /// A tally of a soak at `rate` for `duration_s`, whose verdicts skip `warm_up_s`:
    /// its first and last minute after that (the first and last third of a shorter one).
    pub fn new(rate: u32, duration_s: u32, warm_up_s: u32) -> Tally {
        let [first, last] = crate::model::soak::windows(duration_s, warm_up_s);
        let bins = duration_s as usize * 10 + 50;
        Tally {
            rate,
            duration_s,
            per_second: (0..duration_s).map(|_| (0, histogram())).collect(),
            answered_in: vec![0; bins],
            due_in: vec![0; bins],
            failed_in: vec![0; bins],
            failed_statuses: Default::default(),
            stamped: vec![0; duration_s as usize * 1000 + 5000],
            first: (first.0, first.1, histogram()),
            last: (last.0, last.1, histogram()),
        }
    }

    /// Counts one answered request. One with an error status is a failure: counted by
    /// status and by when it was due, and left out of the rate's recovery (a server that
    /// answers 503 at once while its database is down has not recovered).
    pub fn add(&mut self, r: Record) {
        if let Some(n) = self.stamped.get_mut((r.due_s * 1000.0) as usize) {
            *n += 1;
        }
        if !(200..300).contains(&r.status) {
            *self.failed_statuses.entry(r.status).or_default() += 1;
            if let Some(n) = self.failed_in.get_mut((r.due_s * 10.0) as usize) {
                *n += 1;
            }
            return;
        }
        let us = (r.latency_ms * 1000.0).round().max(1.0) as u64;
        if let Some((n, h)) = self.per_second.get_mut(r.due_s as usize) {
            *n += 1;
            let _ = h.record(us);
        }
        for (from, to, h) in [&mut self.first, &mut self.last] {
            if r.due_s >= *from && r.due_s < *to {
                let _ = h.record(us);
            }
        }
        if let Some(n) = self.answered_in.get_mut((r.end_s * 10.0) as usize) {
            *n += 1;
        }
        if let Some(n) = self.due_in.get_mut((r.due_s * 10.0) as usize) {
            *n += 1;
        }
    }

    /// The seconds, the windows, and what each fault of `hits` cost.
    pub fn finish(self, hits: &[(Fault, String)]) -> Tallied {
        let per_bin = f64::from(self.rate) / 10.0;
        let end_bin = self.duration_s as usize * 10;
        // What the whole run left without a successful answer: an exact count (the schedule
        // made rate × duration due), where a window's is an estimate. No fault can have lost
        // more than the run did.
        let answered: u64 = self.due_in.iter().map(|&n| u64::from(n)).sum();
        let mut client_lag_ms = schedule_lag_ms(&self.stamped, self.rate);
        client_lag_ms.resize(self.duration_s as usize, 0.0);
        let unanswered =
            (u64::from(self.rate) * u64::from(self.duration_s)).saturating_sub(answered);
        let faults = hits
            .iter()
            .map(|(fault, hit)| {
                let at_bin = ((fault.at_s * 10.0) as usize).min(end_bin);
                let stalled_ms = match fault.kind {
                    FaultKind::StopWorker { for_ms } => for_ms,
                    _ => 0,
                };
                let from_bin = (at_bin + (stalled_ms / 100) as usize).min(end_bin);
                // Three windows in a row at 95 % of the rate (less one request, for the
                // schedule's rounding at a window's edge): the answers are back.
                let enough = |b: usize| f64::from(self.answered_in[b]) >= 0.95 * per_bin - 1.0;
                let back = (from_bin..end_bin.saturating_sub(2))
                    .find(|&b| enough(b) && enough(b + 1) && enough(b + 2));
                let lost_until = back.unwrap_or(end_bin).max(from_bin);
                // Netted over the window, not bin by bin: oha's schedule jitters, so a
                // request due at a bin's edge may land in the next bin (39 and 41 of 40),
                // which is not a loss.
                let due: u32 = self.due_in[at_bin..lost_until].iter().sum();
                let short = per_bin * (lost_until - at_bin) as f64 - f64::from(due);
                let lost = (short.max(0.0).round() as u64).min(unanswered);
                let failed: u32 = self.failed_in[at_bin..lost_until].iter().sum();
                let mut after = histogram();
                // The p99 of the requests due in the 5 s from the fault: from the per-second
                // histograms of the whole seconds it spans.
                let first_s = fault.at_s as usize;
                for (_, h) in self.per_second.iter().skip(first_s).take(5) {
                    let _ = after.add(h);
                }
                FaultOutcome {
                    fault: *fault,
                    hit: hit.clone(),
                    lost,
                    failed: u64::from(failed),
                    recovered_after_ms: back.map(|b| ((b - from_bin) * 100) as u64),
                    p99_after_ms: p99_ms(&after),
                    client_lag_ms: client_lag_ms
                        .iter()
                        .skip(first_s)
                        .take(5)
                        .fold(0.0, |a: f64, &b| a.max(b)),
                }
            })
            .collect();
        Tallied {
            seconds: self
                .per_second
                .iter()
                .map(|(n, h)| (*n, p99_ms(h)))
                .collect(),
            p99_first_ms: p99_ms(&self.first.2),
            p99_last_ms: p99_ms(&self.last.2),
            faults,
            failed_statuses: {
                let mut by = self.failed_statuses.into_iter().collect::<Vec<_>>();
                by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                by
            },
            client_lag_ms,
        }
    }
}

/// Per second, how far behind an open loop's schedule its client stamped requests, at
/// most, in ms, from how many it stamped each millisecond (`stamped[i]`: in `i .. i + 1`
/// ms).
///
/// oha sleeps until each request's place in the schedule (`start + i / rate`) and stamps
/// it due when it wakes, so a scheduler that was kept off its CPU for 50 ms stamps the 50
/// ms of requests it owes with the moment it woke — their waits, which latency is counted
/// from, begin up to 50 ms late, and nothing in its report says so. What shows is the
/// debt: `g(t)`, the requests stamped before t over the rate, less t, stays level while
/// the client keeps its schedule, sinks while it stamps nothing it owes, and climbs back as
/// it stamps the debt at once. The lag at t is how far `g` climbs back within the next
/// second, less what counting by milliseconds can add (a request's spacing and one
/// millisecond): never more than the real lag. Requests the client recorded no answer
/// for (errors) lower `g` for good and are not climbed back: no lag.
pub fn schedule_lag_ms(stamped: &[u32], rate: u32) -> Vec<f64> {
    let rate = f64::from(rate.max(1));
    let slack = 1.0 / rate + 0.001;
    let mut count = 0u64;
    let g: Vec<f64> = (0..=stamped.len())
        .map(|b| {
            let here = count as f64 / rate - b as f64 / 1000.0;
            count += u64::from(stamped.get(b).copied().unwrap_or(0));
            here
        })
        .collect();
    let mut lag = vec![0.0f64; stamped.len().div_ceil(1000)];
    // From the end back: (b, g(b)) of the next second with g falling front to back, so
    // the front is the highest g ahead.
    let mut highs: std::collections::VecDeque<(usize, f64)> = Default::default();
    for b in (0..g.len()).rev() {
        while highs.front().is_some_and(|&(at, _)| at > b + 1000) {
            highs.pop_front();
        }
        if let (Some(&(_, high)), Some(l)) = (highs.front(), lag.get_mut(b / 1000)) {
            *l = l.max((high - g[b] - slack) * 1000.0);
        }
        while highs.back().is_some_and(|&(_, v)| v <= g[b]) {
            highs.pop_back();
        }
        highs.push_back((b, g[b]));
    }
    lag
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` requests into `tally`, the i-th due at `due(i)`: those due during `stall`
    /// answered 50 ms after it ends, the others in 1 ms.
    fn feed(tally: &mut Tally, n: u32, due: impl Fn(u32) -> f64, stall: std::ops::Range<f64>) {
        for i in 0..n {
            let due_s = due(i);
            let end_s = if stall.contains(&due_s) {
                stall.end + 0.05
            } else {
                due_s + 0.001
            };
            tally.add(Record {
                due_s,
                end_s,
                latency_ms: (end_s - due_s) * 1000.0,
                status: 200,
            });
        }
    }

    /// A worker stopped at 5 s for `for_ms`.
    fn stop_at_5s(for_ms: u64) -> (Fault, String) {
        let stop = Fault {
            kind: FaultKind::StopWorker { for_ms },
            at_s: 5.0,
        };
        (stop, "worker pid 1, stopped".into())
    }

    /// A soak at 100 req/s for 20 s whose answers stop for 2 s at 5 s (a stalled worker that
    /// answered nothing, then everything it held): the seconds, the stall's recovery, and
    /// nothing lost, since every request was answered late rather than never.
    #[test]
    fn a_stall_is_tallied_late_not_lost_and_the_rate_comes_back() {
        let mut tally = Tally::new(100, 20, 2);
        feed(&mut tally, 2000, |i| f64::from(i) / 100.0, 5.0..7.0);
        let t = tally.finish(&[stop_at_5s(2000)]);
        assert_eq!(t.seconds.len(), 20);
        assert!(t.seconds.iter().all(|(n, _)| *n == 100), "{:?}", t.seconds);
        assert!(t.seconds[5].1.unwrap() > 1000.0 && t.seconds[9].1.unwrap() < 2.0);
        let f = &t.faults[0];
        assert_eq!(f.lost, 0);
        assert_eq!(f.recovered_after_ms, Some(0));
        assert!(f.p99_after_ms.unwrap() > 1900.0, "{f:?}");
        // The windows are a third of the 18 s after the warm-up each: the stall is in the
        // first (2–8 s), the last (14–20 s) is calm.
        assert!(t.p99_first_ms.unwrap() > 1000.0 && t.p99_last_ms.unwrap() < 2.0);
    }

    /// oha's schedule jitters: a request due at the end of one 100 ms window may be due
    /// at the start of the next (39 in one, 41 in the next). Seen in CI as one request
    /// "lost" to a stop that lost nothing; the window nets them, and no fault counts more
    /// than the whole run left unanswered.
    #[test]
    fn a_request_due_across_a_windows_edge_is_not_lost() {
        let mut tally = Tally::new(100, 10, 1);
        // The last request of every window from 5 s on is due 2 ms late: in the next.
        let due = |i: u32| f64::from(i) / 100.0 + if i >= 500 && i % 10 == 9 { 0.011 } else { 0.0 };
        feed(&mut tally, 1000, due, 5.0..6.0);
        let t = tally.finish(&[stop_at_5s(1000)]);
        assert_eq!(t.faults[0].lost, 0, "{:?}", t.faults[0]);
    }

    /// Stamps per millisecond of a client at `rate` for `seconds`, the i-th request stamped
    /// at `stamp(i)` (s).
    fn stamps(rate: u32, seconds: u32, stamp: impl Fn(f64) -> f64) -> Vec<u32> {
        let mut ms = vec![0u32; seconds as usize * 1000];
        for i in 0..rate * seconds {
            let at = stamp(f64::from(i) / f64::from(rate));
            if let Some(n) = ms.get_mut((at * 1000.0) as usize) {
                *n += 1;
            }
        }
        ms
    }

    /// A client on its schedule lags by nothing, whatever its rate (at 20,000 a second,
    /// twenty requests share each millisecond); one kept off its CPU for 50 ms at 3.2 s,
    /// which then stamps what it owes at once, lags by about 50 ms in that second only; a
    /// lost request (no record) is no lag.
    #[test]
    fn a_client_behind_its_schedule_is_seen_in_the_crowding_of_its_stamps() {
        for rate in [100, 400, 3_000, 20_000] {
            let lag = schedule_lag_ms(&stamps(rate, 5, |due| due), rate);
            assert!(lag.iter().all(|&l| l <= 0.0), "{rate}: {lag:?}");
        }
        for rate in [400, 20_000] {
            let stalled = |due: f64| {
                if (3.2..3.25).contains(&due) {
                    3.25
                } else {
                    due
                }
            };
            let lag = schedule_lag_ms(&stamps(rate, 5, stalled), rate);
            assert!((46.0..=50.0).contains(&lag[3]), "{rate}: {lag:?}");
            assert!(
                lag.iter().enumerate().all(|(s, &l)| s == 3 || l <= 0.0),
                "{lag:?}"
            );
        }
        let mut lost = stamps(400, 5, |due| due);
        lost[2000..2100].iter_mut().for_each(|n| *n = 0);
        assert!(schedule_lag_ms(&lost, 400).iter().all(|&l| l <= 0.0));
    }

    /// A killed worker's share of requests never answered for 300 ms, then the rate back.
    #[test]
    fn a_kill_counts_what_was_never_answered_until_the_rate_was_back() {
        let mut tally = Tally::new(1000, 10, 1);
        for i in 0..10_000 {
            let due_s = f64::from(i) / 1000.0;
            // Half the requests due in 4.0–4.3 s were on the dead worker's connections.
            if (4.0..4.3).contains(&due_s) && i % 2 == 0 {
                continue;
            }
            tally.add(Record {
                due_s,
                end_s: due_s + 0.0005,
                latency_ms: 0.5,
                status: 200,
            });
        }
        let kill = Fault {
            kind: FaultKind::KillWorker,
            at_s: 4.0,
        };
        let t = tally.finish(&[(kill, "worker pid 2, killed".into())]);
        let f = &t.faults[0];
        assert_eq!(f.lost, 150);
        assert_eq!(f.recovered_after_ms, Some(300));
        assert_eq!(t.seconds[4].0, 850);
        assert_eq!(f.failed, 0);
        assert!(t.failed_statuses.is_empty());
    }

    /// The database down for 1.5 s: the server answers every request at once, but with a
    /// 503. Those are failed requests, not a recovered rate: the fault lost them all, and
    /// the rate is back only when 200s are.
    #[test]
    fn answers_with_an_error_status_are_failures_not_recovery() {
        let mut tally = Tally::new(100, 10, 1);
        for i in 0..1000 {
            let due_s = f64::from(i) / 100.0;
            let status = if (3.0..4.5).contains(&due_s) {
                503
            } else {
                200
            };
            tally.add(Record {
                due_s,
                end_s: due_s + 0.001,
                latency_ms: 1.0,
                status,
            });
        }
        let restart = Fault {
            kind: FaultKind::RestartDb,
            at_s: 3.0,
        };
        let t = tally.finish(&[(restart, "PostgreSQL restarted in 1.5 s".into())]);
        let f = &t.faults[0];
        assert_eq!(f.lost, 150, "{f:?}");
        assert_eq!(f.failed, 150, "{f:?}");
        assert_eq!(f.recovered_after_ms, Some(1500), "{f:?}");
        assert_eq!(t.failed_statuses, vec![(503, 150)]);
        // The seconds count successful answers.
        assert_eq!(t.seconds[3].0, 0);
        assert_eq!(t.seconds[4].0, 50);
    }
}
