//! `bench --post`: the published comparisons replayed end to end — the list, and a quick
//! replay of a hello-world post (both keep-alive modes, as it ran them) and of the
//! CPU-bound `/sum` post, each with its published figures beside the replay's ranks, each
//! server's capacity at the latency target, an original brought with `--peer NAME@MODEL`
//! in its row, and a verdict for every conclusion it printed.

use bench::model::post::{Finding, POSTS};

mod support;

#[test]
fn the_list_names_the_five_posts() {
    let out = support::bench_output(&["--post", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert_eq!(stdout.lines().count(), 5, "{stdout}");
    for post in POSTS {
        assert!(stdout.contains(post.name), "{stdout}");
    }
    let bad = support::bench_output(&["--post", "one-process", "--client", "wrk"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not with --client"));
    // A --peer must be an original a replayed post names, beside that row's model.
    for (peer, says) in [
        ("nobody=python3 x.py {port}", "stands for no server"),
        (
            "workerman@work-stealing=php start.php {port}",
            "with prefork-eventloop",
        ),
    ] {
        let bad = support::bench_output(&["--post", "one-process", "--peer", peer]);
        let stderr = String::from_utf8_lossy(&bad.stderr);
        assert_eq!(bad.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

#[test]
fn a_hello_world_post_and_the_sum_post_are_replayed_with_a_verdict_each() {
    let out_dir = std::env::temp_dir().join(format!("archzoo-posts-test-{}", std::process::id()));
    // Workerman as a user who has it would bring it (here the tests' tiny Python server).
    let tiny = support::tiny_server(&out_dir.join("peer"));
    let workerman = format!(
        "workerman@prefork-eventloop=python3 {} 127.0.0.1 {{port}}",
        tiny.display()
    );
    let out = support::bench_output(&[
        "--post",
        "one-process,cpu-bound",
        "--quick",
        "--peer",
        &workerman,
        "--out",
        &out_dir.join("runs").display().to_string(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}{stderr}");
    let run_dir = support::run_dir(&out_dir.join("runs")).unwrap();
    let results = bench::model::Results::load(&run_dir).unwrap();
    let page = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    let _ = std::fs::remove_dir_all(&out_dir);
    assert_eq!(
        results.meta["posts"],
        serde_json::json!(["one-process", "cpu-bound"])
    );
    assert!(results.cells.iter().all(|c| c.post.is_some()));
    // Both of post C's modes as it ran them; post E's other mode as the run it did not make.
    assert!(
        stdout.contains("keep-alive (`-k`) — as the post ran it"),
        "{stdout}"
    );
    assert!(
        stdout.contains("keep-alive (`-k`) — the run the post did not make"),
        "{stdout}"
    );
    // The published figures with their ranks, beside the replay's.
    for published in [
        "| 30120 (1) |",
        "| 125986 (1) |",
        "| 19995 (5) |",
        "| 9453 (1) |",
        "| 3822 (5) |",
    ] {
        assert!(stdout.contains(published), "{published}: {stdout}");
    }
    // Every model row measured: a replay figure with its rank, and a server CPU figure.
    for post in ["one-process", "cpu-bound"] {
        let replayed: Vec<_> = results
            .cells
            .iter()
            .filter(|c| c.post.as_deref() == Some(post))
            .collect();
        assert!(!replayed.is_empty());
        for cell in replayed
            .iter()
            .filter(|c| c.rate.is_none())
            .filter(|c| !c.failure.as_deref().unwrap_or("").starts_with("n/a"))
        {
            assert!(cell.failure.is_none(), "{post}: {cell:?}");
            let run = cell.median().unwrap();
            assert!(run.command.starts_with("ab -n "), "{}", run.command);
            assert!(run.server_cpu_us_per_req.is_some());
        }
        // Every model row's capacity searched open loop (oha), with keep-alive.
        let p = POSTS.iter().find(|p| p.name == post).unwrap();
        for row in p.rows.iter().filter(|r| r.model.is_some()) {
            let probes = bench::model::post::probes_of(
                &results.cells,
                p,
                row,
                bench::model::post::Side::Model,
            );
            assert!(
                !probes.is_empty(),
                "{post}: {} has no capacity probe",
                row.key
            );
            assert!(probes.iter().all(|c| {
                c.keep_alive && c.median().is_some_and(|r| r.command.contains("oha "))
            }));
        }
    }
    assert!(
        stdout.contains("capacity at p99 ≤ 10 ms (req/s)"),
        "{stdout}"
    );
    // The original brought for Workerman, in its row: req/s · µs/req · capacity.
    assert!(
        results
            .cells
            .iter()
            .any(|c| c.variant == "workerman" && c.rate.is_none() && c.median().is_some()),
        "{stdout}"
    );
    assert!(stdout.contains("| workerman "), "{stdout}");
    // Every conclusion the two posts printed has a verdict, and none is left unreplayed.
    let verdicts = bench::write::post::verdicts(&results.cells);
    let printed: usize = POSTS
        .iter()
        .filter(|p| ["one-process", "cpu-bound"].contains(&p.name))
        .map(|p| p.conclusions.len())
        .sum();
    assert_eq!(verdicts.len(), printed);
    for (post, text, judged) in &verdicts {
        assert_ne!(
            judged.finding,
            Finding::NotReplayed,
            "{post}: {text}: {judged:?}"
        );
        let line = format!("- *{text}* — **{}**: ", judged.finding.label());
        assert!(stdout.contains(&line), "{line}: {stdout}");
    }
    assert!(
        page.contains("id=\"posts\""),
        "no posts section in the page"
    );
}
