//! Every input that once crashed, froze or exhausted the memory of a `tilec` command (found by
//! the mutation fuzzer in `crates/fuzz`, or by hand while building the limits it checks) is kept
//! in `crates/fuzz/regressions/` with the command on its first line, and replayed here through the
//! real binary under the fuzzer's own time and memory limits: each must end normally, with a
//! result or with diagnostics, never with a panic, an abort or a hang.

use std::path::Path;
use std::time::Duration;

use tilec_fuzz::target::{Limits, Outcome, regressions, run_tilec};

/// Generous for a debug build on a loaded two-core machine; the release build answers each of
/// these within a few seconds, most within milliseconds.
const TIME_LIMIT: Duration = Duration::from_secs(120);

/// The fuzzer's default: enough for any of these inputs when the limits hold, far below what
/// the unbounded versions allocated (up to 2^43 bytes).
const MEMORY_LIMIT_MIB: u64 = 4096;

#[test]
fn every_fuzzer_regression_ends_normally() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions");
    let found = regressions(&dir).unwrap_or_else(|error| panic!("{error}"));
    assert!(
        found.len() >= 10,
        "the regressions folder lost files: {found:?}"
    );
    let limits = Limits {
        time: TIME_LIMIT,
        memory_mib: MEMORY_LIMIT_MIB,
        // The fuzzer's: short, so that a large launch stops quickly.
        emulator_budget: Duration::from_secs(2),
    };
    let mut failures = Vec::new();
    for regression in &found {
        let scratch = tempfile::tempdir().expect("scratch folder");
        let args = regression
            .command
            .args(&regression.path, scratch.path(), &limits);
        let report = run_tilec(
            Path::new(env!("CARGO_BIN_EXE_tilec")),
            &args,
            &limits,
            scratch.path(),
        );
        if !matches!(report.outcome, Outcome::Normal(_)) {
            failures.push(format!(
                "{} ({}): {:?} after {:.1?}\n{}",
                regression.path.display(),
                regression.command.name(),
                report.outcome,
                report.elapsed,
                report.stderr_tail
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
