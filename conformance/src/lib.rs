//! # conformance — the contract every archzoo server binary is held to
//!
//! The suite runs each server *binary* (not a library call) on a free loopback port and
//! talks to it over raw TCP: no HTTP client library sits in between to hide a missing
//! header, a connection closed too early or a response sent twice. Then it points the
//! real clients of the benchmark posts (`ab`, `wrk`) at it.
//!
//! # Layout
//! - this file — the harness: building the binaries, starting and stopping a server in its
//!   own process group, a raw-socket client that parses responses byte-exactly.
//! - [`rules`] — one function per rule a server must keep, named after the rule.
//! - [`corpus`] — the malformed-input corpus (`corpus/malformed.txt`) every server faces.
//! - `tests/conformance.rs` — every row of the shared variant table (`variants::VARIANTS`)
//!   × every rule that applies to it (`rules::RULES`), generated at run time.
//!
//! Everything is bounded: every read has a timeout, every server is killed (its whole
//! process group) when its handle is dropped, even when a test fails.

pub mod corpus;
pub mod database;
pub mod rules;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use variants::launch::{self, Launch};

/// How long any single read waits before the test fails.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// One row of the suite: a variant from the shared table (`variants::VARIANTS`).
pub use variants::Variant as Spec;

/// Path of a server binary, building every workspace binary once per test process with
/// the same profile as the running tests (cargo does not build other packages' binaries
/// for a test crate by itself).
pub fn binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = BUILT
        .get_or_init(build_binaries)
        .clone()
        .unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join(name);
    assert!(path.exists(), "no binary {}", path.display());
    path
}

/// The `/db` database every server in the suite shares, built once per test process
/// (common::workloads writes it atomically, so concurrent test processes are safe).
pub fn test_db() -> PathBuf {
    static DB: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DB.get_or_init(|| {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let target = exe
            .ancestors()
            .nth(3)
            .ok_or("cannot locate the target directory")?;
        let path = target.join("tmp").join("archzoo-conformance.db");
        common::workloads::prepare_db(&path)?;
        Ok(path)
    })
    .clone()
    .unwrap_or_else(|e| panic!("{e}"))
}

fn build_binaries() -> Result<PathBuf, String> {
    // target/<profile>/deps/<this test> → target/<profile>
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .ok_or("cannot locate the target directory")?
        .to_path_buf();
    let target_dir = profile_dir.parent().ok_or("no target dir")?;
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--quiet",
        "--workspace",
        "--bins",
        "--manifest-path",
        manifest,
    ])
    .arg("--target-dir")
    .arg(target_dir);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the server binaries failed: {status}"));
    }
    Ok(profile_dir)
}

/// A running server (the shared launcher's, see `variants::launch`), with what the rules
/// add to it: raw connections and restart counting.
pub struct Server(launch::Server);

impl std::ops::Deref for Server {
    type Target = launch::Server;
    fn deref(&self) -> &launch::Server {
        &self.0
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut launch::Server {
        &mut self.0
    }
}

impl Server {
    /// Starts `spec` on 127.0.0.1 port 0 with `extra` flags and waits for its start-up
    /// line, which names the address it got.
    pub fn start(spec: &Spec, extra: &[&str]) -> Server {
        Server::try_start(spec, extra).unwrap_or_else(|e| panic!("{}: {e}", spec.name))
    }

    /// Like [`Server::start`], but a server that exits or stays silent is an `Err` with
    /// what it printed.
    pub fn try_start(spec: &Spec, extra: &[&str]) -> Result<Server, String> {
        Server::try_start_limited(spec, extra, None)
    }

    /// Like [`Server::try_start`], with the open-file limit set to `(soft, hard)` for the
    /// server (to run it out of descriptors on purpose, or to see it raise its soft limit).
    pub fn try_start_limited(
        spec: &Spec,
        extra: &[&str],
        max_files: Option<(u64, u64)>,
    ) -> Result<Server, String> {
        let mut launch = Launch::new(&binary(spec.binary))
            .args(["--db".as_ref(), test_db().as_os_str()])
            .args(spec.args)
            .args(extra);
        if let Some((soft, hard)) = max_files {
            launch = launch.max_files(soft, hard);
        }
        launch.start().map(Server)
    }

    /// A new raw connection.
    pub fn connect(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Waits until the supervisor has logged `count` worker restarts; panics after `within`.
    pub fn await_restarts(&self, count: usize, within: Duration) {
        let started = Instant::now();
        let restarts = || {
            self.stderr_lines()
                .iter()
                .filter(|l| l.contains("restarted as pid"))
                .count()
        };
        while restarts() < count {
            assert!(
                started.elapsed() < within,
                "{count} restart(s) not logged within {within:?}: {:?}",
                self.stderr_lines()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// One parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub status_line: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The value of the only field named `name` (case-insensitive); panics if repeated.
    pub fn header(&self, name: &str) -> Option<&str> {
        let mut found = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name));
        let first = found.next().map(|(_, v)| v.as_str());
        assert!(found.next().is_none(), "{name} sent twice: {self:?}");
        first
    }

    pub fn body_str(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap_or("<binary>")
    }
}

/// A raw HTTP/1.x client over one TCP connection.
pub struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Reads everything until the server closes (or `wait` passes): the raw bytes and
    /// whether the close was seen.
    pub fn read_to_close(&mut self, wait: Duration) -> (Vec<u8>, bool) {
        let deadline = Instant::now() + wait;
        let mut all = std::mem::take(&mut self.buf);
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return (all, false);
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.stream.read(&mut chunk) {
                Ok(0) => return (all, true),
                Ok(n) => all.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return (all, true),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return (all, false)
                }
                Err(_) => return (all, true),
            }
        }
    }

    /// Whether any bytes of a response have arrived (buffered or in the socket), without
    /// waiting for them.
    pub fn has_bytes(&self) -> bool {
        if !self.buf.is_empty() {
            return true;
        }
        let mut one = [0u8; 1];
        self.stream.set_nonblocking(true).unwrap();
        let r = self.stream.peek(&mut one);
        self.stream.set_nonblocking(false).unwrap();
        matches!(r, Ok(n) if n > 0)
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to server");
    }

    /// Sends a GET for `path` over HTTP/1.1 and reads the response.
    pub fn get(&mut self, path: &str) -> Response {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes());
        self.response()
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                n
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!(
                    "no response within {IO_TIMEOUT:?}; got so far: {:?}",
                    self.lossy()
                )
            }
            Err(e) => panic!("read failed: {e}; got so far: {:?}", self.lossy()),
        }
    }

    fn lossy(&self) -> String {
        String::from_utf8_lossy(&self.buf).into_owned()
    }

    /// Reads one response with a body framed by Content-Length (every archzoo response).
    pub fn response(&mut self) -> Response {
        self.read_response(false)
    }

    /// Reads one response to HEAD: headers only, whatever Content-Length says.
    pub fn head_response(&mut self) -> Response {
        self.read_response(true)
    }

    fn read_response(&mut self, head: bool) -> Response {
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            if self.fill() == 0 {
                panic!(
                    "connection closed before a response head: {:?}",
                    self.lossy()
                );
            }
        };
        let text = String::from_utf8_lossy(&self.buf[..head_end]).into_owned();
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or_default().to_string();
        assert!(
            status_line.starts_with("HTTP/1."),
            "bad status line {status_line:?}"
        );
        let status: u16 = status_line
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (n, v) = l
                    .split_once(':')
                    .unwrap_or_else(|| panic!("bad field {l:?}"));
                (n.to_string(), v.trim().to_string())
            })
            .collect();
        let mut resp = Response {
            status,
            status_line,
            headers,
            body: Vec::new(),
        };
        let length: usize = if head || (100..200).contains(&status) {
            0
        } else {
            resp.header("Content-Length")
                .unwrap_or_else(|| panic!("no Content-Length: {resp:?}"))
                .parse()
                .expect("numeric Content-Length")
        };
        let total = head_end + 4 + length;
        while self.buf.len() < total {
            if self.fill() == 0 {
                panic!("connection closed inside a body: {:?}", self.lossy());
            }
        }
        resp.body = self.buf[head_end + 4..total].to_vec();
        self.buf.drain(..total);
        resp
    }

    /// Asserts the server closes the connection (EOF or reset) without sending anything
    /// more, within [`IO_TIMEOUT`].
    pub fn expect_closed(&mut self) {
        assert!(self.buf.is_empty(), "unexpected bytes: {:?}", self.lossy());
        let mut chunk = [0u8; 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => {}
            Ok(n) => panic!(
                "expected close, got {:?}",
                String::from_utf8_lossy(&chunk[..n])
            ),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Err(e) => panic!("expected close, got {e}"),
        }
    }

    /// Asserts the connection stays open: nothing arrives and no EOF within `wait`.
    pub fn expect_open(&mut self, wait: Duration) {
        self.stream.set_read_timeout(Some(wait)).unwrap();
        let mut chunk = [0u8; 1024];
        let r = self.stream.read(&mut chunk);
        self.stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        match r {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Ok(0) => panic!("server closed a connection that should stay open"),
            other => panic!("unexpected read result {other:?}"),
        }
    }
}

/// Number of TCP sockets in LISTEN state on `port` (from /proc/net/tcp and tcp6).
pub fn listening_sockets(port: u16) -> usize {
    variants::launch::listening_inodes(port).len()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Runs an external client to completion within `limit`, returning its stdout; panics
/// with its output if it fails or overruns (it is killed then).
pub fn run_client(program: &str, args: &[String], limit: Duration) -> String {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run {program}: {e} (scripts/test installs apache2-utils and wrk)")
        });
    let started = Instant::now();
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{program} {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("client output");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{program} failed ({}): {stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// True when the only failures an `ab` run reports are "Length" ones (or none): ab counts a
/// keep-alive connection the server closes while idle as a short response (ab.c clears the
/// connection's keep-alive flag after each response), so a server with keep-alive limits
/// shows some; a refused connect, a receive error or an exception is a real failure.
pub fn ab_fails_only_on_idle_closes(out: &str) -> bool {
    match out
        .lines()
        .find(|l| l.trim_start().starts_with("(Connect:"))
    {
        Some(kinds) => {
            kinds.contains("Connect: 0, Receive: 0, Length:") && kinds.contains("Exceptions: 0")
        }
        // ab breaks failures down whenever there are any.
        None => field(out, "Failed requests:") == Some(0.0),
    }
}

/// The number after `label` on the first line of `text` that starts with it.
pub fn field(text: &str, label: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}
