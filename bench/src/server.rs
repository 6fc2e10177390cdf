//! Starting, checking and stopping one server for one cell of the matrix.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use crate::variants::{Variant, Workload};

/// Process groups this harness started, killed by [`kill_all`] (also on Ctrl-C).
static GROUPS: [AtomicI32; 8] = [const { AtomicI32::new(0) }; 8];

fn remember(pgid: i32) {
    for slot in &GROUPS {
        if slot
            .compare_exchange(0, pgid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return;
        }
    }
}

fn forget(pgid: i32) {
    for slot in &GROUPS {
        let _ = slot.compare_exchange(pgid, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// SIGKILLs every process group still registered. Async-signal-safe (atomics and kill).
pub fn kill_all() {
    for slot in &GROUPS {
        let pgid = slot.swap(0, Ordering::SeqCst);
        if pgid > 0 {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
}

extern "C" fn on_interrupt(signal: libc::c_int) {
    kill_all();
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(128 + signal) };
}

/// Ctrl-C or SIGTERM: stop every server and client this harness started, then exit.
pub fn install_interrupt_handler() {
    // SAFETY: the handler only calls async-signal-safe functions.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_interrupt as *const () as usize;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
    }
}

/// Sets `cmd` to start in its own process group (registered for cleanup) pinned to `cpus`.
pub fn pinned(cmd: &mut Command, cpus: &[usize]) {
    let cpus = cpus.to_vec();
    cmd.process_group(0);
    // SAFETY: only sched_setaffinity, which is async-signal-safe, runs after fork.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_ZERO(&mut set);
            for &c in &cpus {
                libc::CPU_SET(c, &mut set);
            }
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Spawns a pinned child in its own, registered process group.
pub fn spawn_pinned(mut cmd: Command, cpus: &[usize]) -> std::io::Result<Child> {
    pinned(&mut cmd, cpus);
    let child = cmd.spawn()?;
    remember(child.id() as i32);
    Ok(child)
}

/// Waits for `child` up to `limit`; kills its group if it overruns. Returns its exit
/// status (None when killed) and the CPU seconds it used (from wait4's rusage).
pub fn wait_pinned(child: &mut Child, limit: Duration) -> (Option<i32>, f64) {
    let pid = child.id() as i32;
    let started = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: zeroed rusage is valid; status/rusage are valid out-pointers.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            forget(pid);
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            let cpu = secs(usage.ru_utime) + secs(usage.ru_stime);
            let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            return (code, cpu);
        }
        if r < 0 || started.elapsed() > limit {
            // SAFETY: kills the child's own process group.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let _ = child.wait();
            forget(pid);
            return (None, 0.0);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A server started for one cell.
pub struct Running {
    child: Child,
    pub addr: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
    eof: Arc<AtomicBool>,
}

impl Running {
    /// Starts `variant` from `bin_dir` on a free port, pinned to `cpus`, and waits for
    /// its start-up line.
    pub fn start(
        bin_dir: &Path,
        variant: &Variant,
        workers: usize,
        cpus: &[usize],
        extra: &[String],
    ) -> Result<Running, String> {
        let path = bin_dir.join(variant.binary);
        if !path.exists() {
            return Err(format!(
                "no binary {} (build with --release)",
                path.display()
            ));
        }
        let mut cmd = Command::new(&path);
        cmd.args(["--bind", "127.0.0.1", "--port", "0", "--stats"])
            .args(["--workers", &workers.to_string()])
            .args(variant.args)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = spawn_pinned(cmd, cpus).map_err(|e| format!("cannot start: {e}"))?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let eof = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let pipe = child.stderr.take().ok_or("no stderr")?;
        let (l, e) = (lines.clone(), eof.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let addr = line
                    .split("listening on http://")
                    .nth(1)
                    .and_then(|r| r.split('/').next())
                    .and_then(|a| a.parse::<SocketAddr>().ok());
                l.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                if let Some(addr) = addr {
                    let _ = tx.send(addr);
                }
            }
            e.store(true, Ordering::SeqCst);
        });
        let mut running = Running {
            child,
            addr: "127.0.0.1:0".parse().expect("literal"),
            lines,
            eof,
        };
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(addr) => {
                running.addr = addr;
                Ok(running)
            }
            Err(_) => {
                std::thread::sleep(Duration::from_millis(100));
                let said = running.stderr().join(" / ");
                Err(format!("did not start: {said}"))
            }
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// True while the server's main process runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn stderr(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Stops the server with SIGTERM (SIGKILL after 7 s) and returns its `--stats` lines.
    pub fn stop(mut self) -> Vec<serde_json::Value> {
        let pid = self.pid();
        // SAFETY: signals the server's main process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(7);
        while Instant::now() < deadline && self.alive() {
            std::thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: kills whatever is left of the server's group.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let _ = self.child.wait();
        forget(pid);
        let eof_by = Instant::now() + Duration::from_secs(2);
        while !self.eof.load(Ordering::SeqCst) && Instant::now() < eof_by {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stderr()
            .iter()
            .filter(|l| l.starts_with('{'))
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let pid = self.pid();
        // SAFETY: kills the server's own process group.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let _ = self.child.wait();
        forget(pid);
    }
}

/// Checks the server's answer before measuring it: status 200, the exact body, `Server`
/// and `Date` headers. A server that answers wrongly is not worth a figure.
pub fn validate(addr: SocketAddr, workload: &Workload) -> Result<(), String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("cannot connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n",
        workload.path
    );
    s.write_all(request.as_bytes())
        .map_err(|e| format!("cannot send: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .map_err(|e| format!("no complete answer: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no response head")?;
    let status = head.lines().next().unwrap_or("");
    if !status.contains(" 200 ") {
        return Err(format!(
            "status line {status:?}: {body}",
            body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b).trim()
        ));
    }
    let has = |name: &str| {
        head.lines().any(|l| {
            l.split_once(':')
                .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        })
    };
    if !has("server") || !has("date") {
        return Err("missing Server or Date header".into());
    }
    if !(workload.check)(body.as_bytes()) {
        return Err(format!("body {body:?}"));
    }
    Ok(())
}
