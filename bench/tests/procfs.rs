//! /proc accounting on a process tree this test starts: a shell with two busy children.

use std::process::Command;
use std::time::Duration;

use bench::measure::procfs;

#[test]
fn tree_usage_counts_every_descendant() {
    let mut shell = Command::new("sh")
        .args([
            "-c",
            "timeout 3 sh -c 'while :; do :; done' & timeout 3 sh -c 'while :; do :; done' & wait",
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let pids = procfs::tree(shell.id() as i32);
    assert!(pids.len() >= 3, "shell and two children: {pids:?}");
    let before = procfs::usage(&pids);
    std::thread::sleep(Duration::from_millis(700));
    let spent = procfs::usage(&pids).since(&before);
    let _ = Command::new("kill")
        .args(["-9", &shell.id().to_string()])
        .status();
    for pid in &pids[1..] {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    let _ = shell.wait();
    // Two busy loops for 0.7 s: at least 0.2 CPU-seconds even on a loaded machine.
    assert!(spent.cpu_secs >= 0.2, "{spent:?}");
    assert!(procfs::peak_rss_kib(&[std::process::id() as i32]) > 0);
}
