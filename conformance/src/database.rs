//! The database behind the `/pg` rules: the cluster of `scripts/pg`, started once per test
//! process on first use and stopped by [`stop_database`] at the end (if the suite started
//! it); the rows read directly with `psql`, to check a server's sum against; and a TCP
//! relay the outage rule cuts and restores, so that "the database went away" can be
//! staged for one server without stopping the cluster every other test is using.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use variants::database::Cluster;

static CLUSTER: OnceLock<Mutex<Result<Cluster, String>>> = OnceLock::new();

/// The URL of the suite's cluster, started on first use. A machine without PostgreSQL
/// (and no way to install it) fails the `/pg` rules with the reason: `scripts/test`
/// installs it.
pub fn database_url() -> String {
    let cluster = CLUSTER.get_or_init(|| Mutex::new(Cluster::start()));
    match &*cluster.lock().unwrap_or_else(|e| e.into_inner()) {
        Ok(c) => c.url.clone(),
        Err(e) => panic!("{e} (scripts/test installs PostgreSQL and starts it)"),
    }
}

/// Stops the cluster if this process started it (the suite's main calls it last).
pub fn stop_database() {
    if let Some(cluster) = CLUSTER.get() {
        if let Ok(c) = &mut *cluster.lock().unwrap_or_else(|e| e.into_inner()) {
            c.stop();
        }
    }
}

/// The ten values `/pg`'s query reads from `start`, in its order, as `psql` prints them
/// (PostgreSQL prints a float8 exactly: the shortest text that reads back the same).
pub fn rows_from(start: u32) -> Vec<f64> {
    let sql = format!("SELECT value FROM test WHERE id >= {start} ORDER BY id LIMIT 10");
    let out = Command::new("psql")
        .args([database_url().as_str(), "-XAtc", &sql])
        .output()
        .unwrap_or_else(|e| panic!("cannot run psql: {e}"));
    assert!(
        out.status.success(),
        "psql: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap_or_else(|_| panic!("psql printed {l:?}")))
        .collect()
}

/// A TCP relay to the cluster on a port of its own: [`Relay::cut`] closes its listener
/// and every relayed connection (to a server, the database is down: connections reset,
/// new ones refused), [`Relay::restore`] listens again on the same port.
pub struct Relay {
    addr: SocketAddr,
    upstream: SocketAddr,
    live: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    pub fn start() -> Relay {
        let target: common::pg::Target = database_url().parse().expect("the cluster's URL");
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let relay = Relay {
            addr,
            upstream: target.addr,
            live: Arc::new(AtomicBool::new(false)),
            conns: Arc::new(Mutex::new(Vec::new())),
        };
        relay.serve(listener);
        relay
    }

    /// The `--pg` URL that goes through the relay.
    pub fn url(&self) -> String {
        format!("postgres://postgres@{}/archzoo", self.addr)
    }

    /// The database goes away: no new connection, and the open ones are cut.
    pub fn cut(&self) {
        self.live.store(false, Ordering::SeqCst);
        // Wake the accept loop so that it drops the listener.
        let _ = TcpStream::connect(self.addr);
        for c in self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = c.shutdown(Shutdown::Both);
        }
        // Until the listener is closed, a connect could still be accepted.
        for _ in 0..100 {
            if TcpStream::connect(self.addr).is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
        panic!("the relay's listener did not close");
    }

    /// The database is back, on the same address.
    pub fn restore(&self) {
        let listener = TcpListener::bind(self.addr).expect("the relay's port again");
        self.serve(listener);
    }

    fn serve(&self, listener: TcpListener) {
        self.live.store(true, Ordering::SeqCst);
        let (live, conns, upstream) = (self.live.clone(), self.conns.clone(), self.upstream);
        thread::spawn(move || {
            for client in listener.incoming() {
                if !live.load(Ordering::SeqCst) {
                    return; // the listener drops here: connections are refused
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let mut kept = conns.lock().unwrap_or_else(|e| e.into_inner());
                if let (Ok(a), Ok(b)) = (client.try_clone(), server.try_clone()) {
                    kept.push(a);
                    kept.push(b);
                }
                pump(&client, &server);
                pump(&server, &client);
            }
        });
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if self.live.load(Ordering::SeqCst) {
            self.cut();
        }
    }
}

/// Copies `from` into `to` on a thread of its own until either side closes.
fn pump(from: &TcpStream, to: &TcpStream) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
