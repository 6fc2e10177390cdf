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
//! - `tests/conformance.rs` — the table of servers (one row each) × every rule.
//!
//! Everything is bounded: every read has a timeout, every server is killed (its whole
//! process group) when its handle is dropped, even when a test fails.

pub mod corpus;
pub mod rules;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long any single read waits before the test fails.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// One row of the suite: a server binary and the flags that select its mode.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The binary's name under `target/<profile>/`.
    pub binary: &'static str,
    /// Flags selecting a mode (e.g. `--codec hyper`), added to every start.
    pub args: &'static [&'static str],
    /// Each worker serves one connection at a time (the blocking models). Load tests then
    /// start one worker per client connection, as PHP-FPM is sized in practice, and the
    /// two-worker rule proves the second worker by holding the first one busy.
    pub one_conn_per_worker: bool,
    /// The row runs hyper's own HTTP/1 parser. Where RFC 9112 lets a server choose and
    /// hyper chose differently from the shared codec, the rules check hyper's choice:
    /// Content-Length with Transfer-Encoding is read by its chunked framing and the
    /// connection then closed (RFC 9112 §6.3 allows either); identical repeated
    /// Content-Length values are merged (RFC 9110 §8.6 allows it); hyper's own parse-error
    /// responses carry no `Server`/`Content-Type`, and an unknown version gets 400.
    pub hyper: bool,
    /// Workers are processes under the common supervisor (they can be killed one by one).
    pub processes: bool,
    /// Every worker listens on its own SO_REUSEPORT socket.
    pub reuseport: bool,
    /// Workers run the handler behind an IPC hop; client connections outlive them.
    pub ipc: bool,
}

impl Spec {
    /// A row served by the shared codec.
    pub const fn shared(binary: &'static str, args: &'static [&'static str]) -> Spec {
        Spec {
            binary,
            args,
            one_conn_per_worker: false,
            hyper: false,
            processes: false,
            reuseport: false,
            ipc: false,
        }
    }
}

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

/// A running server: its own process group, killed whole on drop.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<Vec<String>>>,
    /// Set by the stderr reader at end of file: every process of the server closed it.
    stderr_done: Arc<AtomicBool>,
}

impl Server {
    /// Starts `spec` on 127.0.0.1 port 0 with `extra` flags and waits for its start-up
    /// line, which names the address it got.
    pub fn start(spec: &Spec, extra: &[&str]) -> Server {
        Server::try_start(spec, extra).unwrap_or_else(|e| panic!("{}: {e}", spec.binary))
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
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(binary(spec.binary));
        if let Some((soft, hard)) = max_files {
            // SAFETY: only setrlimit, async-signal-safe, runs between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let rl = libc::rlimit {
                        rlim_cur: soft,
                        rlim_max: hard,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd
            .args(["--bind", "127.0.0.1", "--port", "0"])
            .arg("--db")
            .arg(test_db())
            .args(spec.args)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start: {e}"))?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let pipe = child.stderr.take().expect("piped stderr");
        let lines = stderr.clone();
        let stderr_done = Arc::new(AtomicBool::new(false));
        let done = stderr_done.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let addr = line
                    .split("listening on http://")
                    .nth(1)
                    .and_then(|rest| rest.split('/').next())
                    .and_then(|a| a.parse::<SocketAddr>().ok());
                // Stored before the address is announced: a test that got the address
                // finds the start-up line among the stderr lines too.
                lines.lock().unwrap().push(line);
                if let Some(addr) = addr {
                    let _ = tx.send(addr);
                }
            }
            done.store(true, Ordering::SeqCst);
        });
        let mut server = Server {
            child,
            addr: "127.0.0.1:0".parse().unwrap(),
            stderr,
            stderr_done,
        };
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(addr) => {
                server.addr = addr;
                Ok(server)
            }
            Err(_) => {
                std::thread::sleep(Duration::from_millis(100));
                Err(format!(
                    "no start-up line; stderr: {:?}",
                    server.stderr_lines()
                ))
            }
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The worker pids named in the start-up line (`… (pids 1, 2) …`).
    pub fn worker_pids(&self) -> Vec<i32> {
        let lines = self.stderr_lines();
        let line = lines
            .iter()
            .find(|l| l.contains("listening on"))
            .expect("start-up line");
        let list = line
            .split("pids ")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap_or("");
        list.split(", ")
            .filter_map(|p| p.trim().parse().ok())
            .collect()
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

    /// Everything the server printed on stderr so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// A new raw connection.
    pub fn connect(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Sends `signal` to the server's main process and waits up to `limit` for it to exit.
    /// Returns its exit status and how long it took; `None` if it did not exit in time.
    pub fn signal_and_wait(
        &mut self,
        signal: i32,
        limit: Duration,
    ) -> Option<(ExitStatus, Duration)> {
        let started = Instant::now();
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(self.pid(), signal) };
        while started.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                let took = started.elapsed();
                // Let the reader collect the last lines (the --stats report) too.
                let eof_by = Instant::now() + Duration::from_secs(2);
                while !self.stderr_done.load(Ordering::SeqCst) && Instant::now() < eof_by {
                    std::thread::sleep(Duration::from_millis(5));
                }
                return Some((status, took));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// CPU seconds (user + system) used so far by every process of the server's group.
    pub fn cpu_seconds(&self) -> f64 {
        // SAFETY: sysconf has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let mut total = 0.0;
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
                continue;
            };
            let f: Vec<&str> = rest.split_whitespace().collect();
            // After the name: state(0) ppid(1) pgrp(2) … utime(11) stime(12).
            if f.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(self.pid()) {
                let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
                total += (t(11) + t(12)) / ticks;
            }
        }
        total
    }

    /// True while any process of the server's process group exists.
    pub fn group_alive(&self) -> bool {
        // SAFETY: signal 0 only checks for existence.
        unsafe { libc::kill(-self.pid(), 0) == 0 }
    }

    /// The `--stats` JSON lines printed so far.
    pub fn stats_lines(&self) -> Vec<serde_json::Value> {
        self.stderr_lines()
            .iter()
            .filter(|l| l.starts_with('{'))
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kills the server's own process group (created with process_group(0)).
        unsafe { libc::kill(-self.pid(), libc::SIGKILL) };
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    let port = format!("{port:04X}");
    let listening = |line: &&str| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        cols.len() > 3 && cols[1].rsplit(':').next() == Some(port.as_str()) && cols[3] == "0A"
    };
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .map(|text| text.lines().skip(1).filter(listening).count())
        .sum()
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

/// The number after `label` on the first line of `text` that starts with it.
pub fn field(text: &str, label: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}
