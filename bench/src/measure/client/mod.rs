//! The load generators as they are run: each one a file with its command line and the
//! parser of what it prints, behind one trait, [`Tool`]. A new client is a variant of
//! [`Client`] (its name in results.json) and a file here; [`tool`] is the one match that
//! picks it.

pub mod ab;
pub mod oha;
pub mod tsung;
pub mod wrk;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::model::client::{Client, Outcome};

/// How long or how much one run sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    Duration(Duration),
    Requests(u64),
}

/// One client invocation.
#[derive(Debug, Clone)]
pub struct Load<'a> {
    pub client: Client,
    pub url: &'a str,
    pub connections: u32,
    pub keep_alive: bool,
    pub amount: Amount,
    /// Requests per pipelined batch (wrk only, through `script`).
    pub pipeline: Option<u32>,
    pub script: &'a Path,
    /// Offered requests per second (oha, tsung): the open loop's fixed rate.
    pub rate: Option<u32>,
    /// The client hosts of a distributed client (tsung); `None`: one process here.
    pub fleet: Option<&'a tsung::Fleet>,
    /// The test host a one-process client runs in (`--link veth`); `None`: here.
    pub from: Option<&'a crate::measure::hosts::Host>,
    /// The CPUs the client is pinned to: a client that can use several threads (wrk)
    /// runs one per CPU, or one thread would be the limit on a machine with client cores
    /// to spare — the posts' `ab` mistake, made by the harness. ab stays one thread: that
    /// is what it is.
    pub threads: usize,
}

/// One load generator: how it is run for a [`Load`] and how its report is read.
pub trait Tool: Sync {
    /// The argument vector (program first) for one run, or why this client cannot make it.
    fn argv(&self, load: &Load) -> Result<Vec<String>, String>;
    /// What it reported, from what it printed on standard output.
    fn parse(&self, text: &str) -> Result<Outcome, String>;
    /// Whether it can be run here.
    fn installed(&self) -> bool;
}

/// The tool behind `client`.
pub fn tool(client: Client) -> &'static dyn Tool {
    match client {
        Client::Ab => &ab::Ab,
        Client::Wrk => &wrk::Wrk,
        Client::Oha => &oha::Oha,
        Client::Tsung => &tsung::Tsung,
    }
}

/// The argument vector (program first) for one run.
pub fn command(load: &Load) -> Result<Vec<String>, String> {
    tool(load.client).argv(load)
}

/// What `client` reported, from its standard output.
pub fn parse(client: Client, text: &str) -> Result<Outcome, String> {
    tool(client).parse(text)
}

/// Whether `program` is a file in one of the PATH's folders.
pub fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

fn number_after(text: &str, label: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.trim_end_matches(',').parse().ok())
}

/// The last lines of what a client printed, for an error that says what went wrong.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}
