//! A run's data: each cell of the matrix with every repetition and its figures, and the
//! verdict rule that says who limited a run (the lesson of the `ab -c 1000` post). What
//! results.json holds, measured by `measure`, read by the writers.

use serde::{Deserialize, Serialize};

use super::client::{Client, Outcome};
use super::profile::Profile;

/// CPU use (percent of the CPUs a side was given) at which that side is the bottleneck.
pub const BOUND_PCT: f64 = 90.0;

/// Share of an offered rate below which an open-loop cell did not keep up.
pub const SHORTFALL: f64 = 0.95;

/// Who limited a run — the lesson of the `ab -c 1000` post.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The server used ≥ 90 % of its CPUs: the figure measures the server.
    ServerBound,
    /// The client used ≥ 90 % of its CPU and the server did not: the figure is only a
    /// lower bound for the server.
    ClientBound,
    /// Neither was saturated: too little concurrency, or everyone was waiting.
    Neither,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::ServerBound => "server-bound",
            Verdict::ClientBound => "client-bound",
            Verdict::Neither => "neither",
        }
    }
}

/// The verdict rule. `server_pct` is None when the server is not ours to measure (`--url`).
pub fn verdict(server_pct: Option<f64>, client_pct: f64) -> Verdict {
    match server_pct {
        Some(s) if s >= BOUND_PCT => Verdict::ServerBound,
        _ if client_pct >= BOUND_PCT => Verdict::ClientBound,
        _ => Verdict::Neither,
    }
}

/// What the client's packets cross to reach the server — it decides on whose CPU the
/// kernel's receive path runs, and so whose CPU time a request's kernel work is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Link {
    /// Client and server on this machine's loopback. A send on loopback queues the packet
    /// on the *sending* CPU's backlog and processes it there: the client's CPU runs the
    /// server's TCP receive path for every request, the server's CPU the client's for
    /// every answer.
    #[default]
    Loopback,
    /// Two test hosts (network namespaces) joined by veth pairs and a bridge, each host's
    /// receive path steered (RPS) to its own CPUs, as a NIC's interrupt lands on the
    /// receiver's: each side pays for what it receives, plus the bridge's hop.
    Veth,
    /// Real client machines over their network (`--client-hosts a,b,c`).
    #[value(skip)]
    Network,
}

impl Link {
    pub fn label(self) -> &'static str {
        match self {
            Link::Loopback => "loopback",
            Link::Veth => "veth",
            Link::Network => "network",
        }
    }
}

/// The whole of the server's CPUs and of the client's over a run, whichever task or
/// interrupt used them (/proc/stat), per request: the receive path that loopback runs on
/// the sender's CPU, and that a process's own CPU time misses when its CPU served the
/// softirq while idle, shows here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSets {
    /// Every non-idle moment of the server's CPUs, in µs per request.
    pub server_busy_us: f64,
    /// Of that, the softirq part (the network receive path).
    pub server_softirq_us: f64,
    pub client_busy_us: f64,
    pub client_softirq_us: f64,
}

/// One repetition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub outcome: Outcome,
    pub wall_secs: f64,
    /// Server CPU time ÷ wall time ÷ server CPUs, in percent.
    pub server_cpu_pct: Option<f64>,
    /// Client CPU time ÷ wall time, in percent of one CPU (ab and `wrk -t1` are one thread).
    pub client_cpu_pct: f64,
    pub server_cpu_us_per_req: Option<f64>,
    /// The database's CPU time per request (its backends, pg workloads): on the server's
    /// CPUs it is what waiting could not overlap.
    pub db_cpu_us_per_req: Option<f64>,
    pub voluntary_switches_per_req: Option<f64>,
    pub involuntary_switches_per_req: Option<f64>,
    pub syscalls_per_req: Option<f64>,
    /// io_uring submissions per request (`--syscalls`, where perf can count them): work
    /// handed to the kernel without a system call of its own.
    pub uring_submissions_per_req: Option<f64>,
    /// System calls per request by name (`--syscalls`), most frequent first.
    #[serde(default)]
    pub syscalls_by_name: Vec<(String, f64)>,
    pub verdict: Verdict,
    pub command: String,
    /// The server's and the client's CPUs as a whole (absent in runs recorded before it).
    #[serde(default)]
    pub cpu_sets: Option<CpuSets>,
    /// The share of the server's CPUs' time that the hypervisor gave to someone else
    /// while the run lasted (/proc/stat's steal), in percent. On a shared VM a run with
    /// 20 % of it measured the host: its CPU per request and its tail grow with it (a
    /// server at 1,000 req/s went from 58 to 300 µs a request and from a p99 of 2 to
    /// 24 ms, its code unchanged). Absent in runs recorded before it.
    #[serde(default)]
    pub server_steal_pct: Option<f64>,
}

/// Steal (a share of the server's CPUs' time) from which a run is said to have measured
/// the host as much as the server: its cell says so, and a capacity probe that missed
/// with it is probed again.
pub const STEAL_DISTURBS_PCT: f64 = 5.0;

/// One cell of the matrix, with every repetition. Read back from results.json by
/// `bench --report`: fields added since a run was recorded are absent there, so every
/// list defaults to empty (an absent `Option` is `None`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    pub variant: String,
    pub model: String,
    /// `raw` or `framework` (the server's `--stack`).
    pub stack: String,
    pub workers: usize,
    pub server_cpus: Vec<usize>,
    pub client_cpus: Vec<usize>,
    pub workload: String,
    pub keep_alive: bool,
    pub connections: u32,
    pub client: Client,
    pub pipeline: Option<u32>,
    /// Offered requests per second (the open loop, `--rate`); `None`: closed loop.
    pub rate: Option<u32>,
    /// What the client's packets crossed (`--link`).
    #[serde(default)]
    pub link: Link,
    /// The post this cell replays (`--post`), if it is one of a replay's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post: Option<String>,
    /// The database of a pg workload ran on CPUs of its own (the client's), not on the
    /// server's: a post's "where the database runs" replay.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub db_apart: bool,
    /// µs of CPU the model spent in its handler a request (`--work-us`; 0: none): a
    /// `--calibrate` run's calibrated model beside its raw one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub work_us: u32,
    /// `--fresh-server`: each measured repetition ran on a server started for it alone,
    /// so the median is over starts — a server's start decides things a run inherits
    /// (where its threads and memory land), and on this host two starts of one binary
    /// have differed by 1.7× in CPU per request with the same system calls.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fresh_server: bool,
    /// `--baseline`: this cell's server is the one its group's by-round CPU ratios divide
    /// by (nginx, say, where a target reads "as cheap as nginx").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub baseline: bool,
    pub runs: Vec<Run>,
    /// Why the cell has no figures (failed validation, did not start, died).
    pub failure: Option<String>,
    /// The server's command line, as started (a model's binary and flags, a peer's
    /// command with its placeholders filled in); `None` for `--url`.
    pub server_command: Option<String>,
    pub peak_rss_kib: Option<u64>,
    /// Requests per worker from the server's `--stats` (warm-up included).
    #[serde(default)]
    pub worker_requests: Vec<u64>,
    /// CPU seconds of a peer's `workers` busiest workers over the measured repetitions,
    /// busiest first, from /proc (`variants::peers::Workers` says which processes): how
    /// evenly the work spread over a server that keeps no counts (a model's
    /// `worker_requests` say it exactly).
    #[serde(default)]
    pub worker_cpu_secs: Vec<f64>,
    /// `--syscalls`: one extra repetition under `perf stat`, apart from the measured ones —
    /// the hundreds of `syscalls:sys_enter_*` tracepoints it counts cost every context
    /// switch of the server, and slowed the measured figures (reactor-workers ×3 µs/req).
    /// The system-call columns come from it.
    pub counted: Option<Run>,
    /// `--profile`: the samples of one extra repetition and what they say.
    pub profile: Option<Profile>,
    #[serde(default)]
    pub notes: Vec<String>,
}

pub(crate) fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// A model's name with the handler work it was given (`--work-us`), as every table writes
/// it: `prefork-eventloop +30 µs`, or the name alone without work.
pub fn with_work(variant: &str, work_us: u32) -> String {
    match work_us {
        0 => variant.to_string(),
        us => format!("{variant} +{us} µs"),
    }
}

/// Server CPU µs per request over `runs` together, weighted by their requests.
fn pooled<'a>(runs: impl Iterator<Item = &'a Run>) -> Option<f64> {
    let (mut cpu, mut requests) = (0.0, 0u64);
    for run in runs {
        cpu += run.server_cpu_us_per_req? * run.outcome.requests as f64;
        requests += run.outcome.requests;
    }
    (requests > 0).then(|| cpu / requests as f64)
}

impl Cell {
    /// The repetition with the median req/s.
    pub fn median(&self) -> Option<&Run> {
        let mut runs: Vec<&Run> = self.runs.iter().collect();
        runs.sort_by(|a, b| a.outcome.rps.total_cmp(&b.outcome.rps));
        runs.get(runs.len() / 2).copied()
    }

    /// The median of one figure over the repetitions that have it (the upper of the two
    /// middle ones for an even count, as [`Cell::median`] picks its run). A figure's own
    /// median, not the median-req/s repetition's: closed-loop req/s is often the client's,
    /// and a server's start (`--fresh-server`) sways its CPU per request apart from req/s,
    /// so the run with the median req/s need not have the median CPU.
    pub fn median_of(&self, figure: fn(&Run) -> Option<f64>) -> Option<f64> {
        upper_median(self.runs.iter().filter_map(figure).collect())
    }

    /// Server CPU µs per request: the median over the repetitions ([`Cell::median_of`]).
    pub fn cpu_us_per_req(&self) -> Option<f64> {
        self.median_of(|r| r.server_cpu_us_per_req)
    }

    /// This cell's server CPU µs a request ÷ `reference`'s, start by start, the median over
    /// the starts both measured (upper middle). With `--fresh-server` the matrix runs start
    /// i of every cell in round i, minutes from the others' start i, so a drift of the
    /// machine divides out — as it does not from the ratio of two medians taken from
    /// different minutes.
    pub fn cpu_ratio_by_round(&self, reference: &Cell) -> Option<f64> {
        upper_median(self.cpu_ratios_by_round(reference))
    }

    /// The 95 % confidence interval of [`Cell::cpu_ratio_by_round`]'s median
    /// ([`median_interval`]); none under six rounds. What settles a target a few per cent
    /// wide on a noisy machine: a row whose interval lies under 1.05 × the baseline is
    /// within ±5 % on this evidence, one whose interval straddles it is not settled.
    pub fn cpu_ratio_interval_by_round(&self, reference: &Cell) -> Option<(f64, f64)> {
        median_interval(self.cpu_ratios_by_round(reference))
    }

    /// This cell's CPU µs a request ÷ `reference`'s, start by start, for the starts both
    /// measured.
    fn cpu_ratios_by_round(&self, reference: &Cell) -> Vec<f64> {
        let ratios = self.runs.iter().zip(&reference.runs).filter_map(|(a, b)| {
            let base = b.server_cpu_us_per_req.filter(|&v| v > 0.0)?;
            Some(a.server_cpu_us_per_req? / base)
        });
        ratios.collect()
    }

    /// Server CPU µs per request over every measured repetition together. /proc counts
    /// CPU time in 10 ms ticks per process, so one short repetition (`ab -n 1000` at
    /// 160 µs a request is 16 ticks) reads coarse; pooled, the rounding averages out.
    pub fn pooled_cpu_us(&self) -> Option<f64> {
        pooled(self.runs.iter())
    }

    /// [`Cell::pooled_cpu_us`] of the odd and of the even repetitions apart, when there
    /// are four or more: two independent estimates of the same figure, whose disagreement
    /// is the repetitions' noise (a verdict that the two halves order differently rests on
    /// nothing).
    pub fn pooled_halves(&self) -> Option<(f64, f64)> {
        if self.runs.len() < 4 {
            return None;
        }
        let half = |parity: usize| pooled(self.runs.iter().skip(parity).step_by(2));
        half(0).zip(half(1))
    }

    pub fn rps_range(&self) -> (f64, f64) {
        min_max(self.runs.iter().map(|r| r.outcome.rps)).unwrap_or((f64::INFINITY, 0.0))
    }

    /// True when `other` ran the same cell of the matrix for another server: the same
    /// workload, keep-alive, concurrency, client, pipelining, rate, workers and stack —
    /// the cells a chart draws side by side and a differential flame graph compares.
    pub fn beside(&self, other: &Cell) -> bool {
        (self.stack.as_str(), self.workers, self.group())
            == (other.stack.as_str(), other.workers, other.group())
    }

    /// Busiest worker's requests ÷ the mean: 1.0 is a perfect spread.
    pub fn imbalance(&self) -> Option<f64> {
        let requests: Vec<f64> = self.worker_requests.iter().map(|&r| r as f64).collect();
        busiest_over_mean(&requests)
    }

    /// How unevenly the work spread over the workers, busiest ÷ mean (1.0 even, `workers`
    /// one worker did everything): from the requests each worker counted where it counts
    /// them (the models' `--stats`), else from each worker's CPU time (a peer).
    pub fn worker_balance(&self) -> Option<f64> {
        self.imbalance()
            .or_else(|| busiest_over_mean(&self.worker_cpu_secs))
    }

    /// `on` or `off`, as the tables write keep-alive.
    pub fn keep_alive_label(&self) -> &'static str {
        if self.keep_alive {
            "on"
        } else {
            "off"
        }
    }

    /// Client connections as the tables write them: `64`, or `64 ×16` when pipelined.
    pub fn connections_label(&self) -> String {
        match self.pipeline {
            Some(p) => format!("{} ×{p}", self.connections),
            None => self.connections.to_string(),
        }
    }

    /// Achieved ÷ offered rate of the median run, when an open-loop cell reached less
    /// than [`SHORTFALL`] of what it offered.
    pub fn shortfall(&self) -> Option<f64> {
        let offered = f64::from(self.rate?);
        let share = self.median()?.outcome.rps / offered;
        (share < SHORTFALL).then_some(share)
    }

    /// A name for the cell's files (`flame/<key>.svg`): what makes it differ from every
    /// other cell of a run, in a file name's characters.
    pub fn key(&self) -> String {
        let mut key = format!(
            "{}-{}-{}-ka-{}-c{}",
            self.variant,
            self.stack,
            self.workload,
            self.keep_alive_label(),
            self.connections
        );
        if let Some(p) = self.pipeline {
            key.push_str(&format!("x{p}"));
        }
        if let Some(r) = self.rate {
            key.push_str(&format!("-r{r}"));
        }
        key.push_str(&format!("-w{}", self.workers));
        if self.link != Link::Loopback {
            key.push_str(&format!("-{}", self.link.label()));
        }
        key.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// What a cell shares with the cells it is compared with (the `× fastest` column,
    /// the charts' groups): everything but the server, its stack and workers.
    pub fn group(&self) -> (String, bool, u32, Client, Option<u32>, Option<u32>, Link) {
        (
            self.workload.clone(),
            self.keep_alive,
            self.connections,
            self.client,
            self.pipeline,
            self.rate,
            self.link,
        )
    }
}

/// The median of `values`, the upper of the two middle ones for an even count — the
/// convention [`Cell::median`] picks its run by (none for no values).
fn upper_median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// A distribution-free 95 % confidence interval of the median of `values`: the k-th
/// smallest and the k-th largest, k the largest count for which fewer than k of n values
/// fall below the median with probability ≤ 2.5 % (a fair coin tossed n times, as each
/// value of a continuous distribution falls either side of its median). It assumes
/// nothing of the distribution's shape — a start's outliers here are one-sided — only
/// that the values are independent. Covers ≥ 95 %: n = 9 gives the 2nd and 8th (96.1 %),
/// n = 21 the 6th and 16th (97.3 %); none under six values, where even the smallest and
/// the largest cover less than 95 %.
pub fn median_interval(mut values: Vec<f64>) -> Option<(f64, f64)> {
    let n = values.len();
    // P(X ≤ i) for X ~ Binomial(n, ½), i = 0, 1, …, while it stays within 2.5 %.
    let mut term = 0.5f64.powi(i32::try_from(n).ok()?);
    let mut below = term;
    let mut k = 0;
    while k < n / 2 && below <= 0.025 {
        k += 1;
        term *= (n - k + 1) as f64 / k as f64;
        below += term;
    }
    if k == 0 {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some((values[k - 1], values[n - k]))
}

/// The smallest and the largest of `values` (none for no values).
pub fn min_max(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |range, v| match range {
        None => Some((v, v)),
        Some((lo, hi)) => Some((f64::min(lo, v), f64::max(hi, v))),
    })
}

/// The distinct values of `key` over `cells`, in the order they first appear: the
/// servers or workloads of a run as it ran them.
pub fn first_seen(cells: &[Cell], key: fn(&Cell) -> &str) -> Vec<&str> {
    let mut seen: Vec<&str> = Vec::new();
    for cell in cells {
        let k = key(cell);
        if !seen.contains(&k) {
            seen.push(k);
        }
    }
    seen
}

/// The largest of `values` ÷ their mean, for two values or more (one is always even).
fn busiest_over_mean(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let max = values.iter().copied().fold(0.0, f64::max);
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    (mean > 0.0).then(|| max / mean)
}

#[cfg(test)]
impl Cell {
    /// A cell of `variant` with `runs`, the rest as a one-worker, one-CPU plaintext
    /// keep-alive cell at c=64 with wrk: the tests of the tables and verdicts change the
    /// fields they are about (`Cell { keep_alive: false, ..Cell::sample(…) }`).
    pub(crate) fn sample(variant: &str, runs: Vec<Run>) -> Cell {
        Cell {
            variant: variant.into(),
            model: "m".into(),
            stack: "raw".into(),
            workers: 1,
            server_cpus: vec![0],
            client_cpus: vec![1],
            workload: "plaintext".into(),
            keep_alive: true,
            connections: 64,
            client: Client::Wrk,
            pipeline: None,
            rate: None,
            link: Link::Loopback,
            post: None,
            db_apart: false,
            work_us: 0,
            fresh_server: false,
            baseline: false,
            runs,
            failure: None,
            server_command: None,
            peak_rss_kib: None,
            worker_requests: Vec::new(),
            worker_cpu_secs: Vec::new(),
            counted: None,
            profile: None,
            notes: Vec::new(),
        }
    }
}

#[cfg(test)]
impl Run {
    /// A client-bound repetition of 1,000 requests at `rps`, `cpu_us` each, for the tests
    /// of the tables built from runs.
    pub(crate) fn sample(rps: f64, cpu_us: f64) -> Run {
        Run {
            outcome: Outcome {
                requests: 1000,
                rps,
                ..Outcome::default()
            },
            wall_secs: 1.0,
            server_cpu_pct: Some(50.0),
            client_cpu_pct: 99.0,
            server_cpu_us_per_req: Some(cpu_us),
            db_cpu_us_per_req: None,
            voluntary_switches_per_req: None,
            involuntary_switches_per_req: None,
            syscalls_per_req: None,
            uring_submissions_per_req: None,
            syscalls_by_name: Vec::new(),
            verdict: Verdict::ClientBound,
            command: String::new(),
            cpu_sets: None,
            server_steal_pct: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_rule() {
        assert_eq!(verdict(Some(95.0), 99.0), Verdict::ServerBound);
        assert_eq!(verdict(Some(60.0), 97.0), Verdict::ClientBound);
        assert_eq!(verdict(Some(60.0), 40.0), Verdict::Neither);
        assert_eq!(verdict(None, 95.0), Verdict::ClientBound);
        assert_eq!(verdict(Some(89.9), 89.9), Verdict::Neither);
    }

    /// Three starts: the one with the median req/s spent the most CPU a request. The CPU
    /// figure is CPU's own median, not that run's.
    #[test]
    fn a_figures_median_is_its_own_not_the_median_rps_runs() {
        let runs = vec![
            Run::sample(90_000.0, 5.0),
            Run::sample(100_000.0, 7.0),
            Run::sample(110_000.0, 6.0),
        ];
        let cell = Cell::sample("prefork-eventloop", runs);
        assert_eq!(cell.median().unwrap().outcome.rps, 100_000.0);
        assert_eq!(cell.cpu_us_per_req(), Some(6.0));
        assert_eq!(cell.median_of(|r| Some(r.outcome.rps)), Some(100_000.0));
        assert_eq!(Cell::sample("x", Vec::new()).cpu_us_per_req(), None);
    }

    /// The interval of a median takes the order statistics the binomial gives: the 2nd and
    /// 8th of 9, the 6th and 16th of 21, the extremes of 6; none for 5 or fewer.
    #[test]
    fn the_median_interval_is_the_binomial_order_statistics() {
        let values = |n: usize| (1..=n).rev().map(|i| i as f64).collect::<Vec<_>>();
        assert_eq!(median_interval(values(9)), Some((2.0, 8.0)));
        assert_eq!(median_interval(values(21)), Some((6.0, 16.0)));
        assert_eq!(median_interval(values(6)), Some((1.0, 6.0)));
        assert_eq!(median_interval(values(5)), None);
        assert_eq!(median_interval(Vec::new()), None);
    }

    /// Two rows over three rounds, the machine slower in the second and the other row's
    /// third start an outlier: the rounds read 1.10, 1.10 and 1.50, so 1.10; the ratio of
    /// the medians, 7.7 ÷ 5.2, takes the slow round's figure for one and not the other.
    #[test]
    fn the_ratio_by_round_divides_out_a_drift() {
        let cell = |cpu: [f64; 3]| {
            let runs = cpu.iter().map(|&c| Run::sample(100_000.0, c)).collect();
            Cell::sample("x", runs)
        };
        let reference = cell([5.0, 7.0, 5.2]);
        let other = cell([5.5, 7.7, 7.8]);
        let ratio = other.cpu_ratio_by_round(&reference).unwrap();
        assert!((ratio - 1.1).abs() < 1e-9, "{ratio}");
        let medians = other.cpu_us_per_req().unwrap() / reference.cpu_us_per_req().unwrap();
        assert!((medians - 1.1).abs() > 0.3, "{medians}");
        // A start the other did not measure is left out, not paired with another.
        let short = Cell::sample("y", other.runs[..2].to_vec());
        assert!((short.cpu_ratio_by_round(&reference).unwrap() - 1.1).abs() < 1e-9);
        assert_eq!(
            Cell::sample("z", Vec::new()).cpu_ratio_by_round(&reference),
            None
        );
    }
}
