//! # work-stealing — the Go net/http model on tokio
//!
//! ```text
//!                 one listening socket
//!   clients ──► kernel accept queue ──► accept task ──spawn──► one task per connection
//!                                                                  │
//!   one process, `--workers` N worker threads (GOMAXPROCS)         ▼
//!   ┌──────────────────┐  ┌──────────────────┐       ┌──────────────────┐
//!   │ worker 0         │  │ worker 1         │  …    │ worker N-1       │
//!   │ local run queue  │◄─┤ idle? steal half ├──────►│ local run queue  │
//!   │ [t][t][t]        │  │ of a busy queue  │       │ [t]              │
//!   └────────┬─────────┘  └────────┬─────────┘       └────────┬─────────┘
//!            └─────────── shared epoll (I/O driver), global inject queue ┘
//! ```
//!
//! Go's net/http runs one accept loop and one goroutine per connection on an M:N scheduler
//! whose N is GOMAXPROCS; an idle P steals work from a busy one. Here: a tokio multi-thread
//! runtime with `worker_threads = --workers`, one accept task, one spawned task per
//! connection. A task runs on whichever worker polls it; when its socket becomes readable
//! it is woken onto a run queue, and an idle worker steals half of a busy worker's queue.
//!
//! `--codec shared` (default) drives the shared `common` codec over tokio's non-blocking
//! sockets, so this row differs from the others *only by its scheduler*. `--codec hyper`
//! serves the same handler through hyper 1.x, the full-featured stack, as net/http is for
//! Go: the difference between the two rows is what a complete HTTP library costs.
//!
//! ## What the model predicts
//! - Connections spread over all threads even when load is uneven: a busy thread's
//!   backlog is stolen, so no core idles while another has work (unlike the
//!   share-nothing and SO_REUSEPORT models, where a connection never moves).
//! - The price: cross-thread wake-ups (a socket readable on one thread's epoll wakes a task
//!   queued on another), atomic reference counts on every task handle and waker, and cache
//!   misses when a task and its buffers move between cores.
//! - `/sleep` is a tokio timer. `/db` is synchronous: the handler runs it through
//!   `block_in_place`, which hands this worker's run queue to another thread before
//!   blocking — what Go does for a goroutine stuck in a system call (the P is handed off).
//!   Chosen over `spawn_blocking` because the handler is synchronous and shared by every
//!   server: blocking in place keeps it so, and the hand-off keeps other connections moving.
//!   `/pg` runs `tokio-postgres` (Go's `database/sql`): the task awaits each answer, one
//!   pool of `--db-pool` connections for the process, as one `sql.DB` (see `database`).
//! - tokio reads until a short read and only then waits for readiness, so a keep-alive
//!   request costs one `read` and one `write`, plus a share of an `epoll_wait`.

mod database;
mod hyper_codec;
mod sole;

use std::io;
use std::net::TcpListener as StdListener;
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use common::cli::{self, Config, ServerArgs};
use common::codec::{Conn, ConnConfig, Progress};
use common::handler::App;
use common::listener::{self, ListenOptions, ACCEPT_BACKOFF};
use common::registry::{ConnRegistry, Tracked};
use common::{linger, stats, supervisor};
use sole::Sole;
use std::sync::Arc;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{watch, OwnedSemaphorePermit};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ARCH: &str = "work-stealing";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Codec {
    /// The shared archzoo codec (the same bytes as every other server).
    Shared,
    /// hyper 1.x http1, the full-featured stack.
    Hyper,
}

/// Go net/http model: one listener, a task per connection, a work-stealing M:N scheduler.
#[derive(Parser, Debug)]
#[command(name = ARCH, version, about)]
struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// HTTP implementation driving each connection.
    #[arg(long, value_enum, default_value = "shared")]
    codec: Codec,
}

fn main() {
    let args: Args = cli::parse();
    let mut config = args.server.resolve().unwrap_or_else(|e| cli::fail(ARCH, e));
    let std_listener = ListenOptions::new(config.addr)
        .backlog(config.backlog)
        .nonblocking(true)
        .bind()
        .unwrap_or_else(|e| cli::fail(ARCH, format!("cannot listen on {}: {e}", config.addr)));
    // A synchronous handler (the /db query) hands this worker's queue to another thread
    // before blocking, as Go's scheduler hands off the P of a goroutine stuck in a system
    // call; the other connections of this worker keep moving.
    config.conn.app = App {
        blocking: Some(|f| tokio::task::block_in_place(f)),
        ..config.conn.app.clone()
    }
    .leak();
    let runtime = build_runtime(&config)
        .unwrap_or_else(|e| cli::fail(ARCH, format!("cannot start the runtime: {e}")));
    let code = runtime.block_on(run(std_listener, &config, args.codec));
    // Connections still open after the grace period are dropped with the runtime.
    runtime.shutdown_timeout(Duration::from_millis(100));
    if config.stats {
        stats::report(ARCH);
    }
    std::process::exit(code);
}

/// The multi-thread runtime: `--workers` threads, each registered as a stats worker and
/// pinned to its CPU when `--cpus` was given.
fn build_runtime(config: &Config) -> io::Result<tokio::runtime::Runtime> {
    let started = std::sync::Arc::new(AtomicUsize::new(0));
    let cpus = config.cpus.clone();
    let workers = config.workers;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("ws-worker")
        .on_thread_start(move || {
            // Worker threads start when the runtime is built, before any blocking-pool
            // thread could, so they take indices 0..N.
            let index = started.fetch_add(1, Ordering::Relaxed);
            stats::set_worker_index(index);
            if index < workers && !cpus.is_empty() {
                let cpu = cpus[index % cpus.len()];
                if let Err(e) = cli::pin_current_thread(cpu) {
                    eprintln!("{ARCH}: worker {index}: cannot pin to CPU {cpu}: {e}");
                }
            }
        })
        .enable_all()
        .build()
}

async fn run(std_listener: StdListener, config: &Config, codec: Codec) -> i32 {
    let addr = std_listener.local_addr().unwrap_or(config.addr);
    // SAFETY: a std listener owns its descriptor, keeps it open until it drops (with the
    // AsyncFd that owns it) and always returns the same one from `as_raw_fd`.
    let registered = unsafe { AsyncFd::register_with_interest(std_listener, Interest::READABLE) };
    let listener = match registered {
        Ok(l) => l,
        Err(e) => cli::fail(ARCH, format!("cannot register the listener: {e}")),
    };
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => cli::fail(ARCH, "cannot install signal handlers"),
    };
    // The accept task and every hyper connection hold a receiver: `changed()` tells it to
    // stop, and the sender's `closed()` resolves once the last of them is gone.
    let (stop_tx, stop_rx) = watch::channel(false);
    // The shared codec's connections, published so that the sweep can cut off a peer past
    // its deadline (slowloris → 408, idle keep-alive → close) once a second instead of a
    // timer armed per read, and so that a stop ends the idle ones (`ConnRegistry::stop`)
    // without every connection waiting on the watch above as well: a waiter registered
    // and removed under the watch's lock at every wait between requests, and a receiver
    // cloned and dropped a connection.
    let conns = ConnRegistry::new();
    let sweeper = conns.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            sweeper.sweep(std::time::Instant::now());
        }
    });
    let registry = conns.clone();
    let accept = tokio::spawn(accept_loop(listener, stop_rx, codec, config.conn, conns));
    cli::announce(
        ARCH,
        addr,
        &config.conn,
        format!(
            "1 process (pid {}), {} worker threads, work-stealing scheduler, codec {}",
            std::process::id(),
            config.workers,
            match codec {
                Codec::Shared => "shared",
                Codec::Hyper => "hyper",
            }
        ),
    );
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    let _ = stop_tx.send(true);
    let _ = accept.await;
    // Idle shared-codec connections: their read side shut, their reads end now.
    registry.stop(None);
    // In-flight requests finish; idle keep-alive connections close at once.
    let drained = async {
        stop_tx.closed().await;
        while registry.live() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    if tokio::time::timeout(supervisor::GRACE, drained)
        .await
        .is_err()
    {
        eprintln!(
            "{ARCH}: connections still busy after {:?}; dropping them",
            supervisor::GRACE
        );
    }
    0
}

/// The accept task: one task per connection, like `go c.serve(ctx)` in net/http, until the
/// stop. One wait for the stop covers the task's whole life: a `changed()` raced against
/// each permit and each accept registered a waiter under the watch's lock and removed it
/// again, four times a connection.
async fn accept_loop(
    listener: AsyncFd<StdListener>,
    mut stop: watch::Receiver<bool>,
    codec: Codec,
    config: ConnConfig,
    conns: Arc<ConnRegistry>,
) {
    let hyper_stop = stop.clone();
    tokio::select! {
        biased;
        _ = stop.changed() => {}
        _ = accept_forever(&listener, hyper_stop, codec, config.shared(), &conns) => {}
    }
}

/// Accepts and spawns until dropped by [`accept_loop`]'s stop.
///
/// One wake-up of the listener is one batch: the accept queue is asked how many it holds
/// ([`listener::queued`]) *after* the readiness is taken, exactly that many are accepted,
/// and the readiness is cleared with the guard taken before the question — so a
/// connection that came after the question (its edge bumped tokio's readiness tick) still
/// wakes the loop, and none is left in the queue. What that saves: an `accept4` into an
/// empty queue, which Linux pays in full (it builds and tears down a whole socket before
/// it looks), once a wake-up — 0.3 to 0.7 times a connection without keep-alive.
async fn accept_forever(
    listener: &AsyncFd<StdListener>,
    stop: watch::Receiver<bool>,
    codec: Codec,
    config: &'static ConnConfig,
    conns: &Arc<ConnRegistry>,
) {
    // --max-conns, as mini-redis does it: a permit per connection, taken before accepting,
    // so at the limit new connections wait in the listen queue.
    let permits = Arc::new(tokio::sync::Semaphore::new(config.max_conns));
    loop {
        let Ok(mut ready) = listener.readable().await else {
            return;
        };
        // Where the kernel cannot say, accept until the queue is empty, as before.
        let mut left = listener::queued(listener.get_ref()).unwrap_or(usize::MAX);
        while left > 0 {
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let stream = match ready.try_io(|l| accept4(l.get_ref())) {
                // Empty after all (a connection reset in the queue is dropped by the
                // kernel): `try_io` cleared the readiness with this guard.
                Err(_would_block) => break,
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(accepted) => {
                    left -= 1;
                    accepted.and_then(TcpStream::from_std)
                }
            };
            match stream {
                Ok(stream) => {
                    // SAFETY: `accept4` made the descriptor a moment ago, close-on-exec;
                    // this process never forks and nothing here duplicates a connection's
                    // descriptor.
                    let stream = unsafe { Sole::new(stream) };
                    spawn(stream, permit, codec, &stop, config, conns);
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                Err(e) => {
                    // EMFILE/ENFILE: back off rather than spin on a full descriptor table;
                    // the readiness stays set, so the queue is asked again after.
                    eprintln!("{ARCH}: accept failed: {e}; backing off");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    break;
                }
            }
        }
        if left == 0 {
            ready.clear_ready();
        }
    }
}

/// One task a connection, like `go c.serve(ctx)`; it holds its `--max-conns` permit to the
/// end.
fn spawn(
    stream: Sole,
    permit: OwnedSemaphorePermit,
    codec: Codec,
    stop: &watch::Receiver<bool>,
    config: &'static ConnConfig,
    conns: &Arc<ConnRegistry>,
) {
    match codec {
        Codec::Shared => {
            let tracked = conns.track(stream);
            tokio::spawn(async move {
                serve(tracked, config).await;
                drop(permit);
            })
        }
        Codec::Hyper => {
            let stop = stop.clone();
            tokio::spawn(async move {
                hyper_codec::serve(stream, stop, config).await;
                drop(permit);
            })
        }
    };
}

/// `accept4` on a non-blocking listener: a non-blocking, close-on-exec socket, no `ioctl`,
/// then registered by `TcpStream::from_std` ([`accept_forever`]). tokio's own `accept` marks a new
/// socket readable before any event (`Registration::assume_ready`), betting that the
/// request is already there; without keep-alive it mostly is not yet (accept returns at
/// the end of the handshake, the request follows), and the bet cost a `recvfrom` that
/// found nothing on almost every connection (1.96 reads a connection, measured).
/// Registered plainly, the first read waits for the event that says bytes came (the
/// registration reports bytes already queued, edge-triggered, at the next poll). Clearing
/// tokio's assumed readiness after its accept instead is not safe: with more than one
/// worker the driver can process the socket's real first event before the clear, and the
/// clear would swallow it (connections hung in the conformance suite).
///
/// [`accept_forever`] makes the stream [`Sole`]: it closes without tokio's `EPOLL_CTL_DEL`
/// (see `sole`).
fn accept4(listener: &StdListener) -> io::Result<std::net::TcpStream> {
    // SAFETY: no address is asked for (null pointers are allowed); the descriptor returned
    // is new and owned by nothing else, so the stream below takes sole ownership of it.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: see above.
    Ok(unsafe { std::net::TcpStream::from_raw_fd(fd) })
}

/// One connection with the shared codec: read, process, write, until close or stop (the
/// registry's: between requests a stop shuts the read side and the read ends).
async fn serve(mut t: Tracked<Sole>, config: &ConnConfig) {
    let mut conn = Conn::new(config);
    loop {
        let progress = conn.process();
        // What the codec produced goes out first, whatever comes next. A failed write ends
        // the connection at once, except on the close path, which still shuts down and
        // lingers as it would have.
        let flushed = t
            .entry
            .flush(&mut conn, async |out| t.stream.write_all(out).await)
            .await;
        if flushed.is_err() && progress != Progress::Close {
            return;
        }
        match progress {
            Progress::Read => {
                // Publish the wait: a stop ends it between requests (false: already
                // stopping, close now), the sweep past its deadline.
                if !t.entry.wait(conn.is_idle(), conn.read_deadline()) {
                    return;
                }
                let read = read_when_ready(&t.stream, &mut conn).await;
                t.entry.unpark();
                match read {
                    Ok(0) | Err(_) if conn.expired(std::time::Instant::now()) => {
                        conn.expire(); // a 408 if a request was under way, then close
                    }
                    Ok(0) | Err(_) => return,
                    Ok(n) => conn.filled(n),
                }
            }
            Progress::Wait(wait) => {
                // Boxed, as the drain below: a timer inline would be part of every
                // connection's future, idle ones included, for the few that wait.
                Box::pin(tokio::time::sleep(wait)).await;
            }
            Progress::Query(job) => {
                // Boxed too: only connections that query pay for the query's future.
                let result = Box::pin(database::run(config.app.pg.as_ref(), &job)).await;
                conn.query_done(result);
            }
            Progress::Close => {
                // Dropping the stream closes it (FIN); a lingering close half-closes first.
                if conn.should_linger() {
                    let _ = t.stream.shutdown().await;
                    Box::pin(drain(&mut t.stream)).await;
                }
                return;
            }
        }
    }
}

/// Waits for bytes without holding a buffer, then reads them into one the connection
/// borrows only now: an idle connection's task is its state machine and the socket, not a
/// 4 KiB buffer parked across the wait (see `codec::buffers`). Polled by hand rather than
/// through `readable()`, whose waiter would add 150 bytes to every connection's future.
///
/// A short read means the socket is drained, so it clears the readiness as tokio's own
/// `read` does (through `try_io`, which clears it when its closure says `WouldBlock`):
/// the next wait then parks at once instead of paying a `recvfrom` that finds nothing —
/// measured: 2 `recvfrom` per keep-alive request without this, 1 with it.
async fn read_when_ready(stream: &TcpStream, conn: &mut Conn) -> io::Result<usize> {
    std::future::poll_fn(|cx| loop {
        if let Err(e) = std::task::ready!(stream.poll_read_ready(cx)) {
            return Poll::Ready(Err(e));
        }
        let mut short = 0;
        let read = stream.try_io(Interest::READABLE, || {
            let buf = conn.read_buf();
            let room = buf.len();
            // SAFETY: recv writes at most `room` bytes into `buf`, borrowed for the call.
            let n = unsafe { libc::recv(stream.as_raw_fd(), buf.as_mut_ptr().cast(), room, 0) };
            let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
            if n > 0 && n < room {
                short = n;
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok(n)
        });
        match read {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && short > 0 => {
                return Poll::Ready(Ok(short));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => conn.unread(),
            read => return Poll::Ready(read),
        }
    })
    .await
}

/// Lingering close (see `common::linger`), within `linger::Drain`'s bounds.
async fn drain(stream: &mut TcpStream) {
    let mut drain = linger::Drain::start();
    // On the heap, and only while draining: a buffer declared here would be part of every
    // connection's future, idle ones included.
    let mut scratch = vec![0u8; 4096];
    while let Some(left) = drain.left() {
        match tokio::time::timeout(left, stream.read(&mut scratch)).await {
            Ok(result) if drain.read(&result) => {}
            _ => return,
        }
    }
}
