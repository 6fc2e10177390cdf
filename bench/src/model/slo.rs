//! `--slo p99=5ms`: the latency target a capacity is measured against, whether a probe
//! kept it, and the search's bounds (the search itself is `modes::slo`).

use std::str::FromStr;

use super::cell::{Cell, Verdict};
use super::client::millis;

/// The first offered rate.
pub const START: u32 = 1_000;
/// Most probes per server: the search's bound in time (with `--duration 3`, about a
/// minute a server).
pub const MAX_PROBES: usize = 14;
/// The latency target of the capacities a post's replay (`--post`) and a calibration
/// (`--calibrate`) search beside their closed-loop cells, unless `--slo` says another: a
/// page that answers within 10 ms at the 99th percentile.
pub const CAPACITY_AT: Target = Target {
    percentile: 99.0,
    limit_ms: 10.0,
};

/// A latency target: a percentile and the most it may be (in results.json's meta as
/// `{"percentile", "limit_ms"}`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Target {
    /// 50, 90, 99 or 99.9.
    pub percentile: f64,
    pub limit_ms: f64,
}

impl FromStr for Target {
    type Err = String;
    /// `p99=5ms`, `p99.9=20ms`, `p90=500us`, `p50=1s`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("--slo takes pNN=TIME such as p99=5ms, not '{s}'");
        let (p, t) = s.split_once('=').ok_or_else(bad)?;
        let percentile: f64 = p
            .strip_prefix('p')
            .ok_or_else(bad)?
            .parse()
            .map_err(|_| bad())?;
        if ![50.0, 90.0, 99.0, 99.9].contains(&percentile) {
            return Err(format!(
                "--slo: the percentiles measured are p50, p90, p99 and p99.9, not p{percentile}"
            ));
        }
        let limit_ms = millis(t).ok_or_else(bad)?;
        if limit_ms <= 0.0 {
            return Err(bad());
        }
        Ok(Target {
            percentile,
            limit_ms,
        })
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "p{} ≤ {} ms", self.percentile, self.limit_ms)
    }
}

impl Target {
    /// The cell's median-run figure for this percentile, in ms.
    pub fn latency(&self, cell: &Cell) -> Option<f64> {
        let o = &cell.median()?.outcome;
        if self.percentile == 50.0 {
            o.p50_ms
        } else if self.percentile == 90.0 {
            o.p90_ms
        } else if self.percentile == 99.0 {
            o.p99_ms
        } else {
            o.p999_ms
        }
    }

    /// Whether a probe kept the target: measured, no errors, the rate reached, the
    /// percentile within the limit. `Err` says why not.
    pub fn kept(&self, cell: &Cell) -> Result<f64, String> {
        let Some(run) = cell.median() else {
            return Err(cell.failure.clone().unwrap_or_else(|| "no run".into()));
        };
        let o = &run.outcome;
        if o.failed + o.non_2xx + o.timeouts > 0 {
            return Err(format!("{} errors", o.failed + o.non_2xx + o.timeouts));
        }
        if let Some(share) = cell.shortfall() {
            return Err(format!("achieved {:.0} % of the rate", 100.0 * share));
        }
        let latency = self.latency(cell).ok_or("no latency figure")?;
        if latency > self.limit_ms {
            return Err(format!("p{} {latency:.2} ms", self.percentile));
        }
        Ok(latency)
    }
}

/// What a capacity search found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    /// The highest rate that kept the target.
    Kept(u32),
    /// None kept it: below the lowest rate probed.
    Below(u32),
    /// Nothing was probed.
    Unprobed,
}

impl std::fmt::Display for Capacity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Capacity::Kept(rate) => write!(f, "{rate}"),
            Capacity::Below(rate) => write!(f, "< {rate}"),
            Capacity::Unprobed => write!(f, "–"),
        }
    }
}

/// A search's capacity from its `probes`: the highest rate that kept `target`, or below
/// the lowest probed when none did.
pub fn capacity<'a>(target: &Target, probes: impl IntoIterator<Item = &'a Cell>) -> Capacity {
    let rates: Vec<(u32, bool)> = probes
        .into_iter()
        .filter_map(|c| Some((c.rate?, target.kept(c).is_ok())))
        .collect();
    let kept = rates.iter().filter(|(_, ok)| *ok).map(|(r, _)| *r).max();
    match (kept, rates.iter().map(|(r, _)| *r).min()) {
        (Some(rate), _) => Capacity::Kept(rate),
        (None, Some(lowest)) => Capacity::Below(lowest),
        (None, None) => Capacity::Unprobed,
    }
}

/// Whether a probe measured its client more than its server: oha used ≥ 90 % of its CPU
/// while the server used less (the matrix's client-bound verdict). oha counts latency from
/// when each request was due, so its own lateness reads as the server's.
pub fn client_bound(cell: &Cell) -> bool {
    cell.median()
        .is_some_and(|r| r.verdict == Verdict::ClientBound)
}

/// What a search found: its capacity, and whether that is where its client ran out, not
/// its server (`clients`: the lowest probe above the capacity, which missed, was
/// client-bound). The server then kept every rate the client could offer — its capacity
/// is at least this — and a share of it is a share of what the client can offer (a soak
/// at "80 %" of it can still saturate the client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    pub capacity: Capacity,
    pub clients: bool,
}

/// As the tables print it: `≥ N` where the client ran out first.
impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.clients {
            write!(f, "≥ {}", self.capacity)
        } else {
            write!(f, "{}", self.capacity)
        }
    }
}

/// A search's capacity from its `probes` ([`capacity`]), and whether it is the client's.
pub fn found<'a>(target: &Target, probes: impl IntoIterator<Item = &'a Cell>) -> Found {
    let probes: Vec<&Cell> = probes.into_iter().collect();
    let capacity = capacity(target, probes.iter().copied());
    let clients = match capacity {
        Capacity::Kept(kept) => probes
            .iter()
            .filter(|c| c.rate.is_some_and(|r| r > kept))
            .min_by_key(|c| c.rate)
            .is_some_and(|c| client_bound(c)),
        _ => false,
    };
    Found { capacity, clients }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_their_units() {
        let t: Target = "p99=5ms".parse().unwrap();
        assert_eq!((t.percentile, t.limit_ms), (99.0, 5.0));
        assert_eq!("p99.9=2s".parse::<Target>().unwrap().limit_ms, 2000.0);
        assert_eq!("p50=500us".parse::<Target>().unwrap().limit_ms, 0.5);
        assert!("p98=5ms".parse::<Target>().is_err());
        assert!("p99=5".parse::<Target>().is_err());
        assert!("99=5ms".parse::<Target>().is_err());
        assert!("p99=-1ms".parse::<Target>().is_err());
    }

    #[test]
    fn a_capacity_is_the_highest_rate_that_kept_the_target() {
        let t: Target = "p99=10ms".parse().unwrap();
        let probe = |rate: u32, p99: f64| {
            let mut run = crate::model::cell::Run::sample(f64::from(rate), 10.0);
            run.outcome.p99_ms = Some(p99);
            Cell {
                rate: Some(rate),
                ..Cell::sample("prefork-eventloop", vec![run])
            }
        };
        let probes = [
            probe(1_000, 1.0),
            probe(4_000, 9.0),
            probe(8_000, 30.0),
            probe(2_000, 2.0),
        ];
        assert_eq!(capacity(&t, &probes), Capacity::Kept(4_000));
        assert_eq!(capacity(&t, &probes[2..3]), Capacity::Below(8_000));
        assert_eq!(capacity(&t, &probes[..0]), Capacity::Unprobed);
        assert_eq!(Capacity::Below(8_000).to_string(), "< 8000");
    }

    #[test]
    fn a_capacity_is_the_clients_when_the_miss_above_it_was_client_bound() {
        let t: Target = "p99=10ms".parse().unwrap();
        let probe = |rate: u32, p99: f64, verdict: Verdict| {
            let mut run = crate::model::cell::Run::sample(f64::from(rate), 10.0);
            run.outcome.p99_ms = Some(p99);
            run.verdict = verdict;
            Cell {
                rate: Some(rate),
                ..Cell::sample("thread-per-core", vec![run])
            }
        };
        let server = [
            probe(50_000, 1.0, Verdict::Neither),
            probe(100_000, 2.0, Verdict::Neither),
            probe(200_000, 900.0, Verdict::ServerBound),
        ];
        assert!(!found(&t, &server).clients);
        let client = [
            probe(50_000, 1.0, Verdict::Neither),
            probe(100_000, 2.0, Verdict::Neither),
            probe(200_000, 900.0, Verdict::ClientBound),
            probe(150_000, 400.0, Verdict::Neither),
        ];
        assert!(!found(&t, &client).clients, "the lowest miss above decides");
        assert!(found(&t, &client[..3]).clients);
        assert!(!found(&t, &client[2..3]).clients, "nothing kept");
        assert_eq!(found(&t, &client[..3]).to_string(), "≥ 100000");
        assert_eq!(found(&t, &server).to_string(), "100000");
    }
}
