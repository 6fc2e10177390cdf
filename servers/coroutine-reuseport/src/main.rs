//! # coroutine-reuseport — the Swoole `Co\Http\Server` model
//!
//! ```text
//!                  clients
//!                     │  SYN
//!          ┌──────────▼───────────┐  the kernel hashes each new connection
//!          │ SO_REUSEPORT group   │  (src/dst address and port) to ONE socket
//!          └──┬────────┬───────┬──┘
//!     ┌───────▼──┐ ┌───▼─────┐ ┌▼─────────┐
//!     │ socket 0 │ │socket 1 │ │socket N-1│   one listening socket per process,
//!     │  queue   │ │ queue   │ │  queue   │   its own accept queue
//!     └────┬─────┘ └───┬─────┘ └────┬─────┘
//!   ┌──────▼──────┐┌───▼────────┐┌──▼──────────┐
//!   │ process 0   ││ process 1  ││ process N-1 │  forked and restarted by the master
//!   │ 1 scheduler ││            ││             │
//!   │  thread     ││    …       ││     …       │  `may`, one worker thread
//!   │ ┌──┐┌──┐┌──┐││            ││             │
//!   │ │co││co││co│││            ││             │  one stackful coroutine per connection:
//!   │ └──┘└──┘└──┘││            ││             │  read → parse → handle → write, written
//!   └─────────────┘└────────────┘└─────────────┘  as straight-line blocking code
//! ```
//!
//! The benchmark posts ran Swoole's `Co\Http\Server` as N independent processes, each
//! binding the same port with SO_REUSEPORT and running a single-threaded coroutine
//! scheduler. Here: the master reserves the port (so port 0 and a busy port are handled
//! once, up front) and forks `--workers` processes; each binds its own SO_REUSEPORT socket
//! (socket2) and runs `may` with exactly one scheduler thread, on its own CPU when `--cpus`
//! is given. Every connection is a coroutine with a `--stack-size` stack that reads,
//! handles and writes as if I/O blocked; `may` parks the coroutine on epoll instead.
//! `--workers 1` is also the gevent / Tornado single-process model.
//!
//! ## What the model predicts
//! - No shared accept queue and no cross-process wake-ups: each connection lands in one
//!   process's queue and stays there.
//! - A busy process cannot hand its connections to an idle one: with few connections the
//!   kernel's hash can put more of them on one process — `--stats` shows the spread.
//! - A CPU-bound or synchronous handler stalls every coroutine of its process, as in an
//!   event loop; a coroutine sleep does not.
//! - `/sleep` parks one coroutine on `may`'s timer: the process keeps serving the others.
//!   `/db` is a synchronous SQLite call, not a `may` I/O point: it blocks the scheduler
//!   thread and every coroutine of the process waits for it (Swoole's warning about
//!   blocking PDO in coroutines without its hooks). `/pg` is what the hooks buy: its
//!   PostgreSQL socket is `may`'s, so each wait for the database parks only its coroutine
//!   (a pool of `--db-pool` connections per process, 64 as Swoole's `PDOPool`).
//! - Per keep-alive request: one `read`, one `write`, a share of `epoll_wait`. After a
//!   short read the socket is drained, so the coroutine parks on readiness
//!   ([`WaitIo::wait_io`]) instead of reading again only to get EAGAIN.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use common::cli::{self, ServerArgs};
use common::codec::{Conn, ConnConfig, Progress};
use common::listener::{self, ListenOptions, ACCEPT_BACKOFF};
use common::registry::{ConnRegistry, Registration, Tracked, SWEEP_EVERY};
use common::shutdown::{self, StopChannel};
use common::supervisor::{self, Supervisor};
use common::{linger, pg, stats};
use may::io::WaitIo;
use may::net::{TcpListener, TcpStream};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ARCH: &str = "coroutine-reuseport";

/// Swoole Co\Http\Server: N processes, SO_REUSEPORT each, one coroutine scheduler each.
#[derive(Parser, Debug)]
#[command(name = ARCH, version, about)]
struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// Stack reserved for each connection's coroutine, in bytes: address space, of which
    /// only the pages a connection touches cost memory (hello world touches ~6 KiB, the
    /// framework stack's first /db ~18 KiB: hence the 32 KiB floor).
    #[arg(long, default_value_t = 128 * 1024, value_parser = clap::value_parser!(u64).range((32 << 10)..=(64 << 20)))]
    stack_size: u64,
}

fn main() {
    let args: Args = cli::parse();
    let config = args.server.resolve().unwrap_or_else(|e| cli::fail(ARCH, e));
    let (_reserved, addr) = listener::reserve_reuseport(config.addr)
        .unwrap_or_else(|e| cli::fail(ARCH, format!("cannot listen on {}: {e}", config.addr)));
    let pinned = !config.cpus.is_empty();
    let (backlog, report, stack) = (config.backlog, config.stats, args.stack_size as usize);
    let conn_config = config.conn;
    // Fork before anything touches `may`: its scheduler threads would not survive a fork.
    let supervisor = Supervisor::start(ARCH, config.workers, config.cpus.clone(), |index| {
        worker(index, addr, backlog, pinned, stack, conn_config, report)
    })
    .unwrap_or_else(|e| cli::fail(ARCH, format!("workers failed to start: {e}")));
    cli::announce(
        ARCH,
        addr,
        &config.conn,
        format!(
            "{}, one SO_REUSEPORT socket and one coroutine scheduler each, {} KiB stacks",
            supervisor.describe(),
            stack / 1024
        ),
    );
    std::process::exit(supervisor.run(config.stats.then_some(ARCH)));
}

/// One worker process: bind, schedule coroutines on one thread, stop on SIGTERM.
fn worker(
    index: usize,
    addr: SocketAddr,
    backlog: i32,
    pinned: bool,
    stack_size: usize,
    config: ConnConfig,
    report: bool,
) -> Result<(), String> {
    shutdown::install();
    // When the supervisor pinned this process, `may` follows the process's CPU mask.
    common::coroutine::one_scheduler_thread(stack_size, pinned);
    let std_listener = ListenOptions::new(addr)
        .backlog(backlog)
        .reuse_port(true)
        .nonblocking(true)
        .bind()
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let listener_fd = std_listener.as_raw_fd();
    // SAFETY: the fd is a listening TCP socket whose ownership moves to `may` here.
    let listener = unsafe { TcpListener::from_raw_fd(std_listener.into_raw_fd()) };
    let registry = ConnRegistry::new();
    let conns = registry.clone();
    // Requests run on the scheduler thread: it is this process's worker in `--stats`.
    stats::forget_current_thread();
    // SAFETY: the closure only uses `may`-aware I/O; it is the only coroutine at this point.
    let acceptor = unsafe {
        may::coroutine::spawn(move || {
            stats::set_worker_index(index);
            accept_loop(listener, conns, config)
        })
    };

    // The main thread is not a scheduler thread: it waits for the stop signal with a
    // plain blocking read, then hands the stop to the scheduler.
    let mut stop =
        StopChannel::new().map_err(|e| format!("cannot create the stop channel: {e}"))?;
    supervisor::ready();
    // It also sweeps connection deadlines once a second (slowloris, idle keep-alive).
    stop.wait(Some(SWEEP_EVERY), || registry.sweep(Instant::now()));
    // Stop accepting on this process's own socket and end every parked connection.
    registry.stop(Some(listener_fd));
    let _ = acceptor.join();
    // Busy connections finish their request and close; the master's grace caps this.
    while registry.live() > 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    if report {
        stats::report(ARCH);
    }
    Ok(())
}

fn accept_loop(listener: TcpListener, conns: Arc<ConnRegistry>, config: ConnConfig) {
    let config = config.shared();
    while !conns.stopping() {
        if conns.live() >= config.max_conns {
            // At --max-conns: leave new connections in the listen queue for a while.
            common::coroutine::sleep(Duration::from_millis(10));
            continue;
        }
        match listener.accept() {
            Ok((stream, _)) => {
                let tracked = conns.track(stream);
                // The connection's coroutine starts at once on this scheduler thread (the
                // process's only one) and runs until it first parks. `go!` would queue it
                // on the scheduler's global queue and wake the thread through its eventfd:
                // a write and a share of a read per connection, to wake the thread that is
                // already running.
                // Detached (vendored may): nobody joins a connection, so its spawn makes no
                // join handle's shared state.
                // SAFETY: as `go!`: the coroutine uses only `may`-aware I/O and owns what
                // it touches; nothing here cancels it.
                let spawned = unsafe {
                    may::coroutine::Builder::new()
                        .spawn_local_detached(move || serve(tracked, config))
                };
                if let Err(e) = spawned {
                    eprintln!("{ARCH}: cannot start a coroutine: {e}; backing off");
                    common::coroutine::sleep(ACCEPT_BACKOFF);
                }
            }
            Err(_) if conns.stopping() => return,
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
            Err(e) => {
                // EMFILE/ENFILE: back off rather than spin.
                eprintln!("{ARCH}: accept failed: {e}; backing off");
                common::coroutine::sleep(ACCEPT_BACKOFF);
            }
        }
    }
}

/// One connection, as straight-line blocking code: read, handle, write, repeat.
fn serve(mut t: Tracked<TcpStream>, config: &ConnConfig) {
    let mut conn = Conn::new(config);
    // True when the last read came back short: the socket is drained, so the next read
    // waits for readiness first instead of paying a read that returns EAGAIN. A new
    // connection counts as drained: accept returns at the end of the handshake, usually
    // before the request's bytes, and `may` registered it edge-triggered, which reports
    // bytes that came before the registration too.
    let mut drained = true;
    loop {
        match conn.process() {
            Progress::Read => {
                if write_out(&mut t.stream, &mut conn, &t.entry).is_err() {
                    return;
                }
                // Publish the wait: a stop ends it between requests, the sweep past its
                // deadline (see ConnRegistry).
                if !t.entry.wait(conn.is_idle(), conn.read_deadline()) {
                    return;
                }
                // Drained and between requests: park on readiness, no EAGAIN read. Mid-
                // request, read at once instead: the client's FIN may have come with its
                // last bytes, and no further readiness event would announce it.
                let wait_first = drained && !conn.mid_request();
                let read = read_when_ready(&t.stream, &mut conn, wait_first);
                t.entry.unpark();
                match read {
                    Ok((0, _)) | Err(_) if conn.expired(Instant::now()) => {
                        conn.expire(); // a 408 if a request was under way, then close
                    }
                    Ok((0, _)) | Err(_) => return,
                    Ok((n, room)) => {
                        conn.filled(n);
                        drained = n < room;
                    }
                }
            }
            Progress::Wait(wait) => {
                if write_out(&mut t.stream, &mut conn, &t.entry).is_err() {
                    return;
                }
                // Parks only this coroutine; the others keep running.
                common::coroutine::sleep(wait);
            }
            Progress::Query(job) => {
                if write_out(&mut t.stream, &mut conn, &t.entry).is_err() {
                    return;
                }
                query(&mut conn, &job);
            }
            Progress::Close => {
                let _ = write_out(&mut t.stream, &mut conn, &t.entry);
                // Dropping the stream closes it (FIN); a lingering close half-closes first.
                if conn.should_linger() {
                    let _ = t.stream.shutdown(Shutdown::Write);
                    // may's read timeouts park only this coroutine.
                    linger::drain(&mut t.stream, TcpStream::set_read_timeout);
                }
                return;
            }
        }
    }
}

/// `/pg` the Swoole way: its hooked PDO uses `may`'s socket, which parks this coroutine at
/// each wait for the database while the scheduler runs the other connections. Out of line
/// on purpose: inlined into `serve`, the pool's frames made every connection's stack
/// deeper, by a whole touched 4 KiB page (measured: 11,699 B per idle connection at 5,000
/// inlined, 7,813 out of line, same flags); here only a connection that queries goes
/// deeper.
#[inline(never)]
fn query(conn: &mut Conn, job: &pg::Job) {
    let result = pg::pool::run_coroutine(conn.app().pg.as_ref(), job);
    conn.query_done(result);
}

/// Reads what the socket holds into a buffer the connection borrows only once bytes are
/// there (see `codec::buffers`): `may`'s own `read` would park the coroutine holding the
/// buffer, so an idle connection would keep 4 KiB besides its stack. The socket is
/// non-blocking underneath, so a plain read never blocks; on EAGAIN the buffer goes back
/// and the coroutine parks on readiness. No wake-up is lost: every readiness event sets the
/// flag `wait_io` checks, so one that comes between the read and the park ends the park at
/// once (a stale flag costs one more EAGAIN read, never a hang). Returns the bytes read and
/// the room offered (a short read means the socket is drained).
fn read_when_ready(
    stream: &TcpStream,
    conn: &mut Conn,
    wait_first: bool,
) -> io::Result<(usize, usize)> {
    if wait_first {
        wait_readable(stream);
    }
    loop {
        let buf = conn.read_buf();
        let room = buf.len();
        match stream.inner().read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                conn.unread();
                wait_readable(stream);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            read => return read.map(|n| (n, room)),
        }
    }
}

/// Parks until the socket may have bytes (or a hang-up, an error, or a wake-up from the
/// registry). `may` registers a socket for reading and writing at once, edge-triggered, so
/// a new connection's first event is usually "writable" alone — the request follows the
/// handshake — and a wake-up for it is no reason to read: that `recvfrom` found nothing on
/// almost every connection (1.95 reads a connection without keep-alive, measured). Any
/// other bit, the registry's wake-up (`WaitIoWaker`) included, ends the wait.
fn wait_readable(stream: &TcpStream) {
    while stream.wait_io() == libc::EPOLLOUT as usize {}
}

/// Writes everything produced; a peer that stops reading is cut off at the idle deadline
/// (published for the sweep: see ConnRegistry).
fn write_out(stream: &mut TcpStream, conn: &mut Conn, entry: &Registration) -> io::Result<()> {
    let out = conn.output();
    if !out.is_empty() {
        let n = out.len();
        entry.writing(Instant::now() + conn.timeouts().idle);
        let written = stream.write_all(out);
        entry.unpark();
        written?;
        conn.written(n);
    }
    Ok(())
}
