//! # prefork-eventloop — the Workerman / Swoole BASE / nginx model
//!
//! ```text
//!   default: one shared socket                     --reuseport: one socket per child
//!
//!   master: bind + listen ONE socket, fork          master: reserve the port, fork
//!   ┌──────────── listen socket ────────────┐       ┌ sock 0 ┐ ┌ sock 1 ┐ ┌ sock N-1┐
//!   │ one accept queue, in every child's     │       │ queue  │ │ queue  │ │ queue   │
//!   │ epoll set: each connection wakes ALL   │       └───┬────┘ └───┬────┘ └───┬─────┘
//!   └──┬──────────────┬─────────────────┬────┘   kernel hashes each connection to one
//!      ▼              ▼                 ▼                    ▼          ▼          ▼
//!   ┌────────┐   ┌────────┐        ┌────────┐          ┌────────┐ ┌────────┐ ┌────────┐
//!   │child 0 │   │child 1 │  …     │child N │          │child 0 │ │child 1 │ │child N │
//!   │ epoll  │   │ epoll  │        │ epoll  │          │ epoll  │ │ epoll  │ │ epoll  │
//!   │ loop:  │   │ loop   │        │ loop   │          │ loop   │ │ loop   │ │ loop   │
//!   │ accept │   └────────┘        └────────┘          └────────┘ └────────┘ └────────┘
//!   │ read → │   one process, one thread, many connections, callbacks on readiness
//!   │ message│   /pg: the callback blocks on the database's socket (PDO): the whole
//!   │ write  │   loop, every connection of this child, waits for each answer
//!   └────────┘
//! ```
//!
//! Workerman (and webman on it), Swoole's SWOOLE_BASE mode, nginx and Tornado share this
//! shape: an event loop per process, callbacks on readiness, no coroutines. The master
//! binds the socket once and forks `--workers` children that inherit it; each child runs
//! its own `mio` (epoll, edge-triggered) loop over explicit per-connection state
//! ([`event_loop`]). With `--reuseport` each child binds its own SO_REUSEPORT socket
//! instead (Workerman's `reusePort`, nginx `listen … reuseport`).
//!
//! ## What the model predicts
//! - Many connections per process at little memory each: a connection is a buffer and a
//!   few flags, not a thread or a stack.
//! - A handler that blocks (CPU or a synchronous database call) stalls *every* connection
//!   of its process: nothing else runs until the callback returns.
//! - Shared socket: every child's epoll reports each new connection (thundering herd: no
//!   EPOLLEXCLUSIVE in mio); the losers' `accept` returns EAGAIN. Epoll favours the child
//!   that waited last, so shares can be uneven — `--stats` shows them.
//!   `--reuseport`: no herd, the kernel hashes connections evenly over the sockets, but a
//!   busy child cannot leave its queue to an idle one.
//! - `/sleep` is a timer in the loop (a min-heap feeding `epoll_wait`'s timeout): no
//!   connection waits for another. `/db` runs inside the callback: the whole loop, every
//!   connection of that child, stalls for the query (Workerman with a blocking PDO call).
//!   `/pg` likewise, on a socket: the child waits for each of its N round trips to
//!   PostgreSQL, so one connection (`--db-pool` 1) is all a child can use.
//! - Cost per keep-alive request: one `read` (a short read means the socket is drained —
//!   no extra read that only returns EAGAIN), one `write`, a share of an `epoll_wait`.

mod event_loop;

use std::net::TcpListener;

use clap::Parser;
use common::cli::{self, Defaults, ServerArgs};
use common::listener::{self, ListenOptions};
use common::supervisor::Supervisor;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ARCH: &str = "prefork-eventloop";

/// Workerman / Swoole BASE / nginx: master binds, N children each run an epoll loop.
#[derive(Parser, Debug)]
#[command(name = ARCH, version, about)]
struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// Each child binds its own SO_REUSEPORT socket instead of sharing the master's.
    #[arg(long)]
    reuseport: bool,
}

fn main() {
    let args: Args = cli::parse();
    let config = args
        .server
        .resolve_with(Defaults::EVENT_DRIVEN.blocking_db())
        .unwrap_or_else(|e| cli::fail(ARCH, e));
    let listen_error = |e: std::io::Error| -> ! {
        cli::fail(ARCH, format!("cannot listen on {}: {e}", config.addr))
    };

    // Shared mode: the one socket every child inherits. Reuseport mode: the master only
    // reserves the port; each child binds and listens on its own socket after the fork.
    let (shared, _reserved, addr) = if args.reuseport {
        let (reserved, addr) =
            listener::reserve_reuseport(config.addr).unwrap_or_else(|e| listen_error(e));
        (None, Some(reserved), addr)
    } else {
        let l = ListenOptions::new(config.addr)
            .backlog(config.backlog)
            .nonblocking(true)
            .bind()
            .unwrap_or_else(|e| listen_error(e));
        let addr = l.local_addr().unwrap_or(config.addr);
        (Some(l), None, addr)
    };
    let backlog = config.backlog;
    let report = config.stats;
    let supervisor = Supervisor::start(ARCH, config.workers, config.cpus.clone(), |_| {
        let own;
        let listener: &TcpListener = match &shared {
            Some(l) => l,
            None => {
                own = ListenOptions::new(addr)
                    .backlog(backlog)
                    .reuse_port(true)
                    .nonblocking(true)
                    .bind()
                    .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
                &own
            }
        };
        let listener = listener.try_clone().map_err(|e| e.to_string())?;
        event_loop::run(listener, config.conn, report)
    })
    .unwrap_or_else(|e| cli::fail(ARCH, format!("workers failed to start: {e}")));
    cli::announce(
        ARCH,
        addr,
        &config.conn,
        format!(
            "{}, epoll loop each, {}",
            supervisor.describe(),
            if args.reuseport {
                "one SO_REUSEPORT socket per worker"
            } else {
                "one shared socket"
            }
        ),
    );
    std::process::exit(supervisor.run(config.stats.then_some(ARCH)));
}
