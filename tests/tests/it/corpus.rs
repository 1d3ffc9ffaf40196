//! The corpus against `shared/corpus/EXPECTED.toml`: every file yields the expected number of
//! instances, every diagnostic the compiler already implements appears with its code, severity, line
//! and related lines, and no error appears that the corpus does not list. Further tests pin the facts
//! of individual files (one diagnostic per root cause, messages that name the numbers a user needs,
//! a broken kernel that leaves its neighbours analysed) and snapshot two small worlds.

use std::path::Path;

use expect_test::expect;
use salsa::Setter;
use tilec_db::{FileDiagnostic, RootDatabase, SourceFile};
use tilec_ir::{EntityKind, Severity, World};
use tilec_tests::{corpus_dir, describe, describe_all, line_of, load_corpus, run_pipeline};

/// Codes the compiler produces: every EXPECTED.toml entry with one of them is checked (code,
/// severity, line, related lines), and no file may have an error the corpus does not list.
const IMPLEMENTED: [&str; 8] = [
    "parse-error",
    "undefined-name",
    "unsupported-syntax",
    "shape-mismatch",
    "shared-memory-capacity",
    "layout-conflict",
    "data-race",
    "register-pressure",
];

/// One `[code, severity, line]` entry of EXPECTED.toml.
#[derive(Debug)]
struct ExpectedDiagnostic {
    code: String,
    severity: String,
    line: usize,
}

/// What EXPECTED.toml says about one file.
#[derive(Debug)]
struct Expectation {
    file: String,
    instances: usize,
    diagnostics: Vec<ExpectedDiagnostic>,
    also_lines: Vec<usize>,
}

fn parse_expected(dir: &Path) -> Vec<Expectation> {
    let text =
        std::fs::read_to_string(dir.join("EXPECTED.toml")).expect("EXPECTED.toml is readable");
    let table: toml::Table = text.parse().expect("EXPECTED.toml is valid TOML");
    table
        .iter()
        .map(|(file, entry)| {
            let entry = entry.as_table().unwrap_or_else(|| panic!("[{file:?}] is a table"));
            let instances = entry
                .get("instances")
                .and_then(toml::Value::as_integer)
                .unwrap_or_else(|| panic!("[{file:?}] has an integer `instances`"));
            let diagnostics = entry
                .get("diagnostics")
                .and_then(toml::Value::as_array)
                .map(|list| {
                    list.iter()
                        .map(|triple| {
                            let triple = triple.as_array().unwrap_or_else(|| panic!("[{file:?}] diagnostics are arrays"));
                            let text = |index: usize| {
                                triple.get(index).and_then(toml::Value::as_str).unwrap_or_else(|| {
                                    panic!("[{file:?}] diagnostic {triple:?} has a string at {index}")
                                })
                            };
                            let line = triple
                                .get(2)
                                .and_then(toml::Value::as_integer)
                                .unwrap_or_else(|| panic!("[{file:?}] diagnostic {triple:?} has a line"));
                            ExpectedDiagnostic {
                                code: text(0).to_owned(),
                                severity: text(1).to_owned(),
                                line: usize::try_from(line).expect("lines are positive"),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            let also_lines = entry
                .get("also_lines")
                .and_then(toml::Value::as_array)
                .map(|lines| {
                    lines
                        .iter()
                        .map(|line| {
                            let line = line.as_integer().unwrap_or_else(|| panic!("[{file:?}] also_lines are integers"));
                            usize::try_from(line).expect("lines are positive")
                        })
                        .collect()
                })
                .unwrap_or_default();
            Expectation {
                file: file.clone(),
                instances: usize::try_from(instances).expect("instance counts are positive"),
                diagnostics,
                also_lines,
            }
        })
        .collect()
}

/// Checks one file against its expectation and returns every mismatch as a line of text.
fn check_file(dir: &Path, expectation: &Expectation) -> Vec<String> {
    let (db, file) = load_corpus(dir, &expectation.file);
    let diagnostics = run_pipeline(&db, file);
    let mut problems = Vec::new();

    let instances = tilec_db::instances(&db, file).len();
    if instances != expectation.instances {
        problems.push(format!(
            "expected {} instance(s), found {instances}",
            expectation.instances
        ));
    }
    let reports = tilec_db::instance_reports(&db, file);
    if reports.len() != instances {
        problems.push(format!(
            "{} instance report(s) for {instances} instance(s)",
            reports.len()
        ));
    }

    // Each expected entry claims one diagnostic, so that a listed error cannot excuse a second error
    // of the same code elsewhere: whatever is left unclaimed afterwards is unexpected.
    let mut claimed = vec![false; diagnostics.len()];
    for (position, expected) in expectation.diagnostics.iter().enumerate() {
        if !IMPLEMENTED.contains(&expected.code.as_str()) {
            continue;
        }
        let found = diagnostics
            .iter()
            .enumerate()
            .position(|(index, diagnostic)| {
                !claimed[index]
                    && diagnostic.code.name() == expected.code
                    && diagnostic.severity.name() == expected.severity
                    && line_of(&db, file, diagnostic.span.start) == expected.line
            });
        let Some(index) = found else {
            problems.push(format!(
                "missing {} {} on line {}; the file has:\n{}",
                expected.severity,
                expected.code,
                expected.line,
                describe_all(&db, file, &diagnostics)
            ));
            continue;
        };
        claimed[index] = true;
        // `also_lines` is given per file; the corpus lists at most one diagnostic beside it, so the
        // lines belong to the first entry.
        if position == 0 {
            let diagnostic = &diagnostics[index];
            let related: Vec<usize> = diagnostic
                .related
                .iter()
                .map(|related| line_of(&db, file, related.span.start))
                .collect();
            for line in &expectation.also_lines {
                if !related.contains(line) {
                    problems.push(format!(
                        "{} on line {} lacks a related location on line {line} (related lines: {related:?}):\n    {}",
                        expected.code,
                        expected.line,
                        describe(&db, file, diagnostic)
                    ));
                }
            }
        }
    }
    for (index, diagnostic) in diagnostics.iter().enumerate() {
        if !claimed[index] && diagnostic.severity == Severity::Error {
            problems.push(format!(
                "unexpected error: {}",
                describe(&db, file, diagnostic)
            ));
        }
    }

    // A file with no error-level diagnostic must not have an instance reported as failed either:
    // the report is what `tilec check` turns into its exit status.
    if !diagnostics
        .iter()
        .any(|diagnostic| diagnostic.severity == Severity::Error)
    {
        for report in reports.iter().filter(|report| report.has_errors) {
            problems.push(format!(
                "instance {}#{} reports errors, but the file has no error diagnostic",
                report.kernel, report.index
            ));
        }
    }
    problems
}

/// The data-driven check of every file EXPECTED.toml lists. Every mismatch of every file is
/// collected first, so that one run shows the whole picture.
#[test]
fn corpus_matches_expected() {
    let Some(dir) = corpus_dir() else { return };
    let expectations = parse_expected(&dir);
    assert!(
        expectations.len() >= 20,
        "EXPECTED.toml lists only {} files",
        expectations.len()
    );
    let mut report = String::new();
    // Every kernel of the corpus has an expectation, so a file added without one is noticed.
    let listed: Vec<&str> = expectations
        .iter()
        .map(|expectation| expectation.file.as_str())
        .collect();
    for folder in ["", "errors/"] {
        let entries = std::fs::read_dir(dir.join(folder)).expect("the corpus folders are readable");
        for entry in entries {
            let name = entry.expect("a readable directory entry").file_name();
            let name = format!("{folder}{}", name.to_string_lossy());
            if name.ends_with(".py") && !listed.contains(&name.as_str()) {
                report.push_str(&format!("\n{name}: not listed in EXPECTED.toml\n"));
            }
        }
    }
    for expectation in &expectations {
        if !dir.join(&expectation.file).is_file() {
            report.push_str(&format!(
                "\n{}: listed in EXPECTED.toml but missing\n",
                expectation.file
            ));
            continue;
        }
        let problems = check_file(&dir, expectation);
        if !problems.is_empty() {
            report.push_str(&format!("\n{}:\n", expectation.file));
            for problem in problems {
                report.push_str(&format!("  - {problem}\n"));
            }
        }
    }
    assert!(
        report.is_empty(),
        "the corpus does not match EXPECTED.toml:{report}"
    );
}

/// Loads a corpus file and returns its database, input and diagnostics, or `None` (skip) when the
/// corpus is missing.
fn corpus(relative: &str) -> Option<(RootDatabase, SourceFile, Vec<FileDiagnostic>)> {
    let dir = corpus_dir()?;
    let (db, file) = load_corpus(&dir, relative);
    let diagnostics = run_pipeline(&db, file);
    Some((db, file, diagnostics))
}

/// The text a span covers.
fn span_text(db: &RootDatabase, file: SourceFile, diagnostic: &FileDiagnostic) -> String {
    let text = file.text(db);
    text.get(diagnostic.span.start as usize..diagnostic.span.end as usize)
        .unwrap_or("<span outside the text>")
        .to_owned()
}

/// The decimal numbers a message mentions, as whole tokens (so that "128" does not count as "12").
fn numbers_in(message: &str) -> Vec<&str> {
    message
        .split(|c: char| !c.is_ascii_digit())
        .filter(|token| !token.is_empty())
        .collect()
}

/// The world of the first instance of `kernel`.
fn world_of<'db>(db: &'db RootDatabase, file: SourceFile, kernel: &str, index: u32) -> &'db World {
    let instance = tilec_db::instances(db, file)
        .iter()
        .copied()
        .find(|instance| instance.kernel(db).name(db) == kernel && instance.index(db) == index)
        .unwrap_or_else(|| panic!("the file has an instance {kernel}#{index}"));
    tilec_db::kernel_world(db, instance)
}

fn entity_names(world: &World, kind: EntityKind) -> Vec<String> {
    world
        .entities()
        .filter(|&entity| world.kind(entity) == Some(kind))
        .map(|entity| world.name(entity).to_owned())
        .collect()
}

/// An undefined name used twice is one root cause: one diagnostic, at its first use, and no
/// follow-up errors from the analyses that could not run.
#[test]
fn undefined_name_is_reported_once_at_first_use() {
    let Some((db, file, diagnostics)) = corpus("errors/undefined_name.py") else {
        return;
    };
    let listing = describe_all(&db, file, &diagnostics);
    let undefined: Vec<&FileDiagnostic> = diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.code.name() == "undefined-name")
        .collect();
    assert_eq!(
        undefined.len(),
        1,
        "exactly one undefined-name diagnostic expected:\n{listing}"
    );
    let diagnostic = undefined[0];
    assert_eq!(
        line_of(&db, file, diagnostic.span.start),
        12,
        "at the first use of block_K:\n{listing}"
    );
    assert_eq!(
        span_text(&db, file, diagnostic),
        "block_K",
        "the span covers the name:\n{listing}"
    );
    assert!(
        diagnostic.message.contains("block_K"),
        "the message names block_K:\n{listing}"
    );
    let errors = diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.severity == Severity::Error)
        .count();
    assert_eq!(
        errors, 1,
        "no further errors from the same root cause:\n{listing}"
    );
}

/// `math.exp` inside a kernel is reported with the TileLang replacement, and the file's other
/// kernel is analysed as if nothing were wrong.
#[test]
fn unsupported_python_suggests_t_exp_and_spares_the_other_kernel() {
    let Some((db, file, diagnostics)) = corpus("errors/unsupported_python.py") else {
        return;
    };
    let listing = describe_all(&db, file, &diagnostics);
    let diagnostic = diagnostics
        .iter()
        .find(|diagnostic| diagnostic.code.name() == "unsupported-syntax")
        .unwrap_or_else(|| panic!("an unsupported-syntax diagnostic:\n{listing}"));
    let mentions = diagnostic.message.contains("T.exp")
        || diagnostic
            .help
            .as_deref()
            .is_some_and(|help| help.contains("T.exp"));
    assert!(mentions, "the message or help suggests T.exp:\n{listing}");
    assert_eq!(diagnostic.kernel.as_deref(), Some("host_exp"), "{listing}");

    let fine: Vec<&FileDiagnostic> = diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.kernel.as_deref() == Some("fine"))
        .collect();
    assert!(
        fine.is_empty(),
        "the kernel `fine` has no diagnostics:\n{listing}"
    );
    let reports = tilec_db::instance_reports(&db, file);
    let report = reports
        .iter()
        .find(|report| report.kernel == "fine")
        .expect("an instance of `fine`");
    assert!(
        !report.has_errors,
        "`fine` is reported without errors: {report:?}"
    );
    let world = world_of(&db, file, "fine", 0);
    assert!(
        !world.incomplete,
        "`fine` has a complete world:\n{}",
        world.pretty()
    );
    assert_eq!(
        entity_names(world, EntityKind::Store).len(),
        1,
        "{}",
        world.pretty()
    );
}

/// A gemm whose operands disagree on K names both extents, so the user sees which tile to fix.
#[test]
fn gemm_shape_mismatch_names_both_extents() {
    let Some((db, file, diagnostics)) = corpus("errors/gemm_shape_mismatch.py") else {
        return;
    };
    let listing = describe_all(&db, file, &diagnostics);
    let diagnostic = diagnostics
        .iter()
        .find(|diagnostic| diagnostic.code.name() == "shape-mismatch")
        .unwrap_or_else(|| panic!("a shape-mismatch diagnostic:\n{listing}"));
    let numbers = numbers_in(&diagnostic.message);
    assert!(
        numbers.contains(&"32") && numbers.contains(&"64"),
        "the message names 32 and 64:\n{listing}"
    );
}

/// The shared-memory error gives the total and the limit of the default target (sm_90: 227 KiB).
#[test]
fn shared_memory_overflow_names_total_and_limit() {
    let Some((db, file, diagnostics)) = corpus("errors/shared_memory_overflow.py") else {
        return;
    };
    let listing = describe_all(&db, file, &diagnostics);
    let diagnostic = diagnostics
        .iter()
        .find(|diagnostic| diagnostic.code.name() == "shared-memory-capacity")
        .unwrap_or_else(|| panic!("a shared-memory-capacity diagnostic:\n{listing}"));
    assert!(
        diagnostic.message.contains("512 KiB"),
        "the message gives the total, 512 KiB:\n{listing}"
    );
    assert!(
        diagnostic.message.contains("227 KiB"),
        "the message gives the sm_90 limit, 227 KiB:\n{listing}"
    );
}

/// A syntax error in one kernel leaves the other kernel of the file fully analysed.
#[test]
fn syntax_error_midedit_leaves_double_complete() {
    let Some((db, file, diagnostics)) = corpus("errors/syntax_error_midedit.py") else {
        return;
    };
    let listing = describe_all(&db, file, &diagnostics);
    let world = world_of(&db, file, "double", 0);
    assert!(
        !world.incomplete,
        "`double` has a complete world:\n{}",
        world.pretty()
    );
    assert_eq!(
        entity_names(world, EntityKind::Buffer),
        ["x"],
        "{}",
        world.pretty()
    );
    assert!(
        diagnostics
            .iter()
            .all(|diagnostic| diagnostic.kernel.as_deref() != Some("double")),
        "`double` has no diagnostics:\n{listing}"
    );
    let reports = tilec_db::instance_reports(&db, file);
    let double = reports
        .iter()
        .find(|report| report.kernel == "double")
        .expect("an instance of `double`");
    assert!(
        !double.has_errors,
        "`double` is reported without errors: {double:?}"
    );
    let half = reports
        .iter()
        .find(|report| report.kernel == "half")
        .expect("an instance of `half`");
    assert!(
        half.has_errors,
        "`half` does not parse, so its instance has errors: {half:?}"
    );
}

/// A failing `assert` in a factory is reported at the assert, with the user's own message
/// (f-string evaluated with the instance's arguments).
#[test]
fn layernorm_assert_fails_for_n_1000() {
    let Some(dir) = corpus_dir() else { return };
    let (mut db, file) = load_corpus(&dir, "layernorm.py");
    let before = run_pipeline(&db, file);
    assert!(
        before
            .iter()
            .all(|diagnostic| diagnostic.severity != Severity::Error),
        "N=1024 satisfies the assert:\n{}",
        describe_all(&db, file, &before)
    );

    let text = file.text(&db).clone();
    assert!(
        text.contains("layernorm(8192, 1024)"),
        "the corpus file still instantiates layernorm(8192, 1024)"
    );
    file.set_text(&mut db)
        .to(text.replace("layernorm(8192, 1024)", "layernorm(8192, 1000)"));
    let after = run_pipeline(&db, file);
    let listing = describe_all(&db, file, &after);
    let failed: Vec<&FileDiagnostic> = after
        .iter()
        .filter(|diagnostic| {
            diagnostic.code.name() == "assertion-failed" && diagnostic.severity == Severity::Error
        })
        .collect();
    assert_eq!(failed.len(), 1, "one assertion-failed error:\n{listing}");
    assert_eq!(
        line_of(&db, file, failed[0].span.start),
        8,
        "at the assert:\n{listing}"
    );
    assert!(
        failed[0]
            .message
            .contains("N=1000 must be a multiple of 32"),
        "with the assert's message:\n{listing}"
    );
}

/// A Python list loop inside a kernel unrolls at compile time.
#[test]
fn meta_list_unroll_has_three_stores() {
    let Some((db, file, _)) = corpus("meta_list_unroll.py") else {
        return;
    };
    let world = world_of(&db, file, "gather_three", 0);
    assert_eq!(
        entity_names(world, EntityKind::Store).len(),
        3,
        "{}",
        world.pretty()
    );
    assert!(
        world
            .entities()
            .all(|entity| world.kind(entity) != Some(EntityKind::Loop)),
        "no loop is left after unrolling:\n{}",
        world.pretty()
    );
}

/// The world of `relu` (pointwise_family.py), printed. Regenerate with `UPDATE_EXPECT=1` and read
/// the diff: the extents follow from N = 1 << 20 and block = 1024.
#[test]
fn snapshot_pointwise_relu() {
    let Some((db, file, _)) = corpus("pointwise_family.py") else {
        return;
    };
    let world = world_of(&db, file, "relu", 0);
    expect![[r#"
        kernel relu(N=1048576, block=1024, threads=128, dtype='float32')
          #0 param X: float32[1048576] global
          #1 param Y: float32[1048576] global (output)
          #2 launch grid (1024) threads (128) as (bx)
            #3 for i in Parallel(1024)
              #4 Y[bx * 1024 + i] = T.max(X[bx * 1024 + i], 0)
    "#]]
    .assert_eq(&world.pretty());
}

/// The world of gemm.py's first instance, `matmul(1024, 1024, 1024, 128, 128, 32)`, printed.
#[test]
fn snapshot_gemm_small() {
    let Some((db, file, _)) = corpus("gemm.py") else {
        return;
    };
    let world = world_of(&db, file, "matmul", 0);
    expect![[r#"
        kernel matmul(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128, dtype='float16', accum_dtype='float32')
          #0 param A: float16[1024, 1024] global
          #1 param B: float16[1024, 1024] global
          #2 param C: float16[1024, 1024] global (output)
          #3 launch grid (8, 8) threads (128) as (bx, by)
            #4 buffer A_shared: float16[128, 32] shared
            #5 buffer B_shared: float16[32, 128] shared
            #6 buffer C_local: float32[128, 128] local.fragment
            #7 use_swizzle(panel_size=10, column_major=false, enable=true)
            #8 clear C_local[:, :]
            #9 for ko in Pipelined[num_stages=3](32)
              #10 copy A[by * 128, ko * 32] -> A_shared[:, :]
              #11 copy B[ko * 32, bx * 128] -> B_shared[:, :]
              #12 gemm A_shared[:, :] x B_shared[:, :] -> C_local[:, :] (transpose_A=false, transpose_B=false, policy=Square, clear_accum=false, k_pack=1)
            #13 copy C_local[:, :] -> C[by * 128, bx * 128]
    "#]].assert_eq(&world.pretty());
}
