//! Starting a server binary and stopping it, the one way the suite and the harness both do
//! it: in its own process group (so that stopping it reaches every worker it forked), on a
//! free loopback port whose number is read from the start-up line
//! (`ARCH: listening on http://ADDR/ — DETAILS`), with its stderr collected line by line.
//!
//! Every group started here is registered until it is reaped: dropping a [`Server`] kills
//! its group, [`kill_all`] (which [`install_interrupt_handler`] runs on Ctrl-C or SIGTERM,
//! installed by the first start) kills whatever is left, and a process killed outright
//! takes what it started with it (PR_SET_PDEATHSIG) — a failing test, an interrupted
//! benchmark or a killed test binary leaves no server behind. A peer's main process adopts
//! what its command line orphans (a daemonized back end: counted and stopped with it), and
//! a peer that daemonizes itself is an error that says so, its daemon stopped.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a server may take to print its start-up line (building `/db` comes before).
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Process groups started here and not yet reaped, for [`kill_all`].
static GROUPS: [AtomicI32; 64] = [const { AtomicI32::new(0) }; 64];

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

/// A daemon to stop too on Ctrl-C (a database cluster started for the run), and the
/// signal that stops it cleanly.
static ALSO_STOP: [AtomicI32; 2] = [AtomicI32::new(0), AtomicI32::new(0)];

/// On Ctrl-C or SIGTERM, also send `signal` to `pid`: a process that is not in a group
/// started here (PostgreSQL's postmaster daemonizes) but was started for this run.
pub fn stop_on_interrupt(pid: i32, signal: libc::c_int) {
    ALSO_STOP[1].store(signal, Ordering::SeqCst);
    ALSO_STOP[0].store(pid, Ordering::SeqCst);
}

extern "C" fn on_interrupt(signal: libc::c_int) {
    kill_all();
    let pid = ALSO_STOP[0].swap(0, Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid, ALSO_STOP[1].load(Ordering::SeqCst)) };
    }
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(128 + signal) };
}

/// Ctrl-C or SIGTERM: stop every server and client started here, then exit. A signal
/// whose handler someone else set is left to it. Done on the first start too (a test
/// binary has no `main` to call it: killed by `timeout`, which signals its whole process
/// group, it used to leave its servers running).
pub fn install_interrupt_handler() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is valid; the handler only calls async-signal-safe
        // functions; both pointers are valid or null.
        unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            libc::sigaction(signal, std::ptr::null(), &mut current);
            let ours = on_interrupt as *const () as usize;
            if current.sa_sigaction != libc::SIG_DFL && current.sa_sigaction != ours {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = ours;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Pins thread `tid` (0: the calling one) to `cpus`. Async-signal-safe (no allocation),
/// so it may run between fork and exec.
pub fn set_affinity(tid: i32, cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays inside it for CPU
    // numbers below CPU_SETSIZE (a CpuList refuses others), and the size passed matches.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Sets `cmd` to start in its own process group, pinned to `cpus` (all CPUs when empty),
/// with the open-file limit `max_files` (soft, hard) if given; adopting what it orphans if
/// `adopt` (a peer's command line, which may start a daemon).
fn prepare(cmd: &mut Command, cpus: &[usize], max_files: Option<(u64, u64)>, adopt: bool) {
    static HANDLER: std::sync::Once = std::sync::Once::new();
    HANDLER.call_once(install_interrupt_handler);
    let cpus = cpus.to_vec();
    let parent = std::process::id() as libc::pid_t;
    cmd.process_group(0);
    // SAFETY: only prctl, getppid, sched_setaffinity and setrlimit, async-signal-safe, run
    // between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Killed with the thread that started it, which a process killed outright
            // (SIGKILL, a crash) takes with it: no handler runs then, and a server would
            // outlive its test. Its workers die with it (the supervisor's own
            // PR_SET_PDEATHSIG); a peer's shell dies, what it started may not. Every start
            // here is made by a thread that outlives what it started (a test's, bench's
            // main), which that signal requires.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                // The parent died before the prctl: nobody left to stop this one.
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            // What a peer starts and orphans (a back end that daemonizes: `php-fpm -D`
            // behind a front server in the foreground) is adopted by its main process, not
            // by init: still in its [`tree`], so its CPU is counted and a stop reaches it
            // although it left the group. Kept across the exec.
            if adopt && libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if !cpus.is_empty() {
                set_affinity(0, &cpus)?;
            }
            if let Some((soft, hard)) = max_files {
                let rl = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Reads all of `child`'s piped stdout on a thread of its own (a client's report, read
/// while it runs so that a full pipe never stalls it); join for the text.
pub fn read_stdout(child: &mut Child) -> std::thread::JoinHandle<String> {
    let stdout = child.stdout.take();
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut out) = stdout {
            let _ = std::io::Read::read_to_string(&mut out, &mut text);
        }
        text
    })
}

/// Spawns `cmd` (a load generator, an attacker) pinned to `cpus`, in its own registered
/// process group.
pub fn spawn_pinned(mut cmd: Command, cpus: &[usize]) -> std::io::Result<Child> {
    prepare(&mut cmd, cpus, None, false);
    let child = cmd.spawn()?;
    remember(child.id() as i32);
    Ok(child)
}

/// Waits for a child of [`spawn_pinned`] up to `limit`; kills its group if it overruns.
/// Returns its exit status (None when killed) and the CPU seconds it used (wait4's rusage).
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

/// How to start one server: the binary, its flags, where it may run.
pub struct Launch {
    cmd: Command,
    cpus: Vec<usize>,
    max_files: Option<(u64, u64)>,
    /// A peer's command line: its main process adopts what it orphans (see [`prepare`]).
    adopt: bool,
}

/// The fields of `dir/stat` (`/proc/PID` or `/proc/PID/task/TID`) after the command name,
/// which may hold spaces: state is 0, ppid 1, pgrp 2, utime 11, stime 12.
pub fn stat_fields(dir: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(dir.join("stat")).ok()?;
    let after = text.get(text.rfind(')')? + 2..)?;
    Some(after.split_whitespace().map(str::to_string).collect())
}

/// [`stat_fields`] of process `pid`.
pub fn stat_of(pid: i32) -> Option<Vec<String>> {
    stat_fields(Path::new(&format!("/proc/{pid}")))
}

/// Where a process's start time (in clock ticks since boot) is among [`stat_fields`].
const STARTTIME: usize = 19;

/// Sends `signal` to each process that still has the start time it was listed with.
fn signal_all(processes: &[(i32, u64)], signal: libc::c_int) {
    for &(pid, started) in processes {
        if start_time(pid) == Some(started) {
            // SAFETY: kill has no memory-safety preconditions; the pid is the process
            // listed (same start time).
            unsafe { libc::kill(pid, signal) };
        }
    }
}

/// The inodes of the TCP sockets listening on `port` (any address) in this network
/// namespace, from /proc/net/tcp and tcp6.
pub fn listening_inodes(port: u16) -> Vec<String> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .filter_map(|line| {
                    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
                    let f: Vec<&str> = line.split_whitespace().collect();
                    let local_port = f.get(1)?.rsplit(':').next()?;
                    let listening = *f.get(3)? == "0A";
                    let inode = f.get(9)?;
                    (listening && u16::from_str_radix(local_port, 16).ok()? == port)
                        .then(|| inode.to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The processes holding a socket that listens on `port` ([`listening_inodes`]), from
/// every process's descriptors.
pub fn listening_on(port: u16) -> Vec<i32> {
    let sockets: Vec<String> = listening_inodes(port)
        .iter()
        .map(|inode| format!("socket:[{inode}]"))
        .collect();
    if sockets.is_empty() {
        return Vec::new();
    }
    processes()
        .map(|(pid, _)| pid)
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                .any(|target| sockets.iter().any(|s| target.as_os_str() == s.as_str()))
        })
        .collect()
}

/// A process's start time, in clock ticks since boot.
fn start_time(pid: i32) -> Option<u64> {
    stat_of(pid)?.get(STARTTIME)?.parse().ok()
}

/// After a peer's main process (born at `born`, [`start_time`]) exited before `addr`
/// accepted: whether it daemonized — a process born since now listens there (the port
/// was free at the start). Such a peer cannot be measured (its processes are nobody's
/// descendants here) nor stopped by its group, so it is stopped now, with every process
/// of its own group and tree, and the error says how to run it instead. Waits up to a
/// second for the daemon to bind.
fn daemon_on(addr: SocketAddr, born: u64) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(1);
    let pids = loop {
        let mut pids = listening_on(addr.port());
        // Never a process that was there before the peer: it is not the peer's.
        pids.retain(|&p| start_time(p).is_some_and(|t| t >= born));
        if !pids.is_empty() || Instant::now() >= deadline {
            break pids;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let first = *pids.first()?;
    let name = std::fs::read_to_string(format!("/proc/{first}/comm"))
        .map(|n| n.trim().to_string())
        .unwrap_or_default();
    // SAFETY: getpgrp has no preconditions.
    let ours = unsafe { libc::getpgrp() };
    let mut stopped = Vec::new();
    for pid in pids {
        let group = stat_of(pid)
            .and_then(|f| f.get(2)?.parse::<i32>().ok())
            .filter(|&g| g > 1 && g != ours);
        if let Some(group) = group {
            // SAFETY: the group the daemon made for itself (setsid), not ours or init's.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        for p in tree(pid) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(p, libc::SIGKILL) };
            stopped.push(p);
        }
    }
    stopped.sort_unstable();
    stopped.dedup();
    Some(format!(
        "daemonized: its first process exited and pid {first} ({name}) listens on {addr}, \
         outside what was started — run it in the foreground (nginx: daemon off; php-fpm: -F; \
         Workerman: without -d; Swoole: daemonize => false); stopped pids {stopped:?}"
    ))
}

/// The pids in /proc, each with its stat fields.
fn processes() -> impl Iterator<Item = (i32, Vec<String>)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            Some((pid, stat_fields(&entry.path())?))
        })
}

/// `root` and every process descended from it (workers forked by a master, a front
/// server's back end), from the parent pids in /proc.
pub fn tree(root: i32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = processes()
        .filter_map(|(pid, f)| Some((pid, f.get(1)?.parse::<i32>().ok()?)))
        .collect();
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

/// One thread of a process and how often it has left its CPU so far, from
/// `/proc/PID/task/TID/status`: what a harness sums (a server's switches a request) and a
/// rule reads thread by thread (an idle thread that keeps waking).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    pub tid: i32,
    pub name: String,
    /// Blocked: waited for something (a read, a lock, a timer).
    pub voluntary_switches: u64,
    /// Preempted: its time slice ran out or something more urgent ran.
    pub involuntary_switches: u64,
}

/// Every thread of `pid`; none if it is gone, and without one that ended while read.
pub fn threads(pid: i32) -> Vec<Thread> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| {
            let tid = task.file_name().to_str()?.parse().ok()?;
            let status = std::fs::read_to_string(task.path().join("status")).ok()?;
            let field = |label: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(label))
                    .map(str::trim)
            };
            let count = |label: &str| field(label).and_then(|v| v.parse().ok()).unwrap_or(0);
            Some(Thread {
                tid,
                name: field("Name:").unwrap_or("?").to_string(),
                voluntary_switches: count("voluntary_ctxt_switches:"),
                involuntary_switches: count("nonvoluntary_ctxt_switches:"),
            })
        })
        .collect()
}

/// True while `pid` runs (a zombie, dead and not yet reaped, does not count).
pub fn running(pid: i32) -> bool {
    stat_of(pid).is_some_and(|f| f.first().is_some_and(|state| state != "Z"))
}

/// `field` (a memory figure of /proc/PID/status such as `VmRSS` or `VmHWM`) summed over
/// `pids`, in KiB.
pub fn status_kib(pids: &[i32], field: &str) -> u64 {
    let label = format!("{field}:");
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with(&label))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .sum()
}

/// The lowest port [`free_port`] hands out: above the well-known and most registered
/// services' ports.
const PEER_PORTS_FROM: u16 = 20_000;

/// The next port [`free_port`] tries, starting at a random one (so that two processes —
/// two test binaries, a test and a `bench` — seldom walk the same numbers).
static NEXT_PORT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A free port for a server that cannot be told to pick one (a peer): checked by a bind and
/// released, so another process could still take it before the server does — then its
/// start fails clearly and the cell says so.
///
/// Why not port 0: the kernel picks that from the ephemeral range
/// (`net.ipv4.ip_local_port_range`, 32768–60999 by default), the same range every client
/// connection takes its local port from. Tests run side by side (and `ab` without
/// keep-alive opens thousands of connections), so the port found free was now and then a
/// client's local port before the peer bound it — uWSGI's "Address already in use". A
/// port below that range is never handed to a connection; ports are handed out in turn
/// within a process, so two peers started at once do not get the same one.
pub fn free_port() -> std::io::Result<u16> {
    let (below, _) = ephemeral_range();
    if below > PEER_PORTS_FROM + 1_000 {
        let span = u32::from(below - PEER_PORTS_FROM);
        let _ = NEXT_PORT.compare_exchange(
            0,
            fastrand::u32(1..=span),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        for _ in 0..64 {
            let n = NEXT_PORT.fetch_add(1, Ordering::SeqCst);
            let port = PEER_PORTS_FROM + (n % span) as u16;
            // The wildcard address conflicts with any listener on the port, whichever
            // address it is bound to.
            if std::net::TcpListener::bind(("0.0.0.0", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `net.ipv4.ip_local_port_range`: the ports the kernel hands to connections and to binds
/// on port 0 (Linux's default when /proc cannot say).
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|n| n.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32_768, 60_999))
}

impl Launch {
    /// `binary` on 127.0.0.1, port 0 (a free port, named in its start-up line).
    pub fn new(binary: &Path) -> Launch {
        Launch::new_on(binary, std::net::Ipv4Addr::LOCALHOST.into())
    }

    /// `binary` on `addr`, port 0: a test host's address (see [`Launch::in_namespace`]).
    pub fn new_on(binary: &Path, addr: std::net::IpAddr) -> Launch {
        let mut cmd = Command::new(binary);
        cmd.args(["--bind", &addr.to_string(), "--port", "0"]);
        Launch::from_command(cmd)
    }

    /// A shell command line (a peer: `sh -c COMMAND`), with nothing added to it.
    pub fn shell(command: &str) -> Launch {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", command]);
        let mut launch = Launch::from_command(cmd);
        launch.adopt = true;
        launch
    }

    /// No input, no output; stderr collected (the start-up line, `--stats`, errors).
    fn from_command(mut cmd: Command) -> Launch {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        Launch {
            cmd,
            cpus: Vec::new(),
            max_files: None,
            adopt: false,
        }
    }

    /// Runs the server inside the network namespace `ns` (a test host: `ip netns exec`,
    /// which execs it, so its pid is the server's), with the flags it has so far; made
    /// with [`Launch::new_on`] the namespace's address, it listens there.
    pub fn in_namespace(self, ns: &str) -> Launch {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns])
            .arg(self.cmd.get_program())
            .args(self.cmd.get_args());
        for (key, value) in self.cmd.get_envs() {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        let mut launch = Launch::from_command(cmd);
        launch.cpus = self.cpus;
        launch.max_files = self.max_files;
        launch.adopt = self.adopt;
        launch
    }

    /// Adds flags.
    pub fn args<I, S>(mut self, args: I) -> Launch
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd.args(args);
        self
    }

    /// Sets an environment variable of the server's.
    pub fn env(mut self, key: &str, value: &str) -> Launch {
        self.cmd.env(key, value);
        self
    }

    /// Pins the server (every process and thread it starts) to `cpus`.
    pub fn pin(mut self, cpus: &[usize]) -> Launch {
        self.cpus = cpus.to_vec();
        self
    }

    /// Starts it with the open-file limit (soft, hard): to run it out of descriptors on
    /// purpose, or to see it raise its soft limit.
    pub fn max_files(mut self, soft: u64, hard: u64) -> Launch {
        self.max_files = Some((soft, hard));
        self
    }

    /// Starts a server that prints no archzoo start-up line (a peer) and waits until
    /// `addr` accepts connections. A server that exits first, or does not listen within
    /// the start time, is an `Err` with what it printed. Stopping it signals its whole
    /// process group, since its main process may be a shell or a master of its own kind.
    pub fn start_at(self, addr: SocketAddr) -> Result<Server, String> {
        let mut server = self.spawn()?;
        server.addr = addr;
        server.signal_group = true;
        // When it was born, before anything reaps it: a daemon it leaves is born after.
        let born = start_time(server.pid()).unwrap_or(u64::MAX);
        let started = Instant::now();
        while started.elapsed() < START_TIMEOUT {
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(server);
            }
            if !server.alive() {
                if let Some(daemon) = daemon_on(addr, born) {
                    return Err(daemon);
                }
                server.await_eof();
                return Err(format!(
                    "exited before listening on {addr}: {}",
                    server.stderr_lines().join(" / ")
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "not listening on {addr} after {START_TIMEOUT:?}: {}",
            server.stderr_lines().join(" / ")
        ))
    }

    /// Starts the server and waits for its start-up line. A server that exits or stays
    /// silent is an `Err` with what it printed.
    pub fn start(self) -> Result<Server, String> {
        let (server, rx) = self.spawn_reading()?;
        Self::await_line(server, rx)
    }

    fn spawn(self) -> Result<Server, String> {
        self.spawn_reading().map(|(server, _)| server)
    }

    fn await_line(mut server: Server, rx: mpsc::Receiver<SocketAddr>) -> Result<Server, String> {
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(addr) => {
                server.addr = addr;
                Ok(server)
            }
            Err(_) => {
                std::thread::sleep(Duration::from_millis(100));
                Err(format!(
                    "no start-up line; stderr: {}",
                    server.stderr_lines().join(" / ")
                ))
            }
        }
    }

    /// Spawns the command in its own process group with a thread collecting its stderr;
    /// the receiver gets the address of an archzoo start-up line.
    fn spawn_reading(mut self) -> Result<(Server, mpsc::Receiver<SocketAddr>), String> {
        let command = command_line(&self.cmd);
        prepare(&mut self.cmd, &self.cpus, self.max_files, self.adopt);
        let mut child = self.cmd.spawn().map_err(|e| format!("cannot start: {e}"))?;
        remember(child.id() as i32);
        let lines = Arc::new(Mutex::new(Vec::new()));
        let eof = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let pipe = child.stderr.take().ok_or("no stderr")?;
        let (l, e) = (lines.clone(), eof.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let addr = listening_addr(&line);
                // Stored before the address is announced: whoever got the address finds
                // the start-up line among the stderr lines too.
                l.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                if let Some(addr) = addr {
                    let _ = tx.send(addr);
                }
            }
            e.store(true, Ordering::SeqCst);
        });
        let server = Server {
            child,
            command,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            lines,
            eof,
            signal_group: false,
        };
        Ok((server, rx))
    }
}

/// `cmd` as a person would type it: a `sh -c` command as given, otherwise the program and
/// its arguments, each quoted where the shell would split or expand it.
fn command_line(cmd: &Command) -> String {
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if cmd.get_program() == "sh" && args.len() == 2 && args[0] == "-c" {
        return args[1].clone();
    }
    std::iter::once(cmd.get_program().to_string_lossy().into_owned())
        .chain(args)
        .map(|a| shell_word(&a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `arg` as a person types it into a shell: as is where the shell would neither split nor
/// expand it, else in single quotes.
pub fn shell_word(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// The address in a start-up line (`… listening on http://127.0.0.1:8080/ — …`).
pub fn listening_addr(line: &str) -> Option<SocketAddr> {
    line.split("listening on http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.parse().ok())
}

/// A running server: its own process group, killed whole on drop.
pub struct Server {
    child: Child,
    /// The command line as a person would type it (a shell command as given), for the
    /// results' set-up: which binary, which flags.
    pub command: String,
    pub addr: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
    /// Set by the stderr reader at end of file: every process of the server closed it.
    eof: Arc<AtomicBool>,
    /// Stop signals go to the whole process group (a peer), not to the main process.
    signal_group: bool,
}

impl Server {
    /// The main process (the master, for servers that have one).
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// True while the main process runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// True while any process of the server's group exists.
    pub fn group_alive(&self) -> bool {
        // SAFETY: signal 0 only checks for existence.
        unsafe { libc::kill(-self.pid(), 0) == 0 }
    }

    /// Everything the server printed on stderr so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The `--stats` JSON lines printed so far.
    pub fn stats_lines(&self) -> Vec<serde_json::Value> {
        self.stderr_lines()
            .iter()
            .filter(|l| l.starts_with('{'))
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The worker pids named in the start-up line (`… (pids 1, 2) …`).
    pub fn worker_pids(&self) -> Vec<i32> {
        let lines = self.stderr_lines();
        let line = lines
            .iter()
            .find(|l| l.contains("listening on"))
            .map_or("", String::as_str);
        let list = line
            .split("pids ")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap_or("");
        list.split(", ")
            .filter_map(|p| p.trim().parse().ok())
            .collect()
    }

    /// Sends `signal` to the main process and waits up to `limit` for it to exit; then
    /// waits (2 s at most) for the last stderr lines (the `--stats` report). Returns its
    /// exit status and how long it took; `None` if it did not exit in time.
    pub fn signal_and_wait(
        &mut self,
        signal: i32,
        limit: Duration,
    ) -> Option<(ExitStatus, Duration)> {
        let started = Instant::now();
        let target = if self.signal_group {
            -self.pid()
        } else {
            self.pid()
        };
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(target, signal) };
        while started.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                let took = started.elapsed();
                self.await_eof();
                return Some((status, took));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Stops the server with SIGTERM (SIGKILL to the whole group after `grace`) and returns
    /// its `--stats` lines.
    pub fn stop(mut self, grace: Duration) -> Vec<serde_json::Value> {
        // Taken first: once the main process exits, what it adopted goes to init.
        let strays = self.strays();
        signal_all(&strays, libc::SIGTERM);
        let _ = self.signal_and_wait(libc::SIGTERM, grace);
        signal_all(&strays, libc::SIGKILL);
        self.kill_group();
        self.await_eof();
        self.stats_lines()
    }

    /// The server's processes outside its group (a daemon it started, adopted by its main
    /// process), each with its start time, so that a later signal cannot reach a process
    /// that took a freed pid.
    fn strays(&self) -> Vec<(i32, u64)> {
        let pgid = self.pid();
        tree(pgid)
            .into_iter()
            .filter_map(|pid| {
                let f = stat_of(pid)?;
                let group = f.get(2)?.parse::<i32>().ok()?;
                let started = f.get(STARTTIME)?.parse().ok()?;
                (group != pgid).then_some((pid, started))
            })
            .collect()
    }

    fn await_eof(&self) {
        let eof_by = Instant::now() + Duration::from_secs(2);
        while !self.eof.load(Ordering::SeqCst) && Instant::now() < eof_by {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn kill_group(&mut self) {
        let pid = self.pid();
        let strays = self.strays();
        // SAFETY: kills the server's own process group (created with process_group(0)).
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        signal_all(&strays, libc::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
        forget(pid);
    }

    /// CPU seconds (user + system) used so far by every process of the server's group.
    pub fn cpu_seconds(&self) -> f64 {
        // SAFETY: sysconf has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let field = |f: &[String], i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok());
        processes()
            .filter(|(_, f)| f.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(self.pid()))
            .map(|(_, f)| (field(&f, 11).unwrap_or(0.0) + field(&f, 12).unwrap_or(0.0)) / ticks)
            .sum()
    }

    /// Resident memory (VmRSS) of the server and every process descended from it, in
    /// KiB: what its connections cost (a process that left the group, as php-fpm's
    /// master does, is still its child).
    pub fn rss_kib(&self) -> u64 {
        status_kib(&tree(self.pid()), "VmRSS")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill_group();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_up_lines_name_their_address() {
        let line = "x: listening on http://127.0.0.1:4242/ — 1 process (pids 7, 8)";
        assert_eq!(
            listening_addr(line),
            Some("127.0.0.1:4242".parse().unwrap())
        );
        assert_eq!(listening_addr("x: error: busy"), None);
    }

    #[test]
    fn free_ports_lie_below_the_ones_connections_take_and_are_not_handed_out_twice() {
        let (below, _) = ephemeral_range();
        if below <= PEER_PORTS_FROM + 1_000 {
            // No room below the ephemeral range on this host: port 0's answer, still free.
            let p = free_port().unwrap();
            std::net::TcpListener::bind(("127.0.0.1", p)).unwrap();
            return;
        }
        let ports: Vec<u16> = (0..8).map(|_| free_port().unwrap()).collect();
        for &p in &ports {
            assert!(
                (PEER_PORTS_FROM..below).contains(&p),
                "{p} outside {PEER_PORTS_FROM}..{below}"
            );
            std::net::TcpListener::bind(("127.0.0.1", p)).unwrap();
        }
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
    }

    /// A named thread that sleeps ten times is seen by its name, with at least ten
    /// voluntary switches, among this process's threads.
    #[test]
    fn a_thread_that_sleeps_is_seen_leaving_its_cpu() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let sleeper = std::thread::Builder::new()
            .name("sleeper".into())
            .spawn(move || {
                for _ in 0..10 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                tx.send(()).unwrap();
                let _ = done_rx.recv();
            })
            .unwrap();
        rx.recv().unwrap();
        let seen = threads(std::process::id() as i32);
        let _ = done_tx.send(());
        sleeper.join().unwrap();
        let sleeper = seen
            .iter()
            .find(|t| t.name == "sleeper")
            .unwrap_or_else(|| panic!("{seen:?}"));
        assert!(sleeper.voluntary_switches >= 10, "{sleeper:?}");
        assert!(seen.iter().any(|t| t.tid == std::process::id() as i32));
        assert!(threads(-1).is_empty());
    }

    /// A free loopback address and a command line that listens there for a minute: a
    /// stand-in for a peer.
    fn python_listener() -> (SocketAddr, String) {
        let port = free_port().unwrap();
        let listener = format!(
            "python3 -c 'import socket,time; s=socket.socket(); s.bind((\"127.0.0.1\",{port})); s.listen(); time.sleep(60)'"
        );
        (SocketAddr::from(([127, 0, 0, 1], port)), listener)
    }

    /// Whether no live process is left in group `pgid` within 5 s; zombies (dead, waiting
    /// for whoever reaps orphans here) do not count.
    fn group_ends(pgid: i32) -> bool {
        let live = || {
            processes()
                .filter(|(_, f)| {
                    f.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
                        && f.first().is_some_and(|state| state != "Z")
                })
                .count()
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while live() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        live() == 0
    }

    /// The child of [`a_test_binary_stopped_by_sigterm_stops_its_servers`]: starts a peer
    /// as peers/run does (a shell and its child) and waits to be killed.
    #[test]
    #[ignore = "the child of a_test_binary_stopped_by_sigterm_stops_its_servers, run by it"]
    fn start_a_peer_and_wait() {
        let (addr, listener) = python_listener();
        let server = Launch::shell(&format!("{listener} & wait"))
            .start_at(addr)
            .unwrap();
        println!("group {}", server.pid());
        std::thread::sleep(Duration::from_secs(30));
    }

    /// A test binary has no `main` to install the interrupt handler: the first start does.
    /// `timeout` signals its whole process group, the test binary with it; the peer's
    /// shell would die with its parent anyway, but not what the shell started.
    #[test]
    fn a_test_binary_stopped_by_sigterm_stops_its_servers() {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "launch::tests::start_a_peer_and_wait"])
            .args(["--ignored", "--nocapture", "--test-threads=1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let pgid = stdout
            .lines()
            .map_while(Result::ok)
            // After libtest's "test NAME ... " on the same line.
            .find_map(|l| l.split("group ").nth(1)?.trim().parse::<i32>().ok());
        // SAFETY: signals the test binary this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = child.wait().unwrap();
        let pgid = pgid.expect("the child started its peer");
        let ended = group_ends(pgid);
        // SAFETY: whatever is left of the group this test caused to be started.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        assert!(ended, "group {pgid} outlived its test binary");
        assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    }

    /// A process that starts a server and is then killed outright runs no handler and
    /// drops nothing: the server goes with the thread that started it (here one that ends
    /// having forgotten its `Server`, as a killed process would).
    #[test]
    fn a_server_dies_with_the_thread_that_started_it() {
        let (addr, listener) = python_listener();
        let cmd = format!("exec {listener}");
        let pid = std::thread::spawn(move || {
            let server = Launch::shell(&cmd).start_at(addr).unwrap();
            let pid = server.pid();
            std::mem::forget(server);
            pid
        })
        .join()
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while running(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let gone = !running(pid);
        forget(pid);
        // SAFETY: reaps the child this test started (a zombie by now, or killed here).
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        assert!(gone, "pid {pid} outlived the thread that started it");
    }

    #[test]
    fn a_peer_is_ready_when_its_port_accepts_and_stops_with_its_group() {
        let (addr, listener) = python_listener();
        // A shell that starts a listener as its child, as peers/run does.
        let cmd = format!("{listener} & wait");
        let server = Launch::shell(&cmd).start_at(addr).unwrap();
        let pgid = server.pid();
        server.stop(Duration::from_secs(2));
        assert!(group_ends(pgid), "the group outlived stop");
        let err = Launch::shell("exit 3").start_at(addr).err().unwrap();
        assert!(err.contains("exited before listening"), "{err}");
    }

    /// Whether nothing listens on `port` within 5 s.
    fn port_closes(port: u16) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !listening_on(port).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        listening_on(port).is_empty()
    }

    /// A back end that daemonizes (double fork, its own session) behind a main process
    /// that stays: adopted by the main process, so it is part of the server's tree (its
    /// CPU counted) and a stop ends it although its group is not the server's.
    #[test]
    fn a_daemon_the_server_started_is_in_its_tree_and_stops_with_it() {
        let (addr, listener) = python_listener();
        let cmd = format!("(setsid {listener} >/dev/null 2>&1 &); exec sleep 60");
        let server = Launch::shell(&cmd).start_at(addr).unwrap();
        let daemon = listening_on(addr.port());
        let in_tree = daemon.iter().all(|p| tree(server.pid()).contains(p));
        server.stop(Duration::from_secs(2));
        let closed = port_closes(addr.port());
        for p in &daemon {
            // SAFETY: the listener this test caused to be started, if it is still there.
            unsafe { libc::kill(*p, libc::SIGKILL) };
        }
        assert_eq!(daemon.len(), 1, "one process listens on {addr}");
        assert!(in_tree, "the daemon {daemon:?} is not in the server's tree");
        assert!(closed, "the daemon {daemon:?} outlived stop");
    }

    /// A peer whose main process exits while a daemon it started listens: an error that
    /// says so, and the daemon stopped.
    #[test]
    fn a_peer_that_daemonizes_is_an_error_and_is_stopped() {
        let (addr, listener) = python_listener();
        let cmd = format!("setsid {listener} >/dev/null 2>&1 &");
        let err = Launch::shell(&cmd).start_at(addr).err().unwrap();
        let closed = port_closes(addr.port());
        for p in listening_on(addr.port()) {
            // SAFETY: the listener this test caused to be started, if it is still there.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        assert!(
            err.contains("daemonized") && err.contains("python3"),
            "{err}"
        );
        assert!(closed, "the daemon outlived the failed start");
    }

    #[test]
    fn a_silent_program_is_an_error_and_leaves_nothing_behind() {
        let err = Launch::new(Path::new("/bin/false")).start().err().unwrap();
        assert!(err.contains("no start-up line"), "{err}");
    }
}
