//! The rules, one function each, named after the rule it pins down, in one file per area
//! (as mini-redis keeps one command per file): `protocol`, `errors`, `lifecycle`, `load`,
//! `workloads`, `database`, `robustness`. Each starts its own server, so a failure names
//! exactly one server and one rule. This file holds the helpers they share and [`RULES`],
//! the table the suite is generated from.

mod database;
mod errors;
mod lifecycle;
mod load;
mod protocol;
mod robustness;
mod workloads;

pub use self::{
    database::*, errors::*, lifecycle::*, load::*, protocol::*, robustness::*, workloads::*,
};

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use crate::{ab_fails_only_on_idle_closes, field, run_client, Client, Response, Server, Spec};

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

fn one_conn_per_worker(s: &Spec) -> bool {
    s.one_conn_per_worker
}

fn holds_keep_alive(s: &Spec) -> bool {
    s.holds_keep_alive
}

fn yields_to_the_queue(s: &Spec) -> bool {
    s.one_conn_per_worker && !s.holds_keep_alive
}

fn coroutine_ipc(s: &Spec) -> bool {
    s.ipc && !s.blocking_workers
}

/// A row that forwards requests to workers in turn (reactor-workers' default dispatch).
fn round_robin_ipc(s: &Spec) -> bool {
    s.ipc && !s.args.contains(&"--dispatch")
}

fn waits_without_a_thread(s: &Spec) -> bool {
    !s.blocking_workers
}

fn waits_for_the_database_without_a_thread(s: &Spec) -> bool {
    !s.blocks_on_database
}

/// A table of rules in suite order; `rule if capability => "why not otherwise"` for the
/// rules that hold only for some rows.
macro_rules! rules {
    ($(#[$doc:meta])* $table:ident: $($name:ident $(if $cap:ident => $why:literal)?,)*) => {
        $(#[$doc])*
        pub const $table: &[Rule] = &[$(Rule {
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
    /// Every rule about behaviour: the suite runs them side by side.
    RULES:
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
    pipelined_answers_keep_order_when_the_first_waits,
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
    trickled_head_gets_408_after_header_timeout,
    slow_body_gets_408_after_header_timeout,
    a_client_that_never_reads_is_dropped,
    stalled_readers_do_not_starve_others if many_conns => "one connection per worker: a newcomer waits by design (the slowloris rule covers it)",
    keepalive_timeout_closes_an_idle_connection,
    keepalive_requests_limit_closes_cleanly,
    keepalive_yields_to_a_queued_client if yields_to_the_queue => "only a worker that serves one connection at a time makes a client queue behind a keep-alive connection",
    keepalive_is_held_while_clients_queue if holds_keep_alive => "the row answers `Connection: close` when a client queues, or never makes one queue",
    two_workers_both_serve,
    round_robin_turns_are_shared_by_reactors if round_robin_ipc => "only a row that forwards each request to the next worker in turn has a turn to share",
    sigterm_exits_zero_leaving_no_process,
    an_idle_server_sleeps,
    sigterm_finishes_requests_in_flight,
    sigterm_under_load_drops_no_accepted_request,
    bad_flag_is_one_line_and_nonzero,
    busy_port_is_one_line_and_nonzero,
    sum_returns_a_plausible_total,
    db_sums_ten_rows_per_query,
    db_rejects_bad_queries_with_400,
    sleep_waits_while_others_are_served,
    sleeps_overlap_in_one_worker if waits_without_a_thread => "a blocking worker sleeps through each wait: that is its model (sleep_waits_while_others_are_served covers it with two workers)",
    sleep_rejects_bad_ms_with_400,
    pg_sums_the_rows_it_read,
    pg_without_a_database_is_503,
    pg_outage_is_503_then_recovers,
    pg_slow_query_shows_the_model,
    pg_pool_wait_is_bounded if waits_for_the_database_without_a_thread => "a worker blocked on the database uses one connection at a time: its pool never runs out",
    framework_stack_serves_the_same_bodies,
    killed_worker_is_restarted if processes => "its workers are threads or shards of one process: nothing to kill alone",
    killed_worker_under_load_spares_the_others if processes => "its workers are threads or shards of one process: nothing to kill alone",
    killed_worker_requests_are_still_counted if processes => "its workers are threads or shards of one process: nothing to kill alone",
    master_killed_leaves_no_worker_behind if processes => "one process: nothing can be left behind",
    idle_connections_stay_cheap if many_conns => "one connection per worker: it holds no idle connections, its workers wait for them",
    max_conns_leaves_new_connections_queued if many_conns => "one connection per worker is its model: the limit is always 1",
    accept_errors_back_off if many_conns => "one connection per worker never runs out of descriptors",
    open_file_limit_is_raised,
    a_burst_bigger_than_the_hop_is_answered_in_full if ipc => "only a row with an IPC hop has a socket between processes for a burst to fill",
    worker_dying_mid_request_answers_502 if ipc => "the connection lives in the process that dies: nothing is left to answer with",
    worker_dying_with_many_requests_answers_each_502 if coroutine_ipc => "only a worker behind an IPC hop that runs many requests at once (reactor-workers' coroutine workers) has many to answer for",
    listening_sockets_match_the_model,
    ab_without_keep_alive,
    ab_with_keep_alive,
    readme_ab_keep_alive_example_completes if one_conn_per_worker => "a server that holds many connections per worker serves the README example at once (ab_with_keep_alive covers it)",
    ab_keep_alive_at_the_posts_concurrency_completes if yields_to_the_queue => "a server that holds many connections per worker holds them all (ab_with_keep_alive covers it); one that holds keep-alive while clients queue, as Apache prefork, gets through 1,000 connections only after most of an hour of idle timeouts",
    wrk_keep_alive,
}

rules! {
    /// The rules that measure a server's CPU per request: the suite runs them after
    /// [`RULES`], one at a time, on a machine nothing else of the suite is loading — beside
    /// the other rules' servers (two CPUs, hundreds of servers) a model's cost per request
    /// moves with how the scheduler batches its wake-ups, by more than any tolerance that
    /// would still catch a mistake.
    MEASURED:
    work_us_adds_the_asked_cpu,
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

/// The response says `Connection: close`.
fn says_close(r: &Response) -> bool {
    r.header("Connection")
        .is_some_and(|v| v.eq_ignore_ascii_case("close"))
}

/// The server's start-up line says `expected`.
fn assert_announces(server: &Server, expected: &str) {
    let lines = server.stderr_lines();
    assert!(
        lines.iter().any(|l| l.contains(expected)),
        "start-up line lacks {expected:?}: {lines:?}"
    );
}

/// A fresh connection still gets hello world: the server survived whatever came before.
fn assert_still_serves(server: &Server) {
    let mut c = server.connect();
    assert_hello(&c.get("/"));
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
        // Every response keeps the connection open, except where a model closes after
        // --keepalive-requests (prefork-blocking: every 100th, as Apache).
        let kept = field(&out, "Keep-Alive requests:").unwrap_or(0.0);
        assert!(kept >= requests as f64 * 0.98, "{out}");
    }
    assert_still_serves(&server);
}

fn sum_value(r: &Response) -> u32 {
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("Content-Type"), Some("text/plain"));
    variants::workloads::sum_value(&r.body)
        .unwrap_or_else(|| panic!("not a plausible /sum body: {:?}", r.body_str()))
}

fn db_value(r: &Response) -> f64 {
    assert_eq!(r.status, 200, "{r:?}");
    variants::workloads::db_value(&r.body)
        .unwrap_or_else(|| panic!("not a /db sum with six decimals: {:?}", r.body_str()))
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
