//! Tidy: the repository's own rules, checked as tests (in the manner of rust-analyzer's
//! `xtask/src/tidy.rs`). Each test reads the checkout's files and fails with what to fix:
//!
//! - every `.rs` file under `crates/`, `tests/` and `fuzz/` opens with a `//!` comment;
//! - the workspace's crate graph (`cargo metadata --no-deps`) is the one written in
//!   `docs/architecture.md`, and the crates that must stay behind `ide`/`db` reach past them only in
//!   the listed exceptions;
//! - the diagnostic codes of `tilec_ir::Code`, their pages in `docs/codes/` and the table in
//!   `docs/codes/README.md` agree, and no other page keeps a table of codes of its own;
//! - no `match` over the thread program's `Stmt` ends in a catch-all arm outside an allow-list;
//! - `docs/language.md` names exactly the `T.*` operations the front end dispatches on;
//! - relative links in `README.md`, `BENCHMARKS.md` and `docs/` point at files that exist.
//!
//! None of this needs `../shared`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use tilec_ir::Code;

/// The root of the checkout (this crate lives in `tests/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// `path` relative to the root, with `/` separators, for messages and allow-lists.
fn rel(path: &Path) -> String {
    let root = root();
    let path = path.strip_prefix(&root).unwrap_or(path);
    path.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Every file under `dir` whose name ends with `ext`, sorted; build outputs, hidden folders and
/// `node_modules` are skipped.
fn files_under(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                    stack.push(path);
                }
            } else if kind.is_file() && name.ends_with(ext) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn workspace_rust_files() -> Vec<PathBuf> {
    let root = root();
    ["crates", "tests", "fuzz"]
        .iter()
        .flat_map(|dir| files_under(&root.join(dir), ".rs"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Every file says what it is for.

#[test]
fn every_rust_file_opens_with_a_doc_comment() {
    let files = workspace_rust_files();
    assert!(
        files.len() > 100,
        "found only {} .rs files: is the root right?",
        files.len()
    );
    let missing: Vec<String> = files
        .iter()
        .filter(|path| !read(path).trim_start().starts_with("//!"))
        .map(|path| rel(path))
        .collect();
    assert!(
        missing.is_empty(),
        "these files do not open with a `//!` comment saying what they are for; add one as their \
         first line:\n  {}",
        missing.join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------------
// The crate graph.

/// Workspace-internal dependencies of one crate: normal (build dependencies count as normal) and dev.
#[derive(Debug, Default, PartialEq, Eq)]
struct Deps {
    normal: BTreeSet<String>,
    dev: BTreeSet<String>,
}

fn short(name: &str) -> String {
    name.strip_prefix("tilec-").unwrap_or(name).to_owned()
}

/// The graph as `cargo metadata --no-deps` reports it.
fn metadata_graph() -> BTreeMap<String, Deps> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(&cargo)
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{cargo} metadata`: {e}"));
    assert!(
        output.status.success(),
        "`cargo metadata` failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("`cargo metadata` printed no JSON: {e}"));
    let packages = json["packages"].as_array().cloned().unwrap_or_default();
    let members: BTreeSet<String> = packages
        .iter()
        .filter_map(|p| p["name"].as_str())
        .map(str::to_owned)
        .collect();
    let mut graph = BTreeMap::new();
    for package in &packages {
        let Some(name) = package["name"].as_str() else {
            continue;
        };
        let mut deps = Deps::default();
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let Some(dep_name) = dep["name"].as_str() else {
                continue;
            };
            if !members.contains(dep_name) {
                continue;
            }
            match dep["kind"].as_str() {
                Some("dev") => deps.dev.insert(short(dep_name)),
                _ => deps.normal.insert(short(dep_name)),
            };
        }
        graph.insert(short(name), deps);
    }
    graph
}

/// The fenced block that follows `marker` in `text`, without its fences.
fn fenced_block_after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let after = &text[text.find(marker)? + marker.len()..];
    let open = after.find("```")?;
    let body_start = open + after[open..].find('\n')? + 1;
    let body_len = after[body_start..].find("```")?;
    Some(&after[body_start..body_start + body_len])
}

/// The graph written in `docs/architecture.md`: lines `crate -> deps... | dev: deps...`.
fn documented_graph(block: &str) -> Result<BTreeMap<String, Deps>, String> {
    let mut graph = BTreeMap::new();
    for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (name, rest) = line
            .split_once("->")
            .ok_or_else(|| format!("no `->` in the line `{line}`"))?;
        let (normal, dev) = match rest.split_once('|') {
            Some((normal, dev)) => {
                let dev = dev
                    .trim()
                    .strip_prefix("dev:")
                    .ok_or_else(|| format!("expected `| dev: ...` in the line `{line}`"))?;
                (normal, dev)
            }
            None => (rest, ""),
        };
        let words = |s: &str| {
            s.split_whitespace()
                .map(str::to_owned)
                .collect::<BTreeSet<_>>()
        };
        let deps = Deps {
            normal: words(normal),
            dev: words(dev),
        };
        if graph.insert(name.trim().to_owned(), deps).is_some() {
            return Err(format!("`{}` is listed twice", name.trim()));
        }
    }
    Ok(graph)
}

fn render_graph(graph: &BTreeMap<String, Deps>) -> String {
    let width = graph.keys().map(String::len).max().unwrap_or(0);
    let mut out = String::new();
    for (name, deps) in graph {
        let normal: Vec<&str> = deps.normal.iter().map(String::as_str).collect();
        let mut line = format!("{name:<width$} -> {}", normal.join(" "));
        if !deps.dev.is_empty() {
            let dev: Vec<&str> = deps.dev.iter().map(String::as_str).collect();
            let _ = write!(line, " | dev: {}", dev.join(" "));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

const GRAPH_MARKER: &str = "<!-- tidy:crate-graph -->";

#[test]
fn crate_graph_is_the_documented_one() {
    let doc_path = root().join("docs/architecture.md");
    let doc = read(&doc_path);
    let block = fenced_block_after(&doc, GRAPH_MARKER).unwrap_or_else(|| {
        panic!("docs/architecture.md has no fenced block after `{GRAPH_MARKER}`")
    });
    let documented = documented_graph(block)
        .unwrap_or_else(|e| panic!("the crate graph in docs/architecture.md: {e}"));
    let actual = metadata_graph();
    assert!(
        actual.contains_key("ir") && actual.contains_key("daemon"),
        "odd metadata: {actual:?}"
    );
    if documented != actual {
        let mut diff = String::new();
        for name in documented
            .keys()
            .chain(actual.keys())
            .collect::<BTreeSet<_>>()
        {
            match (documented.get(name), actual.get(name)) {
                (Some(d), Some(a)) if d == a => {}
                (Some(d), Some(a)) => {
                    let _ = writeln!(diff, "  {name}: documented {d:?}, Cargo.toml says {a:?}");
                }
                (Some(_), None) => {
                    let _ = writeln!(diff, "  {name}: documented, but no such workspace crate");
                }
                (None, _) => {
                    let _ = writeln!(diff, "  {name}: a workspace crate the document leaves out");
                }
            }
        }
        panic!(
            "the crate graph in docs/architecture.md is not the workspace's:\n{diff}\nIf the new \
             edge is intended, say why in docs/architecture.md and replace the block after \
             `{GRAPH_MARKER}` with:\n\n{}",
            render_graph(&actual)
        );
    }
}

/// What a crate must not name, because it must reach that part of the compiler through another
/// crate: (folder, text, the rule).
const LAYERING_RULES: &[(&str, &str, &str)] = &[
    (
        "crates/lsp/src",
        "tilec_passes::",
        "the language server reaches analysis only through `ide`",
    ),
    (
        "crates/lsp/src",
        "tilec_runtime::",
        "the language server reaches the tuning store only through `ide` or `db`",
    ),
    (
        "crates/ide/src",
        "tilec_passes::cuda",
        "`ide` runs no pass: CUDA comes from `db`",
    ),
    (
        "crates/ide/src",
        "tilec_passes::lower",
        "`ide` runs no pass: thread programs come from `db`",
    ),
    (
        "crates/ide/src",
        "tilec_passes::roofline",
        "`ide` runs no pass: estimates come from `db`",
    ),
    (
        "crates/ide/src",
        "check_world",
        "`ide` runs no pass: checks come from `db`",
    ),
    (
        "crates/ide/src",
        "infer_layouts",
        "`ide` runs no pass: layouts come from `db`",
    ),
    (
        "crates/daemon/src",
        "emit_cuda",
        "CUDA comes from the `db` query `cuda_source`, lowered and printed for one target",
    ),
    (
        "crates/passes/src",
        "tilec_frontend",
        "`passes` and `frontend` are siblings over `ir`",
    ),
    (
        "crates/runtime/src",
        "tilec_passes",
        "`runtime` runs the thread program as given",
    ),
    ("crates/ir/src", "salsa", "`ir` knows nothing of salsa"),
    (
        "crates/passes/src",
        "salsa",
        "passes are plain functions; salsa lives in `db`",
    ),
    (
        "crates/frontend/src",
        "salsa",
        "the front end is plain functions; salsa lives in `db`",
    ),
];

/// Known breaches of [`LAYERING_RULES`]: (file, text, why it is still there). An entry whose text
/// no longer occurs in its file fails the test, so the list only shrinks.
const LAYERING_EXCEPTIONS: &[(&str, &str, &str)] = &[];

#[test]
fn crates_reach_past_their_layer_only_in_known_places() {
    let root = root();
    let mut found = BTreeSet::new();
    let mut breaches = Vec::new();
    for &(dir, text, rule) in LAYERING_RULES {
        for path in files_under(&root.join(dir), ".rs") {
            // Comments may name what the code must not use.
            let code = strip_comments_and_literals(&read(&path));
            if !code.contains(text) {
                continue;
            }
            let file = rel(&path);
            found.insert((file.clone(), text));
            if !LAYERING_EXCEPTIONS
                .iter()
                .any(|&(f, t, _)| f == file && t == text)
            {
                breaches.push(format!("  {file} names `{text}`, but {rule}"));
            }
        }
    }
    let stale: Vec<String> = LAYERING_EXCEPTIONS
        .iter()
        .filter(|&&(file, text, _)| !found.contains(&(file.to_owned(), text)))
        .map(|(file, text, _)| format!("  {file} no longer names `{text}`"))
        .collect();
    assert!(
        breaches.is_empty(),
        "code reaches past its layer (docs/architecture.md, \"Code map\"); route it through the \
         crate the rule names, or add an entry with a reason to LAYERING_EXCEPTIONS in \
         tests/tests/it/tidy.rs:\n{}",
        breaches.join("\n")
    );
    assert!(
        stale.is_empty(),
        "fixed, well done: remove these entries from LAYERING_EXCEPTIONS in tests/tests/it/tidy.rs \
         (and the exception from docs/architecture.md):\n{}",
        stale.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Diagnostic codes: one source (`Code`), its pages and its table.

const CODES_START: &str = "<!-- tidy:codes-table:start -->";
const CODES_END: &str = "<!-- tidy:codes-table:end -->";

/// The variants written in `pub enum Code { ... }` of `crates/ir/src/diagnostic.rs`.
fn code_variants_in_source() -> Vec<String> {
    let text = strip_comments_and_literals(&read(&root().join("crates/ir/src/diagnostic.rs")));
    let start = text
        .find("pub enum Code {")
        .expect("`pub enum Code {` in diagnostic.rs");
    let body = &text[start + "pub enum Code {".len()..];
    let body = &body[..body.find('}').expect("the end of `enum Code`")];
    body.split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The table of codes that `docs/codes/README.md` must hold, generated from `Code`.
fn codes_table() -> String {
    let mut out = String::from("| code | severity | summary |\n|---|---|---|\n");
    for code in Code::ALL {
        let _ = writeln!(
            out,
            "| [{name}]({name}.md) | {} | {} |",
            code.usual_severity().name(),
            code.summary(),
            name = code.name()
        );
    }
    out
}

#[test]
fn diagnostic_codes_pages_and_table_agree() {
    let all: Vec<String> = Code::ALL.iter().map(|c| format!("{c:?}")).collect();
    assert_eq!(
        code_variants_in_source(),
        all,
        "`Code::ALL` in crates/ir/src/diagnostic.rs must list every variant of `enum Code`, in \
         declaration order"
    );

    let dir = root().join("docs/codes");
    let pages: BTreeSet<String> = files_under(&dir, ".md")
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .filter(|stem| stem != "README")
        .collect();
    let names: BTreeSet<String> = Code::ALL.iter().map(|c| c.name().to_owned()).collect();
    let no_page: Vec<_> = names.difference(&pages).collect();
    let no_code: Vec<_> = pages.difference(&names).collect();
    assert!(
        no_page.is_empty() && no_code.is_empty(),
        "docs/codes/ must hold one page per `Code`: write docs/codes/<code>.md for {no_page:?} \
         (and add it to crates/ide/src/explain.rs); remove or rename the pages {no_code:?}"
    );
    for code in Code::ALL {
        let page = read(&dir.join(format!("{}.md", code.name())));
        assert!(
            page.starts_with(&format!("# {}\n", code.name())),
            "docs/codes/{}.md must start with the line `# {}`",
            code.name(),
            code.name()
        );
    }

    let readme_path = dir.join("README.md");
    let readme = read(&readme_path);
    let (Some(start), Some(end)) = (readme.find(CODES_START), readme.find(CODES_END)) else {
        panic!(
            "docs/codes/README.md must hold the generated table between `{CODES_START}` and `{CODES_END}`"
        );
    };
    let body_start = start + CODES_START.len() + 1;
    let expected = codes_table();
    if readme.get(body_start..end) != Some(expected.as_str()) {
        if std::env::var_os("TILEC_BLESS").is_some() {
            let new = format!("{}{expected}{}", &readme[..body_start], &readme[end..]);
            std::fs::write(&readme_path, new).expect("write docs/codes/README.md");
        } else {
            panic!(
                "the table in docs/codes/README.md is not the one `Code::ALL`, `Code::summary` and \
                 `Code::usual_severity` give; run this test with TILEC_BLESS=1 to rewrite it, or \
                 put between the markers:\n\n{expected}"
            );
        }
    }

    // One table of codes, not several that drift: no other page lists codes in a table of its own.
    let mut others = vec![root().join("README.md")];
    others.extend(
        files_under(&root().join("docs"), ".md")
            .into_iter()
            .filter(|p| *p != readme_path),
    );
    let mut tables = Vec::new();
    for path in others {
        for (n, line) in read(&path).lines().enumerate() {
            let first_cell = line
                .trim()
                .strip_prefix('|')
                .and_then(|l| l.split('|').next());
            let Some(cell) = first_cell else { continue };
            let cell = cell.trim().trim_matches('`').trim_start_matches('[');
            if names.iter().any(|name| {
                cell.starts_with(name.as_str())
                    && !cell[name.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '-')
            }) {
                tables.push(format!("  {}:{}: {}", rel(&path), n + 1, line.trim()));
            }
        }
    }
    assert!(
        tables.is_empty(),
        "diagnostic codes are tabulated in docs/codes/README.md only (generated from `Code`); link \
         to it instead of these rows:\n{}",
        tables.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Matches over the thread program list every statement.

/// `match`es over `Stmt` that may keep a catch-all arm: (file, the function the match is in, why).
/// A new statement with a body must be visited by every recursion over the program; a catch-all
/// makes forgetting it silent. An entry that no longer matches anything fails the test.
const STMT_CATCH_ALL_ALLOWED: &[(&str, &str, &str)] = &[
    (
        "crates/passes/src/lower/fences.rs",
        "of",
        "selects the statements whose shared operands the async proxy reads (`Wgmma`, `TmaStore`); a new such statement must be added here",
    ),
    (
        "crates/passes/src/lower/fences.rs",
        "written_by",
        "selects generic writes to shared memory (`Store`, `Atomic`, `VectorCopy`, `AsyncCopy`); a new statement that writes shared memory must be added here",
    ),
    (
        "crates/passes/src/lower/fences.rs",
        "render",
        "a unit test's rendering: statements it does not abbreviate print as `Debug`",
    ),
    (
        "crates/passes/src/lower/mod.rs",
        "lower_with_workspaces",
        "collects the top-level `Let`s; no other statement binds a variable",
    ),
    (
        "crates/passes/src/lower/specialize.rs",
        "keep_last_gemm_in_flight",
        "recognises one exact tail (`WgmmaCommit`, `WgmmaWait`); any other shape leaves the loop as it is",
    ),
    (
        "crates/passes/src/lower/vectorize.rs",
        "collect_stmt",
        "conservative: a loop body with any statement but `Store` and `If` is not vectorized (`None`), so a new statement is never vectorized by mistake",
    ),
    (
        "crates/runtime/src/emulator/roles.rs",
        "step",
        "loud: a wait under any other statement is reported as a malformed program, never skipped",
    ),
];

/// One `match` with a catch-all arm over statements: where, and the arm.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct CatchAll {
    file: String,
    function: String,
    line: usize,
    arm: String,
}

/// Replaces comments and the contents of string and character literals with spaces (newlines are
/// kept), so that braces and keywords in them do not count as code. The result is ASCII and has
/// the byte length of `text`, so a byte offset into it is one into `text` (a non-ASCII character
/// of code becomes as many `_` as it has bytes).
fn strip_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| {
        if c == '\n' {
            "\n".to_owned()
        } else {
            " ".repeat(c.len_utf8())
        }
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push_str(&blank(chars[i]));
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push_str(&blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !is_ident(chars[i - 1]) || chars[i - 1] == 'b')
        {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push('r');
            for _ in i + 1..=j {
                out.push(' ');
            }
            i = j + 1;
            while i < chars.len() {
                if chars[i] == '"' && (0..hashes).all(|h| chars.get(i + 1 + h) == Some(&'#')) {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += 1 + hashes;
                    break;
                }
                out.push_str(&blank(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push_str(&blank(chars[i]));
                    i += 1;
                }
            }
            if i < chars.len() {
                out.push(' ');
                i += 1;
            }
        } else if c == '\'' {
            // A character literal ('{', '\n', '\'') or a lifetime ('a), which stays.
            let close = if next == Some('\\') {
                (i + 2..chars.len().min(i + 12)).find(|&j| chars[j] == '\'' && j > i + 2)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    for &c in &chars[i..=end] {
                        out.push_str(&blank(c));
                    }
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else if c.is_ascii() {
            out.push(c);
            i += 1;
        } else {
            out.push_str(&"_".repeat(c.len_utf8()));
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The variant names of `pub enum Stmt` in `crates/ir/src/thread.rs`.
fn thread_stmt_variants() -> BTreeSet<String> {
    let text = strip_comments_and_literals(&read(&root().join("crates/ir/src/thread.rs")));
    let start = text
        .find("pub enum Stmt {")
        .expect("`pub enum Stmt {` in crates/ir/src/thread.rs");
    let chars: Vec<char> = text[start + "pub enum Stmt {".len()..].chars().collect();
    let mut variants = BTreeSet::new();
    let mut depth = 0;
    let mut word = String::new();
    let mut expect_variant = true;
    for c in chars {
        match c {
            '{' | '(' | '[' | '<' => depth += 1,
            '}' | ')' | ']' | '>' if depth == 0 => break,
            '}' | ')' | ']' | '>' => depth -= 1,
            ',' if depth == 0 => expect_variant = true,
            '#' if depth == 0 => expect_variant = false, // an attribute; its `[...]` follows
            _ => {}
        }
        if depth == 0 && is_ident(c) {
            word.push(c);
        } else {
            if expect_variant && !word.is_empty() && word.starts_with(char::is_uppercase) {
                variants.insert(std::mem::take(&mut word));
                expect_variant = false;
            }
            word.clear();
            if c == ']' && depth == 0 {
                expect_variant = true;
            }
        }
    }
    variants
}

/// The arms of the `match` whose body opens at `chars[open]` (a `{`): each pattern (with the
/// whitespace before it) and where it starts, and the index of the `}` that closes the body.
fn match_arms(chars: &[char], open: usize) -> (Vec<(usize, String)>, usize) {
    let mut arms = Vec::new();
    let mut i = open + 1;
    loop {
        while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
            i += 1;
        }
        if i >= chars.len() || chars[i] == '}' {
            return (arms, i);
        }
        // The pattern, up to `=>` outside brackets; with the whitespace before it, where a
        // literal blanked out by `strip_comments_and_literals` may have stood.
        let mut start = i;
        while start > open + 1 && chars[start - 1].is_whitespace() {
            start -= 1;
        }
        let mut depth = 0i32;
        while i < chars.len() {
            match chars[i] {
                '{' | '(' | '[' => depth += 1,
                '}' | ')' | ']' => {
                    depth -= 1;
                    if depth < 0 {
                        return (arms, i);
                    }
                }
                '=' if depth == 0 && chars.get(i + 1) == Some(&'>') => break,
                _ => {}
            }
            i += 1;
        }
        arms.push((
            start,
            chars[start..i.min(chars.len())].iter().collect::<String>(),
        ));
        i += 2;
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        // The arm's body: a block, or an expression up to `,` or the match's `}`.
        let block = chars.get(i) == Some(&'{');
        let mut depth = 0i32;
        while i < chars.len() {
            match chars[i] {
                '{' | '(' | '[' => depth += 1,
                '}' | ')' | ']' => {
                    depth -= 1;
                    if depth < 0 {
                        return (arms, i);
                    }
                    if depth == 0 && block {
                        i += 1;
                        break;
                    }
                }
                ',' if depth == 0 => break,
                _ => {}
            }
            i += 1;
        }
    }
}

/// Every catch-all arm (`_`, `_ if ..`, or a lone binding) of a `match` in `text` that has an arm
/// naming a statement (`Stmt::<variant>`). Textual, on code with comments and literals blanked:
/// a match is found by its keyword, its body by the first `{` after it, its arms by brackets.
fn stmt_catch_alls(file: &str, text: &str, variants: &BTreeSet<String>) -> Vec<CatchAll> {
    let code = strip_comments_and_literals(text);
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i + 5 < chars.len() {
        let is_match = chars[i..i + 5].iter().copied().eq("match".chars())
            && (i == 0 || !is_ident(chars[i - 1]))
            && chars[i + 5].is_whitespace();
        if !is_match {
            i += 1;
            continue;
        }
        let Some(open) = (i + 5..chars.len()).find(|&j| chars[j] == '{') else {
            break;
        };
        let (arms, _) = match_arms(&chars, open);
        let over_stmt = arms.iter().any(|(_, pattern)| {
            pattern.match_indices("Stmt::").any(|(at, _)| {
                let before = pattern[..at].chars().next_back();
                let variant: String = pattern[at + "Stmt::".len()..]
                    .chars()
                    .take_while(|&c| is_ident(c))
                    .collect();
                !before.is_some_and(is_ident) && variants.contains(&variant)
            })
        });
        if over_stmt {
            for (at, pattern) in &arms {
                let p = pattern.trim();
                let at = at + (pattern.len() - pattern.trim_start().len());
                let binding = !p.is_empty()
                    && p.chars().all(is_ident)
                    && p.starts_with(|c: char| c.is_lowercase() || c == '_');
                if p == "_" || p.starts_with("_ if") || binding {
                    let before: String = chars[..at].iter().collect();
                    found.push(CatchAll {
                        file: file.to_owned(),
                        function: enclosing_fn(&before),
                        line: before.matches('\n').count() + 1,
                        arm: p.to_owned(),
                    });
                }
            }
        }
        i += 5;
    }
    found
}

/// The name of the last `fn` declared before the end of `code`.
fn enclosing_fn(code: &str) -> String {
    let mut name = String::from("?");
    let mut rest = code;
    while let Some(at) = rest.find("fn ") {
        let ok = at == 0 || !rest[..at].chars().next_back().is_some_and(is_ident);
        let after = &rest[at + 3..];
        if ok {
            let word: String = after
                .trim_start()
                .chars()
                .take_while(|&c| is_ident(c))
                .collect();
            if !word.is_empty() {
                name = word;
            }
        }
        rest = after;
    }
    name
}

#[test]
fn matches_over_thread_statements_list_every_statement() {
    let variants = thread_stmt_variants();
    assert!(
        ["For", "If", "Barrier", "Store"]
            .iter()
            .all(|v| variants.contains(*v)),
        "could not read `enum Stmt` in crates/ir/src/thread.rs: {variants:?}"
    );
    let mut found = Vec::new();
    for path in workspace_rust_files() {
        let text = read(&path);
        // The front end matches over Python's statements (ruff's `Stmt`), not the thread program's.
        if text.contains("ruff_python_ast") {
            continue;
        }
        found.extend(stmt_catch_alls(&rel(&path), &text, &variants));
    }
    let new: Vec<String> = found
        .iter()
        .filter(|c| {
            !STMT_CATCH_ALL_ALLOWED
                .iter()
                .any(|&(f, func, _)| f == c.file && func == c.function)
        })
        .map(|c| {
            format!(
                "  {}:{} (in `fn {}`): `{} =>`",
                c.file, c.line, c.function, c.arm
            )
        })
        .collect();
    let stale: Vec<String> = STMT_CATCH_ALL_ALLOWED
        .iter()
        .filter(|&&(f, func, _)| !found.iter().any(|c| c.file == f && c.function == func))
        .map(|(f, func, _)| format!("  {f} `fn {func}`"))
        .collect();
    assert!(
        new.is_empty(),
        "these matches over the thread program's `Stmt` end in a catch-all arm, so a new statement \
         would silently fall into it; list the remaining variants instead (or, if the arm is right \
         for every statement to come, add the function with a reason to STMT_CATCH_ALL_ALLOWED in \
         tests/tests/it/tidy.rs):\n{}",
        new.join("\n")
    );
    assert!(
        stale.is_empty(),
        "these entries of STMT_CATCH_ALL_ALLOWED in tests/tests/it/tidy.rs match no catch-all any \
         more; remove them:\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_catch_all_heuristic_finds_what_it_should() {
    let variants: BTreeSet<String> = ["For", "Barrier"].iter().map(|s| (*s).to_owned()).collect();
    let text = r#"
fn walk(s: &Stmt) -> u32 {
    let brace = '{'; // a } in a comment
    match s {
        Stmt::For { body, .. } => { let _ = "}"; 1 }
        _ => 0,
    }
}
fn exhaustive(s: &Stmt) -> bool {
    match s { Stmt::For { .. } => true, Stmt::Barrier => false }
}
fn other(x: Option<u32>) -> u32 {
    match x { Some(v) => v, _ => 0 }
}
fn binding(s: &Stmt) -> bool {
    match s { Stmt::Barrier => true, other => other.is_for() }
}
"#;
    let found = stmt_catch_alls("x.rs", text, &variants);
    let summary: Vec<(&str, &str)> = found
        .iter()
        .map(|c| (c.function.as_str(), c.arm.as_str()))
        .collect();
    assert_eq!(summary, [("walk", "_"), ("binding", "other")]);
}

#[test]
fn stripping_keeps_every_byte_offset() {
    let text =
        "let s = \"{ é\"; // } ü\nmatch x { 'a' => 1, _ => r#\"}\"# }\n/* { */ fn f<'a>() {}\n";
    let stripped = strip_comments_and_literals(text);
    assert_eq!(stripped.len(), text.len());
    assert!(stripped.is_ascii());
    assert_eq!(stripped.matches('{').count(), 2, "{stripped}");
    assert_eq!(stripped.matches('}').count(), 2, "{stripped}");
    assert!(stripped.contains("fn f<'a>()"), "{stripped}");
}

// ---------------------------------------------------------------------------------------------
// The TileLang surface page lists what the front end dispatches on.

/// The string literals in the patterns of the first `match name` after `after` in `file`: the
/// names a dispatch `match` accepts (patterns starting with `_` are guards and are skipped).
fn dispatched_names(file: &str, after: &str) -> BTreeSet<String> {
    let text = read(&root().join(file));
    let code = strip_comments_and_literals(&text);
    let start = code
        .find(after)
        .unwrap_or_else(|| panic!("`{after}` in {file}"));
    let from_match = start
        + code[start..]
            .find("match name")
            .unwrap_or_else(|| panic!("`match name` in {file}"));
    let chars: Vec<char> = code.chars().collect(); // ASCII: char offsets are byte offsets
    let open = (from_match..chars.len())
        .find(|&i| chars[i] == '{')
        .expect("the match's body");
    let (arms, _) = match_arms(&chars, open);
    let mut names = BTreeSet::new();
    for (at, pattern) in arms {
        if pattern.trim_start().starts_with('_') {
            continue;
        }
        let original = text.get(at..at + pattern.len()).unwrap_or_default();
        for literal in original.split('"').skip(1).step_by(2) {
            names.insert(format!("T.{literal}"));
        }
    }
    names
}

/// Every `` `T.name` `` in the markdown that follows `marker` up to the next blank line.
fn documented_ops(page: &str, marker: &str) -> BTreeSet<String> {
    let start = page
        .find(marker)
        .unwrap_or_else(|| panic!("`{marker}` in docs/language.md"));
    let section = &page[start + marker.len()..];
    let section = section.trim_start_matches('\n');
    let section = &section[..section.find("\n\n").unwrap_or(section.len())];
    section
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|code| code.starts_with("T.") && code[2..].chars().all(is_ident))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_tilelang_surface_page_lists_the_dispatch_table() {
    let mut dispatched = dispatched_names("crates/frontend/src/dsl.rs", "fn dsl_call");
    dispatched.extend(dispatched_names(
        "crates/ir/src/data.rs",
        "pub fn from_name(name: &str) -> Option<Intrinsic>",
    ));
    assert!(
        dispatched.contains("T.copy") && dispatched.contains("T.exp2"),
        "{dispatched:?}"
    );
    let not_yet = {
        let text = strip_comments_and_literals(&read(&root().join("crates/frontend/src/dsl.rs")));
        let original = read(&root().join("crates/frontend/src/dsl.rs"));
        let start = text
            .find("const NOT_YET")
            .expect("`const NOT_YET` in dsl.rs");
        let end = start + text[start..].find("];").expect("the end of NOT_YET");
        original[start..end]
            .split('"')
            .skip(1)
            .step_by(2)
            .map(|name| format!("T.{name}"))
            .collect::<BTreeSet<_>>()
    };
    let page = read(&root().join("docs/language.md"));
    for (what, marker, expected) in [
        ("supported", "<!-- tidy:dsl-surface -->", &dispatched),
        ("not yet supported", "<!-- tidy:dsl-not-yet -->", &not_yet),
    ] {
        let documented = documented_ops(&page, marker);
        let undocumented: Vec<_> = expected.difference(&documented).collect();
        let unknown: Vec<_> = documented.difference(expected).collect();
        assert!(
            undocumented.is_empty() && unknown.is_empty(),
            "docs/language.md, after `{marker}`, must name exactly the {what} `T.*` operations of \
             the front end's dispatch (crates/frontend/src/dsl.rs, Intrinsic::from_name): add \
             {undocumented:?}; remove {unknown:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Links.

#[test]
fn relative_links_in_the_docs_resolve() {
    let root = root();
    let mut pages = vec![root.join("README.md"), root.join("BENCHMARKS.md")];
    pages.extend(files_under(&root.join("docs"), ".md"));
    let mut broken = Vec::new();
    for page in pages {
        let text = read(&page);
        let mut in_code = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
            }
            if in_code {
                continue;
            }
            let mut rest = line;
            while let Some(at) = rest.find("](") {
                let after = &rest[at + 2..];
                let Some(end) = after.find(')') else { break };
                let target = &after[..end];
                rest = &after[end..];
                if target.contains("://")
                    || target.starts_with('#')
                    || target.starts_with("mailto:")
                {
                    continue;
                }
                let path = target.split('#').next().unwrap_or(target);
                let dir = page.parent().unwrap_or(&root);
                if !dir.join(path).exists() {
                    broken.push(format!("  {}:{}: {target}", rel(&page), n + 1));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "these relative links point at nothing:\n{}",
        broken.join("\n")
    );
}
