//! The workloads: a request path each, and how to recognise a correct answer — checked by
//! the bench harness before it measures a server, and by the conformance rules.

/// A request path and how to recognise a correct answer to it.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    pub name: &'static str,
    pub path: &'static str,
    /// What it shows, for the table's notes.
    pub shows: &'static str,
    /// True for a correct body.
    pub check: fn(&[u8]) -> bool,
}

/// `/sum`'s total: 1000 numbers in 100..=999 add up to 100,000..=999,000.
pub fn sum_value(body: &[u8]) -> Option<u32> {
    std::str::from_utf8(body)
        .ok()
        .and_then(|b| b.strip_prefix("sum="))
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|n| (100_000..=999_000).contains(n))
}

/// `/db`'s sum of values, written with exactly six decimals.
pub fn db_value(body: &[u8]) -> Option<f64> {
    std::str::from_utf8(body)
        .ok()
        .filter(|b| b.split_once('.').is_some_and(|(_, d)| d.len() == 6))
        .and_then(|b| b.parse::<f64>().ok())
        .filter(|v| *v > 0.0)
}

impl Workload {
    /// The workload named `name`; panics on a name not in [`WORKLOADS`] (a table's typo).
    pub fn named(name: &str) -> Workload {
        *WORKLOADS
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no workload {name:?} in the table"))
    }

    /// Served from the PostgreSQL database (`/pg`): the server needs `--pg`.
    pub fn needs_database(&self) -> bool {
        self.path.starts_with("/pg")
    }
}

pub const WORKLOADS: &[Workload] = &[
    Workload {
        name: "plaintext",
        path: "/",
        shows: "hello world: the cost of the architecture itself",
        check: |b| b == b"hello, world!",
    },
    Workload {
        name: "json",
        path: "/json",
        shows: "hello world plus a serialisation per request",
        check: |b| b == br#"{"message":"Hello, World!"}"#,
    },
    Workload {
        name: "sum",
        path: "/sum",
        shows: "CPU-bound handler: 1000 random numbers summed",
        check: |b| sum_value(b).is_some(),
    },
    Workload {
        name: "db",
        path: "/db?queries=10",
        shows: "synchronous SQLite: 10 indexed queries, blocking the worker",
        check: |b| db_value(b).is_some(),
    },
    Workload {
        name: "pg",
        path: "/pg?queries=10",
        shows: "PostgreSQL across a socket: 10 sequential queries, each model waiting its own way",
        check: |b| db_value(b).is_some(),
    },
    Workload {
        name: "pg-slow",
        path: "/pg?queries=10&sleep_ms=20",
        shows: "the same with 20 ms inside the database first: waiting without CPU in the server",
        check: |b| db_value(b).is_some(),
    },
    Workload {
        name: "sleep",
        path: "/sleep?ms=20",
        shows: "20 ms of waiting without CPU: blocking workers are capped at workers ÷ 20 ms",
        check: |b| b == b"slept=20",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_accept_real_answers_and_refuse_near_misses() {
        assert_eq!(sum_value(b"sum=550123"), Some(550_123));
        assert_eq!(sum_value(b"sum=99999"), None);
        assert_eq!(sum_value(b"total=550123"), None);
        assert_eq!(db_value(b"4987.123456"), Some(4987.123456));
        assert_eq!(db_value(b"4987.12345"), None);
        assert_eq!(db_value(b"-1.000000"), None);
    }
}
