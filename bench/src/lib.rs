//! # bench — the harness that points load generators at every architecture fairly
//!
//! The benchmark posts archzoo answers published figures that measured the load generator
//! (`ab -c 1000` could not saturate 12 cores) and drew conclusions from hello world. This
//! harness runs the same matrix they should have run and says, for every cell, *who* was
//! the bottleneck.
//!
//! # Layers
//! A pipeline of four layers, each importing only those below it (docs/architecture.md
//! draws it):
//! 1. [`model`] — the results model: a run's cells, repetitions, figures and verdicts, the
//!    rows of the other modes, results.json. Nothing else of bench.
//! 2. [`measure`] — the plan and one cell's steps, the servers and peers, the clients (ab,
//!    wrk, oha, tsung: one file each behind one trait), the test hosts a distributed client
//!    runs on, /proc, `perf stat`, `perf record`, the database.
//! 3. [`modes`] — what drives a run: the matrix, `--slo`, `--fidelity`, `--idle-conns`,
//!    `--attack`.
//! 4. [`mod@write`] — the markdown tables, results.json/csv, the charts, the flame graphs and
//!    report.html, from the model alone.
//!
//! `main.rs` parses the flags, builds the plan, picks a mode and hands its results to the
//! writers. The servers, their modes and the workloads are the shared table of the
//! `variants` crate (the conformance suite runs the same rows), started with its launcher.

pub mod measure;
pub mod model;
pub mod modes;
pub mod write;
