//! The routes' parameters, read the same way everywhere: a query string's value, an
//! integer within bounds (a 400 with the reason otherwise), and the bounds themselves.
//! Below the routes, `/db`, `/pg` and the handler, so that each of them reads a parameter
//! without importing another of them.

use std::time::Duration;

/// Rows in the `/db` table.
pub const DB_ROWS: u32 = 1_000_000;
/// Largest id a query starts from, so `LIMIT 10` always finds ten rows (`/db` and `/pg`
/// read the same table).
pub const DB_MAX_START: u32 = DB_ROWS - 10;
/// Default and bounds of `/db?queries=`.
pub const DB_QUERIES_DEFAULT: u32 = 10;
pub const DB_QUERIES_MAX: u32 = 500;
/// Largest `/sleep?ms=`.
pub const SLEEP_MAX_MS: u64 = 10_000;

/// The value of `name` in a query string (`a=1&b=2`), if present.
pub fn query_param<'q>(query: Option<&'q str>, name: &str) -> Option<&'q str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// `name=N` with N in `range`: None when absent, else the value or the reason it is
/// refused (a 400's body). Every integer parameter of the routes is read this way.
pub fn int_param(
    query: Option<&str>,
    name: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Option<Result<u64, String>> {
    let raw = query_param(query, name)?;
    Some(match raw.parse::<u64>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(format!(
            "{name} must be an integer in {}..={}, not {raw:?}",
            range.start(),
            range.end()
        )),
    })
}

/// Parses `/sleep?ms=N`: the wait, or the reason it is refused.
pub fn sleep_param(query: Option<&str>) -> Result<Duration, String> {
    int_param(query, "ms", 0..=SLEEP_MAX_MS)
        .ok_or("missing ms parameter (0..=10000)")?
        .map(Duration::from_millis)
}

/// Parses `queries=N` of `/db` and `/pg` (default 10).
pub fn queries_param(query: Option<&str>) -> Result<u32, String> {
    int_param(query, "queries", 1..=u64::from(DB_QUERIES_MAX))
        .unwrap_or(Ok(u64::from(DB_QUERIES_DEFAULT)))
        .map(|n| n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_params() {
        assert_eq!(query_param(Some("a=1&queries=20"), "queries"), Some("20"));
        assert_eq!(query_param(Some("queries"), "queries"), Some(""));
        assert_eq!(query_param(None, "queries"), None);
        assert_eq!(queries_param(None), Ok(10));
        assert_eq!(queries_param(Some("queries=500")), Ok(500));
        for bad in [
            "queries=0",
            "queries=501",
            "queries=x",
            "queries=-1",
            "queries=",
        ] {
            assert!(queries_param(Some(bad)).is_err(), "{bad}");
        }
        assert_eq!(sleep_param(Some("ms=20")), Ok(Duration::from_millis(20)));
        for bad in ["ms=10001", "ms=-1", "ms=abc", "x=1"] {
            assert!(sleep_param(Some(bad)).is_err(), "{bad}");
        }
    }
}
