//! The seam between the protocol and the application, as may_minihttp's service trait is:
//! a [`Handler`] takes a parsed [`Request`] and returns a [`Reply`]. The codec calls one; it
//! never knows which routes, stack or workload is behind it, and the routes never see a
//! socket, a runtime or a connection.
//!
//! Routes that must *wait* (an I/O-bound workload such as `/sleep`) do not block inside the
//! handler: they return a reply that carries the wait, and the runtime performs it natively
//! — a thread sleep in a blocking worker, a timer in an epoll loop, a coroutine sleep, a
//! tokio or glommio timer — then sends the response. That keeps one handler for all
//! architectures while letting each one wait the way it really would.

use std::path::PathBuf;
use std::time::Duration;

use crate::pg::{Job, Target};
use crate::request::Request;
use crate::response::Response;

/// A handler: request and application in, reply out. A plain `fn` so that a connection can
/// carry it without a generic parameter, and without a virtual call hidden on the hot path.
pub type Handler = fn(&Request, &App) -> Reply;

/// A runtime's way to run blocking work: tokio's multi-thread runtime hands its worker's
/// queue to another thread first (`block_in_place`), as Go's scheduler hands off the P of
/// a goroutine blocked in a system call. Everyone else just calls it.
pub type BlockingHook = fn(&mut dyn FnMut());

/// What the application gets from the server it runs in, passed to every handler call
/// with the request (as may_minihttp passes its service state): the `/db` file, the
/// `/pg` database, and how this runtime wants blocking work run. Built once per process (`ServerArgs::resolve`)
/// and shared by every connection; nothing of it is a global.
#[derive(Debug, Clone, Default)]
pub struct App {
    /// The SQLite file of `/db` (`--db`), checked before any worker starts.
    pub db: Option<PathBuf>,
    /// The PostgreSQL database of `/pg` (`--pg`) and its pool size.
    pub pg: Option<Target>,
    /// None: blocking work runs where the handler runs.
    pub blocking: Option<BlockingHook>,
    /// `--work-us`: the CPU every request costs in the handler (zero: none).
    pub work: Duration,
}

impl App {
    /// No database, no hook: for handlers that need neither (tests, the codec's own).
    pub const NONE: App = App {
        db: None,
        pg: None,
        blocking: None,
        work: Duration::ZERO,
    };

    /// The `--work-us` CPU of one request, spent here (see [`crate::work`]).
    pub fn spend_work(&self) {
        crate::work::spend(self.work);
    }

    /// Runs `f` the runtime's way (see [`BlockingHook`]).
    pub fn run_blocking<T>(&self, f: impl FnOnce() -> T) -> T {
        let mut f = Some(f);
        let mut out = None;
        let mut call = || out = f.take().map(|f| f());
        match self.blocking {
            Some(hook) => hook(&mut call),
            None => call(),
        }
        out.expect("the blocking hook ran the closure")
    }

    /// Leaks this value for the life of the process: connections keep a `&'static App`.
    pub fn leak(self) -> &'static App {
        Box::leak(Box::new(self))
    }
}

/// What a handler decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub response: Response,
    /// Work the runtime does its own way before the response goes out; None: send it now.
    pub later: Option<Later>,
}

/// What a reply waits for, each runtime the way its model does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Later {
    /// Send the response only after this much time has passed.
    Wait(Duration),
    /// Run this `/pg` job against the database, then send the response it makes of the
    /// reply's response (see [`crate::pg::Job::answer`]).
    Query(Job),
}

impl Reply {
    /// Send `response` as soon as possible.
    pub fn now(response: Response) -> Self {
        Reply {
            response,
            later: None,
        }
    }

    /// Send `response` after `wait`, without occupying the thread if the runtime can avoid it.
    pub fn after(wait: Duration, response: Response) -> Self {
        Reply {
            response,
            later: Some(Later::Wait(wait)),
        }
    }

    /// Answer after the database ran `job` (`/pg`).
    pub fn query(job: Job) -> Self {
        Reply {
            response: Response::new(200, "text/plain", crate::response::Body::Static(b"")),
            later: Some(Later::Query(job)),
        }
    }
}
