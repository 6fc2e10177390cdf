//! `perf stat` around a run: the server's system calls and, where the kernel has the
//! tracepoint, its io_uring submissions (hardware counters are not available on the
//! machines this runs on; tracepoints are).

use std::process::{Command, Stdio};

/// The io_uring tracepoint, when this kernel and perf have it: io_uring servers submit
/// work without a system call per operation, so their syscall count alone flatters them.
const URING_SUBMIT: &str = "io_uring:io_uring_submit_req";

/// Whether `perf stat` can count [`URING_SUBMIT`] here (an unknown event fails the
/// whole `perf stat`, so it is probed once rather than risked on every run).
fn uring_event_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        Command::new("perf")
            .args(["stat", "-x,", "-e", URING_SUBMIT, "--", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// `perf stat` counting the server's system calls (and io_uring submissions, where
/// countable) until it is interrupted.
pub fn start(pids: &[i32]) -> Option<std::process::Child> {
    let list: Vec<String> = pids.iter().map(i32::to_string).collect();
    let mut events = String::from("raw_syscalls:sys_enter");
    if uring_event_available() {
        events.push(',');
        events.push_str(URING_SUBMIT);
    }
    Command::new("perf")
        .args(["stat", "-x,", "-e", &events, "-p", &list.join(",")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ok()
}

/// System calls and io_uring submissions counted (each `None` if not counted).
pub fn stop(perf: std::process::Child) -> (Option<u64>, Option<u64>) {
    // SAFETY: signals our own child.
    unsafe { libc::kill(perf.id() as i32, libc::SIGINT) };
    let Ok(out) = perf.wait_with_output() else {
        return (None, None);
    };
    let text = String::from_utf8_lossy(&out.stderr);
    let count = |event: &str| {
        text.lines()
            .find(|l| l.contains(event))
            .and_then(|l| l.split(',').next()?.trim().parse().ok())
    };
    (count("raw_syscalls:sys_enter"), count(URING_SUBMIT))
}
