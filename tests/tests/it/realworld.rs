//! TileLang's own examples (`shared/realworld/tilelang-examples/`, code nobody wrote for tilec)
//! against `tests/realworld/EXPECTED.toml`: per file, the instances tilec finds (from a call site,
//! or generic, with what is symbolic and assumed) and every remaining error with the reason it is
//! there. Any change to that table fails the test, so progress and regressions are both visible;
//! `TILEC_BLESS=1 cargo test -p tilec-tests --test it realworld` rewrites the table, to be committed
//! after reading its diff.
//!
//! The files are read from `shared/` beside the clone and never copied into the repository. When
//! they are missing the test fails in CI (`CI` set); elsewhere the suite is reported skipped in one
//! line (`tilec_tests::skip_suite`).

use std::path::{Path, PathBuf};

use tilec_db::{InstanceReport, RootDatabase, file_diagnostics, instance_reports, outline};
use tilec_frontend::InstanceOrigin;
use tilec_ir::Code;
use tilec_tests::{
    diff_lines, int, kernel_files, line_of, on_analysis_stack, out_of_scope, realworld_dir,
    source_file,
};

/// Why an error remains, by what its message says: a feature another issue adds, or a limit.
const REASONS: [(&str, &str); 18] = [
    (
        "needs an NVIDIA Blackwell GPU",
        "hardware: Blackwell-only operations, compiled for sm_90",
    ),
    (
        "is not supported by tilec yet",
        "language: an operation tilec does not lower yet",
    ),
    (
        "is not a TileLang operation tilec knows",
        "language: an operation tilec does not know yet",
    ),
    (
        "a module function has no attribute",
        "language: a TileLang module attribute not modelled",
    ),
    (
        "cannot be used here: it is `",
        "imports: a name from another module",
    ),
    (
        "slice bounds must be integer",
        "dynamic shapes: a run-time scalar as a slice bound",
    ),
    (
        "an index must be an integer expression, found a runtime",
        "dynamic shapes: a run-time scalar as an index",
    ),
    (
        "loop extents must be integers, found a runtime",
        "dynamic shapes: a run-time scalar as a loop extent",
    ),
    (
        "takes two integers",
        "dynamic shapes: a run-time scalar in an index computation",
    ),
    (
        "loop over a runtime condition",
        "dynamic shapes: a `while` on a run-time value",
    ),
    (
        "layout-conflict",
        "layout inference: disagrees with TileLang",
    ),
    (
        "uneven-partition",
        "layout inference: disagrees with TileLang",
    ),
    (
        "assertion failed",
        "meta-Python: an assumed value the kernel rejects, or an unmodelled check",
    ),
    ("of several items", "language: `with` of several items"),
    (
        "must be a buffer or a region",
        "language: a buffer form tilec does not model",
    ),
    (
        "expected a dtype",
        "meta-Python: a dtype tilec cannot evaluate",
    ),
    (
        "cannot evaluate this dtype",
        "meta-Python: a dtype tilec cannot evaluate",
    ),
    (
        "is not supported by tilec",
        "meta-Python: a construct tilec does not evaluate yet",
    ),
];

fn expected_path() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/realworld/EXPECTED.toml"
    ))
}

fn reason(code: Code, message: &str) -> &'static str {
    REASONS
        .iter()
        .find(|(pattern, _)| message.contains(pattern) || code.name() == *pattern)
        .map_or("unclassified", |(_, why)| *why)
}

fn describe_instance(
    db: &RootDatabase,
    file: tilec_db::SourceFile,
    report: &InstanceReport,
) -> String {
    let origin = match &report.origin {
        InstanceOrigin::CallSite(span) => format!("call at line {}", line_of(db, file, span.start)),
        InstanceOrigin::Manifest => "tilec.toml".to_owned(),
        InstanceOrigin::Defaults => "no call site".to_owned(),
    };
    let mut text = format!("{}#{} ({origin})", report.kernel, report.index);
    if !report.symbolic.is_empty() {
        text.push_str(&format!(", symbolic {}", report.symbolic.join(" ")));
    }
    if !report.assumed.is_empty() {
        let assumed: Vec<String> = report
            .assumed
            .iter()
            .map(|arg| format!("{}={}", arg.name, arg.value))
            .collect();
        text.push_str(&format!(", assumed {}", assumed.join(" ")));
    }
    text.push_str(if report.has_errors { ": error" } else { ": ok" });
    text
}

/// What tilec finds in one file: its table entry, and whether it has an error.
struct FileResult {
    entry: toml::Table,
    clean: bool,
    instances: usize,
    missing_arguments: usize,
}

fn analyse(dir: &Path, relative: &str) -> FileResult {
    let text = std::fs::read_to_string(dir.join(relative)).expect("a real-world file is readable");
    let mut db = RootDatabase::default();
    let file = source_file(&db, dir.join(relative), text);
    // Sibling modules the example imports are read as `tilec check` reads them.
    tilec_lsp::workspace::load_imported_files(&mut db, &[file], &|_| false);
    let mut entry = toml::Table::new();
    if let Some(why) = out_of_scope(relative) {
        entry.insert("out_of_scope".to_owned(), why.into());
    }
    let kernels: Vec<toml::Value> = outline(&db, file)
        .kernels
        .iter()
        .map(|kernel| kernel.name().into())
        .collect();
    entry.insert("kernels".to_owned(), kernels.into());
    let reports = instance_reports(&db, file);
    let instances: Vec<toml::Value> = reports
        .iter()
        .map(|report| describe_instance(&db, file, report).into())
        .collect();
    let diagnostics = file_diagnostics(&db, file);
    // What tilec cannot analyse counts against a clean file as an error does: the bar is
    // "analysed with no error", and a construct tilec does not support leaves the kernel
    // unanalysed.
    let errors: Vec<toml::Value> = diagnostics
        .iter()
        .filter(|d| d.severity.stops_analysis())
        .map(|d| {
            let line = line_of(&db, file, d.span.start);
            let message: String = d.message.chars().take(120).collect();
            format!(
                "{line} {} [{}]: {message}",
                d.code.name(),
                reason(d.code, &d.message)
            )
            .into()
        })
        .collect();
    let clean = errors.is_empty() && !reports.is_empty();
    entry.insert("instances".to_owned(), instances.into());
    if !errors.is_empty() {
        entry.insert("errors".to_owned(), errors.into());
    }
    FileResult {
        entry,
        clean,
        instances: reports.len(),
        missing_arguments: diagnostics
            .iter()
            .filter(|d| d.code == Code::MissingArgument)
            .count(),
    }
}

#[test]
fn real_world_examples_match_the_expectations_table() {
    let Some(dir) = realworld_dir() else { return };
    let files = kernel_files(&dir);
    let results: Vec<(String, FileResult)> = on_analysis_stack(|| {
        files
            .iter()
            .map(|relative| (relative.clone(), analyse(&dir, relative)))
            .collect()
    });
    let in_scope: Vec<&(String, FileResult)> = results
        .iter()
        .filter(|(relative, _)| out_of_scope(relative).is_none())
        .collect();
    let clean = in_scope.iter().filter(|(_, result)| result.clean).count();
    let mut summary = toml::Table::new();
    summary.insert("files".to_owned(), int(results.len()).into());
    summary.insert("in_scope".to_owned(), int(in_scope.len()).into());
    summary.insert("in_scope_without_error".to_owned(), int(clean).into());
    let mut table = toml::Table::new();
    table.insert("summary".to_owned(), summary.into());
    for (relative, result) in &results {
        table.insert(relative.clone(), result.entry.clone().into());
    }
    let actual = format!(
        "# What tilec finds in TileLang's own examples (tests/realworld.rs). Regenerate with\n\
         # `TILEC_BLESS=1 cargo test -p tilec-tests --test it realworld` and read the diff.\n\n{}",
        toml::to_string(&table).expect("the table serializes")
    );

    // Facts that hold whatever the table says: no instance is lost to a missing argument, and
    // every file in scope has at least one instance.
    let missing: usize = results.iter().map(|(_, r)| r.missing_arguments).sum();
    assert_eq!(
        missing, 0,
        "missing-argument diagnostics remain in the real-world set"
    );
    let without: Vec<&str> = in_scope
        .iter()
        .filter(|(_, result)| result.instances == 0)
        .map(|(relative, _)| relative.as_str())
        .collect();
    assert!(
        without.is_empty(),
        "files in scope without an instance: {without:?}"
    );

    let path = expected_path();
    if std::env::var_os("TILEC_BLESS").is_some() {
        std::fs::write(&path, &actual).expect("EXPECTED.toml is writable");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        let diff: Vec<String> = diff_lines(&expected, &actual);
        panic!(
            "the real-world results changed ({} files, {clean} of {} in scope without error); \
             differing lines (- expected, + actual):\n{}\n\nIf the change is intended, rerun with \
             TILEC_BLESS=1 and commit tests/realworld/EXPECTED.toml after reading its diff.",
            results.len(),
            in_scope.len(),
            diff.join("\n")
        );
    }
}
