//! The request head: request line and header fields, parsed with httparse and checked
//! against the rules httparse leaves to its caller — which methods and versions, which
//! framing (Content-Length, chunked, both, neither), Host, line ends, size limits. The
//! answer is the request filled in and what comes after the head, or the status to refuse
//! it with. It keeps no state between calls: a head that is not complete yet is simply
//! parsed again when more bytes arrive.

use super::Reject;
use super::{MAX_BODY, MAX_HEAD, MAX_HEADERS};
use crate::request::{Method, Request, Version};

/// A complete, accepted request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Head {
    /// Bytes the head took, final CRLF included.
    pub len: usize,
    /// Whether the connection stays open after this request (RFC 9112 §9.3).
    pub keep_alive: bool,
    /// What follows the head.
    pub body: BodyFraming,
    /// The client sent `Expect: 100-continue` on an HTTP/1.1 request with a body.
    pub expect_continue: bool,
}

/// How the body after a head is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BodyFraming {
    None,
    Length(u64),
    Chunked,
}

/// Parses the request head at the start of `bytes` into `req` (its header fields too when
/// `capture_headers`). `Ok(None)`: the head is not complete yet.
pub(super) fn parse(
    bytes: &[u8],
    req: &mut Request,
    capture_headers: bool,
) -> Result<Option<Head>, Reject> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut fields);
    let head_len = match parsed.parse(bytes) {
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
        Ok(httparse::Status::Complete(_)) => return Err(too_large(bytes)),
        Ok(httparse::Status::Partial) if bytes.len() >= MAX_HEAD => return Err(too_large(bytes)),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Reject(431, "more than 64 header fields"))
        }
        Err(httparse::Error::Version) => return Err(bad_version(bytes)),
        Err(_) => return Err(Reject(400, "malformed request line or header field")),
    };

    // httparse accepts a bare LF as a line end (RFC 9112 §2.2 allows it); archzoo
    // does not, since parsers that disagree on line ends are how requests get
    // smuggled past a proxy.
    if bare_lf(&bytes[..head_len]) {
        return Err(Reject(
            400,
            "bare LF in the request head (lines end with CRLF)",
        ));
    }
    let method = match parsed.method.unwrap_or("") {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        _ => return Err(Reject(501, "only GET, HEAD and POST are implemented")),
    };
    let version = match parsed.version {
        Some(0) => Version::Http10,
        _ => Version::Http11,
    };

    let mut content_length: Option<&[u8]> = None;
    let mut lengths = 0;
    let mut encoding: Option<&[u8]> = None;
    let mut encodings = 0;
    let mut hosts = 0;
    let mut close = false;
    let mut keep_alive = false;
    let mut expect_continue = false;
    for field in parsed.headers.iter() {
        // Dispatch on the name's length first: most fields are skipped after one compare.
        let name = field.name;
        match name.len() {
            14 if name.eq_ignore_ascii_case("content-length") => {
                lengths += 1;
                content_length = Some(field.value);
            }
            17 if name.eq_ignore_ascii_case("transfer-encoding") => {
                encodings += 1;
                encoding = Some(field.value);
            }
            4 if name.eq_ignore_ascii_case("host") => hosts += 1,
            10 if name.eq_ignore_ascii_case("connection") => {
                for token in field.value.split(|&b| b == b',') {
                    let token = token.trim_ascii();
                    close |= token.eq_ignore_ascii_case(b"close");
                    keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            }
            6 if name.eq_ignore_ascii_case("expect") => {
                expect_continue = field
                    .value
                    .trim_ascii()
                    .eq_ignore_ascii_case(b"100-continue");
            }
            _ => {}
        }
    }

    if encodings > 0 {
        if version == Version::Http10 {
            return Err(Reject(400, "Transfer-Encoding is not defined for HTTP/1.0"));
        }
        if encodings > 1 {
            return Err(Reject(400, "repeated Transfer-Encoding"));
        }
        if lengths > 0 {
            return Err(Reject(400, "both Content-Length and Transfer-Encoding"));
        }
        if !encoding
            .unwrap_or(b"")
            .trim_ascii()
            .eq_ignore_ascii_case(b"chunked")
        {
            return Err(Reject(400, "Transfer-Encoding other than chunked"));
        }
    }
    let body_len = match content_length {
        None => 0,
        Some(_) if lengths > 1 => return Err(Reject(400, "repeated Content-Length")),
        Some(value) => parse_length(value.trim_ascii())?,
    };
    if body_len > MAX_BODY {
        return Err(Reject(413, "request body over 1 MiB"));
    }
    if version == Version::Http11 && hosts == 0 {
        return Err(Reject(400, "HTTP/1.1 request without Host"));
    }
    if hosts > 1 {
        return Err(Reject(400, "more than one Host field"));
    }
    // A connection's first request: a string from the pool to copy its target into.
    req.lend_target(super::buffers::take_target);
    if !req.set_target(parsed.path.unwrap_or("")) {
        return Err(Reject(400, "invalid request target"));
    }
    req.method = method;
    req.version = version;
    req.headers.clear();
    if capture_headers {
        for field in parsed.headers.iter() {
            let value = String::from_utf8_lossy(field.value).into_owned();
            req.headers.push((field.name.to_string(), value));
        }
    }
    let keep_alive = match version {
        Version::Http11 => !close,
        Version::Http10 => keep_alive && !close,
    };

    let has_body = encodings > 0 || body_len > 0;
    Ok(Some(Head {
        len: head_len,
        keep_alive,
        body: if encodings > 0 {
            BodyFraming::Chunked
        } else if body_len > 0 {
            BodyFraming::Length(body_len)
        } else {
            BodyFraming::None
        },
        expect_continue: has_body && expect_continue && version == Version::Http11,
    }))
}

/// True if some LF in `head` is not preceded by CR.
fn bare_lf(head: &[u8]) -> bool {
    head.iter()
        .enumerate()
        .any(|(i, &b)| b == b'\n' && (i == 0 || head[i - 1] != b'\r'))
}

/// 414 when the request line alone overflows the head limit, else 431.
fn too_large(bytes: &[u8]) -> Reject {
    let limit = &bytes[..bytes.len().min(MAX_HEAD)];
    if limit.contains(&b'\n') {
        Reject(431, "request head over 8 KiB")
    } else {
        Reject(414, "request line over 8 KiB")
    }
}

/// httparse reports any version but 1.0/1.1 as an error; 505 if the request line ends in
/// something shaped like an HTTP version (HTTP/2.0, HTTP/1.2), else it is malformed: 400.
fn bad_version(bytes: &[u8]) -> Reject {
    let line = bytes.split(|&b| b == b'\n').next().unwrap_or(b"");
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let last = line.rsplit(|&b| b == b' ').next().unwrap_or(b"");
    match last.strip_prefix(b"HTTP/") {
        Some([d, ..]) if d.is_ascii_digit() => Reject(505, "only HTTP/1.0 and HTTP/1.1"),
        _ => Reject(400, "malformed request line"),
    }
}

/// Content-Length is 1*DIGIT (RFC 9110 §8.6): no sign, no list, no spaces inside.
fn parse_length(value: &[u8]) -> Result<u64, Reject> {
    const BAD: Reject = Reject(400, "invalid Content-Length");
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return Err(BAD);
    }
    let mut n: u64 = 0;
    for &d in value {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or(BAD)?;
    }
    Ok(n)
}
