//! The matrix: one cell per combination of server, stack, workload, keep-alive, concurrency,
//! offered rate and link, run one after another with a progress bar — or, with
//! `--fresh-server`, in rounds: every cell's first start, then every cell's second, so that
//! a machine that drifts over the minutes a run takes (a neighbour, a clock) sways every
//! cell alike and their ratios hold.

use indicatif::{ProgressBar, ProgressStyle};
use variants::Workload;

use crate::measure::cell::{self, run_cell, CellSpec, Plan, Target};
use crate::model::cell::{Cell, Link};

/// What the matrix varies, each axis a list of the values it takes.
pub struct Axes<'a> {
    pub stacks: &'a [&'static str],
    pub workloads: &'a [Workload],
    pub keep_alive: &'a [bool],
    pub connections: &'a [u32],
    /// Offered rates (the open loop); `[None]`: the closed loop.
    pub rates: &'a [Option<u32>],
    /// What the client's packets cross (`--link`), innermost: the same cell over each
    /// link runs back to back, under the same noise.
    pub links: &'a [Link],
}

/// Every cell of the matrix, target by target. A peer runs the first stack only: it is
/// what it is, and the framework stack is an archzoo layer.
pub fn jobs(targets: &[Target], workers: usize, axes: &Axes) -> Vec<(Target, CellSpec<'static>)> {
    let mut jobs = Vec::new();
    for target in targets {
        let stacks = match target {
            Target::Model(_) => axes.stacks,
            _ => &axes.stacks[..1],
        };
        for &stack in stacks {
            for workload in axes.workloads {
                for &keep_alive in axes.keep_alive {
                    for &connections in axes.connections {
                        for &rate in axes.rates {
                            for &link in axes.links {
                                jobs.push((
                                    target.clone(),
                                    CellSpec {
                                        stack,
                                        workload: *workload,
                                        keep_alive,
                                        connections,
                                        workers,
                                        rate,
                                        link,
                                    },
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    jobs
}

/// Runs `jobs` in order, a progress bar on the terminal and a line for each cell that
/// failed; the cells, in the same order.
pub fn run(plan: &Plan, jobs: Vec<(Target, CellSpec)>) -> Vec<Cell> {
    let rounds = if plan.fresh_server {
        plan.reps.max(1)
    } else {
        1
    };
    let bar = ProgressBar::new(jobs.len() as u64 * u64::from(rounds));
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} · ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let unit = if rounds > 1 { "starts" } else { "cells" };
    let cells = if rounds > 1 {
        in_rounds(plan, &jobs, rounds, &bar, unit)
    } else {
        jobs.iter()
            .map(|(target, spec)| {
                bar.set_message(format!("{unit} · {}", label(target, spec)));
                let cell = run_cell(plan, target, spec);
                report_failure(&bar, &cell);
                bar.inc(1);
                cell
            })
            .collect()
    };
    bar.finish_and_clear();
    cells
}

/// `--fresh-server`: round after round, one start of every cell's server (one measured
/// repetition each, the instrumented ones in the last round). A cell that failed says so
/// at once and sits out the rounds after, as one that cannot run sits out all; a cell of a
/// server not ours to start (`--url`) runs whole in the first.
fn in_rounds(
    plan: &Plan,
    jobs: &[(Target, CellSpec)],
    rounds: u32,
    bar: &ProgressBar,
    unit: &str,
) -> Vec<Cell> {
    let mut cells: Vec<Cell> = jobs
        .iter()
        .map(|(target, spec)| cell::begin(plan, target, spec))
        .collect();
    for round in 1..=rounds {
        for ((target, spec), cell) in jobs.iter().zip(cells.iter_mut()) {
            let whole = !cell.fresh_server;
            if cell.failure.is_none() && (round == 1 || !whole) {
                bar.set_message(format!(
                    "{unit} · round {round}/{rounds} · {}",
                    label(target, spec)
                ));
                if !cell::one_start(plan, target, spec, cell, round == rounds || whole) {
                    report_failure(bar, cell);
                }
            }
            bar.inc(1);
        }
    }
    cells.iter_mut().for_each(cell::finish);
    cells
}

/// The cell the progress bar names.
fn label(target: &Target, spec: &CellSpec) -> String {
    format!(
        "{} {} {} ka={} c={} workers={}{}{}",
        target.name(),
        spec.stack,
        spec.workload.name,
        if spec.keep_alive { "on" } else { "off" },
        spec.connections,
        spec.workers,
        spec.rate.map_or(String::new(), |r| format!(" rate={r}")),
        if spec.link == Link::Loopback {
            String::new()
        } else {
            format!(" over {}", spec.link.label())
        },
    )
}

/// A line for a cell that failed (not one that could not run: `n/a`).
fn report_failure(bar: &ProgressBar, cell: &Cell) {
    if let Some(why) = cell.failure.as_ref().filter(|w| !w.starts_with("n/a")) {
        bar.println(format!("{} {}: FAILED: {why}", cell.variant, cell.workload));
    }
}
