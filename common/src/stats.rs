//! Per-worker counters for `--stats`.
//!
//! A *worker* is a thread that runs connections: the one thread of a prefork process, a
//! coroutine scheduler, an executor shard, a tokio worker. Every such thread owns its
//! counters (registered on first use in a per-process list), and only that thread writes
//! them, so an increment is a plain load and store — no locked instruction, no shared cache
//! line on the hot path. Readers (the report at stop) may see a value one increment stale,
//! which is fine for a report.
//!
//! On stop, with `--stats`, each worker prints one JSON line to stderr:
//! `{"arch":"prefork-blocking","worker":0,"pid":123,"tid":123,"requests":5,"connections":1}`.
//!
//! A multi-process server's workers count in a ledger their master mapped shared before it
//! forked them ([`share_with_forks`]): a worker that is killed never reaches its report,
//! and without the ledger its requests would be missing from the server's total — which a
//! soak with a worker killed reconciles against the client's answers. The master reports
//! such a worker from what it left there ([`report_exited`], `"exited":true`).

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::Mutex;

/// One worker thread's counters. Only its thread writes `requests` and `connections`.
/// Aligned to a cache line: slots of different processes share a page, not a line.
#[derive(Debug, Default)]
#[repr(C, align(64))]
struct Slot {
    worker: AtomicUsize,
    pid: AtomicU32,
    tid: AtomicI32,
    requests: AtomicU64,
    connections: AtomicU64,
    /// Taken out of the report ([`forget_current_thread`]).
    forgotten: AtomicBool,
}

/// Slots for the worker threads of every process forked after [`share_with_forks`]: a
/// worker that is killed cannot report at the stop, but its counts are still here, in
/// memory its master maps too. A restarted worker takes new slots; past the last one, a
/// thread counts in memory of its own (reported by itself only).
const SHARED_SLOTS: usize = 4096;

#[repr(C)]
struct Ledger {
    next: AtomicUsize,
    slots: [Slot; SHARED_SLOTS],
}

/// The shared ledger, once mapped (null: every thread counts in its own process's memory).
static LEDGER: AtomicPtr<Ledger> = AtomicPtr::new(std::ptr::null_mut());

/// A snapshot of one worker's counters, as printed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkerStats {
    pub arch: String,
    pub worker: usize,
    pub pid: u32,
    pub tid: i32,
    pub requests: u64,
    pub connections: u64,
    /// Reported by the master for a worker process that died before the stop (killed):
    /// its counts survived it in the shared ledger.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub exited: bool,
}

static REGISTRY: Mutex<Vec<&'static Slot>> = Mutex::new(Vec::new());

thread_local! {
    static LOCAL: &'static Slot = register();
}

/// Maps the shared ledger, for the worker processes this process forks from now on. A
/// multi-process server's master calls it (through `Supervisor::start`) before its first
/// fork, and does not count requests itself (a thread's slot is chosen once: a child must
/// not inherit its parent's). Idempotent.
pub fn share_with_forks() -> std::io::Result<()> {
    if !LEDGER.load(Acquire).is_null() {
        return Ok(());
    }
    // SAFETY: an anonymous shared mapping of the ledger's size, zero-filled by the kernel;
    // all-zero bytes are a valid `Ledger` (atomics at 0, `false`).
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            std::mem::size_of::<Ledger>(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    if LEDGER
        .compare_exchange(std::ptr::null_mut(), ptr.cast(), AcqRel, Acquire)
        .is_err()
    {
        // SAFETY: unmaps the mapping made above, which nothing else has seen.
        unsafe { libc::munmap(ptr, std::mem::size_of::<Ledger>()) };
    }
    Ok(())
}

/// The shared ledger, if [`share_with_forks`] mapped it. The mapping is never unmapped.
fn ledger() -> Option<&'static Ledger> {
    // SAFETY: non-null only once mapped, for the process's lifetime (never unmapped).
    unsafe { LEDGER.load(Acquire).as_ref() }
}

fn register() -> &'static Slot {
    let shared = ledger().and_then(|l| l.slots.get(l.next.fetch_add(1, Relaxed)));
    let slot = shared.unwrap_or_else(|| Box::leak(Box::default()));
    let mut all = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    slot.worker.store(all.len(), Relaxed);
    slot.pid.store(std::process::id(), Relaxed);
    // SAFETY: gettid has no preconditions and cannot fail.
    slot.tid.store(unsafe { libc::gettid() }, Relaxed);
    slot.forgotten.store(false, Relaxed);
    all.push(slot);
    slot
}

/// Single-writer increment: only the owning thread ever stores to its counters, so no
/// locked instruction is needed (in the shared ledger too: one writer per slot).
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Relaxed) + 1, Release);
}

/// Names the calling thread's worker index (default: its registration order in this process).
pub fn set_worker_index(index: usize) {
    LOCAL.with(|c| c.worker.store(index, Relaxed));
}

/// Removes the calling thread from the report: for a process whose requests run on
/// another thread (a coroutine scheduler), so that its main thread does not show up as an
/// idle worker.
pub fn forget_current_thread() {
    LOCAL.with(|mine| {
        mine.forgotten.store(true, Relaxed);
        let mut all = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|c| !std::ptr::eq(*c, *mine));
    });
}

/// Counts one request handled on the calling thread.
pub fn request() {
    LOCAL.with(|c| bump(&c.requests));
}

/// Counts one connection opened on the calling thread.
pub fn connection() {
    LOCAL.with(|c| bump(&c.connections));
}

fn stats_of(arch: &str, slot: &Slot, exited: bool) -> WorkerStats {
    WorkerStats {
        arch: arch.to_string(),
        worker: slot.worker.load(Relaxed),
        pid: slot.pid.load(Relaxed),
        tid: slot.tid.load(Relaxed),
        requests: slot.requests.load(Acquire),
        connections: slot.connections.load(Acquire),
        exited,
    }
}

/// The counters of every worker thread of this process, in registration order.
pub fn snapshot(arch: &str) -> Vec<WorkerStats> {
    let all = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    all.iter().map(|c| stats_of(arch, c, false)).collect()
}

/// The counters that worker processes `pids` left in the shared ledger: those of workers
/// that died before they could report (the master knows which). Empty without a ledger.
pub fn exited(arch: &str, pids: &[u32]) -> Vec<WorkerStats> {
    let Some(ledger) = ledger() else {
        return Vec::new();
    };
    let used = ledger.next.load(Relaxed).min(SHARED_SLOTS);
    ledger.slots[..used]
        .iter()
        .filter(|s| pids.contains(&s.pid.load(Relaxed)) && !s.forgotten.load(Relaxed))
        .map(|s| stats_of(arch, s, true))
        .collect()
}

/// Prints each line of `lines` to stderr as JSON, each in a single `write` (shorter than
/// PIPE_BUF, so atomic on a pipe): sibling processes reporting at the same moment cannot
/// interleave their lines.
fn print(lines: Vec<WorkerStats>) {
    use std::io::Write;
    for line in lines {
        if let Ok(mut json) = serde_json::to_vec(&line) {
            json.push(b'\n');
            let _ = std::io::stderr().write_all(&json);
        }
    }
}

/// Prints one JSON line per worker thread of this process to stderr.
pub fn report(arch: &str) {
    print(snapshot(arch));
}

/// Prints, as [`report`] does, the counters of the worker processes `pids` that died
/// before the stop, with `"exited":true`: a master's report for workers that cannot
/// give their own.
pub fn report_exited(arch: &str, pids: &[u32]) {
    print(exited(arch, pids));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_counts_its_own() {
        let t = std::thread::spawn(|| {
            set_worker_index(7);
            request();
            request();
            connection();
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() }
        });
        let tid = t.join().unwrap();
        let mine = snapshot("x").into_iter().find(|s| s.tid == tid).unwrap();
        assert_eq!((mine.worker, mine.requests, mine.connections), (7, 2, 1));
    }

    /// What a worker counted in the shared ledger is there for its master to report with
    /// `"exited":true` (here the "dead worker" is this process, which the ledger cannot
    /// tell apart: the master asks for the pids it reaped); a forgotten thread is not.
    #[test]
    fn the_shared_ledger_reports_what_a_worker_counted() {
        share_with_forks().unwrap();
        share_with_forks().unwrap(); // idempotent
        let counted = std::thread::spawn(|| {
            set_worker_index(5);
            request();
            request();
            request();
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() }
        })
        .join()
        .unwrap();
        let forgotten = std::thread::spawn(|| {
            forget_current_thread();
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() }
        })
        .join()
        .unwrap();
        let lines = exited("x", &[std::process::id()]);
        let mine = lines.iter().find(|s| s.tid == counted).unwrap();
        assert_eq!((mine.worker, mine.requests, mine.exited), (5, 3, true));
        assert!(lines.iter().all(|s| s.tid != forgotten));
        assert!(
            exited("x", &[0]).is_empty(),
            "another pid's slots are not reported"
        );
        let json = serde_json::to_string(mine).unwrap();
        assert!(json.ends_with(r#""exited":true}"#), "{json}");
    }

    #[test]
    fn a_forgotten_thread_is_not_reported() {
        let tid = std::thread::spawn(|| {
            set_worker_index(3);
            forget_current_thread();
            // SAFETY: gettid has no preconditions.
            unsafe { libc::gettid() }
        })
        .join()
        .unwrap();
        assert!(snapshot("x").iter().all(|s| s.tid != tid));
    }
}
