//! Errors: every malformed or refused request gets its status and a close.

use super::*;

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
