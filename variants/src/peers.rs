//! The real systems beside the models: third-party servers run through the same cells as
//! archzoo's variants, so a run shows how much of a result is the architecture and how
//! much the language and implementation.
//!
//! Built-in peers ([`BUILTIN`]) are started by `peers/run NAME PORT WORKERS DB` (their
//! programs and configurations live in `peers/`, `peers/install` installs them); any other
//! server joins with `--peer 'NAME=COMMAND'`, where the command names `{port}` and may name
//! `{workers}`, `{db}` and `{host}` (the address to listen on: loopback, or a test
//! host's).

/// Where the built-in peers' programs are: `peers/` of this checkout.
pub const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../peers");

/// The environment variable `peers/run` sizes a peer's connection table from (nginx's
/// `worker_connections`; default 10240), as `--max-conns` sizes a model's: `bench
/// --idle-conns` sets it above the connections it opens.
pub const CONNS_ENV: &str = "ARCHZOO_PEER_CONNS";

/// The environment variable `peers/run` takes the address to listen on from (default
/// 127.0.0.1): a test host's address when bench runs the peer inside that host.
pub const HOST_ENV: &str = "ARCHZOO_PEER_HOST";

/// Why the built-in peer `name` cannot start here (`peers/run --check`), if it cannot.
pub fn missing(name: &str) -> Option<String> {
    let run = format!("{DIR}/run");
    match std::process::Command::new(&run)
        .args(["--check", name])
        .output()
    {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        Err(e) => Some(format!("cannot run {run}: {e}")),
    }
}

/// A built-in peer: one row.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    pub name: &'static str,
    /// What it is, for the table's model column.
    pub what: &'static str,
    /// The archzoo variants it stands beside.
    pub beside: &'static [&'static str],
    /// What `--workers` sets in it.
    pub workers_mean: &'static str,
    /// Workloads it does not serve, each with the reason (a cell marked n/a, never a fake).
    pub unsupported: &'static [(&'static str, &'static str)],
    /// Which of its processes are the workers whose balance `bench --fidelity` reads.
    pub workers_are: Workers,
}

/// Which processes of a peer's tree are its workers, for the balance signature: a peer
/// keeps no per-worker counts, so its workers' CPU time (from /proc) is what shows how the
/// work spread over them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workers {
    /// The processes with no children (a master's workers); in a one-process server, its
    /// threads (Go's runtime spreads goroutines over GOMAXPROCS threads).
    Leaves,
    /// The leaf processes with this command name (`/proc/PID/comm`): other leaves are a
    /// front server's own workers.
    Named(&'static str),
    /// Not to be told apart from /proc, and why.
    Unseen(&'static str),
}

const NO_JSON: (&str, &str) = ("json", "not among the posts' routes for this peer");

/// Every built-in peer.
pub const BUILTIN: &[Builtin] = &[
    Builtin {
        name: "nginx",
        what: "nginx 1.22, return 200 from its configuration",
        beside: &["prefork-eventloop"],
        workers_mean: "worker_processes",
        unsupported: &[
            NO_JSON,
            (
                "sum",
                "nginx answers from its configuration: it runs no handler code",
            ),
            (
                "db",
                "nginx answers from its configuration: it runs no handler code",
            ),
            (
                "sleep",
                "nginx answers from its configuration: it runs no handler code",
            ),
        ],
        workers_are: Workers::Leaves,
    },
    Builtin {
        name: "php-fpm",
        what: "nginx → php-fpm 8.2, pm = static",
        beside: &["prefork-blocking", "reactor-workers/sync"],
        workers_mean: "pm.max_children",
        unsupported: &[NO_JSON],
        workers_are: Workers::Named("php-fpm8.2"),
    },
    Builtin {
        name: "go-nethttp",
        what: "Go net/http (stdlib)",
        beside: &["work-stealing"],
        workers_mean: "GOMAXPROCS",
        unsupported: &[
            NO_JSON,
            (
                "db",
                "Go's standard library has no SQLite driver, and no module can be fetched here",
            ),
        ],
        workers_are: Workers::Leaves,
    },
    Builtin {
        name: "node-cluster",
        what: "Node.js http + cluster",
        beside: &["prefork-eventloop"],
        workers_mean: "cluster workers",
        unsupported: &[
            NO_JSON,
            (
                "db",
                "Node.js 20 has no built-in SQLite (node:sqlite came in 22.5)",
            ),
        ],
        workers_are: Workers::Leaves,
    },
    Builtin {
        name: "gevent",
        what: "gevent WSGI (gunicorn -k gevent for N > 1)",
        beside: &["coroutine-reuseport"],
        workers_mean: "processes",
        unsupported: &[NO_JSON],
        workers_are: Workers::Leaves,
    },
    Builtin {
        name: "uwsgi",
        what: "uWSGI --http, prefork processes",
        beside: &["prefork-blocking"],
        workers_mean: "processes",
        unsupported: &[NO_JSON],
        workers_are: Workers::Unseen(
            "its HTTP router is a process beside the workers, named as they are: its CPU cannot be told from theirs",
        ),
    },
    Builtin {
        name: "tornado",
        what: "Tornado (asyncio), fork_processes for N > 1",
        beside: &["prefork-eventloop"],
        workers_mean: "processes",
        unsupported: &[NO_JSON],
        workers_are: Workers::Leaves,
    },
    // Last, so that the colours of the peers above stay as they were.
    Builtin {
        name: "apache-prefork",
        what: "Apache 2.4 prefork + mod_php 8.2, keep-alive 100 requests / 5 s",
        beside: &["prefork-blocking/apache", "prefork-blocking"],
        workers_mean: "StartServers = MaxRequestWorkers",
        unsupported: &[NO_JSON],
        workers_are: Workers::Leaves,
    },
];

/// A peer to run: a built-in one or one given with `--peer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub name: String,
    /// The command line, with `{port}`, `{workers}`, `{db}` and `{peers}` to fill in.
    pub command: String,
    /// For the table's model column.
    pub what: String,
    /// Workloads it does not serve, and why.
    pub unsupported: Vec<(String, String)>,
    /// Installed by `peers/install` (a built-in peer).
    pub builtin: bool,
    /// Which of its processes are its workers ([`Workers::Leaves`] for a `--peer`).
    pub workers_are: Workers,
    /// The model a `--peer NAME@MODEL=…` stands beside (a built-in peer's are in
    /// [`BUILTIN`]): it joins the fidelity table as that model's original.
    pub beside: Option<String>,
}

impl Peer {
    /// The built-in peer `name`.
    pub fn builtin(name: &str) -> Result<Peer, String> {
        let b = BUILTIN.iter().find(|b| b.name == name).ok_or_else(|| {
            let known: Vec<&str> = BUILTIN.iter().map(|b| b.name).collect();
            format!("unknown peer '{name}' (known: {})", known.join(", "))
        })?;
        Ok(Peer {
            name: b.name.to_string(),
            command: format!("{{peers}}/run {} {{port}} {{workers}} {{db}}", b.name),
            what: format!("real: {}", b.what),
            unsupported: b
                .unsupported
                .iter()
                .map(|(w, why)| (w.to_string(), why.to_string()))
                .collect(),
            builtin: true,
            workers_are: b.workers_are,
            beside: None,
        })
    }

    /// `NAME=COMMAND` or `NAME@MODEL=COMMAND` from `--peer`: any server, started with
    /// `sh -c COMMAND` once the placeholders are filled in, standing beside the model
    /// `MODEL` (a variant's name) when given. The command must name `{port}`: the harness
    /// chooses it.
    pub fn parse(arg: &str) -> Result<Peer, String> {
        let (name, command) = arg.split_once('=').ok_or_else(|| {
            format!("--peer takes NAME=COMMAND or NAME@MODEL=COMMAND, not '{arg}'")
        })?;
        let (name, command) = (name.trim(), command.trim());
        let (name, beside) = match name.split_once('@') {
            Some((name, model)) => {
                let model = model.trim();
                if !crate::VARIANTS.iter().any(|v| v.name == model) {
                    return Err(format!(
                        "--peer {name}@{model}: '{model}' is no model (one of: {})",
                        crate::VARIANTS
                            .iter()
                            .map(|v| v.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                (name.trim(), Some(model.to_string()))
            }
            None => (name, None),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        {
            return Err(format!(
                "--peer: the name '{name}' must be letters, digits, '-', '_', '.' or '/'"
            ));
        }
        if !command.contains("{port}") {
            return Err(format!(
                "--peer {name}: the command must contain {{port}} (the harness picks a free port)"
            ));
        }
        Ok(Peer {
            name: name.to_string(),
            command: command.to_string(),
            what: match &beside {
                Some(model) => format!("--peer, beside {model}"),
                None => "--peer".to_string(),
            },
            unsupported: Vec::new(),
            builtin: false,
            workers_are: Workers::Leaves,
            beside,
        })
    }

    /// Why it does not serve `workload`, if it does not.
    pub fn unsupported(&self, workload: &str) -> Option<&str> {
        self.unsupported
            .iter()
            .find(|(w, _)| w == workload)
            .map(|(_, why)| why.as_str())
    }

    /// The command line for one start.
    pub fn command_line(&self, port: u16, workers: usize, db: &str, peers_dir: &str) -> String {
        self.command
            .replace("{port}", &port.to_string())
            .replace("{workers}", &workers.to_string())
            .replace("{db}", db)
            .replace("{peers}", peers_dir)
    }
}

/// The built-in peers that stand beside `variant`.
pub fn beside(variant: &str) -> Vec<&'static str> {
    BUILTIN
        .iter()
        .filter(|b| b.beside.contains(&variant))
        .map(|b| b.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::VARIANTS;

    #[test]
    fn a_peer_may_say_which_model_it_stands_beside() {
        let p =
            Peer::parse("swoole-process@reactor-workers=php server.php {port} {workers}").unwrap();
        assert_eq!(p.name, "swoole-process");
        assert_eq!(p.beside.as_deref(), Some("reactor-workers"));
        assert_eq!(p.command, "php server.php {port} {workers}");
        assert!(Peer::parse("x=cmd {port}").unwrap().beside.is_none());
        let e = Peer::parse("x@no-such-model=cmd {port}").unwrap_err();
        assert!(
            e.contains("'no-such-model' is no model") && e.contains("prefork-eventloop"),
            "{e}"
        );
        assert!(Peer::parse("@prefork-eventloop=cmd {port}").is_err());
    }

    #[test]
    fn peer_arguments_are_parsed_and_filled_in() {
        let p = Peer::parse("swoole-co = php server.php {port} {workers}").unwrap();
        assert_eq!(p.name, "swoole-co");
        assert_eq!(
            p.command_line(8081, 2, "/d.db", "/p"),
            "php server.php 8081 2"
        );
        assert!(p.unsupported("sleep").is_none());
        for bad in [
            "no-equals",
            "=cmd {port}",
            "x=cmd without port",
            "a b=cmd {port}",
        ] {
            assert!(Peer::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn builtin_peers_run_through_peers_run_and_name_real_models() {
        let nginx = Peer::builtin("nginx").unwrap();
        assert_eq!(
            nginx.command_line(9000, 4, "/x.db", "/repo/peers"),
            "/repo/peers/run nginx 9000 4 /x.db"
        );
        assert!(nginx.unsupported("sleep").is_some());
        assert!(nginx.unsupported("plaintext").is_none());
        assert!(Peer::builtin("apache").unwrap_err().contains("php-fpm"));
        for b in BUILTIN {
            for model in b.beside {
                assert!(VARIANTS.iter().any(|v| v.name == *model), "{model}");
            }
        }
        assert_eq!(beside("work-stealing"), vec!["go-nethttp"]);
    }
}
