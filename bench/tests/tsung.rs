//! Test hosts (network namespaces on 10.77.203.0/24, made and removed by bench itself):
//! `--client tsung --client-hosts N`, Tsung as a distributed client on them, and `--link
//! veth`, one client across a veth from its server. Needs root (CAP_NET_ADMIN) and Tsung,
//! which scripts/test installs. The tests take turns: the test hosts have fixed names, one
//! set per machine at a time.

use std::process::Command;
use std::sync::Mutex;

use bench::measure::hosts;

mod support;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The namespaces, links and Erlang processes a run could leave behind.
fn leftovers() -> Vec<String> {
    let text = |argv: &[&str]| {
        Command::new(argv[0])
            .args(&argv[1..])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    let mut left = hosts::existing();
    left.extend(
        text(&["ip", "-o", "link", "show"])
            .lines()
            .filter(|l| l.contains(hosts::PREFIX))
            .map(str::to_string),
    );
    // Tsung's nodes and controller are Erlang VMs (beam.smp) started by `tsung`.
    left.extend(
        text(&[
            "pgrep",
            "-a",
            "-f",
            "tsung_controller|tsung[0-9]+@10\\.77\\.203",
        ])
        .lines()
        .map(str::to_string),
    );
    left
}

/// The results.json of the one run written under `out`.
fn results_json(out: &std::path::Path) -> serde_json::Value {
    let run_dir = support::run_dir(out).unwrap();
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap()).unwrap()
}

fn bench(args: &[&str]) -> std::process::Output {
    support::bench_output(args)
}

#[test]
fn two_test_hosts_load_prefork_eventloop_and_leave_nothing_behind() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        Command::new("tsung").arg("-v").output().is_ok(),
        "tsung is not installed (scripts/test installs it)"
    );
    let epmd_before = hosts::epmd_pids();
    let out_dir = std::env::temp_dir().join(format!("archzoo-tsung-test-{}", std::process::id()));
    let out = bench(&[
        "--quick",
        "--variants",
        "prefork-eventloop",
        "--client",
        "tsung",
        "--client-hosts",
        "2",
        "--keepalive",
        "on,off",
        "-c",
        "8",
        "--out",
        &out_dir.display().to_string(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("test host azh-c1 at 10.77.203.11"),
        "{stderr}"
    );
    let json = results_json(&out_dir);
    let _ = std::fs::remove_dir_all(&out_dir);
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{json}");
    for cell in cells {
        assert!(cell["failure"].is_null(), "{cell}");
        let run = &cell["runs"][0];
        let outcome = &run["outcome"];
        assert!(outcome["requests"].as_u64().unwrap() > 100, "{outcome}");
        assert_eq!(outcome["failed"], 0, "{outcome}");
        assert_eq!(outcome["non_2xx"], 0, "{outcome}");
        for p in ["p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"] {
            assert!(outcome[p].as_f64().unwrap() > 0.0, "{p}: {outcome}");
        }
        // Both hosts sent, and their shares add up to the whole.
        let hosts = outcome["hosts"].as_array().unwrap();
        let names: Vec<&str> = hosts.iter().map(|h| h["host"].as_str().unwrap()).collect();
        assert_eq!(names, ["azh-c1", "azh-c2"], "{outcome}");
        let sum: u64 = hosts.iter().map(|h| h["requests"].as_u64().unwrap()).sum();
        assert_eq!(sum, outcome["requests"].as_u64().unwrap());
        for h in hosts {
            assert!(h["requests"].as_u64().unwrap() > 0, "{h}");
            assert!(h["cpu_pct"].as_f64().unwrap() > 0.0, "{h}");
        }
        assert!(
            run["server_cpu_us_per_req"].as_f64().unwrap() > 0.0,
            "{run}"
        );
        assert!(
            run["command"].as_str().unwrap().starts_with("tsung -f "),
            "{run}"
        );
    }
    assert_eq!(leftovers(), Vec::<String>::new(), "left behind");
    let new_epmd: Vec<String> = hosts::epmd_pids()
        .into_iter()
        .filter(|p| !epmd_before.contains(p))
        .collect();
    assert_eq!(new_epmd, Vec::<String>::new(), "epmd left running");
}

/// The same cell over loopback and over veth in one run: both rows measured, the server
/// in its test host for the veth one, the two side by side in their own table, each
/// side's receive path on its own CPUs (softirq on the server's CPUs over veth), and
/// nothing left behind.
#[test]
fn the_same_cell_runs_over_loopback_and_over_veth_in_one_run() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out_dir = std::env::temp_dir().join(format!("archzoo-link-test-{}", std::process::id()));
    let out = bench(&[
        "--quick",
        "--variants",
        "prefork-eventloop",
        "--client",
        "wrk",
        "--keepalive",
        "on",
        "-c",
        "4",
        "--link",
        "loopback,veth",
        "--out",
        &out_dir.display().to_string(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("the client in test host azh-c1 at 10.77.203.11"),
        "{stderr}"
    );
    let json = results_json(&out_dir);
    let page = support::run_dir(&out_dir).unwrap().join("report.html");
    let page = std::fs::read_to_string(page).unwrap();
    let _ = std::fs::remove_dir_all(&out_dir);
    let cells = json["cells"].as_array().unwrap();
    let links: Vec<&str> = cells.iter().map(|c| c["link"].as_str().unwrap()).collect();
    assert_eq!(links, ["loopback", "veth"], "{json}");
    for cell in cells {
        assert!(cell["failure"].is_null(), "{cell}");
        let run = &cell["runs"][0];
        assert!(run["outcome"]["requests"].as_u64().unwrap() > 100, "{run}");
        assert!(
            run["server_cpu_us_per_req"].as_f64().unwrap() > 0.0,
            "{run}"
        );
        assert!(
            run["cpu_sets"]["server_busy_us"].as_f64().unwrap() > 0.0,
            "{run}"
        );
    }
    // The veth row's server listened in its test host, the loopback row's here.
    let command = |i: usize| cells[i]["server_command"].as_str().unwrap_or("");
    assert!(!command(0).contains("10.77.203.2"), "{}", command(0));
    assert!(command(1).contains("10.77.203.2"), "{}", command(1));
    // Over veth the server's CPU received the requests (RPS): softirq there.
    assert!(
        cells[1]["runs"][0]["cpu_sets"]["server_softirq_us"]
            .as_f64()
            .unwrap()
            > 0.0,
        "{}",
        cells[1]
    );
    let row = |link: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with("| prefork-eventloop |") && l.contains(&format!("| {link} |")))
            .unwrap_or_else(|| panic!("no {link} row: {stdout}"))
            .to_string()
    };
    assert!(!row("loopback").contains("FAILED") && !row("veth").contains("FAILED"));
    assert!(stdout.contains("| req/s loopback · veth |"), "{stdout}");
    assert!(page.contains("id=\"link\""), "no link section in the page");
    assert_eq!(leftovers(), Vec::<String>::new(), "left behind");
}

#[test]
fn tsung_without_its_hosts_is_one_clear_error() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for (args, says) in [
        (
            &["--client", "tsung"][..],
            "--client tsung needs --client-hosts",
        ),
        (
            &["--client", "wrk", "--client-hosts", "2"][..],
            "--client-hosts is for --client tsung",
        ),
        (
            &["--client", "tsung", "--client-hosts", "a,b"][..],
            "needs --server-addr",
        ),
        (
            &["--client", "tsung", "--client-hosts", "a;b"][..],
            "not 'a;b'",
        ),
        (
            &[
                "--client",
                "tsung",
                "--client-hosts",
                "a,b",
                "--server-addr",
                "10.77.203.99",
                "--idle-conns",
                "10",
            ][..],
            "--idle-conns across real hosts: not yet",
        ),
        (
            &["--server-addr", "10.77.203.99"][..],
            "--server-addr is for real client hosts",
        ),
        (
            &[
                "--client",
                "tsung",
                "--client-hosts",
                "2",
                "--link",
                "loopback",
            ][..],
            "--link loopback is for ab, wrk and oha",
        ),
        (
            &["--link", "veth", "--url", "http://127.0.0.1:1/"][..],
            "--link veth runs the servers in a test host: not with --url",
        ),
        (
            &["--link", "veth", "--idle-conns", "10"][..],
            "not with --idle-conns or --attack",
        ),
        (
            &["--link", "loopback,veth", "--slo", "p99=5ms"][..],
            "run over one link",
        ),
        (
            &[
                "--client",
                "tsung",
                "--client-hosts",
                "2",
                "--server-addr",
                "10.77.203.99",
            ][..],
            "test hosts have their own addresses",
        ),
    ] {
        let out = bench(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(
            stderr.lines().filter(|l| l.contains("error")).count(),
            1,
            "{stderr}"
        );
    }
    assert_eq!(leftovers(), Vec::<String>::new(), "left behind");
}

/// `--idle-conns` across test hosts: each host's Tsung node holds its share from its own
/// address, and every connection is answered again after the hold — on a model that
/// spreads over processes, a one-process model, and a peer that listens on the server
/// host's address (`{host}`): a tiny keep-alive server written for the test.
#[test]
fn idle_connections_held_across_three_hosts_are_all_answered() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out_dir = std::env::temp_dir().join(format!("archzoo-tsung-idle-{}", std::process::id()));
    let script = support::tiny_server(&out_dir);
    let peer = format!("tiny=python3 {} {{host}} {{port}}", script.display());
    let results = out_dir.join("results");
    let out = bench(&[
        "--idle-conns",
        "300",
        "--variants",
        "prefork-eventloop,work-stealing",
        "--peer",
        &peer,
        "--client",
        "tsung",
        "--client-hosts",
        "3",
        "--out",
        &results.display().to_string(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}{stderr}");
    let json = results_json(&results);
    let _ = std::fs::remove_dir_all(&out_dir);
    let rows = json["idle"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["variant"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["prefork-eventloop", "work-stealing", "tiny"],
        "{stdout}"
    );
    for row in rows {
        assert!(row["missing"].is_null(), "{row}");
        assert_eq!(row["held"], 300, "{row}");
        assert_eq!(row["first_round"], 300, "{row}");
        assert_eq!(row["answered"], 300, "{row}");
        assert_eq!(row["closed_idle"], 0, "{row}");
        assert!(row["round_max_ms"].as_f64().unwrap() > 0.0, "{row}");
        // Each host held its share, from its own address.
        let hosts = row["hosts"].as_array().unwrap();
        let names: Vec<&str> = hosts.iter().map(|h| h["host"].as_str().unwrap()).collect();
        assert_eq!(names, ["azh-c1", "azh-c2", "azh-c3"], "{row}");
        for h in hosts {
            assert_eq!(h["requests"], 100, "{row}");
        }
    }
    assert!(
        stdout.contains("| prefork-eventloop | azh-c2 | 100 |"),
        "{stdout}"
    );
    assert_eq!(leftovers(), Vec::<String>::new(), "left behind");
}

/// The Erlang VMs (a Tsung node; not the port mapper `epmd`, which outlives each node) of
/// test host `ns` now.
fn pids_in(ns: &str) -> Vec<i32> {
    Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .filter(|p| {
                    std::fs::read_to_string(format!("/proc/{p}/comm"))
                        .is_ok_and(|c| c.trim() == "beam.smp")
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A client host whose Tsung node dies mid-run (killed here, 3 s into the measured
/// repetition) is reported in its cell — a note and its row under the table — and the
/// run still ends, with the other host's figures and nothing left behind.
#[test]
fn a_client_host_killed_mid_run_is_reported_and_the_run_ends() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out_dir = std::env::temp_dir().join(format!("archzoo-tsung-kill-{}", std::process::id()));
    let mut cmd = support::bench_command(&[
        "--variants",
        "prefork-eventloop",
        "--client",
        "tsung",
        "--client-hosts",
        "2",
        "--keepalive",
        "on",
        "-c",
        "8",
        "--reps",
        "1",
        "--duration",
        "8",
        "--out",
        &out_dir.display().to_string(),
    ]);
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The warm-up's node comes and goes first; the measured repetition's is the second
    // to appear on the host. Bounded: 60 s in all.
    let started = std::time::Instant::now();
    let mut appearances = 0;
    let mut was_up = false;
    let mut killed = false;
    while started.elapsed() < std::time::Duration::from_secs(60) {
        let up = !pids_in("azh-c2").is_empty();
        if up && !was_up {
            appearances += 1;
        }
        was_up = up;
        if up && appearances == 2 {
            std::thread::sleep(std::time::Duration::from_secs(3));
            for pid in pids_in("azh-c2") {
                // SAFETY: kill with a pid just read from the test host.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            killed = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let _ = std::fs::remove_dir_all(&out_dir);
    assert!(killed, "no second node on azh-c2 within 60 s: {stderr}");
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("client host azh-c2: its Tsung node stopped"),
        "{stdout}"
    );
    assert!(stdout.contains("| azh-c2 (node stopped at "), "{stdout}");
    // The other host sent its share to the end.
    let c1 = stdout
        .lines()
        .find(|l| l.contains("| azh-c1 |"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let requests: u64 = c1.split('|').nth(6).unwrap().trim().parse().unwrap();
    assert!(requests > 1000, "{c1}");
    assert_eq!(leftovers(), Vec::<String>::new(), "left behind");
}
