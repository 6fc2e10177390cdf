//! `perf stat` around a run: the server's system calls, in all and by name, and, where the
//! kernel has the tracepoint, its io_uring submissions (hardware counters are not available
//! on the machines this runs on; tracepoints are).

use std::process::{Command, Stdio};

/// The io_uring tracepoint, when this kernel and perf have it: io_uring servers submit
/// work without a system call per operation, so their syscall count alone flatters them.
const URING_SUBMIT: &str = "io_uring:io_uring_submit_req";

/// One tracepoint per system call (`read`, `sendto`, `epoll_wait`, …): the breakdown by
/// name, from the same `perf stat`.
const BY_NAME: &str = "syscalls:sys_enter_*";

/// Whether `perf stat` can count `event` here (an unknown event fails the whole
/// `perf stat`, so each is probed once rather than risked on every run).
fn available(event: &'static str) -> bool {
    static PROBED: std::sync::Mutex<Vec<(&str, bool)>> = std::sync::Mutex::new(Vec::new());
    let mut probed = PROBED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&(_, ok)) = probed.iter().find(|(e, _)| *e == event) {
        return ok;
    }
    let ok = Command::new("perf")
        .args(["stat", "-x,", "-e", event, "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    probed.push((event, ok));
    ok
}

/// What one `perf stat` counted (each `None` if not counted).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Counts {
    pub syscalls: Option<u64>,
    pub submissions: Option<u64>,
    /// Each system call the server made, by name, most frequent first (zeros left out).
    pub by_name: Vec<(String, u64)>,
}

/// `perf stat` counting the server's system calls (and io_uring submissions, where
/// countable) until it is interrupted.
pub fn start(pids: &[i32]) -> Option<std::process::Child> {
    let list: Vec<String> = pids.iter().map(i32::to_string).collect();
    let mut events = String::from("raw_syscalls:sys_enter");
    for extra in [URING_SUBMIT, BY_NAME] {
        if available(extra) {
            events.push(',');
            events.push_str(extra);
        }
    }
    Command::new("perf")
        .args(["stat", "-x,", "-e", &events, "-p", &list.join(",")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ok()
}

/// Stops the count and reads it.
pub fn stop(perf: std::process::Child) -> Counts {
    // SAFETY: signals our own child.
    unsafe { libc::kill(perf.id() as i32, libc::SIGINT) };
    match perf.wait_with_output() {
        Ok(out) => parse(&String::from_utf8_lossy(&out.stderr)),
        Err(_) => Counts::default(),
    }
}

/// Reads `perf stat -x,` output: `count,unit,event,…` a line.
pub fn parse(text: &str) -> Counts {
    let mut counts = Counts::default();
    for line in text.lines() {
        let mut fields = line.split(',');
        let (Some(count), Some(event)) = (fields.next(), fields.nth(1)) else {
            continue;
        };
        let Ok(count) = count.trim().parse::<u64>() else {
            continue; // "<not counted>", "<not supported>"
        };
        match event.trim() {
            "raw_syscalls:sys_enter" => counts.syscalls = Some(count),
            URING_SUBMIT => counts.submissions = Some(count),
            e => {
                if let Some(name) = e.strip_prefix("syscalls:sys_enter_") {
                    if count > 0 {
                        counts.by_name.push((name.to_string(), count));
                    }
                }
            }
        }
    }
    counts
        .by_name
        .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_read_in_all_and_by_name() {
        let text = "\
1200,,raw_syscalls:sys_enter,100,100.00,,
30,,io_uring:io_uring_submit_req,100,100.00,,
0,,syscalls:sys_enter_ioperm,100,100.00,,
400,,syscalls:sys_enter_sendto,100,100.00,,
800,,syscalls:sys_enter_recvfrom,100,100.00,,
<not counted>,,syscalls:sys_enter_read,0,0.00,,
";
        let c = parse(text);
        assert_eq!(c.syscalls, Some(1200));
        assert_eq!(c.submissions, Some(30));
        assert_eq!(
            c.by_name,
            vec![("recvfrom".to_string(), 800), ("sendto".to_string(), 400)]
        );
    }
}
