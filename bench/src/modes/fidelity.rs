//! `bench --fidelity`: the signature cells (`model::fidelity`) for every model and peer,
//! run as the matrix runs its cells; with `--calibrate`, each pair's model again with the
//! original's extra cost as handler work, and the capacity of both at a latency target.
//! The tables are `write::fidelity`.

use variants::{Variant, Workload};

use crate::measure::cell::{CellSpec, Plan, Target};
use crate::model::cell::{Cell, Link};
use crate::model::fidelity::{self, calibration, hello_cpu};
use crate::model::slo::{self, MAX_PROBES};
use crate::modes::{matrix, slo as search};

/// Each target's signature cells, with `stack`, `connections` and `link`, and the workers
/// each signature asks for.
pub fn jobs(
    targets: &[Target],
    plan: &Plan,
    stack: &'static str,
    connections: u32,
    link: Link,
) -> Vec<(Target, CellSpec<'static>)> {
    let signatures = fidelity::cells(plan.workers, plan.server_cpus.len());
    let mut jobs = Vec::new();
    for target in targets {
        for s in &signatures {
            let workload = Workload::named(s.workload);
            jobs.push((
                target.clone(),
                CellSpec {
                    stack,
                    workload,
                    keep_alive: s.keep_alive,
                    connections,
                    workers: s.workers,
                    rate: None,
                    link,
                },
            ));
        }
    }
    jobs
}

/// The cells of a calibration: `stack`, `connections` and `link` as the raw run's.
pub struct Calibrate<'a> {
    pub stack: &'static str,
    pub connections: u32,
    pub link: Link,
    /// The capacities' latency target (`--slo`, else p99 ≤ 10 ms).
    pub slo: &'a slo::Target,
    /// Short probes (`--quick`).
    pub quick: bool,
}

/// `--calibrate`: for each (model, original) pair whose hello-world costs `raw` measured,
/// the model's signatures again with `--work-us` = the original's CPU µs per request − the
/// model's (a model two pairs give the same work runs once); then the capacity at the
/// target of every original and every calibrated model (open loop, oha, from the rate the
/// closed loop reached). A pair that cannot be calibrated is left out here; its row in the
/// calibrated table says why.
pub fn calibrate(
    plan: &Plan,
    pairs: &[(&'static str, String)],
    peers: &[Target],
    raw: &[Cell],
    how: &Calibrate,
) -> Vec<Cell> {
    let mut cells = Vec::new();
    let mut done: Vec<(&str, u32)> = Vec::new();
    let mut searched: Vec<String> = Vec::new();
    for (model, peer) in pairs {
        let work = calibration(
            hello_cpu(raw, model, 0, plan.workers),
            hello_cpu(raw, peer, 0, plan.workers),
        );
        let Ok(work) = work else {
            continue;
        };
        let target = Target::Model(Variant::named(model));
        if !done.contains(&(model, work)) {
            done.push((model, work));
            let calibrated = Plan {
                work_us: work,
                ..plan.clone()
            };
            let jobs = jobs(
                std::slice::from_ref(&target),
                plan,
                how.stack,
                how.connections,
                how.link,
            );
            let measured = matrix::run(&calibrated, jobs);
            cells.extend(capacity(&calibrated, &target, &measured, how));
            cells.extend(measured);
        }
        if !searched.contains(peer) {
            searched.push(peer.clone());
            if let Some(original) = peers.iter().find(|t| t.name() == peer) {
                cells.extend(capacity(plan, original, raw, how));
            }
        }
    }
    cells
}

/// `target`'s capacity at the target on hello world with keep-alive, searched from the
/// rate its closed-loop cell in `closed` reached.
fn capacity(plan: &Plan, target: &Target, closed: &[Cell], how: &Calibrate) -> Vec<Cell> {
    let s = fidelity::here(plan.workers);
    let spec = CellSpec {
        stack: how.stack,
        workload: Workload::named(s.workload),
        keep_alive: s.keep_alive,
        connections: how.connections,
        workers: s.workers,
        rate: None,
        link: how.link,
    };
    let most = if how.quick { 4 } else { MAX_PROBES };
    search::beside_closed_loop(plan, target, &spec, how.slo, closed, how.quick, most)
}
