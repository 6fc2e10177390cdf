//! What a process tree spent, read from /proc: the figures that rank servers stably on a
//! small, noisy machine, where absolute requests per second do not.

use std::fs;

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

/// Fields of /proc/PID/stat after the command name (which may contain spaces).
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 2..];
    Some(after.split_whitespace().map(str::to_string).collect())
}

/// `root` and every process descended from it (workers forked by a master).
pub fn tree(root: i32) -> Vec<i32> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            if let Some(f) = stat_fields(pid) {
                // fields[1] is the parent pid ("state ppid ...").
                if let Some(ppid) = f.get(1).and_then(|p| p.parse().ok()) {
                    parents.push((pid, ppid));
                }
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found
}

/// CPU time of the processes (every thread included: the process-level stat sums them)
/// and context switches summed over each of their threads.
pub fn usage(pids: &[i32]) -> Usage {
    let ticks = clock_ticks();
    let mut total = Usage::default();
    for &pid in pids {
        if let Some(f) = stat_fields(pid) {
            // utime and stime are fields 14 and 15 of stat; 12 and 13 after the name.
            let utime: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
            let stime: f64 = f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
            total.cpu_secs += (utime + stime) / ticks;
        }
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(status) = fs::read_to_string(task.path().join("status")) else {
                continue;
            };
            for line in status.lines() {
                let value = |l: &str| l.split_whitespace().nth(1)?.parse::<u64>().ok();
                if line.starts_with("voluntary_ctxt_switches") {
                    total.voluntary_switches += value(line).unwrap_or(0);
                } else if line.starts_with("nonvoluntary_ctxt_switches") {
                    total.involuntary_switches += value(line).unwrap_or(0);
                }
            }
        }
    }
    total
}

/// CPU time (utime + stime, seconds) of every thread of the processes, by thread id: what
/// each worker did, read the same way for a model and for a third-party server that keeps
/// no counts of its own.
pub fn thread_cpu(pids: &[i32]) -> Vec<(i32, f64)> {
    let ticks = clock_ticks();
    let mut out = Vec::new();
    for &pid in pids {
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Some(tid) = task
                .file_name()
                .to_str()
                .and_then(|t| t.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(text) = fs::read_to_string(task.path().join("stat")) else {
                continue;
            };
            let Some(after) = text.rfind(')').and_then(|i| text.get(i + 2..)) else {
                continue;
            };
            let f: Vec<&str> = after.split_whitespace().collect();
            let field = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            out.push((tid, (field(11) + field(12)) / ticks));
        }
    }
    out
}

/// The CPU each of the `n` busiest threads spent between two [`thread_cpu`] readings,
/// busiest first (a thread born in between counts from zero).
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
    pids.iter()
        .filter_map(|pid| fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .sum()
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
    fn the_busiest_threads_count_what_they_spent_in_between() {
        let before = [(1, 1.0), (2, 5.0), (3, 0.5)];
        let after = [(1, 4.0), (2, 5.5), (3, 0.5), (4, 1.0)];
        assert_eq!(busiest(&before, &after, 2), vec![3.0, 1.0]);
        assert_eq!(busiest(&before, &after, 9).len(), 4);
    }

    #[test]
    fn this_process_threads_are_read() {
        let me = std::process::id() as i32;
        let threads = thread_cpu(&[me]);
        assert!(threads.iter().any(|(tid, _)| *tid == me));
    }
}
