//! `--profile`'s output: each profiled cell's flame graph (inferno, scaled to nanoseconds
//! per request so that graphs compare cost per request, not run length), a differential one
//! between two variants, the folded stacks, and the "where the CPU goes" table.

use std::fmt::Write as _;
use std::path::Path;

use crate::model::cell::Cell;
use crate::model::profile::{Profile, COMPONENTS, HZ};

/// The folded stacks scaled to nanoseconds per request (what the graphs draw).
fn per_request(profile: &Profile) -> Vec<String> {
    let ns = 1e9 / f64::from(HZ) / profile.requests.max(1) as f64;
    profile
        .folded
        .iter()
        .map(|(stack, n)| format!("{stack} {}", (*n as f64 * ns).round() as u64))
        .filter(|line| !line.ends_with(" 0"))
        .collect()
}

fn graph_options(title: String, subtitle: String) -> inferno::flamegraph::Options<'static> {
    let mut options = inferno::flamegraph::Options::default();
    options.title = title;
    options.subtitle = Some(subtitle);
    options.count_name = "ns/request".into();
    // Frames under 0.2 % of the width are left out: unreadable anyway, and they are what
    // makes a flame graph file large.
    options.min_width = 0.2;
    options.hash = true;
    options.deterministic = true;
    options
}

/// Draws `profile`'s flame graph into `path` (an interactive SVG).
pub fn flamegraph(profile: &Profile, title: &str, path: &Path) -> Result<(), String> {
    let lines = per_request(profile);
    let mut options = graph_options(
        title.to_string(),
        format!(
            "{} samples at {HZ} Hz over {} requests: {:.2} µs of server CPU per request; width = ns per request",
            profile.samples, profile.requests, profile.us_per_req
        ),
    );
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    inferno::flamegraph::from_lines(
        &mut options,
        lines.iter().map(String::as_str),
        std::io::BufWriter::new(file),
    )
    .map_err(|e| format!("drawing {}: {e}", path.display()))
}

/// Draws the differential flame graph from `before` to `after` into `path`: the shape is
/// `after`'s, red where `after` spends more ns per request than `before`, blue where less.
pub fn differential(
    before: &Profile,
    after: &Profile,
    title: &str,
    path: &Path,
) -> Result<(), String> {
    let (a, b) = (
        per_request(before).join("\n"),
        per_request(after).join("\n"),
    );
    let mut diff = Vec::new();
    // Both are already per request: normalising would hide the very difference drawn.
    let options = inferno::differential::Options {
        normalize: false,
        ..Default::default()
    };
    inferno::differential::from_readers(options, a.as_bytes(), b.as_bytes(), &mut diff)
        .map_err(|e| format!("differential: {e}"))?;
    let mut options = graph_options(
        title.to_string(),
        format!(
            "{:.2} → {:.2} µs of server CPU per request; red: more ns per request, blue: fewer",
            before.us_per_req, after.us_per_req
        ),
    );
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&diff);
    inferno::flamegraph::from_lines(&mut options, text.lines(), std::io::BufWriter::new(file))
        .map_err(|e| format!("drawing {}: {e}", path.display()))
}

/// The "where the CPU goes" table: one row per profiled cell, µs per request by
/// component. Empty when no cell was profiled.
pub fn table(rows: &[(String, &Profile)]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nwhere the CPU goes (--profile: perf cpu-clock samples of the server's processes, µs per request):\n\n| cell | sampled µs/req |",
    );
    for c in COMPONENTS {
        let _ = write!(out, " {c} |");
    }
    out.push_str(
        " kernel share | kernel by system call | speed while sampled | flame graph |\n|---|---:|",
    );
    out.push_str(&"---:|".repeat(COMPONENTS.len() + 1));
    out.push_str("---|---:|---|\n");
    for (cell, p) in rows {
        let _ = write!(out, "| {cell} | {:.2} |", p.us_per_req);
        for (_, us) in &p.components {
            let _ = write!(out, " {us:.2} |");
        }
        let kernel = p.components.first().map_or(0.0, |(_, us)| *us);
        let calls: Vec<String> = p
            .kernel_by_syscall
            .iter()
            .take(4)
            .map(|(name, us)| format!("{name} {us:.2}"))
            .collect();
        let _ = writeln!(
            out,
            " {:.0} % | {} | {} | {} |",
            100.0 * kernel / p.us_per_req.max(f64::MIN_POSITIVE),
            calls.join(" · "),
            p.speed_vs_median
                .map_or("–".into(), |s| format!("{:.0} %", 100.0 * s)),
            p.flamegraph
        );
    }
    // After a blank line: a markdown table would take the line for one of its rows.
    out.push_str(
        "\ncodec & handler: archzoo's shared codec and handler (or hyper); runtime & loop: tokio, may, glommio, mio and each server's own loop; an inlined frame counts as the function it was inlined into. kernel by system call: the four largest, µs per request. speed while sampled: the profiled repetition's req/s ÷ the measured median — what DWARF unwinding cost.\n",
    );
    out
}

/// `--profile`'s files in `dir/flame/`: each profiled cell's flame graph and folded
/// stacks (at the names its profile carries), and with `diff` = (A, B) a differential
/// flame graph from A to B for every cell the two share. Returns the files written.
pub fn write_profiles(
    dir: &Path,
    cells: &[Cell],
    diff: Option<&(String, String)>,
) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir.join("flame")).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut written = Vec::new();
    for cell in cells {
        let Some(p) = &cell.profile else { continue };
        let title = format!(
            "{} — {} {}, keep-alive {}, c={}",
            cell.variant,
            cell.stack,
            cell.workload,
            cell.keep_alive_label(),
            cell.connections_label()
        );
        flamegraph(p, &title, &dir.join(&p.flamegraph))?;
        let folded: String = p.folded.iter().map(|(s, n)| format!("{s} {n}\n")).collect();
        std::fs::write(dir.join(&p.folded_file), folded).map_err(|e| e.to_string())?;
        written.push(p.flamegraph.clone());
    }
    let Some((a, b)) = diff else {
        return Ok(written);
    };
    let graphs = written.len();
    for before in cells.iter().filter(|c| &c.variant == a) {
        let Some(after) = cells.iter().find(|c| &c.variant == b && before.beside(c)) else {
            continue;
        };
        let (Some(pa), Some(pb)) = (&before.profile, &after.profile) else {
            continue;
        };
        let rest = before.key();
        let rest = rest.strip_prefix(a.as_str()).unwrap_or(&rest);
        let file = format!("flame/diff-{a}-vs-{b}{rest}.svg");
        let title = format!(
            "{a} → {b} — {} {}, keep-alive {}, c={}",
            before.stack,
            before.workload,
            before.keep_alive_label(),
            before.connections_label()
        );
        differential(pa, pb, &title, &dir.join(&file))?;
        written.push(file);
    }
    if written.len() == graphs {
        return Err(format!(
            "--diff {a},{b}: the two share no profiled cell (same workload, keep-alive, concurrency, stack, workers)"
        ));
    }
    Ok(written)
}

/// The profiled cells, each with the label the profile table gives it.
pub fn profiled(cells: &[Cell]) -> Vec<(String, &Profile)> {
    cells
        .iter()
        .filter_map(|c| {
            let p = c.profile.as_ref()?;
            Some((
                format!(
                    "{} {} ka={} c={}",
                    c.variant,
                    c.workload,
                    c.keep_alive_label(),
                    c.connections_label()
                ),
                p,
            ))
        })
        .collect()
}
