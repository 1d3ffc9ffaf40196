//! End-to-end tests of tilec live in `tests/`; this library only shares helpers between them: finding
//! the shared corpus, loading a corpus file into a database, running the whole pipeline, and printing
//! diagnostics in a form that makes a failing assertion readable.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use tilec_db::{FileDiagnostic, Instance, RootDatabase, SourceFile, instances};

/// The corpus folder (`shared/corpus` beside the clone), or `None` when this checkout has none.
///
/// CI keeps `shared/` next to the repository, so the path is relative to this crate's manifest.
/// A checkout without it cannot run the corpus conformance suite: callers then return early, and
/// the suite's absence is said once per test binary ([`skip_suite`]); in CI (`CI` set) missing data
/// fails the test instead: it must never pass there by skipping.
pub fn corpus_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/corpus"));
    if dir.join("EXPECTED.toml").is_file() {
        Some(dir)
    } else {
        skip_suite("shared/corpus", &dir.join("EXPECTED.toml"));
        None
    }
}

/// TileLang's own examples (`shared/realworld/tilelang-examples` beside the clone), or `None`,
/// as [`corpus_dir`].
pub fn realworld_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/realworld/tilelang-examples"
    ));
    if dir.join("LICENSE").is_file() {
        Some(dir)
    } else {
        skip_suite("shared/realworld", &dir.join("LICENSE"));
        None
    }
}

/// Files of the set that are out of scope for an NVIDIA sm_80/sm_90 compiler, as
/// `shared/realworld/README.md` lists them: other hardware, or wrong on purpose.
pub const REALWORLD_OUT_OF_SCOPE: [(&str, &str); 10] = [
    ("amd/", "AMD hardware"),
    ("deepseek_mla/amd/", "AMD hardware"),
    ("blockscaled_gemm_sm100/", "Blackwell (sm_100)"),
    ("flash_attention_sm100/", "Blackwell (sm_100)"),
    ("gemm_sm120/", "Blackwell (sm_120)"),
    ("gemm_tcgen05/gemm_tcgen5mma", "Blackwell (sm_100 tcgen05)"),
    (
        "gemm_fp8/example_tilelang_gemm_fp8_sm100.py",
        "Blackwell (sm_100)",
    ),
    (
        "autodd/tilelang_",
        "wrong on purpose (a debugging tool's bugs)",
    ),
    (
        "deepseek_nsa/example_tilelang_nsa_bwd.py",
        "wrong on purpose (undefined names)",
    ),
    (
        "bitnet-1.58b/kernel_benchmark/tl_int8xint8.py",
        "not TileLang (`tvm.tl.language`)",
    ),
];

/// Every `.py` file under `dir` whose text launches a kernel, as paths relative to `dir`, sorted.
pub fn kernel_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let entries = std::fs::read_dir(&folder).expect("the real-world folder is readable");
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "py")
                && std::fs::read_to_string(&path).is_ok_and(|text| text.contains("T.Kernel"))
                && let Ok(relative) = path.strip_prefix(dir)
            {
                found.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    found.sort();
    found
}

/// Why a file of the set is out of scope, or `None` when it is in scope.
pub fn out_of_scope(relative: &str) -> Option<&'static str> {
    REALWORLD_OUT_OF_SCOPE
        .iter()
        .find(|(prefix, _)| relative.starts_with(prefix))
        .map(|(_, why)| *why)
}

/// The instances of TileLang's examples that check clean, as `(file, kernel, instance)`, from the
/// committed expectations table (`tests/realworld/EXPECTED.toml`, entries `"kernel#N ...: ok"`).
pub fn realworld_clean_instances() -> std::collections::BTreeSet<(String, String, u64)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("realworld/EXPECTED.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("reading {}: {error}", path.display()));
    let table: toml::Table = text
        .parse()
        .unwrap_or_else(|error| panic!("parsing {}: {error}", path.display()));
    let mut clean = std::collections::BTreeSet::new();
    for (file, entry) in &table {
        let instances = entry.get("instances").and_then(toml::Value::as_array);
        for instance in instances
            .into_iter()
            .flatten()
            .filter_map(toml::Value::as_str)
        {
            let Some(name) = instance
                .strip_suffix(": ok")
                .and_then(|i| i.split(' ').next())
            else {
                continue;
            };
            if let Some((kernel, number)) = name.rsplit_once('#')
                && let Ok(number) = number.parse()
            {
                clean.insert((file.clone(), kernel.to_owned(), number));
            }
        }
    }
    clean
}

/// A file of `tests/fixtures/` (TileLang written for these tests and kept in the repository), by its
/// path relative to that folder.
pub fn fixture_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(relative)
}

/// In CI (`CI` set), shared data that is missing fails the test that needs it.
pub fn missing_in_ci(path: &Path) {
    if std::env::var_os("CI").is_some() {
        panic!(
            "{} is missing, and CI must run every test: keep `shared/` beside the clone",
            path.display()
        );
    }
}

/// Records that a test of the conformance suite `suite` did not run because `missing` is absent:
/// in CI this fails the test ([`missing_in_ci`]); elsewhere the first skip of each suite in this
/// test binary prints one line, and later ones print nothing, so that a clone without `shared/` is
/// told once per suite, not once per test, and never told nothing.
///
/// The line is written to the process's standard error directly, past the test harness's output
/// capture (which would only show it for a failing test).
pub fn skip_suite(suite: &str, missing: &Path) {
    use std::io::Write as _;
    use std::sync::Mutex;

    static SKIPPED: Mutex<Vec<String>> = Mutex::new(Vec::new());
    missing_in_ci(missing);
    let mut skipped = SKIPPED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if skipped.iter().any(|name| name == suite) {
        return;
    }
    skipped.push(suite.to_owned());
    let _ = writeln!(
        std::io::stderr().lock(),
        "SKIPPED conformance suite `{suite}`: {} is missing, so its tests in this binary check \
         nothing; put `shared/` beside the clone (with CI=true this is a failure)",
        missing.display()
    );
}

/// Reads a corpus file by its path relative to the corpus folder.
pub fn read_corpus(dir: &Path, relative: &str) -> String {
    let path = dir.join(relative);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read corpus file {}: {error}", path.display()))
}

/// Creates the input for a file with the given text and no tilec.toml instances.
pub fn source_file(
    db: &RootDatabase,
    path: impl Into<PathBuf>,
    text: impl Into<String>,
) -> SourceFile {
    SourceFile::new(db, path.into(), text.into(), Vec::new())
}

/// Checks `source` as the file `path`, with no diagnostic above info allowed, and lowers the first
/// launch of its first instance; panics, failing the test, where either step fails.
pub fn lower_first(path: &str, source: &str) -> tilec_ir::ThreadProgram {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, path, source);
        let errors: Vec<String> = tilec_db::file_diagnostics(&db, file)
            .iter()
            .filter(|d| d.severity != tilec_ir::Severity::Info)
            .map(|d| d.message.clone())
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
        let instance = instances(&db, file)[0];
        match tilec_db::thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs[0].clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        }
    })
}

/// The instance `index` of `kernel` in `file`; panics (failing the test) when there is none.
pub fn instance<'db>(
    db: &'db RootDatabase,
    file: SourceFile,
    kernel: &str,
    index: u32,
) -> Instance<'db> {
    *instances(db, file)
        .iter()
        .find(|i| i.kernel(db).name(db) == kernel && i.index(db) == index)
        .unwrap_or_else(|| panic!("no instance {kernel}#{index}"))
}

/// Instance `index` of `kernel` with some arguments replaced or added (`tilec run --with`).
pub fn instance_with<'db>(
    db: &'db RootDatabase,
    file: SourceFile,
    kernel: &str,
    overrides: &[(&str, tilec_ir::ConstValue)],
) -> Instance<'db> {
    let base = instance(db, file, kernel, 0);
    let mut args = base.args(db).clone();
    for (name, value) in overrides {
        match args.iter_mut().find(|(arg, _)| arg == name) {
            Some(slot) => slot.1 = value.clone(),
            None => args.push(((*name).to_owned(), value.clone())),
        }
    }
    Instance::new(db, base.kernel(db), base.index(db), args)
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
    for &instance in instances(db, file) {
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
    let mut out = format!(
        "{line}:{column} {} {}",
        diagnostic.severity, diagnostic.code
    );
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
    diagnostics
        .iter()
        .map(|diagnostic| format!("    {}", describe(db, file, diagnostic)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The environment variable that marks a child process started by [`isolated`].
const CHILD: &str = "TILEC_TESTS_CHILD";
/// The environment variable naming the file in which a child records its current input.
const INPUT: &str = "TILEC_TESTS_INPUT";

/// Runs a test's `body` in a child process: this same test binary, re-run on this one test.
///
/// A stack overflow aborts the whole process and cannot be caught, so without this one bad input
/// would take every other test of the binary down with it and show no input. In the child, `body`
/// runs as usual (a panic fails it the ordinary way); the parent fails with the child's output, and
/// with the last input the child recorded through [`record_input`], when the child did not succeed.
///
/// `test_name` is the test's full name as the harness lists it: its module path inside the test
/// binary and its function (`robustness::unbounded_recursion_is_reported_once`).
pub fn isolated(test_name: &str, body: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        body();
        return;
    }
    let input = std::env::temp_dir().join(format!(
        "tilec-tests-{}-{test_name}.input",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&input);
    let exe = std::env::current_exe().expect("the test binary knows its own path");
    let output = std::process::Command::new(exe)
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env(INPUT, &input)
        .output()
        .expect("the test binary can be started again");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last_input = std::fs::read_to_string(&input).ok();
    let _ = std::fs::remove_file(&input);
    if !output.status.success() {
        let last_input = last_input.map_or_else(String::new, |text| {
            format!("\n--- last input ---\n{text}\n---")
        });
        panic!(
            "`{test_name}` failed in its child process ({}):\n{stdout}\n{stderr}{last_input}",
            output.status
        );
    }
    let ran = format!("test {test_name} ... ok");
    assert!(
        stdout.contains(&ran),
        "the child process did not run `{test_name}`:\n{stdout}\n{stderr}"
    );
}

/// Records the input a test is about to compile, so that [`isolated`] can show it if the process
/// dies (a no-op outside a child process).
pub fn record_input(text: &str) {
    if let Some(path) = std::env::var_os(INPUT) {
        let _ = std::fs::write(path, text);
    }
}

/// Runs `work` on a thread with the analysis stack ([`tilec_frontend::ANALYSIS_STACK_BYTES`], as in
/// the `tilec` binary) and returns its result; a panic in `work` is resumed on the calling thread,
/// so that it fails the test (or reaches `catch_unwind`) as usual.
pub fn on_analysis_stack<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("analysis".to_owned())
            .stack_size(tilec_frontend::ANALYSIS_STACK_BYTES)
            .spawn_scoped(scope, work)
            .expect("a thread with the analysis stack can be started");
        match worker.join() {
            Ok(value) => value,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    })
}

/// A test's small non-negative integer as an index; a negative one fails the test.
pub fn index(value: i64) -> usize {
    usize::try_from(value).expect("a non-negative index")
}

/// A test's size or count as an integer of the IR.
pub fn int(value: usize) -> i64 {
    i64::try_from(value).expect("a size that fits i64")
}

/// `value` rounded to float32, as a reference computes what a kernel's float32 arithmetic gives
/// (exact for the float32 inputs of a test).
#[allow(clippy::cast_possible_truncation)]
pub fn f32_of(value: f64) -> f32 {
    value as f32
}

/// Asserts that an emulated output matches `expected` (f64 values, rounded to the output's dtype)
/// within the dtype's tolerance.
pub fn assert_matches(name: &str, actual: &tilec_runtime::HostTensor, expected: Vec<f64>) {
    let expected = tilec_runtime::HostTensor {
        dtype: actual.dtype,
        shape: actual.shape.clone(),
        values: expected
            .into_iter()
            .map(|x| tilec_runtime::tensor::round_to(actual.dtype, x))
            .collect(),
    };
    let comparison = tilec_runtime::compare(actual, &expected);
    assert!(
        comparison.passes(tilec_runtime::tolerance_for(actual.dtype)),
        "{name}: {comparison:?}"
    );
}

/// The lines only one of the two texts has, in order, marked `-` (expected) or `+` (actual): the
/// diff an expectations table that changed shows (at most 200 lines).
pub fn diff_lines(expected: &str, actual: &str) -> Vec<String> {
    let old: std::collections::HashSet<&str> = expected.lines().collect();
    let new: std::collections::HashSet<&str> = actual.lines().collect();
    let removed = expected
        .lines()
        .filter(|line| !new.contains(line))
        .map(|line| format!("- {line}"));
    let added = actual
        .lines()
        .filter(|line| !old.contains(line))
        .map(|line| format!("+ {line}"));
    removed.chain(added).take(200).collect()
}
