//! `--profile`'s figures for one cell: where the CPU went, per request. Sampled and folded
//! by `measure::profile`; drawn by `write::profile`.

use serde::{Deserialize, Serialize};

/// Samples per second per CPU: 999 rather than 1,000 so as not to beat in step with the
/// servers' own millisecond timers.
pub const HZ: u32 = 999;

/// Where a sample's time went, from its innermost frames: the rows of the "where the CPU
/// goes" table, in the order they are printed (indexed by the constants below).
pub const COMPONENTS: [&str; 6] = [
    "kernel",
    "codec & handler",
    "runtime & loop",
    "allocator",
    "libc",
    "other",
];
/// One cell's profile: the samples of its extra repetition, folded, and what they say.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Profile {
    /// Samples of the server's processes (at [`HZ`] per busy CPU).
    pub samples: u64,
    /// Requests the client completed during the profiled repetition.
    pub requests: u64,
    /// Sampled server CPU per request, in µs (samples ÷ HZ ÷ requests).
    pub us_per_req: f64,
    /// [`COMPONENTS`] with their µs per request, in that order.
    pub components: Vec<(String, f64)>,
    /// The kernel's share by the system call it was serving (`sendto`, `epoll_wait`, …,
    /// `task work`, `syscall entry`; `no syscall`: interrupts, softirqs, faults), µs per
    /// request, most first (`measure::profile::syscall_of`).
    pub kernel_by_syscall: Vec<(String, f64)>,
    /// The profiled repetition's req/s ÷ the cell's measured median: what sampling cost.
    pub speed_vs_median: Option<f64>,
    /// The flame graph and the folded stacks, as written beside results.json.
    pub flamegraph: String,
    pub folded_file: String,
    /// The folded stacks (`frame;frame;leaf` and their samples), written to
    /// `folded_file` rather than into results.json.
    #[serde(skip)]
    pub folded: Vec<(String, u64)>,
}
