//! Chunked transfer coding (RFC 9112 §7.1), decoded and discarded byte by byte.
//!
//! A state machine rather than a line parser: a chunked body may arrive split anywhere,
//! one byte per read in the worst case, and the decoder must neither buffer the body nor
//! lose its place. It is strict where leniency lets two parsers disagree on where a
//! request ends — CRLF only, hex sizes only, bounded size lines and trailers — since that
//! disagreement is how requests get smuggled past a proxy.

use super::{Reject, MAX_BODY};

/// Longest chunk-size line (size and extensions) accepted.
const MAX_CHUNK_LINE: usize = 1024;
/// Most trailer bytes accepted after a chunked body.
const MAX_TRAILERS: usize = 8 * 1024;

/// Where a chunked-body decoder stands (RFC 9112 §7.1).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Hex digits of the chunk size.
    #[default]
    Size,
    /// Whitespace between the size and a `;` extension.
    SizeSpace,
    /// A chunk extension, up to CR.
    Extension,
    /// LF ending the size line.
    SizeLf,
    /// Chunk data being skipped.
    Data,
    /// CR after chunk data.
    DataCr,
    /// LF after chunk data.
    DataLf,
    /// Start of a trailer line, or the final CRLF.
    TrailerStart,
    /// Inside a trailer field line.
    Trailer,
    /// LF ending a trailer line.
    TrailerLf,
    /// LF of the final CRLF.
    EndLf,
}

/// A chunked-body decoder that discards the data; strict about framing (CRLF only, hex
/// sizes only, bounded lines), since lenient chunk parsing is how request smuggling starts.
#[derive(Debug, Default, Clone)]
pub(super) struct Chunked {
    phase: Phase,
    /// Current chunk's size while parsing it; remaining bytes while in `Data`.
    size: u64,
    digits: u32,
    line: usize,
    total: u64,
    trailers: usize,
}

impl Chunked {
    /// Consumes from `input`; returns the bytes used and whether the body is complete.
    pub(super) fn advance(&mut self, input: &[u8]) -> (usize, Result<bool, Reject>) {
        const BAD_SIZE: Reject = Reject(400, "invalid chunk size");
        const BAD_FRAMING: Reject = Reject(400, "invalid chunked framing");
        let mut i = 0;
        while i < input.len() {
            if self.phase == Phase::Data {
                let take = self.size.min((input.len() - i) as u64);
                i += take as usize;
                self.size -= take;
                if self.size == 0 {
                    self.phase = Phase::DataCr;
                }
                continue;
            }
            let b = input[i];
            i += 1;
            let next = match (self.phase, b) {
                (Phase::Size, _) if b.is_ascii_hexdigit() => {
                    self.digits += 1;
                    if self.digits > 16 {
                        return (i, Err(BAD_SIZE));
                    }
                    self.size = (self.size << 4) | u64::from(hex_value(b));
                    Phase::Size
                }
                (Phase::Size, b'\r') if self.digits > 0 => Phase::SizeLf,
                (Phase::Size, b';') if self.digits > 0 => Phase::Extension,
                (Phase::Size | Phase::SizeSpace, b' ' | b'\t') if self.digits > 0 => {
                    Phase::SizeSpace
                }
                (Phase::SizeSpace, b';') => Phase::Extension,
                (Phase::Size | Phase::SizeSpace, _) => return (i, Err(BAD_SIZE)),
                (Phase::Extension, b'\r') => Phase::SizeLf,
                (Phase::Extension, _) if b == b'\t' || (b >= 0x20 && b != 0x7f) => {
                    self.line += 1;
                    if self.line > MAX_CHUNK_LINE {
                        return (i, Err(Reject(400, "chunk extension too long")));
                    }
                    Phase::Extension
                }
                (Phase::SizeLf, b'\n') => {
                    let size = self.size;
                    self.digits = 0;
                    self.line = 0;
                    if size == 0 {
                        Phase::TrailerStart
                    } else {
                        self.total += size;
                        if self.total > MAX_BODY {
                            return (i, Err(Reject(413, "request body over 1 MiB")));
                        }
                        Phase::Data
                    }
                }
                (Phase::DataCr, b'\r') => Phase::DataLf,
                (Phase::DataLf, b'\n') => {
                    self.size = 0;
                    Phase::Size
                }
                (Phase::TrailerStart, b'\r') => Phase::EndLf,
                (Phase::TrailerStart | Phase::Trailer, _) if b != b'\r' && b != b'\n' && b != 0 => {
                    self.trailers += 1;
                    if self.trailers > MAX_TRAILERS {
                        return (i, Err(Reject(431, "trailer fields over 8 KiB")));
                    }
                    Phase::Trailer
                }
                (Phase::Trailer, b'\r') => Phase::TrailerLf,
                (Phase::TrailerLf, b'\n') => Phase::TrailerStart,
                (Phase::EndLf, b'\n') => return (i, Ok(true)),
                _ => return (i, Err(BAD_FRAMING)),
            };
            self.phase = next;
        }
        (i, Ok(false))
    }
}

fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` in one call: bytes used and the outcome (status on error).
    fn decode(input: &[u8]) -> (usize, Result<bool, u16>) {
        let (used, result) = Chunked::default().advance(input);
        (used, result.map_err(|Reject(status, _)| status))
    }

    /// Decodes `input` one byte per call, as the slowest client sends it.
    fn decode_bytewise(input: &[u8]) -> Result<bool, u16> {
        let mut chunked = Chunked::default();
        for (i, b) in input.iter().enumerate() {
            match chunked.advance(std::slice::from_ref(b)) {
                (1, Ok(true)) => return Ok(i + 1 == input.len()),
                (1, Ok(false)) => {}
                (_, Err(Reject(status, _))) => return Err(status),
                (used, other) => panic!("used {used} of 1 byte: {other:?}"),
            }
        }
        Ok(false)
    }

    #[test]
    fn one_chunk_then_last_chunk() {
        let body = b"5\r\nhello\r\n0\r\n\r\n";
        assert_eq!(decode(body), (body.len(), Ok(true)));
        assert_eq!(decode_bytewise(body), Ok(true));
    }

    #[test]
    fn empty_body_is_the_last_chunk_alone() {
        assert_eq!(decode(b"0\r\n\r\n"), (5, Ok(true)));
    }

    #[test]
    fn stops_at_the_end_of_the_body() {
        // The next request's bytes are not consumed.
        let input = b"0\r\n\r\nGET / HTTP/1.1\r\n";
        assert_eq!(decode(input), (5, Ok(true)));
    }

    #[test]
    fn incomplete_body_asks_for_more() {
        for cut in [b"5".as_slice(), b"5\r\nhel", b"5\r\nhello\r\n", b"0\r\n\r"] {
            assert_eq!(decode(cut), (cut.len(), Ok(false)), "{cut:?}");
        }
    }

    #[test]
    fn hex_sizes_in_either_case() {
        let body = b"a\r\n0123456789\r\nA\r\n0123456789\r\n0\r\n\r\n";
        assert_eq!(decode(body), (body.len(), Ok(true)));
        assert_eq!(decode_bytewise(body), Ok(true));
    }

    #[test]
    fn extensions_and_whitespace_before_them() {
        let body = b"3;name=value\r\nabc\r\n3 \t;x\r\nabc\r\n0;last\r\n\r\n";
        assert_eq!(decode(body), (body.len(), Ok(true)));
        assert_eq!(decode_bytewise(body), Ok(true));
    }

    #[test]
    fn trailer_fields_are_skipped() {
        let body = b"1\r\nx\r\n0\r\nChecksum: 1\r\nOther: 2\r\n\r\n";
        assert_eq!(decode(body), (body.len(), Ok(true)));
        assert_eq!(decode_bytewise(body), Ok(true));
    }

    #[test]
    fn bad_sizes_are_400() {
        for bad in [
            b"\r\n".as_slice(),       // no digits
            b"x\r\n",                 // not hex
            b"-1\r\n",                // sign
            b"0x5\r\n",               // prefix
            b";ext\r\n",              // extension without a size
            b" 5\r\n",                // leading space
            b"5 5\r\n",               // space inside
            b"11111111111111111\r\n", // 17 digits: overflow
        ] {
            assert_eq!(decode(bad).1, Err(400), "{bad:?}");
        }
    }

    #[test]
    fn bare_lf_and_missing_crlf_are_400() {
        for bad in [
            b"5\nhello\r\n0\r\n\r\n".as_slice(), // bare LF after the size
            b"5\r\nhelloX\r\n",                  // data longer than its size
            b"5\r\nhello\n0\r\n\r\n",            // bare LF after the data
            b"0\r\n\n",                          // bare LF at the end
            b"0\r\nTrailer: x\n\r\n",            // bare LF after a trailer
        ] {
            assert_eq!(decode(bad).1, Err(400), "{bad:?}");
        }
    }

    #[test]
    fn control_characters_in_an_extension_are_400() {
        assert_eq!(decode(b"1;a\x01b\r\nx\r\n0\r\n\r\n").1, Err(400));
    }

    #[test]
    fn size_line_over_the_limit_is_400() {
        let mut line = b"1;".to_vec();
        line.extend(std::iter::repeat_n(b'a', MAX_CHUNK_LINE + 1));
        assert_eq!(decode(&line).1, Err(400));
    }

    #[test]
    fn body_over_one_mib_is_413_before_its_data_arrives() {
        let size = format!("{:x}\r\n", MAX_BODY + 1);
        assert_eq!(decode(size.as_bytes()), (size.len(), Err(413)));
        // Two chunks adding up past the limit.
        let half = format!("{:x}\r\n", MAX_BODY / 2 + 1);
        let mut c = Chunked::default();
        assert_eq!(c.advance(half.as_bytes()).1, Ok(false));
        let data = vec![b'x'; (MAX_BODY / 2 + 1) as usize];
        assert_eq!(c.advance(&data).1, Ok(false));
        assert_eq!(c.advance(b"\r\n").1, Ok(false));
        assert_eq!(
            c.advance(half.as_bytes()).1,
            Err(Reject(413, "request body over 1 MiB"))
        );
    }

    #[test]
    fn trailers_over_the_limit_are_431() {
        let mut body = b"0\r\nX: ".to_vec();
        body.extend(std::iter::repeat_n(b'a', MAX_TRAILERS));
        assert_eq!(decode(&body).1, Err(431));
    }
}
