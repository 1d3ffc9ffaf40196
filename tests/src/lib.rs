//! End-to-end tests of tilec live in `tests/`; this library only shares helpers between them: finding
//! the shared corpus, loading a corpus file into a database, running the whole pipeline, and printing
//! diagnostics in a form that makes a failing assertion readable.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use tilec_db::{FileDiagnostic, RootDatabase, SourceFile};

/// The corpus folder (`shared/corpus` beside the clone), or `None` when this checkout has none.
///
/// CI keeps `shared/` next to the repository, so the path is relative to this crate's manifest.
/// A checkout without it cannot run the corpus tests; callers then skip with the reason printed
/// rather than fail, because the absence of data says nothing about the compiler.
pub fn corpus_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/corpus"));
    if dir.join("EXPECTED.toml").is_file() {
        Some(dir)
    } else {
        eprintln!(
            "skipping: the shared corpus is missing (looked for {}/EXPECTED.toml); \
             these tests need `shared/` beside the repository clone",
            dir.display()
        );
        None
    }
}

/// Reads a corpus file by its path relative to the corpus folder.
pub fn read_corpus(dir: &Path, relative: &str) -> String {
    let path = dir.join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("cannot read corpus file {}: {error}", path.display()))
}

/// Creates the input for a file with the given text and no tilec.toml instances.
pub fn source_file(db: &RootDatabase, path: impl Into<PathBuf>, text: impl Into<String>) -> SourceFile {
    SourceFile::new(db, path.into(), text.into(), Vec::new())
}

/// Loads a corpus file into a fresh database.
pub fn load_corpus(dir: &Path, relative: &str) -> (RootDatabase, SourceFile) {
    let db = RootDatabase::default();
    let file = source_file(&db, dir.join(relative), read_corpus(dir, relative));
    (db, file)
}

/// Runs every query a client may ask for on a file: its diagnostics, its instance reports, and the
/// world and checks of every instance. Returns the diagnostics.
pub fn run_pipeline(db: &RootDatabase, file: SourceFile) -> Vec<FileDiagnostic> {
    let diagnostics = tilec_db::file_diagnostics(db, file).clone();
    let _reports = tilec_db::instance_reports(db, file);
    for &instance in tilec_db::instances(db, file) {
        let _world = tilec_db::kernel_world(db, instance);
        let _checks = tilec_db::instance_checks(db, instance);
        let _positions = tilec_db::kernel_positions(db, instance);
    }
    diagnostics
}

/// The 1-based line on which a byte offset lies.
pub fn line_of(db: &RootDatabase, file: SourceFile, offset: u32) -> usize {
    tilec_db::line_column(db, file, offset).0
}

/// One diagnostic as a line of text: `12:13 error undefined-name [matmul#0] message (help: ...)`,
/// followed by its related locations.
pub fn describe(db: &RootDatabase, file: SourceFile, diagnostic: &FileDiagnostic) -> String {
    let (line, column) = tilec_db::line_column(db, file, diagnostic.span.start);
    let mut out = format!("{line}:{column} {} {}", diagnostic.severity, diagnostic.code);
    if let Some(kernel) = &diagnostic.kernel {
        let _ = write!(out, " [{kernel}");
        if let Some(index) = diagnostic.instance {
            let _ = write!(out, "#{index}");
        }
        out.push(']');
    }
    let _ = write!(out, " {}", diagnostic.message);
    if let Some(help) = &diagnostic.help {
        let _ = write!(out, " (help: {help})");
    }
    for related in &diagnostic.related {
        let (line, column) = tilec_db::line_column(db, file, related.span.start);
        let _ = write!(out, "\n    related {line}:{column} {}", related.message);
    }
    out
}

/// Every diagnostic of a list, one per line, for failure messages.
pub fn describe_all(db: &RootDatabase, file: SourceFile, diagnostics: &[FileDiagnostic]) -> String {
    if diagnostics.is_empty() {
        return "    (no diagnostics)".to_owned();
    }
    diagnostics.iter().map(|diagnostic| format!("    {}", describe(db, file, diagnostic))).collect::<Vec<_>>().join("\n")
}
