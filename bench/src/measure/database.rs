//! The database of the `pg` workloads: the cluster of `scripts/pg` (see
//! `variants::database`), placed on `--db-cpus`. Where the database runs is half of what
//! `/pg` measures: on the server's CPU (the post's one-CPU machine) a request that waits
//! for it overlaps nothing, since the database needs that CPU to answer; on CPUs of its
//! own, waiting without a thread lets the server run other requests meanwhile.

use variants::database::Cluster;

/// Starts (or finds) the cluster and pins the postmaster and every process it forked to
/// `cpus`; backends it forks later inherit the mask.
pub fn start(cpus: &[usize]) -> Result<Cluster, String> {
    let cluster = Cluster::start()?;
    let pid = cluster.pid()?;
    if cluster.started_here() {
        // Ctrl-C stops it too: SIGINT is PostgreSQL's fast shutdown.
        variants::launch::stop_on_interrupt(pid, libc::SIGINT);
    }
    place(pid, cpus).map_err(|e| format!("--db-cpus: {e}"))?;
    Ok(cluster)
}

/// Moves the cluster whose postmaster is `pid` onto `cpus`: every thread of it and of each
/// backend it has forked (the ones it forks later inherit the postmaster's).
pub fn place(pid: i32, cpus: &[usize]) -> Result<(), String> {
    for p in variants::launch::tree(pid) {
        match pin(p, cpus) {
            // A backend that ended meanwhile has nothing left to move.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => {
                return Err(format!(
                    "cannot move PostgreSQL pid {p} to CPUs {cpus:?}: {e}"
                ))
            }
            Ok(()) => {}
        }
    }
    Ok(())
}

/// Every thread of `pid`, onto `cpus`.
fn pin(pid: i32, cpus: &[usize]) -> std::io::Result<()> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))?;
    for tid in tasks
        .flatten()
        .filter_map(|t| t.file_name().to_str()?.parse::<i32>().ok())
    {
        variants::launch::set_affinity(tid, cpus)?;
    }
    Ok(())
}
