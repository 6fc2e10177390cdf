//! `--profile`: where the CPU goes, per cell — the samples of an extra repetition, folded
//! and sorted into kernel, codec, runtime, allocator and libc (drawn as flame graphs by
//! `write::profile`).
//!
//! How it samples, and why so:
//! - `perf record -e cpu-clock` (a software clock: the hardware counters are not available
//!   on the machines this runs on) on the **server's CPUs** (`-C`), not on its pids: `-p`
//!   records no samples here, and a server that forks workers after the start would escape
//!   it anyway. The samples of the server's processes are picked out afterwards
//!   (`perf script --pid`), so the client and other processes on those CPUs are left out.
//! - `--call-graph dwarf`: the stacks are unwound from the binaries' DWARF call-frame
//!   tables, which every Rust binary carries for panics, so the **same release binaries
//!   that the measured repetitions ran** are profiled: no frame-pointer build, nothing
//!   that could slow or change the measured rows. Frame pointers would be cheaper per
//!   sample but break at every frame of the precompiled standard library and libc, which
//!   keep none. What DWARF costs (perf copies each sample's top 16 KiB of stack) shows in
//!   the profiled repetition's own figures, reported beside the measured median.
//! - Folding and drawing are inferno's (the library behind `cargo flamegraph`): the
//!   folded stacks are kept as samples, and drawn scaled to **nanoseconds per request**,
//!   so that two variants' graphs, and their difference, compare cost per request rather
//!   than how long each happened to run.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::model::profile::{Profile, COMPONENTS, HZ};
use inferno::collapse::Collapse;

/// Bytes of user stack perf copies per sample for DWARF unwinding: deep enough for
/// tokio's and glommio's nested polls and for a `may` coroutine's stack.
const STACK_BYTES: u32 = 16384;

/// The indices of [`COMPONENTS`], by name.
const KERNEL: usize = 0;
const CODEC_HANDLER: usize = 1;
const RUNTIME_LOOP: usize = 2;
const ALLOC: usize = 3;
const LIBC: usize = 4;
const OTHER: usize = 5;

/// The `perf record` command line `--profile` samples with: cpu-clock at [`HZ`] on `cpus`,
/// kernel and user stacks (DWARF), into `data`.
fn perf_record(cpus: &[usize], data: &Path) -> Command {
    let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
    let mut cmd = Command::new("perf");
    cmd.args([
        "record",
        "-q",
        "-e",
        "cpu-clock",
        "-F",
        &HZ.to_string(),
        "-g",
    ])
    .arg(format!("--call-graph=dwarf,{STACK_BYTES}"))
    .args(["-C", &list.join(","), "-o"])
    .arg(data)
    .stdin(Stdio::null());
    cmd
}

/// Whether perf can sample `cpu` here, with the very options a recording uses: `Err` is
/// one line that says what to do.
pub fn check(cpu: usize) -> Result<(), String> {
    let tmp = std::env::temp_dir().join(format!("archzoo-perf-probe-{}", std::process::id()));
    let out = perf_record(&[cpu], &tmp).args(["--", "true"]).output();
    let _ = std::fs::remove_file(&tmp);
    let out = match out {
        Ok(o) => o,
        Err(_) => {
            return Err(
                "--profile needs perf (Debian: apt-get install linux-perf; scripts/bench --profile installs it)"
                    .into(),
            )
        }
    };
    if out.status.success() {
        return Ok(());
    }
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    let said = String::from_utf8_lossy(&out.stderr);
    let first = said
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && *l != "Error:")
        .unwrap_or("no reason given");
    Err(format!(
        "--profile: perf cannot sample CPU {cpu} here (kernel.perf_event_paranoid = {paranoid}; sampling a whole CPU needs root, CAP_PERFMON or `sysctl kernel.perf_event_paranoid=-1`): perf said: {first}"
    ))
}

/// A `perf record` sampling `cpus` into a file until [`Recording::stop`].
pub struct Recording {
    child: Child,
    data: PathBuf,
}

impl Recording {
    /// Starts sampling `cpus` (kernel and user stacks) into a scratch file.
    pub fn start(cpus: &[usize]) -> Result<Recording, String> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let data =
            std::env::temp_dir().join(format!("archzoo-profile-{}-{n}.data", std::process::id()));
        let child = perf_record(cpus, &data)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run perf record: {e}"))?;
        // perf opens its events before it samples: give it that moment, so the first
        // requests are not missed.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Ok(Recording { child, data })
    }

    /// Stops sampling and returns the samples of `pids` as `perf script` prints them.
    pub fn stop(self, pids: &[i32]) -> Result<String, String> {
        // SAFETY: signals our own child; SIGINT makes perf record write its file and exit.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let recorded = self.child.wait_with_output();
        let result = match recorded {
            Ok(out) if out.status.success() || self.data.exists() => script(&self.data, pids),
            Ok(out) => Err(format!(
                "perf record failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => Err(format!("perf record: {e}")),
        };
        let _ = std::fs::remove_file(&self.data);
        result
    }
}

/// `perf script` of the samples of `pids` in `data`: the fields inferno's folder reads.
fn script(data: &Path, pids: &[i32]) -> Result<String, String> {
    let list: Vec<String> = pids.iter().map(i32::to_string).collect();
    let out = Command::new("perf")
        .args(["script", "-F", "comm,pid,tid,time,event,ip,sym,dso", "-i"])
        .arg(data)
        .arg(format!("--pid={}", list.join(",")))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run perf script: {e}"))?;
    if !out.status.success() {
        return Err(format!("perf script exited with {}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Folds `perf script` output into stacks (root first) and their sample counts, most
/// samples first. Kernel frames are marked `_[k]` (inferno's annotation) and inlined ones
/// `_[i]`: perf prints those as `poll (inlined)`, which inferno's folder would take for an
/// ordinary frame, and an inlined `read` must not pass for libc's.
pub fn fold(script: &str) -> Result<Vec<(String, u64)>, String> {
    let mut marked = String::with_capacity(script.len() + script.len() / 8);
    for line in script.lines() {
        match line.strip_suffix(" (inlined)") {
            Some(frame) => {
                marked.push_str(frame);
                marked.push_str("_[i] (inlined)\n");
            }
            None => {
                marked.push_str(line);
                marked.push('\n');
            }
        }
    }
    let mut options = inferno::collapse::perf::Options::default();
    options.annotate_kernel = true;
    options.nthreads = 1;
    let mut folder = inferno::collapse::perf::Folder::from(options);
    let mut folded = Vec::new();
    folder
        .collapse(BufReader::new(marked.as_bytes()), &mut folded)
        .map_err(|e| format!("folding perf samples: {e}"))?;
    let mut stacks: Vec<(String, u64)> = String::from_utf8_lossy(&folded)
        .lines()
        .filter_map(|line| {
            let (stack, n) = line.rsplit_once(' ')?;
            Some((stack.to_string(), n.parse().ok()?))
        })
        .collect();
    stacks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(stacks)
}

/// A profile from the folded samples of a repetition that completed `requests`.
pub fn profile(folded: Vec<(String, u64)>, requests: u64) -> Profile {
    let samples: u64 = folded.iter().map(|(_, n)| n).sum();
    let us = |n: u64| n as f64 * 1e6 / f64::from(HZ) / requests.max(1) as f64;
    let mut by = [0u64; COMPONENTS.len()];
    let mut syscalls: Vec<(String, u64)> = Vec::new();
    for (stack, n) in &folded {
        let c = component(stack);
        by[c] += n;
        if c == KERNEL {
            let name = syscall_of(stack).unwrap_or("no syscall");
            match syscalls.iter_mut().find(|(s, _)| s == name) {
                Some((_, total)) => *total += n,
                None => syscalls.push((name.to_string(), *n)),
            }
        }
    }
    syscalls.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Profile {
        samples,
        requests,
        us_per_req: us(samples),
        components: COMPONENTS
            .iter()
            .zip(by)
            .map(|(name, n)| (name.to_string(), us(n)))
            .collect(),
        kernel_by_syscall: syscalls.into_iter().map(|(s, n)| (s, us(n))).collect(),
        speed_vs_median: None,
        flamegraph: String::new(),
        folded_file: String::new(),
        folded,
    }
}

/// The index in [`COMPONENTS`] of a folded stack's time: kernel if its leaf is a kernel
/// frame; otherwise the first frame, from the leaf outwards, that says whose code it is.
///
/// Inlined frames (`_[i]`) mostly carry only their short name (`poll`, `{closure#0}`):
/// those say nothing and the search goes on outwards, so code that fat LTO inlined into a runtime's loop
/// counts as the function it was inlined into. Standard-library frames (`core::`,
/// `std::`) say nothing either: their time belongs to whoever called them.
pub fn component(stack: &str) -> usize {
    let mut frames = stack.rsplit(';');
    match frames.next() {
        // The vDSO is the kernel's code, but it runs in user mode without a system call
        // (the clock reads behind `Instant::now`): libc's side of the line.
        Some(leaf) if leaf.starts_with("__vdso") => return LIBC,
        Some(leaf) if leaf.ends_with("_[k]") => return KERNEL,
        Some(leaf) => {
            if let Some(c) = owner(leaf) {
                return c;
            }
        }
        None => return OTHER,
    }
    frames.find_map(owner).unwrap_or(OTHER)
}

/// What a kernel stack was doing, by the system call it was serving: the name from its
/// `__x64_sys_NAME` frame, or (where the compiler folded that away) from the frame under
/// `do_syscall_64` (`do_writev`, `ksys_read`, `__sys_sendto`); `task work` for work the
/// kernel ran on the way back to user space (io_uring completions, deferred closes);
/// `syscall entry` for a sample in the entry path itself; `None` outside any system call
/// (interrupts, softirqs, page faults).
pub fn syscall_of(stack: &str) -> Option<&str> {
    let mut kernel = stack.split(';').filter_map(|f| f.strip_suffix("_[k]"));
    let named = kernel.clone().find_map(|f| {
        f.strip_prefix("__x64_sys_")
            .or_else(|| f.strip_prefix("__do_sys_"))
            .or_else(|| f.strip_prefix("__se_sys_"))
    });
    if named.is_some() {
        return named;
    }
    kernel.find(|f| *f == "do_syscall_64")?;
    let Some(next) = kernel.next() else {
        return Some("syscall entry");
    };
    if next.starts_with("exit_to_user_mode") || next.starts_with("syscall_exit") {
        return Some("task work");
    }
    Some(
        next.strip_prefix("ksys_")
            .or_else(|| next.strip_prefix("__sys_"))
            .or_else(|| next.strip_prefix("do_"))
            .unwrap_or(next),
    )
}

/// Whose code one user frame is, if its name says.
fn owner(frame: &str) -> Option<usize> {
    let (name, inlined) = match frame.strip_suffix("_[i]") {
        Some(name) => (name, true),
        None => (frame, false),
    };
    let path = path_of(name);
    if CODEC.iter().any(|p| path.starts_with(p)) {
        return Some(CODEC_HANDLER);
    }
    if RUNTIME.iter().any(|p| path.starts_with(p)) {
        return Some(RUNTIME_LOOP);
    }
    if ALLOCATOR.iter().any(|p| path.starts_with(p)) {
        return Some(ALLOC);
    }
    if path.contains("::") {
        // The standard library works for whoever called it; any other crate's named
        // function (a peer's own code, a dependency not listed) is "other".
        let std = ["std::", "core::", "alloc::", "&std::", "&mut std::"];
        return (!std.iter().any(|p| path.starts_with(p))).then_some(OTHER);
    }
    // A bare name: a C symbol — libc's, or one perf could not name ("[unknown]", or
    // "[libc.so.6]" from its file) — or an inlined Rust function's short name (`poll`,
    // `read`), which says nothing: only libc's reserved `__` names are libc's then.
    if path.starts_with("[libc.so") || LIBC_RESERVED.iter().any(|p| path.starts_with(p)) {
        return Some(LIBC);
    }
    if inlined || path.starts_with('[') {
        return None;
    }
    if ["malloc", "free", "realloc", "calloc"].contains(&path) {
        return Some(ALLOC);
    }
    // Every other bare symbol outside the kernel is C: the servers' only C is libc
    // (and SQLite's, which `sqlite3` above claims for the handler).
    Some(LIBC)
}

/// The path that names a frame's owner: `a::b::f<T>` → `a::b::f`; `<T as Trait>::f` and
/// `<T>::f` → `T`'s path.
fn path_of(name: &str) -> &str {
    let name = name.trim_start_matches("&mut ").trim_start_matches('&');
    match name.strip_prefix('<') {
        Some(inner) => {
            let inner = inner.trim_start_matches("&mut ").trim_start_matches('&');
            let end = inner.find([' ', '<', '>']).unwrap_or(inner.len());
            &inner[..end]
        }
        None => &name[..name.find('<').unwrap_or(name.len())],
    }
}

/// Paths of the shared codec and handler (hyper's for `--codec hyper`) and what they use.
const CODEC: [&str; 10] = [
    "common::",
    "hyper::",
    "httparse::",
    "httpdate::",
    "matchit::",
    "serde_json::",
    "itoa::",
    "ryu::",
    "rusqlite::",
    "sqlite3",
];

/// Paths of the runtimes and of each server crate's own loop.
const RUNTIME: [&str; 14] = [
    "tokio::",
    "hyper_util::",
    "may::",
    "generator::",
    "glommio::",
    "mio::",
    "crossbeam",
    "io_uring::",
    "prefork_eventloop::",
    "prefork_blocking::",
    "coroutine_reuseport::",
    "thread_per_core::",
    "work_stealing::",
    "reactor_workers::",
];

/// The allocator: mimalloc (every server's global allocator) and Rust's entry points.
const ALLOCATOR: [&str; 7] = [
    "mi_",
    "_mi_",
    "mimalloc",
    "__rust_alloc",
    "__rust_dealloc",
    "__rust_realloc",
    "__rdl_",
];

/// Name prefixes only libc uses (the C standard reserves `__` for the implementation).
const LIBC_RESERVED: [&str; 9] = [
    "__libc_",
    "__GI_",
    "__mem",
    "__str",
    "__lll_",
    "__pthread",
    "__futex",
    "__vdso",
    "__clock",
];
