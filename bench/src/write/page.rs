//! `report.html`: one self-contained page per run — the set-up, the matrix table (sortable,
//! each verdict in colour and in words), the charts with how to read them, and whatever
//! else the run produced (latency curves and capacity, flame graphs, the fidelity table;
//! the idle-connection or slow-client table of a run that measured those instead).
//!
//! Written at the end of every run beside results.json, and again from a results.json by
//! `bench --report DIR`, so that an old run gets the current page. The page is an askama
//! template (`templates/report.html`, checked when the crate compiles); the tables the
//! harness prints as markdown (fidelity, capacity, profile, system calls by name) go
//! through pulldown-cmark rather than being printed twice. Nothing is fetched from the
//! network: the charts are inline SVG, the style and the sorting script inline.

use std::path::Path;

use askama::Template;

use super::chart::{self, Colours};
use super::table::{self, Entry, Figures};
use super::{attack, fidelity, idle, link, post, profile, slo, soak};
use crate::model::attack::Attack;
use crate::model::cell::{first_seen, Cell, Verdict};
use crate::model::Results;

/// Markdown (a paragraph, a table) as HTML.
fn html(markdown: &str) -> String {
    use pulldown_cmark::{Options, Parser};
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, Parser::new_ext(markdown, Options::ENABLE_TABLES));
    out
}

/// A column's name as a key of the page's `#sort=KEY-asc` address.
fn slug(name: &str) -> String {
    let mut out = String::new();
    for ch in name.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

pub struct ColumnView {
    pub name: &'static str,
    pub key: String,
    pub numeric: bool,
}

pub struct EntryView {
    pub text: String,
    /// The number the column sorts by; empty for text (sorted as text).
    pub sort: String,
    pub numeric: bool,
    /// A verdict's class (`verdict server-bound`), else empty.
    pub class: String,
}

pub struct RowView {
    pub class: String,
    pub entries: Vec<EntryView>,
    /// Why a row has no figures, and how many columns it spans.
    pub missing: Option<(String, usize)>,
    pub flame: Option<String>,
}

pub struct ChartView {
    pub id: String,
    pub title: String,
    /// The SVG, inline (it comes from our own template or plotters, not from a run).
    pub svg: String,
    pub file: String,
    pub reading: String,
}

pub struct Section {
    pub id: &'static str,
    pub title: &'static str,
    pub html: String,
}

pub struct CommandView {
    pub cell: String,
    pub server: String,
    pub client: String,
}

#[derive(Template)]
#[template(path = "report.html")]
pub struct Page {
    pub title: String,
    pub summary: String,
    /// The set-up in one line, above the results; all of it is at the end.
    pub headline: String,
    pub setup: Vec<(String, String)>,
    pub versions: Vec<(String, String)>,
    pub reproduce: String,
    pub commands: Vec<CommandView>,
    pub columns: Vec<ColumnView>,
    pub rows: Vec<RowView>,
    pub flames: bool,
    pub legend: String,
    pub charts: Vec<ChartView>,
    pub latency: Vec<ChartView>,
    pub sections: Vec<Section>,
    /// The run measured the matrix (cells): its table and charts are shown.
    pub matrix: bool,
    /// The set-up columns every cell shares, in one line (`stack raw · workers 1`): they
    /// are not repeated on every row.
    pub every_cell: String,
    /// The CSV files beside the page, as found there.
    pub csv_files: Vec<&'static str>,
}

/// Writes the SVG charts and report.html of `results` into `dir` (which holds its
/// results.json, and the flame graphs of a `--profile` run). Returns the page's path.
pub fn write(dir: &Path, results: &Results) -> Result<std::path::PathBuf, String> {
    let cells = &results.cells;
    let meta = &results.meta;
    let colours = Colours::of(cells);
    // Each chart is written beside the page and drawn in it.
    let write_svg = |file: &str, svg: &str| {
        std::fs::write(dir.join(file), svg)
            .map_err(|e| format!("cannot write {}: {e}", dir.join(file).display()))
    };
    let mut charts = Vec::new();
    for (metric, svg) in chart::bar_charts(cells, &colours)? {
        let file = format!("{}.svg", metric.id);
        write_svg(&file, &svg)?;
        charts.push(ChartView {
            id: metric.id.to_string(),
            title: metric.title.to_string(),
            svg,
            file,
            reading: html(metric.reading),
        });
    }
    // An --slo run's target, drawn across its curves when it is a p99 one.
    let target =
        |v: &serde_json::Value| serde_json::from_value::<crate::model::slo::Target>(v.clone()).ok();
    let slo = target(&meta["slo"]);
    // The target of the capacities a replay (`--post`) or a calibration (`--calibrate`)
    // searched beside its closed-loop cells: its own key, as such a run is no --slo run.
    let capacity_at = target(&meta["capacity_at"]).unwrap_or(crate::model::slo::CAPACITY_AT);
    let slo_ms = slo.filter(|t| t.percentile == 99.0).map(|t| t.limit_ms);
    let mut latency = Vec::new();
    for (title, file, svg) in chart::latency_charts(cells, &colours, slo_ms)? {
        write_svg(&file, &svg)?;
        latency.push(ChartView {
            id: file.trim_end_matches(".svg").to_string(),
            title,
            svg,
            file,
            reading: html(chart::LATENCY_READING),
        });
    }

    let table = table::table(cells);
    let flames = cells.iter().any(|c| c.profile.is_some());
    // A set-up column every row shares (one stack, one worker count, one concurrency …)
    // leaves the table for a line above it, so that the figures fit a window's width.
    let shared: Vec<usize> = (2..table.head)
        .filter(|&i| {
            table.rows.len() > 1
                && table
                    .rows
                    .iter()
                    .all(|r| r.head[i].text == table.rows[0].head[i].text)
        })
        .collect();
    let every_cell = shared
        .iter()
        .map(|&i| format!("{} {}", table.columns[i].name, table.rows[0].head[i].text))
        .collect::<Vec<_>>()
        .join(" · ");
    // A figure no measured row has (imbalance with one worker) is no column either.
    let measured: Vec<&Vec<Entry>> = table
        .rows
        .iter()
        .filter_map(|r| match &r.figures {
            Figures::Measured(figures) => Some(figures),
            _ => None,
        })
        .collect();
    let empty: Vec<usize> = (table.head..table.columns.len())
        .filter(|&i| {
            !measured.is_empty()
                && measured.iter().all(|f| {
                    let e = &f[i - table.head];
                    e.sort.is_none() && e.text == "–"
                })
        })
        .collect();
    let shown = |i: &usize| !shared.contains(i) && !empty.contains(i);
    let figure_columns = (table.head..table.columns.len())
        .filter(|i| shown(i))
        .count();
    let columns: Vec<ColumnView> = table
        .columns
        .iter()
        .enumerate()
        .filter(|(i, _)| shown(i))
        .map(|(_, c)| ColumnView {
            name: c.name,
            key: slug(c.name),
            numeric: c.numeric,
        })
        .collect();
    let entry = |e: &Entry, numeric: bool, class: &str| EntryView {
        text: e.text.clone(),
        sort: e.sort.map_or(String::new(), |v| v.to_string()),
        numeric,
        class: class.to_string(),
    };
    let verdict_at = table.columns.iter().position(|c| c.name == "verdict");
    let rows = table
        .rows
        .iter()
        .map(|row| {
            let mut entries: Vec<EntryView> = row
                .head
                .iter()
                .zip(&table.columns)
                .enumerate()
                .filter(|(i, _)| shown(i))
                .map(|(_, (e, c))| entry(e, c.numeric, ""))
                .collect();
            let (class, missing) = match &row.figures {
                Figures::Measured(figures) => {
                    for (i, (e, c)) in figures
                        .iter()
                        .zip(&table.columns[table.head..])
                        .enumerate()
                        .filter(|(i, _)| shown(&(i + table.head)))
                    {
                        // The verdict's entry carries its class: the colour of the word.
                        let class = match row.verdict {
                            Some(v) if Some(i + table.head) == verdict_at => {
                                format!("verdict {}", v.label())
                            }
                            _ => String::new(),
                        };
                        entries.push(entry(e, c.numeric, &class));
                    }
                    let class = row.verdict.map_or("", Verdict::label).to_string();
                    let class = if row.cell.shortfall().is_some() {
                        format!("{class} shortfall")
                    } else {
                        class
                    };
                    (class, None)
                }
                Figures::NotServed(why) => (
                    "not-served".to_string(),
                    Some((why.clone(), figure_columns)),
                ),
                Figures::Failed(why) => (
                    "failed".to_string(),
                    Some((format!("FAILED: {why}"), figure_columns)),
                ),
            };
            RowView {
                class,
                entries,
                missing,
                flame: row
                    .cell
                    .profile
                    .as_ref()
                    .map(|p| p.flamegraph.clone())
                    .filter(|f| dir.join(f).is_file()),
            }
        })
        .collect();

    let mut sections = Vec::new();
    // A run that measured something else than the matrix: its table, and how to read it.
    let mut own_table = |id, title, reading: &str, table: String| {
        sections.push(Section {
            id,
            title,
            html: html(&format!("{reading}\n\n{table}")),
        })
    };
    if !results.idle.is_empty() {
        own_table(
            "idle",
            "Idle keep-alive connections",
            idle::READING,
            idle::table(&results.idle),
        );
    }
    if !results.attack.is_empty() {
        own_table(
            "attack",
            "Slow clients (Slowloris, slow POST)",
            attack::READING,
            attack::table(&results.attack),
        );
    }
    if !results.soak.is_empty() {
        // The tables, then each server's chart (written beside the page, drawn in it).
        let mut html_text = html(&format!(
            "{}\n\n{}\n\n{}",
            soak::READING,
            soak::table(&results.soak),
            soak::faults_table(&results.soak)
        ));
        for row in results.soak.iter().filter(|r| r.missing.is_none()) {
            let (file, svg) = soak::chart(row)?;
            write_svg(&file, &svg)?;
            html_text.push_str(&format!("<figure class=\"chart\">{svg}</figure>\n"));
        }
        sections.push(Section {
            id: "soak",
            title: "Soak",
            html: html_text,
        });
    }
    let posts = post::sections(cells, &capacity_at);
    if !posts.is_empty() {
        sections.push(Section {
            id: "posts",
            title: "The posts, replayed",
            html: html(&posts),
        });
    }
    let over_both = link::table(cells);
    if !over_both.is_empty() {
        sections.push(Section {
            id: "link",
            title: "Loopback beside veth",
            html: html(&over_both),
        });
    }
    if let Some(target) = &slo {
        sections.push(Section {
            id: "capacity",
            title: "Capacity at the latency target",
            html: html(&slo::table(cells, target)),
        });
    }
    let profiled = profile::profiled(cells);
    if !profiled.is_empty() {
        let mut text = profile::table(&profiled);
        // Every flame graph in the run's folder, the differential ones included.
        let mut graphs: Vec<String> = std::fs::read_dir(dir.join("flame"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.ends_with(".svg"))
            .collect();
        graphs.sort();
        if !graphs.is_empty() {
            text.push_str("\nflame graphs: ");
            let links: Vec<String> = graphs
                .iter()
                .map(|g| format!("[{}](flame/{g})", g.trim_end_matches(".svg")))
                .collect();
            text.push_str(&links.join(" · "));
            text.push('\n');
        }
        sections.push(Section {
            id: "profile",
            title: "Where the CPU goes",
            html: html(&text),
        });
    }
    if meta["fidelity"].as_bool() == Some(true) {
        let peers: Vec<String> = meta["versions"]["peers"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        // The `--peer NAME@MODEL` pairs, as the run recorded them.
        let beside: Vec<(String, String)> = meta["beside"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(p, v)| Some((p.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let setup = fidelity::Setup {
            workers: meta["workers"].as_u64().unwrap_or(1) as usize,
            server_cpus: meta["server_cpus"].as_array().map_or(1, Vec::len),
            connections: meta["concurrency"][0].as_u64().unwrap_or(64) as u32,
        };
        let pairs = crate::model::fidelity::pairs(&peers, &beside);
        sections.push(Section {
            id: "fidelity",
            title: "The models beside the real systems",
            html: html(&fidelity::table(cells, &pairs, setup)),
        });
        if cells.iter().any(|c| c.work_us > 0) {
            sections.push(Section {
                id: "calibrated",
                title: "The models calibrated to the originals' cost",
                html: html(&fidelity::calibrated(cells, &pairs, setup, &capacity_at)),
            });
        }
    }
    let by_name = table::by_name(cells);
    if !by_name.is_empty() {
        sections.push(Section {
            id: "syscalls",
            title: "System calls by name",
            html: html(&by_name),
        });
    }
    let fleet = table::hosts(cells);
    if !fleet.is_empty() {
        sections.push(Section {
            id: "hosts",
            title: "Client hosts",
            html: html(&fleet),
        });
    }
    let notes = table::notes(cells);
    if !notes.is_empty() {
        let list: String = notes.lines().map(|l| format!("- {l}\n")).collect();
        sections.push(Section {
            id: "notes",
            title: "Notes",
            html: html(&list),
        });
    }

    let setup = setup(meta, cells);
    // The CSV files files::write_files wrote (or an older run has): linked where they are.
    let csv_files = ["results.csv", "idle.csv", "attack.csv", "soak.csv"]
        .into_iter()
        .filter(|file| dir.join(file).is_file())
        .collect();
    let page = Page {
        title: format!("archzoo — {}", started(dir, meta)),
        summary: summary(results),
        headline: setup
            .iter()
            .take(3)
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(" · "),
        setup,
        versions: versions(meta),
        reproduce: reproduce(meta),
        commands: cells
            .iter()
            .map(|c| CommandView {
                cell: format!(
                    "{} · {} · keep-alive {} · c={}{}",
                    c.variant,
                    c.workload,
                    c.keep_alive_label(),
                    c.connections_label(),
                    c.rate.map_or(String::new(), |r| format!(" · {r} req/s"))
                ),
                server: c.server_command.clone().unwrap_or_else(|| "–".into()),
                client: c
                    .median()
                    .or(c.counted.as_ref())
                    .map_or("–".into(), |r| r.command.clone()),
            })
            .collect(),
        columns,
        rows,
        flames,
        // Without the lines that explain a column the page does not show.
        legend: html(
            &table
                .legend
                .iter()
                .filter(|line| {
                    !empty
                        .iter()
                        .any(|&i| line.starts_with(&format!("{}:", table.columns[i].name)))
                })
                .cloned()
                .collect::<Vec<_>>()
                .join("\n\n"),
        ),
        charts,
        latency,
        sections,
        matrix: !cells.is_empty(),
        every_cell,
        csv_files,
    };
    let path = dir.join("report.html");
    let text = page.render().map_err(|e| e.to_string())?;
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// When the run started: as recorded, else the results folder's name (its UTC time).
fn started(dir: &Path, meta: &serde_json::Value) -> String {
    meta["started_at"].as_str().map_or_else(
        || {
            dir.file_name()
                .map_or("a run".into(), |n| n.to_string_lossy().into_owned())
        },
        str::to_string,
    )
}

/// One line: how many cells, servers and workloads; or what the run measured instead.
fn summary(results: &Results) -> String {
    let names = |rows: Vec<&String>| {
        let names: Vec<&str> = rows.into_iter().map(String::as_str).collect();
        format!("{} servers: {}", names.len(), names.join(", "))
    };
    if !results.idle.is_empty() {
        let most = results.idle.iter().map(|r| r.held).max().unwrap_or(0);
        return format!(
            "idle keep-alive connections (up to {}) · {}",
            chart::thousands(most as f64),
            names(results.idle.iter().map(|r| &r.variant).collect())
        );
    }
    if let Some(first) = results.soak.first() {
        return format!(
            "a soak of {} s at {} req/s · {}",
            first.duration_s,
            first.rate,
            names(results.soak.iter().map(|r| &r.variant).collect())
        );
    }
    if !results.attack.is_empty() {
        return format!(
            "{} · {}",
            Attack::of_row(&results.attack[0].attack).title(),
            names(results.attack.iter().map(|r| &r.variant).collect())
        );
    }
    let cells = &results.cells;
    let servers = first_seen(cells, |c| &c.variant);
    let workloads = first_seen(cells, |c| &c.workload);
    let measured = cells.iter().filter(|c| c.median().is_some()).count();
    let client_bound = cells
        .iter()
        .filter(|c| {
            c.median()
                .is_some_and(|r| r.verdict == Verdict::ClientBound)
        })
        .count();
    format!(
        "{} cells ({measured} measured, {client_bound} client-bound) · {} servers: {} · workloads: {}",
        cells.len(),
        servers.len(),
        servers.join(", "),
        workloads.join(", ")
    )
}

fn cpus(v: &serde_json::Value) -> String {
    v.as_array().map_or("–".into(), |a| {
        a.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    })
}

fn setup(meta: &serde_json::Value, cells: &[Cell]) -> Vec<(String, String)> {
    let m = &meta["machine"];
    let mut rows = vec![
        (
            "machine".to_string(),
            format!(
                "{} · {} CPUs · Linux {}",
                m["cpu_model"].as_str().unwrap_or("unknown"),
                m["cpus"].as_u64().unwrap_or(0),
                m["kernel"].as_str().unwrap_or("?")
            ),
        ),
        (
            "server".to_string(),
            format!(
                "CPUs {} · {} worker(s)",
                cpus(&meta["server_cpus"]),
                meta["workers"].as_u64().unwrap_or(0)
            ),
        ),
    ];
    let mut clients: Vec<&str> = cells.iter().map(|c| c.client.command()).collect();
    clients.dedup();
    // A run without cells names its client in the meta (bench itself, slowhttptest).
    if let Some(client) = meta["client"].as_str() {
        clients.push(client);
    }
    let pinned = meta["client_cpus"].as_array().map_or(String::new(), |_| {
        format!(" on CPUs {}", cpus(&meta["client_cpus"]))
    });
    rows.push(("client".into(), format!("{}{pinned}", clients.join(", "))));
    if let Some(reps) = cells.iter().map(|c| c.runs.len()).max() {
        let starts = if cells.iter().any(|c| c.fresh_server) {
            ", each on a server started for it, the cells taking turns round by round (--fresh-server)"
        } else {
            ""
        };
        rows.push((
            "repetitions".into(),
            format!(
                "{reps} measured per cell{starts} (the median is shown; whiskers span them all)"
            ),
        ));
    }
    if let Some(commit) = meta["commit"].as_str().filter(|c| !c.is_empty()) {
        rows.push(("archzoo commit".into(), commit.to_string()));
    }
    rows
}

fn versions(meta: &serde_json::Value) -> Vec<(String, String)> {
    let v = &meta["versions"];
    let mut rows = Vec::new();
    for tool in ["archzoo", "ab", "wrk", "oha"] {
        if let Some(text) = v[tool].as_str().filter(|t| !t.is_empty()) {
            rows.push((tool.to_string(), text.to_string()));
        }
    }
    if let Some(peers) = v["peers"].as_object() {
        for (name, version) in peers {
            rows.push((
                name.clone(),
                version.as_str().unwrap_or_default().to_string(),
            ));
        }
    }
    rows
}

/// The command that runs the same matrix again.
fn reproduce(meta: &serde_json::Value) -> String {
    let args: Vec<String> = match meta["argv"].as_array() {
        Some(argv) => argv
            .iter()
            .skip(1)
            .filter_map(|a| a.as_str())
            .map(variants::launch::shell_word)
            .collect(),
        // Runs recorded before the arguments were kept one by one.
        None => meta["started_by"]
            .as_str()
            .unwrap_or("")
            .split_whitespace()
            .skip(1)
            .map(str::to_string)
            .collect(),
    };
    std::iter::once("scripts/bench".to_string())
        .chain(args)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_keys_are_address_safe() {
        assert_eq!(slug("CPU µs/req"), "cpu-s-req");
        assert_eq!(slug("req/s (min–max)"), "req-s-min-max");
        assert_eq!(slug("× fastest"), "fastest");
    }

    #[test]
    fn the_reproducing_command_quotes_what_the_shell_would_split() {
        let meta = serde_json::json!({
            "argv": ["/x/target/release/bench", "--peer", "a=b {port}", "-c", "64"],
        });
        assert_eq!(reproduce(&meta), "scripts/bench --peer 'a=b {port}' -c 64");
    }
}
