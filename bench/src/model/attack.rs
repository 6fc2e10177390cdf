//! `--attack slowloris|slowbody`: one server's row — whether normal clients got through while slow
//! ones held its connections (measured by `modes::attack`).

use serde::{Deserialize, Serialize};
use variants::Variant;

/// One server under the attack: did normal clients get through?
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub variant: String,
    pub model: String,
    /// Which slow clients: `slowloris` (heads) or `slowbody` (POST bodies); empty in
    /// results written before there were two.
    #[serde(default)]
    pub attack: String,
    pub workers: usize,
    /// Why there are no figures: the server or slowhttptest did not start.
    #[serde(default)]
    pub missing: Option<String>,
    /// Slow connections slowhttptest held open.
    #[serde(default)]
    pub connections: usize,
    /// Probes answered within 2 s, of those made.
    #[serde(default)]
    pub probes_answered: usize,
    #[serde(default)]
    pub probes: usize,
    /// The slowest probe (2,000 for one not answered).
    #[serde(default)]
    pub slowest_probe_ms: u64,
    /// slowhttptest's own last verdict, "YES" or "NO".
    #[serde(default)]
    pub service_available: String,
}

impl Row {
    /// A row without figures, and why.
    pub fn missing(v: &Variant, attack: &str, workers: usize, why: String) -> Row {
        Row {
            variant: v.name.to_string(),
            model: v.model.to_string(),
            attack: attack.to_string(),
            workers,
            missing: Some(why),
            ..Row::default()
        }
    }
}
