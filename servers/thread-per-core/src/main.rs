//! # thread-per-core — the Glommio / Seastar model
//!
//! ```text
//!   one process
//!   ┌──────────────── CPU 0 ───────────────┐   ┌──────────────── CPU 1 ───────────────┐
//!   │ shard 0: one thread, pinned           │   │ shard 1: one thread, pinned           │
//!   │ ┌ LocalExecutor ┐  ┌ io_uring ─────┐  │   │ ┌ LocalExecutor ┐  ┌ io_uring ─────┐  │
//!   │ │ tasks: accept,│◄─┤ SQ ► kernel ► │  │   │ │ tasks: accept,│◄─┤ SQ ► kernel ► │  │
//!   │ │ conn, conn, … │  │ CQ            │  │   │ │ conn, conn, … │  │ CQ            │  │
//!   │ └───────────────┘  └───────────────┘  │   │ └───────────────┘  └───────────────┘  │
//!   │ SO_REUSEPORT listener 0, Date cache,  │   │ SO_REUSEPORT listener 1, Date cache,  │
//!   │ buffers, counters: its own            │   │ buffers, counters: its own            │
//!   │ buffer ring (512 × 4 KiB) the kernel  │   │ buffer ring (512 × 4 KiB) the kernel  │
//!   │ receives into, multishot per conn     │   │ receives into, multishot per conn     │
//!   └───────────────────────────────────────┘   └───────────────────────────────────────┘
//!                      ▲ kernel hashes each new connection to one shard's listener ▲
//! ```
//!
//! Glommio and Seastar run one executor per core, pinned, each with its own io_uring, and
//! share nothing: no locks, no atomics on the data path, no task ever changes core. Here:
//! one glommio `LocalExecutor` per worker, pinned to its CPU (`--cpus`, default the CPUs
//! this process may run on), each binding its own SO_REUSEPORT listener from inside its
//! executor; every connection is a task of the shard that accepted it, for its whole life.
//! Sockets go through glommio (io_uring); parsing and the handler are the shared codec's.
//! glommio is vendored with a small patch (`vendor/glommio/PATCHES.md`): an opening for
//! multishot receive, cooperative task-running, and preemption timers that stay armed —
//! together they took a keep-alive request from 3.45 syscalls + submissions and 12.3 µs
//! of CPU to about 1.1 and 4.6 µs.
//!
//! ## What the model predicts
//! - The best cache locality and no cross-core traffic: a connection's buffers, its task
//!   and its shard's Date cache and counters stay in one core's caches.
//! - No work stealing: a hot shard cannot shed load to a cold one; with few connections the
//!   kernel's hash can load shards unevenly — `--stats` shows it per shard.
//! - `/sleep` is a glommio timer: the shard keeps serving. `/db` is a synchronous call on
//!   the shard's only thread: every connection of that shard waits, and no other shard
//!   can take them over. `/pg` awaits glommio's sockets: a pool per shard, nothing shared.
//! - io_uring batches submissions and delivers data without a readiness round trip: each
//!   connection arms one multishot receive into a per-shard provided-buffer ring
//!   (`ring_recv`), so a keep-alive request costs its `send` and a share of the ring's
//!   `io_uring_enter`, with no submission of its own. (glommio's own receive arms a
//!   one-shot readiness poll after every short read: a submission per request.)
//! - A new connection costs no system call to accept: one multishot accept per shard
//!   (`ring_accept`) posts every connection as a completion. Its first receive is one-shot,
//!   so a connection without keep-alive costs one submission, its `send` and its `close`.
//!   (`--receive readiness` keeps glommio's own accept and receive, as stock glommio.)

use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, RawFd};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use common::cli::{self, ServerArgs};
use common::codec::{Conn, ConnConfig, Progress};
use common::listener::{self, ListenOptions, ACCEPT_BACKOFF};
use common::registry::{ConnRegistry, Tracked, SWEEP_EVERY};
use common::shutdown::{self, StopChannel};
use common::{linger, stats};
use futures_lite::AsyncWriteExt;
use glommio::net::{TcpListener, TcpStream};
use glommio::{uring_ext, LocalExecutorBuilder, Placement};
use ring_accept::RingAccept;
use ring_recv::RingRecv;

mod database;
mod ring_accept;
mod ring_recv;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ARCH: &str = "thread-per-core";

/// io_uring memory registered per shard. glommio's default (10 MiB) exceeds the usual
/// 8 MiB locked-memory limit: without CAP_IPC_LOCK registration fails (silently, or as a
/// hard `MemLockLimit` error under a lower limit). 1 MiB fits every shard under it.
const IO_MEMORY: usize = 1 << 20;

/// Glommio/Seastar: one pinned io_uring executor per core, share-nothing.
#[derive(Parser, Debug)]
#[command(name = ARCH, version, about)]
struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// How connections are accepted and receive: multishot accept, and multishot receive
    /// into a provided-buffer ring (an io_uring submission or two per connection), or
    /// glommio's own accept and receive (a readiness poll submitted after every short read
    /// — what stock glommio does, and the fallback on kernels without buffer rings).
    #[arg(long, value_enum, default_value = "multishot")]
    receive: Receive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Receive {
    Multishot,
    Readiness,
}

/// What a shard tells the main thread once it is listening.
struct Ready {
    listener_fd: RawFd,
    conns: Arc<ConnRegistry>,
    /// The shard receives with multishot (false: the kernel refused its buffer ring).
    multishot: bool,
}

fn main() {
    let args: Args = cli::parse();
    let config = args.server.resolve().unwrap_or_else(|e| cli::fail(ARCH, e));
    check_io_uring().unwrap_or_else(|e| cli::fail(ARCH, e));
    let (_reserved, addr) = listener::reserve_reuseport(config.addr)
        .unwrap_or_else(|e| cli::fail(ARCH, format!("cannot listen on {}: {e}", config.addr)));
    let cpus = if config.cpus.is_empty() {
        cli::allowed_cpus()
    } else {
        config.cpus.clone()
    };

    shutdown::install();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<Ready, String>>();
    let mut shards = Vec::new();
    for index in 0..config.workers {
        let cpu = cpus[index % cpus.len()];
        let ready_tx = ready_tx.clone();
        let backlog = config.backlog;
        let receive = args.receive;
        let conn_config = config.conn;
        let spawned = LocalExecutorBuilder::new(Placement::Fixed(cpu))
            .name(&format!("shard-{index}"))
            .io_memory(IO_MEMORY)
            .spawn(move || shard(index, addr, backlog, receive, conn_config, ready_tx));
        match spawned {
            Ok(handle) => shards.push(handle),
            Err(e) => cli::fail(
                ARCH,
                io_uring_error(format!("shard {index} on CPU {cpu}: {e}")),
            ),
        }
    }
    drop(ready_tx);
    let mut stop_handles = Vec::new();
    for _ in 0..config.workers {
        match ready_rx.recv() {
            Ok(Ok(ready)) => stop_handles.push(ready),
            Ok(Err(e)) => cli::fail(ARCH, e),
            Err(_) => {
                // A shard died before reporting: its join says why.
                let why = shards
                    .into_iter()
                    .find_map(|h| h.join().err())
                    .map_or("a shard failed to start".to_string(), |e| e.to_string());
                cli::fail(ARCH, io_uring_error(why));
            }
        }
    }
    let placement: Vec<String> = (0..config.workers)
        .map(|i| cpus[i % cpus.len()].to_string())
        .collect();
    let receive = match args.receive {
        _ if stop_handles.iter().all(|r| r.multishot) => "multishot accept and receive",
        Receive::Readiness => "readiness-poll receive",
        Receive::Multishot => "readiness-poll receive (no buffer ring on this kernel)",
    };
    // The stop channel exists before the start-up line: once that is out, clients may
    // take every descriptor this process has left (the EMFILE rule does).
    let mut stop = StopChannel::new()
        .unwrap_or_else(|e| cli::fail(ARCH, format!("cannot create the stop channel: {e}")));
    cli::announce(
        ARCH,
        addr,
        &config.conn,
        format!(
            "1 process (pid {}), {} shards pinned to CPUs {}, io_uring with {receive}, one SO_REUSEPORT socket each",
            std::process::id(),
            config.workers,
            placement.join(",")
        ),
    );

    // The main thread only waits for the stop signal and then tells every shard.
    // It also sweeps connection deadlines once a second (slowloris, idle keep-alive).
    stop.wait(Some(SWEEP_EVERY), || {
        for ready in &stop_handles {
            ready.conns.sweep(Instant::now());
        }
    });
    for ready in &stop_handles {
        ready.conns.stop(Some(ready.listener_fd));
    }
    for handle in shards {
        if let Err(e) = handle.join() {
            eprintln!("{ARCH}: a shard ended with an error: {e}");
        }
    }
    if config.stats {
        stats::report(ARCH);
    }
    std::process::exit(0);
}

/// `kernel.io_uring_disabled = 2` turns io_uring off for everyone: say so up front.
fn check_io_uring() -> Result<(), String> {
    match std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
        Ok(v) if v.trim() == "2" => Err(
            "io_uring is disabled on this machine (sysctl kernel.io_uring_disabled = 2); \
             this architecture needs it"
                .into(),
        ),
        _ => Ok(()),
    }
}

/// Explains an executor start failure: almost always io_uring being unavailable.
fn io_uring_error(detail: String) -> String {
    format!(
        "cannot start an io_uring executor ({detail}); io_uring may be unavailable here \
         (kernel too old, kernel.io_uring_disabled, a seccomp filter) or the locked-memory \
         limit (ulimit -l) too low for its rings"
    )
}

/// One shard: bind its own listener, accept, run every connection as a local task.
async fn shard(
    index: usize,
    addr: SocketAddr,
    backlog: i32,
    receive: Receive,
    config: ConnConfig,
    ready: mpsc::Sender<Result<Ready, String>>,
) {
    stats::set_worker_index(index);
    // Created inside the executor's thread, so the socket belongs to this shard only.
    let bound = ListenOptions::new(addr)
        .backlog(backlog)
        .reuse_port(true)
        .nonblocking(true)
        .bind();
    let std_listener = match bound {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot listen on {addr}: {e}")));
            return;
        }
    };
    let listener_fd = std_listener.as_raw_fd();
    // SAFETY: a listening TCP socket whose ownership moves to glommio here.
    let listener = unsafe { TcpListener::from_raw_fd(std_listener.into_raw_fd()) };
    let conns = ConnRegistry::new();
    let config = config.shared();
    let multishot = receive == Receive::Multishot && ring_recv::init();
    // The io_uring-native shard accepts with multishot accept too (same kernels, 5.19+).
    let ring_accept = multishot.then(|| RingAccept::new(listener_fd));
    if multishot {
        uring_ext::set_handler(on_completion);
    }
    let _ = ready.send(Ok(Ready {
        listener_fd,
        conns: conns.clone(),
        multishot,
    }));
    while !conns.stopping() {
        if conns.live() >= config.max_conns {
            // At --max-conns: leave new connections in the listen queue for a while.
            if let Some(ring) = &ring_accept {
                ring.pause();
            }
            glommio::timer::sleep(Duration::from_millis(10)).await;
            continue;
        }
        let accepted = match &ring_accept {
            Some(ring) if !ring.refused() => ring.accept().await.map(|fd| {
                // SAFETY: a connected TCP socket the kernel just accepted, owned here.
                unsafe { TcpStream::from_raw_fd(fd) }
            }),
            _ => listener.accept().await.map_err(std::io::Error::from),
        };
        match accepted {
            Ok(stream) => {
                let tracked = conns.track(stream);
                glommio::spawn_local(serve(tracked, config)).detach();
            }
            Err(_) if conns.stopping() => break,
            // The first answer of a kernel without multishot accept: glommio's from now on.
            Err(_) if ring_accept.as_ref().is_some_and(|r| r.refused()) => {}
            Err(e) => {
                eprintln!("{ARCH}: shard {index}: accept failed: {e}; backing off");
                glommio::timer::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
    // In-flight requests finish; parked connections were shut by the stop.
    while conns.live() > 0 {
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
}

/// The shard's handler of its own io_uring operations' completions: the accept's, and
/// every connection's receive.
fn on_completion(user_data: u64, res: i32, flags: u32) -> bool {
    if user_data & ring_accept::TAG_ACCEPT == ring_accept::TAG_ACCEPT {
        ring_accept::on_completion(res, flags)
    } else {
        ring_recv::on_completion(user_data, res, flags)
    }
}

/// One connection, for its whole life on this shard.
async fn serve(mut t: Tracked<TcpStream>, config: &'static ConnConfig) {
    let mut conn = Conn::new(config);
    let mut rx = RingRecv::new(&t.stream);
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
                if !t.entry.wait(conn.is_idle(), conn.read_deadline()) {
                    return;
                }
                // Wait without a buffer; borrow one only when bytes are there to copy.
                rx.ready(&mut t.stream).await;
                let read = rx.read(&mut t.stream, conn.read_buf()).await;
                t.entry.unpark();
                match read {
                    Ok(0) | Err(_) if conn.expired(Instant::now()) => {
                        conn.expire(); // a 408 if a request was under way, then close
                    }
                    Ok(0) | Err(_) => return,
                    Ok(n) => conn.filled(n),
                }
            }
            Progress::Wait(wait) => {
                glommio::timer::sleep(wait).await;
            }
            Progress::Query(job) => {
                // Boxed: only connections that query carry the query's future.
                let result = Box::pin(database::run(config.app.pg.as_ref(), &job)).await;
                conn.query_done(result);
            }
            Progress::Close => {
                // Dropping the stream closes it (FIN); a lingering close half-closes first.
                if conn.should_linger() {
                    let _ = t.stream.shutdown(Shutdown::Write).await;
                    drain(&mut t.stream, &mut rx).await;
                }
                return;
            }
        }
    }
}

/// Lingering close (see `common::linger`), within `linger::Drain`'s bounds.
async fn drain(stream: &mut TcpStream, rx: &mut RingRecv) {
    let mut drain = linger::Drain::start();
    // On the heap, and only while draining: a buffer declared here would be part of every
    // connection's future, idle ones included.
    let mut scratch = vec![0u8; 4096];
    while let Some(left) = drain.left() {
        let read =
            futures_lite::future::or(async { Some(rx.read(stream, &mut scratch).await) }, async {
                glommio::timer::sleep(left).await;
                None
            })
            .await;
        match read {
            Some(result) if drain.read(&result) => {}
            _ => return,
        }
    }
}
