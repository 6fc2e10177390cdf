//! The routes every server answers, identically: the application behind the
//! [`crate::handler`] seam, in two stacks (`--stack raw|framework`, [`crate::stack`]).
//!
//! CPU-bound or synchronous work (a computation, a blocking database call) simply runs in
//! the handler, on whatever thread the runtime called it from; that is the point of such a
//! workload: it shows what each architecture does when a handler occupies its thread.

use crate::handler::{App, Reply};
use crate::request::Request;
use crate::response::{Body, Response};
use crate::{params, pg, workloads};

/// The benchmark posts' body: 13 bytes.
pub const HELLO: &[u8] = b"hello, world!";

#[derive(serde::Serialize)]
struct Message {
    message: &'static str,
}

/// `/json`'s body, serialised per request as TechEmpower's rules ask, so the serialiser's
/// cost is part of the workload.
pub fn json_body() -> Vec<u8> {
    serde_json::to_vec(&Message {
        message: "Hello, World!",
    })
    .unwrap_or_default()
}

/// `/sum`, `/db` and `/sleep` as replies, shared by both stacks: a bad parameter is a 400
/// with the reason (the connection stays open: it is an answer, not a protocol error).
pub fn sum_reply() -> Reply {
    Reply::now(Response::new(
        200,
        "text/plain",
        Body::Owned(workloads::sum_body()),
    ))
}

pub fn db_reply(query: Option<&str>, app: &App) -> Reply {
    match params::queries_param(query).map(|n| workloads::db_body(n, app)) {
        Ok(Ok(body)) => Reply::now(Response::new(200, "text/plain", Body::Owned(body))),
        Ok(Err(e)) => Reply::now(Response::text(500, format!("database error: {e}\n"))),
        Err(e) => Reply::now(Response::text(400, format!("{e}\n"))),
    }
}

pub fn sleep_reply(query: Option<&str>) -> Reply {
    match params::sleep_param(query) {
        Ok(wait) => Reply::after(
            wait,
            Response::text(200, format!("slept={}", wait.as_millis())),
        ),
        Err(e) => Reply::now(Response::text(400, format!("{e}\n"))),
    }
}

/// `/pg`: a reply that carries its job (see [`crate::pg`]); the runtime runs it its way.
pub fn pg_reply(query: Option<&str>) -> Reply {
    match pg::Job::parse(query) {
        Ok(job) => Reply::query(job),
        Err(e) => Reply::now(Response::text(400, format!("{e}\n"))),
    }
}

/// The raw stack: the routes with nothing in between.
///
/// - `/` and `/plaintext` → `hello, world!` (text/plain)
/// - `/json` → `{"message":"Hello, World!"}` (application/json)
/// - `/sum`, `/db?queries=N`, `/sleep?ms=N` → see [`workloads`]
/// - `/pg?queries=N&sleep_ms=M` → see [`pg`]
/// - anything else → 404
pub fn handle(req: &Request, app: &App) -> Reply {
    app.spend_work();
    match req.path() {
        "/" | "/plaintext" => Reply::now(Response::new(200, "text/plain", Body::Static(HELLO))),
        "/json" => Reply::now(Response::new(
            200,
            "application/json",
            Body::Owned(json_body()),
        )),
        "/sum" => sum_reply(),
        "/db" => db_reply(req.query(), app),
        "/sleep" => sleep_reply(req.query()),
        "/pg" => pg_reply(req.query()),
        _ => Reply::now(Response::text(404, "not found\n")),
    }
}
