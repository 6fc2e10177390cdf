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
