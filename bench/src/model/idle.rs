//! `--idle-conns N`: one server's row — what its idle keep-alive connections cost and
//! whether each was still answered (measured by `modes::idle`).

use serde::{Deserialize, Serialize};

use super::client::HostLoad;

/// One server's figures: what its idle connections cost and whether they were answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub variant: String,
    pub model: String,
    /// Why there are no figures: a model that holds no idle connection, a server that did
    /// not start, a descriptor limit.
    #[serde(default)]
    pub missing: Option<String>,
    /// Connections opened and answered once, then left idle.
    #[serde(default)]
    pub held: usize,
    #[serde(default)]
    pub rss_before_kib: u64,
    #[serde(default)]
    pub rss_after_kib: u64,
    /// Resident memory added per idle connection: (after − before) ÷ held.
    #[serde(default)]
    pub bytes_per_conn: u64,
    /// Seconds spent connecting (the first round's answers not included).
    #[serde(default)]
    pub open_s: f64,
    /// Seconds of the second round: one more request on every idle connection.
    #[serde(default)]
    pub round_s: f64,
    /// Connections the server closed while idle (a distributed client opened them again
    /// for the second round, whose answers on them are not counted as still answered).
    #[serde(default)]
    pub closed_idle: usize,
    /// Requests the client itself failed (a distributed client's own errors: a user that
    /// died before it sent): not the server's doing, but not answered either.
    #[serde(default)]
    pub client_errors: usize,
    /// Connections answered in the second round, and in the first.
    #[serde(default)]
    pub answered: usize,
    #[serde(default)]
    pub first_round: usize,
    /// Where opening stopped short of N, and why.
    #[serde(default)]
    pub stopped_by: Option<String>,
    /// Worker processes the server ran with (one, unless the connections had to be
    /// spread over processes to stay under each one's descriptor limit).
    #[serde(default)]
    pub workers: usize,
    /// What keeps this row from holding N: a model whose one process holds every
    /// connection, against one process's descriptor limit.
    #[serde(default)]
    pub held_back: Option<String>,
    /// The second round's slowest answer, in ms (with a distributed client: every
    /// connection asks at once).
    #[serde(default)]
    pub round_max_ms: Option<f64>,
    /// Each client host's connections (a distributed client); empty for bench's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostLoad>,
}

impl Row {
    /// A row without figures, and why.
    pub fn missing(name: &str, model: &str, why: String) -> Row {
        Row {
            variant: name.to_string(),
            model: model.to_string(),
            missing: Some(why),
            ..Row::default()
        }
    }
}

/// Why a one-connection-per-worker model has no row of figures.
pub const ONE_CONN: &str = "one connection per worker";
