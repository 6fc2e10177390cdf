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

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// One worker's counters.
#[derive(Debug)]
pub struct Counters {
    worker: AtomicUsize,
    pid: u32,
    tid: i32,
    requests: AtomicU64,
    connections: AtomicU64,
}

/// A snapshot of one worker's counters, as printed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkerStats {
    pub arch: String,
    pub worker: usize,
    pub pid: u32,
    pub tid: i32,
    pub requests: u64,
    pub connections: u64,
}

static REGISTRY: Mutex<Vec<Arc<Counters>>> = Mutex::new(Vec::new());

thread_local! {
    static LOCAL: Arc<Counters> = register();
}

fn register() -> Arc<Counters> {
    let mut all = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    let counters = Arc::new(Counters {
        worker: AtomicUsize::new(all.len()),
        pid: std::process::id(),
        // SAFETY: gettid has no preconditions and cannot fail.
        tid: unsafe { libc::gettid() },
        requests: AtomicU64::new(0),
        connections: AtomicU64::new(0),
    });
    all.push(counters.clone());
    counters
}

/// Single-writer increment: only the owning thread ever stores to its counters.
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Relaxed) + 1, Relaxed);
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
        let mut all = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|c| !Arc::ptr_eq(c, mine));
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

/// The counters of every worker thread of this process, in registration order.
pub fn snapshot(arch: &str) -> Vec<WorkerStats> {
    let all = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    all.iter()
        .map(|c| WorkerStats {
            arch: arch.to_string(),
            worker: c.worker.load(Relaxed),
            pid: c.pid,
            tid: c.tid,
            requests: c.requests.load(Relaxed),
            connections: c.connections.load(Relaxed),
        })
        .collect()
}

/// Prints one JSON line per worker thread of this process to stderr. Each line goes out
/// in a single `write` (shorter than PIPE_BUF, so atomic on a pipe): sibling processes
/// reporting at the same moment cannot interleave their lines.
pub fn report(arch: &str) {
    use std::io::Write;
    for line in snapshot(arch) {
        if let Ok(mut json) = serde_json::to_vec(&line) {
            json.push(b'\n');
            let _ = std::io::stderr().write_all(&json);
        }
    }
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
