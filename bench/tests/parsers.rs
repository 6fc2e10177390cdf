//! The ab, wrk and oha parsers, on outputs captured from real runs (tests/fixtures).

use bench::measure::client::ab::parse as parse_ab;
use bench::measure::client::oha::parse as parse_oha;
use bench::measure::client::wrk::parse as parse_wrk;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn ab_keep_alive_run() {
    let o = parse_ab(&fixture("ab_keepalive.txt")).unwrap();
    assert_eq!(o.requests, 222_023);
    assert_eq!(o.rps, 221_984.37);
    assert_eq!((o.failed, o.non_2xx), (0, 0));
    assert_eq!(o.keep_alive_requests, Some(222_023));
    assert_eq!((o.p50_ms, o.p99_ms), (Some(0.0), Some(1.0)));
}

#[test]
fn ab_run_without_keep_alive() {
    let o = parse_ab(&fixture("ab_close.txt")).unwrap();
    assert!(o.requests > 0 && o.rps > 0.0);
    assert_eq!(o.keep_alive_requests, None);
    assert!(o.p99_ms.is_some());
}

#[test]
fn ab_counts_non_2xx() {
    let o = parse_ab(&fixture("ab_non2xx.txt")).unwrap();
    assert_eq!((o.requests, o.non_2xx, o.failed), (2000, 2000, 0));
}

#[test]
fn wrk_keep_alive_run_with_latency_units() {
    let text = fixture("wrk_keepalive.txt");
    let o = parse_wrk(&text).unwrap();
    assert!(o.requests > 0 && o.rps > 0.0);
    assert_eq!((o.failed, o.timeouts, o.non_2xx), (0, 0, 0));
    let p99 = o.p99_ms.unwrap();
    assert!(p99 > 0.0 && p99 < 1000.0, "{p99}");
}

#[test]
fn wrk_close_run_mixes_us_and_ms() {
    let o = parse_wrk(&fixture("wrk_close.txt")).unwrap();
    assert_eq!(o.requests, 38_815);
    assert_eq!(o.rps, 35_276.71);
    assert!((o.p50_ms.unwrap() - 0.182).abs() < 1e-9);
    assert!((o.p99_ms.unwrap() - 1.37).abs() < 1e-9);
}

#[test]
fn wrk_counts_non_2xx_and_socket_errors() {
    let o = parse_wrk(&fixture("wrk_non2xx.txt")).unwrap();
    assert_eq!(o.non_2xx, o.requests);
    let e = parse_wrk(&fixture("wrk_errors.txt")).unwrap();
    assert_eq!((e.requests, e.failed, e.timeouts), (0, 31_391, 0));
}

#[test]
fn garbage_is_an_error_not_a_zero() {
    assert!(parse_ab("apr_socket_connect(): Connection refused (111)").is_err());
    assert!(parse_wrk("unable to connect to 127.0.0.1:1 Connection refused").is_err());
}

/// oha 1.16 at `-q 5000 --latency-correction` for 1 s against prefork-eventloop: latencies
/// arrive in seconds and are kept in milliseconds.
#[test]
fn oha_open_loop_run() {
    let o = parse_oha(&fixture("oha_rate.json")).unwrap();
    assert_eq!(o.requests, 4996);
    assert!((o.rps - 4987.47).abs() < 0.01);
    assert_eq!((o.failed, o.non_2xx, o.timeouts), (0, 0, 0));
    let ms = |v: Option<f64>| (v.unwrap() * 1e3).round() / 1e3;
    assert_eq!(ms(o.p50_ms), 0.092);
    assert_eq!(ms(o.p90_ms), 0.189);
    assert_eq!(ms(o.p99_ms), 0.379);
    assert_eq!(ms(o.p999_ms), 0.654);
    assert_eq!(ms(o.max_ms), 0.705);
}

/// Every request refused: no responses, each error counted.
#[test]
fn oha_counts_errors_apart_from_responses() {
    let o = parse_oha(&fixture("oha_refused.json")).unwrap();
    assert_eq!(o.requests, 0);
    assert_eq!(o.failed, 10);
    assert_eq!(o.rps, 0.0, "attempts that failed are not throughput");
}

#[test]
fn oha_without_a_report_is_an_error() {
    assert!(parse_oha("error: connection refused").is_err());
}
