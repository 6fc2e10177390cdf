//! What the end-to-end tests of `bench` share.

use std::process::{Command, Output};

/// Runs `bench` with `args` against the debug server binaries and the test database.
pub fn bench_output(args: &[&str]) -> Output {
    bench_command(args).output().unwrap()
}

/// The `bench` command of [`bench_output`], for a test that acts while it runs.
#[allow(dead_code)] // not every test file that shares this module starts one itself
pub fn bench_command(args: &[&str]) -> Command {
    let server = conformance::binary("prefork-eventloop");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bench"));
    cmd.args(args)
        .arg("--bin-dir")
        .arg(server.parent().unwrap())
        .arg("--db")
        .arg(conformance::test_db());
    cmd
}

/// The one run directory (`<timestamp>/`) a `bench --out DIR` wrote under `dir`; `None`
/// when the run wrote nothing (a test asserts on the exit status before unwrapping it).
#[allow(dead_code)] // not every test file that shares this module reads a run's files
pub fn run_dir(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    std::fs::read_dir(dir).ok()?.next()?.ok().map(|e| e.path())
}

/// A tiny HTTP/1.1 keep-alive server for the peer tests (Python's standard library, a
/// thread per connection), written into `dir`: `python3 tiny.py HOST PORT` answers
/// `hello, world!` on every path, without the Content-Type archzoo's answers carry (the
/// harness notes what a peer's answers lack).
#[allow(dead_code)] // not every test file that shares this module runs a peer
pub fn tiny_server(dir: &std::path::Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let script = dir.join("tiny.py");
    std::fs::write(
        &script,
        r#"import http.server, sys
class Hello(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = b"hello, world!"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        # An HTTP/1.0 client that asked to keep the connection (ab -k) is told it is kept.
        if "keep-alive" in self.headers.get("Connection", "").lower():
            self.send_header("Connection", "keep-alive")
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 1024  # the default 5 drops a connection-per-request client's SYNs
    daemon_threads = True
Server((sys.argv[1], int(sys.argv[2])), Hello).serve_forever()
"#,
    )
    .unwrap();
    script
}
