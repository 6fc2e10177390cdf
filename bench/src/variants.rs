//! The servers and workloads the harness knows. A new server (or mode) joins the default
//! matrix with one entry in [`VARIANTS`].

/// One row of the matrix: a server binary in one mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// Name used in `--variants` and in the table.
    pub name: &'static str,
    pub binary: &'static str,
    pub args: &'static [&'static str],
    /// What it stands for in the benchmark posts.
    pub model: &'static str,
    /// One connection per worker at a time (keep-alive connections beyond `--workers`
    /// wait in the accept queue).
    pub one_conn_per_worker: bool,
}

const fn variant(
    name: &'static str,
    binary: &'static str,
    args: &'static [&'static str],
    model: &'static str,
) -> Variant {
    Variant {
        name,
        binary,
        args,
        model,
        one_conn_per_worker: false,
    }
}

pub const VARIANTS: &[Variant] = &[
    Variant {
        one_conn_per_worker: true,
        ..variant(
            "prefork-blocking",
            "prefork-blocking",
            &[],
            "PHP-FPM pm=static",
        )
    },
    variant(
        "coroutine-reuseport",
        "coroutine-reuseport",
        &[],
        "Swoole Co\\Http\\Server",
    ),
    variant(
        "prefork-eventloop",
        "prefork-eventloop",
        &[],
        "Workerman / nginx",
    ),
    variant(
        "prefork-eventloop/reuseport",
        "prefork-eventloop",
        &["--reuseport"],
        "Workerman reusePort",
    ),
    variant(
        "thread-per-core",
        "thread-per-core",
        &[],
        "Glommio / Seastar",
    ),
    variant(
        "thread-per-core/readiness",
        "thread-per-core",
        &["--receive", "readiness"],
        "stock glommio receive",
    ),
    variant(
        "reactor-workers",
        "reactor-workers",
        &[],
        "Swoole SWOOLE_PROCESS",
    ),
    variant(
        "reactor-workers/fd-modulo",
        "reactor-workers",
        &["--dispatch", "fd-modulo"],
        "Swoole dispatch_mode 2",
    ),
    variant(
        "work-stealing",
        "work-stealing",
        &[],
        "Go net/http (shared codec)",
    ),
    variant(
        "work-stealing/hyper",
        "work-stealing",
        &["--codec", "hyper"],
        "Go net/http (full stack)",
    ),
];

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

fn sum_ok(body: &[u8]) -> bool {
    std::str::from_utf8(body)
        .ok()
        .and_then(|b| b.strip_prefix("sum="))
        .and_then(|n| n.parse::<u32>().ok())
        .is_some_and(|n| (100_000..=999_000).contains(&n))
}

fn db_ok(body: &[u8]) -> bool {
    std::str::from_utf8(body)
        .ok()
        .filter(|b| b.split_once('.').is_some_and(|(_, d)| d.len() == 6))
        .and_then(|b| b.parse::<f64>().ok())
        .is_some_and(|v| v > 0.0)
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
        check: sum_ok,
    },
    Workload {
        name: "db",
        path: "/db?queries=10",
        shows: "synchronous SQLite: 10 indexed queries, blocking the worker",
        check: db_ok,
    },
    Workload {
        name: "sleep",
        path: "/sleep?ms=20",
        shows: "20 ms of waiting without CPU: blocking workers are capped at workers ÷ 20 ms",
        check: |b| b == b"slept=20",
    },
];

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
        let joined = all.join(",");
        let picked = select(&joined, VARIANTS, |v| v.name, "variant").unwrap();
        assert_eq!(picked.len(), VARIANTS.len());
        let err = select("nope", WORKLOADS, |w| w.name, "workload").unwrap_err();
        assert!(err.contains("plaintext"), "{err}");
    }
}
