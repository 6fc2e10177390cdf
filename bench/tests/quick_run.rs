//! `bench --quick` against one real server, checked through its results.json.

use std::process::Command;

#[test]
fn quick_run_on_one_variant_writes_figures() {
    let server = conformance::binary("prefork-eventloop");
    let bin_dir = server.parent().unwrap();
    let out = std::env::temp_dir().join(format!("archzoo-bench-{}", std::process::id()));
    let status = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "--quick",
            "--variants",
            "prefork-eventloop",
            "--keepalive",
            "on",
            "-c",
            "8",
        ])
        .arg("--bin-dir")
        .arg(bin_dir)
        .arg("--db")
        .arg(conformance::test_db())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(stdout.contains("| prefork-eventloop |"), "{stdout}");
    let dir = std::fs::read_dir(&out)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let cell = &json["cells"][0];
    assert_eq!(cell["variant"], "prefork-eventloop");
    assert!(cell["failure"].is_null(), "{cell}");
    let run = &cell["runs"][0];
    assert!(run["outcome"]["requests"].as_u64().unwrap() > 100, "{run}");
    assert_eq!(run["outcome"]["failed"], 0);
    assert!(
        run["server_cpu_us_per_req"].as_f64().unwrap() > 0.0,
        "{run}"
    );
    assert!(["server-bound", "client-bound", "neither"].contains(&run["verdict"].as_str().unwrap()));
    assert!(run["command"].as_str().unwrap().starts_with("ab "));
    assert!(!cell["worker_requests"].as_array().unwrap().is_empty());
    assert!(json["meta"]["machine"]["cpus"].as_u64().unwrap() >= 1);
    let mut csv = csv::Reader::from_path(dir.join("results.csv")).unwrap();
    let header = csv.headers().unwrap().clone();
    let row = csv.records().next().unwrap().unwrap();
    assert_eq!(row.len(), header.len());
    let column = |name: &str| {
        row.get(header.iter().position(|h| h == name).unwrap())
            .unwrap()
    };
    assert_eq!(
        (column("variant"), column("stack")),
        ("prefork-eventloop", "raw")
    );
    assert!(column("server_cpu_us_per_req").parse::<f64>().unwrap() > 0.0);
    assert!(dir.join("req_per_sec.svg").exists() && dir.join("cpu_us_per_req.svg").exists());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn idle_mode_holds_connections_and_reports_memory() {
    let server = conformance::binary("prefork-eventloop");
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "--idle-conns",
            "300",
            "--variants",
            "prefork-eventloop,prefork-blocking",
        ])
        .arg("--bin-dir")
        .arg(server.parent().unwrap())
        .arg("--db")
        .arg(conformance::test_db())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = stdout
        .lines()
        .find(|l| l.starts_with("| prefork-eventloop |"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        row.contains("| 300 |") && row.contains("300 of 300"),
        "{row}"
    );
    assert!(stdout.contains("one connection per worker"), "{stdout}");
}

#[test]
fn slowloris_attack_leaves_an_event_loop_serving() {
    let server = conformance::binary("prefork-eventloop");
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["--attack", "slowloris", "--quick", "--attack-conns", "64"])
        .args(["--variants", "prefork-eventloop"])
        .arg("--bin-dir")
        .arg(server.parent().unwrap())
        .arg("--db")
        .arg(conformance::test_db())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = stdout
        .lines()
        .find(|l| l.starts_with("| prefork-eventloop |"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    // "N of N": every probe answered while 64 slow connections were open.
    let probes: Vec<&str> = cells[5].split(" of ").collect();
    assert!(
        probes.len() == 2 && probes[0] == probes[1] && probes[0] != "0",
        "{row}"
    );
}
