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
    for p in variants::launch::tree(pid) {
        pin(p, cpus).map_err(|e| format!("--db-cpus: cannot pin PostgreSQL pid {p}: {e}"))?;
    }
    Ok(cluster)
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
