//! Layer 1, the results model: the types of a run — its cells, their repetitions and
//! figures, the verdicts and the rules that decide them, the rows of the modes that measure
//! something else — and their (de)serialisation as results.json. It imports nothing else of
//! bench: measuring fills it in, the writers read it, and `bench --report DIR` reads it back
//! from a file alone.

pub mod attack;
pub mod cell;
pub mod client;
pub mod fidelity;
pub mod idle;
pub mod post;
pub mod profile;
pub mod slo;
pub mod soak;

use std::path::Path;

use serde::{Deserialize, Serialize};

use self::cell::Cell;

/// What results.json holds: the run's set-up and every cell — or, for a run that measures
/// something other than the matrix, its rows (`--idle-conns`, `--attack`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Results {
    pub meta: serde_json::Value,
    #[serde(default)]
    pub cells: Vec<Cell>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle: Vec<idle::Row>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attack: Vec<attack::Row>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub soak: Vec<soak::Soak>,
}

impl Results {
    /// Reads `dir/results.json`.
    pub fn load(dir: &Path) -> Result<Results, String> {
        let path = dir.join("results.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a bench results.json: {e}", path.display()))
    }
}
