//! `/pg`: PostgreSQL across a socket — the sum of the rows read, the database going away
//! and coming back, and each model's signature when the database is slow.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::*;
use crate::database::{database_url, rows_from, Relay};

/// A `/pg` body: the sum with six decimals.
fn pg_body(r: &Response) -> String {
    assert_eq!(r.status, 200, "{r:?}");
    assert_standard_headers(r);
    let body = r.body_str().to_string();
    assert!(
        body.split_once('.').is_some_and(|(_, d)| d.len() == 6),
        "{r:?}"
    );
    body
}

/// `/pg?queries=3&seed=S` sums exactly the thirty values the three queries read when run
/// directly against the database, in the same order, on both stacks; bad parameters are
/// a 400 and the connection stays usable.
pub fn pg_sums_the_rows_it_read(s: &Spec) {
    let url = database_url();
    for stack in ["raw", "framework"] {
        let server = Server::start(s, &["--pg", &url, "--stack", stack]);
        let mut c = server.connect();
        for seed in [1, 2024] {
            let pinned = std::num::NonZeroU32::new(seed).expect("non-zero");
            let expected: f64 = common::pg::ids(pinned, 3)
                .into_iter()
                .flat_map(rows_from)
                .fold(0.0, |sum, v| sum + v);
            let got = pg_body(&c.get(&format!("/pg?queries=3&seed={seed}")));
            assert_eq!(got, format!("{expected:.6}"), "{stack} stack, seed {seed}");
        }
        // Unseeded: fresh ids, so two answers differ.
        let (a, b) = (pg_body(&c.get("/pg")), pg_body(&c.get("/pg?queries=500")));
        assert_ne!(a, b);
        for bad in ["queries=0", "queries=501", "sleep_ms=10001", "seed=x"] {
            let r = c.get(&format!("/pg?{bad}"));
            assert_eq!(r.status, 400, "{bad}: {r:?}");
        }
        pg_body(&c.get("/pg?queries=1"));
    }
}

/// Without `--pg`, `/pg` is a 503 that says what is missing, not a hang or a crash.
pub fn pg_without_a_database_is_503(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    let r = c.get("/pg");
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.body_str().contains("--pg"), "{r:?}");
    assert_hello(&c.get("/"));
}

/// The database goes away mid-run (its connections cut, new ones refused): `/pg` answers
/// 503 with the reason, quickly, and the rest of the server is untouched; when it comes
/// back, `/pg` answers again (the stale pooled connections replaced).
pub fn pg_outage_is_503_then_recovers(s: &Spec) {
    let relay = Relay::start();
    let server = Server::start(s, &["--pg", &relay.url(), "--workers", "1"]);
    let mut c = server.connect();
    pg_body(&c.get("/pg?queries=2"));
    relay.cut();
    for _ in 0..3 {
        let started = Instant::now();
        let r = c.get("/pg?queries=2");
        assert_eq!(r.status, 503, "{r:?}");
        assert!(r.body_str().starts_with("database unavailable: "), "{r:?}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "a 503 took {:?}",
            started.elapsed()
        );
    }
    assert_hello(&c.get("/"));
    relay.restore();
    pg_body(&c.get("/pg?queries=2"));
    // (A blocking worker serves one connection at a time: let this one go first.)
    drop(c);
    pg_body(&server.connect().get("/pg?queries=2"));
}

/// Sixteen clients, each sending `/pg?queries=1&sleep_ms=50` on a new connection in a
/// loop, two workers: a model whose worker blocks on the database serves about
/// workers ÷ 50 ms (40/s); one whose requests wait without a thread about 16 ÷ 50 ms
/// (320/s). Counted over one second after a warm-up round that opens the pools.
pub fn pg_slow_query_shows_the_model(s: &Spec) {
    let url = database_url();
    let server = Server::start(s, &["--pg", &url, "--workers", "2"]);
    let addr = server.addr;
    let round = |until: Instant, done: Arc<AtomicUsize>| {
        let clients: Vec<_> = (0..16)
            .map(|_| {
                let done = done.clone();
                std::thread::spawn(move || loop {
                    let mut c = Client::connect(addr);
                    c.send(b"GET /pg?queries=1&sleep_ms=50 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
                    let r = c.response();
                    assert_eq!(r.status, 200, "{r:?}");
                    if Instant::now() >= until {
                        return;
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        for client in clients {
            client.join().expect("a client failed");
        }
    };
    round(Instant::now(), Arc::new(AtomicUsize::new(0)));
    let done = Arc::new(AtomicUsize::new(0));
    let window = Duration::from_millis(1500);
    round(Instant::now() + window, done.clone());
    let rate = done.load(Ordering::SeqCst) as f64 / window.as_secs_f64();
    if s.blocks_on_database {
        assert!(
            (20.0..=70.0).contains(&rate),
            "{rate:.0}/s: a worker blocked on the database should serve 2 ÷ 50 ms = 40/s"
        );
    } else {
        assert!(
            rate >= 150.0,
            "{rate:.0}/s: sixteen waits overlapping should reach 16 ÷ 50 ms = 320/s"
        );
    }
}

/// A pool with one connection and a query holding it: the next request that needs it
/// waits for it no longer than `--header-timeout`, then gets a 503 that says so.
pub fn pg_pool_wait_is_bounded(s: &Spec) {
    let url = database_url();
    let server = Server::start(
        s,
        &[
            "--pg",
            &url,
            "--workers",
            "1",
            "--db-pool",
            "1",
            "--header-timeout",
            "1",
        ],
    );
    let mut holder = server.connect();
    holder.send(b"GET /pg?queries=1&sleep_ms=2500 HTTP/1.1\r\nHost: t\r\n\r\n");
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let r = server.connect().get("/pg?queries=1");
    let waited = started.elapsed();
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.body_str().contains("no pooled connection"), "{r:?}");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_millis(2000),
        "waited {waited:?} for a 1 s limit"
    );
    pg_body(&holder.response());
}
