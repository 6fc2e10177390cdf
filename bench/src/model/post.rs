//! The five published comparisons archzoo answers (`../shared/posts/README.md` transcribes
//! them), as data: each post's machine, client command, workload, the servers it compared
//! with the worker counts it gave and the figures it printed, the model (and built-in peer)
//! that stands for each server here, and every conclusion it printed as a claim the replay
//! can test. [`judge`] gives each claim its verdict from the replay's cells.

use serde::{Deserialize, Serialize};

use super::cell::{Cell, Verdict};

/// One post.
#[derive(Debug, Clone, Copy)]
pub struct Post {
    /// `bench --post NAME`.
    pub name: &'static str,
    pub title: &'static str,
    /// The post's machine, as it gave it.
    pub machine: &'static str,
    /// Its CPUs (logical, or the VM's).
    pub cpus: usize,
    /// The post's client command, as it ran it.
    pub ab: Ab,
    /// The keep-alive modes the post ran (`-k` or not).
    pub keep_alive: &'static [bool],
    /// The archzoo workload that replays its handler.
    pub workload: &'static str,
    /// What differs from the post's handler, said beside the replay.
    pub workload_note: &'static str,
    /// How the post's worker counts are run here.
    pub workers_note: &'static str,
    /// The post's machine held its server to this share of one CPU (a VM's cap), which
    /// the replay reproduces with a cgroup where this machine allows it.
    pub cpu_cap_pct: Option<u32>,
    pub rows: &'static [Row],
    /// Printed by the post but not re-run (webbench's figures).
    pub not_rerun: &'static str,
    pub conclusions: &'static [Conclusion],
}

/// `ab -n N -c C` (with `-k` per the keep-alive mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ab {
    pub requests: u64,
    pub concurrency: u32,
}

/// The originals no registry has (Swoole, Workerman), which a user who has them brings with
/// `--peer NAME@MODEL=COMMAND` (docs/peers.md shows the few lines of each server program):
/// the name a post's row calls it by, and the model it stands beside.
pub const BROUGHT: &[(&str, &str)] = &[
    ("swoole-co", "coroutine-reuseport"),
    ("swoole-base", "prefork-eventloop"),
    ("swoole-process", "reactor-workers"),
    ("workerman", "prefork-eventloop"),
    ("webman", "prefork-eventloop"),
];

/// One server of a post, the figures it printed, and what stands for it here.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// A short key the conclusions name (`go-2`).
    pub key: &'static str,
    /// The server as the post named it.
    pub server: &'static str,
    pub workers: usize,
    /// The archzoo variant that models it; `None`: nothing here models it (why: `why`).
    pub model: Option<&'static str>,
    /// `raw`, or `framework` for the frameworks (MixPHP, Beego, webman).
    pub stack: &'static str,
    /// The real thing (or its nearest): a built-in peer, run where installed, or one of
    /// [`BROUGHT`], run when the user brings it with `--peer NAME@MODEL=COMMAND`.
    pub peer: Option<&'static str>,
    /// Requests a second as printed: without keep-alive, with it (`None`: not run, or cut
    /// from the copy).
    pub published: [Option<f64>; 2],
    /// Why a row has no model.
    pub why: &'static str,
}

impl Row {
    pub fn published(&self, keep_alive: bool) -> Option<f64> {
        self.published[usize::from(keep_alive)]
    }
}

/// A conclusion as the post printed it, and the claim it makes.
#[derive(Debug, Clone, Copy)]
pub struct Conclusion {
    pub text: &'static str,
    pub claim: Claim,
}

/// What a conclusion claims, in terms the replay can test (rows by key).
#[derive(Debug, Clone, Copy)]
pub enum Claim {
    /// `a` serves more than `b` (in the keep-alive mode given).
    Above {
        a: &'static str,
        b: &'static str,
        keep_alive: bool,
    },
    /// `a ÷ b` of the rates is `printed` (within ±25 % it holds).
    Ratio {
        a: &'static str,
        b: &'static str,
        keep_alive: bool,
        printed: f64,
    },
    /// The rows rank in this order, the fastest first.
    Order {
        rows: &'static [&'static str],
        keep_alive: bool,
    },
    /// The client, not the server, set these rows' figures (the post's own diagnosis).
    ClientBound {
        rows: &'static [&'static str],
        keep_alive: bool,
    },
}

/// A ratio within this factor of the printed one agrees.
pub const RATIO_TOLERANCE: f64 = 1.25;

/// What the replay says of a conclusion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Finding {
    /// By the server's own cost as well as by the post's method.
    Holds,
    /// The replay says the opposite, by the server's cost.
    Reversed,
    /// The post's method agrees, but its client was saturated: per request the servers'
    /// CPU says otherwise.
    ClientArtefact,
    /// It holds in the post's keep-alive mode and not in the other (or the other way).
    DependsOnKeepAlive,
    /// A ratio: the same direction, another size.
    Differs,
    /// The servers cost the same per request (within [`EVEN`], or the two halves of the
    /// repetitions order them differently): neither is above.
    Even,
    /// A row it needs has no model here, or was not measured.
    NotReplayed,
    /// The post's machine decides it: its figure does not carry to this one (a client
    /// that could not fill 12 CPUs fills one).
    DependsOnMachine,
    /// It holds with the database on the server's CPU, as the post's was, and not with
    /// the database on CPUs of its own (or the other way).
    DependsOnDatabase,
}

impl Finding {
    pub fn label(self) -> &'static str {
        match self {
            Finding::Holds => "holds",
            Finding::Reversed => "reversed",
            Finding::ClientArtefact => "an artefact of the client",
            Finding::DependsOnKeepAlive => "depends on keep-alive",
            Finding::Differs => "differs in size",
            Finding::Even => "even: the same cost per request (within 5 %, or the repetitions' two halves disagree)",
            Finding::NotReplayed => "not replayed",
            Finding::DependsOnMachine => "depends on the machine",
            Finding::DependsOnDatabase => "depends on where the database runs",
        }
    }
}

/// A conclusion's verdict and the figure that decides it.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub finding: Finding,
    pub because: String,
}

/// What the replay measured for one row in one keep-alive mode (the model's cell).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub rps: f64,
    /// Server CPU µs per request: the figure that ranks servers when the client is the
    /// bottleneck.
    pub cpu_us: Option<f64>,
    /// The CPU figure of the odd and of the even repetitions apart ([`Cell::pooled_halves`]).
    pub halves: Option<(f64, f64)>,
    pub verdict: Verdict,
}

/// Which replay of a row a figure is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The model that stands for the server, as the post ran it.
    Model,
    /// The real server: a built-in peer, or one the user brought ([`BROUGHT`]).
    Original,
    /// The model with the database on CPUs of its own, not the server's (a pg post).
    DbApart,
}

/// The closed-loop cell that replays `row` of a post in `keep_alive` on `side`: the
/// model's at the row's stack and workers, or the original's at its workers.
pub fn cell_of<'a>(
    cells: &'a [Cell],
    post: &str,
    row: &Row,
    keep_alive: bool,
    side: Side,
) -> Option<&'a Cell> {
    let name = match side {
        Side::Original => row.peer?,
        Side::Model | Side::DbApart => row.model?,
    };
    cells.iter().find(|c| {
        c.post.as_deref() == Some(post)
            && c.rate.is_none()
            && c.db_apart == (side == Side::DbApart)
            && c.variant == name
            && c.keep_alive == keep_alive
            && c.workers == row.workers
            && (side == Side::Original || c.stack == row.stack)
    })
}

/// The open-loop probes of `row`'s capacity search on `side` (model or original), which
/// keeps its connections alive whatever the post did.
pub fn probes_of<'a>(cells: &'a [Cell], post: &Post, row: &Row, side: Side) -> Vec<&'a Cell> {
    let name = match side {
        Side::Original => row.peer,
        Side::Model | Side::DbApart => row.model,
    };
    cells
        .iter()
        .filter(|c| {
            c.post.as_deref() == Some(post.name)
                && c.rate.is_some()
                && Some(c.variant.as_str()) == name
                && c.keep_alive
                && c.workers == row.workers
                && (side == Side::Original || c.stack == row.stack)
        })
        .collect()
}

/// `side`'s figures for `row` in `keep_alive`, when measured.
pub fn measured(
    cells: &[Cell],
    post: &str,
    row: &Row,
    keep_alive: bool,
    side: Side,
) -> Option<Measured> {
    let cell = cell_of(cells, post, row, keep_alive, side)?;
    let run = cell.median()?;
    Some(Measured {
        rps: run.outcome.rps,
        cpu_us: cell.pooled_cpu_us(),
        halves: cell.pooled_halves(),
        verdict: run.verdict,
    })
}

impl Post {
    pub fn row(&self, key: &str) -> &Row {
        self.rows
            .iter()
            .find(|r| r.key == key)
            .unwrap_or_else(|| panic!("post {}: no row {key}", self.name))
    }
}

/// The replay's verdict on `claim` of `post`, from the models' cells (both keep-alive
/// modes: the post's and the one it did not run) — and, for a post on a database, from
/// the models' cells with the database on CPUs of its own: a claim that holds in one
/// place and not the other depends on where the database runs.
pub fn judge(post: &Post, claim: &Claim, cells: &[Cell]) -> Judged {
    let as_posted = judge_on(post, claim, cells, Side::Model);
    let (keys, keep_alive) = match *claim {
        Claim::Above { a, b, keep_alive } => (vec![a, b], keep_alive),
        Claim::Order { rows, keep_alive } => (rows.to_vec(), keep_alive),
        Claim::Ratio { .. } | Claim::ClientBound { .. } => return as_posted,
    };
    let apart: Option<Vec<Measured>> = keys
        .iter()
        .map(|k| measured(cells, post.name, post.row(k), keep_alive, Side::DbApart))
        .collect();
    let Some(apart) = apart else {
        return as_posted;
    };
    // Apart, the server waits for a database that has its own CPU: what it serves, not
    // what its CPU costs, decides (waiting can overlap other requests now).
    let by_rate = chain(apart.windows(2).map(|w| Some(compare_rates(&w[0], &w[1]))));
    let figures = format!(
        "with the database on CPUs of its own: {}",
        keys.iter()
            .zip(&apart)
            .map(|(k, m)| format!("{k} {:.0} req/s", m.rps))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let finding = match (as_posted.finding, by_rate) {
        (Finding::Holds, Some(Cost::Dearer)) | (Finding::Reversed, Some(Cost::Cheaper)) => {
            Finding::DependsOnDatabase
        }
        (f, _) => f,
    };
    Judged {
        finding,
        because: format!("{}; {figures}", as_posted.because),
    }
}

/// The verdict on `claim` from the real servers' cells (built-in peers, or those the user
/// brought), when every row it names had one here.
pub fn judge_originals(post: &Post, claim: &Claim, cells: &[Cell]) -> Option<Judged> {
    let j = judge_on(post, claim, cells, Side::Original);
    (j.finding != Finding::NotReplayed).then_some(j)
}

/// The verdict on `claim` from `side`'s cells.
fn judge_on(post: &Post, claim: &Claim, cells: &[Cell], side: Side) -> Judged {
    let get = |key: &str, ka: bool| measured(cells, post.name, post.row(key), ka, side);
    // Every row's figures, or why the claim is not replayed: a row nothing stands for
    // says so before one that was only not measured.
    let all = |keys: &[&str], ka: bool| -> Result<Vec<Measured>, Judged> {
        let not_replayed = |because| Judged {
            finding: Finding::NotReplayed,
            because,
        };
        let rows = keys.iter().map(|k| post.row(k));
        if let Some(row) = rows.clone().find(|r| r.model.is_none()) {
            return Err(not_replayed(format!("{}: {}", row.server, row.why)));
        }
        if let Some(row) = rows
            .clone()
            .find(|r| side == Side::Original && r.peer.is_none())
        {
            return Err(not_replayed(format!("no real {} here", row.server)));
        }
        keys.iter()
            .map(|k| {
                get(k, ka)
                    .ok_or_else(|| not_replayed(format!("{} was not measured", post.row(k).server)))
            })
            .collect()
    };
    match *claim {
        Claim::Above { a, b, keep_alive } => {
            let (ma, mb) = match all(&[a, b], keep_alive) {
                Ok(m) => (m[0], m[1]),
                Err(j) => return j,
            };
            let by_rate = ma.rps > mb.rps;
            let by_cost = compare(&ma, &mb);
            let other = get(a, !keep_alive)
                .zip(get(b, !keep_alive))
                .and_then(|(x, y)| compare(&x, &y));
            let figures = format!(
                "{a} {:.0} req/s at {} µs/req, {b} {:.0} at {} ({})",
                ma.rps,
                us(ma.cpu_us),
                mb.rps,
                us(mb.cpu_us),
                ka_label(keep_alive)
            );
            let client_bound =
                ma.verdict == Verdict::ClientBound || mb.verdict == Verdict::ClientBound;
            decide(
                by_rate,
                by_cost,
                other,
                client_bound,
                figures,
                other_figures(get(a, !keep_alive), get(b, !keep_alive), a, b, !keep_alive),
            )
        }
        Claim::Order { rows, keep_alive } => {
            let m: Vec<(&str, Measured)> = match all(rows, keep_alive) {
                Ok(m) => rows.iter().copied().zip(m).collect(),
                Err(j) => return j,
            };
            let by_rate = m.windows(2).all(|w| w[0].1.rps >= w[1].1.rps);
            let by_cost = chain(m.windows(2).map(|w| compare(&w[0].1, &w[1].1)));
            let mut by_cpu: Vec<&(&str, Measured)> = m.iter().collect();
            by_cpu.sort_by(|x, y| {
                x.1.cpu_us
                    .unwrap_or(f64::MAX)
                    .total_cmp(&y.1.cpu_us.unwrap_or(f64::MAX))
            });
            let figures = format!(
                "by server CPU per request ({}): {}",
                ka_label(keep_alive),
                by_cpu
                    .iter()
                    .map(|(k, x)| format!("{k} {} µs", us(x.cpu_us)))
                    .collect::<Vec<_>>()
                    .join(" < ")
            );
            let client_bound = m.iter().any(|(_, x)| x.verdict == Verdict::ClientBound);
            let other: Option<Vec<Measured>> = rows.iter().map(|k| get(k, !keep_alive)).collect();
            let other_cost = other
                .as_ref()
                .and_then(|o| chain(o.windows(2).map(|w| compare(&w[0], &w[1]))));
            decide(
                by_rate,
                by_cost,
                other_cost,
                client_bound,
                figures,
                String::new(),
            )
        }
        Claim::Ratio {
            a,
            b,
            keep_alive,
            printed,
        } => {
            let (ma, mb) = match all(&[a, b], keep_alive) {
                Ok(m) => (m[0], m[1]),
                Err(j) => return j,
            };
            // The ratio of rates a server's cost predicts: b's cost over a's.
            let Some(replayed) = ma.cpu_us.zip(mb.cpu_us).map(|(ca, cb)| cb / ca) else {
                return Judged {
                    finding: Finding::NotReplayed,
                    because: "no server CPU figure".into(),
                };
            };
            let as_run = ma.rps / mb.rps.max(f64::MIN_POSITIVE);
            let because = format!(
                "{a} ÷ {b}: printed {printed:.2}; here {replayed:.2} by server CPU per request ({} vs {} µs), {as_run:.2} by req/s ({})",
                us(ma.cpu_us),
                us(mb.cpu_us),
                ka_label(keep_alive)
            );
            let agrees = |r: f64| r / printed <= RATIO_TOLERANCE && printed / r <= RATIO_TOLERANCE;
            let finding = if agrees(replayed) {
                Finding::Holds
            } else if (replayed > 1.0) != (printed > 1.0) && (replayed - 1.0).abs() > 0.05 {
                Finding::Reversed
            } else if agrees(as_run) && ma.verdict == Verdict::ClientBound {
                Finding::ClientArtefact
            } else {
                Finding::Differs
            };
            Judged { finding, because }
        }
        Claim::ClientBound { rows, keep_alive } => {
            let m: Vec<(&str, Measured)> = match all(rows, keep_alive) {
                Ok(m) => rows.iter().copied().zip(m).collect(),
                Err(j) => return j,
            };
            let bound = m.iter().all(|(_, x)| x.verdict == Verdict::ClientBound);
            let here = cells
                .iter()
                .find(|c| c.post.as_deref() == Some(post.name))
                .map_or(1, |c| c.server_cpus.len());
            let figures = m
                .iter()
                .map(|(k, x)| format!("{k}: {:.0} req/s, {}", x.rps, x.verdict.label()))
                .collect::<Vec<_>>()
                .join("; ");
            // A client that cannot fill the post's many CPUs can fill the few here: then
            // the machine, not the claim, differs.
            let (finding, because) = if bound {
                (Finding::Holds, figures)
            } else if post.cpus > here {
                (
                    Finding::DependsOnMachine,
                    format!(
                        "{figures} — on {here} server CPU(s) here against the post's {}: one ab saturates {} but not {}",
                        post.cpus,
                        if here == 1 { "one CPU's server only when it is faster than ab" } else { "a few CPUs' server only when they are faster than it" },
                        post.cpus
                    ),
                )
            } else {
                (Finding::Reversed, figures)
            };
            Judged { finding, because }
        }
    }
}

/// Costs closer than this share of the larger are even: a tick of /proc's CPU time, a
/// repetition's noise.
pub const EVEN: f64 = 0.05;

/// How `a`'s cost per request compares with `b`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cost {
    Cheaper,
    Even,
    Dearer,
}

/// `a`'s server CPU per request against `b`'s (`None`: a figure is missing): even within
/// [`EVEN`], or when the odd and the even repetitions order them differently (the
/// difference is the repetitions' noise, not the servers').
fn compare(a: &Measured, b: &Measured) -> Option<Cost> {
    let (x, y) = (a.cpu_us?, b.cpu_us?);
    let halves_disagree = a
        .halves
        .zip(b.halves)
        .is_some_and(|((a0, a1), (b0, b1))| (a0 < b0) != (x < y) || (a1 < b1) != (x < y));
    Some(if (x - y).abs() <= EVEN * x.max(y) || halves_disagree {
        Cost::Even
    } else if x < y {
        Cost::Cheaper
    } else {
        Cost::Dearer
    })
}

/// `a`'s req/s against `b`'s, as a cost: `Cheaper` when `a` serves more (beyond [`EVEN`]).
fn compare_rates(a: &Measured, b: &Measured) -> Cost {
    if (a.rps - b.rps).abs() <= EVEN * a.rps.max(b.rps) {
        Cost::Even
    } else if a.rps > b.rps {
        Cost::Cheaper
    } else {
        Cost::Dearer
    }
}

/// A ranking's pairs, each fastest-first, as one comparison: dearer if any pair is,
/// even if every pair is, cheaper otherwise.
fn chain(pairs: impl Iterator<Item = Option<Cost>>) -> Option<Cost> {
    let pairs: Vec<Cost> = pairs.collect::<Option<_>>()?;
    Some(if pairs.contains(&Cost::Dearer) {
        Cost::Dearer
    } else if pairs.iter().all(|c| *c == Cost::Even) {
        Cost::Even
    } else {
        Cost::Cheaper
    })
}

fn us(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.1}"))
}

fn ka_label(keep_alive: bool) -> &'static str {
    if keep_alive {
        "keep-alive"
    } else {
        "no keep-alive"
    }
}

fn other_figures(
    a: Option<Measured>,
    b: Option<Measured>,
    ka: &str,
    kb: &str,
    keep_alive: bool,
) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!(
            "{ka} {} µs/req, {kb} {} ({})",
            us(a.cpu_us),
            us(b.cpu_us),
            ka_label(keep_alive)
        ),
        _ => String::new(),
    }
}

/// The rule: the server's cost per request decides (req/s do too when nobody was client-
/// bound); the post's method agreeing while its client was saturated and the cost
/// disagreeing is the client's artefact; a claim that holds in one keep-alive mode only
/// depends on it.
fn decide(
    by_rate: bool,
    by_cost: Option<Cost>,
    other: Option<Cost>,
    client_bound: bool,
    figures: String,
    other_figures: String,
) -> Judged {
    let Some(by_cost) = by_cost else {
        return Judged {
            finding: Finding::NotReplayed,
            because: format!("no server CPU figure: {figures}"),
        };
    };
    let with_other = |s: String| {
        if other_figures.is_empty() {
            s
        } else {
            format!("{s}; the other mode: {other_figures}")
        }
    };
    let finding = match (by_cost, other) {
        (Cost::Even | Cost::Dearer, _) if by_rate && client_bound => Finding::ClientArtefact,
        (Cost::Even, _) => Finding::Even,
        (Cost::Cheaper, Some(Cost::Dearer)) | (Cost::Dearer, Some(Cost::Cheaper)) => {
            Finding::DependsOnKeepAlive
        }
        (Cost::Cheaper, _) => Finding::Holds,
        (Cost::Dearer, _) => Finding::Reversed,
    };
    Judged {
        finding,
        because: with_other(figures),
    }
}

const HELLO: &str = "archzoo's body is `hello, world!` (13 bytes)";

/// The five posts, in the order of `../shared/posts/README.md`.
pub const POSTS: &[Post] = &[
    Post {
        name: "swoole-vs-go",
        title: "Post A — Swoole Co\\Http\\Server vs Go net/http vs MixPHP vs Beego (2019–2020)",
        machine: "Intel i7-8700, 12 logical CPUs, server and ab on one machine (127.0.0.1)",
        cpus: 12,
        ab: Ab {
            requests: 100_000,
            concurrency: 1000,
        },
        keep_alive: &[true],
        workload: "plaintext",
        workload_note: "hello world, `hello, world!` (13 bytes), as the post's",
        workers_note: "the post's worker counts as given (12, 5, 2), on this machine's server CPUs: 12 workers are 12 processes (or threads) sharing them, not 12 CPUs",
        cpu_cap_pct: None,
        rows: &[
            Row { key: "swoole-12", server: "Swoole Co\\Http\\Server, 12 processes", workers: 12, model: Some("coroutine-reuseport"), stack: "raw", peer: Some("swoole-co"), published: [None, Some(127_441.95)], why: "" },
            Row { key: "go-12", server: "Go net/http, GOMAXPROCS 12", workers: 12, model: Some("work-stealing"), stack: "raw", peer: Some("go-nethttp"), published: [None, Some(121_575.23)], why: "" },
            Row { key: "mix-12", server: "MixPHP on Swoole, 12 processes", workers: 12, model: Some("coroutine-reuseport"), stack: "framework", peer: None, published: [None, Some(110_050.47)], why: "" },
            Row { key: "mix-5", server: "MixPHP on Swoole, 5 processes", workers: 5, model: Some("coroutine-reuseport"), stack: "framework", peer: None, published: [None, Some(114_070.87)], why: "" },
            Row { key: "beego-12", server: "Beego, GOMAXPROCS 12", workers: 12, model: Some("work-stealing"), stack: "framework", peer: None, published: [None, Some(107_428.35)], why: "" },
            Row { key: "swoole-2", server: "Swoole Co\\Http\\Server, 2 processes", workers: 2, model: Some("coroutine-reuseport"), stack: "raw", peer: Some("swoole-co"), published: [None, Some(136_426.58)], why: "" },
            Row { key: "go-2", server: "Go net/http, GOMAXPROCS 2", workers: 2, model: Some("work-stealing"), stack: "raw", peer: Some("go-nethttp"), published: [None, Some(106_834.75)], why: "" },
            Row { key: "mix-2", server: "MixPHP on Swoole, 2 processes", workers: 2, model: Some("coroutine-reuseport"), stack: "framework", peer: None, published: [None, Some(53_856.21)], why: "" },
            Row { key: "beego-2", server: "Beego, GOMAXPROCS 2", workers: 2, model: Some("work-stealing"), stack: "framework", peer: None, published: [None, Some(54_547.49)], why: "" },
        ],
        not_rerun: "",
        conclusions: &[
            Conclusion { text: "5 MixPHP processes gave as much as 12: `ab -c 1000` could not fill the CPUs (the author's own diagnosis)", claim: Claim::ClientBound { rows: &["mix-12", "mix-5"], keep_alive: true } },
            Conclusion { text: "Swoole is 21.7 % faster than Go's net library (2 workers)", claim: Claim::Above { a: "swoole-2", b: "go-2", keep_alive: true } },
            Conclusion { text: "the framework costs 60.5 % of Swoole's raw rate (MixPHP ÷ Swoole = 0.39, 2 workers)", claim: Claim::Ratio { a: "mix-2", b: "swoole-2", keep_alive: true, printed: 53_856.21 / 136_426.58 } },
            Conclusion { text: "MixPHP ≈ half of Go (2 workers)", claim: Claim::Ratio { a: "mix-2", b: "go-2", keep_alive: true, printed: 53_856.21 / 106_834.75 } },
            Conclusion { text: "Beego ≈ half of Go (2 workers)", claim: Claim::Ratio { a: "beego-2", b: "go-2", keep_alive: true, printed: 54_547.49 / 106_834.75 } },
        ],
    },
    Post {
        name: "python-db",
        title: "Post B — Python and PHP web servers with a database (2011)",
        machine: "a VirtualBox VM: one core at 40 % of a 2.3 GHz i5, 128 MB; MySQL on the same core; ab on the host",
        cpus: 1,
        ab: Ab {
            requests: 1000,
            concurrency: 100,
        },
        keep_alive: &[false],
        workload: "pg",
        workload_note: "10 sequential queries a request (`/pg?queries=10`) against PostgreSQL on the server's CPU — the post used MySQL 5.5 (MyISAM, 1,000,000 rows, query cache off) on the same core",
        workers_note: "one worker each, as the post's (\"single CPU\"), the server and the database held together to 40 % of one CPU as its VM was",
        cpu_cap_pct: Some(40),
        rows: &[
            Row { key: "gevent-amysql", server: "gevent pywsgi + amysql (sync)", workers: 1, model: Some("coroutine-reuseport"), stack: "raw", peer: None, published: [Some(154.0), None], why: "" },
            Row { key: "gevent-amysql-async", server: "gevent + amysql async (10 queries spawned)", workers: 1, model: None, stack: "raw", peer: None, published: [Some(149.0), None], why: "no model spawns a request's queries in parallel: every one sends its 10 queries one after another" },
            Row { key: "gevent-mysqldb", server: "gevent + MySQLdb (a blocking driver)", workers: 1, model: Some("prefork-blocking"), stack: "raw", peer: None, published: [Some(122.0), None], why: "" },
            Row { key: "uwsgi", server: "uWSGI --http (router + 1 worker)", workers: 1, model: Some("reactor-workers/sync"), stack: "raw", peer: None, published: [Some(134.0), None], why: "" },
            Row { key: "tornado", server: "Tornado 2.0 (a blocking driver in its loop)", workers: 1, model: Some("prefork-eventloop"), stack: "raw", peer: None, published: [None, None], why: "" },
        ],
        not_rerun: "Tornado's and PHP's figures are cut from the copy transcribed; PHP (spawn-fcgi behind nginx) would stand beside uWSGI's model.",
        conclusions: &[
            Conclusion { text: "with enough concurrency, asynchronous queries did not help and were slower (more code to run)", claim: Claim::Above { a: "gevent-amysql", b: "gevent-amysql-async", keep_alive: false } },
            Conclusion { text: "the table's order: gevent + amysql 154 > uWSGI 134 > gevent + MySQLdb 122", claim: Claim::Order { rows: &["gevent-amysql", "uwsgi", "gevent-mysqldb"], keep_alive: false } },
        ],
    },
    Post {
        name: "one-process",
        title: "Post C — Go net/http vs Workerman vs webman vs Swoole, one process each (2022)",
        machine: "a 4-vCPU cloud VM, 4 GiB, Ubuntu 20.04",
        cpus: 4,
        ab: Ab {
            requests: 100_000,
            concurrency: 200,
        },
        keep_alive: &[false, true],
        workload: "plaintext",
        workload_note: "hello world — the post's body was `hello` (5 bytes); archzoo's is `hello, world!` (13 bytes)",
        workers_note: "one process each, as the post's; Go's threads as many as its VM's vCPUs (4), here on this machine's server CPUs",
        cpu_cap_pct: None,
        rows: &[
            Row { key: "go", server: "Go net/http", workers: 4, model: Some("work-stealing"), stack: "raw", peer: Some("go-nethttp"), published: [Some(19_995.0), Some(98_546.0)], why: "" },
            Row { key: "workerman", server: "Workerman", workers: 1, model: Some("prefork-eventloop"), stack: "raw", peer: Some("workerman"), published: [Some(30_120.0), Some(125_986.0)], why: "" },
            Row { key: "webman", server: "webman (a framework on Workerman)", workers: 1, model: Some("prefork-eventloop"), stack: "framework", peer: Some("webman"), published: [Some(29_301.0), Some(85_938.0)], why: "" },
            Row { key: "swoole-base", server: "Swoole Http\\Server, SWOOLE_BASE", workers: 1, model: Some("prefork-eventloop"), stack: "raw", peer: Some("swoole-base"), published: [Some(25_836.0), Some(73_304.0)], why: "" },
            Row { key: "swoole-co", server: "Swoole Coroutine\\Http\\Server", workers: 1, model: Some("coroutine-reuseport"), stack: "raw", peer: Some("swoole-co"), published: [Some(27_093.0), Some(54_596.0)], why: "" },
        ],
        not_rerun: "",
        conclusions: &[
            Conclusion { text: "Workerman above Go without keep-alive", claim: Claim::Above { a: "workerman", b: "go", keep_alive: false } },
            Conclusion { text: "Workerman above Go with keep-alive", claim: Claim::Above { a: "workerman", b: "go", keep_alive: true } },
            Conclusion { text: "Swoole above Go without keep-alive", claim: Claim::Above { a: "swoole-co", b: "go", keep_alive: false } },
            Conclusion { text: "Swoole below Go with keep-alive", claim: Claim::Above { a: "go", b: "swoole-co", keep_alive: true } },
        ],
    },
    Post {
        name: "fpm-openresty",
        title: "Post D — php5.5 / php7 (php-fpm) / Swoole / openresty, hello world (2017)",
        machine: "one core of an i5-5287U @ 2.90 GHz, 1 GB (a Vagrant VM); ab from another address",
        cpus: 1,
        ab: Ab {
            requests: 1000,
            concurrency: 100,
        },
        keep_alive: &[false],
        workload: "plaintext",
        workload_note: HELLO,
        workers_note: "4 processes for php-fpm and Swoole, as the post's; openresty's one worker (its default) — on this machine's server CPUs",
        cpu_cap_pct: None,
        rows: &[
            Row { key: "php55", server: "nginx + php-fpm, PHP 5.5 (no opcache), 4 processes", workers: 4, model: Some("reactor-workers/sync"), stack: "raw", peer: Some("php-fpm"), published: [Some(864.41), None], why: "" },
            Row { key: "php7", server: "nginx + php-fpm, PHP 7 (opcache), 4 processes", workers: 4, model: Some("reactor-workers/sync"), stack: "raw", peer: Some("php-fpm"), published: [Some(1_715.17), None], why: "" },
            Row { key: "swoole", server: "Swoole Http\\Server (SWOOLE_PROCESS), 4 workers", workers: 4, model: Some("reactor-workers"), stack: "raw", peer: Some("swoole-process"), published: [Some(7_550.65), None], why: "" },
            Row { key: "openresty", server: "openresty 1.9.15", workers: 1, model: Some("prefork-eventloop"), stack: "raw", peer: Some("nginx"), published: [Some(10_629.36), None], why: "" },
        ],
        not_rerun: "PHP 5.5 and PHP 7 are one model here: their 2× is the language's, which the models do not vary.",
        conclusions: &[
            Conclusion { text: "the table's order: openresty > Swoole > php-fpm", claim: Claim::Order { rows: &["openresty", "swoole", "php7"], keep_alive: false } },
            Conclusion { text: "Swoole serves 4.4× php-fpm (PHP 7)", claim: Claim::Ratio { a: "swoole", b: "php7", keep_alive: false, printed: 7_550.65 / 1_715.17 } },
        ],
    },
    Post {
        name: "cpu-bound",
        title: "Post E — PHP-FPM vs Workerman (webman) vs Swoole vs Go, CPU-bound /sum (2021)",
        machine: "a single-core 2 GB cloud server, CentOS 7.6",
        cpus: 1,
        ab: Ab {
            requests: 100_000,
            concurrency: 100,
        },
        keep_alive: &[false],
        workload: "sum",
        workload_note: "1,000 random integers summed a request (`/sum`), as the post's",
        workers_note: "the post gave no worker counts: one per CPU for the event loops and Go (its one core), php-fpm's default pool of 5 — on this machine's server CPUs",
        cpu_cap_pct: None,
        rows: &[
            Row { key: "php-fpm", server: "php-fpm", workers: 5, model: Some("reactor-workers/sync"), stack: "raw", peer: Some("php-fpm"), published: [Some(3_822.12), None], why: "" },
            Row { key: "webman", server: "Workerman (webman)", workers: 1, model: Some("prefork-eventloop"), stack: "framework", peer: Some("webman"), published: [Some(8_198.21), None], why: "" },
            Row { key: "swoole-async", server: "Swoole asynchronous Http\\Server", workers: 1, model: Some("reactor-workers"), stack: "raw", peer: Some("swoole-process"), published: [Some(8_730.33), None], why: "" },
            Row { key: "swoole-co", server: "Swoole coroutine server", workers: 1, model: Some("coroutine-reuseport"), stack: "raw", peer: Some("swoole-co"), published: [Some(9_453.09), None], why: "" },
            Row { key: "go", server: "Go net/http", workers: 1, model: Some("work-stealing"), stack: "raw", peer: Some("go-nethttp"), published: [Some(8_746.31), None], why: "" },
        ],
        not_rerun: "webbench -c 100 -t 30, printed beside ab: php-fpm 105,472, webman 233,348, Swoole async 245,974, Swoole coroutine 271,142, Go 249,192 requests in 30 s (the same order as ab's).",
        conclusions: &[
            Conclusion { text: "Swoole coroutine > Go > Workerman > php-fpm", claim: Claim::Order { rows: &["swoole-co", "go", "webman", "php-fpm"], keep_alive: false } },
            Conclusion { text: "Go = Swoole async", claim: Claim::Ratio { a: "swoole-async", b: "go", keep_alive: false, printed: 8_730.33 / 8_746.31 } },
        ],
    },
];

/// The post named `name`, or a line naming the ones there are.
pub fn named(name: &str) -> Result<&'static Post, String> {
    POSTS.iter().find(|p| p.name == name).ok_or_else(|| {
        format!(
            "--post: no post '{name}' (there are: {}, all, list)",
            POSTS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cell::Run;
    use crate::model::client::Client;

    // A cell is what the verdicts read: every field the rule looks at, named at the call.
    #[allow(clippy::too_many_arguments)]
    fn cell(
        post: &str,
        variant: &str,
        stack: &str,
        workers: usize,
        ka: bool,
        rps: f64,
        cpu: f64,
        v: Verdict,
    ) -> Cell {
        let run = Run {
            verdict: v,
            ..Run::sample(rps, cpu)
        };
        Cell {
            stack: stack.into(),
            workers,
            keep_alive: ka,
            connections: 200,
            client: Client::Ab,
            post: Some(post.into()),
            ..Cell::sample(variant, vec![run])
        }
    }

    /// Every row a conclusion names exists, every row with a model names a variant, and
    /// the figures are the transcription's.
    #[test]
    fn the_posts_are_the_transcription() {
        assert_eq!(
            POSTS.iter().map(|p| p.name).collect::<Vec<_>>(),
            [
                "swoole-vs-go",
                "python-db",
                "one-process",
                "fpm-openresty",
                "cpu-bound"
            ]
        );
        for post in POSTS {
            for c in post.conclusions {
                let keys: Vec<&str> = match c.claim {
                    Claim::Above { a, b, .. } | Claim::Ratio { a, b, .. } => vec![a, b],
                    Claim::Order { rows, .. } | Claim::ClientBound { rows, .. } => rows.to_vec(),
                };
                for k in keys {
                    post.row(k);
                }
            }
            for r in post.rows {
                if let Some(m) = r.model {
                    variants::Variant::named(m);
                }
                if let Some(p) = r.peer {
                    // A built-in peer, or an original the user brings beside the row's model.
                    let builtin = variants::peers::BUILTIN.iter().any(|b| b.name == p);
                    let brought = BROUGHT.iter().any(|&(n, m)| n == p && Some(m) == r.model);
                    assert!(builtin || brought, "{p}");
                }
                assert!(r.model.is_some() || !r.why.is_empty(), "{}", r.key);
            }
            assert!(variants::WORKLOADS.iter().any(|w| w.name == post.workload));
        }
        let a = named("swoole-vs-go").unwrap();
        assert_eq!(
            (a.ab.requests, a.ab.concurrency, a.keep_alive),
            (100_000, 1000, &[true][..])
        );
        assert_eq!(a.row("swoole-2").published(true), Some(136_426.58));
        assert_eq!(a.row("mix-5").workers, 5);
        let b = named("python-db").unwrap();
        assert_eq!(
            (b.ab.requests, b.ab.concurrency, b.workload),
            (1000, 100, "pg")
        );
        let c = named("one-process").unwrap();
        assert_eq!(
            (c.ab.requests, c.ab.concurrency, c.keep_alive),
            (100_000, 200, &[false, true][..])
        );
        assert_eq!(
            c.row("workerman").published,
            [Some(30_120.0), Some(125_986.0)]
        );
        let d = named("fpm-openresty").unwrap();
        assert_eq!((d.ab.requests, d.ab.concurrency), (1000, 100));
        assert_eq!(d.row("openresty").published(false), Some(10_629.36));
        let e = named("cpu-bound").unwrap();
        assert_eq!(
            (e.ab.requests, e.ab.concurrency, e.workload),
            (100_000, 100, "sum")
        );
        assert_eq!(e.row("swoole-co").published(false), Some(9_453.09));
        // "21.7 % faster" is (136,426.58 − 106,834.75) ÷ 136,426.58, as printed.
        let pct: f64 = 100.0 * (136_426.58 - 106_834.75) / 136_426.58;
        assert!((pct - 21.7).abs() < 0.05, "{pct}");
        assert!(named("nope").unwrap_err().contains("swoole-vs-go"));
    }

    #[test]
    fn the_cost_per_request_decides_and_a_saturated_client_is_named() {
        let post = named("one-process").unwrap();
        let above = Claim::Above {
            a: "workerman",
            b: "go",
            keep_alive: false,
        };
        use Verdict::*;
        // Workerman cheaper in both modes: holds.
        let cells = vec![
            cell(
                "one-process",
                "prefork-eventloop",
                "raw",
                1,
                false,
                30_000.0,
                20.0,
                ClientBound,
            ),
            cell(
                "one-process",
                "work-stealing",
                "raw",
                4,
                false,
                20_000.0,
                30.0,
                ClientBound,
            ),
            cell(
                "one-process",
                "prefork-eventloop",
                "raw",
                1,
                true,
                90_000.0,
                6.0,
                ClientBound,
            ),
            cell(
                "one-process",
                "work-stealing",
                "raw",
                4,
                true,
                80_000.0,
                8.0,
                ClientBound,
            ),
        ];
        assert_eq!(judge(post, &above, &cells).finding, Finding::Holds);
        // More req/s, but dearer per request, with ab saturated: the client's artefact.
        let mut artefact = cells.clone();
        artefact[0] = cell(
            "one-process",
            "prefork-eventloop",
            "raw",
            1,
            false,
            30_000.0,
            40.0,
            ClientBound,
        );
        let j = judge(post, &above, &artefact);
        assert_eq!(j.finding, Finding::ClientArtefact, "{j:?}");
        // Even per request, and ab saturated: the client's artefact too.
        let mut even = cells.clone();
        even[0] = cell(
            "one-process",
            "prefork-eventloop",
            "raw",
            1,
            false,
            30_000.0,
            29.0,
            ClientBound,
        );
        assert_eq!(judge(post, &above, &even).finding, Finding::ClientArtefact);
        even[0] = cell(
            "one-process",
            "prefork-eventloop",
            "raw",
            1,
            false,
            10_000.0,
            29.0,
            ServerBound,
        );
        assert_eq!(judge(post, &above, &even).finding, Finding::Even);
        // Cheaper without keep-alive, dearer with it: depends on keep-alive.
        let mut ka = cells.clone();
        ka[2] = cell(
            "one-process",
            "prefork-eventloop",
            "raw",
            1,
            true,
            90_000.0,
            9.0,
            ClientBound,
        );
        assert_eq!(
            judge(post, &above, &ka).finding,
            Finding::DependsOnKeepAlive
        );
        // Dearer in both, fewer req/s: reversed.
        let mut rev = cells.clone();
        rev[0] = cell(
            "one-process",
            "prefork-eventloop",
            "raw",
            1,
            false,
            10_000.0,
            40.0,
            ServerBound,
        );
        rev[2] = cell(
            "one-process",
            "prefork-eventloop",
            "raw",
            1,
            true,
            10_000.0,
            9.0,
            ServerBound,
        );
        assert_eq!(judge(post, &above, &rev).finding, Finding::Reversed);
        // A row that was not measured, and one no model stands for.
        assert_eq!(
            judge(post, &above, &cells[1..]).finding,
            Finding::NotReplayed
        );
        let b = named("python-db").unwrap();
        let j = judge(b, &b.conclusions[0].claim, &cells);
        assert_eq!(j.finding, Finding::NotReplayed);
        assert!(j.because.contains("in parallel"), "{j:?}");
    }

    /// "ab -c 1000 could not fill the CPUs" was said of 12 CPUs: a server on one CPU that
    /// ab can fill is the machine's difference, not the claim's reversal.
    #[test]
    fn a_client_that_fills_one_cpu_but_not_twelve_is_the_machine() {
        let post = named("swoole-vs-go").unwrap();
        let claim = post.conclusions[0].claim;
        use Verdict::*;
        let served = vec![
            cell(
                "swoole-vs-go",
                "coroutine-reuseport",
                "framework",
                12,
                true,
                79_000.0,
                12.5,
                ServerBound,
            ),
            cell(
                "swoole-vs-go",
                "coroutine-reuseport",
                "framework",
                5,
                true,
                74_000.0,
                12.8,
                Neither,
            ),
        ];
        let j = judge(post, &claim, &served);
        assert_eq!(j.finding, Finding::DependsOnMachine, "{j:?}");
        assert!(j.because.contains("the post's 12"), "{j:?}");
        let bound: Vec<Cell> = served
            .iter()
            .map(|c| {
                let mut c = c.clone();
                c.runs[0].verdict = ClientBound;
                c
            })
            .collect();
        assert_eq!(judge(post, &claim, &bound).finding, Finding::Holds);
    }

    #[test]
    fn a_ratio_holds_within_a_quarter_and_an_order_by_cost() {
        let post = named("cpu-bound").unwrap();
        use Verdict::*;
        let cells = vec![
            cell(
                "cpu-bound",
                "coroutine-reuseport",
                "raw",
                1,
                false,
                9_000.0,
                100.0,
                ServerBound,
            ),
            cell(
                "cpu-bound",
                "work-stealing",
                "raw",
                1,
                false,
                8_500.0,
                110.0,
                ServerBound,
            ),
            cell(
                "cpu-bound",
                "prefork-eventloop",
                "framework",
                1,
                false,
                8_000.0,
                115.0,
                ServerBound,
            ),
            cell(
                "cpu-bound",
                "reactor-workers/sync",
                "raw",
                5,
                false,
                4_000.0,
                250.0,
                ServerBound,
            ),
            cell(
                "cpu-bound",
                "reactor-workers",
                "raw",
                1,
                false,
                8_000.0,
                120.0,
                ServerBound,
            ),
        ];
        let order = judge(post, &post.conclusions[0].claim, &cells);
        assert_eq!(order.finding, Finding::Holds, "{order:?}");
        let ratio = judge(post, &post.conclusions[1].claim, &cells);
        assert_eq!(ratio.finding, Finding::Holds, "{ratio:?}");
        let mut far = cells.clone();
        far[4] = cell(
            "cpu-bound",
            "reactor-workers",
            "raw",
            1,
            false,
            4_000.0,
            240.0,
            ServerBound,
        );
        assert_eq!(
            judge(post, &post.conclusions[1].claim, &far).finding,
            Finding::Differs
        );
    }

    /// A cell of `post` with four repetitions at these CPU figures (10,000 req/s each).
    fn four(post: &str, variant: &str, workers: usize, cpus: [f64; 4]) -> Cell {
        let runs = cpus
            .map(|c| Run {
                verdict: Verdict::ServerBound,
                ..Run::sample(10_000.0, c)
            })
            .to_vec();
        Cell {
            stack: "raw".into(),
            workers,
            keep_alive: false,
            connections: 200,
            client: Client::Ab,
            post: Some(post.into()),
            ..Cell::sample(variant, runs)
        }
    }

    /// 20 % apart is beyond the 5 % rule; but when the odd repetitions put one server
    /// first and the even ones the other, the difference is the repetitions' noise.
    #[test]
    fn halves_that_disagree_make_a_difference_even() {
        let post = named("one-process").unwrap();
        let above = Claim::Above {
            a: "workerman",
            b: "go",
            keep_alive: false,
        };
        let go = four("one-process", "work-stealing", 4, [24.0; 4]);
        let noisy = [
            four(
                "one-process",
                "prefork-eventloop",
                1,
                [10.0, 30.0, 10.0, 30.0],
            ),
            go.clone(),
        ];
        let j = judge(post, &above, &noisy);
        assert_eq!(j.finding, Finding::Even, "{j:?}");
        let steady = [four("one-process", "prefork-eventloop", 1, [20.0; 4]), go];
        assert_eq!(judge(post, &above, &steady).finding, Finding::Holds);
    }

    /// Post B's order is reversed by the servers' cost with the database on their CPU, and
    /// holds by what they serve with it on CPUs of its own: it depends on where it runs.
    #[test]
    fn an_order_that_moving_the_database_reverses_depends_on_it() {
        let post = named("python-db").unwrap();
        let claim = post.conclusions[1].claim;
        let at = |variant: &str, rps: f64, cpu: f64, apart: bool| Cell {
            db_apart: apart,
            ..cell(
                "python-db",
                variant,
                "raw",
                1,
                false,
                rps,
                cpu,
                Verdict::ServerBound,
            )
        };
        let mut cells = vec![
            at("coroutine-reuseport", 391.0, 229.5, false),
            at("reactor-workers/sync", 634.0, 229.0, false),
            at("prefork-blocking", 771.0, 177.0, false),
        ];
        assert_eq!(judge(post, &claim, &cells).finding, Finding::Reversed);
        cells.extend([
            at("coroutine-reuseport", 1_500.0, 200.0, true),
            at("reactor-workers/sync", 900.0, 210.0, true),
            at("prefork-blocking", 850.0, 170.0, true),
        ]);
        let j = judge(post, &claim, &cells);
        assert_eq!(j.finding, Finding::DependsOnDatabase, "{j:?}");
        assert!(
            j.because
                .contains("with the database on CPUs of its own: gevent-amysql 1500 req/s"),
            "{j:?}"
        );
        // Apart the same order as by the cost: it does not depend on the database.
        cells[3] = at("coroutine-reuseport", 600.0, 200.0, true);
        cells[5] = at("prefork-blocking", 1_200.0, 170.0, true);
        assert_eq!(judge(post, &claim, &cells).finding, Finding::Reversed);
    }

    /// The real servers get their own verdict when every row the claim names had one.
    #[test]
    fn the_originals_are_judged_apart_from_the_models() {
        let post = named("one-process").unwrap();
        let above = Claim::Above {
            a: "workerman",
            b: "go",
            keep_alive: false,
        };
        let models = [
            cell(
                "one-process",
                "prefork-eventloop",
                "raw",
                1,
                false,
                30_000.0,
                20.0,
                Verdict::ServerBound,
            ),
            cell(
                "one-process",
                "work-stealing",
                "raw",
                4,
                false,
                20_000.0,
                30.0,
                Verdict::ServerBound,
            ),
        ];
        assert_eq!(judge_originals(post, &above, &models), None);
        let mut cells = models.to_vec();
        cells.push(cell(
            "one-process",
            "workerman",
            "raw",
            1,
            false,
            9_000.0,
            90.0,
            Verdict::ServerBound,
        ));
        assert_eq!(
            judge_originals(post, &above, &cells),
            None,
            "Go is not here"
        );
        cells.push(cell(
            "one-process",
            "go-nethttp",
            "raw",
            4,
            false,
            15_000.0,
            45.0,
            Verdict::ServerBound,
        ));
        let j = judge_originals(post, &above, &cells).unwrap();
        assert_eq!(j.finding, Finding::Reversed, "{j:?}");
        assert_eq!(judge(post, &above, &cells).finding, Finding::Holds);
    }
}
