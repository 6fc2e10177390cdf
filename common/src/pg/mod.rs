//! `/pg?queries=N` — the database across a socket, as the gevent/uWSGI/Tornado post had it
//! (MySQL there, PostgreSQL 15 here): N sequential `SELECT value FROM test WHERE id >= $1
//! LIMIT 10` with random ids (1..=500, default 10), the values summed, six decimals — the
//! answer shape of `/db`. `&sleep_ms=M` (0..=10000) makes the first query wait M ms inside
//! the database (`pg_sleep`): a slow query, no CPU in the server. `&seed=S` pins the ids
//! (the suite checks the sum against the same rows read directly).
//!
//! Unlike `/db` (SQLite in the worker's own thread), the wait here is a socket's, and what
//! each architecture does while one request waits is the point: the route returns a reply
//! that carries the [`Job`] (as `/sleep` carries its wait) and every runtime runs it its
//! own way — blocked in a worker (PHP-FPM with PDO), blocked inside the event loop's
//! callback (Workerman with PDO), yielding a coroutine (Swoole's hooked PDO), awaiting a
//! task (Go's database/sql, glommio). The protocol is `postgres-protocol`'s everywhere:
//! [`wire`] for the runtimes that supply a stream, `tokio-postgres` where tokio runs.
//!
//! Failures never hang a request: a database that is down, unreachable, refusing, or a pool
//! with no connection free within `--header-timeout`, is a 503 with the reason.

pub mod pool;
pub mod wire;

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::num::NonZeroU32;
use std::str::FromStr;
use std::time::Duration;

use crate::params::{int_param, queries_param, query_param, DB_MAX_START, SLEEP_MAX_MS};
use crate::response::{Body, Response};

/// How long opening a connection may take before the request is answered 503.
pub const CONNECT_LIMIT: Duration = Duration::from_secs(2);
/// How long one answer from the database may take (the longest `pg_sleep` and some):
/// a database that stopped answering costs a request this much, never a hang.
pub const READ_LIMIT: Duration = Duration::from_secs(15);

/// One `/pg` request's work, in 8 bytes: it travels in the codec's `Progress` and in the
/// state of every connection, whose size is what an idle connection costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    pub queries: u16,
    pub sleep_ms: u16,
    /// Pins the random ids (see [`ids`]); None: fresh ones per request.
    pub seed: Option<NonZeroU32>,
}

impl Job {
    /// Parses `queries=`, `sleep_ms=` and `seed=`; a bad value is the reason for a 400.
    pub fn parse(query: Option<&str>) -> Result<Job, String> {
        // Both are bounded to fit the Job's 16 bits (500 and 10,000).
        let queries = queries_param(query)? as u16;
        let sleep_ms = int_param(query, "sleep_ms", 0..=SLEEP_MAX_MS).unwrap_or(Ok(0))? as u16;
        let seed = match query_param(query, "seed") {
            None => None,
            Some(raw) => Some(raw.parse::<NonZeroU32>().map_err(|_| {
                format!("seed must be an integer in 1..={}, not {raw:?}", u32::MAX)
            })?),
        };
        Ok(Job {
            queries,
            sleep_ms,
            seed,
        })
    }

    /// The response once the job ran: `shell` (a framework's headers, if any) with the sum
    /// as its body, or a 503 that says why the database could not answer.
    pub fn answer(&self, mut shell: Response, result: Result<f64, PgError>) -> Response {
        match result {
            Ok(sum) => {
                shell.status = 200;
                shell.body = Body::Owned(format!("{sum:.6}").into_bytes());
            }
            Err(e) => {
                shell.status = 503;
                shell.body = Body::Owned(format!("database unavailable: {e}\n").into_bytes());
            }
        }
        shell.content_type = "text/plain";
        shell
    }
}

/// The start ids a job with `seed` queries, in order (every runtime draws them the same
/// way: [`wire`] and work-stealing's tokio-postgres path both call this generator).
pub fn ids(seed: NonZeroU32, n: u16) -> Vec<u32> {
    let mut rng = fastrand::Rng::with_seed(seed.get().into());
    (0..n).map(|_| next_id(&mut rng)).collect()
}

/// The next random start id.
pub fn next_id(rng: &mut fastrand::Rng) -> u32 {
    rng.u32(1..=DB_MAX_START)
}

/// The generator of one job's ids.
pub fn rng_for(job: &Job) -> fastrand::Rng {
    match job.seed {
        Some(seed) => fastrand::Rng::with_seed(seed.get().into()),
        None => fastrand::Rng::new(),
    }
}

/// Why `/pg` could not answer (each is a 503).
#[derive(Debug)]
pub enum PgError {
    /// The server has no `--pg`.
    NotConfigured,
    /// Opening a connection failed (refused, timed out, unknown host).
    Unreachable(std::io::Error),
    /// A connection broke in the middle of a job.
    Io(std::io::Error),
    /// The database said no (`FATAL: too many clients`, `ERROR: …`).
    Server(String),
    /// Bytes that are not what the protocol allows here.
    Protocol(String),
    /// No connection came free within the wait limit (`--header-timeout`).
    PoolTimeout(Duration),
}

impl PgError {
    /// A pooled connection failing this way may just be stale (the database restarted
    /// while it sat idle): the job is retried once on a new connection.
    pub fn maybe_stale(&self) -> bool {
        matches!(self, PgError::Io(_) | PgError::Protocol(_))
            || matches!(self, PgError::Server(why) if why.starts_with("FATAL"))
    }
}

impl From<std::io::Error> for PgError {
    fn from(e: std::io::Error) -> Self {
        PgError::Io(e)
    }
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PgError::NotConfigured => f.write_str("no database configured (--pg URL)"),
            PgError::Unreachable(e) => write!(f, "cannot connect: {e}"),
            PgError::Io(e) => write!(f, "connection lost: {e}"),
            PgError::Server(why) => f.write_str(why),
            PgError::Protocol(why) => write!(f, "protocol error: {why}"),
            PgError::PoolTimeout(d) => write!(
                f,
                "no pooled connection came free within {} s",
                d.as_secs_f64()
            ),
        }
    }
}

/// Where the database is and how to log in (`--pg URL`, a libpq connection string or URL
/// as `tokio-postgres` parses it), and the pool every worker keeps to it.
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub user: String,
    pub dbname: String,
    pub password: Option<Vec<u8>>,
    /// The connection string as given (for tokio-postgres).
    pub config: String,
    /// Connections per pool (`--db-pool`).
    pub pool: usize,
    /// How long a request may wait for a pooled connection (`--header-timeout`).
    pub wait: Duration,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Target {
    /// `postgres://USER@ADDR/DB`: what the start-up line shows (never the password).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "postgres://{}@{}/{}", self.user, self.addr, self.dbname)
    }
}

impl FromStr for Target {
    type Err = String;

    /// Parses a `--pg` value; only TCP hosts (the workload is a socket's wait).
    fn from_str(s: &str) -> Result<Target, String> {
        use tokio_postgres::config::Host;
        let config: tokio_postgres::Config = s.parse().map_err(|e| format!("--pg {s:?}: {e}"))?;
        let host = match config.get_hosts().first() {
            Some(Host::Tcp(host)) => host.clone(),
            Some(_) => return Err(format!("--pg {s:?}: only TCP hosts are supported")),
            None => "127.0.0.1".to_string(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| format!("--pg {s:?}: cannot resolve {host}: {e}"))?
            .next()
            .ok_or_else(|| format!("--pg {s:?}: {host} has no address"))?;
        let user = config.get_user().unwrap_or("postgres").to_string();
        Ok(Target {
            addr,
            dbname: config.get_dbname().unwrap_or(&user).to_string(),
            user,
            password: config.get_password().map(<[u8]>::to_vec),
            config: s.to_string(),
            pool: 1,
            wait: Duration::from_secs(10),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters() {
        assert_eq!(
            Job::parse(None),
            Ok(Job {
                queries: 10,
                sleep_ms: 0,
                seed: None
            })
        );
        assert_eq!(
            Job::parse(Some("queries=3&sleep_ms=50&seed=7")),
            Ok(Job {
                queries: 3,
                sleep_ms: 50,
                seed: NonZeroU32::new(7)
            })
        );
        for bad in [
            "queries=0",
            "queries=501",
            "queries=x",
            "sleep_ms=10001",
            "sleep_ms=-1",
            "seed=x",
            "seed=0",
        ] {
            assert!(Job::parse(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn seeded_ids_repeat_and_stay_in_range() {
        let seed = |n| NonZeroU32::new(n).unwrap();
        assert_eq!(ids(seed(42), 5), ids(seed(42), 5));
        assert_ne!(ids(seed(42), 5), ids(seed(43), 5));
        assert!(ids(seed(1), 1000)
            .iter()
            .all(|&id| (1..=DB_MAX_START).contains(&id)));
        assert_eq!(std::mem::size_of::<Job>(), 8);
    }

    #[test]
    fn targets() {
        let t: Target = "postgres://bob:secret@127.0.0.1:5433/things"
            .parse()
            .unwrap();
        assert_eq!(t.addr, "127.0.0.1:5433".parse().unwrap());
        assert_eq!((t.user.as_str(), t.dbname.as_str()), ("bob", "things"));
        assert_eq!(t.password.as_deref(), Some(&b"secret"[..]));
        assert_eq!(t.to_string(), "postgres://bob@127.0.0.1:5433/things");
        let t: Target = "host=127.0.0.1 user=postgres".parse().unwrap();
        assert_eq!((t.addr.port(), t.dbname.as_str()), (5432, "postgres"));
        assert!("host=/run/postgresql"
            .parse::<Target>()
            .unwrap_err()
            .contains("only TCP"));
        assert!("postgres://[bad".parse::<Target>().is_err());
    }

    #[test]
    fn answers() {
        let job = Job::parse(None).unwrap();
        let ok = job.answer(Response::text(200, ""), Ok(1234.5));
        assert_eq!(
            (ok.status, &ok.body),
            (200, &Body::Owned(b"1234.500000".to_vec()))
        );
        let down = job.answer(
            Response::text(200, ""),
            Err(PgError::Unreachable(
                std::io::ErrorKind::ConnectionRefused.into(),
            )),
        );
        assert_eq!(down.status, 503);
        let Body::Owned(body) = down.body else {
            panic!()
        };
        assert!(String::from_utf8(body).unwrap().contains("cannot connect"));
    }
}
