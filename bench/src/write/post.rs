//! The posts replayed (`bench --post`): for each post, its set-up and ours, the published
//! table beside the replay's — ranks and ratios, since absolute req/s from another machine
//! mean nothing — the run it did not make (the other keep-alive mode, the server's CPU per
//! request, who was the bottleneck), and a verdict with its deciding figure for every
//! conclusion it printed.

use std::fmt::Write as _;

use super::table::opt;
use crate::model::cell::Cell;
use crate::model::post::{self, cell_of, judge, judge_originals, probes_of, Post, Side, POSTS};
use crate::model::slo::{found, Target};

/// How to read a replay.
pub const READING: &str = "Each post as it was run (its client command, workload and worker counts, on the model that stands for each server and on the real server where it is installed here or brought with `--peer NAME@MODEL`), then the run it did not make: the other keep-alive mode, the server's CPU per request, which ranks servers when the client is the bottleneck (`ab` is one thread: on this machine it saturates long before most servers), each server's capacity at a latency target (open loop, oha, with keep-alive whatever the post ran: the highest offered rate it serves within the target — near oha's own limit the figure is the client's), and for the post on a database the same cells with the database on CPUs of its own. Ranks and ratios are compared, not req/s. A conclusion *holds* when the servers' cost per request agrees with it; it is *an artefact of the client* when the post's method reproduces it only because `ab` was saturated; it *depends on keep-alive* when the other mode reverses it; it *depends on where the database runs* when moving the database off the server's CPU reverses it; it is *even* when the costs are within 5 % or the two halves of the repetitions order them differently.";

/// The posts `cells` replay, in the order of [`POSTS`].
pub fn replayed(cells: &[Cell]) -> Vec<&'static Post> {
    POSTS
        .iter()
        .filter(|p| cells.iter().any(|c| c.post.as_deref() == Some(p.name)))
        .collect()
}

/// `bench --post list`: one line a post.
pub fn list() -> String {
    let mut out = String::new();
    for p in POSTS {
        let _ = writeln!(out, "{:<14} {}", p.name, p.title);
    }
    out
}

/// Ranks (1 = fastest) of `values`, `None` kept out.
fn ranks(values: &[Option<f64>]) -> Vec<Option<usize>> {
    values
        .iter()
        .map(|v| v.map(|x| 1 + values.iter().flatten().filter(|&&y| y > x).count()))
        .collect()
}

fn with_rank(v: Option<f64>, rank: Option<usize>) -> String {
    match (v, rank) {
        (Some(v), Some(r)) => format!("{v:.0} ({r})"),
        _ => "–".into(),
    }
}

/// Every replayed post's section, as markdown (nothing when the run replayed none); the
/// capacities are at `slo`.
pub fn sections(cells: &[Cell], slo: &Target) -> String {
    let posts = replayed(cells);
    if posts.is_empty() {
        return String::new();
    }
    let mut out = format!("\n{READING}\n");
    for post in posts {
        out.push_str(&section(post, cells, slo));
    }
    out
}

fn section(post: &Post, cells: &[Cell], slo: &Target) -> String {
    let mut out = String::new();
    let first = cells
        .iter()
        .find(|c| c.post.as_deref() == Some(post.name) && c.rate.is_none());
    let requests = first
        .and_then(|c| c.runs.first())
        .map(|r| r.outcome.requests)
        .unwrap_or(post.ab.requests);
    let repetitions = first.map_or(0, |c| c.runs.len());
    let _ = writeln!(out, "\n### {}\n", post.title);
    let _ = writeln!(
        out,
        "- **The post**: {}; `ab -n {} -c {}{}`.",
        post.machine,
        post.ab.requests,
        post.ab.concurrency,
        match post.keep_alive {
            [true] => " -k",
            [false] => "",
            _ => " [-k]",
        }
    );
    let _ = writeln!(
        out,
        "- **Here**: `ab -n {requests} -c {}`, {repetitions} repetition{} a cell (the CPU figures pool them), the server on CPUs {}, ab on CPUs {}; {}; {}; capacities at {slo} (oha).",
        post.ab.concurrency,
        if repetitions == 1 { "" } else { "s" },
        first.map_or(String::new(), |c| cpus(&c.server_cpus)),
        first.map_or(String::new(), |c| cpus(&c.client_cpus)),
        post.workload_note,
        post.workers_note
    );
    // Why the post's CPU cap could not be reproduced here, if it could not (every cell of
    // the post says so in a note).
    let not_capped = post.cpu_cap_pct.and_then(|_| {
        cells
            .iter()
            .filter(|c| c.post.as_deref() == Some(post.name))
            .flat_map(|c| &c.notes)
            .find(|n| n.starts_with("not capped"))
    });
    if let Some(pct) = post.cpu_cap_pct {
        let _ = match not_capped {
            Some(why) => writeln!(
                out,
                "- **Its machine's cap**: {why} — every figure here had a whole CPU, and the verdicts say so."
            ),
            None => writeln!(
                out,
                "- **Its machine's cap**: reproduced — the server and the database in one cgroup held to {pct} % of one CPU (its verdict `server-bound` is of that share)."
            ),
        };
    }
    if !post.not_rerun.is_empty() {
        let _ = writeln!(out, "- **Not re-run**: {}", post.not_rerun);
    }
    for keep_alive in [false, true] {
        let any = post
            .rows
            .iter()
            .any(|r| cell_of(cells, post.name, r, keep_alive, Side::Model).is_some());
        if !any {
            continue;
        }
        let ran = post.keep_alive.contains(&keep_alive);
        let _ = writeln!(
            out,
            "\n{} — {}:\n",
            if keep_alive {
                "keep-alive (`-k`)"
            } else {
                "no keep-alive"
            },
            if ran {
                "as the post ran it"
            } else {
                "the run the post did not make"
            }
        );
        let _ = writeln!(out, "| server (as the post named it) | workers | model here | published req/s (rank) | replay req/s (rank) | server CPU µs/req (every repetition) | verdict | capacity at {slo} (req/s) | the real server here: req/s · µs/req · capacity |");
        out.push_str("|---|--:|---|--:|--:|--:|---|--:|--:|\n");
        let published: Vec<Option<f64>> =
            post.rows.iter().map(|r| r.published(keep_alive)).collect();
        let replay: Vec<Option<&Cell>> = post
            .rows
            .iter()
            .map(|r| cell_of(cells, post.name, r, keep_alive, Side::Model))
            .collect();
        let rps: Vec<Option<f64>> = replay
            .iter()
            .map(|c| c.and_then(|c| c.median()).map(|r| r.outcome.rps))
            .collect();
        let (pr, rr) = (ranks(&published), ranks(&rps));
        for (i, row) in post.rows.iter().enumerate() {
            let run = replay[i].and_then(|c| c.median());
            let model = match row.model {
                Some(m) if row.stack == "raw" => format!("`{m}`"),
                Some(m) => format!("`{m}` --stack {}", row.stack),
                None => format!("none: {}", row.why),
            };
            let searched = |side| found(slo, probes_of(cells, post, row, side)).to_string();
            let peer_cell = cell_of(cells, post.name, row, keep_alive, Side::Original);
            let peer_cpu = peer_cell.and_then(Cell::pooled_cpu_us);
            let peer = peer_cell
                .and_then(|c| c.median())
                .map_or("–".to_string(), |r| {
                    format!(
                        "{} {:.0} · {} · {}",
                        row.peer.unwrap_or(""),
                        r.outcome.rps,
                        opt(peer_cpu, 1),
                        searched(Side::Original)
                    )
                });
            let failure = replay[i]
                .filter(|c| c.median().is_none())
                .and_then(|c| c.failure.clone());
            let _ = writeln!(
                out,
                "| {} | {} | {model} | {} | {} | {} | {} | {} | {peer} |",
                row.server,
                row.workers,
                with_rank(published[i], pr[i]),
                failure.unwrap_or_else(|| with_rank(rps[i], rr[i])),
                opt(replay[i].and_then(Cell::pooled_cpu_us), 1),
                run.map_or("–", |r| r.verdict.label()),
                if row.model.is_some() && keep_alive {
                    searched(Side::Model)
                } else {
                    "–".into()
                },
            );
        }
    }
    out.push_str(&apart(post, cells));
    out.push_str("\nThe conclusions it printed:\n\n");
    let uncapped = post.cpu_cap_pct.filter(|_| not_capped.is_some());
    for c in post.conclusions {
        let j = judge(post, &c.claim, cells);
        let machine = uncapped.map_or(String::new(), |pct| {
            format!(" — on a whole CPU here, not the {pct} % of one the post's machine gave")
        });
        let originals = judge_originals(post, &c.claim, cells).map_or(String::new(), |o| {
            format!(
                " The real servers here: **{}**: {}.",
                o.finding.label(),
                o.because
            )
        });
        let _ = writeln!(
            out,
            "- *{}* — **{}**: {}{machine}.{originals}",
            c.text,
            j.finding.label(),
            j.because
        );
    }
    out
}

/// The models with the database on CPUs of its own, beside the same cells with it on the
/// server's (empty when the post ran none apart).
fn apart(post: &Post, cells: &[Cell]) -> String {
    let ka = post.keep_alive[0];
    let rows: Vec<_> = post
        .rows
        .iter()
        .filter_map(|r| Some((r, cell_of(cells, post.name, r, ka, Side::DbApart)?)))
        .collect();
    let Some((_, first)) = rows.first() else {
        return String::new();
    };
    let mut out = format!(
        "\nThe database on CPUs of its own ({}), the server alone under the post's cap — beside it on the server's CPU, as the post ran it:\n\n",
        cpus(&first.client_cpus)
    );
    out.push_str("| server (as the post named it) | model here | req/s apart (rank) | req/s on the server's CPU (rank) | server + database CPU µs/req apart | verdict apart |\n|---|---|--:|--:|--:|---|\n");
    let rate = |c: Option<&Cell>| c.and_then(Cell::median).map(|r| r.outcome.rps);
    let apart: Vec<Option<f64>> = rows.iter().map(|(_, c)| rate(Some(c))).collect();
    let shared: Vec<Option<f64>> = rows
        .iter()
        .map(|(r, _)| rate(cell_of(cells, post.name, r, ka, Side::Model)))
        .collect();
    let (ra, rs) = (ranks(&apart), ranks(&shared));
    for (i, (row, cell)) in rows.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} | {} |",
            row.server,
            cell.variant,
            with_rank(apart[i], ra[i]),
            with_rank(shared[i], rs[i]),
            opt(cell.pooled_cpu_us(), 1),
            cell.median().map_or("–", |r| r.verdict.label())
        );
    }
    out
}

fn cpus(list: &[usize]) -> String {
    list.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Every verdict of the replayed posts: (post, conclusion, verdict), for the tests and the
/// results' summary.
pub fn verdicts(cells: &[Cell]) -> Vec<(&'static str, &'static str, post::Judged)> {
    replayed(cells)
        .into_iter()
        .flat_map(|p| {
            p.conclusions
                .iter()
                .map(move |c| (p.name, c.text, judge(p, &c.claim, cells)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_count_the_faster_ones() {
        assert_eq!(
            ranks(&[Some(3.0), None, Some(5.0), Some(1.0)]),
            [Some(2), None, Some(1), Some(3)]
        );
        assert!(list().lines().count() == 5 && list().contains("cpu-bound"));
        assert_eq!(sections(&[], &crate::model::slo::CAPACITY_AT), "");
    }
}
