//! The command line every server shares, CPU lists and affinity, and how a server speaks
//! on stderr: one start-up line, one line per error.

use std::fmt::Display;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

use std::time::Duration;

use clap::error::ErrorKind;
use clap::Parser;

use crate::codec::{ConnConfig, Timeouts};
use crate::handler::App;

/// Flags shared by every server; each server flattens this into its own `Args`.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Port to listen on (0 picks a free one; the start-up line names it).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Workers (processes, threads or shards, as the architecture has them).
    /// Default: the --cpus count, else the number of CPUs this process may run on.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub workers: Option<u32>,
    /// Pin worker i to the i-th CPU of this list (e.g. 0,2-3); wraps around.
    #[arg(long)]
    pub cpus: Option<CpuList>,
    /// Listen backlog.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(i32).range(1..))]
    pub backlog: i32,
    /// On stop, each worker prints one JSON line to stderr: index, pid, tid, requests,
    /// connections.
    #[arg(long)]
    pub stats: bool,
    /// Handler stack: the raw routes, or a framework layer over them.
    #[arg(long, value_enum, default_value = "raw")]
    pub stack: crate::stack::Stack,
    /// SQLite file for /db: 1,000,000 rows, built (with a progress line) if it is missing.
    #[arg(long, default_value = "data/archzoo.db")]
    pub db: PathBuf,
    /// Seconds a client may take to send a request head (and between body reads): then 408
    /// and close.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub header_timeout: u64,
    /// Seconds a keep-alive connection may stay idle between requests (Apache's
    /// KeepAliveTimeout, nginx's keepalive_timeout); also how long a client may refuse to
    /// read a response. Default: as the modelled system has it (the start-up line says).
    #[arg(long, alias = "idle-timeout", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub keepalive_timeout: Option<u64>,
    /// Requests served on one connection before its response says `Connection: close` and
    /// it closes (Apache's MaxKeepAliveRequests); 0: unlimited. Default: as the modelled
    /// system has it.
    #[arg(long)]
    pub keepalive_requests: Option<u32>,
    /// PostgreSQL database of /pg: a URL or libpq connection string
    /// (postgres://USER:PASSWORD@HOST:PORT/DB, the password optional); without it /pg
    /// answers 503.
    #[arg(long, value_name = "URL")]
    pub pg: Option<String>,
    /// Connections in each /pg pool (per worker; per process for work-stealing). Default:
    /// as the modelled system sizes it — 1 where a worker blocks on the database (PHP's
    /// persistent PDO), 64 where requests wait concurrently (Swoole's PDOPool).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub db_pool: Option<u32>,
    /// Connections per worker (per reactor in reactor-workers): at the limit a worker
    /// stops accepting and leaves new connections in the listen queue.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_conns: u64,
    /// µs of CPU every request costs in the handler, after it is parsed and before the
    /// answer, where the model runs its handler: an original's per-request cost given to
    /// its model (arithmetic until the time has passed; no system call per request).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub work_us: u32,
}

/// Keep-alive limits as a modelled system sets them by default; the flags override them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepAlive {
    /// Requests per connection; 0: unlimited.
    pub requests: u32,
    /// Idle seconds between requests.
    pub timeout_s: u64,
}

impl KeepAlive {
    /// The event-driven servers (nginx without a limit, Workerman, Swoole, Go): a
    /// connection costs them little while idle, so they keep it for as many requests as
    /// the client sends, and close it after a minute of silence.
    pub const EVENT_DRIVEN: KeepAlive = KeepAlive {
        requests: 0,
        timeout_s: 60,
    };
    /// Apache's prefork MPM defaults (MaxKeepAliveRequests 100, KeepAliveTimeout 5): a
    /// process serves one connection at a time, so one client must not hold it for long.
    pub const APACHE_PREFORK: KeepAlive = KeepAlive {
        requests: 100,
        timeout_s: 5,
    };
}

/// What a modelled system sets by default and the flags override.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    pub keepalive: KeepAlive,
    /// Connections per `/pg` pool.
    pub db_pool: u32,
}

impl Defaults {
    /// Event-driven servers whose requests wait for the database concurrently (coroutines,
    /// tasks): a pool of 64 per worker, Swoole's `PDOPool` default (Go's database/sql has
    /// no limit; PostgreSQL's default max_connections of 100 would be one).
    pub const EVENT_DRIVEN: Defaults = Defaults {
        keepalive: KeepAlive::EVENT_DRIVEN,
        db_pool: 64,
    };
    /// Apache prefork under PHP: one persistent connection per process.
    pub const APACHE_PREFORK: Defaults = Defaults {
        keepalive: KeepAlive::APACHE_PREFORK,
        db_pool: 1,
    };

    /// These defaults for a worker that blocks on the database (Workerman's or PHP-FPM's
    /// PDO): it can only ever use one connection at a time.
    pub const fn blocking_db(self) -> Defaults {
        Defaults { db_pool: 1, ..self }
    }
}

/// The shared flags, checked and with defaults filled in.
#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    pub workers: usize,
    /// CPUs to pin workers to, in order; empty when `--cpus` was not given.
    pub cpus: Vec<usize>,
    pub backlog: i32,
    pub stats: bool,
    /// What every connection is built from: handler, timeouts, limits. Servers pass it
    /// down to their workers and from there to each connection.
    pub conn: ConnConfig,
}

impl Config {
    /// The CPU worker `index` is pinned to, if pinning was asked for.
    pub fn cpu_for(&self, index: usize) -> Option<usize> {
        (!self.cpus.is_empty()).then(|| self.cpus[index % self.cpus.len()])
    }
}

impl ServerArgs {
    /// Checks the flags against this machine, fills in defaults, raises the open-file
    /// limit and builds the `/db` database if it is missing; a problem is one line. Call it
    /// before any worker is forked or spawned.
    pub fn resolve(&self) -> Result<Config, String> {
        self.resolve_with(Defaults::EVENT_DRIVEN)
    }

    /// [`ServerArgs::resolve`] for a model whose defaults differ.
    pub fn resolve_with(&self, defaults: Defaults) -> Result<Config, String> {
        let config = self.check_with(defaults)?;
        raise_fd_limit();
        crate::workloads::prepare_db(&self.db)?;
        Ok(config)
    }

    /// The flags checked and completed, without side effects.
    pub fn check(&self) -> Result<Config, String> {
        self.check_with(Defaults::EVENT_DRIVEN)
    }

    /// [`ServerArgs::check`] with a model's defaults.
    pub fn check_with(&self, defaults: Defaults) -> Result<Config, String> {
        let keepalive = defaults.keepalive;
        let pg = match &self.pg {
            Some(url) => {
                let mut target: crate::pg::Target = url.parse()?;
                target.pool = self.db_pool.unwrap_or(defaults.db_pool) as usize;
                target.wait = Duration::from_secs(self.header_timeout);
                Some(target)
            }
            None => None,
        };
        let allowed = allowed_cpus();
        let cpus = match &self.cpus {
            Some(list) => {
                if let Some(bad) = list.0.iter().find(|c| !allowed.contains(c)) {
                    return Err(format!(
                        "--cpus: CPU {bad} is not available to this process (allowed: {})",
                        CpuList(allowed)
                    ));
                }
                list.0.clone()
            }
            None => Vec::new(),
        };
        let workers = match self.workers {
            Some(n) => n as usize,
            None if !cpus.is_empty() => cpus.len(),
            None => allowed.len().max(1),
        };
        Ok(Config {
            addr: SocketAddr::new(self.bind, self.port),
            workers,
            cpus,
            backlog: self.backlog,
            stats: self.stats,
            conn: ConnConfig {
                handler: self.stack.handler(),
                app: App {
                    db: Some(self.db.clone()),
                    pg,
                    blocking: None,
                    work: Duration::from_micros(u64::from(self.work_us)),
                }
                .leak(),
                capture_headers: self.stack.reads_headers(),
                timeouts: Timeouts {
                    header: Duration::from_secs(self.header_timeout),
                    idle: Duration::from_secs(
                        self.keepalive_timeout.unwrap_or(keepalive.timeout_s),
                    ),
                },
                max_conns: self.max_conns as usize,
                keepalive_requests: self.keepalive_requests.unwrap_or(keepalive.requests),
                yield_keep_alive: None,
            },
        })
    }
}

/// Raises the open-file limit to its hard limit: every connection is a descriptor, and
/// the usual soft limit (1024) is far below what an event-driven server can hold.
pub fn raise_fd_limit() {
    if let Ok(limit) = fd_limit() {
        let _ = raise_fd_limit_to(limit.rlim_max);
    }
}

/// Raises this process's open-file limit to at least `need` (the hard limit too where it
/// may, as a privileged process); otherwise the limit that stops it, in one line. Child
/// processes inherit it (`bench --idle-conns` raises it for itself and its servers).
pub fn raise_fd_limit_to(need: u64) -> Result<(), String> {
    let limit = fd_limit()?;
    if limit.rlim_cur >= need {
        return Ok(());
    }
    let hard = limit.rlim_max;
    let raised = libc::rlimit {
        rlim_cur: need,
        rlim_max: hard.max(need),
    };
    // SAFETY: setrlimit with a valid rlimit struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        return Ok(());
    }
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open").unwrap_or_default();
    Err(format!(
        "{need} descriptors needed, RLIMIT_NOFILE hard limit is {hard} and cannot be \
         raised ({}; fs.nr_open {}): run as root or raise `ulimit -Hn`",
        std::io::Error::last_os_error(),
        nr_open.trim()
    ))
}

/// The current RLIMIT_NOFILE.
/// The most descriptors one process may open here: the hard `RLIMIT_NOFILE`, which only
/// a process with `CAP_SYS_RESOURCE` may raise (`bench --idle-conns` spreads connections
/// over processes and client hosts to stay under it).
pub fn fd_hard_limit() -> Result<u64, String> {
    fd_limit().map(|l| l.rlim_max)
}

fn fd_limit() -> Result<libc::rlimit, String> {
    // SAFETY: getrlimit with a valid rlimit struct to fill.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(format!(
                "cannot read RLIMIT_NOFILE: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(limit)
    }
}

/// A list of CPU numbers: `0,2,4-7`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl FromStr for CpuList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut cpus = Vec::new();
        for part in s.split(',').map(str::trim) {
            let bad = || format!("'{part}' is not a CPU number or range (e.g. 0,2-3)");
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b): (usize, usize) =
                        (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                    if a > b {
                        return Err(bad());
                    }
                    cpus.extend(a..=b);
                }
                None => cpus.push(part.parse().map_err(|_| bad())?),
            }
        }
        if cpus.is_empty() || cpus.len() > libc::CPU_SETSIZE as usize {
            return Err("empty or oversized CPU list".into());
        }
        Ok(CpuList(cpus))
    }
}

impl Display for CpuList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(usize::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

/// The CPUs the calling thread may run on (its affinity mask, which `taskset` sets).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the size passed matches it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins the calling thread (and, before any other thread exists, its whole process and
/// every thread it later starts) to one CPU.
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    // SAFETY: the set is initialised by CPU_ZERO/CPU_SET and its size passed with it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Parses the command line. `--help`/`--version` print and exit 0; any other problem is
/// one line on stderr and exit status 2 — a person or a script sees what was wrong without
/// a usage dump or a backtrace.
pub fn parse<T: Parser>() -> T {
    match T::try_parse() {
        Ok(args) => args,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) => {
            let rendered = e.render().to_string();
            let first = rendered
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid arguments");
            let name = T::command().get_name().to_string();
            eprintln!(
                "{name}: {} (see --help)",
                first.trim_start_matches("error: ")
            );
            std::process::exit(2)
        }
    }
}

/// Reports a fatal start-up problem (busy port, bad CPU list) on one line and exits 1.
pub fn fail(arch: &str, message: impl Display) -> ! {
    eprintln!("{arch}: error: {message}");
    std::process::exit(1)
}

/// The start-up line. Tests and the bench harness read the address from it, which is how
/// `--port 0` works: `ARCH: listening on http://ADDR/ — DETAILS`.
pub fn announce(arch: &str, addr: SocketAddr, conn: &ConnConfig, details: impl Display) {
    let requests = match conn.keepalive_requests {
        0 => "unlimited requests".to_string(),
        n => format!("{n} requests"),
    };
    let pg = match &conn.app.pg {
        Some(target) => format!("; /pg: {target}, pool {}", target.pool),
        None => String::new(),
    };
    eprintln!(
        "{arch}: listening on http://{addr}/ — {details}; keep-alive: {requests}, {} s idle{pg}",
        conn.timeouts.idle.as_secs()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_already_met_is_left_alone() {
        assert!(raise_fd_limit_to(16).is_ok());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!("0,2-4".parse::<CpuList>().unwrap().0, vec![0, 2, 3, 4]);
        assert!("3-1".parse::<CpuList>().is_err());
        assert!("a".parse::<CpuList>().is_err());
        assert!("".parse::<CpuList>().is_err());
        assert_eq!(CpuList(vec![1, 3]).to_string(), "1,3");
    }

    #[test]
    fn default_workers_follow_affinity() {
        let args = ServerArgs {
            bind: "127.0.0.1".parse().unwrap(),
            port: 0,
            workers: None,
            cpus: None,
            backlog: 16,
            stats: false,
            stack: crate::stack::Stack::Raw,
            db: PathBuf::from("unused.db"),
            header_timeout: 10,
            keepalive_timeout: None,
            keepalive_requests: None,
            pg: None,
            db_pool: None,
            max_conns: 10_000,
            work_us: 0,
        };
        assert_eq!(args.check().unwrap().workers, allowed_cpus().len());
        let pinned = ServerArgs {
            cpus: Some(CpuList(vec![allowed_cpus()[0]])),
            ..args.clone()
        };
        let cfg = pinned.check().unwrap();
        assert_eq!((cfg.workers, cfg.cpu_for(3)), (1, Some(allowed_cpus()[0])));
        let bad = ServerArgs {
            cpus: Some(CpuList(vec![100_000 % 1024])),
            ..args
        };
        assert!(bad.check().unwrap_err().contains("not available"));
    }
}
