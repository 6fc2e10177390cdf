//! # variants — what archzoo runs, and how it is started
//!
//! The conformance suite and the bench harness both need the list of servers and modes,
//! what each one can do, the workloads with a check of their answers, and a way to start a
//! server binary and read its start-up line. They share this crate, so that a new server,
//! mode or workload is **one row in one table** and both pick it up.
//!
//! # Layout
//! - [`table`] — [`Variant`]: a server binary in one mode, with its capabilities (processes
//!   that can be killed alone, one connection per worker, forwarding to workers, …), and
//!   [`VARIANTS`], the table itself.
//! - [`workloads`] — [`Workload`]: a request path and how to recognise a correct answer.
//! - [`peers`] — the real third-party servers run beside the models (`bench --peers`,
//!   `--peer NAME=COMMAND`).
//! - [`database`] — the PostgreSQL cluster of `/pg` (`scripts/pg`), started on demand and
//!   stopped by whoever started it.
//! - [`launch`] — starting a server in its own process group (pinned, if asked), reading
//!   the address from its start-up line, stopping it and collecting its `--stats` lines;
//!   every group it started is killed when its handle drops, or on Ctrl-C.

pub mod database;
pub mod launch;
pub mod peers;
pub mod table;
pub mod workloads;

pub use table::{Variant, VARIANTS};
pub use workloads::{Workload, WORKLOADS};

/// Looks up a comma-separated list of names in `table`; an unknown name is an error that
/// lists the known ones.
pub fn select<T: Copy>(
    list: &str,
    table: &[T],
    name: impl Fn(&T) -> &'static str,
    what: &str,
) -> Result<Vec<T>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|wanted| {
            table
                .iter()
                .copied()
                .find(|t| name(t) == wanted)
                .ok_or_else(|| {
                    let known: Vec<&str> = table.iter().map(&name).collect();
                    format!("unknown {what} '{wanted}' (known: {})", known.join(", "))
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_selectable() {
        let all: Vec<&str> = VARIANTS.iter().map(|v| v.name).collect();
        let unique: std::collections::BTreeSet<&str> = all.iter().copied().collect();
        assert_eq!(unique.len(), all.len(), "duplicate variant names");
        let picked = select(&all.join(","), VARIANTS, |v| v.name, "variant").unwrap();
        assert_eq!(picked.len(), VARIANTS.len());
        let err = select("nope", WORKLOADS, |w| w.name, "workload").unwrap_err();
        assert!(err.contains("plaintext"), "{err}");
    }
}
