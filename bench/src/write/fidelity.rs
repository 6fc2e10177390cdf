//! The fidelity table (`--fidelity`): one row per (model, original) pair, each signature's
//! figures side by side with ✓/✗ by the rules of `model::fidelity`, and the cost.

use std::fmt::Write as _;

use variants::peers::{Peer, Workers};

use crate::model::cell::Cell;
use crate::model::fidelity::{
    agree, calibration, hello_cpu, sig, skew, sleep_prediction, Signature, BALANCE_WORKERS,
    TOLERANCE,
};
use crate::model::slo::{found, Capacity, Target};

/// What a fidelity run gave its servers: every figure of its tables is read at these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// The servers' workers (the balance cell's are [`BALANCE_WORKERS`]).
    pub workers: usize,
    pub server_cpus: usize,
    /// The client's connections.
    pub connections: u32,
}

/// `name`'s measured (closed-loop) cell of signature `s`, or why there is none.
fn find<'a>(cells: &'a [Cell], name: &str, s: Signature) -> Result<&'a Cell, String> {
    let cell = cells
        .iter()
        .find(|c| {
            c.variant == name
                && c.rate.is_none()
                && c.workload == s.workload
                && c.keep_alive == s.keep_alive
                && c.workers == s.workers
        })
        .ok_or("not run")?;
    match cell.median() {
        Some(_) => Ok(cell),
        None => Err(cell.failure.clone().unwrap_or_else(|| "no run".into())),
    }
}

/// The median req/s and CPU µs/request of `name`'s cell of signature `s`.
fn figures(cells: &[Cell], name: &str, s: Signature) -> Result<(f64, Option<f64>), String> {
    let cell = find(cells, name, s)?;
    let run = cell.median().expect("find returns measured cells");
    Ok((run.outcome.rps, cell.cpu_us_per_req()))
}

fn mark(ok: bool) -> &'static str {
    if ok {
        "✓"
    } else {
        "✗"
    }
}

/// The cells one row of a table reads: the original's as it ran, the model's as it ran
/// with `work_us` µs of handler work (0: the raw model).
fn pair_cells(cells: &[Cell], model: &str, work_us: u32, peer: &str) -> Vec<Cell> {
    cells
        .iter()
        .filter(|c| {
            (c.variant == peer && c.work_us == 0) || (c.variant == model && c.work_us == work_us)
        })
        .cloned()
        .collect()
}

/// The fidelity table: one row per (model, peer) pair, for a run set up as `setup` says.
pub fn table(cells: &[Cell], pairs: &[(&str, String)], setup: Setup) -> String {
    let mut out = String::new();
    out.push_str("| model | original | /sleep?ms=20 req/s: predicted · model · original | agree | keep-alive ÷ close: model · original | agree | balance, 2 workers, close: model · original | agree | /sum scaling 1 → N workers: predicted · model · original | agree | hello-world CPU µs/req: model · original | cost × |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---:|\n");
    for (model, peer) in pairs {
        let view = pair_cells(cells, model, 0, peer);
        let c = signatures(&view, model, peer, setup);
        let _ = writeln!(out, "| {model} | {peer} | {} |", c.join(" | "));
    }
    out.push_str(&footnote(pairs, setup));
    out
}

/// `--calibrate`'s table: each pair's model given the original's extra hello-world cost
/// as handler work (`--work-us`), every signature again beside the original's, the
/// residual (what the cost alone does not explain: the original's CPU per request − the
/// calibrated model's), and the capacity of both at `slo`.
pub fn calibrated(cells: &[Cell], pairs: &[(&str, String)], setup: Setup, slo: &Target) -> String {
    let workers = setup.workers;
    let mut out = format!("| model + work | original | /sleep?ms=20 req/s: predicted · model · original | agree | keep-alive ÷ close: model · original | agree | balance, 2 workers, close: model · original | agree | /sum scaling 1 → N workers: predicted · model · original | agree | hello-world CPU µs/req: model · original | residual µs/req | capacity at {slo} (req/s): model · original | agree |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---:|---|---|\n");
    for (model, peer) in pairs {
        let work = match calibration(
            hello_cpu(cells, model, 0, workers),
            hello_cpu(cells, peer, 0, workers),
        ) {
            Ok(work) => work,
            Err(why) => {
                let _ = writeln!(
                    out,
                    "| {model} | {peer} | not calibrated: {why} |||||||||||"
                );
                continue;
            }
        };
        let view = pair_cells(cells, model, work, peer);
        let mut c = signatures(&view, model, peer, setup);
        // The cost column becomes the residual: what is left once the cost is equal.
        let residual = hello_cpu(&view, peer, 0, workers)
            .zip(hello_cpu(&view, model, work, workers))
            .map_or("–".into(), |(p, m)| format!("{:+.1}", p - m));
        c[9] = residual;
        let found_of = |name: &str| {
            found(
                slo,
                view.iter()
                    .filter(|c| c.variant == name && c.rate.is_some()),
            )
        };
        let (fm, fp) = (found_of(model), found_of(peer));
        let figures = format!("{fm} · {fp}");
        let ok = match (fm.capacity, fp.capacity) {
            // Two capacities where the client ran out agree only because the client did.
            _ if fm.clients || fp.clients => "not compared: the client's limit",
            (Capacity::Kept(m), Capacity::Kept(p)) => mark(agree(f64::from(m), f64::from(p))),
            _ => "",
        };
        let _ = writeln!(
            out,
            "| {model} +{work} µs | {peer} | {} | {figures} | {ok} |",
            c.join(" | ")
        );
    }
    let _ = write!(
        out,
        "\nmodel + work: the model with `--work-us` = the original's hello-world CPU µs per request − the model's (keep-alive, {workers} worker(s)), so that both cost the same; every signature is the calibrated model's. residual: the original's CPU per request − the calibrated model's (what the cost alone does not explain). capacity: the highest offered rate (open loop, oha) whose p{} stays within {} ms, no errors, the rate reached.\n",
        slo.percentile, slo.limit_ms
    );
    out
}

/// One pair's signature columns (figures, ✓/✗ in turn; the last two the hello-world CPU
/// and the cost ×), read from `cells` — the pair's own.
fn signatures(cells: &[Cell], model: &str, peer: &str, setup: Setup) -> Vec<String> {
    let Setup {
        workers,
        server_cpus,
        connections,
    } = setup;
    let short = |e: &str| {
        let e = e.split_whitespace().collect::<Vec<_>>().join(" ");
        if e.starts_with("n/a") {
            "n/a".to_string()
        } else {
            format!(
                "failed: {}",
                e.chars().take(60).collect::<String>().replace('|', "/")
            )
        }
    };
    // Both sides' figure of one signature, or the first side's reason for having none.
    let both = |model: &str, peer: &str, get: &dyn Fn(&str) -> Result<f64, String>| match (
        get(model),
        get(peer),
    ) {
        (Ok(m), Ok(p)) => Ok((m, p)),
        (Err(e), _) => Err(format!("model {}", short(&e))),
        (_, Err(e)) => Err(short(&e)),
    };
    let shown = |r: Result<(String, bool), String>| match r {
        Ok((figures, ok)) => (figures, mark(ok).to_string()),
        Err(e) => (e, String::new()),
    };
    let here = sig("plaintext", true, workers);
    let sleep = shown(
        both(model, peer, &|n| {
            figures(cells, n, sig("sleep", true, workers)).map(|f| f.0)
        })
        .map(|(m, p)| {
            let predicted = sleep_prediction(model, workers, connections);
            (format!("{predicted:.0} · {m:.0} · {p:.0}"), agree(m, p))
        }),
    );
    let ka = shown(
        both(model, peer, &|n| {
            let (on, _) = figures(cells, n, here)?;
            let (off, _) = figures(cells, n, sig("plaintext", false, workers))?;
            Ok(if off > 0.0 { on / off } else { 0.0 })
        })
        .map(|(m, p)| (format!("{m:.2} · {p:.2}"), agree(m, p))),
    );
    let balance = shown(
        both(model, peer, &|n| {
            let cell = find(cells, n, sig("plaintext", false, BALANCE_WORKERS))?;
            if let Ok(Workers::Unseen(why)) = Peer::builtin(n).map(|p| p.workers_are) {
                return Err(format!("n/a ({why})"));
            }
            cell.worker_balance()
                .ok_or_else(|| "failed: no per-worker figures".to_string())
        })
        .map(|(m, p)| {
            let (sm, sp) = (skew(m, BALANCE_WORKERS), skew(p, BALANCE_WORKERS));
            (format!("{m:.2} · {p:.2}"), (sm - sp).abs() <= TOLERANCE)
        }),
    );
    let scaling = if server_cpus < 2 {
        (
            format!("n/a (needs ≥ 2 server CPUs; this run has {server_cpus})"),
            String::new(),
        )
    } else {
        shown(
            both(model, peer, &|n| {
                let (one, _) = figures(cells, n, sig("sum", true, 1))?;
                let (all, _) = figures(cells, n, sig("sum", true, server_cpus))?;
                Ok(if one > 0.0 { all / one } else { 0.0 })
            })
            .map(|(m, p)| (format!("{server_cpus} · {m:.2} · {p:.2}"), agree(m, p))),
        )
    };
    let cost = match (figures(cells, model, here), figures(cells, peer, here)) {
        (Ok((_, Some(m))), Ok((_, Some(p)))) if m > 0.0 => {
            (format!("{m:.1} · {p:.1}"), format!("{:.1}", p / m))
        }
        (Err(e), _) | (_, Err(e)) => (short(&e), String::new()),
        _ => ("–".into(), String::new()),
    };
    vec![
        sleep.0, sleep.1, ka.0, ka.1, balance.0, balance.1, scaling.0, scaling.1, cost.0, cost.1,
    ]
}

/// What the table's figures are, and the pairs' workers no balance can be read from.
fn footnote(pairs: &[(&str, String)], setup: Setup) -> String {
    let Setup {
        workers,
        server_cpus,
        connections,
    } = setup;
    let mut out = String::new();
    let mut unseen: Vec<String> = Vec::new();
    for (_, peer) in pairs {
        if let Ok(Workers::Unseen(why)) = Peer::builtin(peer).map(|p| p.workers_are) {
            let line = format!("balance n/a for {peer}: {why}. ");
            if !unseen.contains(&line) {
                unseen.push(line);
            }
        }
    }
    let _ = write!(
        out,
        "\n{}agree: the original's figure is within ±{tol:.0} % of the model's (balance: skews within {skew:.2}). predicted: workers ÷ 20 ms for blocking workers (prefork-blocking, reactor-workers/sync), connections ÷ 20 ms for everyone else ({workers} worker(s), c={connections}). balance: the busiest worker's requests (a model's --stats) or CPU time (a peer's, from /proc) ÷ the mean over {BALANCE_WORKERS} workers, a connection per request (1.00 even, {BALANCE_WORKERS}.00 one worker took all). scaling: /sum req/s with {server_cpus} worker(s) ÷ with 1, on {server_cpus} server CPU(s). cost ×: the original's CPU per request ÷ the model's — the price of the language and implementation with the architecture held equal.\n",
        unseen.concat(),
        tol = TOLERANCE * 100.0,
        skew = TOLERANCE,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cell::Run;
    use crate::model::client::Client;
    use crate::model::fidelity::cells;

    /// Two workers on two server CPUs at 64 connections.
    const SETUP: Setup = Setup {
        workers: 2,
        server_cpus: 2,
        connections: 64,
    };

    /// A measured cell of signature `s`: `rps`, 5 µs a request, its workers' CPU.
    fn measured(name: &str, s: Signature, rps: f64, worker_cpu_secs: &[f64]) -> Cell {
        Cell {
            model: String::new(),
            workers: s.workers,
            server_cpus: vec![0, 1],
            client_cpus: vec![2],
            workload: s.workload.into(),
            keep_alive: s.keep_alive,
            client: Client::Ab,
            worker_cpu_secs: worker_cpu_secs.to_vec(),
            ..Cell::sample(name, vec![Run::sample(rps, 5.0)])
        }
    }

    /// The cells of one server on 2 CPUs: its balance (busiest, other) and /sum speed-up.
    fn server(name: &str, balance: [f64; 2], speedup: f64) -> Vec<Cell> {
        cells(2, 2)
            .into_iter()
            .map(|s| match (s.workload, s.keep_alive, s.workers) {
                ("plaintext", false, 2) => measured(name, s, 10_000.0, &balance),
                ("sum", _, 2) => measured(name, s, 1_000.0 * speedup, &[]),
                ("sum", _, _) => measured(name, s, 1_000.0, &[]),
                ("sleep", _, _) => measured(name, s, 3_000.0, &[]),
                _ => measured(name, s, 30_000.0, &[]),
            })
            .collect()
    }

    #[test]
    fn the_table_compares_balance_and_scaling_per_pair() {
        let mut all = server("prefork-eventloop", [3.0, 1.0], 1.9);
        all.extend(server("nginx", [2.9, 1.1], 1.95));
        all.extend(server("node-cluster", [2.0, 2.0], 1.2));
        let pairs = [
            ("prefork-eventloop", "nginx".to_string()),
            ("prefork-eventloop", "node-cluster".to_string()),
        ];
        let text = table(&all, &pairs, SETUP);
        let row = |peer: &str| -> Vec<String> {
            let line = text
                .lines()
                .find(|l| l.contains(&format!("| {peer} |")))
                .unwrap();
            line.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        };
        let nginx = row("nginx");
        assert_eq!(nginx[6], "1.50 · 1.45");
        assert_eq!(nginx[7], "✓");
        assert_eq!(nginx[8], "2 · 1.90 · 1.95");
        assert_eq!(nginx[9], "✓");
        let node = row("node-cluster");
        assert_eq!(node[6], "1.50 · 1.00", "skew 0.5 against 0: they disagree");
        assert_eq!(node[7], "✗");
        assert_eq!(node[9], "✗", "1.2× against 1.9×");
    }

    #[test]
    fn a_peer_whose_workers_cannot_be_told_apart_has_no_balance_figure() {
        let mut all = server("prefork-blocking", [1.0, 1.0], 2.0);
        all.extend(server("uwsgi", [3.9, 1.3], 2.0));
        let text = table(&all, &[("prefork-blocking", "uwsgi".into())], SETUP);
        let line = text.lines().find(|l| l.contains("| uwsgi |")).unwrap();
        assert!(line.contains("| n/a |  |"), "{line}");
        assert!(
            text.contains("balance n/a for uwsgi: its HTTP router"),
            "{text}"
        );
    }

    #[test]
    fn scaling_on_one_server_cpu_says_why_it_is_not_measured() {
        let all: Vec<Cell> = ["prefork-eventloop", "nginx"]
            .iter()
            .flat_map(|n| {
                cells(1, 1)
                    .into_iter()
                    .map(move |s| measured(n, s, 1.0, &[1.0, 1.0]))
            })
            .collect();
        let text = table(
            &all,
            &[("prefork-eventloop", "nginx".into())],
            Setup {
                workers: 1,
                server_cpus: 1,
                connections: 64,
            },
        );
        assert!(text.contains("n/a (needs ≥ 2 server CPUs; this run has 1)"));
        assert!(text.contains("1.00 · 1.00 | ✓"), "{text}");
    }

    /// The model is given the original's extra cost, its row's figures are the calibrated
    /// cells', the residual is what is left, and both capacities stand side by side; a
    /// cheaper original cannot be calibrated, and says so.
    #[test]
    fn the_calibrated_table_gives_the_model_the_originals_cost() {
        let at = |cells: Vec<Cell>, cpu: f64, work_us: u32| -> Vec<Cell> {
            cells
                .into_iter()
                .map(|mut c| {
                    for r in &mut c.runs {
                        r.server_cpu_us_per_req = Some(cpu);
                    }
                    Cell { work_us, ..c }
                })
                .collect()
        };
        let probe = |name: &str, work_us: u32, rate: u32, p99: f64| {
            let mut run = Run::sample(f64::from(rate), 5.0);
            run.outcome.p99_ms = Some(p99);
            run.verdict = crate::model::cell::Verdict::ServerBound;
            Cell {
                rate: Some(rate),
                work_us,
                ..Cell::sample(name, vec![run])
            }
        };
        let mut all = at(server("prefork-eventloop", [3.0, 1.0], 1.9), 5.0, 0);
        all.extend(at(server("nginx", [2.9, 1.1], 1.95), 30.0, 0));
        all.extend(at(server("cheap", [1.0, 1.0], 2.0), 2.0, 0));
        all.extend(at(server("prefork-eventloop", [3.0, 1.0], 1.9), 29.0, 25));
        all.extend([
            probe("prefork-eventloop", 25, 20_000, 3.0),
            probe("prefork-eventloop", 25, 40_000, 30.0),
            probe("prefork-eventloop", 0, 90_000, 3.0),
            probe("nginx", 0, 24_000, 4.0),
        ]);
        let pairs = [
            ("prefork-eventloop", "nginx".to_string()),
            ("prefork-eventloop", "cheap".to_string()),
        ];
        let text = calibrated(&all, &pairs, SETUP, &"p99=10ms".parse().unwrap());
        let line = text
            .lines()
            .find(|l| l.starts_with("| prefork-eventloop +25 µs | nginx |"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(
            line.ends_with("| 29.0 · 30.0 | +1.0 | 20000 · 24000 | ✓ |"),
            "{line}"
        );
        assert!(
            text.contains("| prefork-eventloop | cheap | not calibrated: the original costs less"),
            "{text}"
        );
        // The raw table reads the raw model, not the calibrated one.
        let raw = table(&all, &pairs[..1], SETUP);
        assert!(raw.contains("| 5.0 · 30.0 | 6.0 |"), "{raw}");
        // nginx's probe above its capacity measured the client: its capacity is a lower
        // bound, and two capacities are not compared when one is the client's.
        let mut above = probe("nginx", 0, 48_000, 40.0);
        above.runs[0].verdict = crate::model::cell::Verdict::ClientBound;
        all.push(above);
        let text = calibrated(&all, &pairs[..1], SETUP, &"p99=10ms".parse().unwrap());
        assert!(
            text.contains("| 20000 · ≥ 24000 | not compared: the client's limit |"),
            "{text}"
        );
    }
}
