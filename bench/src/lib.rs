//! # bench — the harness that points `ab` and `wrk` at every architecture fairly
//!
//! The benchmark posts archzoo answers published figures that measured the load generator
//! (`ab -c 1000` could not saturate 12 cores) and drew conclusions from hello world. This
//! harness runs the same matrix they should have run and says, for every cell, *who* was
//! the bottleneck.
//!
//! # Layout
//! - the servers, their modes and the workloads it knows are the shared table of the
//!   `variants` crate (the conformance suite runs the same rows), started with its launcher.
//! - [`attack`] — `--attack slowloris`: slowhttptest against each server while a probe
//!   checks a normal client is still served.
//! - [`client`] — `ab` and `wrk` command lines and parsers of their output.
//! - [`database`] — the PostgreSQL cluster of the pg workloads, pinned to `--db-cpus`.
//! - [`procfs`] — CPU time, context switches and peak memory of a process tree, from /proc.
//! - [`server`] — starting a cell's server with its flags, validating its answer.
//! - [`fidelity`] — `--fidelity`: each model beside its real systems, signatures and cost.
//! - [`idle`] — `--idle-conns N`: N idle keep-alive connections per server, memory per
//!   connection, and whether every one is still answered.
//! - [`report`] — the verdict rule, the matrix table, results.json/csv.
//! - [`chart`] — the SVG charts: grouped bars (an askama template) and latency curves
//!   (plotters), a colour per server.
//! - [`page`] — report.html: the set-up, the sortable table, the charts and every other
//!   table a run produced, written after each run and by `bench --report DIR`.
//! - [`matrix`] — one cell of the matrix: start, validate, warm up, measure, stop.
//! - [`perf`] — `perf stat` around a run: system calls and io_uring submissions.
//! - [`profile`] — `--profile`: `perf record` samples of an extra repetition, folded and
//!   drawn as (differential) flame graphs with inferno, and sorted into components.
//! - `main.rs` — the command line, the plan and the loop over the matrix.

pub mod attack;
pub mod chart;
pub mod client;
pub mod database;
pub mod fidelity;
pub mod idle;
pub mod matrix;
pub mod page;
pub mod perf;
pub mod procfs;
pub mod profile;
pub mod report;
pub mod server;
pub mod slo;
