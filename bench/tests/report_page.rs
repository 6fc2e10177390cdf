//! report.html in a real browser: `bench --report` renders the page from recorded
//! results.json files (`fixtures/report-*/`: real runs of this harness), headless Chromium
//! loads it from the file system, runs its script and prints the DOM it built and a
//! screenshot; the tests read what Chromium made of the page — every chart with its bars,
//! the client-bound marking where the run had client-bound cells, every link and image
//! resolving, the table sorted on request — not what the template meant to write.
//!
//! Chromium is Debian's `chromium`, installed by scripts/test; as root it needs
//! `--no-sandbox`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bench::model::cell::Verdict;
use bench::model::Results;
use bench::write::chart::METRICS;

/// How long Chromium may take to load and print one page.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(90);

/// A copy of a fixture run in a folder of its own, removed at the end.
struct Run(PathBuf);

impl Run {
    fn of(fixture: &str) -> Run {
        // Tests run in parallel, several on one fixture: a folder each.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "archzoo-report-{fixture}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let from = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(fixture);
        for entry in std::fs::read_dir(&from).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
        Run(dir)
    }

    fn results(&self) -> Results {
        Results::load(&self.0).unwrap()
    }

    /// `bench --report` on the run; returns the page's text.
    fn render(&self) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_bench"))
            .arg("--report")
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(self.0.join("report.html")).unwrap()
    }

    fn url(&self, fragment: &str) -> String {
        format!("file://{}/report.html{fragment}", self.0.display())
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn chromium() -> PathBuf {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH")?
                .to_str()?
                .split(':')
                .map(|d| Path::new(d).join(name))
                .find(|p| p.is_file())
        })
        .expect("headless Chromium is not installed (scripts/test installs Debian's chromium)")
}

/// Runs headless Chromium with `args` in its own process group, killed whole if it
/// outlives [`BROWSER_TIMEOUT`]; returns its standard output.
fn browser(profile: &Path, args: &[String]) -> String {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            // Time for the page's script to run before the DOM is printed.
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > BROWSER_TIMEOUT {
            // SAFETY: kill(2) has no memory effects; the group is the browser this test
            // started in a group of its own.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!("Chromium did not finish within {BROWSER_TIMEOUT:?}: {args:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// The DOM Chromium built from the page at `url`, after its script ran.
fn dom(run: &Run, url: &str) -> String {
    let dom = browser(&run.0.join(".chromium"), &["--dump-dom".into(), url.into()]);
    assert!(dom.contains("</html>"), "no DOM from Chromium: {dom}");
    dom
}

/// The opening tags `<name …>` in `html`, in order.
fn tags<'a>(html: &'a str, name: &str) -> Vec<&'a str> {
    let open = format!("<{name}");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&open) {
        let tail = &rest[at..];
        let after = tail.as_bytes().get(open.len()).copied();
        let end = tail.find('>').map_or(tail.len(), |e| e + 1);
        if matches!(after, Some(b' ' | b'>' | b'/' | b'\n')) {
            out.push(&tail[..end]);
        }
        rest = &tail[end.max(1)..];
    }
    out
}

/// The value of attribute `name` in an opening tag.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let at = tag.find(&key)? + key.len();
    tag[at..].split('"').next()
}

fn has_class(tag: &str, class: &str) -> bool {
    attr(tag, "class").is_some_and(|c| c.split_whitespace().any(|c| c == class))
}

/// The text from the element opening at `start` (`<svg id=…`) to its closing tag.
fn element<'a>(html: &'a str, start: &str, close: &str) -> &'a str {
    let at = html
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in the page"));
    let end = html[at..].find(close).expect("a closed element") + close.len();
    &html[at..at + end]
}

#[test]
fn every_chart_is_drawn_with_its_bars_and_marks_client_bound_ones() {
    let run = Run::of("report-matrix");
    run.render();
    let results = run.results();
    let dom = dom(&run, &run.url(""));
    let mut charts = 0;
    for metric in &METRICS {
        let with_figure: Vec<_> = results
            .cells
            .iter()
            .filter(|c| (metric.figure)(c).is_some())
            .collect();
        let start = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart bars\" id=\"chart-{}\"",
            metric.id
        );
        if with_figure.is_empty() {
            assert!(
                !dom.contains(&start),
                "{}: a chart without figures",
                metric.id
            );
            continue;
        }
        charts += 1;
        let svg = element(&dom, &start, "</svg>");
        let bars: Vec<&str> = tags(svg, "rect")
            .into_iter()
            .filter(|t| has_class(t, "bar"))
            .collect();
        assert_eq!(bars.len(), with_figure.len(), "{}: bars", metric.id);
        for bar in &bars {
            let width: f64 = attr(bar, "width").unwrap().parse().unwrap();
            assert!(width >= 1.0, "{}: an invisible bar {bar}", metric.id);
            let colour = attr(bar, "fill").unwrap();
            assert!(colour.starts_with('#'), "{bar}");
        }
        // One colour per server: the same server's bars share it, different servers differ.
        let mut colours: Vec<(String, String)> = Vec::new();
        for row in svg.split("<g class=\"row\"").skip(1) {
            let server = row.split('"').nth(1).unwrap().to_string();
            if let Some(bar) = tags(row, "rect").into_iter().find(|t| has_class(t, "bar")) {
                let colour = attr(bar, "fill").unwrap().to_string();
                match colours.iter().find(|(s, _)| *s == server) {
                    Some((_, c)) => assert_eq!(*c, colour, "{server}: two colours"),
                    None => {
                        assert!(
                            !colours.iter().any(|(_, c)| *c == colour),
                            "{server} shares {colour}"
                        );
                        colours.push((server, colour));
                    }
                }
            }
        }
        let values = svg.matches("<text class=\"value\"").count();
        assert_eq!(values, bars.len(), "{}: a value on every bar", metric.id);
        let client_bound = with_figure
            .iter()
            .filter(|c| {
                c.median()
                    .is_some_and(|r| r.verdict == Verdict::ClientBound)
            })
            .count();
        let hatched = bars.iter().filter(|t| has_class(t, "client-bound")).count();
        if metric.bounded_by_client {
            assert!(
                client_bound > 0,
                "the fixture has no client-bound cell to check"
            );
            assert_eq!(hatched, client_bound, "{}: hatched bars", metric.id);
            assert_eq!(
                svg.matches("fill=\"url(#hatch-").count(),
                client_bound + 1,
                "{}: each client-bound bar hatched, and the legend's swatch",
                metric.id
            );
            assert!(svg.contains("client-bound: only a lower bound (≥)"));
            assert_eq!(
                svg.matches(">≥ ").count(),
                client_bound,
                "≥ before each lower bound"
            );
        } else {
            assert_eq!(
                hatched, 0,
                "{}: CPU per request is measured either way",
                metric.id
            );
        }
        // Whiskers where a cell had several repetitions.
        let whiskers = tags(svg, "path")
            .into_iter()
            .filter(|t| has_class(t, "whisker"))
            .count();
        let ranged = with_figure
            .iter()
            .filter(|c| (metric.figure)(c).unwrap().range.is_some())
            .count();
        assert_eq!(whiskers, ranged, "{}: whiskers", metric.id);
        // The reading under it.
        let figure = element(
            &dom,
            &format!("<figure class=\"chart\" id=\"figure-{}\"", metric.id),
            "</figure>",
        );
        assert!(figure.contains("<figcaption>"), "{}: no reading", metric.id);
    }
    assert!(
        charts >= 3,
        "req/s, CPU and system calls at least: {charts}"
    );

    // The table: a row per cell, the verdict in a word and a colour class.
    let table = element(&dom, "<table class=\"sortable matrix\"", "</table>");
    let body = element(table, "<tbody>", "</tbody>");
    assert_eq!(tags(body, "tr").len(), results.cells.len());
    for (verdict, word) in [
        (Verdict::ClientBound, "client-bound (lower bound)"),
        (Verdict::ServerBound, "server-bound"),
        (Verdict::Neither, "neither"),
    ] {
        let cells = results
            .cells
            .iter()
            .filter(|c| c.median().is_some_and(|r| r.verdict == verdict))
            .count();
        let class = format!("class=\"verdict {}\">{word}<", verdict.label());
        assert_eq!(body.matches(&class).count(), cells, "{word}");
    }
    let failed = results
        .cells
        .iter()
        .filter(|c| c.failure.as_deref().is_some_and(|f| !f.starts_with("n/a")))
        .count();
    assert!(failed > 0, "the fixture has a failed cell to show");
    assert_eq!(body.matches("<tr class=\"failed\">").count(), failed);
}

#[test]
fn no_link_or_image_is_broken_and_nothing_comes_from_the_network() {
    for fixture in ["report-matrix", "report-open-loop", "report-idle"] {
        let run = Run::of(fixture);
        run.render();
        let dom = dom(&run, &run.url(""));
        let ids: Vec<&str> = dom
            .split(" id=\"")
            .skip(1)
            .map(|s| s.split('"').next().unwrap())
            .collect();
        let mut checked = 0;
        for tag in ["a", "img", "script", "link", "use", "image", "iframe"] {
            for t in tags(&dom, tag) {
                for name in ["href", "src", "xlink:href"] {
                    let Some(target) = attr(t, name) else {
                        continue;
                    };
                    checked += 1;
                    assert!(
                        !target.contains("://"),
                        "{fixture}: {t} reaches the network"
                    );
                    if let Some(id) = target.strip_prefix('#') {
                        assert!(ids.contains(&id), "{fixture}: {t}: no element #{id}");
                    } else {
                        let file = target.split('#').next().unwrap();
                        assert!(run.0.join(file).is_file(), "{fixture}: {t}: no file {file}");
                    }
                }
            }
        }
        assert!(checked > 3, "{fixture}: {checked} links");
        // Fill patterns too: every url(#…) names an element of the page.
        for reference in dom.split("url(#").skip(1) {
            let id = reference.split(')').next().unwrap();
            assert!(ids.contains(&id), "{fixture}: url(#{id}) names nothing");
        }
    }
}

#[test]
fn the_table_sorts_on_request() {
    let run = Run::of("report-matrix");
    run.render();
    for (direction, word) in [("asc", "ascending"), ("desc", "descending")] {
        let dom = dom(&run, &run.url(&format!("#sort=cpu-s-req-{direction}")));
        let table = element(&dom, "<table class=\"sortable matrix\"", "</table>");
        let heads = tags(element(table, "<thead>", "</thead>"), "th");
        let column = heads
            .iter()
            .position(|t| attr(t, "data-key") == Some("cpu-s-req"))
            .expect("a CPU µs/req column");
        assert_eq!(attr(heads[column], "aria-sort"), Some(word));
        let mut figures: Vec<Option<f64>> = Vec::new();
        for row in element(table, "<tbody>", "</tbody>").split("<tr").skip(1) {
            let cells = tags(row, "td");
            figures.push(
                cells
                    .get(column)
                    .filter(|t| !has_class(t, "missing"))
                    .and_then(|t| attr(t, "data-sort"))
                    .map(|v| v.parse().unwrap()),
            );
        }
        let measured: Vec<f64> = figures.iter().map_while(|f| *f).collect();
        assert!(measured.len() > 3, "{figures:?}");
        assert!(
            figures[measured.len()..].iter().all(Option::is_none),
            "rows without the figure go last: {figures:?}"
        );
        let ordered = measured.windows(2).all(|w| match direction {
            "asc" => w[0] <= w[1],
            _ => w[0] >= w[1],
        });
        assert!(ordered, "{direction}: {measured:?}");
    }
}

/// Set-up every cell shares (one stack, one worker count, one concurrency) is said once
/// above the table, and a figure no row has (imbalance, with one worker) is no column: the
/// table fits a window. Every row still spans every column, failed rows included.
#[test]
fn the_table_says_once_what_every_cell_shares() {
    let run = Run::of("report-matrix");
    run.render();
    let results = run.results();
    assert!(results
        .cells
        .iter()
        .all(|c| c.workers == 1 && c.connections == 64));
    let dom = dom(&run, &run.url(""));
    assert!(
        dom.contains("Every cell: stack raw · workers 1 · c 64"),
        "no line for the shared set-up"
    );
    let table = element(&dom, "<table class=\"sortable matrix\"", "</table>");
    let heads = tags(element(table, "<thead>", "</thead>"), "th");
    let keys: Vec<&str> = heads.iter().filter_map(|t| attr(t, "data-key")).collect();
    for gone in ["stack", "workers", "c", "imbalance"] {
        assert!(!keys.contains(&gone), "{gone} is a column: {keys:?}");
    }
    for kept in ["variant", "workload", "keep-alive", "cpu-s-req", "verdict"] {
        assert!(keys.contains(&kept), "{kept} is missing: {keys:?}");
    }
    let mut failed = 0;
    for row in element(table, "<tbody>", "</tbody>").split("<tr").skip(1) {
        let spans: usize = tags(row, "td")
            .iter()
            .map(|t| attr(t, "colspan").map_or(1, |n| n.parse().unwrap()))
            .sum();
        assert_eq!(spans, heads.len(), "a row off the columns: {row}");
        failed += usize::from(row.contains("FAILED"));
    }
    assert!(failed > 0, "the fixture has failed rows to check");
    assert!(
        !dom.contains("imbalance:"),
        "the legend explains a hidden column"
    );
}

#[test]
fn the_open_loop_page_has_its_latency_curves() {
    let run = Run::of("report-open-loop");
    run.render();
    let dom = dom(&run, &run.url(""));
    let figures = dom.matches("<figure class=\"chart latency\"").count();
    assert!(figures >= 1, "no latency chart");
    let section = element(&dom, "<h2 id=\"latency\">", "</figure>");
    // A line per server (plotters draws them as polylines) in the server's colour.
    assert!(section.contains("<polyline"), "{section}");
    let servers: Vec<String> = {
        let mut s: Vec<String> = run
            .results()
            .cells
            .iter()
            .map(|c| c.variant.clone())
            .collect();
        s.dedup();
        s
    };
    for server in &servers {
        assert!(section.contains(server.as_str()), "{server} has no line");
    }
}

/// A run that measured something other than the matrix (here `--idle-conns`, recorded):
/// its page has that table, with how to read it, and no empty matrix or charts.
#[test]
fn a_run_without_cells_shows_its_own_table() {
    let run = Run::of("report-idle");
    run.render();
    let results = run.results();
    assert!(results.cells.is_empty() && !results.idle.is_empty());
    let dom = dom(&run, &run.url(""));
    for absent in ["id=\"matrix\"", "id=\"charts\"", "href=\"results.csv\""] {
        assert!(!dom.contains(absent), "{absent} in a page without cells");
    }
    let section = element(&dom, "<h2 id=\"idle\"", "</table>");
    assert!(
        section.contains("what one idle connection costs it"),
        "{section}"
    );
    for row in &results.idle {
        let tr = section
            .split("<tr>")
            .find(|tr| tr.contains(&format!("<td>{}</td>", row.variant)))
            .unwrap_or_else(|| panic!("no row for {}: {section}", row.variant));
        match &row.missing {
            Some(why) => assert!(tr.contains(why.as_str()), "{tr}"),
            None => assert!(
                tr.contains(&format!(">{}<", row.bytes_per_conn))
                    && tr.contains(&format!("{0} of {0}", row.held)),
                "{tr}"
            ),
        }
    }
    let nav = element(&dom, "<nav>", "</nav>");
    assert!(
        nav.contains("href=\"#idle\"") && nav.contains("href=\"idle.csv\""),
        "{nav}"
    );
    assert!(
        dom.contains("bench itself, not pinned"),
        "the client, as recorded"
    );
}

#[test]
fn a_screenshot_of_the_page_is_taken() {
    let run = Run::of("report-matrix");
    run.render();
    let png = run.0.join("screenshot.png");
    browser(
        &run.0.join(".chromium"),
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1280,2400".into(),
            run.url(""),
        ],
    );
    let bytes = std::fs::read(&png).expect("Chromium wrote no screenshot");
    assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
    // A blank page of that size compresses to a few kilobytes; the report is far more.
    assert!(
        bytes.len() > 50_000,
        "{} bytes: an empty page?",
        bytes.len()
    );
}

#[test]
fn rendering_twice_gives_the_same_page() {
    let run = Run::of("report-matrix");
    assert_eq!(run.render(), run.render());
}

#[test]
fn a_folder_without_results_is_one_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["--report", "/nonexistent/archzoo-run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("results.json"), "{stderr}");
}

#[test]
fn the_readme_gives_each_charts_reading_word_for_word() {
    // The README links the harness reference, where the page is described: the two
    // together are what a reader of the README gets.
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .unwrap()
        + &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/bench.md"))
            .unwrap();
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let readme = flat(&readme);
    for reading in METRICS
        .iter()
        .map(|m| m.reading)
        .chain([bench::write::chart::LATENCY_READING])
    {
        assert!(readme.contains(&flat(reading)), "README lacks: {reading}");
    }
}
