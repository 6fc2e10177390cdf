//! The parsed request a handler sees: method, version, target (path and query) and, for
//! stacks that ask for them, the header fields. A leaf: the codec fills it, handlers read
//! it, and neither side needs the other to be understood.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

/// The parsed request the handler sees. Its target string is reused from request to
/// request, so steady-state parsing allocates nothing.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    pub version: Version,
    target: String,
    /// Byte range of the path inside `target` (absolute-form targets carry a scheme and
    /// authority in front of it).
    path: (usize, usize),
    /// Header fields as sent, captured only for stacks that want them (the framework
    /// layer builds its owned header map from these); empty on the raw stack.
    pub(crate) headers: Vec<(String, String)>,
}

impl Request {
    pub(crate) fn empty() -> Self {
        Request {
            method: Method::Get,
            version: Version::Http11,
            target: String::new(),
            path: (0, 0),
            headers: Vec::new(),
        }
    }

    /// Builds a request outside a connection (tests, and handlers that forward requests).
    pub fn new(method: Method, version: Version, target: &str) -> Option<Self> {
        let mut r = Request::empty();
        r.method = method;
        r.version = version;
        r.set_target(target).then_some(r)
    }

    /// Stores the target and locates its path; false if it is neither origin-form
    /// (`/path?query`) nor absolute-form (`http://host/path?query`).
    pub(crate) fn set_target(&mut self, target: &str) -> bool {
        self.target.clear();
        self.target.push_str(target);
        let path_start = if target.starts_with('/') {
            0
        } else {
            let lower = target.get(..8).unwrap_or(target).to_ascii_lowercase();
            let after_scheme = if lower.starts_with("http://") {
                7
            } else if lower.starts_with("https://") {
                8
            } else {
                return false;
            };
            match target[after_scheme..].find('/') {
                Some(i) => after_scheme + i,
                None => target.len(), // "http://host" means path "/"
            }
        };
        let path_end = target[path_start..]
            .find('?')
            .map_or(target.len(), |i| path_start + i);
        self.path = (path_start, path_end);
        true
    }

    /// Gives the request a string to copy targets into (from `lend`), if it holds none
    /// yet: the codec lends an ended connection's.
    pub(crate) fn lend_target(&mut self, lend: impl FnOnce() -> String) {
        if self.target.capacity() == 0 {
            self.target = lend();
        }
    }

    /// The target's string, taken out (an unallocated one left in its place), for the
    /// codec's pool to lend to the next connection.
    pub(crate) fn take_target(&mut self) -> String {
        std::mem::take(&mut self.target)
    }

    /// The request target exactly as sent.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The path, without query; `/` for an absolute-form target with no path.
    pub fn path(&self) -> &str {
        let p = &self.target[self.path.0..self.path.1];
        if p.is_empty() {
            "/"
        } else {
            p
        }
    }

    /// The query string after `?`, if any.
    pub fn query(&self) -> Option<&str> {
        let rest = &self.target[self.path.1..];
        rest.strip_prefix('?')
    }

    /// Captured header fields (see [`crate::codec::ConnConfig::capture_headers`]).
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// Adds a header field (for runtimes that parse with another library, such as hyper).
    pub fn push_header(&mut self, name: &str, value: &str) {
        self.headers.push((name.to_string(), value.to_string()));
    }
}
