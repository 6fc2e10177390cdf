//! A worker process: it never sees a client. It connects to the master's Unix socket once
//! per reactor, then answers request frames with response frames, one at a time, blocking
//! — like a PHP-FPM child behind nginx, or a synchronous Swoole worker.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};

use common::handler::{App, Handler, Reply};
use common::{shutdown, stats, supervisor};

use crate::ipc;

/// Runs worker `index` until stopped or until the master goes away.
pub fn run(
    index: usize,
    socket: &str,
    reactors: usize,
    handler: Handler,
    app: &App,
    report: bool,
) -> Result<(), String> {
    shutdown::install();
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
    supervisor::ready();
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
            let link = &mut links[i];
            let Some(payload) = ipc::read_frame(link).map_err(|e| e.to_string())? else {
                break 'serve; // the master closed the link: it is stopping or gone
            };
            let (token, request) = ipc::decode_request(&payload).map_err(|e| e.to_string())?;
            stats::request();
            let Reply { response, wait } = handler(&request, app);
            if let Some(wait) = wait {
                // A synchronous worker waits by sleeping, as a PHP worker would.
                std::thread::sleep(wait);
            }
            out.clear();
            ipc::encode_response(&mut out, token, &response);
            if link.write_all(&out).is_err() {
                break 'serve;
            }
        }
    }
    if report {
        stats::report(crate::STATS_LABEL.get().map_or(crate::ARCH, String::as_str));
    }
    Ok(())
}
