//! Helpers shared by the daemon's end-to-end test binaries.

use std::path::{Path, PathBuf};

/// In CI (`CI` set), shared data that is missing fails the test that needs it: a test must never
/// pass there by skipping.
pub fn missing_in_ci(path: &Path) {
    if std::env::var_os("CI").is_some() {
        panic!(
            "{} is missing, and CI must run every test: keep `shared/` beside the clone",
            path.display()
        );
    }
}

/// A corpus file, or `None` (with the reason printed) when `shared/` is not beside the checkout;
/// in CI, a missing file fails the test.
pub fn corpus_file(name: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus")
        .join(name);
    if path.is_file() {
        Some(path)
    } else {
        missing_in_ci(&path);
        eprintln!(
            "skipped: no corpus file {} (CI has shared/ beside the clone)",
            path.display()
        );
        None
    }
}
