//! Protocol: the routes, keep-alive, pipelining, framing of valid requests.

use super::*;

pub fn root_returns_hello_world(s: &Spec) {
    let server = Server::start(s, &[]);
    assert_hello(&server.connect().get("/"));
}

pub fn plaintext_returns_hello_world(s: &Spec) {
    let server = Server::start(s, &[]);
    assert_hello(&server.connect().get("/plaintext"));
}

pub fn json_returns_message(s: &Spec) {
    let server = Server::start(s, &[]);
    let r = server.connect().get("/json");
    assert_eq!(r.status, 200, "{r:?}");
    assert_standard_headers(&r);
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    assert_eq!(r.body_str(), JSON);
}

pub fn unknown_path_is_404(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    let r = c.get("/no/such/thing");
    assert_eq!(r.status, 404, "{r:?}");
    assert_standard_headers(&r);
    // A 404 is an ordinary answer: the connection stays usable.
    assert_hello(&c.get("/"));
}

pub fn date_header_is_refreshed_every_second(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    let first = c.get("/").header("Date").unwrap().to_string();
    std::thread::sleep(Duration::from_millis(1100));
    let second = c.get("/");
    assert_standard_headers(&second);
    assert_ne!(second.header("Date").unwrap(), first);
}

pub fn http11_keeps_alive_by_default(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    for _ in 0..3 {
        let r = c.get("/");
        assert_hello(&r);
        assert_eq!(r.header("Connection"), None);
    }
    c.expect_open(Duration::from_millis(200));
    assert_hello(&c.get("/"));
}

pub fn http11_connection_close_closes(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    c.send(b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    let r = c.response();
    assert_hello(&r);
    assert_eq!(r.header("Connection"), Some("close"));
    c.expect_closed();
}

pub fn http10_closes_without_keep_alive(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    c.send(b"GET / HTTP/1.0\r\n\r\n");
    assert_hello(&c.response());
    c.expect_closed();
}

pub fn http10_keep_alive_is_echoed(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    // What `ab -k` sends.
    let req = b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\nHost: test\r\nUser-Agent: ApacheBench/2.3\r\nAccept: */*\r\n\r\n";
    for _ in 0..3 {
        c.send(req);
        let r = c.response();
        assert_hello(&r);
        assert_eq!(
            r.header("Connection")
                .map(str::to_ascii_lowercase)
                .as_deref(),
            Some("keep-alive")
        );
    }
    c.expect_open(Duration::from_millis(200));
}

pub fn connection_tokens_are_case_insensitive(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    c.send(b"GET / HTTP/1.0\r\ncONNECTION: KEEP-ALIVE\r\n\r\n");
    assert_hello(&c.response());
    c.send(b"GET / HTTP/1.1\r\nhost: test\r\nconnection: te, CLOSE\r\n\r\n");
    assert_hello(&c.response());
    c.expect_closed();
}

pub fn pipelined_16_answered_in_order(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    let paths = ["/", "/json", "/missing", "/plaintext"];
    let mut batch = Vec::new();
    for i in 0..16 {
        batch.extend_from_slice(
            format!("GET {} HTTP/1.1\r\nHost: test\r\n\r\n", paths[i % 4]).as_bytes(),
        );
    }
    c.send(&batch);
    for i in 0..16 {
        let r = c.response();
        match paths[i % 4] {
            "/" | "/plaintext" => assert_hello(&r),
            "/json" => assert_eq!(r.body_str(), JSON),
            _ => assert_eq!(r.status, 404),
        }
    }
    assert_hello(&c.get("/"));
}

/// A pipelined request that waits holds back the answers after it, even where they are
/// ready first (behind reactor-workers' hop, another worker — or a coroutine of the same
/// one — answers `/` long before `/sleep` returns): HTTP/1.1 answers in request order.
pub fn pipelined_answers_keep_order_when_the_first_waits(s: &Spec) {
    let server = Server::start(s, &["--workers", "2"]);
    let mut c = server.connect();
    let mut batch = b"GET /sleep?ms=200 HTTP/1.1\r\nHost: test\r\n\r\n".to_vec();
    for _ in 0..3 {
        batch.extend_from_slice(b"GET /json HTTP/1.1\r\nHost: test\r\n\r\n");
    }
    batch.extend_from_slice(b"GET /sleep?ms=10 HTTP/1.1\r\nHost: test\r\n\r\n");
    c.send(&batch);
    assert_eq!(c.response().body_str(), "slept=200");
    for _ in 0..3 {
        assert_eq!(c.response().body_str(), JSON);
    }
    assert_eq!(c.response().body_str(), "slept=10");
    assert_hello(&c.get("/"));
}

pub fn request_one_byte_at_a_time(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    for b in GET {
        c.send(&[*b]);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_hello(&c.response());
    assert_hello(&c.get("/"));
}

pub fn head_has_no_body_then_next_request(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    c.send(b"HEAD / HTTP/1.1\r\nHost: test\r\n\r\n");
    let r = c.head_response();
    assert_eq!(r.status, 200);
    assert_standard_headers(&r);
    assert_eq!(r.header("Content-Length"), Some("13"));
    // Were a body sent, it would be read here as the next response's start.
    assert_hello(&c.get("/"));
}

pub fn post_with_content_length_then_next_request(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    c.send(b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 11\r\n\r\nhello=world");
    assert_hello(&c.response());
    // A body split across writes.
    c.send(b"POST /json HTTP/1.1\r\nHost: test\r\nContent-Length: 6\r\n\r\nab");
    std::thread::sleep(Duration::from_millis(20));
    c.send(b"cdef");
    assert_eq!(c.response().body_str(), JSON);
    assert_hello(&c.get("/"));
}

pub fn post_chunked_then_next_request(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    c.send(
        b"POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
          5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: abc\r\n\r\n",
    );
    assert_hello(&c.response());
    c.send(b"POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab");
    std::thread::sleep(Duration::from_millis(20));
    c.send(b"c\r\n0\r\n\r\n");
    assert_hello(&c.response());
    assert_hello(&c.get("/"));
}

pub fn expect_continue_gets_100(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    c.send(b"POST / HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
    let interim = c.response();
    assert_eq!(interim.status, 100, "{interim:?}");
    c.send(b"body");
    assert_hello(&c.response());
}

/// `--keepalive-requests N`: the N-th response on a connection says `Connection: close`
/// and the connection then closes cleanly (Apache's MaxKeepAliveRequests); 0 is no limit;
/// the start-up line names the limits in force, which default to the modelled system's.
pub fn keepalive_requests_limit_closes_cleanly(s: &Spec) {
    let server = Server::start(s, &["--keepalive-requests", "3"]);
    let mut c = server.connect();
    for i in 1..=3 {
        let r = c.get("/");
        assert_hello(&r);
        assert_eq!(says_close(&r), i == 3, "response {i}: {r:?}");
    }
    c.expect_closed();
    assert_still_serves(&server);

    let server = Server::start(s, &["--keepalive-requests", "0"]);
    let mut c = server.connect();
    for i in 0..150 {
        assert!(
            !says_close(&c.get("/")),
            "response {i} closes with no limit"
        );
    }
    let expected = if s.one_conn_per_worker {
        "keep-alive: 100 requests, 5 s idle"
    } else {
        "keep-alive: unlimited requests, 60 s idle"
    };
    let defaults = Server::start(s, &[]);
    assert_announces(&defaults, expected);
}

/// `--keepalive-queued close` (`prefork-blocking`'s default): a worker that serves one
/// connection at a time keeps it open only while nobody waits. With one worker and a
/// second client queued behind the first, the first's next response says
/// `Connection: close`, its connection closes, and the waiting client is answered — and
/// kept alive, since nobody waits behind it. The start-up line names the policy.
pub fn keepalive_yields_to_a_queued_client(s: &Spec) {
    let server = Server::start(s, &["--workers", "1"]);
    let mut first = server.connect();
    let r = first.get("/");
    assert_hello(&r);
    assert!(!says_close(&r), "nobody waits: {r:?}");
    let mut queued = server.connect();
    queued.send(GET);
    // Not answered while the worker holds the first connection; and by now the worker's
    // last look at an empty queue is stale (it trusts one for a millisecond).
    queued.expect_open(Duration::from_millis(200));
    let r = first.get("/");
    assert_hello(&r);
    assert!(says_close(&r), "a client waits: {r:?}");
    first.expect_closed();
    let r = queued.response();
    assert_hello(&r);
    assert!(!says_close(&r), "nobody waits behind it: {r:?}");
    assert!(!says_close(&queued.get("/")));
    assert_announces(&server, "keep-alive closed while clients queue");
}

/// `--keepalive-queued hold` (Apache prefork): the worker keeps its keep-alive connection
/// while another client waits in the queue, and serves the waiting one only once the first
/// has been idle for `--keepalive-timeout`.
pub fn keepalive_is_held_while_clients_queue(s: &Spec) {
    let server = Server::start(s, &["--workers", "1", "--keepalive-timeout", "1"]);
    let mut first = server.connect();
    assert_hello(&first.get("/"));
    let mut queued = server.connect();
    queued.send(GET);
    queued.expect_open(Duration::from_millis(200));
    let r = first.get("/");
    assert_hello(&r);
    assert!(!says_close(&r), "held whoever waits: {r:?}");
    queued.expect_open(Duration::from_millis(300));
    // Idle for the timeout: closed, and the worker takes the waiting client.
    let idle = Instant::now();
    first.expect_closed();
    assert!(
        idle.elapsed() >= Duration::from_millis(500),
        "{:?}",
        idle.elapsed()
    );
    assert_hello(&queued.response());
    assert_announces(&server, "keep-alive held while clients queue");
}
