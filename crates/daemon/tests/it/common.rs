//! Helpers shared by the daemon's end-to-end tests: the in-repository fixtures, and the corpus
//! beside the clone (`../shared/corpus`), which is a conformance suite: when it is missing, CI fails
//! and any other checkout says so once per suite ([`skip_suite`]), never silently per test.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A file of the repository's `tests/fixtures/` (TileLang written for tilec's tests), by its path
/// relative to that folder.
pub(crate) fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(relative)
}

/// The corpus folder beside the clone, where it would be.
pub(crate) fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus")
}

/// In CI (`CI` set), shared data that is missing fails the test that needs it: a test must never
/// pass there by skipping.
pub(crate) fn missing_in_ci(path: &Path) {
    if std::env::var_os("CI").is_some() {
        panic!(
            "{} is missing, and CI must run every test: keep `shared/` beside the clone",
            path.display()
        );
    }
}

/// Records that a test of the `shared/corpus` conformance suite did not run because `missing` is
/// absent: in CI the test fails; elsewhere the first skip in this binary prints one line (past the
/// harness's output capture, which would hide it), and later skips print nothing.
pub(crate) fn skip_suite(missing: &Path) {
    static SKIPPED: Mutex<bool> = Mutex::new(false);
    missing_in_ci(missing);
    let mut said = SKIPPED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if *said {
        return;
    }
    *said = true;
    let _ = writeln!(
        std::io::stderr().lock(),
        "SKIPPED conformance suite `shared/corpus`: {} is missing, so its tests in this binary \
         check nothing; put `shared/` beside the clone (with CI=true this is a failure)",
        missing.display()
    );
}

/// A corpus file, or `None` when `shared/` is not beside the checkout ([`skip_suite`]).
pub(crate) fn corpus_file(name: &str) -> Option<PathBuf> {
    let path = corpus_dir().join(name);
    if path.is_file() {
        Some(path)
    } else {
        skip_suite(&path);
        None
    }
}
