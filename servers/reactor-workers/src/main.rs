//! # reactor-workers — the Swoole SWOOLE_PROCESS model (and nginx → php-fpm)
//!
//! ```text
//!   master process                                     manager process (supervisor)
//!   ┌─────────────────────────────────────────┐        forks, restarts, stops ─┐
//!   │ TCP listener (one, shared by reactors)   │                               │
//!   │ ┌ reactor 0 ─────┐   ┌ reactor R-1 ───┐  │   Unix stream socket, one     ▼
//!   │ │ epoll loop:    │   │ epoll loop:    │  │   link per reactor × worker  ┌──────────┐
//!   │ │ client conns,  │   │ client conns,  │◄─┼──────────────────────────────┤ worker 0 │
//!   │ │ shared codec,  │   │ shared codec,  │  │   request frame ──►          │ handler* │
//!   │ │ dispatch ──────┼───┼────────────────┼──┼──────────────────────────────┤ worker 1 │
//!   │ └────────────────┘   └────────────────┘  │   ◄── response frame         │   …      │
//!   │ main thread: signals, stop               │                              └──────────┘
//!   └─────────────────────────────────────────┘
//!   * --worker-mode coroutine (default): one scheduler thread, a coroutine per request;
//!     --worker-mode sync: one request at a time, blocking
//! ```
//!
//! Swoole's default mode for years (SWOOLE_PROCESS), and nginx in front of php-fpm, split
//! the work: reactors hold every client connection and do all network I/O; worker processes
//! only run the handler. Here: the master binds the port and a Unix socket, forks a
//! *manager* process (the common supervisor) that forks `--workers` workers, then starts
//! `--reactors` threads (default one per CPU, as Swoole's `reactor_num`). Each reactor
//! parses requests with the shared codec and sends each complete one as a frame to a worker
//! chosen by `--dispatch` (`round-robin` — one turn shared by all reactors, as Swoole's
//! `worker_round_id` —, `fd-modulo`, `idle`: Swoole's modes 1, 2 and 3); the worker runs the
//! handler and sends the response
//! back; the reactor writes it to the client. A pipelined connection's requests all go on
//! at once; their answers are written in request order.
//!
//! Forking the workers from a separate single-threaded manager (as Swoole does) keeps
//! `fork` away from the master's threads.
//!
//! ## What the model predicts
//! - Extra work per request: the request and the response each cross a Unix socket, and
//!   two processes wake up. Swoole pays that per request (≈ 7 system calls each); here the
//!   hop is batched — a reactor sends a worker every request it read in one pass of its loop
//!   in one write, the worker answers them in one write — so under load it costs a few
//!   system calls per batch: ≈ 1.2× an event loop's CPU per request, 2.6 syscalls instead
//!   of 2.2 (docs/results.md). A lone request on an idle server still pays the full hop.
//! - Crash isolation: a worker that dies loses only the requests it was running (answered
//!   502, not retried: they may have had effects); client connections stay open, and the
//!   manager restarts the worker.
//! - `--worker-mode coroutine` (the default: Swoole runs every `onRequest` in a coroutine
//!   since 4.4): a wait (`/sleep`) parks one request and the worker takes the next frames, so
//!   at `/sleep?ms=20` two workers serve about connections ÷ 20 ms, as Swoole does; a
//!   synchronous call (`/db`'s SQLite, an unhooked driver) still blocks the whole worker. A
//!   dying worker now costs every request it was running, each answered 502.
//! - `--worker-mode sync` (nginx → php-fpm, Swoole with `enable_coroutine => false`): a
//!   `/sleep` or `/db` occupies one worker, like a PHP-FPM child, while the reactors keep
//!   accepting and parsing — at `/sleep?ms=20`, workers ÷ 20 ms. Under `fd-modulo` a
//!   keep-alive connection always lands on the same worker: one slow request blocks every
//!   later request of the connections that share its worker (head-of-line blocking).

mod ipc;
mod reactor;
mod worker;

use std::io::{BufRead, BufReader};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant};

use clap::Parser;
use common::cli::{self, Config, Defaults, ServerArgs};
use common::listener::ListenOptions;
use common::shutdown::{self, StopChannel};
use common::supervisor::{self, Supervisor};
use mio::{Poll, Waker};
use reactor::{Dispatch, Reactor, Setup};
use worker::WorkerMode;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ARCH: &str = "reactor-workers";

/// The `arch` field of the workers' `--stats` lines: the architecture and dispatch mode.
static STATS_LABEL: OnceLock<String> = OnceLock::new();

/// Swoole SWOOLE_PROCESS / nginx→php-fpm: reactor threads own the sockets, worker
/// processes run the handler over Unix-socket IPC.
#[derive(Parser, Debug)]
#[command(name = ARCH, version, about)]
struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// Reactor threads in the master (they accept, read, parse, dispatch and write).
    /// Default: as Swoole's `reactor_num` and nginx's `worker_processes auto`, one per CPU —
    /// the --cpus count, else the CPUs this process may run on. One reactor was the whole
    /// server's limit past two cores (16-core run: fewer requests a second at 8 workers
    /// than at 2).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    reactors: Option<u32>,
    /// How a reactor picks a worker for each request.
    #[arg(long, value_enum, default_value = "round-robin")]
    dispatch: Dispatch,
    /// How a worker runs requests: a coroutine each (Swoole's default since 4.4: a wait
    /// parks one request) or one at a time, blocking (nginx → php-fpm).
    #[arg(long, value_enum, default_value = "coroutine")]
    worker_mode: WorkerMode,
}

fn main() {
    let args: Args = cli::parse();
    let defaults = match args.worker_mode {
        WorkerMode::Coroutine => Defaults::EVENT_DRIVEN,
        WorkerMode::Sync => Defaults::EVENT_DRIVEN.blocking_db(),
    };
    let config = args
        .server
        .resolve_with(defaults)
        .unwrap_or_else(|e| cli::fail(ARCH, e));
    let reactors = args.reactors.map_or_else(
        || {
            if config.cpus.is_empty() {
                cli::allowed_cpus().len()
            } else {
                config.cpus.len()
            }
        },
        |n| n as usize,
    );
    let dispatch = args.dispatch;
    let mode = clap::ValueEnum::to_possible_value(&dispatch)
        .map_or(String::new(), |v| v.get_name().to_string());
    let _ = STATS_LABEL.set(format!("{ARCH}/{mode}"));
    let tcp = ListenOptions::new(config.addr)
        .backlog(config.backlog)
        .nonblocking(true)
        .bind()
        .unwrap_or_else(|e| cli::fail(ARCH, format!("cannot listen on {}: {e}", config.addr)));
    let addr = tcp.local_addr().unwrap_or(config.addr);
    // An abstract Unix socket: no file to clean up, private to this master by its name.
    let name = format!("archzoo-{ARCH}-{}", std::process::id());
    let unix = UnixAddr::from_abstract_name(name.as_bytes())
        .and_then(|a| UnixListener::bind_addr(&a))
        .unwrap_or_else(|e| cli::fail(ARCH, format!("cannot create the worker socket: {e}")));

    // The manager is forked while this process still has one thread.
    let (manager, pids) = start_manager(&config, &name, reactors, args.worker_mode)
        .unwrap_or_else(|e| cli::fail(ARCH, format!("workers failed to start: {e}")));

    shutdown::install();
    let stopping = Arc::new(AtomicBool::new(false));
    let round = Arc::new(AtomicUsize::new(0));
    let busy: Arc<Vec<AtomicUsize>> =
        Arc::new((0..config.workers).map(|_| AtomicUsize::new(0)).collect());
    let mut polls = Vec::new();
    let mut wakers = Vec::new();
    let mut channels = Vec::new();
    for _ in 0..reactors {
        let poll = Poll::new().unwrap_or_else(|e| cli::fail(ARCH, format!("epoll: {e}")));
        let waker = Waker::new(poll.registry(), reactor::WAKE_TOKEN)
            .unwrap_or_else(|e| cli::fail(ARCH, format!("waker: {e}")));
        polls.push(poll);
        wakers.push(Arc::new(waker));
        channels.push(mpsc::channel());
    }
    let peers: Vec<_> = channels
        .iter()
        .zip(&wakers)
        .map(|((tx, _), w)| (tx.clone(), w.clone()))
        .collect();
    let mut unix = Some(unix);
    let mut threads = Vec::new();
    for (id, (poll, (_, inbox))) in polls.into_iter().zip(channels).enumerate() {
        let listener = tcp
            .try_clone()
            .unwrap_or_else(|e| cli::fail(ARCH, format!("listener: {e}")));
        let setup = Setup {
            id,
            listener,
            conn: config.conn,
            unix: if id == 0 { unix.take() } else { None },
            peers: peers.clone(),
            inbox,
            poll,
            workers: config.workers,
            dispatch,
            stopping: stopping.clone(),
            busy: busy.clone(),
            round: round.clone(),
        };
        let mut reactor =
            Reactor::new(setup).unwrap_or_else(|e| cli::fail(ARCH, format!("reactor: {e}")));
        let spawned = std::thread::Builder::new()
            .name(format!("reactor-{id}"))
            .spawn(move || {
                if let Err(e) = reactor.run() {
                    eprintln!("{ARCH}: reactor {id} failed: {e}");
                }
                // Handed back, not dropped: its worker links stay open until the manager
                // has stopped the workers, which would otherwise see them close and exit
                // early (and be restarted).
                reactor
            })
            .unwrap_or_else(|e| cli::fail(ARCH, format!("cannot start a reactor: {e}")));
        threads.push(spawned);
    }
    // The stop channel exists before the start-up line: once that is out, clients may
    // take every descriptor this process has left (the EMFILE rule does).
    let mut stop = StopChannel::new()
        .unwrap_or_else(|e| cli::fail(ARCH, format!("cannot create the stop channel: {e}")));
    cli::announce(
        ARCH,
        addr,
        &config.conn,
        format!(
            "master (pid {}) with {reactors} reactor threads, manager (pid {manager}), {} {} worker processes (pids {}), dispatch {}",
            std::process::id(),
            pids.len(),
            match args.worker_mode {
                WorkerMode::Coroutine => "coroutine",
                WorkerMode::Sync => "sync",
            },
            pids.join(", "),
            mode,
        ),
    );

    // Wait for SIGTERM/SIGINT, then drain: reactors stop accepting, close idle
    // connections and finish the requests in flight; then the manager stops the workers.
    stop.wait(None, || {});
    stopping.store(true, Ordering::SeqCst);
    for waker in &wakers {
        let _ = waker.wake();
    }
    let deadline = Instant::now() + supervisor::GRACE;
    let mut drained = Vec::new();
    for t in threads {
        while !t.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if t.is_finished() {
            drained.extend(t.join().ok());
        }
    }
    // SAFETY: signals our own child, the manager.
    unsafe { libc::kill(manager, libc::SIGTERM) };
    let mut status = 0;
    // SAFETY: waits for our own child with a valid status pointer.
    unsafe { libc::waitpid(manager, &mut status, 0) };
    drop(drained);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        1
    };
    std::process::exit(code);
}

/// Forks the manager, which runs the supervisor over the workers and reports their pids
/// on a pipe once they are all connected. Returns the manager's pid and the worker pids.
fn start_manager(
    config: &Config,
    socket: &str,
    reactors: usize,
    mode: WorkerMode,
) -> Result<(libc::pid_t, Vec<String>), String> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid two-element array for pipe to fill.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    // SAFETY: both fds were just created and are owned here.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The process is single-threaded here.
    match supervisor::fork_child().map_err(|e| e.to_string())? {
        None => {
            drop(read_end);
            std::process::exit(manager(config, socket, reactors, mode, write_end))
        }
        Some(pid) => {
            drop(write_end);
            let mut line = String::new();
            let _ = BufReader::new(std::fs::File::from(read_end)).read_line(&mut line);
            if line.trim().is_empty() {
                let mut status = 0;
                // SAFETY: waits for our own child.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                return Err("the manager exited".into());
            }
            Ok((pid, line.split_whitespace().map(str::to_string).collect()))
        }
    }
}

/// The manager process: the common supervisor over the worker processes.
fn manager(
    config: &Config,
    socket: &str,
    reactors: usize,
    mode: WorkerMode,
    report_to: OwnedFd,
) -> i32 {
    let socket = socket.to_string();
    let (stats, handler, app) = (config.stats, config.conn.handler, config.conn.app);
    let started = Supervisor::start(ARCH, config.workers, config.cpus.clone(), |index| {
        worker::run(index, &socket, reactors, mode, handler, app, stats)
    });
    let sup = match started {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{ARCH}: {e}");
            return 1;
        }
    };
    let pids: Vec<String> = sup.pids().iter().map(|p| p.to_string()).collect();
    let mut pipe = std::fs::File::from(report_to);
    let _ = std::io::Write::write_all(&mut pipe, format!("{}\n", pids.join(" ")).as_bytes());
    drop(pipe);
    // The label the workers' own lines carry (`reactor-workers/<mode>`).
    sup.run(stats.then(|| STATS_LABEL.get().map_or(ARCH, String::as_str)))
}
