//! Helpers shared by the daemon's end-to-end test binaries.

use std::path::{Path, PathBuf};

/// A corpus file, or `None` (with the reason printed) when `shared/` is not beside the checkout.
pub fn corpus_file(name: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus")
        .join(name);
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "skipped: no corpus file {} (CI has shared/ beside the clone)",
            path.display()
        );
        None
    }
}
