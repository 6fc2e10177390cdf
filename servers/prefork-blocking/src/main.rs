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
//!   worker is free.
//! - Crash isolation is perfect and the code is the simplest possible; per-request cost is
//!   low (one `read`, one `write`), so on hello world with few connections it does well.
//!
//! ## Keep-alive while others wait (`--keepalive-queued`)
//! A worker that keeps a connection open after a response can do nothing else until that
//! client speaks again. By default (`close`) the worker looks at the accept queue as it
//! frames each response: if a client is waiting there, the response says
//! `Connection: close` and the worker takes the waiting client next — keep-alive as long as
//! nobody waits, one request per connection when clients queue, which is what a PHP-FPM
//! worker behind nginx amounts to (it is free again after every request). `hold` keeps the
//! connection as Apache's prefork MPM does, until `--keepalive-requests` (100) or
//! `--keepalive-timeout` (5 s) hands the worker on: a client that stops sending holds a
//! worker for 5 s while others wait (and `ab -k` counts each such close as a failure: a
//! keep-alive answer to a client that then says nothing more always ends that way, which
//! is why `close` is the default).
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

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
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
    /// What a worker does with a keep-alive connection while clients wait in the accept
    /// queue: close it with the response it is sending (`Connection: close`) and take the
    /// next client, or hold it as Apache prefork does until --keepalive-requests or
    /// --keepalive-timeout.
    #[arg(long, value_enum, default_value = "close")]
    keepalive_queued: Queued,
}

/// `--keepalive-queued`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Queued {
    /// The response says `Connection: close` when a client is waiting to be accepted.
    Close,
    /// Keep-alive as Apache prefork keeps it, whoever waits.
    Hold,
}

/// The listening socket every worker inherits, for [`client_waiting`] (a plain `fn`, as
/// the codec asks for one).
static LISTENER: AtomicI32 = AtomicI32::new(-1);

/// How long a look at an empty accept queue is taken to hold. Looking costs a `poll`; at
/// tens of thousands of keep-alive requests per second a look per response would add a
/// third system call to the two (`read`, `write`) a request costs, for a queue that stays
/// empty. A client that queues meanwhile waits at most this long more.
const QUEUE_LOOK_HOLDS: Duration = Duration::from_millis(1);

thread_local! {
    /// When this worker last found the accept queue empty.
    static QUEUE_EMPTY_AT: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Is a client waiting in the accept queue? The codec asks as it frames each keep-alive
/// response (`--keepalive-queued close`). A listening socket polls readable exactly when
/// a connection is ready to be accepted.
fn client_waiting() -> bool {
    QUEUE_EMPTY_AT.with(|empty_at| {
        let now = Instant::now();
        if empty_at
            .get()
            .is_some_and(|at| now.duration_since(at) < QUEUE_LOOK_HOLDS)
        {
            return false;
        }
        let waiting = readable(LISTENER.load(Ordering::Relaxed));
        if !waiting {
            empty_at.set(Some(now));
        }
        waiting
    })
}

/// Whether `fd` polls readable now (no wait).
fn readable(fd: RawFd) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    n == 1 && pfd.revents & libc::POLLIN != 0
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
    let (report, mut conn_config) = (config.stats, config.conn);
    let keep_alive = match args.keepalive_queued {
        Queued::Close => {
            LISTENER.store(listener.as_raw_fd(), Ordering::Relaxed);
            conn_config.yield_keep_alive = Some(client_waiting);
            "closed while clients queue"
        }
        Queued::Hold => "held while clients queue (Apache prefork)",
    };
    let supervisor = Supervisor::start(ARCH, config.workers, config.cpus.clone(), |_| {
        worker(&listener, &conn_config, report)
    })
    .unwrap_or_else(|e| cli::fail(ARCH, format!("workers failed to start: {e}")));
    cli::announce(
        ARCH,
        addr,
        &conn_config,
        format!(
            "{}, one connection each, keep-alive {keep_alive}",
            supervisor.describe()
        ),
    );
    std::process::exit(supervisor.run(config.stats.then_some(ARCH)));
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
                    // A request under way must be in by its deadline however its bytes
                    // trickle in (slowloris proper: a field every few hundred ms never
                    // lets the receive timeout fire). Bytes after the deadline are late:
                    // 408. A request that comes in one read is not under way before it and
                    // reads no clock.
                    Ok(_) if conn.mid_request() && conn.expired(Instant::now()) => {
                        conn.expire();
                    }
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
