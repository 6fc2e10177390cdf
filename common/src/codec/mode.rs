//! Who answers what a connection parses: the connection's own handler ([`Answer`]) or
//! another process ([`Forward`], reactor-workers' reactor), as a type parameter of
//! [`Conn`](super::Conn) so that each server compiles only the mode it runs.

use std::collections::VecDeque;

use super::{ConnConfig, Progress, Step, NO_APP};
use crate::handler::{App, Handler, Reply};
use crate::request::Request;
use crate::response::{Framing, Response};

/// Who answers the requests a connection parses: the connection itself ([`Answer`]), or
/// another process ([`Forward`]). A type rather than a flag, so that a server whose
/// connections answer themselves is never handed a forwarded request to deal with: its
/// [`Conn::process`](super::Conn::process) returns a [`Progress`], which has no such case.
pub trait Mode: private::Sealed {
    /// What [`Conn::process`](super::Conn::process) returns in this mode.
    type Next: From<Progress> + Into<Step> + Copy + std::fmt::Debug + PartialEq;
    /// The mode a connection built from `config` gets.
    fn from_config(config: &ConnConfig) -> Self;
    /// Runs the handler on `req`, or says that the request goes elsewhere.
    fn dispatch(&self, req: &Request) -> Result<Reply, Self::Next>;
    /// What the handler is given (a forwarding connection runs none: nothing).
    fn app(&self) -> &'static App {
        &NO_APP
    }
    /// A request went elsewhere; its response will be written with `framing`.
    fn forwarded(&mut self, _framing: Framing, _head: bool) {}
    /// An answer the connection gives itself (an error) goes out after those still owed
    /// to forwarded requests; given back when none is owed: write it now.
    fn in_turn(&mut self, _framing: Framing, response: Response) -> Option<Response> {
        Some(response)
    }
    /// The oldest forwarded request's response, once it was delivered.
    fn next_ready(&mut self) -> Option<(Framing, bool, Response)> {
        None
    }
    /// What `process` says while more than `room` forwarded requests are unanswered;
    /// `None` when no more than that are.
    fn hold(&self, _room: usize) -> Option<Self::Next> {
        None
    }
}

mod private {
    pub trait Sealed {}
    impl Sealed for super::Answer {}
    impl Sealed for super::Forward {}
}

/// Requests are answered by the connection's own [`Handler`], given its [`App`].
#[derive(Debug, Clone, Copy)]
pub struct Answer(Handler, &'static App);

/// Requests are handed on as they are parsed, up to [`MAX_IN_FLIGHT`](super::MAX_IN_FLIGHT) at once (see
/// [`Step::Forward`]); their responses are written in request order.
#[derive(Debug, Default)]
pub struct Forward {
    /// Forwarded requests not yet written back, oldest first: how to frame each response,
    /// and the response once it was delivered. Empty (no allocation) on an idle connection.
    pub(super) in_flight: VecDeque<InFlight>,
    /// The number of `in_flight`'s front (numbers wrap; at most [`MAX_IN_FLIGHT`](super::MAX_IN_FLIGHT) are out).
    pub(super) front_seq: u16,
}

#[derive(Debug)]
pub(super) struct InFlight {
    framing: Framing,
    head: bool,
    pub(super) response: Option<Response>,
}

impl Mode for Answer {
    type Next = Progress;
    fn from_config(config: &ConnConfig) -> Self {
        Answer(config.handler, config.app)
    }
    #[inline]
    fn dispatch(&self, req: &Request) -> Result<Reply, Progress> {
        Ok((self.0)(req, self.1))
    }
    fn app(&self) -> &'static App {
        self.1
    }
}

impl Mode for Forward {
    type Next = Step;
    fn from_config(_: &ConnConfig) -> Self {
        Forward::default()
    }
    #[inline]
    fn dispatch(&self, _: &Request) -> Result<Reply, Step> {
        Err(Step::Forward)
    }
    fn forwarded(&mut self, framing: Framing, head: bool) {
        self.in_flight.push_back(InFlight {
            framing,
            head,
            response: None,
        });
    }
    fn in_turn(&mut self, framing: Framing, response: Response) -> Option<Response> {
        if self.in_flight.is_empty() {
            return Some(response);
        }
        self.in_flight.push_back(InFlight {
            framing,
            head: false,
            response: Some(response),
        });
        None
    }
    fn next_ready(&mut self) -> Option<(Framing, bool, Response)> {
        let response = self.in_flight.front_mut()?.response.take()?;
        let front = self.in_flight.pop_front()?;
        self.front_seq = self.front_seq.wrapping_add(1);
        if self.in_flight.is_empty() {
            // Give the slots back: an idle connection holds no queue.
            self.in_flight = VecDeque::new();
        }
        Some((front.framing, front.head, response))
    }
    fn hold(&self, room: usize) -> Option<Step> {
        (self.in_flight.len() > room).then_some(Step::Await)
    }
}
