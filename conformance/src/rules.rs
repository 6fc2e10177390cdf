//! The rules, one function each, named after the rule it pins down. Each starts its own
//! server, so a failure names exactly one server and one rule.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use crate::{field, run_client, Client, Response, Server, Spec};

/// A rule of the suite, and the rows it applies to.
#[derive(Clone, Copy)]
pub struct Rule {
    pub name: &'static str,
    pub run: fn(&Spec),
    /// `Err(why)` for a row the rule says nothing about: no test is generated for that
    /// pair (it could only pass without asserting), and the suite lists it with `why`.
    pub applies: fn(&Spec) -> Result<(), &'static str>,
}

/// Capabilities a rule may require of its row (see `variants::Variant`).
fn processes(s: &Spec) -> bool {
    s.processes
}

fn ipc(s: &Spec) -> bool {
    s.ipc
}

fn many_conns(s: &Spec) -> bool {
    !s.one_conn_per_worker
}

/// `RULES`: every rule in suite order; `rule if capability => "why not otherwise"` for
/// the rules that hold only for some rows.
macro_rules! rules {
    ($($name:ident $(if $cap:ident => $why:literal)?,)*) => {
        pub const RULES: &[Rule] = &[$(Rule {
            name: stringify!($name),
            run: $name,
            applies: {
                fn applies(_s: &Spec) -> Result<(), &'static str> {
                    $(if !$cap(_s) {
                        return Err($why);
                    })?
                    Ok(())
                }
                applies
            },
        },)*];
    };
}

rules! {
    root_returns_hello_world,
    plaintext_returns_hello_world,
    json_returns_message,
    unknown_path_is_404,
    date_header_is_refreshed_every_second,
    http11_keeps_alive_by_default,
    http11_connection_close_closes,
    http10_closes_without_keep_alive,
    http10_keep_alive_is_echoed,
    connection_tokens_are_case_insensitive,
    pipelined_16_answered_in_order,
    request_one_byte_at_a_time,
    head_has_no_body_then_next_request,
    post_with_content_length_then_next_request,
    post_chunked_then_next_request,
    expect_continue_gets_100,
    malformed_request_line_is_400,
    malformed_header_is_400,
    head_over_8k_is_431,
    over_64_headers_is_431,
    uri_over_8k_is_414,
    content_length_with_transfer_encoding_is_400,
    repeated_content_length_is_400,
    non_numeric_content_length_is_400,
    transfer_encoding_other_than_chunked_is_400,
    transfer_encoding_on_http10_is_400,
    invalid_chunk_size_is_400,
    http11_without_host_is_400,
    two_host_headers_is_400,
    body_over_1mib_is_413,
    unsupported_version_is_505,
    unknown_method_is_501,
    client_vanishing_mid_request_is_harmless,
    malformed_corpus_is_refused,
    slow_head_gets_408_after_header_timeout,
    a_client_that_never_reads_is_dropped,
    stalled_readers_do_not_starve_others if many_conns => "one connection per worker: a newcomer waits by design (the slowloris rule covers it)",
    idle_keep_alive_closes_after_idle_timeout,
    two_workers_both_serve,
    sigterm_exits_zero_leaving_no_process,
    sigterm_finishes_requests_in_flight,
    sigterm_under_load_drops_no_accepted_request,
    bad_flag_is_one_line_and_nonzero,
    busy_port_is_one_line_and_nonzero,
    sum_returns_a_plausible_total,
    db_sums_ten_rows_per_query,
    db_rejects_bad_queries_with_400,
    sleep_waits_while_others_are_served,
    sleep_rejects_bad_ms_with_400,
    framework_stack_serves_the_same_bodies,
    killed_worker_is_restarted if processes => "its workers are threads or shards of one process: nothing to kill alone",
    killed_worker_under_load_spares_the_others if processes => "its workers are threads or shards of one process: nothing to kill alone",
    master_killed_leaves_no_worker_behind if processes => "one process: nothing can be left behind",
    max_conns_leaves_new_connections_queued if many_conns => "one connection per worker is its model: the limit is always 1",
    accept_errors_back_off if many_conns => "one connection per worker never runs out of descriptors",
    open_file_limit_is_raised,
    worker_dying_mid_request_answers_502 if ipc => "the connection lives in the process that dies: nothing is left to answer with",
    listening_sockets_match_the_model,
    ab_without_keep_alive,
    ab_with_keep_alive,
    wrk_keep_alive,
}

const HELLO: &str = "hello, world!";
const JSON: &str = r#"{"message":"Hello, World!"}"#;
const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: test\r\n\r\n";

/// The headers every response carries: Server, a current IMF-fixdate Date, Content-Type,
/// and a Content-Length equal to the body's length.
fn assert_standard_headers(r: &Response) {
    assert_eq!(r.header("Server"), Some("archzoo"), "{r:?}");
    let date = r.header("Date").unwrap_or_else(|| panic!("no Date: {r:?}"));
    let when = httpdate::parse_http_date(date).unwrap_or_else(|_| panic!("bad Date {date:?}"));
    let skew = match SystemTime::now().duration_since(when) {
        Ok(d) => d,
        Err(e) => e.duration(),
    };
    assert!(
        skew < Duration::from_secs(3),
        "Date {date:?} is {skew:?} off"
    );
    assert!(r.header("Content-Type").is_some(), "no Content-Type: {r:?}");
}

fn assert_hello(r: &Response) {
    assert_eq!(r.status, 200, "{r:?}");
    // HTTP/1.1 is the usual answer to either version; hyper answers 1.0 with 1.0.
    assert!(
        r.status_line == "HTTP/1.1 200 OK" || r.status_line == "HTTP/1.0 200 OK",
        "{r:?}"
    );
    assert_standard_headers(r);
    assert_eq!(r.header("Content-Type"), Some("text/plain"));
    assert_eq!(r.header("Content-Length"), Some("13"));
    assert_eq!(r.body_str(), HELLO);
}

/// A fresh connection still gets hello world: the server survived whatever came before.
fn assert_still_serves(server: &Server) {
    let mut c = server.connect();
    assert_hello(&c.get("/"));
}

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

/// Sends `raw` on a new connection and expects an error status from `allowed`, with
/// `Connection: close`, then the close; then the server must still serve.
fn expect_error(s: &Spec, raw: &[u8], allowed: &[u16]) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    c.send(raw);
    check_error(s, &mut c, raw, allowed);
    assert_still_serves(&server);
}

/// Reads an error response from `allowed` and the close that must follow it.
fn check_error(s: &Spec, c: &mut Client, raw: &[u8], allowed: &[u16]) {
    let r = c.response();
    assert!(
        allowed.contains(&r.status),
        "expected one of {allowed:?} for {:?}, got {r:?}",
        String::from_utf8_lossy(&raw[..raw.len().min(120)])
    );
    if s.hyper {
        // hyper's own parse-error responses carry only these.
        assert!(r.header("Date").is_some(), "{r:?}");
    } else {
        assert_standard_headers(&r);
    }
    assert_eq!(r.header("Connection"), Some("close"), "{r:?}");
    c.expect_closed();
}

pub fn malformed_request_line_is_400(s: &Spec) {
    expect_error(s, b"GET /\x01 HTTP/1.1\r\nHost: test\r\n\r\n", &[400]);
    expect_error(s, b"GET / HTTP/1.1 trailing\r\nHost: test\r\n\r\n", &[400]);
}

pub fn malformed_header_is_400(s: &Spec) {
    expect_error(
        s,
        b"GET / HTTP/1.1\r\nHost: test\r\nNo colon here\r\n\r\n",
        &[400],
    );
    expect_error(
        s,
        b"GET / HTTP/1.1\r\nHost: test\r\nX-A : b\r\n\r\n",
        &[400],
    );
}

pub fn head_over_8k_is_431(s: &Spec) {
    let mut raw = b"GET / HTTP/1.1\r\nHost: test\r\nX-Big: ".to_vec();
    raw.extend(std::iter::repeat_n(b'a', 9000));
    raw.extend_from_slice(b"\r\n\r\n");
    expect_error(s, &raw, &[431]);
}

pub fn over_64_headers_is_431(s: &Spec) {
    let mut raw = b"GET / HTTP/1.1\r\nHost: test\r\n".to_vec();
    for i in 0..70 {
        raw.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
    }
    raw.extend_from_slice(b"\r\n");
    expect_error(s, &raw, &[431]);
}

pub fn uri_over_8k_is_414(s: &Spec) {
    let mut raw = b"GET /".to_vec();
    raw.extend(std::iter::repeat_n(b'a', 9000));
    raw.extend_from_slice(b" HTTP/1.1\r\nHost: test\r\n\r\n");
    expect_error(s, &raw, &[414, 431]);
}

pub fn content_length_with_transfer_encoding_is_400(s: &Spec) {
    let raw = b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    if !s.hyper {
        return expect_error(s, raw, &[400]);
    }
    // hyper takes RFC 9112 §6.3's other option: chunked framing wins, then close.
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    c.send(raw);
    let r = c.response();
    assert_hello(&r);
    assert_eq!(r.header("Connection"), Some("close"), "{r:?}");
    c.expect_closed();
}

pub fn repeated_content_length_is_400(s: &Spec) {
    expect_error(
        s,
        b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        &[400],
    );
    let same =
        b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc";
    if !s.hyper {
        return expect_error(s, same, &[400]);
    }
    // hyper merges identical values, as RFC 9110 §8.6 allows.
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    c.send(same);
    assert_hello(&c.response());
}

pub fn non_numeric_content_length_is_400(s: &Spec) {
    expect_error(
        s,
        b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 3x\r\n\r\nabc",
        &[400],
    );
    expect_error(
        s,
        b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: -1\r\n\r\n",
        &[400],
    );
}

pub fn transfer_encoding_other_than_chunked_is_400(s: &Spec) {
    expect_error(
        s,
        b"POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: gzip\r\n\r\n",
        &[400, 501],
    );
    expect_error(
        s,
        b"POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
        &[400, 501],
    );
}

pub fn transfer_encoding_on_http10_is_400(s: &Spec) {
    expect_error(
        s,
        b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        &[400],
    );
}

pub fn invalid_chunk_size_is_400(s: &Spec) {
    let head = "POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n";
    for body in ["xyz\r\n", "-5\r\n", "\r\n", "5\r\nhelloXX"] {
        expect_error(s, format!("{head}{body}").as_bytes(), &[400]);
    }
}

pub fn http11_without_host_is_400(s: &Spec) {
    expect_error(s, b"GET / HTTP/1.1\r\n\r\n", &[400]);
}

pub fn two_host_headers_is_400(s: &Spec) {
    expect_error(s, b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", &[400]);
}

pub fn body_over_1mib_is_413(s: &Spec) {
    expect_error(
        s,
        b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 2000000\r\n\r\n",
        &[413],
    );
    // A chunked upload whose size is only known as it arrives: a writer thread streams
    // it while the response is read, as a real uploading client would.
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    let head = b"POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n100001\r\n";
    let mut writer = c.stream().try_clone().unwrap();
    let upload = std::thread::spawn(move || {
        use std::io::Write;
        let _ = writer.write_all(head);
        let block = vec![b'x'; 64 * 1024];
        for _ in 0..17 {
            if writer.write_all(&block).is_err() {
                return;
            }
        }
        let _ = writer.write_all(b"\r\n0\r\n\r\n");
    });
    check_error(s, &mut c, head, &[413]);
    drop(c);
    upload.join().unwrap();
    assert_still_serves(&server);
}

pub fn unsupported_version_is_505(s: &Spec) {
    let allowed: &[u16] = if s.hyper { &[400, 505] } else { &[505] };
    expect_error(s, b"GET / HTTP/2.0\r\nHost: test\r\n\r\n", allowed);
    expect_error(s, b"GET / HTTP/1.7\r\nHost: test\r\n\r\n", allowed);
}

pub fn unknown_method_is_501(s: &Spec) {
    expect_error(s, b"DELETE / HTTP/1.1\r\nHost: test\r\n\r\n", &[501]);
    expect_error(s, b"BREW / HTTP/1.1\r\nHost: test\r\n\r\n", &[501]);
}

/// Stops `server` with SIGTERM, checks the stop was clean, and returns its stats lines.
fn stop_cleanly(mut server: Server) -> Vec<serde_json::Value> {
    let (status, took) = server
        .signal_and_wait(libc::SIGTERM, Duration::from_secs(6))
        .expect("server did not exit within 6 s of SIGTERM");
    assert!(status.success(), "exit status {status} after SIGTERM");
    assert!(took <= Duration::from_secs(5), "SIGTERM took {took:?}");
    std::thread::sleep(Duration::from_millis(50));
    assert!(!server.group_alive(), "a process of the server outlived it");
    server.stats_lines()
}

pub fn two_workers_both_serve(s: &Spec) {
    let server = Server::start(s, &["--workers", "2", "--stats"]);
    let mut first = server.connect();
    assert_hello(&first.get("/"));
    // `first` stays open: a one-connection-per-worker server must answer this from its
    // other worker.
    let mut second = server.connect();
    assert_hello(&second.get("/"));
    drop((first, second));
    let stats = stop_cleanly(server);
    assert_eq!(stats.len(), 2, "one --stats line per worker: {stats:?}");
    let workers: BTreeSet<u64> = stats.iter().filter_map(|l| l["worker"].as_u64()).collect();
    assert_eq!(workers, BTreeSet::from([0, 1]), "stats: {stats:?}");
    let requests: Vec<u64> = stats
        .iter()
        .filter_map(|l| l["requests"].as_u64())
        .collect();
    assert_eq!(requests.iter().sum::<u64>(), 2, "stats: {stats:?}");
    if s.one_conn_per_worker {
        assert_eq!(requests, vec![1, 1], "stats: {stats:?}");
    }
}

pub fn sigterm_exits_zero_leaving_no_process(s: &Spec) {
    let server = Server::start(s, &["--workers", "2"]);
    let mut idle = server.connect();
    assert_hello(&idle.get("/"));
    // The idle keep-alive connection must not keep the server alive.
    stop_cleanly(server);
    idle.expect_closed();
}

pub fn bad_flag_is_one_line_and_nonzero(s: &Spec) {
    let err = Server::try_start(s, &["--no-such-flag"])
        .err()
        .expect("started anyway");
    assert!(err.contains("no-such-flag"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

pub fn busy_port_is_one_line_and_nonzero(s: &Spec) {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let output = std::process::Command::new(crate::binary(s.binary))
        .args(s.args)
        .args(["--bind", "127.0.0.1", "--port", &port])
        .arg("--db")
        .arg(crate::test_db())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started on a busy port: {stderr}");
    assert!(stderr.contains("in use"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `--workers` for a test with `clients` concurrent connections: two workers, or, for a
/// one-connection-per-worker server, a worker per client (plus two spare), as for the
/// load tests.
fn workers_for(s: &Spec, clients: usize) -> String {
    if s.one_conn_per_worker {
        clients + 2
    } else {
        2
    }
    .to_string()
}

/// Flags for a load test with `conns` client connections: a one-connection-per-worker
/// server gets a worker for each (plus two spare).
fn load_flags(s: &Spec, conns: usize) -> Vec<String> {
    if s.one_conn_per_worker {
        vec!["--workers".into(), (conns + 2).to_string()]
    } else {
        Vec::new()
    }
}

fn start_for_load(s: &Spec, conns: usize) -> Server {
    let flags = load_flags(s, conns);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Server::start(s, &flags)
}

fn ab(s: &Spec, requests: usize, keep_alive: bool) {
    let server = start_for_load(s, 50);
    let mut args = vec![
        "-n".to_string(),
        requests.to_string(),
        "-c".into(),
        "50".into(),
    ];
    if keep_alive {
        args.push("-k".into());
    }
    args.extend(["-s".into(), "10".into(), format!("http://{}/", server.addr)]);
    let out = run_client("ab", &args, Duration::from_secs(60));
    assert_eq!(
        field(&out, "Complete requests:"),
        Some(requests as f64),
        "{out}"
    );
    assert_eq!(field(&out, "Failed requests:"), Some(0.0), "{out}");
    assert_eq!(field(&out, "Non-2xx responses:"), None, "{out}");
    if keep_alive {
        assert_eq!(
            field(&out, "Keep-Alive requests:"),
            Some(requests as f64),
            "{out}"
        );
    }
    assert_still_serves(&server);
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

pub fn killed_worker_is_restarted(s: &Spec) {
    let server = Server::start(s, &["--workers", "2"]);
    let pids = server.worker_pids();
    assert_eq!(pids.len(), 2, "{:?}", server.stderr_lines());
    // SAFETY: kill has no memory-safety preconditions; the pid is the server's worker.
    unsafe { libc::kill(pids[0], libc::SIGKILL) };
    server.await_restarts(1, Duration::from_secs(3));
    // Whichever worker (or socket) a connection lands on, it is served.
    for _ in 0..20 {
        assert_still_serves(&server);
    }
}

/// `ss -ltn` sees one socket per worker for SO_REUSEPORT models, one shared otherwise.
pub fn listening_sockets_match_the_model(s: &Spec) {
    let server = Server::start(s, &["--workers", "3"]);
    let expected = if s.reuseport { 3 } else { 1 };
    assert_eq!(crate::listening_sockets(server.addr.port()), expected);
    assert_still_serves(&server);
}

fn sum_value(r: &Response) -> u32 {
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("Content-Type"), Some("text/plain"));
    variants::workloads::sum_value(&r.body)
        .unwrap_or_else(|| panic!("not a plausible /sum body: {:?}", r.body_str()))
}

pub fn sum_returns_a_plausible_total(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    let sums: BTreeSet<u32> = (0..5).map(|_| sum_value(&c.get("/sum"))).collect();
    assert!(sums.len() > 1, "five identical random sums: {sums:?}");
}

fn db_value(r: &Response) -> f64 {
    assert_eq!(r.status, 200, "{r:?}");
    variants::workloads::db_value(&r.body)
        .unwrap_or_else(|| panic!("not a /db sum with six decimals: {:?}", r.body_str()))
}

pub fn db_sums_ten_rows_per_query(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    // Values are uniform in [0, 10000): ten rows sum to less than 100000 each query.
    let one = db_value(&c.get("/db?queries=1"));
    assert!(one > 0.0 && one < 100_000.0, "{one}");
    let default = db_value(&c.get("/db"));
    assert!(default > 0.0 && default < 1_000_000.0, "{default}");
    let many = db_value(&c.get("/db?queries=500"));
    assert!(many > default, "{many} <= {default}");
}

pub fn db_rejects_bad_queries_with_400(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    for bad in ["0", "501", "abc", "-1", ""] {
        let r = c.get(&format!("/db?queries={bad}"));
        assert_eq!(r.status, 400, "queries={bad}: {r:?}");
        assert!(r.body_str().contains("1..=500"), "{r:?}");
    }
    // A bad parameter is an answer, not a protocol error: the connection stays usable.
    db_value(&c.get("/db?queries=2"));
}

pub fn sleep_waits_while_others_are_served(s: &Spec) {
    let server = Server::start(s, &["--workers", "2"]);
    let mut sleeper = server.connect();
    let started = std::time::Instant::now();
    sleeper.send(b"GET /sleep?ms=300 HTTP/1.1\r\nHost: test\r\n\r\n");
    std::thread::sleep(Duration::from_millis(30));
    // Another client is served during the wait (by another worker at least).
    let other = std::time::Instant::now();
    assert_hello(&server.connect().get("/"));
    assert!(
        other.elapsed() < Duration::from_millis(250),
        "{:?}",
        other.elapsed()
    );
    let r = sleeper.response();
    assert_eq!((r.status, r.body_str()), (200, "slept=300"));
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_hello(&sleeper.get("/"));
}

pub fn sleep_rejects_bad_ms_with_400(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut c = server.connect();
    for bad in ["10001", "-5", "soon", ""] {
        assert_eq!(c.get(&format!("/sleep?ms={bad}")).status, 400, "ms={bad}");
    }
    assert_eq!(c.get("/sleep?ms=0").body_str(), "slept=0");
}

pub fn framework_stack_serves_the_same_bodies(s: &Spec) {
    let server = Server::start(s, &["--stack", "framework"]);
    let mut c = server.connect();
    for path in ["/", "/plaintext"] {
        let r = c.get(path);
        assert_hello(&r);
        assert!(r.header("X-Request-Id").is_some(), "{r:?}");
    }
    assert_eq!(c.get("/json").body_str(), JSON);
    sum_value(&c.get("/sum"));
    db_value(&c.get("/db?queries=2"));
    assert_eq!(c.get("/sleep?ms=5").body_str(), "slept=5");
    assert_eq!(c.get("/db?queries=0").status, 400);
    assert_eq!(c.get("/hello/archzoo").body_str(), "hello, archzoo!");
    assert_eq!(c.get("/missing").status, 404);
    // Pipelined, with a POST body in between, through the framework too.
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\nPOST /json HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}");
    assert_hello(&c.response());
    assert_eq!(c.response().body_str(), JSON);
}

pub fn worker_dying_mid_request_answers_502(s: &Spec) {
    let server = Server::start(s, &["--workers", "2"]);
    let mut c = server.connect();
    assert_hello(&c.get("/"));
    c.send(b"GET /sleep?ms=4000 HTTP/1.1\r\nHost: test\r\n\r\n");
    std::thread::sleep(Duration::from_millis(300));
    for pid in server.worker_pids() {
        // SAFETY: kill has no memory-safety preconditions; these are the server's workers.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let started = std::time::Instant::now();
    let r = c.response();
    assert_eq!(r.status, 502, "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // The client connection survived the crash; once both workers are back, they serve it.
    server.await_restarts(2, Duration::from_secs(3));
    assert_hello(&c.get("/"));
}

/// Every corpus entry on a fresh connection (then half-closed): a 4xx/5xx or a close, never
/// a 2xx (hyper may accept the `lenient` ones), and afterwards the server still serves,
/// logged no panic and restarted no worker.
pub fn malformed_corpus_is_refused(s: &Spec) {
    let server = Server::start(s, &[]);
    let mut failures = Vec::new();
    for entry in crate::corpus::load() {
        let mut c = server.connect();
        // The server may close before reading everything: a failed write is fine.
        let _ = std::io::Write::write_all(&mut c.stream().try_clone().unwrap(), &entry.bytes);
        let _ = c.stream().shutdown(std::net::Shutdown::Write);
        let (answer, closed) = c.read_to_close(Duration::from_secs(5));
        let text = String::from_utf8_lossy(&answer);
        let status: Option<u16> = text
            .strip_prefix("HTTP/1.")
            .and_then(|r| r.get(2..5))
            .and_then(|code| code.parse().ok());
        let allowed = match status {
            None => closed && answer.is_empty(),
            Some(code) if code >= 400 => true,
            Some(_) => s.hyper && entry.expect == crate::corpus::Expect::Lenient,
        };
        if !allowed || !closed {
            failures.push(format!(
                "{}: status {status:?}, closed {closed}: {:?}",
                entry.name,
                text.chars().take(80).collect::<String>()
            ));
        }
        assert_still_serves(&server);
    }
    let log = server.stderr_lines().join("\n");
    assert!(!log.contains("panicked"), "{log}");
    assert!(!log.contains("restart"), "{log}");
    assert!(
        failures.is_empty(),
        "{} entries:\n{}",
        failures.len(),
        failures.join("\n")
    );
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
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert_still_serves(&server);
}

/// An idle keep-alive connection is closed after `--idle-timeout`, silently.
pub fn idle_keep_alive_closes_after_idle_timeout(s: &Spec) {
    // hyper applies its head timeout to idle connections too.
    let server = Server::start(s, &["--idle-timeout", "1", "--header-timeout", "2"]);
    let mut c = server.connect();
    assert_hello(&c.get("/"));
    let started = std::time::Instant::now();
    c.expect_closed();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "{took:?}"
    );
}

/// At `--max-conns` a worker stops accepting: the next connection waits in the listen
/// queue (unanswered) until one of the others closes, then it is served.
pub fn max_conns_leaves_new_connections_queued(s: &Spec) {
    // The limit holds per accepting thread: per reactor in reactor-workers.
    let acceptors: usize = s
        .args
        .iter()
        .position(|a| *a == "--reactors")
        .and_then(|i| s.args.get(i + 1)?.parse().ok())
        .unwrap_or(1);
    let server = Server::start(s, &["--workers", "1", "--max-conns", "2"]);
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

/// The master killed with SIGKILL: no worker (or manager) outlives it.
pub fn master_killed_leaves_no_worker_behind(s: &Spec) {
    let mut server = Server::start(s, &["--workers", "2"]);
    assert_still_serves(&server);
    server.signal_and_wait(libc::SIGKILL, Duration::from_secs(2));
    let started = std::time::Instant::now();
    while server.group_alive() {
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "workers outlived the master"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGTERM while a request is being handled: the request is answered, then the connection
/// closes and the server exits 0 — a graceful stop drains, it does not cut.
pub fn sigterm_finishes_requests_in_flight(s: &Spec) {
    let mut server = Server::start(s, &["--workers", "2"]);
    let mut busy = server.connect();
    busy.send(b"GET /sleep?ms=700 HTTP/1.1\r\nHost: test\r\n\r\n");
    std::thread::sleep(Duration::from_millis(150));
    // SAFETY: signals the server's main process.
    unsafe { libc::kill(server.pid(), libc::SIGTERM) };
    let r = busy.response();
    assert_eq!((r.status, r.body_str()), (200, "slept=700"), "{r:?}");
    busy.expect_closed();
    let (status, took) = server
        .signal_and_wait(0, Duration::from_secs(6))
        .expect("server did not exit after draining");
    assert!(status.success(), "exit status {status}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// Shrinks a client socket's receive buffer to 4 KiB: the window stays small, so a server
/// answering a client that does not read soon has its own writes block.
fn small_receive_window(stream: &std::net::TcpStream) {
    let small: libc::c_int = 4096;
    // SAFETY: setsockopt on our own socket with a valid int.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(stream),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&small as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// A client that pipelines requests and never reads the answers cannot hold the server:
/// once its output has waited past the idle deadline the connection is dropped, with the
/// output bounded meanwhile, and the server goes on serving others.
pub fn a_client_that_never_reads_is_dropped(s: &Spec) {
    // ~13 MB of responses: more than the kernel buffers of both sockets can hold, so
    // the server's own writes block.
    const REQUESTS: usize = 100_000;
    let server = Server::start(s, &["--idle-timeout", "1", "--header-timeout", "1"]);
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

/// SIGTERM under continuous keep-alive load: every connection either gets complete
/// responses or is closed between requests — at most its last request (sent as the close
/// raced it, never read by the server) goes unanswered, and never half a response.
pub fn sigterm_under_load_drops_no_accepted_request(s: &Spec) {
    const CLIENTS: usize = 6;
    let workers = workers_for(s, CLIENTS);
    let mut server = Server::start(s, &["--workers", &workers]);
    let addr = server.addr;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut stream = std::net::TcpStream::connect(addr).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(8)))
                    .unwrap();
                let (mut answered, mut unanswered, mut partial) = (0u32, 0u32, 0u32);
                let mut buf = [0u8; 4096];
                while !stop.load(std::sync::atomic::Ordering::SeqCst) || answered == 0 {
                    if stream.write_all(GET).is_err() {
                        break;
                    }
                    let mut got = Vec::new();
                    let complete = loop {
                        match stream.read(&mut buf) {
                            Ok(0) | Err(_) => break false,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                        if got.ends_with(HELLO.as_bytes()) {
                            break true;
                        }
                    };
                    if complete {
                        answered += 1;
                    } else {
                        if got.is_empty() {
                            unanswered += 1;
                        } else {
                            partial += 1;
                        }
                        break;
                    }
                }
                (answered, unanswered, partial)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signals the server's main process.
    unsafe { libc::kill(server.pid(), libc::SIGTERM) };
    let (status, _) = server
        .signal_and_wait(0, Duration::from_secs(6))
        .expect("server did not exit under load");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for t in threads {
        let (answered, unanswered, partial) = t.join().unwrap();
        assert!(answered > 0, "a client got nothing before the stop");
        assert_eq!(partial, 0, "half a response after SIGTERM");
        assert!(
            unanswered <= 1,
            "{unanswered} requests lost on one connection"
        );
    }
    assert!(status.success(), "exit status {status}");
}

/// SIGKILL one worker under keep-alive load: only the connections (or, behind an IPC hop,
/// the requests) that the dead worker held fail, once each; every client is served again
/// within a second, and the supervisor restarts the worker within a second.
pub fn killed_worker_under_load_spares_the_others(s: &Spec) {
    const CLIENTS: usize = 8;
    let workers = workers_for(s, CLIENTS);
    let server = Server::start(s, &["--workers", &workers]);
    let addr = server.addr;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let connect = || {
                    let c = std::net::TcpStream::connect(addr).ok()?;
                    c.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
                    Some(c)
                };
                let mut stream = connect();
                let (mut ok, mut failures) = (0u32, 0u32);
                let mut failed_at: Option<std::time::Instant> = None;
                let mut recovery = Duration::ZERO;
                let mut buf = [0u8; 4096];
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let Some(c) = stream.as_mut() else {
                        stream = connect();
                        continue;
                    };
                    let mut got = Vec::new();
                    let answered = c.write_all(GET).is_ok()
                        && loop {
                            match c.read(&mut buf) {
                                Ok(0) | Err(_) => break false,
                                Ok(n) => got.extend_from_slice(&buf[..n]),
                            }
                            if got.ends_with(HELLO.as_bytes()) {
                                break true;
                            }
                            // Behind an IPC hop the lost request is answered 502.
                            if got.windows(12).any(|w| w == b" 502 Bad Gat") && got.ends_with(b"\n")
                            {
                                break false;
                            }
                        };
                    if answered {
                        ok += 1;
                        if let Some(t) = failed_at.take() {
                            recovery = recovery.max(t.elapsed());
                        }
                    } else {
                        failures += 1;
                        failed_at.get_or_insert_with(std::time::Instant::now);
                        if !got.windows(4).any(|w| w == b" 502") {
                            stream = connect(); // the connection died with its worker
                        }
                    }
                }
                (ok, failures, recovery, failed_at.is_some())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let victim = server.worker_pids()[0];
    // SAFETY: kill has no memory-safety preconditions; the pid is the server's worker.
    unsafe { libc::kill(victim, libc::SIGKILL) };
    server.await_restarts(1, Duration::from_secs(1));
    std::thread::sleep(Duration::from_millis(700));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    // With SO_REUSEPORT a reconnect can also land in the dying worker's own accept queue
    // just before its socket leaves the group, and be reset with it (unless the machine
    // sets net.ipv4.tcp_migrate_req): one more failure for those clients.
    let allowed = if s.reuseport { 2 } else { 1 };
    for t in threads {
        let (ok, failures, recovery, still_failing) = t.join().unwrap();
        assert!(ok > 0, "a client was never served");
        assert!(failures <= allowed, "{failures} failures on one client");
        assert!(
            !still_failing,
            "a client was not served again after the kill"
        );
        assert!(
            recovery < Duration::from_secs(1),
            "served again only after {recovery:?}"
        );
    }
    assert_still_serves(&server);
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
