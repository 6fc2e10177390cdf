//! The rules that make sense for a third-party server, against every built-in peer
//! installed here (`peers/install`; `scripts/test` installs them): hello world, keep-alive
//! and close under `ab`, and the `/sum` and `/sleep` answers where the peer serves them. A
//! peer that is not installed is not tested — its tests are reported as ignored, and the
//! reason is printed — never passed without asserting.

use std::time::{Duration, Instant};

use conformance::{ab_fails_only_on_idle_closes, field, run_client, test_db, Client};
use libtest_mimic::{Arguments, Failed, Trial};
use variants::launch::{self, Launch, Server};
use variants::peers::{self, Peer, BUILTIN};

/// What a peer must do, and which workload it needs (None: every peer).
type Rule = (
    &'static str,
    Option<&'static str>,
    fn(&Server) -> Result<(), Failed>,
);

const RULES: &[Rule] = &[
    ("root_returns_hello_world", None, root_returns_hello_world),
    ("ab_with_keep_alive", None, ab_with_keep_alive),
    ("ab_without_keep_alive", None, ab_without_keep_alive),
    (
        "sum_returns_a_plausible_total",
        Some("sum"),
        sum_returns_a_plausible_total,
    ),
    (
        "sleep_waits_and_answers",
        Some("sleep"),
        sleep_waits_and_answers,
    ),
    (
        "killed_group_leaves_no_process",
        None,
        killed_group_leaves_no_process,
    ),
];

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for builtin in BUILTIN {
        let peer = Peer::builtin(builtin.name).expect("a built-in peer");
        let missing = peers::missing(&peer.name);
        if let Some(why) = &missing {
            if !args.list {
                eprintln!(
                    "peer {} not tested here: {why} (peers/install {0})",
                    peer.name
                );
            }
        }
        for &(rule, needs, run) in RULES {
            if needs.is_some_and(|w| peer.unsupported(w).is_some()) {
                continue; // the peer does not serve that route: nothing to test
            }
            let p = peer.clone();
            let trial = Trial::test(format!("{}::{rule}", peer.name), move || {
                let server = start(&p)?;
                run(&server)
            });
            trials.push(trial.with_ignored_flag(missing.is_some()));
        }
    }
    libtest_mimic::run(&args, trials).exit();
}

fn start(peer: &Peer) -> Result<Server, Failed> {
    let port = launch::free_port()?;
    let db = test_db();
    let command = peer.command_line(port, 2, &db.display().to_string(), peers::DIR);
    Launch::shell(&command)
        .start_at(([127, 0, 0, 1], port).into())
        .map_err(|e| format!("{}: {e}", peer.name).into())
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), Failed> {
    if ok {
        Ok(())
    } else {
        Err(what().into())
    }
}

/// `/` answers hello world, each time on a new connection (a peer need not keep a
/// connection alive — uWSGI's HTTP router does not unless asked; `ab -k` covers that). A
/// peer may take a moment after it listens before its workers answer (uWSGI's router
/// accepts before its workers are up): the first answer may come within 2 s.
fn root_returns_hello_world(server: &Server) -> Result<(), Failed> {
    let get = || {
        std::panic::catch_unwind(|| {
            let mut c = Client::connect(server.addr);
            c.send(b"GET / HTTP/1.1\r\nHost: peer\r\nConnection: close\r\n\r\n");
            c.response()
        })
        .ok()
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    while get().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..3 {
        let r = get().ok_or("no answer")?;
        check(r.status == 200 && r.body_str() == "hello, world!", || {
            format!("{r:?}")
        })?;
    }
    Ok(())
}

fn ab(server: &Server, requests: usize, keep_alive: bool) -> Result<(), Failed> {
    let mut args = vec![
        "-n".to_string(),
        requests.to_string(),
        "-c".into(),
        "8".into(),
    ];
    if keep_alive {
        args.push("-k".into());
    }
    args.push(format!("http://{}/", server.addr));
    let out = run_client("ab", &args, Duration::from_secs(60));
    check(
        field(&out, "Complete requests:") == Some(requests as f64),
        || out.clone(),
    )?;
    check(field(&out, "Non-2xx responses:").is_none(), || out.clone())?;
    // A peer may close idle keep-alive connections at its own limits; ab counts those as
    // "Length" failures. Nothing else may fail.
    check(ab_fails_only_on_idle_closes(&out), || out.clone())
}

fn ab_with_keep_alive(server: &Server) -> Result<(), Failed> {
    ab(server, 2000, true)
}

fn ab_without_keep_alive(server: &Server) -> Result<(), Failed> {
    ab(server, 500, false)
}

fn sum_returns_a_plausible_total(server: &Server) -> Result<(), Failed> {
    let mut c = Client::connect(server.addr);
    let r = c.get("/sum");
    check(
        r.status == 200 && variants::workloads::sum_value(&r.body).is_some(),
        || format!("{r:?}"),
    )
}

fn sleep_waits_and_answers(server: &Server) -> Result<(), Failed> {
    let mut c = Client::connect(server.addr);
    let started = Instant::now();
    let r = c.get("/sleep?ms=50");
    let took = started.elapsed();
    check(r.status == 200 && r.body_str() == "slept=50", || {
        format!("{r:?}")
    })?;
    check(took >= Duration::from_millis(45), || {
        format!("answered after {took:?}")
    })
}

/// The harness's last resort — SIGKILL of the peer's whole process group, as on a timeout
/// or Ctrl-C — leaves none of the peer's processes running, including any that left the
/// group (php-fpm's master calls setsid; it is tied to its parent's death instead).
fn killed_group_leaves_no_process(server: &Server) -> Result<(), Failed> {
    let pids = launch::tree(server.pid());
    check(pids.len() > 1 || launch::running(server.pid()), || {
        "no process to kill".into()
    })?;
    // SAFETY: kill(2) on the process group this test started.
    unsafe { libc::kill(-server.pid(), libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<i32> = pids
            .iter()
            .copied()
            .filter(|&p| launch::running(p))
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("still running 5 s after the group was killed: {left:?}").into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
