//! A CPU cap: a share of one CPU for a server (and its database), as a post's VM had —
//! VirtualBox limited to 40 % of a core. A cgroup of its own with the CPU controller's
//! quota (cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us` where the v2 hierarchy has no CPU
//! controller), the server's processes moved into it after they start (the ones they fork
//! later inherit it). Removed when dropped, its processes moved back first.

use std::path::{Path, PathBuf};

/// The scheduler period of the quota: the kernel's default, 100 ms.
const PERIOD_US: u64 = 100_000;

/// A cgroup holding its processes to `pct` % of one CPU.
#[derive(Debug)]
pub struct CpuCap {
    dir: PathBuf,
    /// Where its processes go back to when it is removed: the hierarchy's root.
    root: PathBuf,
    pub pct: u32,
}

impl CpuCap {
    /// Makes the cgroup; `Err` says why this machine cannot (no writable CPU controller:
    /// not root, or a container without it).
    pub fn create(pct: u32) -> Result<CpuCap, String> {
        if !(1..=100).contains(&pct) {
            return Err(format!("a CPU cap is 1 to 100 % of a CPU, not {pct}"));
        }
        let name = format!("archzoo-cap-{}", std::process::id());
        let v2 = Path::new("/sys/fs/cgroup");
        let v2_cpu = std::fs::read_to_string(v2.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"));
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let quota_us = PERIOD_US * u64::from(pct) / 100;
        // The quota's files: cgroup v2's one, or v1's two.
        let (root, files): (&Path, Vec<(&str, String)>) = if v2_cpu {
            (v2, vec![("cpu.max", format!("{quota_us} {PERIOD_US}"))])
        } else if v1.join("cpu.cfs_quota_us").exists() {
            (
                v1,
                vec![
                    ("cpu.cfs_period_us", PERIOD_US.to_string()),
                    ("cpu.cfs_quota_us", quota_us.to_string()),
                ],
            )
        } else {
            return Err("no cgroup CPU controller here (neither cgroup v2's cpu nor v1's)".into());
        };
        let dir = root.join(name);
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cannot make the cgroup {}: {e}", dir.display()))?;
        let cap = CpuCap {
            dir,
            root: root.to_path_buf(),
            pct,
        };
        for (file, value) in files {
            std::fs::write(cap.dir.join(file), value)
                .map_err(|e| format!("cannot set the CPU quota ({file}): {e}"))?;
        }
        Ok(cap)
    }

    /// Moves `pid` and every process it forked into the cap.
    pub fn add(&self, pid: i32) -> Result<(), String> {
        for p in variants::launch::tree(pid) {
            std::fs::write(self.dir.join("cgroup.procs"), p.to_string())
                .map_err(|e| format!("cannot cap pid {p}: {e}"))?;
        }
        Ok(())
    }

    /// The share of a CPU it allows.
    pub fn share(&self) -> f64 {
        f64::from(self.pct) / 100.0
    }
}

impl Drop for CpuCap {
    fn drop(&mut self) {
        // A cgroup with processes cannot be removed: those still alive (the database)
        // go back to the root first.
        if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = std::fs::write(self.root.join("cgroup.procs"), pid);
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_outside_one_cpu_is_refused() {
        assert!(CpuCap::create(0).unwrap_err().contains("1 to 100"));
        assert!(CpuCap::create(101).is_err());
    }
}
