//! `bench --soak` with `--chaos`: a 20-second soak of a multi-process row with a worker
//! killed at 5 s, and of a one-process row stopped for 1 s at 5 s — the fault reported at
//! its time, the rate back, and the client's counts reconciled with the schedule and the
//! server's own.

use bench::model::soak::{self, FaultKind, Soak};

mod support;

/// Runs a 20 s soak of `variant` with `chaos` and returns its row (and the page).
fn soak(variant: &str, workers: &str, chaos: &str) -> (Soak, String) {
    soak_with(variant, workers, chaos, &[])
}

/// [`soak`] with more flags (a workload, a rate).
fn soak_with(variant: &str, workers: &str, chaos: &str, more: &[&str]) -> (Soak, String) {
    let out_dir = std::env::temp_dir().join(format!(
        "archzoo-soak-test-{}-{}",
        std::process::id(),
        variant.replace('/', "-")
    ));
    let out_arg = out_dir.display().to_string();
    let mut args = vec![
        "--soak",
        "20s",
        "--chaos",
        chaos,
        "--variants",
        variant,
        "--workers",
        workers,
        "--keepalive",
        "on",
        "-c",
        "8",
        "--out",
        &out_arg,
    ];
    args.extend_from_slice(more);
    if !more.contains(&"--rate") {
        args.extend_from_slice(&["--rate", "400"]);
    }
    let out = support::bench_output(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let run_dir = support::run_dir(&out_dir);
    let results = run_dir.as_ref().map(|d| bench::model::Results::load(d));
    let page = run_dir
        .as_ref()
        .and_then(|d| std::fs::read_to_string(d.join("report.html")).ok())
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out_dir);
    assert!(out.status.success(), "{stdout}{stderr}");
    let mut results = results.unwrap().unwrap();
    assert_eq!(results.soak.len(), 1, "{stdout}");
    (results.soak.remove(0), page)
}

/// What every soak must show: 20 samples, the fault at 5 s, the rate back within 2 s of
/// it, and no request unaccounted for.
fn check(row: &Soak) {
    assert_eq!(row.missing, None, "{row:?}");
    assert_eq!(row.seconds.len(), 20);
    assert!(
        row.seconds.iter().all(|s| s.rss_kib > 0 && s.fds > 0),
        "every second sampled: {:?}",
        row.seconds
    );
    assert_eq!(row.faults.len(), 1);
    let f = &row.faults[0];
    assert_eq!(f.fault.at_s, 5.0);
    let back = f.recovered_after_ms.expect("the rate came back");
    assert!(back <= 2_000, "{f:?}");
    // The client's CPU is sampled beside the server's (its own process, on its own CPUs):
    // at 400 req/s neither is idle for long, and neither is near a full CPU.
    assert!(row.client_cpus >= 1, "{row:?}");
    for cpu in [
        |s: &soak::Second| s.cpu_pct,
        |s: &soak::Second| s.client_cpu_pct,
    ] {
        let busy = row.seconds[1..19].iter().filter(|s| cpu(s) > 0.0).count();
        assert!(busy >= 9, "{:?}", row.seconds);
        assert!(
            row.seconds.iter().all(|s| cpu(s) < 90.0),
            "{:?}",
            row.seconds
        );
    }
    // The calm seconds before the fault answered about the offered rate.
    for s in &row.seconds[1..4] {
        assert!((360..=440).contains(&s.answered), "{:?}", row.seconds);
    }
    // Nothing vanished: every request the schedule made due was answered or counted as
    // an error (oha's schedule may end a request or two either side of the deadline).
    assert!(row.vanished().abs() <= 2, "{row:?}");
    assert_eq!(row.sent, row.answered + row.errors);
}

#[test]
fn a_worker_killed_under_load_is_replaced_and_every_request_is_accounted_for() {
    let (row, page) = soak("prefork-eventloop", "2", "kill-worker@5s");
    check(&row);
    let f = &row.faults[0];
    assert_eq!(f.fault.kind, FaultKind::KillWorker);
    assert!(f.hit.starts_with("worker pid"), "{f:?}");
    // The supervisor forked another: two workers' sockets again at the end.
    let last = row.seconds.last().unwrap();
    assert!(last.sockets.len() >= 3, "master and two workers: {last:?}");
    // The client lost at most the dead worker's connections' requests in flight, and the
    // server counted every answer, the dead worker's too (its master reports what it
    // left in their shared counts) — and at most the lost requests more, which the dead
    // worker counted and could not answer.
    let counted = row.server_requests.unwrap();
    assert!(
        row.answered <= counted && counted <= row.answered + row.errors,
        "{row:?}"
    );
    assert!(row.errors <= 8, "{row:?}");
    assert!(page.contains("id=\"soak\""), "a soak section");
    assert!(page.contains("kill-worker@5s"), "the fault in its table");
}

#[test]
fn a_one_process_row_is_stopped_instead_and_catches_up() {
    let (row, _) = soak("work-stealing", "1", "stop@5s:1s");
    check(&row);
    let f = &row.faults[0];
    assert_eq!(f.fault.kind, FaultKind::StopWorker { for_ms: 1000 });
    assert!(f.hit.contains("one process"), "{f:?}");
    // Stopped, nothing was lost: every request waited and was answered, a second late.
    assert_eq!(row.errors, 0, "{row:?}");
    assert_eq!(f.lost, 0, "{f:?}");
    // Less what the client's own lateness hid: a starved oha stamps requests due late.
    assert!(f.p99_after_ms.unwrap() + f.client_lag_ms >= 900.0, "{f:?}");
    // A one-process server counts every answer it gave.
    assert_eq!(row.server_requests, Some(row.answered), "{row:?}");
}

/// A load balancer restarting: every client connection cut at once (`ss -K`). The client
/// reconnects; at most the requests in flight on the 8 connections fail, and the rate is
/// back at once.
#[test]
fn every_client_connection_cut_at_once_is_survived() {
    let (row, _) = soak("prefork-eventloop", "1", "close-conns@5s");
    check(&row);
    let f = &row.faults[0];
    assert_eq!(f.fault.kind, FaultKind::CloseConns);
    let cut: u32 = f
        .hit
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{f:?}"));
    assert!(cut >= 1, "{f:?}");
    assert!(row.errors <= 8, "{row:?}");
    assert!(f.lost <= 8, "{f:?}");
}

/// PostgreSQL restarted under `/pg` load: the server's pool reconnects, and the requests
/// that met the outage are answered with an error or late, never lost.
#[test]
fn a_database_restarted_under_load_is_reconnected_to() {
    let (row, _) = soak_with(
        "work-stealing",
        "1",
        "restart-db@5s",
        &["--workloads", "pg", "--rate", "200"],
    );
    assert_eq!(row.missing, None, "{row:?}");
    assert_eq!(row.seconds.len(), 20);
    let f = &row.faults[0];
    assert_eq!(f.fault.kind, FaultKind::RestartDb);
    assert!(f.hit.starts_with("PostgreSQL restarted"), "{f:?}");
    // Back: the last five seconds answered about the offered rate.
    for s in &row.seconds[15..] {
        assert!((170..=230).contains(&s.answered), "{:?}", row.seconds);
    }
    assert!(f.recovered_after_ms.is_some(), "{f:?}");
    assert!(row.vanished().abs() <= 2, "{row:?}");
    assert_eq!(row.sent, row.answered + row.errors);
}

#[test]
fn a_soak_without_one_rate_or_with_a_late_fault_is_refused() {
    for (args, says) in [
        (&["--soak", "20s"][..], "--soak needs one --rate"),
        (
            &["--soak", "soon", "--rate", "400"][..],
            "a duration such as",
        ),
        (
            &[
                "--soak",
                "10s",
                "--rate",
                "400",
                "--chaos",
                "kill-worker@30s",
            ][..],
            "falls after the soak",
        ),
        (
            &["--soak", "10s", "--rate", "400", "--chaos", "nap@3s"][..],
            "unknown fault",
        ),
        (
            &["--soak", "10s", "--rate", "400", "--chaos", "restart-db@3s"][..],
            "give --workloads pg",
        ),
        (&["--rate", "80%"][..], "a --soak's rate only"),
    ] {
        let out = support::bench_output(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
