//! The `--soak` tables, a chart per server (memory, p99 and answers over time, the faults
//! marked), and how to read them.

use std::fmt::Write as _;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::model::soak::{self, Soak};

/// How to read the soak tables, for the report page.
pub const READING: &str = "Each server under one steady open-loop load (oha at a fixed rate, \
latency from when each request was due), sampled every second: resident memory and open \
descriptors of all its processes, its CPU, and each second's answers and p99. The verdicts \
skip the warm-up (the first minute, or the first tenth of a shorter soak): **memory** is the \
least-squares slope of RSS after it — flat under 1 % over the soak, else GROWS (or shrinks: \
a reforked worker, pages handed back) with KiB an hour; **fds** the descriptors open at the \
end less at the start; **p99 drift** the last \
minute's p99 over the first's (a shorter soak: its last and first third), not judged when \
the host stole 5 % or more of the server's CPUs in any second of either window (a minute's \
p99 is its worst 0.6 s: one stolen second decides it), or the client used 90 % or more of its \
CPUs in one (it then sends late, and its lateness is counted as latency). **Nothing lost**: \
every request due was answered or counted as an error by the client (`vanished` 0). oha \
waits for every request it started (one never answered ends as a timeout, an error), so \
what `vanished` counts was never sent: the client still behind its schedule when time was \
up — a saturated client, or a server that stalled it near the end; a request a server took \
and lost shows as an error, and in its own count beside. An \
answer with an error status (a 5xx, a 502) is a failed request too, listed under errors; the \
server's own count (`--stats`) is beside it, a killed worker's included (its master reports \
it). An offered rate marked ≥cap is a share of a capacity where the client, not the server, \
ran out (oha saturated in the probe above it): a share of what the client can offer. For each \
fault: the requests due from it until successful answers came at 95 % of the rate again that \
got none (and of those, how many were answered with an error status), that recovery time \
(over 100 ms windows, from the end of a stop), and the p99 of the 5 s after it, beside what \
the model predicts.";

/// The soak table: a row per server.
pub fn table(rows: &[Soak]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| variant | model | workers | workload | req/s offered | s | answered | errors | vanished | server counted | RSS MiB start → end | memory | fds leaked | p99 ms first → last | p99 drift |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"
    );
    for r in rows {
        if let Some(why) = &r.missing {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {why} | | | | | | | | | | |",
                r.name(),
                r.model,
                r.workers,
                r.workload
            );
            continue;
        }
        let warm = soak::warm_up_s(r.duration_s);
        let after: Vec<&soak::Second> = r
            .seconds
            .iter()
            .filter(|s| s.at_s >= warm && s.rss_kib > 0)
            .collect();
        let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
        let rss = match (after.first(), after.last()) {
            (Some(a), Some(b)) => format!("{} → {}", mib(a.rss_kib), mib(b.rss_kib)),
            _ => "–".into(),
        };
        // A leak shouts; memory handed back (a reforked worker, an allocator) does not.
        let memory = match soak::memory_growth(&r.seconds, warm) {
            Some(g) if g.trend() == soak::Trend::Flat => "flat".to_string(),
            Some(g) => format!(
                "{} {:+.0} KiB/h ({:+.1} %)",
                if g.trend() == soak::Trend::Grows {
                    "GROWS"
                } else {
                    "shrinks"
                },
                g.kib_per_hour,
                100.0 * g.share
            ),
            None => "–".into(),
        };
        let ms = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.2}"));
        // The client's errors, then the answers with an error status: both failed.
        let mut errors = if r.errors == 0 {
            "0".to_string()
        } else {
            let kinds: Vec<String> = r
                .error_kinds
                .iter()
                .take(2)
                .map(|(k, n)| format!("{n} {k}"))
                .collect();
            format!("{} ({})", r.errors, kinds.join("; "))
        };
        if !r.failed_statuses.is_empty() {
            let statuses: Vec<String> = r
                .failed_statuses
                .iter()
                .map(|(status, n)| format!("{n} × HTTP {status}"))
                .collect();
            errors = format!("{errors}; answered {}", statuses.join(", "));
        }
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {errors} | {} | {} | {rss} | {memory} | {} | {} → {} | {} |",
            r.name(),
            r.model,
            r.workers,
            r.workload,
            if r.capacity_is_the_clients {
                format!("{} (≥cap)", r.rate)
            } else {
                r.rate.to_string()
            },
            r.duration_s,
            r.answered,
            r.vanished(),
            r.server_requests.map_or("–".into(), |n| n.to_string()),
            soak::fds_leaked(&r.seconds, warm).map_or("–".into(), |n| format!("{n:+}")),
            ms(r.p99_first_ms),
            ms(r.p99_last_ms),
            r.drift_verdict(),
        );
    }
    out
}

/// The faults table: a row per fault injected, with what the model predicts beside it;
/// empty when no soak had faults.
pub fn faults_table(rows: &[Soak]) -> String {
    let mut out = String::new();
    if rows.iter().all(|r| r.faults.is_empty()) {
        return out;
    }
    let _ = writeln!(
        out,
        "| variant | fault | hit | lost | rate back after | p99 ms in the 5 s after | the model predicts |\n|---|---|---|---:|---:|---:|---|"
    );
    for r in rows {
        for f in &r.faults {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.name(),
                f.fault,
                f.hit,
                if f.failed > 0 {
                    format!("{} ({} with an error status)", f.lost, f.failed)
                } else {
                    f.lost.to_string()
                },
                f.recovered_after_ms
                    .map_or("not within the soak".into(), |ms| format!("{ms} ms")),
                match f.p99_after_ms {
                    None => "–".into(),
                    // Worth saying once the lag is a tenth of the figure or 5 ms.
                    Some(v) if f.client_lag_ms >= (v / 10.0).min(5.0) => format!(
                        "{v:.2} (the client up to {:.0} ms behind its schedule: short by up to that)",
                        f.client_lag_ms
                    ),
                    Some(v) => format!("{v:.2}"),
                },
                r.expected
            );
        }
    }
    out
}

/// A chart of one soak over time (`soak_<variant>.svg`): answers per second against the
/// offered rate, p99 (log scale), the server's and the client's CPU, and RSS, one panel
/// each, a red line at every fault.
pub fn chart(r: &Soak) -> Result<(String, String), String> {
    let file = format!("soak_{}.svg", r.variant.replace(['/', ' '], "-"));
    let err = |e: &dyn std::fmt::Display| format!("chart {file}: {e}");
    let xmax = f64::from(r.duration_s.max(1));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (980, 940)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let root = root
            .titled(
                &format!(
                    "{} — {} req/s offered for {} s",
                    r.name(),
                    r.rate,
                    r.duration_s
                ),
                ("sans-serif", 17),
            )
            .map_err(|e| err(&e))?;
        let panels = root.split_evenly((4, 1));
        let faults: Vec<f64> = r.faults.iter().map(|f| f.fault.at_s).collect();
        let blue = RGBColor(31, 119, 180);
        // Answers per second.
        let answered: Vec<(f64, f64)> = r
            .seconds
            .iter()
            .map(|s| (f64::from(s.at_s), s.answered as f64))
            .collect();
        let ymax = answered
            .iter()
            .map(|p| p.1)
            .fold(f64::from(r.rate), f64::max)
            * 1.1;
        let mut c =
            linear_panel(&panels[0], xmax, ymax, "answered / s", None).map_err(|e| err(&e))?;
        c.draw_series(LineSeries::new(answered, blue.stroke_width(2)))
            .map_err(|e| err(&e))?;
        c.draw_series(std::iter::once(PathElement::new(
            [(0.0, f64::from(r.rate)), (xmax, f64::from(r.rate))],
            BLACK.mix(0.4),
        )))
        .map_err(|e| err(&e))?;
        mark_faults(&mut c, &faults, 0.0, ymax).map_err(|e| err(&e))?;
        // p99, log scale.
        let p99: Vec<(f64, f64)> = r
            .seconds
            .iter()
            .filter_map(|s| Some((f64::from(s.at_s), s.p99_ms?.max(0.01))))
            .collect();
        let (lo, hi) = p99.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
            (lo.min(p.1), hi.max(p.1))
        });
        let (lo, hi) = if p99.is_empty() {
            (0.1, 1.0)
        } else {
            (lo * 0.8, hi * 1.25)
        };
        let mut c = ChartBuilder::on(&panels[1])
            .margin(8)
            .x_label_area_size(24)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..xmax, (lo..hi).log_scale())
            .map_err(|e| err(&e))?;
        c.configure_mesh()
            .y_desc("p99 ms (log)")
            .y_label_formatter(&|y| format!("{y:.2}"))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(|e| err(&e))?;
        c.draw_series(LineSeries::new(p99, blue.stroke_width(2)))
            .map_err(|e| err(&e))?;
        mark_faults(&mut c, &faults, lo, hi).map_err(|e| err(&e))?;
        // CPU: whose queue a late answer waited in.
        let orange = RGBColor(255, 127, 14);
        let server_cpu: Vec<(f64, f64)> = r
            .seconds
            .iter()
            .map(|s| (f64::from(s.at_s), s.cpu_pct))
            .collect();
        let client_cpu: Vec<(f64, f64)> = r
            .seconds
            .iter()
            .map(|s| (f64::from(s.at_s), s.client_cpu_pct))
            .collect();
        let top = server_cpu
            .iter()
            .chain(&client_cpu)
            .map(|p| p.1)
            .fold(100.0, f64::max)
            * 1.1;
        let mut c = linear_panel(&panels[2], xmax, top, "CPU % (server, client)", None)
            .map_err(|e| err(&e))?;
        c.draw_series(LineSeries::new(server_cpu, blue.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label("server")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], blue.stroke_width(2)));
        c.draw_series(LineSeries::new(client_cpu, orange.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label("client")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], orange.stroke_width(2)));
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| err(&e))?;
        mark_faults(&mut c, &faults, 0.0, top).map_err(|e| err(&e))?;
        // RSS.
        let rss: Vec<(f64, f64)> = r
            .seconds
            .iter()
            .filter(|s| s.rss_kib > 0)
            .map(|s| (f64::from(s.at_s), s.rss_kib as f64 / 1024.0))
            .collect();
        let top = rss.iter().map(|p| p.1).fold(1.0, f64::max) * 1.15;
        let mut c = linear_panel(
            &panels[3],
            xmax,
            top,
            "RSS MiB",
            Some("seconds (red: a fault)"),
        )
        .map_err(|e| err(&e))?;
        c.draw_series(LineSeries::new(rss, blue.stroke_width(2)))
            .map_err(|e| err(&e))?;
        mark_faults(&mut c, &faults, 0.0, top).map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok((file, svg))
}

/// One panel of a soak chart, its y axis linear from 0 to `top`, its mesh drawn; the x axis
/// is named on the bottom panel only (`x_desc`).
fn linear_panel<'a, 'b>(
    area: &'b DrawingArea<SVGBackend<'a>, Shift>,
    xmax: f64,
    top: f64,
    y_desc: &str,
    x_desc: Option<&str>,
) -> Result<ChartContext<'b, SVGBackend<'a>, Cartesian2d<RangedCoordf64, RangedCoordf64>>, String> {
    let mut c = ChartBuilder::on(area)
        .margin(8)
        .x_label_area_size(if x_desc.is_some() { 36 } else { 24 })
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..xmax, 0f64..top)
        .map_err(|e| e.to_string())?;
    let mut mesh = c.configure_mesh();
    if let Some(x_desc) = x_desc {
        mesh.x_desc(x_desc);
    }
    mesh.y_desc(y_desc)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(c)
}

/// A red line from `lo` to `hi` at each fault's time, over whatever the panel draws.
fn mark_faults<Y: Ranged<ValueType = f64>>(
    c: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, Y>>,
    faults: &[f64],
    lo: f64,
    hi: f64,
) -> Result<(), String> {
    for &x in faults {
        c.draw_series(std::iter::once(PathElement::new(
            [(x, lo), (x, hi)],
            RED.stroke_width(2),
        )))
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rate that is a share of the client's limit says so in the table.
    #[test]
    fn a_rate_of_a_client_limited_capacity_is_marked() {
        let row = |clients| Soak {
            variant: "thread-per-core".into(),
            rate: 83_200,
            duration_s: 600,
            capacity_is_the_clients: clients,
            ..Soak::default()
        };
        assert!(table(&[row(true)]).contains("| 83200 (≥cap) |"));
        assert!(table(&[row(false)]).contains("| 83200 |"));
    }

    /// A model given handler work (`--work-us`) is named with it, as the matrix names it.
    #[test]
    fn a_soak_with_handler_work_says_so() {
        let row = |work_us| Soak {
            variant: "prefork-eventloop".into(),
            work_us,
            ..Soak::default()
        };
        assert!(table(&[row(30)]).contains("| prefork-eventloop +30 µs |"));
        assert!(table(&[row(0)]).contains("| prefork-eventloop |"));
        // A soak that could not run is named the same way.
        let failed = Soak {
            missing: Some("FAILED: did not start".into()),
            ..row(30)
        };
        assert!(table(&[failed]).contains("| prefork-eventloop +30 µs |"));
    }
}
