//! The matrix: one cell per combination of server, stack, workload, keep-alive, concurrency,
//! offered rate and link, run one after another with a progress bar.

use indicatif::{ProgressBar, ProgressStyle};
use variants::Workload;

use crate::measure::cell::{run_cell, CellSpec, Plan, Target};
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
    let bar = ProgressBar::new(jobs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} cells · {msg} · ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut cells = Vec::new();
    for (target, spec) in jobs {
        let name = target.name().to_string();
        bar.set_message(format!(
            "{name} {} {} ka={} c={} workers={}{}{}",
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
        ));
        let cell = run_cell(plan, &target, &spec);
        if let Some(why) = cell.failure.as_ref().filter(|w| !w.starts_with("n/a")) {
            bar.println(format!("{name} {}: FAILED: {why}", spec.workload.name));
        }
        cells.push(cell);
        bar.inc(1);
    }
    bar.finish_and_clear();
    cells
}
