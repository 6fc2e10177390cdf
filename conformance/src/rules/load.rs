//! Load: the posts' clients (ab, wrk) and the limits that hold under them.

use super::*;

/// The README's hand-run example: `ab -k -n 20000 -c 50` against two workers completes,
/// well within ab's own 30 s timeout, with no failure — 48 of the 50 connections waiting in
/// the accept queue at any time. A worker that serves one connection at a time gets there
/// by answering `Connection: close` whenever a client waits (`--keepalive-queued close`):
/// ab then reads each response to its close, and reconnects.
///
/// A row that holds the connection instead, as Apache prefork does (`hold`), completes
/// only through its keep-alive limits (100 requests, 5 idle seconds), and slowly: at the
/// end of the run each connection a worker takes from the queue is answered and then sits
/// idle until the timeout hands the worker on. ab counts each of those idle closes as a
/// "Length" failure (ab.c `close_connection`: after each response it clears the
/// connection's keep-alive flag, so a close before the next request looks like a short
/// response) — with Apache prefork too. They are bounded by the number of connections,
/// and nothing else may fail: no refused connect, no receive error, no exception, every
/// request answered.
pub fn readme_ab_keep_alive_example_completes(s: &Spec) {
    let server = Server::start(s, &["--workers", "2"]);
    let out = ab_keep_alive(&server, 20_000, 50);
    assert_eq!(field(&out, "Complete requests:"), Some(20000.0), "{out}");
    let failed = field(&out, "Failed requests:").unwrap_or(f64::NAN);
    if s.holds_keep_alive {
        if failed > 0.0 {
            assert!(ab_fails_only_on_idle_closes(&out), "{out}");
            assert!(failed <= 50.0, "more idle closes than connections: {out}");
        }
    } else {
        assert_eq!(failed, 0.0, "{out}");
        let took = field(&out, "Time taken for tests:").unwrap_or(f64::NAN);
        assert!(took < 30.0, "{took} s, past ab's own timeout: {out}");
    }
    assert_eq!(field(&out, "Non-2xx responses:"), None, "{out}");
    assert_still_serves(&server);
}

/// The posts' concurrency against a one-connection-per-worker server:
/// `ab -k -n 100000 -c 1000` against two workers completes with no failure, 998
/// connections waiting in the accept queue (the listen backlog, 1,024, holds them).
pub fn ab_keep_alive_at_the_posts_concurrency_completes(s: &Spec) {
    let server = Server::start(s, &["--workers", "2"]);
    let out = ab_keep_alive(&server, 100_000, 1000);
    assert_eq!(field(&out, "Complete requests:"), Some(100000.0), "{out}");
    assert_eq!(field(&out, "Failed requests:"), Some(0.0), "{out}");
    assert_eq!(field(&out, "Non-2xx responses:"), None, "{out}");
    assert_still_serves(&server);
}

/// `ab -k -n REQUESTS -c CONNECTIONS` against `server`, with ab's own 30 s timeout, as a
/// user types it: its output.
fn ab_keep_alive(server: &Server, requests: u32, connections: u32) -> String {
    let args = [
        "-k".to_string(),
        "-n".into(),
        requests.to_string(),
        "-c".into(),
        connections.to_string(),
        "-s".into(),
        "30".into(),
        format!("http://{}/", server.addr),
    ];
    run_client("ab", &args, Duration::from_secs(240))
}

pub fn ab_without_keep_alive(s: &Spec) {
    ab(s, 2000, false);
}

pub fn ab_with_keep_alive(s: &Spec) {
    ab(s, 20000, true);
}

pub fn wrk_keep_alive(s: &Spec) {
    let server = start_for_load(s, 32);
    let args: Vec<String> = ["-t1", "-c32", "-d2s", "--latency"]
        .iter()
        .map(|a| a.to_string())
        .chain([format!("http://{}/", server.addr)])
        .collect();
    let out = run_client("wrk", &args, Duration::from_secs(20));
    assert!(!out.contains("Socket errors"), "{out}");
    assert!(!out.contains("Non-2xx"), "{out}");
    let requests = out
        .lines()
        .find(|l| l.contains("requests in"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(requests > 1000, "{out}");
    assert_still_serves(&server);
}

/// A burst bigger than the Unix socket between a reactor and its worker is answered in
/// full and in order: 32 connections pipeline 64 requests each, a quarter of them with
/// 2 KB targets — 1 MB of request frames, several times what the link holds, so the
/// reactor finds it full and waits for room (registered for it only then; `strace` shows
/// the re-registrations) while the other connections' answers come back.
pub fn a_burst_bigger_than_the_hop_is_answered_in_full(s: &Spec) {
    const CONNS: usize = 32;
    const DEPTH: usize = 64;
    let server = Server::start(s, &["--workers", "1"]);
    let pad = "p".repeat(2000);
    let clients: Vec<_> = (0..CONNS)
        .map(|i| {
            let mut c = server.connect();
            let target = if i % 4 == 0 {
                format!("/?pad={pad}")
            } else {
                "/".to_string()
            };
            std::thread::spawn(move || {
                let request = format!("GET {target} HTTP/1.1\r\nHost: test\r\n\r\n");
                c.send(request.repeat(DEPTH).as_bytes());
                for _ in 0..DEPTH {
                    assert_hello(&c.response());
                }
            })
        })
        .collect();
    for (i, client) in clients.into_iter().enumerate() {
        assert!(
            client.join().is_ok(),
            "connection {i} was not answered in full"
        );
    }
    assert_still_serves(&server);
}

/// Idle keep-alive connections cost a server only their state: after a burst of requests
/// (the buffer pools and lazy set-up are warm), `IDLE_CONNS` connections that each made a
/// request and then went quiet add at most the row's `idle_bytes` each to the resident
/// memory of all its processes — a generous guard (twice each model's target): the
/// figure itself is `bench --idle-conns`'. Then every one of them is answered again.
pub fn idle_connections_stay_cheap(s: &Spec) {
    common::cli::raise_fd_limit();
    let server = Server::start(s, &["--workers", "1"]);
    let wave = |conns: &mut [Client]| {
        for c in conns.iter_mut() {
            c.send(GET);
        }
        for c in conns.iter_mut() {
            assert_hello(&c.response());
        }
    };
    // The burst, as wide as a wave below: buffers lent and given back, every lazy thing of
    // the server set up, so that what one wave leaves behind (a reactor's IPC buffers) is
    // in the baseline and not charged to the idle connections.
    let mut burst: Vec<Client> = (0..WAVE).map(|_| server.connect()).collect();
    wave(&mut burst);
    wave(&mut burst);
    drop(burst);
    std::thread::sleep(Duration::from_millis(300));
    let before = server.rss_kib();
    let mut idle: Vec<Client> = Vec::with_capacity(IDLE_CONNS);
    while idle.len() < IDLE_CONNS {
        let from = idle.len();
        idle.extend((0..WAVE.min(IDLE_CONNS - from)).map(|_| server.connect()));
        wave(&mut idle[from..]);
    }
    std::thread::sleep(Duration::from_millis(300));
    let grown = server.rss_kib().saturating_sub(before) * 1024;
    let per_conn = grown as f64 / IDLE_CONNS as f64;
    // One step of the heap's growth more than the bound is allowed: see RSS_STEP.
    let bound = s.idle_bytes as f64 + (RSS_STEP / IDLE_CONNS) as f64;
    assert!(
        per_conn <= bound,
        "{}: {per_conn:.0} bytes per idle connection ({grown} in all), over its bound of {} \
         and one {RSS_STEP}-byte step of the heap",
        s.name,
        s.idle_bytes
    );
    for chunk in idle.chunks_mut(WAVE) {
        wave(chunk);
    }
}

/// Idle connections [`idle_connections_stay_cheap`] holds: enough that a few hundred KiB
/// of noise is a fraction of the bound.
const IDLE_CONNS: usize = 1500;

/// How a server's resident memory grows here: in whole 2 MiB steps of its heap (measured:
/// `reactor-workers` grew by exactly 2 MiB for 1,500 idle connections in every local run,
/// 1,398 bytes each, and by 4 MiB in one CI run). A step is a measuring grain, not a cost:
/// [`idle_connections_stay_cheap`] allows one more than its bound.
const RSS_STEP: usize = 2 * 1024 * 1024;

/// Connections opened, and requests in flight, at once in [`idle_connections_stay_cheap`].
const WAVE: usize = 256;

/// At `--max-conns` a worker stops accepting: the next connection waits in the listen
/// queue (unanswered) until one of the others closes, then it is served.
pub fn max_conns_leaves_new_connections_queued(s: &Spec) {
    // The limit holds per accepting thread: per reactor in reactor-workers, which runs one
    // per CPU unless its row names a count — so the server gets one CPU here.
    let acceptors: usize = s
        .args
        .iter()
        .position(|a| *a == "--reactors")
        .and_then(|i| s.args.get(i + 1)?.parse().ok())
        .unwrap_or(1);
    let server = Server::start(s, &["--workers", "1", "--max-conns", "2", "--cpus", "0"]);
    let mut held: Vec<Client> = (0..2 * acceptors).map(|_| server.connect()).collect();
    for c in &mut held {
        assert_hello(&c.get("/"));
    }
    let mut waiting = server.connect(); // accepted by the kernel, not by the server
    waiting.send(GET);
    waiting.expect_open(Duration::from_millis(400));
    held.clear();
    assert_hello(&waiting.response());
}

/// Out of file descriptors (EMFILE): the server logs, backs off instead of spinning on the
/// listener, does not crash, and serves again once descriptors are free — on reactor-workers
/// also after a worker restarted into the flood (its link is accepted by the reactor).
pub fn accept_errors_back_off(s: &Spec) {
    let server = Server::try_start_limited(s, &["--workers", "1"], Some((64, 64)))
        .unwrap_or_else(|e| panic!("{e}"));
    // More connections than descriptors: the kernel queues them, accept fails.
    let flood: Vec<_> = (0..120)
        .filter_map(|_| std::net::TcpStream::connect(server.addr).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let before = server.cpu_seconds();
    std::thread::sleep(Duration::from_secs(1));
    let spent = server.cpu_seconds() - before;
    assert!(
        spent < 0.5,
        "{spent:.2} CPU-seconds in 1 s at EMFILE: spinning"
    );
    let log = server.stderr_lines().join("\n");
    assert!(
        log.contains("accept failed"),
        "no log line for EMFILE: {log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    if s.ipc {
        // The reactor accepts its workers' links from a listener too: a worker restarted
        // while every descriptor is taken connects into that full table, and its link
        // must be accepted once descriptors are free again (a lost edge left it waiting).
        // The manager is held stopped until the accept retry has taken the descriptors the
        // dead worker's links freed, so the replacement surely finds none.
        let worker = server.worker_pids()[0];
        let stat = std::fs::read_to_string(format!("/proc/{worker}/stat")).unwrap();
        let manager: i32 = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        // SAFETY: plain kill(2) on pids this test's server started.
        unsafe {
            libc::kill(manager, libc::SIGSTOP);
            libc::kill(worker, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(400));
        // SAFETY: as above.
        unsafe { libc::kill(manager, libc::SIGCONT) };
        server.await_restarts(1, Duration::from_secs(3));
        std::thread::sleep(Duration::from_millis(300));
        let log = server.stderr_lines().join("\n");
        assert!(
            log.contains("worker link accept failed"),
            "restart did not meet EMFILE: {log}"
        );
    }
    drop(flood);
    std::thread::sleep(Duration::from_millis(300));
    let started = std::time::Instant::now();
    loop {
        let mut c = server.connect();
        c.send(GET);
        let (answer, _) = c.read_to_close(Duration::from_millis(500));
        if answer.ends_with(HELLO.as_bytes()) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "not serving after EMFILE; last answer {:?}; stderr tail {:?}",
            String::from_utf8_lossy(&answer),
            server
                .stderr_lines()
                .iter()
                .rev()
                .take(4)
                .collect::<Vec<_>>()
        );
    }
}

/// The open-file limit is raised to its hard limit at start-up: every connection is a
/// descriptor, and the usual soft limit (1024) is far below what a server can hold.
pub fn open_file_limit_is_raised(s: &Spec) {
    let server = Server::try_start_limited(s, &["--workers", "1"], Some((256, 4096)))
        .unwrap_or_else(|e| panic!("{e}"));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.pid())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap_or_default();
    let numbers: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    assert_eq!(numbers, ["4096", "4096"], "{line}");
}
