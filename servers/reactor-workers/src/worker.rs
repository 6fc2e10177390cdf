//! A worker process: it never sees a client. It connects to the master's Unix socket once
//! per reactor, then answers request frames with response frames, in one of two ways
//! (`--worker-mode`):
//!
//! - **coroutine** (the default, as Swoole runs `onRequest` since 4.4): a single-threaded
//!   coroutine scheduler (`may`); a request that waits (`/sleep`) parks in a coroutine of
//!   its own, so only that request waits and the worker takes the next frames meanwhile;
//!   `/pg` yields its coroutine at every wait for the database (Swoole's hooked PDO, a pool
//!   of `--db-pool` connections, 64 by default). A synchronous call (`/db`'s SQLite) still
//!   blocks the whole worker, as an unhooked driver blocks a Swoole worker.
//! - **sync**: one request at a time, blocking — a PHP-FPM child behind nginx, or Swoole
//!   with `enable_coroutine => false`; `/pg` blocks the worker on its one connection.
//!
//! Either way a worker takes every frame one read brought (the reactor sends a pass's
//! requests together), answers them, and sends the answers back in one write: the hop
//! costs a few system calls per batch, not per request.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::handler::{App, Handler, Later, Reply};
use common::{pg, shutdown, stats, supervisor};

use crate::ipc;

/// How a worker runs the requests it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkerMode {
    /// A coroutine per request on a single-threaded scheduler (Swoole's default).
    Coroutine,
    /// One request at a time, blocking (nginx → php-fpm).
    Sync,
}

/// Stack reserved for each request coroutine, in bytes: the handler runs on it (the
/// framework stack's first /db touches ~18 KiB; only touched pages cost memory).
const STACK_SIZE: usize = 128 * 1024;

/// Connects one link per reactor and says hello on each.
fn connect(index: usize, socket: &str, reactors: usize) -> Result<Vec<UnixStream>, String> {
    let addr = SocketAddr::from_abstract_name(socket.as_bytes()).map_err(|e| e.to_string())?;
    let mut links = Vec::with_capacity(reactors);
    for reactor in 0..reactors {
        let mut link = UnixStream::connect_addr(&addr)
            .map_err(|e| format!("cannot reach the reactors at @{socket}: {e}"))?;
        let mut hello = Vec::new();
        ipc::encode_hello(&mut hello, index as u32, reactor as u32);
        link.write_all(&hello).map_err(|e| e.to_string())?;
        links.push(link);
    }
    Ok(links)
}

/// Runs worker `index` until stopped or until the master goes away.
pub fn run(
    index: usize,
    socket: &str,
    reactors: usize,
    mode: WorkerMode,
    handler: Handler,
    app: &'static App,
    report: bool,
) -> Result<(), String> {
    shutdown::install();
    let links = connect(index, socket, reactors)?;
    match mode {
        WorkerMode::Sync => serve_sync(links, handler, app)?,
        WorkerMode::Coroutine => serve_coroutines(index, links, handler, app),
    }
    if report {
        stats::report(crate::STATS_LABEL.get().map_or(crate::ARCH, String::as_str));
    }
    Ok(())
}

/// Coroutine mode: a reader coroutine per link takes each batch of frames and answers
/// them in one write. A request that runs to completion is run right there — exactly what
/// a fresh coroutine would do with it, without making one; a request that waits gets its
/// own coroutine, which sends its answer alone when the wait is over. The main thread only
/// waits for the stop (or for the master to close the links), then for the requests still
/// waiting.
fn serve_coroutines(index: usize, links: Vec<UnixStream>, handler: Handler, app: &'static App) {
    // One scheduler thread: the worker is one process with one thread of requests, as a
    // Swoole worker is. It follows the process's CPU mask (the supervisor pins it).
    may::config()
        .set_workers(1)
        // may counts a stack in words, not bytes.
        .set_stack_size(STACK_SIZE / std::mem::size_of::<usize>())
        .set_worker_pin(false);
    // Requests run on the scheduler thread: it is this worker in `--stats`.
    stats::forget_current_thread();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let open_links = Arc::new(AtomicUsize::new(links.len()));
    for link in links {
        let (in_flight, open_links) = (in_flight.clone(), open_links.clone());
        // SAFETY: a connected Unix stream whose ownership moves to `may` here.
        let mut reader = unsafe { may::os::unix::net::UnixStream::from_raw_fd(link.into_raw_fd()) };
        let writer = match reader.try_clone() {
            Ok(w) => Arc::new(may::sync::Mutex::new(w)),
            Err(_) => {
                open_links.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
        };
        // SAFETY: the closure uses only may-aware I/O and may's sleep.
        let _ = unsafe {
            may::coroutine::spawn(move || {
                stats::set_worker_index(index);
                let mut frames = ipc::Frames::default();
                let mut batch = Vec::new();
                'link: loop {
                    match reader.read(frames.spare()) {
                        Ok(0) | Err(_) => break, // the master closed the link
                        Ok(n) => frames.filled(n),
                    }
                    loop {
                        let (token, request) = match frames.next_frame() {
                            Ok(Some(payload)) => match ipc::decode_request(payload) {
                                Ok(decoded) => decoded,
                                Err(_) => break 'link,
                            },
                            Ok(None) => break,
                            Err(_) => break 'link,
                        };
                        stats::request();
                        let Reply { response, later } = handler(&request, app);
                        let Some(later) = later.filter(|l| *l != Later::Wait(Duration::ZERO))
                        else {
                            ipc::encode_response(&mut batch, token, &response);
                            continue;
                        };
                        in_flight.fetch_add(1, Ordering::SeqCst);
                        let (writer, in_flight) = (writer.clone(), in_flight.clone());
                        may::go!(move || {
                            // Parks this request only; the worker serves the others.
                            let response = match later {
                                Later::Wait(wait) => {
                                    common::coroutine::sleep(wait);
                                    response
                                }
                                // Swoole's hooked PDO: the coroutine yields at each wait
                                // for the database.
                                Later::Query(job) => {
                                    let result = pg::pool::run_coroutine(app.pg.as_ref(), &job);
                                    job.answer(response, result)
                                }
                            };
                            let mut out = Vec::new();
                            ipc::encode_response(&mut out, token, &response);
                            if let Ok(mut link) = writer.lock() {
                                let _ = link.write_all(&out);
                            }
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                    if !batch.is_empty() {
                        if let Ok(mut link) = writer.lock() {
                            let _ = link.write_all(&batch);
                        }
                        batch.clear();
                    }
                }
                // The master closed the link: it is stopping or gone.
                open_links.fetch_sub(1, Ordering::SeqCst);
            })
        };
    }
    supervisor::ready();
    while !shutdown::requested() && open_links.load(Ordering::SeqCst) > 0 {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Requests still running finish (the supervisor's grace bounds this).
    let deadline = Instant::now() + supervisor::GRACE;
    while in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sync mode: poll the links; for each, take the frames one read brought and answer them
/// one at a time, sleeping through waits; the answers go back together, except that what
/// is ready is sent before a wait begins (a wait must not hold back answers already made).
fn serve_sync(mut links: Vec<UnixStream>, handler: Handler, app: &App) -> Result<(), String> {
    supervisor::ready();
    let mut frames: Vec<ipc::Frames> = links.iter().map(|_| ipc::Frames::default()).collect();
    let mut out = Vec::new();
    'serve: while !shutdown::requested() {
        let mut fds: Vec<libc::pollfd> = links
            .iter()
            .map(|l| libc::pollfd {
                fd: l.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: fds is a valid array of pollfd of the given length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            continue; // EINTR: the loop condition looks at the stop flag
        }
        for (i, fd) in fds.iter().enumerate() {
            if fd.revents == 0 {
                continue;
            }
            let (link, frames) = (&mut links[i], &mut frames[i]);
            match link.read(frames.spare()) {
                Ok(0) => break 'serve, // the master closed the link: it is stopping or gone
                Ok(n) => frames.filled(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.to_string()),
            }
            while let Some(payload) = frames.next_frame().map_err(|e| e.to_string())? {
                let (token, request) = ipc::decode_request(payload).map_err(|e| e.to_string())?;
                stats::request();
                let Reply { response, later } = handler(&request, app);
                let response = match later {
                    None => response,
                    Some(later) => {
                        if !out.is_empty() && link.write_all(&out).is_err() {
                            break 'serve;
                        }
                        out.clear();
                        match later {
                            // A synchronous worker waits by sleeping, as a PHP worker would.
                            Later::Wait(wait) => {
                                std::thread::sleep(wait);
                                response
                            }
                            // PHP-FPM with PDO: blocked in the kernel for each answer.
                            Later::Query(job) => {
                                let result = pg::pool::run_blocking(app.pg.as_ref(), &job);
                                job.answer(response, result)
                            }
                        }
                    }
                };
                ipc::encode_response(&mut out, token, &response);
            }
            if !out.is_empty() && link.write_all(&out).is_err() {
                break 'serve;
            }
            out.clear();
        }
    }
    Ok(())
}
