//! Every row of the variant table × every rule that applies to it, generated at run time
//! from `variants::VARIANTS` and `conformance::rules::RULES`: a new server or mode joins
//! the suite with its row in the table. A test is named `<row>::<rule>`; a pair whose rule
//! does not apply to the row is not a test at all (it could only pass vacuously) — the
//! suite names those pairs, with the reason, on stderr before it runs. The rules that
//! measure CPU per request (`MEASURED`) run after the others, one at a time.

use conformance::rules::{Rule, MEASURED, RULES};
use conformance::{Server, Spec};
use libtest_mimic::{Arguments, Failed, Trial};
use variants::VARIANTS;

fn main() {
    let args = Arguments::from_args();
    let (mut together, mut not_applicable) = trials(RULES);
    together.push(Trial::test(
        "thread-per-core::rows_use_the_receive_they_name",
        thread_per_core_rows_use_the_receive_they_name,
    ));
    let (measured, measured_not_applicable) = trials(MEASURED);
    not_applicable.extend(measured_not_applicable);
    if !args.list {
        eprintln!(
            "{} rule/row pairs do not apply and are not tests:",
            not_applicable.len()
        );
        for line in &not_applicable {
            eprintln!("  {line}");
        }
    }
    let conclusion = libtest_mimic::run(&args, together);
    // The rules that measure CPU per request, after the others and one at a time: see
    // `MEASURED`.
    let alone = Arguments {
        test_threads: Some(1),
        ..args.clone()
    };
    let measured = libtest_mimic::run(&alone, measured);
    // The /pg rules' cluster, if they started it.
    conformance::database::stop_database();
    conclusion.exit_if_failed();
    measured.exit();
}

/// Every row of the variant table × every rule of `rules` that applies to it, and the
/// pairs that do not apply, with the reason.
fn trials(rules: &[Rule]) -> (Vec<Trial>, Vec<String>) {
    let mut trials = Vec::new();
    let mut not_applicable = Vec::new();
    for variant in VARIANTS {
        for rule in rules {
            let name = format!("{}::{}", variant.name, rule.name);
            match (rule.applies)(variant) {
                Ok(()) => {
                    let (variant, run) = (*variant, rule.run);
                    trials.push(Trial::test(name, move || {
                        run(&variant);
                        Ok(())
                    }));
                }
                Err(why) => not_applicable.push(format!("{name}: {why}")),
            }
        }
    }
    (trials, not_applicable)
}

/// The suite's thread-per-core rows must exercise the receive they are named for: on a
/// kernel without buffer rings the server would quietly fall back to readiness polls, and
/// both rows would test the same path.
fn thread_per_core_rows_use_the_receive_they_name() -> Result<(), Failed> {
    for (row, expected) in [
        (
            "thread-per-core",
            "io_uring with multishot accept and receive",
        ),
        (
            "thread-per-core/readiness",
            "io_uring with readiness-poll receive,",
        ),
    ] {
        let spec: Spec = variants::Variant::named(row);
        let server = Server::start(&spec, &[]);
        let lines = server.stderr_lines();
        if !lines.iter().any(|l| l.contains(expected)) {
            return Err(format!("{row}: start-up line lacks {expected:?}: {lines:?}").into());
        }
    }
    Ok(())
}
