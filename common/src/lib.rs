//! # common — the one handler crate every archzoo server shares
//!
//! archzoo compares runtime *architectures*. For the comparison to mean anything, everything
//! that is not the architecture must be identical: the bytes parsed, the rules applied, the
//! handler run, the bytes written. That all lives here; a server crate adds only its
//! concurrency model (who accepts, who reads, who waits, how work moves between threads).
//!
//! # Layout
//!
//! - [`request`] and [`handler`] — the seam: a parsed request, and the [`handler::Handler`]
//!   that turns it and the [`handler::App`] (the `/db` file, the runtime's blocking hook)
//!   into a [`handler::Reply`]. Leaves: neither knows the codec nor the routes.
//! - [`codec`] — the HTTP/1.x connection state machine ([`codec::Conn`]): an input buffer,
//!   incremental parsing with `httparse` (`codec::head`), body framing (Content-Length and
//!   chunked, `codec::chunked`, read and discarded), keep-alive rules, limits and error
//!   statuses, and an output buffer that collects every response of a pipelined batch so
//!   the runtime writes it once. It does no I/O and reads no global: a connection is built
//!   from a [`codec::ConnConfig`], and answers its requests or forwards them as its
//!   [`codec::Mode`] says.
//! - [`evconn`] — one connection driven by edge-triggered readiness callbacks, for the
//!   event-loop servers.
//! - [`evloop`] — what every epoll loop shares: the connection table with its timers and
//!   deadline sweep, and the accepting socket with its `--max-conns` pause.
//! - [`response`] — response serialisation and the per-thread cached `Date` header.
//! - [`routes`] — the application: the routes, and the `--stack` that chooses the handler.
//!   A reply may ask the runtime to *wait* before it is sent, which is how each runtime
//!   plugs in its own native timer without the handler knowing which runtime it runs on.
//! - [`workloads`] — `/sum` (CPU), `/db` (SQLite), `/sleep` (waiting): what hello world
//!   hides.
//! - [`params`] — the routes' query parameters and their bounds, read one way by `/db`,
//!   `/pg`, `/sleep` and the handler alike.
//! - [`stack`] — `--stack raw|framework`: which handler a connection runs.
//! - [`pg`] — `/pg`: PostgreSQL across a socket. The query sequence as a sans-IO state
//!   machine over `postgres-protocol` (`pg::wire`) and a connection pool over a blocking or
//!   coroutine stream (`pg::pool`); each runtime supplies only its stream and its wait.
//! - [`framework`] — `--stack framework`: a router, a middleware chain and owned request and
//!   response objects over the same routes, to measure what a framework costs.
//! - [`listener`] — listening sockets built with socket2 (backlog, SO_REUSEADDR,
//!   SO_REUSEPORT, non-blocking) and the per-connection socket options.
//! - [`linger`] — closing after an error without the kernel discarding the answer.
//! - [`supervisor`] — the master process of multi-process servers: fork N workers, restart
//!   the ones that die, stop them gracefully on SIGTERM/SIGINT.
//! - [`shutdown`] — how a worker *process* learns it must stop, without racing its blocking
//!   system calls, and the [`shutdown::StopChannel`] a main thread waits on.
//! - [`registry`] — the open connections of a worker whose connections wait inside a runtime
//!   (coroutines, io_uring, tokio): a stop ends the parked ones, a sweep the late ones.
//! - [`cli`] — the flags every server shares, CPU lists and affinity, the start-up line, and
//!   one-line errors.
//! - [`stats`] — per-worker request and connection counters (thread-local, lock-free) and
//!   the JSON lines printed with `--stats`.

pub mod cli;
pub mod codec;
#[cfg(feature = "may")]
pub mod coroutine;
pub mod evconn;
pub mod evloop;
pub mod framework;
pub mod handler;
pub mod linger;
pub mod listener;
pub mod params;
pub mod pg;
pub mod registry;
pub mod request;
pub mod response;
pub mod routes;
pub mod shutdown;
pub mod stack;
pub mod stats;
pub mod supervisor;
pub mod work;
pub mod workloads;
