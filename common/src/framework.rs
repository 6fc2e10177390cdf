//! `--stack framework`: the same routes behind a framework layer.
//!
//! The posts measured frameworks on top of their runtimes (MixPHP and webman on Swoole and
//! Workerman, Beego on Go) at 13–60 % below the bare runtime. This layer does what such a
//! framework does on every request, and no more:
//!
//! - builds an owned **request object**: method, path, a query map and a header map with
//!   lower-cased names (the raw stack borrows everything from the read buffer);
//! - runs a **middleware chain**: a request id (also sent as `X-Request-Id`), timing, and an
//!   access log formatted into a buffered per-thread sink that is dropped when full (so the
//!   cost is formatting, not disk I/O);
//! - **routes** with a radix-tree router with path parameters (matchit), e.g.
//!   `/hello/{name}`;
//! - answers through a **response builder**.
//!
//! Bodies are the raw stack's, byte for byte: `bench --stack raw,framework` then shows the
//! framework's cost per architecture.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::Instant;

use crate::handler::{App, Later, Reply};
use crate::request::{Method, Request};
use crate::response::{Body, Response};
use crate::routes;

/// The request object a framework hands its controllers: everything owned.
#[derive(Debug)]
pub struct Context<'a> {
    pub method: &'static str,
    pub path: String,
    pub query: HashMap<String, String>,
    pub raw_query: Option<String>,
    pub headers: HashMap<String, String>,
    pub params: HashMap<String, String>,
    pub request_id: u64,
    pub started: Instant,
    /// What the server gave the application (the `/db` file, the blocking hook).
    pub app: &'a App,
}

impl<'a> Context<'a> {
    fn from_request(req: &Request, app: &'a App) -> Self {
        let query = req
            .query()
            .map(|q| {
                q.split('&')
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        let (k, v) = p.split_once('=').unwrap_or((p, ""));
                        (k.to_string(), v.to_string())
                    })
                    .collect()
            })
            .unwrap_or_default();
        Context {
            method: match req.method {
                Method::Get => "GET",
                Method::Head => "HEAD",
                Method::Post => "POST",
            },
            path: req.path().to_string(),
            query,
            raw_query: req.query().map(str::to_string),
            headers: req
                .headers()
                .iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
                .collect(),
            params: HashMap::new(),
            request_id: 0,
            started: Instant::now(),
            app,
        }
    }
}

/// A response builder, as frameworks offer.
#[derive(Debug)]
pub struct ResponseBuilder {
    status: u16,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Body,
    later: Option<Later>,
}

impl ResponseBuilder {
    pub fn new() -> Self {
        ResponseBuilder {
            status: 200,
            content_type: "text/plain",
            headers: Vec::new(),
            body: Body::Static(b""),
            later: None,
        }
    }

    pub fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    pub fn content_type(mut self, content_type: &'static str) -> Self {
        self.content_type = content_type;
        self
    }

    pub fn body(mut self, body: Body) -> Self {
        self.body = body;
        self
    }

    /// Adopts a reply of the shared routes (so bodies stay identical).
    fn from_reply(reply: Reply) -> Self {
        let r = reply.response;
        ResponseBuilder {
            status: r.status,
            content_type: r.content_type,
            headers: r.headers,
            body: r.body,
            later: reply.later,
        }
    }

    fn build(self) -> Reply {
        let mut response = Response::new(self.status, self.content_type, self.body);
        response.headers = self.headers;
        Reply {
            response,
            later: self.later,
        }
    }
}

impl Default for ResponseBuilder {
    fn default() -> Self {
        ResponseBuilder::new()
    }
}

type Endpoint = fn(&Context<'_>) -> ResponseBuilder;
type Next<'a> = &'a dyn Fn(&mut Context<'_>) -> ResponseBuilder;
type Middleware = fn(&mut Context<'_>, Next<'_>) -> ResponseBuilder;

const MIDDLEWARE: &[Middleware] = &[request_id, timing, access_log];

fn router() -> &'static matchit::Router<Endpoint> {
    static ROUTER: OnceLock<matchit::Router<Endpoint>> = OnceLock::new();
    ROUTER.get_or_init(|| {
        let mut r = matchit::Router::new();
        let routes: [(&str, Endpoint); 8] = [
            ("/", hello),
            ("/plaintext", hello),
            ("/json", json),
            ("/sum", |_| ResponseBuilder::from_reply(routes::sum_reply())),
            ("/db", |c| {
                ResponseBuilder::from_reply(routes::db_reply(c.raw_query.as_deref(), c.app))
            }),
            ("/sleep", |c| {
                ResponseBuilder::from_reply(routes::sleep_reply(c.raw_query.as_deref()))
            }),
            ("/pg", |c| {
                ResponseBuilder::from_reply(routes::pg_reply(c.raw_query.as_deref()))
            }),
            ("/hello/{name}", greet),
        ];
        for (path, endpoint) in routes {
            // The table above is fixed and conflict-free.
            let _ = r.insert(path, endpoint);
        }
        r
    })
}

fn hello(_: &Context<'_>) -> ResponseBuilder {
    ResponseBuilder::new().body(Body::Static(routes::HELLO))
}

fn json(_: &Context<'_>) -> ResponseBuilder {
    ResponseBuilder::new()
        .content_type("application/json")
        .body(Body::Owned(routes::json_body()))
}

fn greet(c: &Context<'_>) -> ResponseBuilder {
    let name = c.params.get("name").map_or("", String::as_str);
    ResponseBuilder::new().body(Body::Owned(format!("hello, {name}!").into_bytes()))
}

/// The framework's entry point: request object, middleware chain, router, builder.
pub fn handle(req: &Request, app: &App) -> Reply {
    app.spend_work();
    let mut ctx = Context::from_request(req, app);
    chain(&mut ctx, 0).build()
}

fn chain(ctx: &mut Context<'_>, i: usize) -> ResponseBuilder {
    match MIDDLEWARE.get(i) {
        Some(middleware) => middleware(ctx, &|c| chain(c, i + 1)),
        None => dispatch(ctx),
    }
}

fn dispatch(ctx: &mut Context<'_>) -> ResponseBuilder {
    match router().at(&ctx.path) {
        Ok(found) => {
            ctx.params = found
                .params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            (found.value)(ctx)
        }
        Err(_) => ResponseBuilder::from_reply(Reply::now(Response::text(404, "not found\n"))),
    }
}

thread_local! {
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
    // The thread id, asked of the kernel once per thread: a `gettid` per request would
    // show up in this stack's syscall and CPU figures as if the framework cost it.
    // SAFETY: gettid has no preconditions.
    static TID: u64 = unsafe { libc::gettid() } as u64;
    static LOG: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Request ids unique per process without a shared counter: thread id in the high bits.
fn request_id(ctx: &mut Context<'_>, next: Next<'_>) -> ResponseBuilder {
    let n = NEXT_ID.with(|c| {
        c.set(c.get() + 1);
        c.get()
    });
    let tid = TID.with(|t| *t);
    ctx.request_id = (tid << 40) | (n & ((1 << 40) - 1));
    let mut resp = next(ctx);
    resp.headers
        .push(("X-Request-Id", ctx.request_id.to_string()));
    resp
}

fn timing(ctx: &mut Context<'_>, next: Next<'_>) -> ResponseBuilder {
    ctx.started = Instant::now();
    next(ctx)
}

/// An access log line per request into a per-thread buffer, dropped past 64 KiB.
fn access_log(ctx: &mut Context<'_>, next: Next<'_>) -> ResponseBuilder {
    let resp = next(ctx);
    let agent = ctx.headers.get("user-agent").map_or("-", String::as_str);
    LOG.with(|log| {
        let mut log = log.borrow_mut();
        let _ = writeln!(
            log,
            "{} {} {} {}us id={} ua={agent}",
            ctx.method,
            ctx.path,
            resp.status,
            ctx.started.elapsed().as_micros(),
            ctx.request_id
        );
        if log.len() > 64 * 1024 {
            log.clear();
        }
    });
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Version;

    fn get(path: &str) -> Reply {
        handle(
            &Request::new(Method::Get, Version::Http11, path).unwrap(),
            &App::NONE,
        )
    }

    #[test]
    fn same_bodies_as_the_raw_stack() {
        for path in [
            "/",
            "/plaintext",
            "/json",
            "/nope",
            "/sleep?ms=5",
            "/sleep?ms=x",
            "/pg?queries=3&seed=1",
            "/pg?queries=0",
        ] {
            let raw = routes::handle(
                &Request::new(Method::Get, Version::Http11, path).unwrap(),
                &App::NONE,
            );
            let framed = get(path);
            assert_eq!(framed.response.status, raw.response.status, "{path}");
            assert_eq!(framed.response.body, raw.response.body, "{path}");
            assert_eq!(framed.later, raw.later, "{path}");
            assert!(framed
                .response
                .headers
                .iter()
                .any(|(n, _)| *n == "X-Request-Id"));
        }
    }

    #[test]
    fn path_parameters() {
        assert_eq!(
            get("/hello/world").response.body.as_bytes(),
            b"hello, world!"
        );
    }
}
