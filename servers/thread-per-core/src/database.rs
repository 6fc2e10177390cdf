//! `/pg` the thread-per-core way: each shard keeps its own pool of connections to the
//! database (nothing shared between cores, as in Seastar), and a request's task awaits
//! each answer on glommio's io_uring sockets while the shard runs its other connections.
//!
//! The protocol is `common::pg::wire`'s, driven by its asynchronous driver over glommio's
//! stream: the same messages in the same order as every other runtime.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;

use common::pg::wire::{drive_async, Session};
use common::pg::{Job, PgError, Target, CONNECT_LIMIT, READ_LIMIT};
use glommio::net::TcpStream;
use glommio::sync::Semaphore;

/// One shard's pool: `--db-pool` connections at most, opened on demand.
struct Pool {
    target: Target,
    idle: RefCell<Vec<(TcpStream, Session)>>,
    gate: Semaphore,
}

thread_local! {
    // A shard is a thread: its pool is its own.
    static POOL: OnceCell<Rc<Pool>> = const { OnceCell::new() };
}

/// Runs `job` on one of this shard's connections.
pub async fn run(target: Option<&Target>, job: &Job) -> Result<f64, PgError> {
    let target = target.ok_or(PgError::NotConfigured)?;
    let pool = POOL.with(|p| {
        p.get_or_init(|| {
            Rc::new(Pool {
                target: target.clone(),
                idle: RefCell::new(Vec::new()),
                gate: Semaphore::new(target.pool as u64),
            })
        })
        .clone()
    });
    pool.run(job).await
}

impl Pool {
    async fn run(&self, job: &Job) -> Result<f64, PgError> {
        let wait = self.target.wait;
        let Ok(_permit) = glommio::timer::timeout(wait, self.gate.acquire_permit(1)).await else {
            return Err(PgError::PoolTimeout(wait));
        };
        let pooled = self.idle.borrow_mut().pop();
        let reused = pooled.is_some();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => self.open().await?,
        };
        let mut result = query(&mut conn, job).await;
        // A pooled connection may have died while idle (the database restarted): once
        // more on a new one before answering 503.
        if reused && result.as_ref().is_err_and(PgError::maybe_stale) {
            conn = self.open().await?;
            result = query(&mut conn, job).await;
        }
        if conn.1.reusable() {
            self.idle.borrow_mut().push(conn);
        }
        result
    }

    async fn open(&self) -> Result<(TcpStream, Session), PgError> {
        let unreachable = |e: glommio::GlommioError<()>| PgError::Unreachable(e.into());
        let mut stream = TcpStream::connect_timeout(self.target.addr, CONNECT_LIMIT)
            .await
            .map_err(unreachable)?;
        stream.set_nodelay(true).map_err(unreachable)?;
        stream
            .set_read_timeout(Some(READ_LIMIT))
            .map_err(unreachable)?;
        stream
            .set_write_timeout(Some(READ_LIMIT))
            .map_err(unreachable)?;
        let mut session = Session::connect(&self.target);
        drive_async(&mut stream, &mut session).await?;
        Ok((stream, session))
    }
}

async fn query(conn: &mut (TcpStream, Session), job: &Job) -> Result<f64, PgError> {
    let (stream, session) = conn;
    session.start(job);
    drive_async(stream, session).await?;
    session.take_sum()
}
