//! The `/pg` query sequence as a sans-IO state machine over `postgres-protocol`'s message
//! encoding and parsing: it never touches a socket. A runtime drives a [`Session`] with its
//! own stream — a blocking read (PHP's PDO in a worker), a coroutine's read (Swoole's hooked
//! PDO), an `.await` (glommio) — by asking it what it wants next ([`Session::want`]): bytes
//! written, bytes read, or nothing (the sequence is over). So every architecture sends the
//! same messages in the same order and only *how it waits* differs, which is the point of
//! the workload. (work-stealing runs `tokio-postgres` instead, which is built on the same
//! crate.)
//!
//! The sequence: start-up and authentication (trust, cleartext, MD5 or SCRAM-SHA-256),
//! then the two statements prepared once per connection; per request, N sequential
//! Bind/Execute/Sync round trips, each waiting for its ReadyForQuery before the next is
//! sent, as a PDO loop does.

use std::io;

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::{md5_hash, sasl};
use postgres_protocol::message::{backend, frontend};
use postgres_protocol::{types, IsNull};

use super::{Job, PgError, Target};

/// The post's query, prepared once per connection as statement `q`. `ORDER BY id` makes
/// it what it was on the post's InnoDB table (a range read of the primary key, rows in key
/// order): PostgreSQL's heap has no order, and without it the planner takes a sequential
/// scan for a low id — which then reads up to half the table, from wherever a
/// synchronized scan happens to be, and sums different rows each time.
pub const QUERY: &str = "SELECT value FROM test WHERE id >= $1 ORDER BY id LIMIT 10";
/// The same query run after a server-side `pg_sleep($2)` seconds (statement `s`): the
/// uncorrelated sub-select is planned as an init plan, evaluated once per execution.
pub const SLOW_QUERY: &str = "SELECT value FROM test WHERE id >= $1 \
     AND (SELECT pg_sleep($2)) IS NOT NULL ORDER BY id LIMIT 10";
/// Type oids of the parameters: int4, float8.
const INT4: u32 = 23;
const FLOAT8: u32 = 701;
/// Room offered to one read: an answer of ten rows is well under 1 KiB.
const READ_CHUNK: usize = 8192;
/// Binary results: a float8 is 8 big-endian bytes, no text parsing.
const BINARY: i16 = 1;

/// What the driver must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Write all of [`Session::output`], then call [`Session::sent`].
    Write,
    /// Read into `Session::input` and call [`Session::received`].
    Read,
    /// The sequence is over: the connection is ready, or the job's sum is in
    /// [`Session::take_sum`].
    Done,
}

enum Phase {
    /// Start-up sent; authenticating until AuthenticationOk.
    Auth(Option<sasl::ScramSha256>),
    /// Authenticated; parameter status and key data until ReadyForQuery.
    Starting,
    /// Parse messages of both statements sent; until their ReadyForQuery.
    Preparing,
    /// Nothing in flight.
    Ready,
    /// One query in flight; `left` more after it.
    Querying { left: u16 },
    /// An error was reported by the server; its ReadyForQuery ends the exchange.
    Failing(String),
    /// The connection cannot be used again.
    Broken,
}

impl Phase {
    fn name(&self) -> &'static str {
        match self {
            Phase::Auth(_) => "authentication",
            Phase::Starting => "start-up",
            Phase::Preparing => "prepare",
            Phase::Ready => "idle",
            Phase::Querying { .. } => "query",
            Phase::Failing(_) => "error",
            Phase::Broken => "broken",
        }
    }
}

/// One connection's protocol state and buffers.
pub struct Session {
    phase: Phase,
    out: BytesMut,
    input: BytesMut,
    user: String,
    password: Option<Vec<u8>>,
    /// This request's ids and running sum.
    rng: fastrand::Rng,
    sum: f64,
    outcome: Option<Result<f64, PgError>>,
}

impl Session {
    /// A new connection's session: the start-up message is queued.
    pub fn connect(target: &Target) -> Session {
        let mut out = BytesMut::with_capacity(256);
        let params = [
            ("user", target.user.as_str()),
            ("database", target.dbname.as_str()),
            ("application_name", "archzoo"),
            ("client_encoding", "UTF8"),
        ];
        // Only an interior NUL byte fails here, which a parsed URL cannot hold.
        let _ = frontend::startup_message(params, &mut out);
        Session {
            phase: Phase::Auth(None),
            out,
            input: BytesMut::with_capacity(1024),
            user: target.user.clone(),
            password: target.password.clone(),
            rng: fastrand::Rng::with_seed(0),
            sum: 0.0,
            outcome: None,
        }
    }

    /// Queues `job`'s first query; drive until [`Want::Done`], then [`Session::take_sum`].
    pub fn start(&mut self, job: &Job) {
        debug_assert!(matches!(self.phase, Phase::Ready));
        self.rng = super::rng_for(job);
        self.sum = 0.0;
        self.outcome = None;
        self.bind(job.sleep_ms);
        self.phase = Phase::Querying {
            left: job.queries.saturating_sub(1),
        };
    }

    /// The job's result, once [`Session::want`] said `Done` after [`Session::start`].
    pub fn take_sum(&mut self) -> Result<f64, PgError> {
        self.outcome
            .take()
            .unwrap_or(Err(PgError::Protocol("no result".into())))
    }

    /// Whether the connection may serve another job (false after any error: an
    /// unexpected state is never reused).
    pub fn reusable(&self) -> bool {
        matches!(self.phase, Phase::Ready)
    }

    /// Bytes to send.
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// All of [`Session::output`] was written.
    pub fn sent(&mut self) {
        self.out.clear();
    }

    /// Room for one read (`READ_CHUNK`) at the end of the input buffer; call
    /// [`Session::received`] with the count read (0 bytes is the server closing).
    pub fn read_space(&mut self) -> &mut [u8] {
        let len = self.input.len();
        self.input.resize(len + READ_CHUNK, 0);
        &mut self.input[len..]
    }

    /// The stream failed: nothing buffered means anything, and the connection is done.
    pub fn abandon(&mut self) {
        self.input.clear();
        self.out.clear();
        self.phase = Phase::Broken;
    }

    /// `n` bytes were read into [`Session::read_space`].
    pub fn received(&mut self, n: usize) -> Result<(), PgError> {
        let len = self.input.len() - READ_CHUNK;
        self.input.truncate(len + n);
        if n == 0 {
            self.phase = Phase::Broken;
            return Err(PgError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the database closed the connection",
            )));
        }
        Ok(())
    }

    /// Handles every complete message received and says what the driver must do.
    pub fn want(&mut self) -> Result<Want, PgError> {
        if !self.out.is_empty() {
            return Ok(Want::Write);
        }
        while let Some(message) = backend::Message::parse(&mut self.input).map_err(|e| {
            self.phase = Phase::Broken;
            PgError::Protocol(e.to_string())
        })? {
            if let Err(e) = self.on_message(message) {
                self.phase = Phase::Broken;
                return Err(e);
            }
            if !self.out.is_empty() {
                return Ok(Want::Write);
            }
        }
        Ok(match self.phase {
            Phase::Ready => Want::Done,
            Phase::Broken => Want::Done,
            _ => Want::Read,
        })
    }

    fn on_message(&mut self, message: backend::Message) -> Result<(), PgError> {
        use backend::Message as M;
        match (&mut self.phase, message) {
            (_, M::NoticeResponse(_) | M::ParameterStatus(_) | M::NotificationResponse(_)) => {}
            (Phase::Failing(_), M::ReadyForQuery(_)) => {
                let Phase::Failing(why) = std::mem::replace(&mut self.phase, Phase::Ready) else {
                    unreachable!()
                };
                self.outcome = Some(Err(PgError::Server(why)));
            }
            (Phase::Failing(_), _) => {}
            (_, M::ErrorResponse(body)) => {
                let why = error_text(&body);
                match self.phase {
                    // A query failed: the server skips to the Sync, the connection stays
                    // usable. Anything else (authentication, a missing table at Parse)
                    // means this connection will never serve the workload.
                    Phase::Querying { .. } => self.phase = Phase::Failing(why),
                    _ => return Err(PgError::Server(why)),
                }
            }
            (Phase::Auth(_), M::AuthenticationOk) => self.phase = Phase::Starting,
            (Phase::Auth(_), M::AuthenticationCleartextPassword) => {
                let password = self.password()?;
                frontend::password_message(&password, &mut self.out).map_err(io_protocol)?;
            }
            (Phase::Auth(_), M::AuthenticationMd5Password(body)) => {
                let hash = md5_hash(self.user.as_bytes(), &self.password()?, body.salt());
                frontend::password_message(hash.as_bytes(), &mut self.out).map_err(io_protocol)?;
            }
            (Phase::Auth(scram), M::AuthenticationSasl(body)) => {
                let mut mechanisms = body.mechanisms();
                let mut offered = false;
                while let Some(m) = mechanisms.next().map_err(io_protocol)? {
                    offered |= m == sasl::SCRAM_SHA_256;
                }
                if !offered {
                    return Err(PgError::Protocol(
                        "the server offers no SASL mechanism archzoo speaks".into(),
                    ));
                }
                let password = self.password.clone().ok_or_else(no_password)?;
                let s = sasl::ScramSha256::new(&password, sasl::ChannelBinding::unsupported());
                frontend::sasl_initial_response(sasl::SCRAM_SHA_256, s.message(), &mut self.out)
                    .map_err(io_protocol)?;
                *scram = Some(s);
            }
            (Phase::Auth(Some(scram)), M::AuthenticationSaslContinue(body)) => {
                scram.update(body.data()).map_err(io_protocol)?;
                frontend::sasl_response(scram.message(), &mut self.out).map_err(io_protocol)?;
            }
            (Phase::Auth(Some(scram)), M::AuthenticationSaslFinal(body)) => {
                scram.finish(body.data()).map_err(io_protocol)?;
            }
            (Phase::Starting, M::BackendKeyData(_)) => {}
            (Phase::Starting, M::ReadyForQuery(_)) => {
                frontend::parse("q", QUERY, [INT4], &mut self.out).map_err(io_protocol)?;
                frontend::parse("s", SLOW_QUERY, [INT4, FLOAT8], &mut self.out)
                    .map_err(io_protocol)?;
                frontend::sync(&mut self.out);
                self.phase = Phase::Preparing;
            }
            (Phase::Preparing, M::ParseComplete) => {}
            (Phase::Preparing, M::ReadyForQuery(_)) => self.phase = Phase::Ready,
            (Phase::Querying { .. }, M::BindComplete | M::CommandComplete(_)) => {}
            (Phase::Querying { .. }, M::DataRow(row)) => {
                let mut ranges = row.ranges();
                while let Some(range) = ranges.next().map_err(io_protocol)? {
                    let range = range.ok_or(PgError::Protocol("NULL value".into()))?;
                    self.sum += types::float8_from_sql(&row.buffer()[range])
                        .map_err(|e| PgError::Protocol(e.to_string()))?;
                }
            }
            (Phase::Querying { left }, M::ReadyForQuery(_)) => {
                if *left == 0 {
                    self.phase = Phase::Ready;
                    self.outcome = Some(Ok(self.sum));
                } else {
                    *left -= 1;
                    self.bind(0);
                }
            }
            (_, other) => {
                return Err(PgError::Protocol(format!(
                    "unexpected message {} in {}",
                    tag(&other),
                    self.phase.name()
                )))
            }
        }
        Ok(())
    }

    /// Queues one query with a random start id (statement `s` when it must sleep first).
    fn bind(&mut self, sleep_ms: u16) {
        let id = super::next_id(&mut self.rng) as i32;
        let sleep = f64::from(sleep_ms) / 1000.0;
        let (statement, params): (&str, &[Param]) = if sleep_ms > 0 {
            ("s", &[Param::Int4(id), Param::Float8(sleep)])
        } else {
            ("q", &[Param::Int4(id)])
        };
        let serialize = |p: &Param, buf: &mut BytesMut| {
            match *p {
                Param::Int4(v) => types::int4_to_sql(v, buf),
                Param::Float8(v) => types::float8_to_sql(v, buf),
            }
            Ok(IsNull::No)
        };
        // Binding two fixed-size values cannot fail.
        let _ = frontend::bind(
            "",
            statement,
            [BINARY],
            params,
            serialize,
            [BINARY],
            &mut self.out,
        );
        let _ = frontend::execute("", 0, &mut self.out);
        frontend::sync(&mut self.out);
    }

    fn password(&self) -> Result<Vec<u8>, PgError> {
        self.password.clone().ok_or_else(no_password)
    }
}

enum Param {
    Int4(i32),
    Float8(f64),
}

fn no_password() -> PgError {
    PgError::Server("the database asks for a password and the --pg URL has none".into())
}

fn io_protocol(e: io::Error) -> PgError {
    PgError::Protocol(e.to_string())
}

/// An ErrorResponse as PostgreSQL prints it: `SEVERITY: message`.
fn error_text(body: &backend::ErrorResponseBody) -> String {
    let (mut severity, mut message) = (String::new(), String::new());
    let mut fields = body.fields();
    while let Ok(Some(field)) = fields.next() {
        let value = String::from_utf8_lossy(field.value_bytes()).into_owned();
        match field.type_() {
            b'S' => severity = value,
            b'M' => message = value,
            _ => {}
        }
    }
    format!("{severity}: {message}")
}

fn tag(message: &backend::Message) -> &'static str {
    use backend::Message as M;
    match message {
        M::DataRow(_) => "DataRow",
        M::ReadyForQuery(_) => "ReadyForQuery",
        M::RowDescription(_) => "RowDescription",
        M::NoData => "NoData",
        M::PortalSuspended => "PortalSuspended",
        M::CopyInResponse(_) | M::CopyOutResponse(_) => "Copy",
        _ => "other",
    }
}

/// Drives `session` to [`Want::Done`] over a blocking stream: a `std` socket (the worker
/// waits in the kernel) or a `may` socket (the coroutine yields to the others).
pub fn drive<S: io::Read + io::Write>(
    stream: &mut S,
    session: &mut Session,
) -> Result<(), PgError> {
    loop {
        match session.want()? {
            Want::Write => {
                stream
                    .write_all(session.output())
                    .inspect_err(|_| session.abandon())?;
                session.sent();
            }
            Want::Read => {
                let n = stream
                    .read(session.read_space())
                    .inspect_err(|_| session.abandon())?;
                session.received(n)?;
            }
            Want::Done => return Ok(()),
        }
    }
}

/// [`drive`] over an asynchronous stream (glommio's): the task awaits, the shard runs
/// other connections meanwhile.
pub async fn drive_async<S>(stream: &mut S, session: &mut Session) -> Result<(), PgError>
where
    S: futures_io::AsyncRead + futures_io::AsyncWrite + Unpin,
{
    use std::future::poll_fn;
    use std::pin::Pin;
    loop {
        match session.want()? {
            Want::Write => {
                let mut done = 0;
                while done < session.output().len() {
                    let n = poll_fn(|cx| {
                        Pin::new(&mut *stream).poll_write(cx, &session.output()[done..])
                    })
                    .await
                    .inspect_err(|_| session.abandon())?;
                    if n == 0 {
                        session.abandon();
                        return Err(PgError::Io(io::ErrorKind::WriteZero.into()));
                    }
                    done += n;
                }
                session.sent();
            }
            Want::Read => {
                let space = session.read_space();
                let read = poll_fn(|cx| Pin::new(&mut *stream).poll_read(cx, &mut *space)).await;
                match read {
                    Ok(n) => session.received(n)?,
                    Err(e) => {
                        session.abandon();
                        return Err(e.into());
                    }
                }
            }
            Want::Done => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The sequence against scripted server messages (the bytes PostgreSQL sends, written
    //! out by hand here since `postgres-protocol` only parses them): start-up, each
    //! authentication, prepare, queries, a server error, a lost connection.

    use super::*;
    use std::time::Duration;

    fn message(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    fn auth(code: i32, extra: &[u8]) -> Vec<u8> {
        let mut body = code.to_be_bytes().to_vec();
        body.extend_from_slice(extra);
        message(b'R', &body)
    }

    fn ready() -> Vec<u8> {
        message(b'Z', b"I")
    }

    fn row(values: &[f64]) -> Vec<u8> {
        let mut body = (values.len() as i16).to_be_bytes().to_vec();
        for v in values {
            body.extend_from_slice(&8i32.to_be_bytes());
            body.extend_from_slice(&v.to_be_bytes());
        }
        message(b'D', &body)
    }

    fn error(severity: &str, text: &str) -> Vec<u8> {
        let body = format!("S{severity}\0C42P01\0M{text}\0\0");
        message(b'E', body.as_bytes())
    }

    fn target(password: Option<&str>) -> Target {
        Target {
            addr: "127.0.0.1:5432".parse().unwrap(),
            user: "bob".into(),
            dbname: "archzoo".into(),
            password: password.map(|p| p.as_bytes().to_vec()),
            config: String::new(),
            pool: 1,
            wait: Duration::from_secs(1),
        }
    }

    /// Hands `bytes` to the session as one read.
    fn feed(s: &mut Session, bytes: &[u8]) {
        s.read_space()[..bytes.len()].copy_from_slice(bytes);
        s.received(bytes.len()).unwrap();
    }

    /// The tags of the messages the session wants written, and marks them sent.
    fn sent_tags(s: &mut Session) -> Vec<u8> {
        assert_eq!(s.want().unwrap(), Want::Write);
        let mut tags = Vec::new();
        let mut out = s.output();
        while !out.is_empty() {
            let len = i32::from_be_bytes(out[1..5].try_into().unwrap()) as usize;
            tags.push(out[0]);
            out = &out[1 + len..];
        }
        s.sent();
        tags
    }

    /// A trust login and the two statements prepared: the session is ready.
    fn ready_session() -> Session {
        let mut s = Session::connect(&target(None));
        // The start-up message: length, then protocol 3.0.
        assert_eq!(s.want().unwrap(), Want::Write);
        assert_eq!(&s.output()[4..8], &196_608i32.to_be_bytes());
        s.sent();
        assert_eq!(s.want().unwrap(), Want::Read);
        let mut hello = auth(0, b"");
        hello.extend(message(b'S', b"server_version\x0015\x00"));
        hello.extend(message(b'K', &[0, 0, 0, 7, 0, 0, 0, 9]));
        hello.extend(ready());
        feed(&mut s, &hello);
        assert_eq!(sent_tags(&mut s), b"PPS");
        assert_eq!(s.want().unwrap(), Want::Read);
        // Both ParseCompletes and the ReadyForQuery, split mid-message across two reads.
        let prepared = [message(b'1', b""), message(b'1', b""), ready()].concat();
        feed(&mut s, &prepared[..7]);
        assert_eq!(s.want().unwrap(), Want::Read);
        feed(&mut s, &prepared[7..]);
        assert_eq!(s.want().unwrap(), Want::Done);
        assert!(s.reusable());
        s
    }

    #[test]
    fn queries_run_one_after_another_and_sum_every_value() {
        let mut s = ready_session();
        let job = Job {
            queries: 2,
            sleep_ms: 0,
            seed: std::num::NonZeroU32::new(5),
        };
        s.start(&job);
        assert_eq!(sent_tags(&mut s), b"BES");
        let answer = |values: &[f64]| {
            [
                message(b'2', b""),
                row(values),
                message(b'C', b"SELECT 2\0"),
                ready(),
            ]
            .concat()
        };
        feed(&mut s, &answer(&[1.5, 2.25]));
        // The second query goes out only after the first one's ReadyForQuery.
        assert_eq!(sent_tags(&mut s), b"BES");
        feed(&mut s, &answer(&[10.0]));
        assert_eq!(s.want().unwrap(), Want::Done);
        assert_eq!(s.take_sum().unwrap(), 13.75);
        assert!(s.reusable());
    }

    #[test]
    fn a_slow_query_binds_the_sleeping_statement_first() {
        let mut s = ready_session();
        s.start(&Job {
            queries: 1,
            sleep_ms: 50,
            seed: std::num::NonZeroU32::new(1),
        });
        assert_eq!(s.want().unwrap(), Want::Write);
        let bind = s.output();
        // Bind: portal "" then statement "s".
        assert_eq!(&bind[5..8], b"\0s\0");
    }

    #[test]
    fn a_query_error_is_reported_and_the_connection_kept() {
        let mut s = ready_session();
        s.start(&Job {
            queries: 3,
            sleep_ms: 0,
            seed: None,
        });
        sent_tags(&mut s);
        feed(&mut s, &[error("ERROR", "boom"), ready()].concat());
        assert_eq!(s.want().unwrap(), Want::Done);
        let err = s.take_sum().unwrap_err().to_string();
        assert_eq!(err, "ERROR: boom");
        assert!(s.reusable());
    }

    #[test]
    fn an_error_while_preparing_makes_the_connection_useless() {
        let mut s = Session::connect(&target(None));
        s.sent();
        feed(&mut s, &[auth(0, b""), ready()].concat());
        sent_tags(&mut s);
        feed(&mut s, &error("ERROR", "relation \"test\" does not exist"));
        let err = s.want().unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        assert!(!s.reusable());
    }

    #[test]
    fn passwords_cleartext_md5_and_none() {
        let mut s = Session::connect(&target(Some("secret")));
        s.sent();
        feed(&mut s, &auth(3, b""));
        assert_eq!(s.want().unwrap(), Want::Write);
        assert_eq!(s.output(), message(b'p', b"secret\0"));

        let mut s = Session::connect(&target(Some("secret")));
        s.sent();
        feed(&mut s, &auth(5, &[1, 2, 3, 4]));
        let hash = md5_hash(b"bob", b"secret", [1, 2, 3, 4]);
        assert_eq!(s.want().unwrap(), Want::Write);
        assert_eq!(s.output(), message(b'p', format!("{hash}\0").as_bytes()));

        let mut s = Session::connect(&target(None));
        s.sent();
        feed(&mut s, &auth(5, &[1, 2, 3, 4]));
        let err = s.want().unwrap_err().to_string();
        assert!(err.contains("--pg URL has none"), "{err}");

        let mut s = Session::connect(&target(Some("x")));
        s.sent();
        feed(&mut s, &auth(10, b"SCRAM-SHA-256\0\0"));
        assert_eq!(s.want().unwrap(), Want::Write);
        assert_eq!(s.output()[0], b'p');
    }

    #[test]
    fn a_lost_connection_is_an_error_and_never_reused() {
        let mut s = ready_session();
        s.start(&Job {
            queries: 1,
            sleep_ms: 0,
            seed: None,
        });
        sent_tags(&mut s);
        let _ = s.read_space();
        let err = s.received(0).unwrap_err();
        assert!(PgError::maybe_stale(&err), "{err}");
        assert!(!s.reusable());
    }

    #[test]
    fn bytes_that_are_not_the_protocol_are_refused() {
        let mut s = Session::connect(&target(None));
        s.sent();
        feed(&mut s, &message(b'D', b"\0\0"));
        assert!(matches!(s.want(), Err(PgError::Protocol(_))));
        assert!(!s.reusable());
    }
}
