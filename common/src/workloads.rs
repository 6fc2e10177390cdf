//! Workloads beyond hello world, as the posts' readers asked for them.
//!
//! - `/sum` — CPU-bound: the sum of 1000 random integers in 100..=999 (`sum=N`), as in the
//!   PHP-FPM/Workerman/Swoole/Go post. The random numbers come from a per-thread generator
//!   (`fastrand`'s thread-local wyrand): no lock, no shared cache line.
//! - `/db?queries=N` — database-bound, as in the gevent/uWSGI/Tornado post: N (default 10,
//!   1..=500) queries `SELECT value FROM test WHERE id >= ? LIMIT 10` on an embedded SQLite
//!   table of 1,000,000 random rows; the body is the sum of the values with 6 decimals. Each
//!   worker thread opens its own read-only connection on first use and prepares the
//!   statement once. The call is synchronous, as the posts' drivers were: what that does to
//!   each architecture is the point (see each server's doc comment and the README).
//! - `/sleep?ms=N` — I/O wait without CPU (0..=10000): the handler returns a reply that
//!   carries the wait, and every runtime waits its native way (see `routes`).
//!
//! The database file is built once (`--db`, with a progress line) before any worker starts;
//! a file that is not an archzoo database is refused with a clear error.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use crate::handler::App;
use crate::params::{DB_MAX_START, DB_ROWS};

const QUERY: &str = "SELECT value FROM test WHERE id >= ?1 LIMIT 10";

/// `/sum`: 1000 random integers in 100..=999, summed.
pub fn sum_body() -> Vec<u8> {
    let total: u32 = (0..1000).map(|_| fastrand::u32(100..=999)).sum();
    format!("sum={total}").into_bytes()
}

thread_local! {
    // One read-only connection per worker thread (and database file), opened on first
    // use; its statement cache keeps the query prepared.
    static DB: RefCell<Option<(PathBuf, Connection)>> = const { RefCell::new(None) };
}

/// `/db`: runs `queries` queries on this thread's connection to `app`'s database and
/// formats the sum.
pub fn db_body(queries: u32, app: &App) -> Result<Vec<u8>, String> {
    let path = app.db.as_deref().ok_or("no database configured (--db)")?;
    app.run_blocking(|| {
        DB.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|(open, _)| open != path) {
                let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let conn = Connection::open_with_flags(path, flags)
                    .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
                *slot = Some((path.to_path_buf(), conn));
            }
            let (_, conn) = slot.as_ref().ok_or("no connection")?;
            let mut stmt = conn.prepare_cached(QUERY).map_err(|e| e.to_string())?;
            let mut total = 0.0f64;
            for _ in 0..queries {
                let start = fastrand::u32(1..=DB_MAX_START);
                let mut rows = stmt.query([start]).map_err(|e| e.to_string())?;
                while let Some(row) = rows.next().map_err(|e| e.to_string())? {
                    total += row.get::<_, f64>(0).map_err(|e| e.to_string())?;
                }
            }
            Ok(format!("{total:.6}").into_bytes())
        })
    })
}

/// Makes sure `path` holds the `/db` table, building it if the file does not exist. Call
/// before forking or spawning workers.
pub fn prepare_db(path: &Path) -> Result<(), String> {
    if !path.exists() {
        build_db(path)?;
    }
    verify_db(path)?;
    Ok(())
}

fn verify_db(path: &Path) -> Result<(), String> {
    let foreign = |why: String| {
        format!(
            "{} is not an archzoo /db database ({why}); delete it or pass another --db",
            path.display()
        )
    };
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| foreign(e.to_string()))?;
    let columns: Vec<(String, String)> = conn
        .prepare("SELECT name, type FROM pragma_table_info('test')")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| foreign(e.to_string()))?;
    let expected = [("id", "INTEGER"), ("value", "REAL")];
    if columns.len() != 2
        || columns
            .iter()
            .zip(expected)
            .any(|((n, t), (en, et))| n != en || t != et)
    {
        return Err(foreign(format!("table test has columns {columns:?}")));
    }
    let rows: u32 = conn
        .query_row("SELECT count(*) FROM test", [], |r| r.get(0))
        .map_err(|e| foreign(e.to_string()))?;
    if rows != DB_ROWS {
        return Err(foreign(format!("{rows} rows instead of {DB_ROWS}")));
    }
    Ok(())
}

/// Builds the table in a temporary file and renames it into place, so that a crash or a
/// concurrent builder never leaves a half-built database behind.
fn build_db(path: &Path) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let tmp = path.with_extension(format!("building-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let result = (|| -> rusqlite::Result<()> {
        let mut conn = Connection::open(&tmp)?;
        conn.execute_batch(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
             CREATE TABLE test (id INTEGER PRIMARY KEY, value REAL);",
        )?;
        let tx = conn.transaction()?;
        {
            let mut insert = tx.prepare("INSERT INTO test (id, value) VALUES (?1, ?2)")?;
            let mut rng = fastrand::Rng::new();
            for id in 1..=DB_ROWS {
                insert.execute(rusqlite::params![id, rng.f64() * 10_000.0])?;
                if id % 250_000 == 0 {
                    eprintln!(
                        "building the /db table in {}: {id}/{DB_ROWS} rows",
                        path.display()
                    );
                }
            }
        }
        tx.commit()
    })();
    match result {
        Ok(()) => std::fs::rename(&tmp, path)
            .map_err(|e| format!("cannot move the database into {}: {e}", path.display())),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(format!("cannot build {}: {e}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_uses_the_database_it_is_given_and_says_when_there_is_none() {
        let err = db_body(1, &App::NONE).unwrap_err();
        assert!(err.contains("--db"), "{err}");
        let missing = App {
            db: Some(std::env::temp_dir().join("archzoo-no-such-dir/none.db")),
            ..App::NONE
        };
        let err = db_body(1, &missing).unwrap_err();
        assert!(err.contains("cannot open"), "{err}");
    }

    #[test]
    fn sum_stays_in_range() {
        for _ in 0..100 {
            let body = String::from_utf8(sum_body()).unwrap();
            let n: u32 = body.strip_prefix("sum=").unwrap().parse().unwrap();
            assert!((100_000..=999_000).contains(&n), "{n}");
        }
    }

    #[test]
    fn a_foreign_file_is_refused_clearly() {
        let path = std::env::temp_dir().join(format!("archzoo-foreign-{}.db", std::process::id()));
        std::fs::write(&path, b"not a database at all").unwrap();
        let err = verify_db(&path).unwrap_err();
        assert!(err.contains("not an archzoo /db database"), "{err}");
        let _ = std::fs::remove_file(&path);
        let other = std::env::temp_dir().join(format!("archzoo-other-{}.db", std::process::id()));
        let conn = Connection::open(&other).unwrap();
        conn.execute_batch("CREATE TABLE test (name TEXT)").unwrap();
        drop(conn);
        let err = verify_db(&other).unwrap_err();
        assert!(err.contains("columns"), "{err}");
        let _ = std::fs::remove_file(&other);
    }
}
