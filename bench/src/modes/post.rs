//! `bench --post NAME`: a published comparison replayed (`model::post` holds the five) —
//! the post's own method (`ab -n … -c … [-k]`, its workload, its worker counts) on the
//! model that stands for each server and, where installed, on the built-in peer that is
//! the real thing; then the run the post did not make: the other keep-alive mode, with the
//! server's CPU per request and the client-bound verdict every cell has. The table and the
//! verdicts are `write::post`.

use std::sync::Arc;

use variants::peers::{self, Peer};
use variants::{Variant, Workload};

use crate::measure::cap::CpuCap;
use crate::measure::cell::{CellSpec, Plan, Target};
use crate::measure::client::Amount;
use crate::model::cell::{Cell, Link};
use crate::model::client::Client;
use crate::model::post::Post;
use crate::modes::matrix;

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

/// The post's cells: each row's model (and installed peer) at the row's stack and workers,
/// in both keep-alive modes, the post's first; a cell two rows share (Workerman and Swoole
/// BASE are one model) once.
pub fn jobs(post: &Post, link: Link) -> Vec<(Target, CellSpec<'static>)> {
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
            // The real thing, where this machine has it (scripts/bench --peers installs).
            if let Some(peer) = row.peer.filter(|p| peers::missing(p).is_none()) {
                if let Ok(p) = Peer::builtin(peer) {
                    targets.push((Target::Peer(p), "raw"));
                }
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

/// Replays `post`: its cells run as the matrix runs them, with ab and the post's `-n`,
/// each cell marked with the post's name.
///
/// A post whose machine held its server to a share of a CPU gets that cap (the server
/// and the database together, as in its VM) where this machine allows a cgroup; where it
/// does not, every cell says so.
pub fn run(plan: &Plan, post: &Post, quick: bool, link: Link) -> Vec<Cell> {
    let mut uncapped = None;
    let cap = post.cpu_cap_pct.and_then(|pct| {
        let made = CpuCap::create(pct).and_then(|cap| {
            if let Some(db) = plan.db_pid {
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
    });
    let plan = Plan {
        client: Client::Ab,
        pipeline: None,
        amount: Amount::Requests(requests(post, quick)),
        reps: repetitions(post, plan.reps, quick),
        cap: cap.map(Arc::new),
        ..plan.clone()
    };
    let mut cells = matrix::run(&plan, jobs(post, link));
    for cell in &mut cells {
        cell.post = Some(post.name.to_string());
        cell.notes.extend(uncapped.clone());
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
        let jobs = jobs(c, Link::Loopback);
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
        jobs(named(name).unwrap(), Link::Loopback)
    }
}
