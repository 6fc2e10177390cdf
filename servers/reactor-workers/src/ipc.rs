//! The messages between reactors and workers, over Unix stream sockets.
//!
//! Every message is a frame: a 4-byte little-endian length, then the payload. A request
//! carries what the handler needs (method, version, target, and the header fields when the
//! framework stack wants them) and the reactor's token for the client connection; a
//! response carries the token back with the status, content type, extra headers and body.
//! A worker's first frame on a link is its hello: its index and the reactor it is for.

use std::io;

use common::codec::{Method, Request, Version};
use common::response::{Body, Response};

/// Largest frame accepted: a response body is at most a few KiB here; anything bigger is a
/// broken peer.
pub const MAX_FRAME: usize = 16 << 20;

/// Appends `payload` as one frame.
fn frame(out: &mut Vec<u8>, payload: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    payload(out);
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s);
}

/// A cursor over a received payload; every read is bounds-checked.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "short frame"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> io::Result<u16> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().unwrap_or_default(),
        ))
    }

    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or_default(),
        ))
    }

    fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }

    fn bytes(&mut self) -> io::Result<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// Text as it lies in the frame: borrowed, copied only where it is not UTF-8 (the
    /// codec hands over `&str`s, so never from a reactor). What is kept is copied once,
    /// by whoever keeps it.
    fn text(&mut self) -> io::Result<std::borrow::Cow<'a, str>> {
        Ok(String::from_utf8_lossy(self.bytes()?))
    }
}

/// A worker's first frame on a link.
pub fn encode_hello(out: &mut Vec<u8>, worker: u32, reactor: u32) {
    frame(out, |o| {
        o.extend_from_slice(&worker.to_le_bytes());
        o.extend_from_slice(&reactor.to_le_bytes());
    });
}

pub fn decode_hello(payload: &[u8]) -> io::Result<(u32, u32)> {
    let mut c = Cursor(payload);
    Ok((c.u32()?, c.u32()?))
}

pub fn encode_request(out: &mut Vec<u8>, token: u64, req: &Request) {
    frame(out, |o| {
        o.extend_from_slice(&token.to_le_bytes());
        o.push(match req.method {
            Method::Get => 0,
            Method::Head => 1,
            Method::Post => 2,
        });
        o.push(match req.version {
            Version::Http10 => 0,
            Version::Http11 => 1,
        });
        put_str(o, req.target().as_bytes());
        o.extend_from_slice(&(req.headers().len() as u16).to_le_bytes());
        for (name, value) in req.headers() {
            put_str(o, name.as_bytes());
            put_str(o, value.as_bytes());
        }
    });
}

pub fn decode_request(payload: &[u8]) -> io::Result<(u64, Request)> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "bad request frame");
    let mut c = Cursor(payload);
    let token = c.u64()?;
    let method = match c.u8()? {
        0 => Method::Get,
        1 => Method::Head,
        2 => Method::Post,
        _ => return Err(bad()),
    };
    let version = if c.u8()? == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    let target = c.text()?;
    let mut req = Request::new(method, version, &target).ok_or_else(bad)?;
    for _ in 0..c.u16()? {
        let name = c.text()?;
        let value = c.text()?;
        req.push_header(&name, &value);
    }
    Ok((token, req))
}

pub fn encode_response(out: &mut Vec<u8>, token: u64, resp: &Response) {
    frame(out, |o| {
        o.extend_from_slice(&token.to_le_bytes());
        o.extend_from_slice(&resp.status.to_le_bytes());
        put_str(o, resp.content_type.as_bytes());
        o.extend_from_slice(&(resp.headers.len() as u16).to_le_bytes());
        for (name, value) in &resp.headers {
            put_str(o, name.as_bytes());
            put_str(o, value.as_bytes());
        }
        put_str(o, resp.body.as_bytes());
    });
}

/// Header names a response may carry beyond the standard ones: `Response` holds
/// `&'static str` names, so the reactor maps them back to its own statics.
const KNOWN_HEADERS: &[&str] = &["X-Request-Id"];
const KNOWN_TYPES: &[&str] = &["text/plain", "application/json"];

pub fn decode_response(payload: &[u8]) -> io::Result<(u64, Response)> {
    let mut c = Cursor(payload);
    let token = c.u64()?;
    let status = c.u16()?;
    let content_type = c.text()?;
    let content_type = KNOWN_TYPES
        .iter()
        .find(|t| **t == content_type)
        .copied()
        .unwrap_or("application/octet-stream");
    let mut headers = Vec::new();
    for _ in 0..c.u16()? {
        let name = c.text()?;
        let value = c.text()?;
        if let Some(known) = KNOWN_HEADERS.iter().find(|h| **h == name) {
            headers.push((*known, value.into_owned()));
        }
    }
    let body = c.bytes()?.to_vec();
    let mut resp = Response::new(status, content_type, Body::Owned(body));
    resp.headers = headers;
    Ok((token, resp))
}

/// The receiving end of a link: bytes as they arrive, and the complete frames in them.
///
/// Frames are taken where they lie (no copy, no shifting per frame): one read brings a
/// whole batch, and the bytes of a frame cut in two move to the front once, before the
/// next read.
#[derive(Default)]
pub struct Frames {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

/// Room offered to every read: a batch of 64 connections × 16 pipelined answers fits.
const READ_ROOM: usize = 64 * 1024;

impl Frames {
    /// Free space to read into (at least [`READ_ROOM`] bytes, or the rest of a large frame).
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.start > 0 && self.buf.len() - self.end < READ_ROOM {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < READ_ROOM {
            self.buf.resize(self.end + READ_ROOM, 0);
        }
        &mut self.buf[self.end..]
    }

    /// Records that `n` bytes were read into the start of [`Frames::spare`].
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// The next complete frame's payload, if one is buffered.
    pub fn next_frame(&mut self) -> io::Result<Option<&[u8]>> {
        let rest = &self.buf[self.start..self.end];
        if rest.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if len > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "oversized frame",
            ));
        }
        if rest.len() < 4 + len {
            return Ok(None);
        }
        let at = self.start + 4;
        self.start = at + len;
        Ok(Some(&self.buf[at..at + len]))
    }

    /// Forgets everything (the link broke).
    pub fn clear(&mut self) {
        *self = Frames::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frames in `bytes`, as a link would take them.
    fn split(bytes: &[u8]) -> io::Result<Vec<Vec<u8>>> {
        let mut frames = Frames::default();
        frames.spare()[..bytes.len()].copy_from_slice(bytes);
        frames.filled(bytes.len());
        let mut out = Vec::new();
        while let Some(payload) = frames.next_frame()? {
            out.push(payload.to_vec());
        }
        Ok(out)
    }

    #[test]
    fn request_and_response_round_trip() {
        let mut req = Request::new(Method::Post, Version::Http10, "/db?queries=3").unwrap();
        req.push_header("User-Agent", "ab");
        let mut buf = Vec::new();
        encode_request(&mut buf, 42, &req);
        let (token, back) = decode_request(&split(&buf).unwrap()[0]).unwrap();
        assert_eq!(
            (token, back.method, back.version),
            (42, Method::Post, Version::Http10)
        );
        assert_eq!((back.path(), back.query()), ("/db", Some("queries=3")));
        assert_eq!(
            back.headers(),
            &[("User-Agent".to_string(), "ab".to_string())]
        );

        let mut resp = Response::text(200, "slept=5");
        resp.headers.push(("X-Request-Id", "7".into()));
        buf.clear();
        encode_response(&mut buf, 9, &resp);
        encode_hello(&mut buf, 1, 0);
        let frames = split(&buf).unwrap();
        assert_eq!(frames.len(), 2);
        let (token, back) = decode_response(&frames[0]).unwrap();
        assert_eq!((token, back), (9, resp));
        assert_eq!(decode_hello(&frames[1]).unwrap(), (1, 0));
    }

    #[test]
    fn frames_are_taken_from_a_batch_across_reads() {
        let mut sent = Vec::new();
        for i in 0..100u64 {
            encode_response(&mut sent, i, &Response::text(200, format!("answer {i}")));
        }
        let mut frames = Frames::default();
        let mut got = Vec::new();
        // Arrives in uneven pieces, each cutting a frame somewhere.
        for piece in sent.chunks(1000) {
            let room = frames.spare();
            room[..piece.len()].copy_from_slice(piece);
            frames.filled(piece.len());
            while let Some(payload) = frames.next_frame().unwrap() {
                got.push(decode_response(payload).unwrap().0);
            }
        }
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn partial_and_garbage_frames() {
        assert!(
            split(&[5, 0, 0, 0, 1, 2]).unwrap().is_empty(),
            "half a frame"
        );
        assert!(decode_response(&[1, 2, 3]).is_err());
        assert!(split(&u32::MAX.to_le_bytes()).is_err());
    }
}
