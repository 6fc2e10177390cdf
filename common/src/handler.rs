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

use std::time::Duration;

use crate::request::Request;
use crate::response::Response;

/// A handler: request in, reply out. A plain `fn` so that a connection can carry it
/// without a generic parameter, and without a virtual call hidden on the hot path.
pub type Handler = fn(&Request) -> Reply;

/// What a handler decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub response: Response,
    /// Send the response only after this much time has passed, waiting the runtime's way.
    pub wait: Option<Duration>,
}

impl Reply {
    /// Send `response` as soon as possible.
    pub fn now(response: Response) -> Self {
        Reply {
            response,
            wait: None,
        }
    }

    /// Send `response` after `wait`, without occupying the thread if the runtime can avoid it.
    pub fn after(wait: Duration, response: Response) -> Self {
        Reply {
            response,
            wait: Some(wait),
        }
    }
}
