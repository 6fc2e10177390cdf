//! `--profile`'s reading of perf samples: folding a recorded `perf script` (a real one,
//! cut to seven samples of `work-stealing` answering `/json`), sorting each sample into a
//! component, and drawing the graphs. A profiled run end to end is in quick_run.rs.

use bench::measure::profile;
use bench::model::profile::{COMPONENTS, HZ};
use bench::write::profile::{differential, flamegraph};

fn fixture() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/perf_script.txt"
    ))
    .unwrap()
}

/// The folded stack whose leaf is `leaf`.
fn stack_ending<'a>(folded: &'a [(String, u64)], leaf: &str) -> &'a str {
    folded
        .iter()
        .map(|(s, _)| s.as_str())
        .find(|s| s.rsplit(';').next() == Some(leaf))
        .unwrap_or_else(|| panic!("no stack ending in {leaf}: {folded:#?}"))
}

#[test]
fn perf_script_folds_into_one_stack_per_sample_root_first() {
    let folded = profile::fold(&fixture()).unwrap();
    assert_eq!(folded.len(), 7, "{folded:#?}");
    assert!(folded.iter().all(|(_, n)| *n == 1));
    // The process name is the root; kernel frames are marked, and so are inlined ones.
    let kernel = stack_ending(&folded, "do_syscall_64_[k]");
    assert!(kernel.starts_with("ws-worker;"), "{kernel}");
    assert!(
        kernel.contains(";tokio::runtime::io::driver::Driver::turn;epoll_wait;"),
        "{kernel}"
    );
    let inlined = stack_ending(&folded, "mi_free_ex_[i]");
    assert!(inlined.contains(";mi_free;"), "{inlined}");
}

#[test]
fn each_sample_goes_to_the_component_whose_code_it_is() {
    let folded = profile::fold(&fixture()).unwrap();
    let of = |leaf: &str| COMPONENTS[profile::component(stack_ending(&folded, leaf))];
    // In the kernel, whatever called it.
    assert_eq!(of("do_syscall_64_[k]"), "kernel");
    // libc's epoll_wait wrapper itself.
    assert_eq!(of("epoll_wait"), "libc");
    // mimalloc, though inlined into its own mi_free.
    assert_eq!(of("mi_free_ex_[i]"), "allocator");
    assert_eq!(
        of("common::codec::Conn<M>::read_deadline"),
        "codec & handler"
    );
    assert_eq!(
        of("tokio::runtime::scheduler::multi_thread::worker::run"),
        "runtime & loop"
    );
    // An inlined frame with only a short name says nothing: the function it was inlined
    // into (tokio's worker loop) does.
    assert_eq!(of("run_[i]"), "runtime & loop");
    // The vDSO's clock read, on behalf of std::time::Instant::now: the kernel's code, in
    // user mode (inferno marks it a kernel frame).
    assert_eq!(of("__vdso_clock_gettime_[k]"), "libc");
}

#[test]
fn a_profile_counts_microseconds_per_request_by_component() {
    let folded = profile::fold(&fixture()).unwrap();
    // 7 samples at 999 Hz over 7 requests: 1/999 s each.
    let p = profile::profile(folded, 7);
    let us = 1e6 / f64::from(HZ);
    assert_eq!(p.samples, 7);
    assert!((p.us_per_req - us).abs() < 1e-9, "{}", p.us_per_req);
    let by: Vec<(&str, f64)> = p
        .components
        .iter()
        .map(|(n, v)| (n.as_str(), (v / us * 7.0).round()))
        .collect();
    assert_eq!(
        by,
        vec![
            ("kernel", 1.0),
            ("codec & handler", 1.0),
            ("runtime & loop", 2.0),
            ("allocator", 1.0),
            ("libc", 2.0),
            ("other", 0.0),
        ]
    );
}

#[test]
fn flame_graphs_are_drawn_per_request_and_differentially() {
    let dir = std::env::temp_dir().join(format!("archzoo-flame-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let folded = profile::fold(&fixture()).unwrap();
    let one = profile::profile(folded.clone(), 7);
    // The same samples over half the requests: twice the cost of each.
    let twice = profile::profile(folded, 3);
    let single = dir.join("one.svg");
    let diff = dir.join("diff.svg");
    flamegraph(&one, "one", &single).unwrap();
    differential(&one, &twice, "one → twice", &diff).unwrap();
    let single = std::fs::read_to_string(&single).unwrap();
    let diff = std::fs::read_to_string(&diff).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(single.starts_with("<?xml") && single.contains("</svg>"));
    assert!(single.contains("ns/request"), "the unit is per request");
    assert!(
        single.contains("read_deadline"),
        "the codec's frame is drawn"
    );
    // Every frame of the second costs more: the differential graph is red, not blue.
    assert!(diff.contains("</svg>"));
    assert!(
        diff.contains("rgb(255,"),
        "no red frame in the differential graph"
    );
}

#[test]
fn kernel_time_is_split_by_the_system_call_it_served() {
    let folded = profile::fold(&fixture()).unwrap();
    let kernel = stack_ending(&folded, "do_syscall_64_[k]");
    // This sample was taken on the way into the kernel, before the syscall's own frame.
    assert_eq!(profile::syscall_of(kernel), Some("syscall entry"));
    let k = |frames: &str| {
        let frames: Vec<String> = frames.split(';').map(|f| format!("{f}_[k]")).collect();
        format!("ws;main;libc;{}", frames.join(";"))
    };
    let epoll =
        k("entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_epoll_wait;do_epoll_wait");
    assert_eq!(profile::syscall_of(&epoll), Some("epoll_wait"));
    // Where the compiler folded __x64_sys_writev away, the frame under do_syscall_64.
    let writev = k("entry_SYSCALL_64_after_hwframe;do_syscall_64;do_writev;vfs_writev");
    assert_eq!(profile::syscall_of(&writev), Some("writev"));
    // io_uring completions run as task work on the way back to user space.
    let task =
        k("entry_SYSCALL_64_after_hwframe;do_syscall_64;exit_to_user_mode_loop;task_work_run");
    assert_eq!(profile::syscall_of(&task), Some("task work"));
    let irq = k("asm_sysvec_apic_timer_interrupt;sysvec_apic_timer_interrupt");
    assert_eq!(profile::syscall_of(&irq), None);
    let p = profile::profile(
        vec![(epoll, 3), (writev, 2), (irq, 1), (kernel.to_string(), 1)],
        1_000,
    );
    let names: Vec<&str> = p
        .kernel_by_syscall
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(
        names,
        ["epoll_wait", "writev", "no syscall", "syscall entry"]
    );
}
