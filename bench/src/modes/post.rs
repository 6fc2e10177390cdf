//! `bench --post NAME`: a published comparison replayed (`model::post` holds the five) —
//! the post's own method (`ab -n … -c … [-k]`, its workload, its worker counts) on the
//! model that stands for each server and on the real server where this machine has it (a
//! built-in peer, or Swoole and Workerman brought with `--peer NAME@MODEL=…`); then the
//! run the post did not make: the other keep-alive mode, with the server's CPU per request
//! and the client-bound verdict every cell has, each server's capacity at a latency target
//! (open loop, oha), and — for the post on a database — the same cells with the database
//! on CPUs of its own. The table and the verdicts are `write::post`.

use std::sync::Arc;

use variants::peers::{self, Peer};
use variants::{Variant, Workload};

use crate::measure::cap::CpuCap;
use crate::measure::cell::{CellSpec, Plan, Target};
use crate::measure::client::Amount;
use crate::measure::database;
use crate::model::cell::{Cell, Link};
use crate::model::client::Client;
use crate::model::post::{Post, BROUGHT};
use crate::model::slo;
use crate::modes::{matrix, slo as search};

/// How a replay runs beyond the post's own method.
pub struct Replay<'a> {
    /// A smoke test: a twentieth of the requests, one repetition, short probes.
    pub quick: bool,
    pub link: Link,
    /// The originals the user brought (`--peer NAME@MODEL=…`), matched to rows by name.
    pub brought: &'a [Peer],
    /// The latency target of each server's capacity (`--slo`, else `slo::CAPACITY_AT`).
    pub slo: slo::Target,
}

/// The requests of one repetition: the post's `-n`, or a twentieth of it for a smoke test
/// (`--quick`), never fewer than two a connection.
pub fn requests(post: &Post, quick: bool) -> u64 {
    let n = post.ab.requests;
    if quick {
        (n / 20).max(2 * u64::from(post.ab.concurrency))
    } else {
        n
    }
}

/// Repetitions of a cell: the run's, and enough of a short command (`ab -n 1000`) for
/// 20,000 requests in all — /proc's CPU time is whole 10 ms ticks, and the verdicts rank by
/// CPU per request over every repetition.
pub fn repetitions(post: &Post, reps: u32, quick: bool) -> u32 {
    if quick {
        return 1;
    }
    reps.max(20_000u64.div_ceil(post.ab.requests) as u32)
}

/// The post's cells: each row's model (and its original, where installed or brought) at
/// the row's stack and workers, in both keep-alive modes, the post's first; a cell two
/// rows share (Workerman and Swoole BASE are one model) once.
pub fn jobs(post: &Post, link: Link, brought: &[Peer]) -> Vec<(Target, CellSpec<'static>)> {
    let workload = Workload::named(post.workload);
    let mut modes: Vec<bool> = post.keep_alive.to_vec();
    for ka in [false, true] {
        if !modes.contains(&ka) {
            modes.push(ka);
        }
    }
    let mut jobs: Vec<(Target, CellSpec<'static>)> = Vec::new();
    for &keep_alive in &modes {
        for row in post.rows {
            let mut targets: Vec<(Target, &'static str)> = Vec::new();
            if let Some(model) = row.model {
                targets.push((Target::Model(Variant::named(model)), row.stack));
            }
            if let Some(original) = row.peer.and_then(|name| original(name, brought)) {
                targets.push((Target::Peer(original), "raw"));
            }
            for (target, stack) in targets {
                let spec = CellSpec {
                    stack,
                    workload,
                    keep_alive,
                    connections: post.ab.concurrency,
                    workers: row.workers,
                    rate: None,
                    link,
                };
                let same = |(t, s): &(Target, CellSpec)| {
                    t.name() == target.name()
                        && s.stack == spec.stack
                        && s.workers == spec.workers
                        && s.keep_alive == spec.keep_alive
                };
                if !jobs.iter().any(same) {
                    jobs.push((target, spec));
                }
            }
        }
    }
    jobs
}

/// The real server a row names: one the user brought by that name, else the built-in
/// peer where this machine has it (scripts/bench --post installs them).
fn original(name: &str, brought: &[Peer]) -> Option<Peer> {
    if let Some(p) = brought.iter().find(|p| p.name == name) {
        return Some(p.clone());
    }
    peers::missing(name)
        .is_none()
        .then(|| Peer::builtin(name).ok())
        .flatten()
}

/// The `--peer`s given with `--post`: each must be an original a replayed post's row names
/// ([`BROUGHT`]), beside that row's model if it names one. `Err`: one line saying which.
pub fn check_brought(posts: &[&Post], brought: &[Peer]) -> Result<(), String> {
    if posts.is_empty() {
        return Ok(());
    }
    for p in brought {
        let rows: Vec<_> = posts
            .iter()
            .flat_map(|post| post.rows)
            .filter(|r| r.peer == Some(p.name.as_str()))
            .collect();
        let Some(row) = rows.first() else {
            return Err(format!(
                "--post: --peer {} stands for no server of the posts replayed (they take: {})",
                p.name,
                BROUGHT
                    .iter()
                    .map(|(n, m)| format!("{n}@{m}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        if let (Some(beside), Some(model)) = (&p.beside, row.model) {
            if beside != model {
                return Err(format!(
                    "--post: --peer {}@{beside}: the posts model {} with {model}",
                    p.name, row.server
                ));
            }
        }
    }
    Ok(())
}

/// Replays `post`: its cells run as the matrix runs them, with ab and the post's `-n`;
/// then each server's capacity at the latency target in the post's keep-alive mode,
/// searched from its closed-loop rate; then, for a post on a database this run started,
/// the models again with the database on the client's CPUs. Every cell is marked with the
/// post's name.
///
/// A post whose machine held its server to a share of a CPU gets that cap (the server
/// and the database together, as in its VM) where this machine allows a cgroup; where it
/// does not, every cell says so.
pub fn run(plan: &Plan, post: &Post, replay: &Replay) -> Vec<Cell> {
    let mut uncapped = None;
    let mut capped = |with_db: Option<i32>| {
        let pct = post.cpu_cap_pct?;
        let made = CpuCap::create(pct).and_then(|cap| {
            if let Some(db) = with_db {
                cap.add(db)?;
            }
            Ok(cap)
        });
        made.map_err(|why| {
            uncapped = Some(format!(
                "not capped at {pct} % of a CPU as the post's machine was: {why}"
            ))
        })
        .ok()
        .map(Arc::new)
    };
    let replay_plan = Plan {
        client: Client::Ab,
        pipeline: None,
        amount: Amount::Requests(requests(post, replay.quick)),
        reps: repetitions(post, plan.reps, replay.quick),
        cap: capped(plan.db_pid),
        ..plan.clone()
    };
    let jobs = jobs(post, replay.link, replay.brought);
    let mut cells = matrix::run(&replay_plan, jobs.clone());
    cells.extend(capacities(&replay_plan, replay, &jobs, &cells));
    // The cap (and the database in it) is released before the database moves.
    drop(replay_plan);
    if let (true, Some(db)) = (Workload::named(post.workload).needs_database(), plan.db_pid) {
        cells.extend(database_apart(plan, post, replay, db, capped(None)));
    }
    for cell in &mut cells {
        cell.post = Some(post.name.to_string());
        cell.notes.extend(uncapped.clone());
    }
    cells
}

/// Each job's capacity at the replay's latency target, with keep-alive — whatever the post
/// ran: a client that opens a connection a request measures its own connects here (oha at
/// 500 req/s without keep-alive had a p99 of 30 ms against a server whose median was
/// 0.3 ms), and a server behind a load balancer keeps its connections. An open-loop search
/// (oha) from half the rate its keep-alive closed-loop cell reached, at most eight probes (a
/// bracket of about 10 %) of 2 s after a 1 s warm-up, stretched at low rates (with
/// `--quick` four of 1 s and no warm-up): a post runs a few dozen.
fn capacities(
    plan: &Plan,
    replay: &Replay,
    jobs: &[(Target, CellSpec<'static>)],
    closed: &[Cell],
) -> Vec<Cell> {
    // From the closed loop's rate, four probes bracket it within about a quarter and
    // eight within about a tenth.
    let most = if replay.quick { 4 } else { 8 };
    jobs.iter()
        .filter(|(_, s)| s.keep_alive)
        .flat_map(|(target, spec)| {
            search::beside_closed_loop(plan, target, spec, &replay.slo, closed, replay.quick, most)
        })
        .collect()
}

/// The post's models again, in its keep-alive mode, with the database on the client's
/// CPUs (its own, beside a client that is mostly waiting) and the server alone under the
/// post's cap: where the database runs decides whether waiting for it can overlap other
/// requests. The database goes back to the server's CPUs after.
fn database_apart(
    plan: &Plan,
    post: &Post,
    replay: &Replay,
    db: i32,
    cap: Option<Arc<CpuCap>>,
) -> Vec<Cell> {
    if let Err(why) = database::place(db, &plan.client_cpus) {
        eprintln!(
            "bench: {}: the database stays on the server's CPUs: {why}",
            post.name
        );
        return Vec::new();
    }
    let apart_plan = Plan {
        client: Client::Ab,
        pipeline: None,
        amount: Amount::Requests(requests(post, replay.quick)),
        reps: repetitions(post, plan.reps, replay.quick),
        cap,
        ..plan.clone()
    };
    let jobs: Vec<_> = jobs(post, replay.link, &[])
        .into_iter()
        .filter(|(t, s)| matches!(t, Target::Model(_)) && s.keep_alive == post.keep_alive[0])
        .collect();
    let mut cells = matrix::run(&apart_plan, jobs);
    for cell in &mut cells {
        cell.db_apart = true;
    }
    if let Err(why) = database::place(db, &plan.server_cpus) {
        eprintln!("bench: {}: {why}", post.name);
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::post::named;

    #[test]
    fn a_post_runs_each_model_once_per_keep_alive_mode_with_its_workers() {
        let c = named("one-process").unwrap();
        let jobs = jobs(c, Link::Loopback, &[]);
        let models: Vec<_> = jobs
            .iter()
            .filter(|(t, _)| matches!(t, Target::Model(_)))
            .map(|(t, s)| (t.name(), s.stack, s.workers, s.keep_alive))
            .collect();
        // Workerman and Swoole BASE are one model: one cell; the post's mode first.
        assert_eq!(
            models,
            [
                ("work-stealing", "raw", 4, false),
                ("prefork-eventloop", "raw", 1, false),
                ("prefork-eventloop", "framework", 1, false),
                ("coroutine-reuseport", "raw", 1, false),
                ("work-stealing", "raw", 4, true),
                ("prefork-eventloop", "raw", 1, true),
                ("prefork-eventloop", "framework", 1, true),
                ("coroutine-reuseport", "raw", 1, true),
            ]
        );
        assert!(jobs
            .iter()
            .all(|(_, s)| s.connections == 200 && s.workload.name == "plaintext"));
        // Post A ran only -k: that first, then the run it did not make.
        let a = jobs_of("swoole-vs-go");
        assert!(a[0].1.keep_alive && !a.last().unwrap().1.keep_alive);
        assert_eq!(requests(named("swoole-vs-go").unwrap(), false), 100_000);
        assert_eq!(requests(named("swoole-vs-go").unwrap(), true), 5_000);
        assert_eq!(requests(named("fpm-openresty").unwrap(), true), 200);
        assert_eq!(repetitions(named("fpm-openresty").unwrap(), 3, false), 20);
        assert_eq!(repetitions(named("swoole-vs-go").unwrap(), 3, false), 3);
        assert_eq!(repetitions(named("cpu-bound").unwrap(), 3, true), 1);
    }

    fn jobs_of(name: &str) -> Vec<(Target, CellSpec<'static>)> {
        jobs(named(name).unwrap(), Link::Loopback, &[])
    }

    #[test]
    fn a_brought_original_joins_the_rows_that_name_it() {
        let c = named("one-process").unwrap();
        let workerman = Peer::parse("workerman@prefork-eventloop=php start.php {port}").unwrap();
        let jobs = jobs(c, Link::Loopback, std::slice::from_ref(&workerman));
        let brought: Vec<_> = jobs
            .iter()
            .filter(|(t, _)| t.name() == "workerman")
            .map(|(_, s)| (s.workers, s.keep_alive))
            .collect();
        assert_eq!(brought, [(1, false), (1, true)]);
        assert_eq!(check_brought(&[c], &[workerman]), Ok(()));
        let nobody = Peer::parse("nobody=php x.php {port}").unwrap();
        let e = check_brought(&[c], &[nobody]).unwrap_err();
        assert!(
            e.contains("stands for no server") && e.contains("swoole-co@coroutine-reuseport"),
            "{e}"
        );
        let astray = Peer::parse("swoole-co@prefork-eventloop=php co.php {port}").unwrap();
        let e = check_brought(&[c], &[astray]).unwrap_err();
        assert!(e.contains("with coroutine-reuseport"), "{e}");
        // Without a post, a --peer is the matrix's business.
        assert_eq!(
            check_brought(&[], &[Peer::parse("nobody=x {port}").unwrap()]),
            Ok(())
        );
    }
}
