//! The codec's tests: every request shape and every error path over the connection state
//! machine, with a handler of their own (no routes, no database).

use super::*;
use crate::handler::Reply;
use crate::response::Body;

/// The codec's own test handler: `/` says hello, `/json` answers JSON, the rest is 404.
/// No routes, no stack, no database: the protocol is tested on its own.
fn hello(req: &Request, _: &App) -> Reply {
    match req.path() {
        "/" => Reply::now(Response::new(
            200,
            "text/plain",
            Body::Static(b"hello, world!"),
        )),
        "/json" => Reply::now(Response::new(200, "application/json", Body::Static(b"{}"))),
        _ => Reply::now(Response::text(404, "not found\n")),
    }
}

fn config() -> ConnConfig {
    ConnConfig::new(hello)
}

/// Feeds `input` in one go and processes until the codec wants more or closes.
fn run(input: &[u8]) -> (String, Progress) {
    let mut c = Conn::new(&config());
    c.feed(input);
    let p = c.process();
    (String::from_utf8_lossy(c.output()).into_owned(), p)
}

/// The status of each response in `out`, walking them by their Content-Length.
fn statuses(mut out: &str) -> Vec<u16> {
    let mut found = Vec::new();
    while let Some(head_end) = out.find("\r\n\r\n") {
        let head = &out[..head_end];
        found.push(head[9..12].parse().unwrap());
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .map_or(0, |v| v.parse().unwrap());
        out = &out[head_end + 4 + length..];
    }
    found
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

#[test]
fn simple_get_keeps_connection_open() {
    let (out, p) = run(GET);
    assert_eq!(p, Progress::Read);
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"));
    assert!(out.ends_with("\r\n\r\nhello, world!"));
}

/// True if the connection holds no buffer of its own.
fn holds_nothing<M: Mode>(c: &Conn<M>) -> bool {
    c.buf.capacity() == 0 && c.out.capacity() == 0
}

#[test]
fn an_idle_connection_holds_no_buffer() {
    let mut c = Conn::new(&config());
    assert!(holds_nothing(&c), "a new connection borrows nothing yet");
    c.feed(GET);
    assert_eq!(c.process(), Progress::Read);
    assert!(!c.output().is_empty() && !holds_nothing(&c));
    let n = c.output().len();
    c.written(n);
    assert!(
        holds_nothing(&c),
        "answered and written: both buffers go back"
    );

    // Half a request keeps its bytes until the rest arrives.
    c.feed(&GET[..10]);
    assert_eq!(c.process(), Progress::Read);
    assert!(c.buf.capacity() > 0 && c.mid_request());
    c.feed(&GET[10..]);
    assert_eq!(c.process(), Progress::Read);
    let n = c.output().len();
    c.written(n);
    assert!(holds_nothing(&c));

    // A read that found nothing gives the buffer back; a lone empty line too.
    let _ = c.read_buf();
    c.unread();
    assert!(holds_nothing(&c));
    c.feed(b"\r\n");
    assert_eq!(c.process(), Progress::Read);
    assert!(holds_nothing(&c));
}

/// A connection closed after its answer is never idle again, so it still holds its
/// buffers when it ends; dropping it gives them back to the pool for the next connection
/// (without keep-alive, every connection ends so), with the string its request target was
/// copied into.
#[test]
fn a_connection_closed_after_its_answer_gives_its_buffers_back() {
    let mut c = Conn::new(&config());
    c.feed(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(c.process(), Progress::Close);
    let n = c.output().len();
    c.written(n);
    assert!(!holds_nothing(&c), "a closing connection is not idle");
    let before = buffers::pooled();
    drop(c);
    assert_eq!(
        buffers::pooled(),
        (before.0 + 1, before.1 + 1, before.2 + 1)
    );
}

#[test]
fn output_written_in_parts_is_kept_until_the_last_byte() {
    let mut c = Conn::new(&config());
    c.feed(GET);
    c.process();
    let n = c.output().len();
    c.written(n - 1);
    assert_eq!(c.output(), b"!");
    c.written(1);
    assert!(holds_nothing(&c));
}

#[test]
fn a_forwarding_connection_keeps_its_buffers_while_answers_are_owed() {
    let mut c = Conn::forwarding(&config());
    c.feed(GET);
    assert_eq!(c.process(), Step::Forward);
    assert_eq!(c.process(), Step::Read);
    assert_eq!(c.in_flight(), 1);
    assert!(
        !c.is_idle(),
        "an answer is owed: not idle, whatever it holds"
    );
    let seq = c.forwarded_seq();
    assert!(c.deliver(seq, Response::text(200, "ok")));
    assert_eq!(c.process(), Step::Read);
    let n = c.output().len();
    assert!(n > 0);
    c.written(n);
    assert!(holds_nothing(&c));
}

#[test]
fn sixteen_pipelined_requests_answered_in_order_in_one_buffer() {
    let mut input = Vec::new();
    for i in 0..16 {
        let path = if i % 2 == 0 { "/" } else { "/nope" };
        input.extend_from_slice(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
    }
    let (out, p) = run(&input);
    assert_eq!(p, Progress::Read);
    let expected: Vec<u16> = (0..16)
        .map(|i| if i % 2 == 0 { 200 } else { 404 })
        .collect();
    assert_eq!(statuses(&out), expected);
}

#[test]
fn byte_at_a_time_gives_one_response() {
    let mut c = Conn::new(&config());
    for (i, b) in GET.iter().enumerate() {
        c.feed(&[*b]);
        assert_eq!(c.process(), Progress::Read);
        assert_eq!(c.output().is_empty(), i + 1 < GET.len());
    }
    assert_eq!(statuses(&String::from_utf8_lossy(c.output())), vec![200]);
}

#[test]
fn http10_closes_unless_keep_alive() {
    let (out, p) = run(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(p, Progress::Close);
    assert!(out.contains("Connection: close"));
    let (out, p) = run(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    assert_eq!(p, Progress::Read);
    assert!(out.contains("Connection: keep-alive\r\n"));
}

#[test]
fn connection_close_token_in_a_list() {
    let (_, p) = run(b"GET / HTTP/1.1\r\nHost: x\r\nconnection: foo, CLOSE\r\n\r\n");
    assert_eq!(p, Progress::Close);
}

#[test]
fn content_length_body_is_skipped_across_reads() {
    let mut c = Conn::new(&config());
    c.feed(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234");
    assert_eq!(c.process(), Progress::Read);
    assert!(c.output().is_empty());
    c.feed(b"56789GET /json HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.process(), Progress::Read);
    assert_eq!(
        statuses(&String::from_utf8_lossy(c.output())),
        vec![200, 200]
    );
}

#[test]
fn chunked_body_with_extensions_and_trailers() {
    let req = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
        5;name=value\r\nhello\r\nA ; a=\"b\"\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n\
        GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let (out, p) = run(req);
    assert_eq!(p, Progress::Read);
    assert_eq!(statuses(&out), vec![200, 200]);
    // and the same, one byte at a time
    let mut c = Conn::new(&config());
    for b in req {
        c.feed(&[*b]);
        assert_eq!(c.process(), Progress::Read);
    }
    assert_eq!(
        statuses(&String::from_utf8_lossy(c.output())),
        vec![200, 200]
    );
}

#[test]
fn head_has_length_but_no_body() {
    let (out, _) = run(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(out.contains("Content-Length: 13\r\n"));
    assert!(out.ends_with("\r\n\r\n"));
}

#[test]
fn expect_continue_is_answered_before_the_body() {
    let mut c = Conn::new(&config());
    c.feed(b"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
    assert_eq!(c.process(), Progress::Read);
    assert_eq!(c.output(), CONTINUE);
}

fn rejected(input: &[u8]) -> u16 {
    let (out, p) = run(input);
    assert_eq!(p, Progress::Close, "{out}");
    assert!(out.contains("Connection: close"));
    *statuses(&out).last().unwrap()
}

#[test]
fn error_statuses() {
    let cases: &[(&[u8], u16)] = &[
        (b"GET / HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\nx", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n\r\nx", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400),
        (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\nx\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n11111111111111111\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n200000\r\n", 413),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n", 413),
        (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        (b"GET / HTTP/1.2\r\nHost: x\r\n\r\n", 505),
        (b"GET / FOO/1.1\r\nHost: x\r\n\r\n", 400),
        (b"PUT / HTTP/1.1\r\nHost: x\r\n\r\n", 501),
        (b"GET nothing HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\nHost: x\n\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\nA: b\r\n\r\n", 400),
    ];
    for (input, status) in cases {
        assert_eq!(
            rejected(input),
            *status,
            "{}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn oversized_heads() {
    let mut long_field = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    long_field.extend(std::iter::repeat_n(b'a', MAX_HEAD));
    assert_eq!(rejected(&long_field), 431);
    let mut long_uri = b"GET /".to_vec();
    long_uri.extend(std::iter::repeat_n(b'a', MAX_HEAD));
    assert_eq!(rejected(&long_uri), 414);
    let mut many = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..MAX_HEADERS {
        many.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(rejected(&many), 431);
}

#[test]
fn absolute_form_target_routes_on_its_path() {
    let (out, _) = run(b"GET http://example.com/json?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(out.contains("application/json"));
    let r = Request::new(Method::Get, Version::Http11, "/a/b?c=d").unwrap();
    assert_eq!((r.path(), r.query()), ("/a/b", Some("c=d")));
}

#[test]
fn leading_empty_lines_are_ignored() {
    let (out, _) = run(b"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(statuses(&out), vec![200]);
}

#[test]
fn waiting_reply_is_sent_on_the_next_process_call() {
    fn slow(_: &Request, _: &App) -> Reply {
        Reply::after(Duration::from_millis(5), Response::text(200, "late"))
    }
    let mut c = Conn::new(&ConnConfig::new(slow));
    c.feed(GET);
    c.feed(GET);
    assert_eq!(c.process(), Progress::Wait(Duration::from_millis(5)));
    assert!(c.output().is_empty());
    assert_eq!(c.process(), Progress::Wait(Duration::from_millis(5)));
    assert_eq!(c.process(), Progress::Read);
    assert_eq!(
        statuses(&String::from_utf8_lossy(c.output())),
        vec![200, 200]
    );
}

#[test]
fn forwarded_requests_go_on_at_once_and_are_answered_in_order() {
    let mut c = Conn::forwarding(&config());
    c.feed(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.process(), Step::Forward);
    assert_eq!(c.request().path(), "/a");
    let a = c.forwarded_seq();
    // The next pipelined request goes on without waiting for the first answer.
    assert_eq!(c.process(), Step::Forward);
    assert_eq!(c.request().path(), "/b");
    let b = c.forwarded_seq();
    assert_eq!((c.process(), c.in_flight()), (Step::Read, 2));
    assert_eq!(c.read_deadline(), None, "the server owes the next move");
    // /b is answered first, but nothing goes out before /a's answer.
    assert!(c.deliver(b, Response::text(502, "worker died")));
    assert_eq!(c.process(), Step::Read);
    assert!(c.output().is_empty());
    assert!(c.deliver(a, Response::text(200, "a")));
    assert!(
        !c.deliver(a, Response::text(200, "again")),
        "one answer each"
    );
    assert_eq!(c.process(), Step::Read);
    assert_eq!(
        statuses(&String::from_utf8_lossy(c.output())),
        vec![200, 502]
    );
    assert_eq!(c.in_flight(), 0);
    assert!(c.read_deadline().is_some(), "idle again");
}

#[test]
fn forwarding_waits_for_answers_before_closing_and_past_the_cap() {
    let mut c = Conn::forwarding(&config());
    c.feed(b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(c.process(), Step::Forward);
    let a = c.forwarded_seq();
    assert_eq!(
        c.process(),
        Step::Await,
        "the answer is owed before the close"
    );
    c.deliver(a, Response::text(200, "a"));
    assert_eq!(c.process(), Step::Close);
    assert!(String::from_utf8_lossy(c.output()).contains("Connection: close"));

    let mut c = Conn::forwarding(&config());
    let one = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    for _ in 0..MAX_IN_FLIGHT + 1 {
        c.feed(one);
    }
    for _ in 0..MAX_IN_FLIGHT {
        assert_eq!(c.process(), Step::Forward);
    }
    assert_eq!(c.process(), Step::Await, "no more than MAX_IN_FLIGHT out");
    let first = c.forwarded_seq().wrapping_sub(MAX_IN_FLIGHT as u16 - 1);
    c.deliver(first, Response::text(200, "ok"));
    assert_eq!(c.process(), Step::Forward, "room again");
}

#[test]
fn an_error_after_forwarded_requests_waits_its_turn() {
    let mut c = Conn::forwarding(&config());
    c.feed(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nBAD\r\n\r\n");
    assert_eq!(c.process(), Step::Forward);
    let a = c.forwarded_seq();
    assert_eq!(c.process(), Step::Await);
    assert!(
        c.output().is_empty(),
        "the 400 must not overtake /a's answer"
    );
    c.deliver(a, Response::text(200, "a"));
    assert_eq!(c.process(), Step::Close);
    assert_eq!(
        statuses(&String::from_utf8_lossy(c.output())),
        vec![200, 400]
    );
}

#[test]
fn forwarded_requests_count_toward_the_keepalive_limit() {
    let mut cfg = config();
    cfg.keepalive_requests = 2;
    let mut c = Conn::forwarding(&cfg);
    let one = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    c.feed(&[&one[..], one, one].concat());
    assert_eq!(c.process(), Step::Forward);
    assert_eq!(c.process(), Step::Forward);
    assert_eq!(c.process(), Step::Await, "the third is never forwarded");
    let last = c.forwarded_seq();
    c.deliver(last.wrapping_sub(1), Response::text(200, "1"));
    c.deliver(last, Response::text(200, "2"));
    assert_eq!(c.process(), Step::Close);
    let out = String::from_utf8_lossy(c.output()).into_owned();
    assert_eq!(statuses(&out), vec![200, 200]);
    assert_eq!(out.matches("Connection: close").count(), 1);
    assert!(
        c.should_linger(),
        "the unread third request asks for a lingering close"
    );
}

#[test]
fn deadlines_follow_the_request_phase() {
    let t = Timeouts::default();
    let mut c = Conn::new(&config());
    let idle = c.read_deadline().unwrap();
    assert!(idle > Instant::now() + t.idle - Duration::from_secs(1));
    c.feed(b"GET / HTTP/1.1\r\nHo");
    assert_eq!(c.process(), Progress::Read);
    let head = c.read_deadline().unwrap();
    assert!(head < Instant::now() + t.header + Duration::from_millis(10));
    assert!(!c.expired(Instant::now()));
    assert!(c.expired(head));
    assert_eq!(c.expire(), Progress::Close);
    assert_eq!(statuses(&String::from_utf8_lossy(c.output())), vec![408]);
    // An idle connection closes without a word.
    let mut idle = Conn::new(&config());
    idle.feed(GET);
    idle.process();
    idle.written(idle.output().len());
    assert!(idle.read_deadline().unwrap() > Instant::now() + t.header);
    assert_eq!(idle.expire(), Progress::Close);
    assert!(idle.output().is_empty());
}

#[test]
fn partial_writes_are_tracked() {
    let mut c = Conn::new(&config());
    c.feed(GET);
    c.process();
    let total = c.output().len();
    c.written(10);
    assert_eq!(c.output().len(), total - 10);
    c.written(total - 10);
    assert!(c.output().is_empty());
    assert!(c.is_idle());
}

#[test]
fn feed_takes_what_fits_and_never_spins() {
    let mut c = Conn::new(&config());
    let flood = vec![b'a'; 3 * MAX_BUF];
    let taken = c.feed(&flood);
    assert!(taken > 0 && taken <= MAX_BUF, "took {taken}");
    // Nothing fits until `process` has consumed something.
    assert_eq!(c.feed(&flood), 0);
    assert_eq!(c.process(), Progress::Close);
    assert_eq!(statuses(&String::from_utf8_lossy(c.output())), vec![414]);
}

#[test]
fn connections_with_different_settings_share_a_process() {
    let short = ConnConfig {
        timeouts: Timeouts {
            header: Duration::from_secs(1),
            idle: Duration::from_secs(2),
        },
        ..config()
    };
    let (a, b) = (Conn::new(&short), Conn::new(&config()));
    let now = Instant::now();
    assert!(a.read_deadline().unwrap() < now + Duration::from_secs(3));
    assert!(b.read_deadline().unwrap() > now + Duration::from_secs(59));
    assert_eq!(a.timeouts().idle, Duration::from_secs(2));
}

#[test]
fn headers_are_captured_only_when_asked() {
    let capturing = ConnConfig {
        capture_headers: true,
        ..config()
    };
    for (cfg, expected) in [(config(), 0), (capturing, 2)] {
        let mut c = Conn::new(&cfg);
        c.feed(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\r\n");
        c.process();
        assert_eq!(c.request().headers().len(), expected);
    }
}

#[test]
fn keepalive_request_limit_closes_after_the_nth_response() {
    let limited = ConnConfig {
        keepalive_requests: 3,
        ..config()
    };
    let mut c = Conn::new(&limited);
    for _ in 0..5 {
        c.feed(GET);
    }
    assert_eq!(c.process(), Progress::Close);
    let out = String::from_utf8_lossy(c.output()).into_owned();
    assert_eq!(
        statuses(&out),
        vec![200, 200, 200],
        "the 4th and 5th are not read"
    );
    assert_eq!(out.matches("Connection: close").count(), 1);
    let last = out.rfind("HTTP/1.1 200").unwrap();
    assert!(out[last..].contains("Connection: close"), "{out}");
    assert!(
        c.should_linger(),
        "two requests unread: linger, do not reset"
    );
    // Exactly at the limit, nothing unread: a plain close.
    let mut c = Conn::new(&limited);
    for _ in 0..3 {
        c.feed(GET);
        c.process();
    }
    assert!(!c.should_linger());
}

#[test]
fn a_server_that_yields_makes_the_next_response_the_last() {
    use std::sync::atomic::{AtomicBool, Ordering};
    static WAITING: AtomicBool = AtomicBool::new(false);
    fn waiting() -> bool {
        WAITING.load(Ordering::Relaxed)
    }
    let yielding = ConnConfig {
        yield_keep_alive: Some(waiting),
        ..config()
    };
    let mut c = Conn::new(&yielding);
    c.feed(GET);
    assert_eq!(c.process(), Progress::Read);
    let first = String::from_utf8_lossy(c.output()).into_owned();
    assert!(!first.contains("Connection: close"), "{first}");
    c.written(first.len());
    // Someone queued: the next response says so and the connection ends cleanly.
    WAITING.store(true, Ordering::Relaxed);
    c.feed(GET);
    assert_eq!(c.process(), Progress::Close);
    let second = String::from_utf8_lossy(c.output()).into_owned();
    assert_eq!(statuses(&second), vec![200]);
    assert!(second.contains("Connection: close"), "{second}");
}
