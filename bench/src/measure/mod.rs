//! Layer 2, measuring: the plan and one cell's steps ([`cell`]), the servers and peers
//! started for a cell ([`server`]), the clients ([`client`]: one file per load generator),
//! and what is read around a run — /proc ([`procfs`]), `perf stat` ([`perf`]), `perf
//! record` ([`profile`]), the database's cluster ([`database`]), the test hosts a
//! distributed client runs on ([`hosts`]) and a share of a CPU for a post's VM ([`cap`]). It fills in the model and
//! imports nothing above it.

pub mod cap;
pub mod cell;
pub mod client;
pub mod database;
pub mod hosts;
pub mod perf;
pub mod procfs;
pub mod profile;
pub mod server;
pub mod soak;
