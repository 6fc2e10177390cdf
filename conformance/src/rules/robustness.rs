//! Robustness: slow, silent, vanishing and stalled clients, and the timeouts that end them.

use super::*;

/// A client that sends a request and closes must not disturb the others.
pub fn client_vanishing_mid_request_is_harmless(s: &Spec) {
    let server = Server::start(s, &[]);
    {
        let mut c = Client::connect(server.addr);
        c.send(b"GET / HTTP/1.1\r\nHost: te");
    }
    {
        let mut c = Client::connect(server.addr);
        c.send(GET);
        c.send(GET);
    }
    assert_still_serves(&server);
}

/// A slowloris client (a head that never ends) gets a 408 and the close after
/// `--header-timeout` (hyper closes without a 408), and the server keeps serving.
pub fn slow_head_gets_408_after_header_timeout(s: &Spec) {
    let server = Server::start(s, &["--header-timeout", "1"]);
    let mut c = server.connect();
    let started = std::time::Instant::now();
    c.send(b"GET / HTTP/1.1\r\nHost: te");
    if s.hyper {
        c.expect_closed();
    } else {
        let r = c.response();
        assert_eq!(r.status, 408, "{r:?}");
        assert_eq!(r.header("Connection"), Some("close"));
        c.expect_closed();
    }
    ended_after_about_a_second(started.elapsed());
    assert_still_serves(&server);
}

/// Slowloris proper: a head that never ends, a field every 200 ms, so that no read ever
/// waits long. The head must be complete within `--header-timeout` of its start however
/// its bytes trickle in: a 408 and the close (hyper: the close), and the server keeps
/// serving. A server that only looks at the deadline when a read times out never ends it.
pub fn trickled_head_gets_408_after_header_timeout(s: &Spec) {
    use std::io::{Read, Write};
    let server = Server::start(s, &["--header-timeout", "1", "--keepalive-timeout", "10"]);
    let mut c = std::net::TcpStream::connect(server.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let started = std::time::Instant::now();
    c.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n").unwrap();
    let mut got = Vec::new();
    let mut closed = false;
    // Bounded: 30 rounds of at most 200 ms, far past the deadline and the sweep.
    for _ in 0..30 {
        if c.write_all(b"X-Slow: 1\r\n").is_err() {
            closed = true; // reset after the server closed
            break;
        }
        let mut chunk = [0u8; 1024];
        match c.read(&mut chunk) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => {
                closed = true;
                break;
            }
        }
    }
    let took = started.elapsed();
    let got = String::from_utf8_lossy(&got);
    assert!(closed, "still open after {took:?}; got {got:?}");
    if !s.hyper {
        assert!(got.starts_with("HTTP/1.1 408 "), "{got:?}");
    }
    ended_after_about_a_second(took);
    assert_still_serves(&server);
}

/// A slow POST (a head that promises a body, then part of it and silence) gets a 408 and
/// the close after `--header-timeout`, as a slow head does, on every row — hyper included,
/// whose adapter times the body because hyper does not — and the server keeps serving. A
/// body may take as long as it likes in all, as nginx's `client_body_timeout` allows, as
/// long as no gap between its parts is longer than the timeout.
pub fn slow_body_gets_408_after_header_timeout(s: &Spec) {
    let server = Server::start(s, &["--header-timeout", "1", "--keepalive-timeout", "10"]);
    let mut c = server.connect();
    let started = std::time::Instant::now();
    c.send(b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\n0123456789");
    let r = c.response();
    assert_eq!(r.status, 408, "{r:?}");
    assert_eq!(r.header("Connection"), Some("close"), "{r:?}");
    c.expect_closed();
    ended_after_about_a_second(started.elapsed());
    assert_still_serves(&server);
}

/// An idle keep-alive connection is closed after `--keepalive-timeout`, silently.
pub fn keepalive_timeout_closes_an_idle_connection(s: &Spec) {
    // hyper applies its head timeout to idle connections too.
    let server = Server::start(s, &["--keepalive-timeout", "1", "--header-timeout", "2"]);
    let mut c = server.connect();
    assert_hello(&c.get("/"));
    let started = std::time::Instant::now();
    c.expect_closed();
    ended_after_about_a_second(started.elapsed());
}

/// A client that pipelines requests and never reads the answers cannot hold the server:
/// once its output has waited past the idle deadline the connection is dropped, with the
/// output bounded meanwhile, and the server goes on serving others.
pub fn a_client_that_never_reads_is_dropped(s: &Spec) {
    // ~13 MB of responses: more than the kernel buffers of both sockets can hold, so
    // the server's own writes block.
    const REQUESTS: usize = 100_000;
    let server = Server::start(s, &["--keepalive-timeout", "1", "--header-timeout", "1"]);
    let mut c = server.connect();
    small_receive_window(c.stream());
    let mut writer = c.stream().try_clone().unwrap();
    let pipelined = GET.repeat(REQUESTS);
    let sender = std::thread::spawn(move || {
        use std::io::Write;
        let _ = writer.write_all(&pipelined);
    });
    std::thread::sleep(Duration::from_secs(4));
    let (answer, closed) = c.read_to_close(Duration::from_secs(8));
    let answered = String::from_utf8_lossy(&answer)
        .matches("HTTP/1.1 200 OK")
        .count();
    assert!(
        closed,
        "the connection is still open after {answered} responses"
    );
    assert!(
        answered < REQUESTS,
        "all {answered} responses were buffered for a non-reader"
    );
    drop(c);
    let _ = sender.join();
    assert_still_serves(&server);
}

/// Many clients that pipeline and never read do not starve a newcomer: each holds at
/// most a bounded share of the server's buffers (thread-per-core: a few buffers of its
/// shard's receive pool, after which its receive is paused; with the pool drained, other
/// connections read through glommio's own path).
pub fn stalled_readers_do_not_starve_others(s: &Spec) {
    use std::io::Write;
    const CLIENTS: usize = 160;
    let server = Server::start(s, &["--workers", "1"]);
    let pipelined = GET.repeat(3_000);
    let stalled: Vec<std::net::TcpStream> = (0..CLIENTS)
        .map(|_| {
            let c = std::net::TcpStream::connect(server.addr).unwrap();
            small_receive_window(&c);
            c.set_nonblocking(true).unwrap();
            // As much as the socket takes at once: the rest is never sent.
            let _ = (&c).write(&pipelined);
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    assert_still_serves(&server);
    drop(stalled);
    assert_still_serves(&server);
}

/// A one-second timeout ended the connection in about a second: not before it, and not
/// much after (a once-a-second sweep adds up to one more, a busy host a little).
fn ended_after_about_a_second(took: Duration) {
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "{took:?}"
    );
}
