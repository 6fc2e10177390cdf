//! Every server binary × every rule. A server joins the suite with one row in `suite!`
//! below; a failing test is named `<row>::<rule>`.

use conformance::{rules, Spec};

macro_rules! suite {
    ($($row:ident => $spec:expr;)*) => {$(
        mod $row {
            use super::*;
            const SPEC: Spec = $spec;
            suite!(@rules
                root_returns_hello_world,
                plaintext_returns_hello_world,
                json_returns_message,
                unknown_path_is_404,
                date_header_is_refreshed_every_second,
                http11_keeps_alive_by_default,
                http11_connection_close_closes,
                http10_closes_without_keep_alive,
                http10_keep_alive_is_echoed,
                connection_tokens_are_case_insensitive,
                pipelined_16_answered_in_order,
                request_one_byte_at_a_time,
                head_has_no_body_then_next_request,
                post_with_content_length_then_next_request,
                post_chunked_then_next_request,
                expect_continue_gets_100,
                malformed_request_line_is_400,
                malformed_header_is_400,
                head_over_8k_is_431,
                over_64_headers_is_431,
                uri_over_8k_is_414,
                content_length_with_transfer_encoding_is_400,
                repeated_content_length_is_400,
                non_numeric_content_length_is_400,
                transfer_encoding_other_than_chunked_is_400,
                transfer_encoding_on_http10_is_400,
                invalid_chunk_size_is_400,
                http11_without_host_is_400,
                two_host_headers_is_400,
                body_over_1mib_is_413,
                unsupported_version_is_505,
                unknown_method_is_501,
                client_vanishing_mid_request_is_harmless,
                malformed_corpus_is_refused,
                slow_head_gets_408_after_header_timeout,
                a_client_that_never_reads_is_dropped,
                stalled_readers_do_not_starve_others,
                idle_keep_alive_closes_after_idle_timeout,
                two_workers_both_serve,
                sigterm_exits_zero_leaving_no_process,
                sigterm_finishes_requests_in_flight,
                sigterm_under_load_drops_no_accepted_request,
                bad_flag_is_one_line_and_nonzero,
                busy_port_is_one_line_and_nonzero,
                sum_returns_a_plausible_total,
                db_sums_ten_rows_per_query,
                db_rejects_bad_queries_with_400,
                sleep_waits_while_others_are_served,
                sleep_rejects_bad_ms_with_400,
                framework_stack_serves_the_same_bodies,
                killed_worker_is_restarted,
                killed_worker_under_load_spares_the_others,
                master_killed_leaves_no_worker_behind,
                max_conns_leaves_new_connections_queued,
                accept_errors_back_off,
                open_file_limit_is_raised,
                worker_dying_mid_request_answers_502,
                listening_sockets_match_the_model,
                ab_without_keep_alive,
                ab_with_keep_alive,
                wrk_keep_alive,
            );
        }
    )*};
    (@rules $($rule:ident),* $(,)?) => {$(
        #[test]
        fn $rule() {
            rules::$rule(&SPEC);
        }
    )*};
}

suite! {
    prefork_blocking => Spec {
        one_conn_per_worker: true,
        processes: true,
        ..Spec::shared("prefork-blocking", &[])
    };
    work_stealing => Spec::shared("work-stealing", &[]);
    coroutine_reuseport => Spec {
        processes: true,
        reuseport: true,
        ..Spec::shared("coroutine-reuseport", &[])
    };
    thread_per_core => Spec { reuseport: true, ..Spec::shared("thread-per-core", &[]) };
    thread_per_core_readiness => Spec {
        reuseport: true,
        ..Spec::shared("thread-per-core", &["--receive", "readiness"])
    };
    reactor_workers => Spec {
        processes: true,
        ipc: true,
        ..Spec::shared("reactor-workers", &[])
    };
    reactor_workers_fd_modulo => Spec {
        processes: true,
        ipc: true,
        ..Spec::shared("reactor-workers", &["--dispatch", "fd-modulo"])
    };
    reactor_workers_idle_2_reactors => Spec {
        processes: true,
        ipc: true,
        ..Spec::shared("reactor-workers", &["--dispatch", "idle", "--reactors", "2"])
    };
    prefork_eventloop => Spec { processes: true, ..Spec::shared("prefork-eventloop", &[]) };
    prefork_eventloop_reuseport => Spec {
        processes: true,
        reuseport: true,
        ..Spec::shared("prefork-eventloop", &["--reuseport"])
    };
    work_stealing_hyper => Spec { hyper: true, ..Spec::shared("work-stealing", &["--codec", "hyper"]) };
}

/// The suite's thread-per-core rows must exercise the receive they are named for: on a
/// kernel without buffer rings the server would quietly fall back to readiness polls, and
/// both rows would test the same path.
#[test]
fn thread_per_core_rows_use_the_receive_they_name() {
    use conformance::Server;
    for (args, expected) in [
        (&[][..], "io_uring with multishot receive"),
        (
            &["--receive", "readiness"][..],
            "io_uring with readiness-poll receive,",
        ),
    ] {
        let spec = Spec::shared("thread-per-core", args);
        let server = Server::start(&spec, &[]);
        let lines = server.stderr_lines();
        assert!(
            lines.iter().any(|l| l.contains(expected)),
            "start-up line lacks {expected:?}: {lines:?}"
        );
    }
}
