//! The PostgreSQL cluster of the `/pg` workload, as the suite and the harness use it:
//! `scripts/pg` starts a throwaway cluster under the build directory (installing
//! PostgreSQL where it can, building the post's table once), and a [`Cluster`] stops it
//! again when dropped — unless it was already running before (someone else's, or a
//! developer's left running on purpose).

use std::path::PathBuf;
use std::process::Command;

/// `scripts/pg` of this checkout.
fn script() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pg"))
}

fn run(command: &str) -> Result<String, String> {
    let out = Command::new(script())
        .arg(command)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script().display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("failed");
        return Err(format!("scripts/pg {command}: {line}"));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A running cluster and its URL.
#[derive(Debug)]
pub struct Cluster {
    pub url: String,
    started_here: bool,
}

impl Cluster {
    /// The running cluster, started if none was (a few seconds; the first time, also
    /// `initdb` and the 1,000,000-row table). The error is one line saying what failed.
    pub fn start() -> Result<Cluster, String> {
        let started_here = run("url").is_err();
        let url = run("start")?;
        Ok(Cluster { url, started_here })
    }

    /// The postmaster's pid (its backends are its children: pinning it pins them).
    pub fn pid(&self) -> Result<i32, String> {
        run("pid")?
            .parse()
            .map_err(|e| format!("scripts/pg pid: {e}"))
    }

    /// Restarts the running cluster (a fast shutdown: every connection is cut, as when a
    /// database fails over) and says its new postmaster's pid. `--chaos restart-db`.
    pub fn restart_running() -> Result<i32, String> {
        run("restart")?;
        run("pid")?
            .parse()
            .map_err(|e| format!("scripts/pg pid: {e}"))
    }

    /// Whether this handle started the cluster (and stops it when dropped).
    pub fn started_here(&self) -> bool {
        self.started_here
    }

    /// Stops the cluster now if this handle started it.
    pub fn stop(&mut self) {
        if std::mem::take(&mut self.started_here) {
            if let Err(e) = run("stop") {
                eprintln!("{e}");
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}
