//! What a process tree spent, read from /proc: the figures that rank servers stably on a
//! small, noisy machine, where absolute requests per second do not.

use std::fs;

use std::path::Path;

use variants::launch;
use variants::peers::Workers;

/// CPU time and context switches of a set of processes (all their threads).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// utime + stime, in seconds.
    pub cpu_secs: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

impl Usage {
    /// What was spent between `earlier` and `self`.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            cpu_secs: (self.cpu_secs - earlier.cpu_secs).max(0.0),
            voluntary_switches: self
                .voluntary_switches
                .saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(earlier.involuntary_switches),
        }
    }
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

pub use launch::tree;

/// CPU time of the processes (every thread included: the process-level stat sums them)
/// and context switches summed over each of their threads.
pub fn usage(pids: &[i32]) -> Usage {
    let ticks = clock_ticks();
    let mut total = Usage::default();
    for &pid in pids {
        total.cpu_secs += cpu_of(Path::new(&format!("/proc/{pid}")), ticks).unwrap_or(0.0);
        for thread in launch::threads(pid) {
            total.voluntary_switches += thread.voluntary_switches;
            total.involuntary_switches += thread.involuntary_switches;
        }
    }
    total
}

/// utime + stime of one process (all its threads) or one thread (`/proc/PID/task/TID`),
/// in seconds.
fn cpu_of(dir: &Path, ticks: f64) -> Option<f64> {
    let f = launch::stat_fields(dir)?;
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    Some((field(11) + field(12)) / ticks)
}

/// CPU seconds of each process in `pids`, by pid.
pub fn cpu_by_pid(pids: &[i32]) -> Vec<(i32, f64)> {
    let ticks = clock_ticks();
    pids.iter()
        .filter_map(|&p| Some((p, cpu_of(Path::new(&format!("/proc/{p}")), ticks)?)))
        .collect()
}

/// The CPU seconds spent between two [`cpu_by_pid`] readings: a process that appeared in
/// between counts from zero, one that is gone counts nothing (its time is lost with it).
pub fn cpu_spent(before: &[(i32, f64)], after: &[(i32, f64)]) -> f64 {
    after
        .iter()
        .map(|(pid, now)| {
            let then = before
                .iter()
                .find(|(p, _)| p == pid)
                .map_or(0.0, |(_, t)| *t);
            (now - then).max(0.0)
        })
        .sum()
}

/// CPU seconds of each worker of a server whose processes are `pids`, by pid (or tid),
/// as `rule` tells its workers from its other processes: what each worker did, read the
/// same way for any server, one that keeps no counts of its own included.
pub fn worker_cpu(pids: &[i32], rule: Workers) -> Result<Vec<(i32, f64)>, String> {
    let ticks = clock_ticks();
    let parent = |pid: i32| launch::stat_of(pid).and_then(|f| f.get(1)?.parse::<i32>().ok());
    let parents: Vec<Option<i32>> = pids.iter().map(|&p| parent(p)).collect();
    let leaves: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|p| !parents.contains(&Some(*p)))
        .collect();
    let per_process = |chosen: &[i32]| {
        chosen
            .iter()
            .filter_map(|&p| Some((p, cpu_of(Path::new(&format!("/proc/{p}")), ticks)?)))
            .collect()
    };
    match rule {
        Workers::Unseen(why) => Err(why.to_string()),
        Workers::Leaves if leaves.len() == 1 => {
            // One process: its threads are the workers.
            let tasks =
                fs::read_dir(format!("/proc/{}/task", leaves[0])).map_err(|e| e.to_string())?;
            Ok(tasks
                .flatten()
                .filter_map(|t| {
                    let tid = t.file_name().to_str()?.parse::<i32>().ok()?;
                    Some((tid, cpu_of(&t.path(), ticks)?))
                })
                .collect())
        }
        Workers::Leaves => Ok(per_process(&leaves)),
        Workers::Named(name) => {
            let named: Vec<i32> = leaves
                .into_iter()
                .filter(|p| {
                    fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == name)
                })
                .collect();
            Ok(per_process(&named))
        }
    }
}

/// The CPU each of the `n` busiest workers spent between two [`worker_cpu`] readings,
/// busiest first (a worker born in between counts from zero).
pub fn busiest(before: &[(i32, f64)], after: &[(i32, f64)], n: usize) -> Vec<f64> {
    let mut spent: Vec<f64> = after
        .iter()
        .map(|&(tid, secs)| {
            let was = before.iter().find(|(t, _)| *t == tid).map_or(0.0, |b| b.1);
            (secs - was).max(0.0)
        })
        .collect();
    spent.sort_by(|a, b| b.total_cmp(a));
    spent.truncate(n);
    spent
}

/// Peak resident memory (VmHWM) summed over the processes, in KiB.
pub fn peak_rss_kib(pids: &[i32]) -> u64 {
    launch::status_kib(pids, "VmHWM")
}

/// TCP sockets in use (listening or connected, not TIME_WAIT) in the network namespace of
/// process `pid`, from `/proc/PID/net/sockstat`: a count the kernel keeps, so reading it
/// costs nothing at 100,000 connections (walking `net/tcp` costs a CPU at that size). On
/// a test host that runs only the server, it is the server's listeners and connections.
pub fn tcp_in_use(pid: i32) -> usize {
    let stat = fs::read_to_string(format!("/proc/{pid}/net/sockstat")).unwrap_or_default();
    in_use(&stat)
}

/// [`tcp_in_use`] on the text of a `sockstat` file: `TCP: inuse N orphan …`.
fn in_use(sockstat: &str) -> usize {
    sockstat
        .lines()
        .find_map(|l| l.strip_prefix("TCP: inuse "))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A set of CPUs' time since boot, whoever used it (/proc/stat): every non-idle second, and
/// the softirq part of it (the network's receive path, among others); and the seconds the
/// hypervisor ran something else while these CPUs had work (steal).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    pub busy_secs: f64,
    pub softirq_secs: f64,
    pub steal_secs: f64,
}

impl CpuTimes {
    /// What was spent between `earlier` and `self`.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            busy_secs: (self.busy_secs - earlier.busy_secs).max(0.0),
            softirq_secs: (self.softirq_secs - earlier.softirq_secs).max(0.0),
            steal_secs: (self.steal_secs - earlier.steal_secs).max(0.0),
        }
    }
}

/// [`CpuTimes`] of each set of CPUs now, from one reading of /proc/stat (the sets at the
/// same instant).
pub fn cpu_times<const N: usize>(sets: [&[usize]; N]) -> [CpuTimes; N] {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks = clock_ticks();
    sets.map(|cpus| cpu_times_in(&stat, cpus, ticks))
}

/// [`cpu_times`] on the text of /proc/stat: `cpuN user nice system idle iowait irq
/// softirq steal …` in ticks. Busy is user + nice + system + irq + softirq (guest time is
/// inside user; steal and iowait are not this machine's work).
fn cpu_times_in(stat: &str, cpus: &[usize], ticks: f64) -> CpuTimes {
    let mut total = CpuTimes::default();
    for line in stat.lines() {
        let mut fields = line.split_whitespace();
        let Some(cpu) = fields
            .next()
            .and_then(|name| name.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if !cpus.contains(&cpu) {
            continue;
        }
        let v: Vec<f64> = fields.map(|f| f.parse().unwrap_or(0.0)).collect();
        let at = |i: usize| v.get(i).copied().unwrap_or(0.0) / ticks;
        total.busy_secs += at(0) + at(1) + at(2) + at(5) + at(6);
        total.softirq_secs += at(6);
        total.steal_secs += at(7);
    }
    total
}

/// The machine, for the results file: CPU model, CPU count, kernel.
pub fn machine() -> serde_json::Value {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown".to_string(), |m| m.trim().to_string());
    serde_json::json!({
        "cpu_model": model,
        "cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "kernel": fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_sockets_in_use_are_read_from_sockstat() {
        let stat = "sockets: used 65057\nTCP: inuse 65057 orphan 0 tw 3 alloc 130191 mem 0\nUDP: inuse 0 mem 0\n";
        assert_eq!(in_use(stat), 65_057);
        assert_eq!(in_use(""), 0);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(tcp_in_use(std::process::id() as i32) >= 1);
        drop(listener);
    }

    #[test]
    fn a_cpu_set_counts_its_own_cpus_busy_and_softirq() {
        let stat = "cpu  900 0 300 5000 10 5 60 0 0 0\ncpu0 400 0 100 2000 5 1 40 7 0 0\ncpu1 500 0 200 3000 5 4 20 0 0 0\nintr 1 2 3\n";
        let zero = cpu_times_in(stat, &[0], 100.0);
        assert_eq!(zero.busy_secs, 5.41);
        assert_eq!(zero.softirq_secs, 0.4);
        assert_eq!(zero.steal_secs, 0.07);
        let both = cpu_times_in(stat, &[0, 1], 100.0);
        assert!((both.busy_secs - 12.65).abs() < 1e-9, "{both:?}");
        assert_eq!(cpu_times_in(stat, &[7], 100.0), CpuTimes::default());
        let [now] = cpu_times([&[0]]);
        assert!(now.busy_secs > 0.0);
    }

    #[test]
    fn the_busiest_threads_count_what_they_spent_in_between() {
        let before = [(1, 1.0), (2, 5.0), (3, 0.5)];
        let after = [(1, 4.0), (2, 5.5), (3, 0.5), (4, 1.0)];
        assert_eq!(busiest(&before, &after, 2), vec![3.0, 1.0]);
        assert_eq!(busiest(&before, &after, 9).len(), 4);
    }

    #[test]
    fn a_one_process_server_has_its_threads_for_workers() {
        let me = std::process::id() as i32;
        let threads = worker_cpu(&[me], Workers::Leaves).unwrap();
        assert!(threads.iter().any(|(tid, _)| *tid == me));
        assert!(worker_cpu(&[me], Workers::Unseen("why")).is_err());
        assert!(worker_cpu(&[me], Workers::Named("no-such-name"))
            .unwrap()
            .is_empty());
    }
}
