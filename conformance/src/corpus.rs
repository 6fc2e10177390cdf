//! The malformed-input corpus (`corpus/malformed.txt`): loading and its escape syntax.

/// May a server answer this entry with a 2xx?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Never: a 4xx/5xx or a close.
    Reject,
    /// The shared codec rejects it; hyper may accept it (an RFC 9112 option).
    Lenient,
}

/// One corpus entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub expect: Expect,
    pub bytes: Vec<u8>,
}

/// Every entry of the corpus shipped in the repository.
pub fn load() -> Vec<Entry> {
    let text = include_str!("../corpus/malformed.txt");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|line| {
            let mut parts = line.splitn(3, '|');
            let name = parts.next().unwrap_or("").trim().to_string();
            let expect = match parts.next().map(str::trim) {
                Some("reject") => Expect::Reject,
                Some("lenient") => Expect::Lenient,
                other => panic!("corpus entry {name}: bad EXPECT {other:?}"),
            };
            let raw = parts.next().unwrap_or("");
            // One space separates the last `|` from the bytes; anything after is data.
            let raw = raw.strip_prefix(' ').unwrap_or(raw);
            Entry {
                name,
                expect,
                bytes: unescape(raw),
            }
        })
        .collect()
}

/// Expands `\r \n \t \0 \xHH \\` and `{N*text}` (N copies of text, itself unescaped).
pub fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if i + 1 < b.len() => {
                i += 1;
                match b[i] {
                    b'r' => out.push(b'\r'),
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'0' => out.push(0),
                    b'\\' => out.push(b'\\'),
                    b'x' if i + 2 < b.len() + 1 => {
                        let hex =
                            std::str::from_utf8(&b[i + 1..(i + 3).min(b.len())]).unwrap_or("");
                        out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                        i += 2;
                    }
                    other => out.extend_from_slice(&[b'\\', other]),
                }
                i += 1;
            }
            b'{' => {
                // {N*text}: repetition, when N is a number; a literal brace otherwise.
                let rest = &s[i + 1..];
                let repeated = rest.split_once('*').and_then(|(n, tail)| {
                    let count: usize = n.parse().ok()?;
                    let end = tail.find('}')?;
                    Some((count, &tail[..end], n.len() + 1 + end + 1))
                });
                match repeated {
                    Some((count, text, used)) => {
                        let unit = unescape(text);
                        for _ in 0..count {
                            out.extend_from_slice(&unit);
                        }
                        i += 1 + used;
                    }
                    None => {
                        out.push(b'{');
                        i += 1;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_repetition() {
        assert_eq!(unescape(r"a\r\n\0\x7f\t"), b"a\r\n\0\x7f\t");
        assert_eq!(unescape(r"{3*ab}c"), b"abababc");
        assert_eq!(unescape(r"{2*X: v\r\n}"), b"X: v\r\nX: v\r\n");
        assert_eq!(unescape(r#"{"a":1}"#), br#"{"a":1}"#);
    }

    #[test]
    fn the_corpus_has_at_least_60_distinct_entries() {
        let entries = load();
        assert!(entries.len() >= 60, "{}", entries.len());
        let names: std::collections::BTreeSet<_> = entries.iter().map(|e| &e.name).collect();
        assert_eq!(names.len(), entries.len(), "duplicate names");
        assert!(entries.iter().all(|e| !e.bytes.is_empty()));
    }
}
