//! # prefork-blocking — the PHP-FPM `pm = static` / uWSGI prefork model
//!
//! ```text
//!                         ┌──────────── one listening socket (bound by the master) ───────────┐
//!   clients ──► kernel ──►│ accept queue                                                      │
//!                         └───────┬───────────────────┬───────────────────────┬───────────────┘
//!                          accept()│ (blocks)  accept()│ (blocks)       accept()│ (blocks)
//!                         ┌───────▼──────┐    ┌───────▼──────┐        ┌───────▼──────┐
//!   master (supervisor)   │  worker 0    │    │  worker 1    │  …     │  worker N-1  │
//!   forks, restarts,  ──► │ one process, │    │ one process, │        │ one process, │
//!   stops them            │ one thread,  │    │ one thread,  │        │ one thread,  │
//!                         │ ONE client   │    │ ONE client   │        │ ONE client   │
//!                         │ at a time    │    │ at a time    │        │ at a time    │
//!                         └──────────────┘    └──────────────┘        └──────────────┘
//! ```
//!
//! The master binds one socket and forks `--workers` processes that inherit it. Each worker
//! blocks in `accept()`, then serves that connection to its end — keep-alive included — with
//! blocking `read`/`write`, then accepts the next one. There is no event loop and no
//! multiplexing: a worker *is* a connection slot.
//!
//! ## What the model predicts
//! - Throughput is capped at `workers ÷ handler latency`: with a handler that waits 20 ms,
//!   2 workers serve at most ~100 requests/s however many clients wait.
//! - One slow or idle keep-alive client holds a whole worker. With more keep-alive
//!   connections than workers, the extra connections sit in the accept queue until a
//!   worker is free (`ab -k -c 50` against 2 workers completes only because `ab` closes
//!   its connections as it runs out of requests to send).
//! - Crash isolation is perfect and the code is the simplest possible; per-request cost is
//!   low (one `read`, one `write`), so on hello world with few connections it does well.
//!
//! ## Waiting and blocking work
//! - `/sleep`: the worker sleeps (`thread::sleep`): a whole process waits for one client,
//!   so throughput is capped at `workers ÷ wait` (2 workers, 20 ms → ~100 req/s).
//! - `/db`: the synchronous SQLite query blocks the worker — which serves only this
//!   connection anyway, so nobody else notices; that is PHP-FPM's strength here.
//! - `/pg`: PHP's PDO — the worker blocks in the kernel on its one persistent connection to
//!   PostgreSQL (`--db-pool` 1) for each of the N round trips. When the database shares the
//!   CPU that costs nothing (there was nothing else to run); when the database computes
//!   elsewhere or a query is slow, the worker idles through every wait.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use clap::Parser;
use common::cli::{self, Defaults, ServerArgs};
use common::codec::{Conn, ConnConfig, Progress};
use common::listener::{ListenOptions, ACCEPT_BACKOFF};
use common::supervisor::{self, Supervisor};
use common::{linger, pg, shutdown, stats};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ARCH: &str = "prefork-blocking";

/// How often an idle worker wakes from `accept` (or from an idle keep-alive read) to look
/// at its stop flag, in case the stop signal arrived just before it blocked.
const WAKE_EVERY: Duration = Duration::from_secs(1);

/// PHP-FPM pm=static / uWSGI prefork: N processes, blocking I/O, one connection each.
#[derive(Parser, Debug)]
#[command(name = ARCH, version, about)]
struct Args {
    #[command(flatten)]
    server: ServerArgs,
}

fn main() {
    let args: Args = cli::parse();
    let config = args
        .server
        .resolve_with(Defaults::APACHE_PREFORK)
        .unwrap_or_else(|e| cli::fail(ARCH, e));
    let listener = ListenOptions::new(config.addr)
        .backlog(config.backlog)
        .accept_timeout(WAKE_EVERY)
        .write_timeout(config.conn.timeouts.idle)
        .bind()
        .unwrap_or_else(|e| cli::fail(ARCH, format!("cannot listen on {}: {e}", config.addr)));
    let addr = listener.local_addr().unwrap_or(config.addr);
    let (report, conn_config) = (config.stats, config.conn);
    let supervisor = Supervisor::start(ARCH, config.workers, config.cpus.clone(), |_| {
        worker(&listener, &conn_config, report)
    })
    .unwrap_or_else(|e| cli::fail(ARCH, format!("workers failed to start: {e}")));
    cli::announce(
        ARCH,
        addr,
        &config.conn,
        format!("{}, one connection each", supervisor.describe()),
    );
    std::process::exit(supervisor.run());
}

/// One worker process: accept, serve to the end, repeat, until asked to stop.
fn worker(listener: &TcpListener, config: &ConnConfig, report: bool) -> Result<(), String> {
    shutdown::install();
    supervisor::ready();
    while !shutdown::requested() {
        match listener.accept() {
            Ok((stream, _)) => serve(stream, config),
            Err(e) => match e.kind() {
                io::ErrorKind::Interrupted
                | io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::ConnectionAborted => {}
                _ => {
                    // EMFILE/ENFILE and the like: back off instead of spinning.
                    eprintln!("{ARCH}: accept failed: {e}; backing off");
                    std::thread::sleep(ACCEPT_BACKOFF);
                }
            },
        }
    }
    if report {
        stats::report(ARCH);
    }
    Ok(())
}

/// Serves one connection with blocking I/O until it closes or the worker must stop.
fn serve(mut stream: TcpStream, config: &ConnConfig) {
    // A client that reset the connection already is not worth reporting.
    let fd = stream.as_raw_fd();
    let mut conn = Conn::new(config);
    loop {
        match conn.process() {
            Progress::Read => {
                if !flush(&mut stream, &mut conn) {
                    return;
                }
                // Between requests the worker may be stopped: publish the idle fd so the
                // stop signal can end this read (see `common::shutdown`).
                let idle = conn.is_idle();
                if idle && !shutdown::idle_begin(fd) {
                    return;
                }
                let read = stream.read(conn.read_buf());
                if idle {
                    shutdown::idle_end();
                }
                match read {
                    Ok(0) => return,
                    Ok(n) => conn.filled(n),
                    // The listener's receive timeout is inherited by accepted sockets:
                    // a waiting connection wakes once a second, which costs nothing and
                    // lets the loop notice a stop or a missed deadline (slowloris → 408,
                    // idle keep-alive → close).
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::Interrupted
                                | io::ErrorKind::WouldBlock
                                | io::ErrorKind::TimedOut
                        ) =>
                    {
                        if conn.expired(Instant::now()) {
                            conn.expire();
                        }
                    }
                    Err(_) => return,
                }
            }
            Progress::Wait(wait) => {
                if !flush(&mut stream, &mut conn) {
                    return;
                }
                // The blocking model's only way to wait: the whole worker sleeps.
                std::thread::sleep(wait);
            }
            Progress::Query(job) => {
                if !flush(&mut stream, &mut conn) {
                    return;
                }
                // PHP-FPM with PDO: the worker blocks in the kernel for each answer.
                let result = pg::pool::run_blocking(conn.app().pg.as_ref(), &job);
                conn.query_done(result);
            }
            Progress::Close => {
                flush(&mut stream, &mut conn);
                // Dropping the stream closes it (FIN); a lingering close half-closes first.
                if conn.should_linger() {
                    linger::blocking(stream);
                }
                return;
            }
        }
    }
}

/// Writes everything the codec produced; false if the client is gone.
fn flush(stream: &mut TcpStream, conn: &mut Conn) -> bool {
    let out = conn.output();
    if out.is_empty() {
        return true;
    }
    let n = out.len();
    let ok = stream.write_all(out).is_ok();
    conn.written(n);
    ok
}
