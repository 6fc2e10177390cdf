//! `bench --fidelity`: the signature cells (`model::fidelity`) for every model and peer,
//! run as the matrix runs its cells; the table is `write::fidelity`.

use variants::Workload;

use crate::measure::cell::{CellSpec, Plan, Target};
use crate::model::cell::Link;
use crate::model::fidelity;

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
