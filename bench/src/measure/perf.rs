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

/// How long `perf stat` may take to attach its events before the run starts anyway.
const ATTACH_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// `perf stat` counting the server's system calls (and io_uring submissions, where
/// countable) until it is interrupted; it returns once perf counts.
///
/// Attaching takes a while — a tracepoint per system call (`syscalls:sys_enter_*`, some
/// 350) on every thread of the server — and on a loaded machine longer than a one-second
/// run: perf interrupted before it counted printed nothing, and the run had no system
/// calls (the suite's tests, run side by side, met it). So perf starts with its events
/// disabled (`-D -1`) and a control pipe (`--control fd:3,4`); it acknowledges the
/// `enable` it is sent once the events are attached and on, and only then does the
/// client start.
pub fn start(pids: &[i32]) -> Option<std::process::Child> {
    use std::io::{BufRead, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let list: Vec<String> = pids.iter().map(i32::to_string).collect();
    let mut events = String::from("raw_syscalls:sys_enter");
    for extra in [URING_SUBMIT, BY_NAME] {
        if available(extra) {
            events.push(',');
            events.push_str(extra);
        }
    }
    let (ctl_read, ctl_write) = std::io::pipe().ok()?;
    let (ack_read, ack_write) = std::io::pipe().ok()?;
    let (ctl, ack) = (ctl_read.as_raw_fd(), ack_write.as_raw_fd());
    let mut cmd = Command::new("perf");
    cmd.args(["stat", "-x,", "-D", "-1", "--control", "fd:3,4"])
        .args(["-e", &events, "-p", &list.join(",")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec only dup, dup2 and fcntl, which are
    // async-signal-safe: they give perf the pipes' ends at 3 and 4 without close-on-exec.
    unsafe {
        cmd.pre_exec(move || {
            // The ack end out of the way first if it sits where the control end goes.
            let ack = if ack == 3 { libc::dup(ack) } else { ack };
            for (fd, to) in [(ctl, 3), (ack, 4)] {
                // dup2 onto itself changes nothing: clear close-on-exec by hand there.
                let done = if fd == to {
                    libc::fcntl(fd, libc::F_SETFD, 0)
                } else {
                    libc::dup2(fd, to)
                };
                if fd < 0 || done < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn().ok()?;
    drop((ctl_read, ack_write));
    let mut ctl_write = ctl_write;
    let _ = ctl_write.write_all(b"enable\n");
    // Wait for the acknowledgement on a thread of its own, bounded: perf that fails to
    // attach exits (the read sees the end of the pipe), one that hangs is not waited for.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(ack_read).read_line(&mut line);
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(ATTACH_LIMIT);
    Some(child)
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
