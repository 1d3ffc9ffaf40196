//! Bad input never crashes the compiler: random edits of the corpus files (deleted byte ranges,
//! inserted fragments of Python and TileLang, truncation), applied one after another to one
//! database, run through the whole pipeline after each edit without a panic, and every diagnostic
//! range lies inside the text on character boundaries. After the last edit, the incrementally
//! updated database agrees with a fresh one on every diagnostic and every world, so memoization
//! never serves a stale result. Regression tests pin the inputs the random edits (and a few
//! deliberate probes) found: recursion through default arguments, a recursion reported twice, and
//! shared buffers whose byte counts overflow 64 bits.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use salsa::Setter;
use tilec_db::{RootDatabase, SourceFile};
use tilec_ir::{ConstValue, World};
use tilec_tests::{
    corpus_dir, describe_all, isolated, on_analysis_stack, record_input, run_pipeline,
};

/// Cases per group of files: enough to hit every file several times with several edits each, while
/// the three groups together stay well under a minute in a debug build.
const CASES: u32 = 64;

/// Fragments an editor passes through while a user types TileLang: brackets, colons, indentation,
/// the start of DSL calls, comments and strings left open, numbers that make meta-level arithmetic
/// fail (division by zero, huge powers), identifiers that exist and that do not, and a non-ASCII
/// character so that byte offsets and character columns differ.
const SNIPPETS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    ":",
    ",",
    ".",
    "\n",
    "\n    ",
    "    ",
    "#",
    "\"",
    "'''",
    "= ",
    "1",
    "0",
    "-",
    "*",
    " / 0",
    " // 0",
    " ** 99",
    "1 << 62",
    "T.copy(",
    "for i in T.Parallel(",
    "for k in range(",
    "with T.Kernel(",
    "T.alloc_fragment((",
    "T.alloc_shared((",
    "T.gemm(",
    "T.reduce_sum(",
    "T.Parallel(",
    "@T.prim_func\n",
    "def ",
    "return ",
    "assert ",
    "lambda ",
    "if ",
    "else:",
    "x",
    "i",
    "block_M",
    "A_shared",
    "C_local",
    "T",
    "main",
    "relu",
    "undefined_name",
    "λ",
];

/// One random edit. Positions are drawn as [`Index`]es so that they scale to the current text, and
/// are moved down to the nearest character boundary when applied.
#[derive(Clone, Debug)]
enum Edit {
    Delete {
        at: Index,
        len: usize,
    },
    Insert {
        at: Index,
        snippets: Vec<&'static str>,
    },
    Truncate {
        at: Index,
    },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<Index>(), 1usize..48).prop_map(|(at, len)| Edit::Delete { at, len }),
        5 => (any::<Index>(), prop::collection::vec(prop::sample::select(SNIPPETS), 1..4))
            .prop_map(|(at, snippets)| Edit::Insert { at, snippets }),
        1 => any::<Index>().prop_map(|at| Edit::Truncate { at }),
    ]
}

/// The largest character boundary of `text` at or below `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(text: &mut String, edit: &Edit) {
    match edit {
        Edit::Delete { at, len } => {
            let start = floor_boundary(text, at.index(text.len() + 1));
            let end = floor_boundary(text, start + len);
            text.replace_range(start..end, "");
        }
        Edit::Insert { at, snippets } => {
            let at = floor_boundary(text, at.index(text.len() + 1));
            text.insert_str(at, &snippets.concat());
        }
        Edit::Truncate { at } => {
            let at = floor_boundary(text, at.index(text.len() + 1));
            text.truncate(at);
        }
    }
}

/// Runs the pipeline on the file's current text and checks every diagnostic range. A panic is turned
/// into a test failure that shows the text, so that the input can be reproduced.
fn run_and_check(db: &RootDatabase, file: SourceFile, what: &str) -> Result<(), TestCaseError> {
    let text = file.text(db).clone();
    record_input(&text);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let diagnostics = run_pipeline(db, file);
        let mut problems = Vec::new();
        let spans = diagnostics.iter().flat_map(|diagnostic| {
            std::iter::once((diagnostic.span, &diagnostic.message)).chain(
                diagnostic
                    .related
                    .iter()
                    .map(|related| (related.span, &related.message)),
            )
        });
        for (span, message) in spans {
            let (start, end) = (span.start as usize, span.end as usize);
            if !(start <= end && end <= text.len()) {
                problems.push(format!(
                    "span {start}..{end} outside the text of {} bytes: {message}",
                    text.len()
                ));
            } else if !(text.is_char_boundary(start) && text.is_char_boundary(end)) {
                problems.push(format!("span {start}..{end} splits a character: {message}"));
            } else {
                // Resolving both ends to lines and columns is what every client does next.
                let _ = tilec_db::line_column(db, file, span.start);
                let _ = tilec_db::line_column(db, file, span.end);
            }
        }
        problems
    }));
    match outcome {
        Ok(problems) if problems.is_empty() => Ok(()),
        Ok(problems) => Err(TestCaseError::fail(format!(
            "{what}:\n  {}\n--- text ---\n{text}\n---",
            problems.join("\n  ")
        ))),
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|message| (*message).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string panic".to_owned());
            Err(TestCaseError::fail(format!(
                "{what}: the pipeline panicked: {message}\n--- text ---\n{text}\n---"
            )))
        }
    }
}

/// What a client sees of a file, in a comparable form: the diagnostics, the instance reports and
/// every instance's world.
type Observation = (
    Vec<tilec_db::FileDiagnostic>,
    Vec<tilec_db::InstanceReport>,
    Vec<(String, u32, Vec<(String, ConstValue)>, World)>,
);

fn observe(db: &RootDatabase, file: SourceFile) -> Observation {
    let diagnostics = tilec_db::file_diagnostics(db, file).clone();
    let reports = tilec_db::instance_reports(db, file);
    let worlds = tilec_db::instances(db, file)
        .iter()
        .map(|&instance| {
            let world = World::clone(tilec_db::kernel_world(db, instance));
            (
                instance.kernel(db).name(db).clone(),
                instance.index(db),
                instance.args(db).clone(),
                world,
            )
        })
        .collect();
    (diagnostics, reports, worlds)
}

/// Applies `edits` to `text` one at a time on one database, checking the pipeline after each, then
/// compares the final state with a fresh database.
fn check_edits(path: &Path, original: &str, edits: &[Edit]) -> Result<(), TestCaseError> {
    let mut db = RootDatabase::default();
    let file = tilec_tests::source_file(&db, path.to_path_buf(), original.to_owned());
    run_and_check(&db, file, "the unedited file")?;
    let mut text = original.to_owned();
    for (number, edit) in edits.iter().enumerate() {
        apply(&mut text, edit);
        file.set_text(&mut db).to(text.clone());
        run_and_check(
            &db,
            file,
            &format!("after edit {} of {edits:?}", number + 1),
        )?;
    }

    let fresh_db = RootDatabase::default();
    let fresh_file = tilec_tests::source_file(&fresh_db, path.to_path_buf(), text.clone());
    run_and_check(&fresh_db, fresh_file, "the final text in a fresh database")?;
    let incremental = observe(&db, file);
    let fresh = observe(&fresh_db, fresh_file);
    if incremental != fresh {
        return Err(TestCaseError::fail(format!(
            "after {edits:?} the incremental database disagrees with a fresh one\n\
             incremental: {incremental:#?}\nfresh: {fresh:#?}\n--- text ---\n{text}\n---"
        )));
    }
    Ok(())
}

/// The corpus files, split into groups: the first and second half of the kernels (by name), and the
/// error files.
fn groups(dir: &Path) -> Vec<(&'static str, Vec<(PathBuf, String)>)> {
    let list = |folder: &Path| -> Vec<(PathBuf, String)> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(folder)
            .unwrap_or_else(|error| panic!("cannot list {}: {error}", folder.display()))
            .map(|entry| entry.expect("a readable directory entry").path())
            .filter(|path| path.extension().is_some_and(|extension| extension == "py"))
            .collect();
        paths.sort();
        paths
            .into_iter()
            .map(|path| {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
                (path, text)
            })
            .collect()
    };
    let mut kernels = list(dir);
    let second = kernels.split_off(kernels.len() / 2);
    vec![
        ("kernels, first half", kernels),
        ("kernels, second half", second),
        ("errors", list(&dir.join("errors"))),
    ]
}

/// Runs the random edits of one group of files, on the analysis stack.
fn fuzz_group(group: usize) {
    on_analysis_stack(|| fuzz_group_here(group));
}

fn fuzz_group_here(group: usize) {
    let Some(dir) = corpus_dir() else { return };
    let (name, files) = groups(&dir).swap_remove(group);
    assert!(!files.is_empty(), "the group `{name}` has files");
    // `PROPTEST_CASES` raises the count for a longer hunt; the default keeps the suite fast.
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(CASES);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let strategy = (0..files.len(), prop::collection::vec(edit(), 1..5));
    let result = runner.run(&strategy, |(index, edits)| {
        let (path, text) = &files[index];
        check_edits(path, text, &edits)
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, (index, edits))) => {
            panic!(
                "{name}: {} with edits {edits:?}\n{reason}",
                files[index].0.display()
            )
        }
        Err(TestError::Abort(reason)) => panic!("{name}: the property test aborted: {reason}"),
    }
}

// Each group runs in a child process: a stack overflow aborts the process, and must fail only its
// own test, showing the input that caused it. Inside, the pipeline runs on the stack the `tilec`
// binary gives the analysis (see `on_analysis_stack`), since that is the compiler's contract: a
// default 2 MiB thread stack does not hold the nesting the evaluator allows in a debug build.

#[test]
fn random_edits_of_kernels_first_half_never_panic() {
    isolated(
        "robustness::random_edits_of_kernels_first_half_never_panic",
        || fuzz_group(0),
    );
}

#[test]
fn random_edits_of_kernels_second_half_never_panic() {
    isolated(
        "robustness::random_edits_of_kernels_second_half_never_panic",
        || fuzz_group(1),
    );
}

#[test]
fn random_edits_of_error_files_never_panic() {
    isolated(
        "robustness::random_edits_of_error_files_never_panic",
        || fuzz_group(2),
    );
}

/// Compiles one text in a fresh database, recording it first, and returns its diagnostics as text
/// with the database for further questions.
fn compile(name: &str, text: &str) -> (RootDatabase, SourceFile, Vec<tilec_db::FileDiagnostic>) {
    record_input(text);
    let db = RootDatabase::default();
    let file = tilec_tests::source_file(&db, name, text);
    let diagnostics = run_pipeline(&db, file);
    (db, file, diagnostics)
}

/// Found by the random edits above (minimized by hand to valid Python): a default argument that
/// refers to the function's own name. Python evaluates defaults once, when `def` runs, so here
/// `tile()` in the second definition calls the *first* `tile` and the program is fine: A has 64
/// elements. Evaluating defaults at call time instead makes `tile` call itself without end (before
/// the call-depth limit is checked), which ends in a stack overflow or a nesting-depth error.
#[test]
fn default_argument_naming_a_redefined_function() {
    isolated(
        "robustness::default_argument_naming_a_redefined_function",
        || {
            on_analysis_stack(default_argument_naming_a_redefined_function_here);
        },
    );
}

fn default_argument_naming_a_redefined_function_here() {
    {
        let text = r#"import tilelang
import tilelang.language as T


def tile(x=1):
    return x


def tile(x=tile()):
    return x * 64


@tilelang.jit
def k(n=4):
    @T.prim_func
    def main(A: T.Tensor((tile(),), "float32")):
        with T.Kernel(1, threads=32):
            A[0] = 1.0

    return main
"#;
        let (db, file, diagnostics) = compile("redefined_default.py", text);
        assert!(
            diagnostics.is_empty(),
            "a valid program:\n{}",
            describe_all(&db, file, &diagnostics)
        );
        let instance = tilec_db::instances(&db, file)
            .first()
            .copied()
            .expect("k has an instance from its defaults");
        let world = tilec_db::kernel_world(&db, instance);
        let a = world.params.first().copied().expect("a parameter A");
        assert_eq!(
            world.const_shape(a),
            Some(vec![64]),
            "A has tile() = 64 elements:\n{}",
            world.pretty()
        );
    }
}

/// The same pattern inside a factory, where Python raises a NameError at the `def` (the local
/// `tile` is not bound yet when its default is evaluated): one error at the default, and no crash.
#[test]
fn default_argument_naming_its_own_function() {
    isolated(
        "robustness::default_argument_naming_its_own_function",
        || {
            on_analysis_stack(default_argument_naming_its_own_function_here);
        },
    );
}

fn default_argument_naming_its_own_function_here() {
    {
        let text = r#"import tilelang
import tilelang.language as T


@tilelang.jit
def k(n=4):
    def tile(x=tile()):
        return x

    @T.prim_func
    def main(A: T.Tensor((tile(),), "float32")):
        with T.Kernel(1, threads=32):
            A[0] = 1.0

    return main
"#;
        let (db, file, diagnostics) = compile("own_default.py", text);
        let listing = describe_all(&db, file, &diagnostics);
        let errors: Vec<&tilec_db::FileDiagnostic> = diagnostics
            .iter()
            .filter(|diagnostic| diagnostic.severity == tilec_ir::Severity::Error)
            .collect();
        assert_eq!(errors.len(), 1, "one error for one root cause:\n{listing}");
        assert_eq!(errors[0].code.name(), "undefined-name", "{listing}");
        assert_eq!(
            tilec_tests::line_of(&db, file, errors[0].span.start),
            7,
            "at the default `tile()`:\n{listing}"
        );
    }
}

/// A helper that recurses without end is one root cause: the call-depth limit reports it once, and
/// the failed call must not surface again as a second error about its missing result (`None + 1`).
#[test]
fn unbounded_recursion_is_reported_once() {
    isolated("robustness::unbounded_recursion_is_reported_once", || {
        on_analysis_stack(unbounded_recursion_is_reported_once_here);
    });
}

fn unbounded_recursion_is_reported_once_here() {
    let text = r#"import tilelang
import tilelang.language as T


def helper(n):
    return helper(n - 1) + 1


@tilelang.jit
def k(n=4):
    m = helper(n)

    @T.prim_func
    def main(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            A[0] = 1.0

    return main
"#;
    let (db, file, diagnostics) = compile("recursion.py", text);
    let listing = describe_all(&db, file, &diagnostics);
    let errors: Vec<&tilec_db::FileDiagnostic> = diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.severity == tilec_ir::Severity::Error)
        .collect();
    assert_eq!(errors.len(), 1, "one error for one root cause:\n{listing}");
    assert_eq!(errors[0].code.name(), "meta-error", "{listing}");
}

/// A one-kernel file whose launch body is `body` (indented by twelve spaces already).
fn kernel_with_body(body: &str) -> String {
    format!(
        r#"import tilelang
import tilelang.language as T


@tilelang.jit
def k(M=4, N=4):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
{body}

    return main
"#
    )
}

/// The shared-memory check adds up buffer sizes. A buffer of 2^31 × 2^31 float32 elements is 2^64
/// bytes, one past what 64 bits hold: it is still far over the 227 KiB a block can have, and must
/// be reported as such rather than dropped from the total because its size does not fit.
#[test]
fn shared_buffer_whose_byte_size_overflows_is_still_reported() {
    on_analysis_stack(shared_buffer_whose_byte_size_overflows_is_still_reported_here);
}

fn shared_buffer_whose_byte_size_overflows_is_still_reported_here() {
    let text = kernel_with_body(
        "            s = T.alloc_shared((1 << 31, 1 << 31), \"float32\")\n            T.copy(A[0, 0], s)",
    );
    let (db, file, diagnostics) = compile("huge_shared.py", &text);
    assert_one_error_at(&db, file, &diagnostics, "shared-memory-capacity", 10);
}

/// Asserts that `diagnostics` hold exactly one error with `code`, on line `line` of `file`.
fn assert_one_error_at(
    db: &RootDatabase,
    file: SourceFile,
    diagnostics: &[tilec_db::FileDiagnostic],
    code: &str,
    line: usize,
) {
    let listing = describe_all(db, file, diagnostics);
    let errors: Vec<&tilec_db::FileDiagnostic> = diagnostics
        .iter()
        .filter(|d| d.code.name() == code && d.severity == tilec_ir::Severity::Error)
        .collect();
    assert_eq!(errors.len(), 1, "one {code} error:\n{listing}");
    assert_eq!(
        tilec_tests::line_of(db, file, errors[0].span.start),
        line,
        "at the allocation:\n{listing}"
    );
}

/// A fragment of 2^62 elements, far beyond any register file: a `register-pressure` error (not the
/// spilling warning) at the allocation, and the instance is not lowered, since lowering enumerates
/// a fragment's registers and would not finish (or would overflow, for larger shapes).
#[test]
fn fragment_no_block_could_hold_is_an_error_and_is_not_lowered() {
    on_analysis_stack(fragment_no_block_could_hold_is_an_error_and_is_not_lowered_here);
}

fn fragment_no_block_could_hold_is_an_error_and_is_not_lowered_here() {
    let text = kernel_with_body(
        "            x = T.alloc_fragment((1 << 31, 1 << 31), \"float32\")\n            T.fill(x, 0)",
    );
    let (db, file, diagnostics) = compile("huge_fragment.py", &text);
    assert_one_error_at(&db, file, &diagnostics, "register-pressure", 10);
    let instance = tilec_tests::instance(&db, file, "k", 0);
    let refused = tilec_db::thread_programs(&db, instance);
    let Err(why) = refused.as_ref() else {
        panic!("an instance with check errors must not be lowered");
    };
    assert!(
        why.iter().any(|d| d.code.name() == "register-pressure"),
        "the check error says why: {why:?}"
    );
}

/// A kernel over the shared-memory capacity is not lowered either: the capacity error is why. (A
/// 2^40-wide gemm tile once reached the TMA lowering, which enumerates a box's elements.)
#[test]
fn kernel_over_the_shared_memory_capacity_is_not_lowered() {
    on_analysis_stack(|| {
        let text = kernel_with_body(
            "            s = T.alloc_shared((1 << 31, 1 << 31), \"float32\")\n            T.copy(A[0, 0], s)",
        );
        let (db, file, _) = compile("huge_shared_lowered.py", &text);
        let instance = tilec_tests::instance(&db, file, "k", 0);
        let refused = tilec_db::thread_programs(&db, instance);
        let Err(why) = refused.as_ref() else {
            panic!("an instance over the shared-memory capacity must not be lowered");
        };
        assert!(
            why.iter()
                .any(|d| d.code.name() == "shared-memory-capacity"),
            "the capacity error says why: {why:?}"
        );
    });
}

/// Four live shared buffers of 2^62 bytes each: every size fits in 64 bits, their sum does not.
/// Adding them up must neither panic (debug builds) nor wrap around to a small total that passes
/// the check (release builds).
#[test]
fn shared_buffers_whose_total_overflows_are_reported_without_panic() {
    let body = [
        "            s = T.alloc_shared((1 << 30, 1 << 30), \"float32\")",
        "            t = T.alloc_shared((1 << 30, 1 << 30), \"float32\")",
        "            u = T.alloc_shared((1 << 30, 1 << 30), \"float32\")",
        "            v = T.alloc_shared((1 << 30, 1 << 30), \"float32\")",
        "            T.copy(s, t)",
        "            T.copy(u, v)",
        "            T.copy(t, u)",
        "            T.copy(v, s)",
    ]
    .join("\n");
    let text = kernel_with_body(&body);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let (db, file, diagnostics) = on_analysis_stack(|| compile("huge_total.py", &text));
        let listing = describe_all(&db, file, &diagnostics);
        let count = diagnostics
            .iter()
            .filter(|diagnostic| {
                diagnostic.code.name() == "shared-memory-capacity"
                    && diagnostic.severity == tilec_ir::Severity::Error
            })
            .count();
        (count, listing)
    }));
    let (count, listing) = match outcome {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|message| (*message).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            panic!("the pipeline panicked ({message}) on:\n{text}");
        }
    };
    assert_eq!(count, 1, "one shared-memory-capacity error:\n{listing}");
}

/// Layout inference and lowering ask the database between steps whether their result is still
/// wanted (issue 28): a probe that counts is asked for every step, and one that unwinds, as
/// salsa's does after an edit, stops each of them at once.
#[test]
fn layout_inference_and_lowering_ask_whether_they_are_still_wanted() {
    on_analysis_stack(layout_inference_and_lowering_ask_whether_they_are_still_wanted_here);
}

fn layout_inference_and_lowering_ask_whether_they_are_still_wanted_here() {
    use std::cell::Cell;
    use tilec_ir::Cancellation;
    use tilec_passes::layout::infer_layouts;
    use tilec_passes::lower::lower_world;

    let body = [
        "            a = T.alloc_fragment((M, N), \"float32\")",
        "            b = T.alloc_fragment((M, N), \"float32\")",
        "            T.copy(A, a)",
        "            for i, j in T.Parallel(M, N):",
        "                b[i, j] = a[i, j] * 2.0",
        "            T.copy(b, A)",
    ]
    .join("\n");
    let text = kernel_with_body(&body);
    let (db, file, diagnostics) = compile("cancelled.py", &text);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let instance = tilec_tests::instance(&db, file, "k", 0);
    let world = tilec_db::kernel_world(&db, instance);
    let options = *tilec_db::codegen_options(&db, instance);

    let asked = Cell::new(0u32);
    let count = || asked.set(asked.get() + 1);
    let layouts = infer_layouts(world, options, Cancellation::new(&count));
    assert!(layouts.diagnostics.is_empty(), "{:?}", layouts.diagnostics);
    let asked_by_inference = asked.replace(0);
    assert!(
        asked_by_inference >= 3,
        "inference asked {asked_by_inference} times"
    );
    let programs = lower_world(world, &layouts, options, Cancellation::new(&count));
    assert!(programs.is_ok(), "the kernel lowers: {programs:?}");
    // Three statements (two copies and the loop) at least once each.
    assert!(asked.get() >= 3, "lowering asked {} times", asked.get());

    let cancelled = || std::panic::panic_any("cancelled by an edit");
    let stopped = |outcome: std::thread::Result<()>| match outcome {
        Ok(()) => panic!("the cancellation was not asked"),
        Err(payload) => payload.downcast_ref::<&str>() == Some(&"cancelled by an edit"),
    };
    let inference = catch_unwind(AssertUnwindSafe(|| {
        infer_layouts(world, options, Cancellation::new(&cancelled));
    }));
    assert!(stopped(inference), "inference stopped by the probe");
    let lowering = catch_unwind(AssertUnwindSafe(|| {
        let _ = lower_world(world, &layouts, options, Cancellation::new(&cancelled));
    }));
    assert!(stopped(lowering), "lowering stopped by the probe");
}
