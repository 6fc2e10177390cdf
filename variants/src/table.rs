//! The table of variants: every server binary in every mode the project measures and
//! tests. The conformance suite runs each row against every rule that applies to it; the
//! bench harness measures the rows marked for its default matrix (any row by name).

/// One server binary in one mode, and what it is capable of. The capabilities decide
/// which conformance rules apply to it: a rule about killing one worker process is not
/// generated for a server whose workers are threads — it would pass without asserting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// Name used in `bench --variants`, in the bench table and in test names.
    pub name: &'static str,
    /// The binary's name under `target/<profile>/`.
    pub binary: &'static str,
    /// Flags selecting the mode (e.g. `--codec hyper`), added to every start.
    pub args: &'static [&'static str],
    /// What it stands for in the benchmark posts.
    pub model: &'static str,
    /// Measured by a plain `bench` run (the default matrix).
    pub bench_default: bool,
    /// Each worker serves one connection at a time (the blocking models): keep-alive
    /// connections beyond `--workers` wait in the accept queue. Load tests then size one
    /// worker per client connection, as PHP-FPM is sized in practice.
    pub one_conn_per_worker: bool,
    /// A one-connection-per-worker row that keeps a keep-alive connection while clients
    /// wait in the accept queue, as Apache prefork does, until `--keepalive-requests` or
    /// `--keepalive-timeout` frees the worker. The other such rows answer `Connection:
    /// close` whenever a client waits (`prefork-blocking --keepalive-queued`).
    pub holds_keep_alive: bool,
    /// Runs hyper's own HTTP/1 parser. Where RFC 9112 lets a server choose and hyper chose
    /// differently from the shared codec, the rules check hyper's choice: Content-Length
    /// with Transfer-Encoding is read by its chunked framing and the connection then
    /// closed (RFC 9112 §6.3 allows either); identical repeated Content-Length values are
    /// merged (RFC 9110 §8.6 allows it); hyper's own parse-error responses carry no
    /// `Server`/`Content-Type`, and an unknown version gets 400.
    pub hyper: bool,
    /// Workers are processes under the common supervisor: one can be killed alone, and a
    /// killed master must leave none behind.
    pub processes: bool,
    /// Every worker listens on its own SO_REUSEPORT socket.
    pub reuseport: bool,
    /// Client connections live in a master and requests cross an IPC hop to the workers:
    /// a worker dying mid-request leaves a connection to answer (502).
    pub ipc: bool,
    /// A worker sleeps through a handler's wait (`/sleep`): at a wait, throughput is capped
    /// at workers ÷ wait. The others park the request and serve the next meanwhile.
    pub blocking_workers: bool,
    /// A worker blocks on the database's socket (`/pg`): PHP's PDO in a worker, or in an
    /// event loop's callback. At a slow query, throughput is capped at workers ÷ its time;
    /// the others wait for the answer without a thread and serve meanwhile.
    pub blocks_on_database: bool,
    /// Most bytes an idle keep-alive connection may add to the server's resident memory:
    /// the suite's regression guard (`idle_connections_stay_cheap`), twice the target the
    /// model is built to — the measured figure is `bench --idle-conns`'.
    pub idle_bytes: usize,
}

impl Variant {
    /// A row served by the shared codec, one process, one shared socket, no IPC.
    pub const fn new(
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
            bench_default: true,
            one_conn_per_worker: false,
            holds_keep_alive: false,
            hyper: false,
            processes: false,
            reuseport: false,
            ipc: false,
            blocking_workers: false,
            blocks_on_database: false,
            idle_bytes: 2 * 1024,
        }
    }

    /// The row named `name`; panics on a name not in [`VARIANTS`] (a typo in a test).
    pub fn named(name: &str) -> Variant {
        *VARIANTS
            .iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("no variant {name:?} in the table"))
    }
}

/// Every variant. A new server or mode joins the suite and the bench with one row here.
pub const VARIANTS: &[Variant] = &[
    Variant {
        one_conn_per_worker: true,
        processes: true,
        blocking_workers: true,
        blocks_on_database: true,
        ..Variant::new(
            "prefork-blocking",
            "prefork-blocking",
            &[],
            "PHP-FPM pm=static",
        )
    },
    Variant {
        // Its stack is the model's own cost: one touched 4 KiB page at the top in a release
        // build (the bottom one generator painted is patched out, vendor/generator), ~4.3 KB
        // measured; the suite's debug build runs three pages deep (11.6 KB).
        idle_bytes: 16 * 1024,
        processes: true,
        reuseport: true,
        ..Variant::new(
            "coroutine-reuseport",
            "coroutine-reuseport",
            &[],
            "Swoole Co\\Http\\Server",
        )
    },
    Variant {
        processes: true,
        blocks_on_database: true,
        ..Variant::new(
            "prefork-eventloop",
            "prefork-eventloop",
            &[],
            "Workerman / nginx",
        )
    },
    Variant {
        processes: true,
        reuseport: true,
        blocks_on_database: true,
        ..Variant::new(
            "prefork-eventloop/reuseport",
            "prefork-eventloop",
            &["--reuseport"],
            "Workerman reusePort",
        )
    },
    Variant {
        // A glommio task and its socket's source (2 KiB target).
        idle_bytes: 4 * 1024,
        reuseport: true,
        ..Variant::new(
            "thread-per-core",
            "thread-per-core",
            &[],
            "Glommio / Seastar",
        )
    },
    Variant {
        // Stock glommio keeps a receive buffer per socket: no target, a guard.
        idle_bytes: 16 * 1024,
        reuseport: true,
        ..Variant::new(
            "thread-per-core/readiness",
            "thread-per-core",
            &["--receive", "readiness"],
            "stock glommio accept and receive",
        )
    },
    Variant {
        processes: true,
        ipc: true,
        ..Variant::new(
            "reactor-workers",
            "reactor-workers",
            &[],
            "Swoole SWOOLE_PROCESS (coroutine workers)",
        )
    },
    Variant {
        processes: true,
        ipc: true,
        blocking_workers: true,
        blocks_on_database: true,
        ..Variant::new(
            "reactor-workers/sync",
            "reactor-workers",
            &["--worker-mode", "sync"],
            "nginx → php-fpm (sync workers)",
        )
    },
    Variant {
        processes: true,
        ipc: true,
        ..Variant::new(
            "reactor-workers/fd-modulo",
            "reactor-workers",
            &["--dispatch", "fd-modulo"],
            "Swoole dispatch_mode 2",
        )
    },
    Variant {
        processes: true,
        ipc: true,
        bench_default: false,
        ..Variant::new(
            "reactor-workers/idle-2-reactors",
            "reactor-workers",
            &["--dispatch", "idle", "--reactors", "2"],
            "Swoole dispatch_mode 3, 2 reactors",
        )
    },
    Variant {
        // A tokio task and its socket's registration (2 KiB target).
        idle_bytes: 4 * 1024,
        ..Variant::new(
            "work-stealing",
            "work-stealing",
            &[],
            "Go net/http (shared codec)",
        )
    },
    Variant {
        hyper: true,
        // hyper's connection keeps its own read and write buffers: what it allows, guarded.
        idle_bytes: 48 * 1024,
        ..Variant::new(
            "work-stealing/hyper",
            "work-stealing",
            &["--codec", "hyper"],
            "Go net/http (full stack)",
        )
    },
    Variant {
        // Last in the table so that the colours of the rows above stay as they were.
        one_conn_per_worker: true,
        holds_keep_alive: true,
        processes: true,
        blocking_workers: true,
        blocks_on_database: true,
        bench_default: false,
        ..Variant::new(
            "prefork-blocking/apache",
            "prefork-blocking",
            &["--keepalive-queued", "hold"],
            "Apache prefork (keep-alive held)",
        )
    },
];
