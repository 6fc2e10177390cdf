//! What the end-to-end tests of `bench` share.

use std::process::{Command, Output};

/// Runs `bench` with `args` against the debug server binaries and the test database.
pub fn bench_output(args: &[&str]) -> Output {
    let server = conformance::binary("prefork-eventloop");
    Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .arg("--bin-dir")
        .arg(server.parent().unwrap())
        .arg("--db")
        .arg(conformance::test_db())
        .output()
        .unwrap()
}
