//! The charts of a run: grouped bar charts of the matrix's figures and latency-vs-load
//! curves, the same SVG written beside results.json and drawn inline in report.html.
//!
//! A bar chart is laid out here and written by an askama template (`templates/bars.svg`)
//! rather than drawn with plotters: what a reader needs from it is structure plotters'
//! pixel backend cannot emit — a hatch *pattern* for client-bound bars (plotters has no
//! pattern fill; hatching would be dozens of clipped line segments per bar), a `<title>`
//! per bar with its figures for the pointer, classes the browser test finds bars and
//! markings by, ids unique on a page holding several charts — over geometry that is a
//! linear axis, rows and text. The template is checked when the crate compiles and escapes
//! every name it prints. The latency curves, a log-scale line chart, stay with plotters,
//! which does that well, in the same colours.

use askama::Template;

use crate::model::cell::{first_seen, min_max, Cell, Run, Verdict};

/// Colours, one per server: the variant table's rows first, in its order (an
/// architecture's modes in a lighter shade of its hue), then the built-in peers in theirs,
/// then one left for any other server. Neighbours that meet on one chart — a model and the
/// peers beside it — differ in hue.
pub const PALETTE: [&str; 22] = [
    "#4e79a7", "#f28e2b", "#e15759", "#ff9da7", "#59a14f", "#8cd17d", "#b07aa1", "#d4a6c8",
    "#9d7660", "#d7b5a6", "#76b7b2", "#edc948", "#a0cbe8", "#3b3b3b", "#8c6d31", "#00add8",
    "#6b8e23", "#bcbd22", "#7f3c8d", "#c05a00", "#1f3d7a", "#bab0ac",
];

/// Each server of a run with its colour. A model keeps its place in the variant table and
/// a built-in peer its place after them, so a server has the same colour on every chart
/// of a run and, mostly, from one run to the next; any other server (`--peer`, `--url`)
/// takes the next free colour.
#[derive(Debug, Clone)]
pub struct Colours(Vec<(String, &'static str)>);

impl Colours {
    pub fn of(cells: &[Cell]) -> Colours {
        let fixed = |name: &str| {
            variants::VARIANTS
                .iter()
                .position(|v| v.name == name)
                .or_else(|| {
                    variants::peers::BUILTIN
                        .iter()
                        .position(|b| b.name == name)
                        .map(|i| variants::VARIANTS.len() + i)
                })
        };
        let named: Vec<(&str, Option<usize>)> = first_seen(cells, |c| &c.variant)
            .into_iter()
            .map(|name| (name, fixed(name).map(|i| i % PALETTE.len())))
            .collect();
        let taken: Vec<usize> = named.iter().filter_map(|(_, at)| *at).collect();
        let mut free = (0..PALETTE.len()).filter(|i| !taken.contains(i)).cycle();
        Colours(
            named
                .into_iter()
                .map(|(name, at)| {
                    let i = at.or_else(|| free.next()).unwrap_or(0);
                    (name.to_string(), PALETTE[i])
                })
                .collect(),
        )
    }

    /// `server`'s colour (grey for one the run does not have).
    pub fn of_server(&self, server: &str) -> &'static str {
        self.0
            .iter()
            .find(|(n, _)| n == server)
            .map_or("#7f7f7f", |(_, c)| c)
    }

    pub fn servers(&self) -> impl Iterator<Item = (&str, &'static str)> {
        self.0.iter().map(|(n, c)| (n.as_str(), *c))
    }
}

/// A figure of a cell and how far its repetitions spread.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    /// The median repetition's.
    pub value: f64,
    /// The lowest and highest over the repetitions, when there are several.
    pub range: Option<(f64, f64)>,
}

/// A figure the bar charts draw, one chart each.
pub struct Metric {
    /// Names the chart in the page (`chart-<id>`) and in its file (`<id>.svg`).
    pub id: &'static str,
    pub title: &'static str,
    pub unit: &'static str,
    /// A client-bound cell's figure is only a lower bound (req/s); others are measured
    /// whoever was saturated (CPU per request is what it is).
    pub bounded_by_client: bool,
    pub figure: fn(&Cell) -> Option<Figure>,
    /// How to read the chart: the README's paragraph for it, word for word.
    pub reading: &'static str,
}

/// The figure's own median over the repetitions, with its range.
fn over_runs(cell: &Cell, get: fn(&Run) -> Option<f64>) -> Option<Figure> {
    let value = cell.median_of(get)?;
    let measured = cell.runs.iter().filter_map(get);
    let range = min_max(measured.clone()).filter(|_| measured.count() > 1);
    Some(Figure { value, range })
}

/// The bar charts, in the page's order.
pub const METRICS: [Metric; 4] = [
    Metric {
        id: "req_per_sec",
        title: "requests per second",
        unit: "req/s (median; whiskers: slowest to fastest repetition)",
        bounded_by_client: true,
        figure: |c| over_runs(c, |r| Some(r.outcome.rps)),
        reading: "Requests per second: the median repetition, whiskers from the slowest to the fastest. A hatched bar marked ≥ was client-bound: the load generator saturated its CPU before the server did, so the figure is only a lower bound for the server — the mistake of the posts that ran `ab -c 1000` against a 12-core server. Compare req/s only where the server was the bottleneck; elsewhere read CPU µs per request.",
    },
    Metric {
        id: "cpu_us_per_req",
        title: "server CPU time per request",
        unit: "µs/request (every process and thread of the server; whiskers over the repetitions)",
        bounded_by_client: false,
        figure: |c| over_runs(c, |r| r.server_cpu_us_per_req),
        reading: "Server CPU time per request, from /proc over every process and thread of the server: the figure that ranks servers on a small machine, because it holds whoever was saturated — a client-bound run still measures it. Shorter is cheaper; the gap between two bars is what one architecture costs per request over another with the same codec and handler.",
    },
    Metric {
        id: "syscalls_per_req",
        title: "system calls per request",
        unit: "system calls/request (perf stat, one extra repetition: no whiskers)",
        bounded_by_client: false,
        figure: |c| {
            Some(Figure {
                value: c.counted.as_ref()?.syscalls_per_req?,
                range: None,
            })
        },
        reading: "System calls per request, counted by `perf stat` in one extra repetition after the measured ones (its tracepoints slow the server, so the other figures do not come from it). Batching shows here: a keep-alive server that reads and writes once per request sits near 2, a wake-up or poll per request adds to it, a connection per request costs accept, close and the epoll bookkeeping, and pipelining takes it below 1.",
    },
    Metric {
        id: "db_cpu_us_per_req",
        title: "database CPU time per request",
        unit: "µs/request of the PostgreSQL backends (whiskers over the repetitions)",
        bounded_by_client: false,
        figure: |c| over_runs(c, |r| r.db_cpu_us_per_req),
        reading: "The PostgreSQL backends' CPU time per request (the pg workloads, with the cluster bench started): on the server's CPUs it is work that waiting cannot overlap, which is why a server that blocks on one connection can beat one that keeps many queries in flight on a one-CPU machine — many backends taking turns cost more per request than one.",
    },
];

/// How to read a latency-vs-load chart: the README's paragraph, word for word.
pub const LATENCY_READING: &str = "p99 latency against the offered rate (open loop: oha at a fixed rate, latency from when each request was due), one line per server on a log scale; a hollow point did not reach its rate. Where a line turns upward is where that server stops keeping up; the dashed line is the `--slo` target, and a server's capacity is the highest rate its line stays under it.";

/// A group's heading: what its cells share, naming workers, stack and client only when
/// the run has more than one of them.
pub fn group_label(cell: &Cell, cells: &[Cell]) -> String {
    let varies = |f: &dyn Fn(&Cell) -> String| cells.iter().any(|o| f(o) != f(cell));
    let mut label = format!(
        "{} · keep-alive {} · c={}",
        cell.workload,
        cell.keep_alive_label(),
        cell.connections_label()
    );
    if let Some(rate) = cell.rate {
        label.push_str(&format!(" · {} req/s offered", thousands(f64::from(rate))));
    }
    if varies(&|c| c.workers.to_string()) {
        label.push_str(&format!(" · {} workers", cell.workers));
    }
    if varies(&|c| c.stack.clone()) {
        label.push_str(&format!(" · {} stack", cell.stack));
    }
    if varies(&|c| c.client.command().to_string()) {
        label.push_str(&format!(" · {}", cell.client.command()));
    }
    label
}

/// `v` for a person: thousands separated, decimals by size (12,345 · 123 · 12.3 · 1.23).
pub fn thousands(v: f64) -> String {
    if v.abs() >= 100.0 {
        let digits = format!("{:.0}", v.abs());
        let mut out = String::new();
        for (i, ch) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(ch);
        }
        if v < 0.0 {
            out.insert(0, '-');
        }
        out
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A round step for about five ticks up to `max`, and the axis end (a whole number of
/// steps at or above it).
fn ticks(max: f64) -> (f64, f64) {
    let raw = (max / 5.0).max(1e-9);
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power);
    (step, (max / step).ceil().max(1.0) * step)
}

/// A tick's label: as few decimals as the step needs.
fn tick_label(v: f64, step: f64) -> String {
    if step >= 1.0 {
        let s = thousands(v.round());
        s.trim_end_matches(".00").trim_end_matches(".0").to_string()
    } else {
        let power = step.log10().floor();
        // A step of 2.5 × 10^k needs one decimal more than 1, 2 or 5 × 10^k.
        let quarter = usize::from((step / 10f64.powf(power) - 2.5).abs() < 1e-9);
        let digits = (-power) as usize + quarter;
        format!("{v:.digits$}")
    }
}

/// Rounded to a tenth of a pixel: short attributes, crisp enough.
fn px(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// Width of `text` at the charts' 12 px font, near enough to lay out a legend.
fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * 6.8
}

#[derive(Debug, Clone)]
pub struct Tick {
    pub x: f64,
    pub label: String,
}

#[derive(Debug, Clone)]
pub struct GroupView {
    pub label: String,
    pub y: f64,
}

#[derive(Debug, Clone)]
pub struct Whisker {
    pub lo: f64,
    pub hi: f64,
    pub top: f64,
    pub middle: f64,
    pub bottom: f64,
}

/// One row of a bar chart: a cell.
#[derive(Debug, Clone)]
pub struct BarView {
    pub server: String,
    pub colour: &'static str,
    pub y: f64,
    pub height: f64,
    pub width: f64,
    /// Baseline of the row's texts.
    pub text_y: f64,
    pub value: f64,
    pub value_text: String,
    pub value_x: f64,
    pub client_bound: bool,
    pub whisker: Option<Whisker>,
    /// The pointer's text: server, group, figures, verdict.
    pub title: String,
    /// Why the row has no bar (failed, not served, not measured).
    pub missing: Option<String>,
}

#[derive(Debug, Clone)]
pub struct LegendView {
    pub x: f64,
    pub y: f64,
    pub colour: &'static str,
    pub text: String,
    pub hatched: bool,
}

/// The groups of one workload and their axis: workloads differ by orders of magnitude
/// (hello world against ten queries), so each gets a scale of its own.
#[derive(Debug, Clone)]
pub struct Panel {
    pub workload: String,
    pub top: f64,
    pub axis_y: f64,
    pub ticks: Vec<Tick>,
}

/// A grouped horizontal bar chart, laid out.
#[derive(Debug, Clone, Template)]
#[template(path = "bars.svg")]
pub struct BarChart {
    pub id: String,
    pub title: String,
    pub unit: String,
    pub width: f64,
    pub height: f64,
    /// The plot's left and right ends.
    pub x0: f64,
    pub x1: f64,
    pub unit_x: f64,
    pub unit_y: f64,
    pub panels: Vec<Panel>,
    pub groups: Vec<GroupView>,
    pub bars: Vec<BarView>,
    pub legend: Vec<LegendView>,
}

const WIDTH: f64 = 980.0;
const NAMES: f64 = 210.0;
const VALUES: f64 = 120.0;
const BAR: f64 = 16.0;
const PITCH: f64 = 22.0;

impl BarChart {
    /// `metric`'s chart of `cells`: a panel per workload, a group per keep-alive mode
    /// (and concurrency, rate, workers, stack), a bar per server in its colour; `None`
    /// when no cell has the figure.
    pub fn of(metric: &Metric, cells: &[Cell], colours: &Colours) -> Option<BarChart> {
        let figures: Vec<Option<Figure>> = cells.iter().map(|c| (metric.figure)(c)).collect();
        if figures.iter().all(Option::is_none) {
            return None;
        }
        let (x0, x1) = (NAMES, WIDTH - VALUES);
        let bounded = |c: &Cell| {
            metric.bounded_by_client
                && c.median()
                    .is_some_and(|r| r.verdict == Verdict::ClientBound)
        };

        // The legend: a swatch per server, and the hatching where a bar has it.
        let any_bounded = cells
            .iter()
            .zip(&figures)
            .any(|(c, f)| f.is_some() && bounded(c));
        let mut legend = Vec::new();
        let (mut lx, mut ly) = (12.0, 46.0);
        let mut items: Vec<(&'static str, String, bool)> = colours
            .servers()
            .map(|(n, c)| (c, n.to_string(), false))
            .collect();
        if any_bounded {
            items.push((
                "#8a8a8a",
                "client-bound: only a lower bound (≥) — the load generator was saturated first"
                    .into(),
                true,
            ));
        }
        for (colour, text, hatched) in items {
            let w = 14.0 + 6.0 + text_width(&text) + 18.0;
            if lx + w > WIDTH - 12.0 && lx > 12.0 {
                lx = 12.0;
                ly += 20.0;
            }
            legend.push(LegendView {
                x: lx,
                y: ly,
                colour,
                text,
                hatched,
            });
            lx += w;
        }

        // Workloads and groups in the order their first cell ran (a group named by its
        // first cell); within a group, the cells in run order.
        let mut firsts: Vec<&Cell> = Vec::new();
        for c in cells {
            if !firsts.iter().any(|f| f.beside(c)) {
                firsts.push(c);
            }
        }
        let mut y = ly + 12.0;
        let (mut panels, mut groups, mut bars) = (Vec::new(), Vec::new(), Vec::new());
        for workload in first_seen(cells, |c| &c.workload) {
            let max = cells
                .iter()
                .zip(&figures)
                .filter(|(c, _)| c.workload == workload)
                .filter_map(|(_, f)| *f)
                .map(|f| f.range.map_or(f.value, |r| r.1.max(f.value)))
                .fold(0.0, f64::max);
            let (step, end) = ticks(if max > 0.0 { max } else { 1.0 });
            let x = |v: f64| px(x0 + (x1 - x0) * v / end);
            let top = y + 6.0;
            y = top;
            for first in firsts.iter().filter(|f| f.workload == workload) {
                let members: Vec<(&Cell, &Option<Figure>)> = cells
                    .iter()
                    .zip(&figures)
                    .filter(|(c, _)| first.beside(c))
                    .collect();
                let label = group_label(first, cells);
                y += 18.0;
                groups.push(GroupView {
                    label: label.clone(),
                    y,
                });
                y += 8.0;
                for (cell, figure) in members {
                    bars.push(bar(
                        metric,
                        cell,
                        *figure,
                        &label,
                        y,
                        colours,
                        bounded(cell),
                        &x,
                    ));
                    y += PITCH;
                }
                y += 4.0;
            }
            let axis_y = y + 2.0;
            panels.push(Panel {
                workload: workload.to_string(),
                top,
                axis_y,
                ticks: (0..)
                    .map(|i| f64::from(i) * step)
                    .take_while(|v| *v <= end + step / 2.0)
                    .map(|v| Tick {
                        x: x(v),
                        label: tick_label(v, step),
                    })
                    .collect(),
            });
            y = axis_y + 24.0;
        }
        Some(BarChart {
            id: metric.id.to_string(),
            title: metric.title.to_string(),
            unit: metric.unit.to_string(),
            width: WIDTH,
            height: y + 26.0,
            x0,
            x1,
            unit_x: px((x0 + x1) / 2.0),
            unit_y: y + 6.0,
            panels,
            groups,
            bars,
            legend,
        })
    }
}

/// One cell's row at `y` of a panel whose scale is `x`.
#[allow(clippy::too_many_arguments)]
fn bar(
    metric: &Metric,
    cell: &Cell,
    figure: Option<Figure>,
    group: &str,
    y: f64,
    colours: &Colours,
    client_bound: bool,
    x: &dyn Fn(f64) -> f64,
) -> BarView {
    let x0 = x(0.0);
    let mut bar = BarView {
        server: cell.variant.clone(),
        colour: colours.of_server(&cell.variant),
        y,
        height: BAR,
        width: 0.0,
        text_y: y + 12.5,
        value: 0.0,
        value_text: String::new(),
        value_x: x0 + 6.0,
        client_bound: false,
        whisker: None,
        title: String::new(),
        missing: None,
    };
    let Some(f) = figure else {
        let why = match &cell.failure {
            Some(f) if f.starts_with("n/a") => f.clone(),
            Some(f) => format!("failed: {f}"),
            None => "not measured".into(),
        };
        let why = why.split_whitespace().collect::<Vec<_>>().join(" ");
        let short: String = why.chars().take(90).collect();
        bar.missing = Some(if short.len() < why.len() {
            format!("{short}…")
        } else {
            short
        });
        return bar;
    };
    let end = x(f.value);
    bar.value = f.value;
    bar.width = px(end - x0).max(1.0);
    bar.client_bound = client_bound;
    bar.value_text = format!(
        "{}{}",
        if client_bound { "≥ " } else { "" },
        thousands(f.value)
    );
    let mut right = end;
    if let Some((lo, hi)) = f.range {
        bar.whisker = Some(Whisker {
            lo: x(lo),
            hi: x(hi),
            top: y + 3.0,
            middle: y + BAR / 2.0,
            bottom: y + BAR - 3.0,
        });
        right = right.max(x(hi));
    }
    bar.value_x = px(right + 6.0);
    let verdict = cell
        .median()
        .map_or(String::new(), |r| format!(" · {}", r.verdict.label()));
    let range = f.range.map_or(String::new(), |(lo, hi)| {
        format!(" (min {} – max {})", thousands(lo), thousands(hi))
    });
    bar.title = format!(
        "{} — {group}: {}{range} {}{verdict}",
        cell.variant,
        bar.value_text,
        metric.unit.split(' ').next().unwrap_or("")
    );
    bar
}

/// Every bar chart of `cells` that has figures: the metric and its SVG.
pub fn bar_charts(
    cells: &[Cell],
    colours: &Colours,
) -> Result<Vec<(&'static Metric, String)>, String> {
    let mut out = Vec::new();
    for metric in &METRICS {
        if let Some(chart) = BarChart::of(metric, cells, colours) {
            out.push((metric, chart.render().map_err(|e| e.to_string())?));
        }
    }
    Ok(out)
}

/// One point of a latency-vs-load line: offered rate, p99 ms, and whether the rate was
/// reached.
type LoadPoint = (f64, f64, bool);

/// `#rrggbb` as plotters' colour.
fn rgb(hex: &str) -> plotters::style::RGBColor {
    let part = |i: usize| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("7f"), 16).unwrap_or(127);
    plotters::style::RGBColor(part(1), part(3), part(5))
}

/// Latency against load, one SVG per workload and keep-alive mode that ran the open loop
/// (`latency_<workload>_ka-<on|off>.svg`): x the offered rate, y the corrected p99 on a log
/// scale, a line per server in its colour; a shortfall point is drawn hollow (the rate was
/// not reached); an `--slo` p99 target is a dashed horizontal line. Returns each chart's
/// title, file name and SVG.
pub fn latency_charts(
    cells: &[Cell],
    colours: &Colours,
    slo_ms: Option<f64>,
) -> Result<Vec<(String, String, String)>, String> {
    use plotters::prelude::*;
    let mut groups: Vec<(String, bool)> = Vec::new();
    for c in cells
        .iter()
        .filter(|c| c.rate.is_some() && c.median().is_some())
    {
        if !groups.contains(&(c.workload.clone(), c.keep_alive)) {
            groups.push((c.workload.clone(), c.keep_alive));
        }
    }
    let mut written = Vec::new();
    for (workload, ka) in groups {
        let ka_name = if ka { "on" } else { "off" };
        let file = format!("latency_{workload}_ka-{ka_name}.svg");
        let title = format!(
            "{workload}, keep-alive {ka_name}: p99 latency against offered load (open loop, corrected)"
        );
        let err = |e: &dyn std::fmt::Display| format!("chart {file}: {e}");
        // Per server, its points sorted by rate.
        let mut lines: Vec<(String, Vec<LoadPoint>)> = Vec::new();
        for c in cells
            .iter()
            .filter(|c| c.workload == workload && c.keep_alive == ka)
        {
            let (Some(rate), Some(p99)) = (c.rate, c.median().and_then(|r| r.outcome.p99_ms))
            else {
                continue;
            };
            let point = (f64::from(rate), p99.max(0.001), c.shortfall().is_none());
            match lines.iter_mut().find(|l| l.0 == c.variant) {
                Some(l) => l.1.push(point),
                None => lines.push((c.variant.clone(), vec![point])),
            }
        }
        for l in &mut lines {
            l.1.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let xmax = lines
            .iter()
            .flat_map(|l| l.1.iter().map(|p| p.0))
            .fold(1.0, f64::max)
            * 1.05;
        let (ymin, ymax) = lines
            .iter()
            .flat_map(|l| l.1.iter().map(|p| p.1))
            .chain(slo_ms)
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), y| {
                (lo.min(y), hi.max(y))
            });
        // Room above the highest point for the legend in the upper left (a row per line and
        // one for the target): on a log axis the top is where the legend's share of the
        // plot's height, in decades, ends above the data.
        let bottom = ymin * 0.8;
        let rows = lines.len() + usize::from(slo_ms.is_some());
        let share = ((24.0 + 17.0 * rows as f64) / 440.0).min(0.6);
        let top = 10f64
            .powf((ymax.log10() - share * bottom.log10()) / (1.0 - share))
            .max(ymax * 1.25);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (980, 560)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| err(&e))?;
            let mut chart = ChartBuilder::on(&root)
                .caption(&title, ("sans-serif", 17))
                .margin(14)
                .x_label_area_size(44)
                .y_label_area_size(70)
                .build_cartesian_2d(0f64..xmax, (bottom..top).log_scale())
                .map_err(|e| err(&e))?;
            chart
                .configure_mesh()
                .x_desc("offered requests per second")
                .y_desc("p99 ms (log scale)")
                .x_label_formatter(&|x| tick_label(*x, 1.0))
                .y_label_formatter(&|y| format!("{y}"))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(|e| err(&e))?;
            for (name, points) in &lines {
                let color = rgb(colours.of_server(name));
                chart
                    .draw_series(LineSeries::new(
                        points.iter().map(|p| (p.0, p.1)),
                        color.stroke_width(2),
                    ))
                    .map_err(|e| err(&e))?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 18, y)], color.stroke_width(3))
                    });
                chart
                    .draw_series(points.iter().map(|&(x, y, reached)| {
                        let style = if reached {
                            color.filled()
                        } else {
                            color.stroke_width(2)
                        };
                        Circle::new((x, y), 4, style)
                    }))
                    .map_err(|e| err(&e))?;
            }
            if let Some(limit) = slo_ms {
                // Dashes drawn as short segments: the target every curve is read against.
                let step = xmax / 60.0;
                chart
                    .draw_series((0..60).step_by(2).map(|i| {
                        let x = f64::from(i) * step;
                        PathElement::new([(x, limit), (x + step, limit)], RED.stroke_width(2))
                    }))
                    .map_err(|e| err(&e))?
                    .label(format!("target p99 ≤ {limit} ms"))
                    .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], RED));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| err(&e))?;
            root.present().map_err(|e| err(&e))?;
        }
        written.push((title, file, svg));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_reach_the_largest_value() {
        assert_eq!(ticks(23_456.0), (5_000.0, 25_000.0));
        assert_eq!(ticks(4.2), (1.0, 5.0));
        assert_eq!(ticks(0.37), (0.1, 0.4));
        assert_eq!(ticks(100.0), (20.0, 100.0));
        assert_eq!(tick_label(25_000.0, 5_000.0), "25,000");
        assert_eq!(tick_label(0.30000000000000004, 0.1), "0.3");
        assert_eq!(tick_label(0.75, 0.25), "0.75");
    }

    #[test]
    fn every_model_and_builtin_peer_has_a_colour_of_its_own() {
        let fixed = variants::VARIANTS.len() + variants::peers::BUILTIN.len();
        assert!(
            fixed < PALETTE.len(),
            "{fixed} servers for {} colours",
            PALETTE.len()
        );
        let mut seen = PALETTE.to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), PALETTE.len(), "a colour twice");
    }

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(999.6), "1,000");
        assert_eq!(thousands(123.4), "123");
        assert_eq!(thousands(12.34), "12.3");
        assert_eq!(thousands(1.234), "1.23");
    }
}
