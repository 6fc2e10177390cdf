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

/// A request path and the exact body a correct server sends for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    pub name: &'static str,
    pub path: &'static str,
    pub body: &'static [u8],
}

pub const WORKLOADS: &[Workload] = &[
    Workload {
        name: "plaintext",
        path: "/",
        body: b"hello, world!",
    },
    Workload {
        name: "json",
        path: "/json",
        body: br#"{"message":"Hello, World!"}"#,
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
