//! `/pg` the Go way: `tokio-postgres` (as `database/sql` with the pq driver), a pool per
//! process shared by every worker thread (as one `sql.DB` is), and a task that awaits each
//! answer while the scheduler runs the other connections — on this thread or, by
//! stealing, on another.
//!
//! Same statements, same ids, same sum as every other runtime (`common::pg`); only the
//! client library and the way of waiting differ. `tokio-postgres` runs each connection's
//! socket in a task of its own (spawned here), so an answer crosses from that task to the
//! request's: the cost of the library's design, measured with the rest.

use std::sync::{Mutex, OnceLock};

use common::pg::{self, wire, Job, PgError, Target, CONNECT_LIMIT, READ_LIMIT};
use tokio::sync::Semaphore;
use tokio::time::timeout;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls, Statement};

/// One pooled connection with its two statements, prepared when it was opened.
struct Pooled {
    client: Client,
    query: Statement,
    slow: Statement,
}

/// The process's pool: `--db-pool` connections at most, opened on demand.
pub struct Pool {
    target: Target,
    idle: Mutex<Vec<Pooled>>,
    gate: Semaphore,
}

/// The process's pool, made on first use.
fn pool(target: &Target) -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        target: target.clone(),
        idle: Mutex::new(Vec::new()),
        gate: Semaphore::new(target.pool),
    })
}

/// Runs `job` on a pooled connection: the task waits, the worker thread does not.
pub async fn run(target: Option<&Target>, job: &Job) -> Result<f64, PgError> {
    pool(target.ok_or(PgError::NotConfigured)?).run(job).await
}

impl Pool {
    async fn run(&self, job: &Job) -> Result<f64, PgError> {
        let _permit = match timeout(self.target.wait, self.gate.acquire()).await {
            Ok(Ok(permit)) => permit,
            _ => return Err(PgError::PoolTimeout(self.target.wait)),
        };
        let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let reused = pooled.is_some();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => self.open().await?,
        };
        let mut result = query(&conn, job).await;
        // A pooled connection may have died while idle (the database restarted): once
        // more on a new one before answering 503.
        if reused && result.as_ref().is_err_and(PgError::maybe_stale) {
            conn = self.open().await?;
            result = query(&conn, job).await;
        }
        if !conn.client.is_closed() {
            self.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(conn);
        }
        result
    }

    async fn open(&self) -> Result<Pooled, PgError> {
        let mut config: tokio_postgres::Config = self
            .target
            .config
            .parse()
            .map_err(|e| PgError::Protocol(format!("{e}")))?;
        config.connect_timeout(CONNECT_LIMIT);
        let (client, connection) = timeout(CONNECT_LIMIT, config.connect(NoTls))
            .await
            .map_err(|_| PgError::Unreachable(std::io::ErrorKind::TimedOut.into()))?
            .map_err(|e| match e.as_db_error() {
                Some(_) => server_error(e),
                None => PgError::Unreachable(std::io::Error::other(e.to_string())),
            })?;
        // The connection's socket lives in its own task until the client is dropped.
        tokio::spawn(connection);
        let query = client
            .prepare_typed(wire::QUERY, &[Type::INT4])
            .await
            .map_err(server_error)?;
        let slow = client
            .prepare_typed(wire::SLOW_QUERY, &[Type::INT4, Type::FLOAT8])
            .await
            .map_err(server_error)?;
        Ok(Pooled {
            client,
            query,
            slow,
        })
    }
}

/// The job's sequential queries; each answer is awaited before the next is sent.
async fn query(conn: &Pooled, job: &Job) -> Result<f64, PgError> {
    let mut rng = pg::rng_for(job);
    let mut sum = 0.0;
    for i in 0..job.queries {
        let id = pg::next_id(&mut rng) as i32;
        let rows = if i == 0 && job.sleep_ms > 0 {
            let sleep = f64::from(job.sleep_ms) / 1000.0;
            timeout(READ_LIMIT, conn.client.query(&conn.slow, &[&id, &sleep])).await
        } else {
            timeout(READ_LIMIT, conn.client.query(&conn.query, &[&id])).await
        };
        let rows = rows
            .map_err(|_| PgError::Io(std::io::ErrorKind::TimedOut.into()))?
            .map_err(server_error)?;
        for row in rows {
            sum += row.try_get::<_, f64>(0).map_err(server_error)?;
        }
    }
    Ok(sum)
}

/// The library's error as `common::pg` names it: what the database said, or a lost
/// connection.
fn server_error(e: tokio_postgres::Error) -> PgError {
    match e.as_db_error() {
        Some(db) => PgError::Server(format!("{}: {}", db.severity(), db.message())),
        None if e.is_closed() => PgError::Io(std::io::Error::other(e.to_string())),
        None => PgError::Protocol(e.to_string()),
    }
}
