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
use may::io::{SplitIo, SplitReader, WaitIo};

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
    common::coroutine::one_scheduler_thread(STACK_SIZE, false);
    // Requests run on the scheduler thread: it is this worker in `--stats`.
    stats::forget_current_thread();
    // The main thread sleeps in here until a stop, or until the last link closes.
    let Ok(mut stop) = shutdown::StopChannel::new() else {
        eprintln!("{}: cannot create the stop channel", crate::ARCH);
        return;
    };
    let in_flight = Arc::new(AtomicUsize::new(0));
    let open_links = Arc::new(AtomicUsize::new(links.len()));
    for link in links {
        let (in_flight, open_links) = (in_flight.clone(), open_links.clone());
        let Some((mut reader, writer)) = split(link) else {
            link_closed(&open_links);
            continue;
        };
        let writer = Arc::new(std::sync::Mutex::new(writer));
        // SAFETY: the closure uses only may-aware I/O and may's sleep.
        let _ = unsafe {
            may::coroutine::spawn(move || {
                stats::set_worker_index(index);
                let mut frames = ipc::Frames::default();
                let mut batch = Vec::new();
                'link: loop {
                    let room = frames.spare();
                    let asked = room.len();
                    let drained = match reader.read(room) {
                        Ok(0) | Err(_) => break, // the master closed the link
                        Ok(n) => {
                            frames.filled(n);
                            n < asked
                        }
                    };
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
                            send(&writer, &out);
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                    if !batch.is_empty() {
                        send(&writer, &batch);
                        batch.clear();
                    }
                    if drained {
                        // A short read emptied the link: park until the next batch's
                        // event instead of asking again (may's read would try once more
                        // and fail first). The read reset the event flag before it ran,
                        // so a batch that came since has set it and this returns at once.
                        reader.wait_io();
                    }
                }
                // The master closed the link: it is stopping or gone.
                link_closed(&open_links);
            })
        };
    }
    supervisor::ready();
    stop.wait(None, || {});
    // Requests still running finish (the supervisor's grace bounds this).
    let deadline = Instant::now() + supervisor::GRACE;
    while in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One link fewer; the last one closed means the master is stopping or gone, and the
/// worker stops as if signalled (the main thread, blocked in its stop channel, wakes).
fn link_closed(open_links: &AtomicUsize) {
    if open_links.fetch_sub(1, Ordering::SeqCst) == 1 {
        shutdown::request();
    }
}

/// A link's two ends in coroutine mode: may's reader, registered for input only, and a
/// plain writer that may does not watch.
///
/// A Unix socket wakes every epoll entry that waits for room on it each time its peer takes
/// data off it — here, every batch of answers the reactor reads. may registers a stream for
/// both directions, so the worker woke once a batch for nothing (an event, a read into the
/// empty link and, on a shared CPU, a switch between the two processes). may's `split`
/// leaves the reader interested in input alone; the write half leaves may again
/// (`into_raw_fd` deletes its registration and keeps the descriptor open) and is written
/// to directly.
fn split(link: UnixStream) -> Option<(SplitReader<may::os::unix::net::UnixStream>, UnixStream)> {
    // SAFETY: a connected Unix stream whose ownership moves to `may` here.
    let stream = unsafe { may::os::unix::net::UnixStream::from_raw_fd(link.into_raw_fd()) };
    let (reader, writer) = stream.split().ok()?;
    // SAFETY: the descriptor may duplicated for the write half, now unregistered and ours.
    let writer = unsafe { UnixStream::from_raw_fd(writer.into_inner().into_raw_fd()) };
    Some((reader, writer))
}

/// Writes all of `bytes` to the link, waiting for room in `poll(2)` when it is full.
///
/// The descriptor is non-blocking (may set it so for the reader; the writer shares the open
/// file). Waiting holds the worker's one scheduler thread — as a Swoole worker's blocking
/// send to its reactor does — and only while the reactor, which reads every link as soon as
/// it is readable, has not yet caught up. A link that fails is left to the reader, which
/// sees the master go.
fn send(writer: &std::sync::Mutex<UnixStream>, bytes: &[u8]) {
    let Ok(mut link) = writer.lock() else {
        return;
    };
    let mut done = 0;
    while done < bytes.len() {
        match link.write(&bytes[done..]) {
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut fd = libc::pollfd {
                    fd: link.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut fd, 1, -1) };
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A write bigger than the link holds waits in `poll(2)` for the reader and delivers
    /// every byte, in order — the descriptor is non-blocking, as may leaves it.
    #[test]
    fn send_waits_for_room_on_a_full_link() {
        let (writer, mut reader) = UnixStream::pair().unwrap();
        writer.set_nonblocking(true).unwrap();
        reader
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        // Far more than a Unix socket's buffer (about 200 KB by default).
        let bytes: Vec<u8> = (0..4 << 20).map(|i: u32| (i % 251) as u8).collect();
        let read = std::thread::spawn(move || {
            // Late, so the write finds the link full first.
            std::thread::sleep(Duration::from_millis(100));
            let mut got = Vec::new();
            reader.read_to_end(&mut got).map(|_| got)
        });
        let link = std::sync::Mutex::new(writer);
        send(&link, &bytes);
        drop(link); // the reader sees the end
        let got = read.join().unwrap().unwrap();
        assert_eq!(got.len(), bytes.len());
        assert!(got == bytes, "the bytes arrived changed or out of order");
    }

    /// Every epoll entry of this process, as (epoll descriptor, watched descriptor, events
    /// mask), from /proc/self/fdinfo.
    fn epoll_entries() -> Vec<(String, i32, u32)> {
        let mut entries = Vec::new();
        for fd in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
            let is_epoll = std::fs::read_link(fd.path())
                .is_ok_and(|l| l.to_string_lossy() == "anon_inode:[eventpoll]");
            if !is_epoll {
                continue;
            }
            let name = fd.file_name().to_string_lossy().into_owned();
            let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{name}")) else {
                continue; // closed since the directory was read
            };
            // `tfd:        7 events:       19 data: ...`: the mask is hexadecimal.
            for line in info.lines() {
                let mut words = line.split_whitespace();
                if words.next() == Some("tfd:") {
                    let watched = words.next().unwrap().parse().unwrap();
                    assert_eq!(words.next(), Some("events:"), "{line}");
                    let events = u32::from_str_radix(words.next().unwrap(), 16).unwrap();
                    entries.push((name.clone(), watched, events));
                }
            }
        }
        entries
    }

    /// The worker's two ends of a link: may watches the reader's descriptor for input and
    /// nothing else (a Unix socket wakes whoever waits for room on it each time its peer
    /// reads, so an `EPOLLOUT` here would wake the worker for nothing); the writer's is not
    /// watched at all; and a reader dropped while the writer lives (a parked request
    /// answering during a stop) leaves no entry behind — the vendored may deletes a
    /// registration before it closes (upstream closed first, and the duplicate kept the
    /// entry alive, pointing at freed event data).
    #[test]
    fn a_links_reader_alone_is_watched_and_leaves_no_entry_behind() {
        let (link, _master) = UnixStream::pair().unwrap();
        let (reader, writer) = split(link).unwrap();
        let (read_fd, write_fd) = (reader.as_raw_fd(), writer.as_raw_fd());
        let entries = |fd: i32| -> Vec<u32> {
            epoll_entries()
                .into_iter()
                .filter(|e| e.1 == fd)
                .map(|e| e.2)
                .collect()
        };
        let reader_masks = entries(read_fd);
        assert_eq!(reader_masks.len(), 1, "{:?}", epoll_entries());
        assert_ne!(
            reader_masks[0] & libc::EPOLLIN as u32,
            0,
            "{reader_masks:x?}"
        );
        assert_eq!(
            reader_masks[0] & libc::EPOLLOUT as u32,
            0,
            "{reader_masks:x?}"
        );
        assert_eq!(
            entries(write_fd),
            Vec::<u32>::new(),
            "{:?}",
            epoll_entries()
        );
        drop(reader);
        assert_eq!(entries(read_fd), Vec::<u32>::new(), "{:?}", epoll_entries());
        drop(writer);
    }
}
