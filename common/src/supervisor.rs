//! The master process of a multi-process server.
//!
//! ```text
//!   master ── blocks SIGTERM/SIGINT/SIGCHLD, waits for them with sigtimedwait
//!     ├── fork ─► worker 0  (PR_SET_PDEATHSIG=SIGKILL, optional CPU pin, own handlers)
//!     ├── fork ─► worker 1
//!     └── …
//! ```
//!
//! - A worker that dies is logged and restarted in the same slot (same index, same CPU);
//!   a worker that crash-loops is restarted at most every 100 ms.
//! - A worker that returns an error (it could not bind, say) is fatal: the master stops the
//!   others and exits 1, so a misconfiguration is one clear line, not a restart storm.
//! - SIGTERM or SIGINT: every worker gets SIGTERM, stops accepting, finishes what it holds
//!   and exits; the master exits 0 once all are reaped, or SIGKILLs the rest after a 5 s
//!   grace. A second signal kills at once.
//! - Workers die with the master (PR_SET_PDEATHSIG), even when it is SIGKILLed.
//!
//! - The master returns from [`Supervisor::start`] only once every worker called
//!   [`ready`] (it is listening), so the start-up line is never printed before a
//!   connection can be accepted — which matters when each worker binds its own socket.
//!
//! The master takes its signals synchronously (blocked, then `sigtimedwait`), so it has no
//! signal handler and no async-signal-safety concerns; workers unblock them after `fork`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use crate::{cli, stats};

/// Exit status of a worker that failed in a way a restart will not fix.
pub const EXIT_FATAL: i32 = 3;
/// How long stopping workers get before they are killed.
pub const GRACE: Duration = Duration::from_secs(5);
const RESTART_MIN_INTERVAL: Duration = Duration::from_millis(100);
/// How long the master waits for every worker to report ready.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// Write end of the readiness pipe, inherited by every worker.
static READY_FD: AtomicI32 = AtomicI32::new(-1);

/// Called by a worker once it can accept connections. Harmless outside a supervisor and
/// after the master stopped listening (the write then fails with EPIPE, which Rust
/// programs ignore).
pub fn ready() {
    let fd: RawFd = READY_FD.swap(-1, Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: writes one byte from a live local to an fd this process owns.
        unsafe {
            libc::write(fd, [1u8].as_ptr().cast(), 1);
            libc::close(fd);
        }
    }
}

struct Slot {
    pid: Option<libc::pid_t>,
    started: Instant,
}

/// Forks and watches `workers` processes, each running `worker(index)`.
pub struct Supervisor<F: FnMut(usize) -> Result<(), String>> {
    arch: &'static str,
    worker: F,
    cpus: Vec<usize>,
    slots: Vec<Slot>,
    signals: libc::sigset_t,
    /// Workers that died before the stop (and were restarted): they never reported their
    /// counts, so the master does, from the shared ledger (`stats::report_exited`).
    exited: Vec<u32>,
}

impl<F: FnMut(usize) -> Result<(), String>> Supervisor<F> {
    /// Forks every worker. Call it while the process is still single-threaded.
    pub fn start(
        arch: &'static str,
        workers: usize,
        cpus: Vec<usize>,
        worker: F,
    ) -> io::Result<Self> {
        // SAFETY: the sigset is initialised by sigemptyset before use.
        let signals = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in [libc::SIGTERM, libc::SIGINT, libc::SIGCHLD] {
                libc::sigaddset(&mut set, s);
            }
            // Blocked before the first fork, so no signal is lost between fork and wait.
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            set
        };
        // Before the first fork, so that every worker counts where this process can read
        // it after the worker is gone. Without it only a killed worker's counts are lost.
        if let Err(e) = stats::share_with_forks() {
            eprintln!("{arch}: no shared request counts ({e}): a killed worker's are lost");
        }
        let mut sup = Supervisor {
            arch,
            worker,
            cpus,
            slots: Vec::new(),
            signals,
            exited: Vec::new(),
        };
        let ready_rx = sup.open_ready_pipe()?;
        for index in 0..workers {
            let pid = sup.spawn(index)?;
            sup.slots.push(Slot {
                pid: Some(pid),
                started: Instant::now(),
            });
        }
        if let Err(e) = sup.await_ready(ready_rx, workers) {
            sup.signal_all(libc::SIGKILL);
            let mut fatal = false;
            sup.reap(true, &mut fatal);
            return Err(e);
        }
        Ok(sup)
    }

    /// Creates the readiness pipe; the write end is left for the children to inherit.
    fn open_ready_pipe(&mut self) -> io::Result<OwnedFd> {
        let mut fds = [0; 2];
        // SAFETY: fds is a valid two-element array for pipe2 to fill.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        READY_FD.store(fds[1], Ordering::SeqCst);
        // SAFETY: pipe2 just returned this fd and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fds[0]) })
    }

    /// Waits for one byte from each worker, or for a worker to fail first.
    fn await_ready(&mut self, rx: OwnedFd, workers: usize) -> io::Result<()> {
        let write_end = READY_FD.swap(-1, Ordering::SeqCst);
        // SAFETY: the master's copy of the write end is closed once, here.
        unsafe { libc::close(write_end) };
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut seen = 0;
        while seen < workers {
            if Instant::now() >= deadline {
                return Err(io::Error::other("workers did not become ready in time"));
            }
            let mut pfd = libc::pollfd {
                fd: rx.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, 50) };
            if n > 0 {
                let mut buf = [0u8; 64];
                // SAFETY: reads into a live local buffer of the stated size.
                let got = unsafe { libc::read(rx.as_raw_fd(), buf.as_mut_ptr().cast(), 64) };
                if got > 0 {
                    seen += got as usize;
                    continue;
                }
            }
            let mut status = 0;
            // SAFETY: status is a valid out-pointer.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid > 0 {
                if let Some(slot) = self.slots.iter_mut().find(|s| s.pid == Some(pid)) {
                    slot.pid = None;
                }
                // The worker printed why; the master's line says what it means.
                return Err(io::Error::other(format!("a worker {}", describe(status))));
            }
        }
        Ok(())
    }

    /// The workers' pids, by index.
    pub fn pids(&self) -> Vec<libc::pid_t> {
        self.slots.iter().filter_map(|s| s.pid).collect()
    }

    /// `N worker processes (pids a, b)`, for start-up lines (tests read the pids there).
    pub fn describe(&self) -> String {
        let pids: Vec<String> = self.pids().iter().map(|p| p.to_string()).collect();
        format!("{} worker processes (pids {})", pids.len(), pids.join(", "))
    }

    fn spawn(&mut self, index: usize) -> io::Result<libc::pid_t> {
        match fork_child()? {
            None => self.child(index),
            Some(pid) => Ok(pid),
        }
    }

    /// Runs in the forked child; never returns.
    fn child(&mut self, index: usize) -> ! {
        // SAFETY: plain system call on this process's own signal mask.
        unsafe {
            libc::sigprocmask(libc::SIG_UNBLOCK, &self.signals, std::ptr::null_mut());
        }
        if !self.cpus.is_empty() {
            let cpu = self.cpus[index % self.cpus.len()];
            if let Err(e) = cli::pin_current_thread(cpu) {
                eprintln!(
                    "{}: worker {index}: cannot pin to CPU {cpu}: {e}",
                    self.arch
                );
            }
        }
        stats::set_worker_index(index);
        let code = match catch_unwind(AssertUnwindSafe(|| (self.worker)(index))) {
            Ok(Ok(())) => 0,
            Ok(Err(message)) => {
                eprintln!("{}: worker {index}: {message}", self.arch);
                EXIT_FATAL
            }
            Err(_) => 101, // the panic message was already printed
        };
        std::process::exit(code)
    }

    /// Watches the workers until a stop; returns the master's exit status. With `stats`
    /// (`--stats`: the label the workers' lines carry), the workers that did not report
    /// — killed, or panicked — are reported at the end, one line each, as the others
    /// report themselves.
    pub fn run(mut self, stats: Option<&str>) -> i32 {
        let code = self.watch();
        if let Some(label) = stats {
            stats::report_exited(label, &self.exited);
        }
        code
    }

    fn watch(&mut self) -> i32 {
        let mut stop_at: Option<Instant> = None;
        let mut killed = false;
        let mut fatal = false;
        loop {
            self.reap(stop_at.is_some(), &mut fatal);
            if fatal && stop_at.is_none() {
                stop_at = Some(Instant::now());
                self.signal_all(libc::SIGTERM);
            }
            if stop_at.is_some() && self.slots.iter().all(|s| s.pid.is_none()) {
                return if fatal { 1 } else { 0 };
            }
            let timeout = match stop_at {
                Some(t) => (t + GRACE).saturating_duration_since(Instant::now()),
                None => Duration::from_secs(1),
            };
            if stop_at.is_some() && timeout.is_zero() && !killed {
                eprintln!(
                    "{}: workers still busy after {GRACE:?}; killing them",
                    self.arch
                );
                self.signal_all(libc::SIGKILL);
                killed = true;
            }
            match self.wait_signal(timeout.max(Duration::from_millis(10))) {
                Some(libc::SIGTERM | libc::SIGINT) if stop_at.is_none() => {
                    stop_at = Some(Instant::now());
                    self.signal_all(libc::SIGTERM);
                }
                Some(libc::SIGTERM | libc::SIGINT) => {
                    self.signal_all(libc::SIGKILL);
                    killed = true;
                }
                _ => {}
            }
        }
    }

    fn wait_signal(&self, timeout: Duration) -> Option<libc::c_int> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: valid set and timespec; a null siginfo is allowed.
        let sig = unsafe { libc::sigtimedwait(&self.signals, std::ptr::null_mut(), &ts) };
        (sig > 0).then_some(sig)
    }

    fn signal_all(&self, signal: libc::c_int) {
        for pid in self.slots.iter().filter_map(|s| s.pid) {
            // SAFETY: kill has no memory-safety preconditions; pid is our unreaped child.
            unsafe { libc::kill(pid, signal) };
        }
    }

    /// Collects every exited worker; restarts it unless stopping or the exit was fatal.
    fn reap(&mut self, stopping: bool, fatal: &mut bool) {
        loop {
            let mut status = 0;
            // SAFETY: status is a valid out-pointer.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                return;
            }
            let Some(index) = self.slots.iter().position(|s| s.pid == Some(pid)) else {
                continue;
            };
            self.slots[index].pid = None;
            // A worker that did not exit cleanly did not report its counts: killed (also
            // after the stop's grace), or panicked.
            if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
                self.exited.push(pid as u32);
            }
            if stopping || *fatal {
                continue;
            }
            let how = describe(status);
            if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == EXIT_FATAL {
                eprintln!("{}: worker {index} (pid {pid}) failed; stopping", self.arch);
                *fatal = true;
                continue;
            }
            eprintln!(
                "{}: worker {index} (pid {pid}) {how}; restarting",
                self.arch
            );
            let since = self.slots[index].started.elapsed();
            if since < RESTART_MIN_INTERVAL {
                std::thread::sleep(RESTART_MIN_INTERVAL - since);
            }
            match self.spawn(index) {
                Ok(new) => {
                    self.slots[index] = Slot {
                        pid: Some(new),
                        started: Instant::now(),
                    };
                    eprintln!("{}: worker {index} restarted as pid {new}", self.arch);
                }
                Err(e) => eprintln!("{}: cannot restart worker {index}: {e}", self.arch),
            }
        }
    }
}

fn describe(status: libc::c_int) -> String {
    if libc::WIFSIGNALED(status) {
        format!("was killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    }
}

/// Forks a child that cannot outlive this process: `None` in the child (already set to get
/// SIGKILL when its parent dies, and gone at once if the parent died before that was set),
/// `Some(pid)` in the parent. Call it while the process has one thread: the child gets a
/// copy of only the calling thread.
pub fn fork_child() -> io::Result<Option<libc::pid_t>> {
    // SAFETY: getpid/fork have no preconditions; the caller is single-threaded, so the
    // child's copy of the address space is consistent.
    let (parent, pid) = unsafe { (libc::getpid(), libc::fork()) };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            // SAFETY: plain system calls on this process's own state.
            unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != parent {
                    // The parent died between fork and prctl.
                    libc::_exit(0);
                }
            }
            Ok(None)
        }
        pid => Ok(Some(pid)),
    }
}
