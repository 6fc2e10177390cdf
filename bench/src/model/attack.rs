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
    pub fn missing(v: &Variant, attack: Attack, workers: usize, why: String) -> Row {
        Row {
            variant: v.name.to_string(),
            model: v.model.to_string(),
            attack: attack.name(),
            workers,
            missing: Some(why),
            ..Row::default()
        }
    }
}

/// The slow clients `--attack` sends; clap takes them by the names the rows carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Attack {
    /// `slowhttptest -H`: heads that never end.
    Slowloris,
    /// `slowhttptest -B`: POST bodies that never end.
    #[value(name = "slowbody")]
    SlowBody,
}

impl Attack {
    /// The name `--attack` takes and the rows carry (clap's, so it is written once).
    pub fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }

    /// What a page calls it: the attack and slowhttptest's mode.
    pub fn title(self) -> String {
        let what = match self {
            Attack::Slowloris => "Slowloris",
            Attack::SlowBody => "Slow POST",
        };
        format!("{what} (slowhttptest {})", self.slowhttptest_args()[0])
    }

    /// The attack a row names; a row written before there were two names none, and was
    /// Slowloris.
    pub fn of_row(name: &str) -> Attack {
        use clap::ValueEnum;
        Attack::from_str(name, false).unwrap_or(Attack::Slowloris)
    }

    /// slowhttptest's arguments for this attack: its mode, and for a body the verb (our
    /// servers answer an unknown one at once with a 501) and a Content-Length of 8 KiB —
    /// minutes at slowhttptest's pace (a pair of at most 32 random characters each every
    /// 2 s), longer than an attack runs.
    pub fn slowhttptest_args(self) -> &'static [&'static str] {
        match self {
            Attack::Slowloris => &["-H"],
            Attack::SlowBody => &["-B", "-t", "POST", "-s", "8192"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Attack;

    #[test]
    fn attacks_are_named_as_the_flag_takes_them() {
        use clap::ValueEnum;
        for a in [Attack::Slowloris, Attack::SlowBody] {
            assert_eq!(Attack::from_str(&a.name(), false), Ok(a));
        }
        assert_eq!(Attack::SlowBody.name(), "slowbody");
        assert!(Attack::from_str("slowread", false).is_err());
        assert_eq!(Attack::SlowBody.slowhttptest_args()[0], "-B");
        assert_eq!(Attack::of_row("slowbody"), Attack::SlowBody);
        assert_eq!(Attack::of_row(""), Attack::Slowloris);
        assert_eq!(Attack::SlowBody.title(), "Slow POST (slowhttptest -B)");
    }
}
