//! The diagnostic fixtures of `tests/fixtures/diagnostics/` (see its README): small TileLang files
//! written for these tests, each line that must carry a diagnostic saying so in a trailing comment
//! (`# error: shape-mismatch`), in the manner of ty's mdtest. Every file is analysed as `tilec check`
//! does, and the reported (line, severity, code) are compared with the written ones both ways: a
//! missing diagnostic fails, and so does an unexpected one. These files live in the repository, so
//! they run in every clone, `../shared` or not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tilec_db::RootDatabase;
use tilec_ir::Code;
use tilec_tests::{describe_all, line_of, on_analysis_stack, run_pipeline, source_file};

/// (line, severity, code), with how many times each is expected or reported.
type Expectations = BTreeMap<(usize, String, String), usize>;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/diagnostics")
}

fn fixture_files() -> Vec<PathBuf> {
    let dir = fixtures_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("cannot list {}: {error}", dir.display()))
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "py"))
        .collect();
    files.sort();
    files
}

/// The expectations written in `text`: each `# <severity>: <code>[; <severity>: <code>...]` at the
/// end of a line. A malformed one (unknown severity or code) fails the test, so that a typo cannot
/// turn an expectation into a comment that checks nothing.
fn expectations(path: &Path, text: &str) -> Expectations {
    let mut expected = Expectations::new();
    for (index, line) in text.lines().enumerate() {
        let Some((_, comment)) = line.split_once("# ") else {
            continue;
        };
        for item in comment.split(';') {
            let Some((severity, code)) = item.trim().split_once(": ") else {
                continue;
            };
            if !matches!(severity, "error" | "warning" | "info" | "not-analysed") {
                continue;
            }
            let code = code.trim();
            assert!(
                Code::from_name(code).is_some(),
                "{}:{}: `{code}` is not a diagnostic code",
                path.display(),
                index + 1
            );
            *expected
                .entry((index + 1, severity.to_owned(), code.to_owned()))
                .or_default() += 1;
        }
    }
    expected
}

/// What tilec reports on `text`, as (line, severity, code), and the diagnostics rendered in full for
/// a failure message.
fn reported(path: &Path, text: String) -> (Expectations, String) {
    let path = path.to_owned();
    on_analysis_stack(move || {
        let db = RootDatabase::default();
        let file = source_file(&db, path, text);
        let diagnostics = run_pipeline(&db, file);
        let mut found = Expectations::new();
        for diagnostic in &diagnostics {
            let line = line_of(&db, file, diagnostic.span.start);
            *found
                .entry((
                    line,
                    diagnostic.severity.to_string(),
                    diagnostic.code.to_string(),
                ))
                .or_default() += 1;
        }
        (found, describe_all(&db, file, &diagnostics))
    })
}

/// The differences between expected and reported diagnostics of one file, one per line.
fn differences(name: &str, expected: &Expectations, found: &Expectations) -> Vec<String> {
    let mut out = Vec::new();
    for (key, &count) in expected {
        let got = found.get(key).copied().unwrap_or(0);
        if got < count {
            out.push(format!(
                "{name}:{}: expected {} {} ({count}×), reported {got}×",
                key.0, key.1, key.2
            ));
        }
    }
    for (key, &count) in found {
        let want = expected.get(key).copied().unwrap_or(0);
        if count > want {
            out.push(format!(
                "{name}:{}: unexpected {} {} ({count}× reported, {want}× expected)",
                key.0, key.1, key.2
            ));
        }
    }
    out
}

#[test]
fn every_fixture_reports_exactly_the_written_diagnostics() {
    let files = fixture_files();
    assert!(
        files.len() >= 10,
        "the fixtures folder holds its files ({} found in {})",
        files.len(),
        fixtures_dir().display()
    );
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
        let name = path
            .file_name()
            .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
        let expected = expectations(path, &text);
        let (found, rendered) = reported(path, text);
        let wrong = differences(&name, &expected, &found);
        if !wrong.is_empty() {
            failures.push(format!("{}\n  reported:\n{rendered}", wrong.join("\n")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The runner itself can fail: a missing expected diagnostic and an unexpected one are both found.
#[test]
fn the_runner_reports_missing_and_unexpected_diagnostics() {
    let path = Path::new("inline.py");
    let text = "x = 1  # error: undefined-name\ny = (  # note: not an expectation\n";
    let expected = expectations(path, text);
    assert_eq!(
        expected.into_iter().collect::<Vec<_>>(),
        vec![((1, "error".to_owned(), "undefined-name".to_owned()), 1)]
    );
    let expected = expectations(path, "a = b  # error: undefined-name\n");
    let found: Expectations = [((2, "error".to_owned(), "parse-error".to_owned()), 1)].into();
    assert_eq!(
        differences("inline.py", &expected, &found),
        vec![
            "inline.py:1: expected error undefined-name (1×), reported 0×".to_owned(),
            "inline.py:2: unexpected error parse-error (1× reported, 0× expected)".to_owned(),
        ]
    );
}

#[test]
#[should_panic(expected = "`shape-mismtach` is not a diagnostic code")]
fn a_misspelt_code_is_an_error_of_the_fixture() {
    let _ = expectations(Path::new("typo.py"), "x = 1  # error: shape-mismtach\n");
}
