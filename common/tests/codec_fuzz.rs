//! Property tests of the codec (a fuzz harness that runs on stable Rust, in CI).
//!
//! The invariant, whatever the input and however it is split into reads: `process` never
//! panics, and each call either asks for more bytes (Read), asks to wait (Wait), or closes
//! (Close) — and everything it wrote is a sequence of complete, well-formed responses
//! (100 Continue allowed), the last one carrying `Connection: close` when it closes. A body
//! is exactly as long as its Content-Length says, except in a response to HEAD — which the
//! harness knows from the `X-Method` field its handler adds, never by guessing from the
//! bytes (a truncated body must fail, not pass as a HEAD response).

use common::codec::{Conn, ConnConfig, Method, Progress, Request};
use common::handler::{App, Reply};
use common::routes;
use proptest::prelude::*;

/// The raw routes, with the request's method echoed in `X-Method`.
fn echo_method(req: &Request, app: &App) -> Reply {
    let mut reply = routes::handle(req, app);
    let method = if req.method == Method::Head {
        "HEAD"
    } else {
        "other"
    };
    reply
        .response
        .headers
        .push(("X-Method", method.to_string()));
    reply
}

/// Checks `out` is a sequence of well-formed responses; returns their statuses and
/// whether the last one says `Connection: close`.
fn responses(mut out: &[u8]) -> Result<(Vec<u16>, bool), String> {
    let mut statuses = Vec::new();
    let mut last_closes = false;
    while !out.is_empty() {
        let end = out
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| format!("incomplete head: {:?}", String::from_utf8_lossy(out)))?;
        let head = std::str::from_utf8(&out[..end]).map_err(|e| e.to_string())?;
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let status: u16 = status_line
            .strip_prefix("HTTP/1.1 ")
            .and_then(|r| r.get(..3))
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("bad status line {status_line:?}"))?;
        let mut length = None;
        let mut to_head = false;
        last_closes = false;
        for line in lines {
            let (name, value) = line.split_once(": ").ok_or(format!("bad field {line:?}"))?;
            match name {
                "Content-Length" => {
                    length = Some(value.parse::<usize>().map_err(|e| e.to_string())?)
                }
                "Connection" => last_closes = value == "close",
                "X-Method" => to_head = value == "HEAD",
                _ => {}
            }
        }
        // 100 Continue has neither length nor body; a response to HEAD has a length
        // but no body; every other response has both, whole.
        let body = match (status, to_head) {
            (100, _) => 0,
            (_, true) => length.map(|_| 0).ok_or("no Content-Length")?,
            (_, false) => length.ok_or("no Content-Length")?,
        };
        if out.len() < end + 4 + body {
            return Err(format!(
                "truncated body: status {status}, {} of {body} bytes",
                out.len() - end - 4
            ));
        }
        statuses.push(status);
        out = &out[end + 4 + body..];
    }
    Ok((statuses, last_closes))
}

/// Feeds `input` in pieces of the given sizes, checking the invariant after each call.
fn run(input: &[u8], cuts: &[usize]) -> Result<(Vec<u16>, Progress), String> {
    let mut conn = Conn::new(&ConnConfig::new(echo_method));
    let mut rest = input;
    let mut all = Vec::new();
    let mut progress = Progress::Read;
    let mut sizes = cuts.iter().copied().cycle();
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(1).clamp(1, rest.len());
        let taken = conn.feed(&rest[..n]);
        if taken == 0 {
            return Err("the codec took no bytes and asked for more".into());
        }
        rest = &rest[taken..];
        loop {
            progress = conn.process();
            all.extend_from_slice(conn.output());
            let len = conn.output().len();
            conn.written(len);
            match progress {
                // A handler wait: the runtime would wait, then call again.
                Progress::Wait(_) => continue,
                _ => break,
            }
        }
        if progress == Progress::Close {
            break;
        }
    }
    let (statuses, last_closes) = responses(&all)?;
    if progress == Progress::Close && !last_closes {
        return Err(format!(
            "closed without Connection: close; statuses {statuses:?}"
        ));
    }
    Ok((statuses, progress))
}

const VALID: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /json HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n",
    b"HEAD /plaintext HTTP/1.1\r\nHost: a\r\n\r\n",
    b"POST /sum HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\n",
    b"GET /sleep?ms=0 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"GET /missing HTTP/1.1\r\nHost: a\r\n\r\n",
];

fn valid_batch() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(VALID), 1..8).prop_map(|reqs| reqs.concat())
}

/// A valid batch with a few random byte edits: flips, inserts, deletes.
fn mutated_batch() -> impl Strategy<Value = Vec<u8>> {
    (
        valid_batch(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..6),
    )
        .prop_map(|(mut bytes, edits)| {
            for (at, byte, kind) in edits {
                if bytes.is_empty() {
                    break;
                }
                let i = at.index(bytes.len());
                match kind {
                    0 => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ => {
                        bytes.remove(i);
                    }
                }
            }
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_break_the_invariant(
        input in prop::collection::vec(any::<u8>(), 0..600),
        cuts in prop::collection::vec(1usize..64, 1..8),
    ) {
        if let Err(e) = run(&input, &cuts) {
            return Err(TestCaseError::fail(e));
        }
    }

    #[test]
    fn mutated_requests_never_break_the_invariant(
        input in mutated_batch(),
        cuts in prop::collection::vec(1usize..64, 1..8),
    ) {
        if let Err(e) = run(&input, &cuts) {
            return Err(TestCaseError::fail(e));
        }
    }

    #[test]
    fn valid_batches_answer_every_request_however_split(
        input in valid_batch(),
        cuts in prop::collection::vec(1usize..64, 1..8),
    ) {
        let whole = run(&input, &[input.len()]).map_err(TestCaseError::fail)?;
        let split = run(&input, &cuts).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&whole.0, &split.0);
        prop_assert_eq!(whole.1, Progress::Read);
        prop_assert!(whole.0.iter().all(|s| *s == 200 || *s == 404));
    }
}
