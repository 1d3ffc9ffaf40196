//! Imports within a workspace: a kernel that uses helpers, constants and macros from sibling
//! modules is analysed with them, and editing a helper module re-analyses the files that import
//! it and nothing else (salsa's `WillExecute` events). Stands alone: the modules are written here.

use std::path::PathBuf;

use salsa::Setter;
use tilec_db::{
    Executed, RootDatabase, SourceFile, file_diagnostics, instances, kernel_world, register_files,
};

const COMMON: &str = r#"
import tilelang.language as T

BLOCK = 64


def align(x, a):
    return (x + a - 1) // a * a


@T.macro
def fill(buf, value):
    for i, j in T.Parallel(BLOCK, 8):
        buf[i, j] = value
"#;

const CONFIGS: &str = r#"
from .common import BLOCK as ROWS
from . import WARPS

THREADS = ROWS * WARPS // 2
"#;

const OPS: &str = r#"
import tilelang
import tilelang.language as T
from .common import align, fill, BLOCK
from . import configs as cfg
from pkg.common import *


@tilelang.jit(out_idx=[0])
def zeros(M):
    rows = align(M, BLOCK)

    @T.prim_func
    def main(A: T.Tensor((rows, 8), "float32")):
        with T.Kernel(rows // BLOCK, threads=cfg.THREADS) as bx:
            tile = T.alloc_fragment((BLOCK, 8), "float32")
            fill(tile, 0.0)
            T.copy(tile, A[bx * BLOCK, 0])

    return main


zeros(1000)
"#;

const OTHER: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def copy(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.copy(A, B)

    return main


copy(128)
"#;

struct Workspace {
    db: RootDatabase,
    common: SourceFile,
    ops: SourceFile,
    other: SourceFile,
}

fn workspace() -> Workspace {
    let mut db = RootDatabase::with_event_log();
    let file = |db: &RootDatabase, path: &str, text: &str| {
        SourceFile::new(db, PathBuf::from(path), text.to_owned(), Vec::new())
    };
    let common = file(&db, "/ws/pkg/common.py", COMMON);
    let configs = file(&db, "/ws/pkg/configs.py", CONFIGS);
    let init = file(&db, "/ws/pkg/__init__.py", "WARPS = 4\n");
    let ops = file(&db, "/ws/pkg/ops.py", OPS);
    let other = file(&db, "/ws/other.py", OTHER);
    register_files(&mut db, &[common, configs, init, ops, other]);
    Workspace {
        db,
        common,
        ops,
        other,
    }
}

/// Runs every query a check runs, for both checked files.
fn check_all(workspace: &Workspace) -> Vec<String> {
    let mut out = Vec::new();
    for file in [workspace.ops, workspace.other] {
        for diagnostic in file_diagnostics(&workspace.db, file) {
            out.push(format!(
                "{}: {} {}",
                file.path(&workspace.db).display(),
                diagnostic.code,
                diagnostic.message
            ));
        }
    }
    out
}

fn world_runs(log: &[Executed]) -> usize {
    log.iter()
        .filter(|executed| executed.query == "kernel_world")
        .count()
}

#[test]
fn helpers_constants_and_macros_come_from_sibling_modules() {
    let workspace = workspace();
    assert_eq!(check_all(&workspace), Vec::<String>::new());
    let db = &workspace.db;
    let zeros = instances(db, workspace.ops)[0];
    let world = kernel_world(db, zeros);
    // align(1000, 64) = 1024 rows, 16 blocks of 64 rows, 128 threads from `configs`.
    assert_eq!(
        world.args,
        vec![("M".to_owned(), tilec_ir::ConstValue::Int(1000))]
    );
    let param = world.params[0];
    let shape: Vec<Option<i64>> = world
        .shapes
        .get(param)
        .expect("a tensor")
        .iter()
        .map(|dim| world.exprs.as_int(*dim))
        .collect();
    assert_eq!(shape, vec![Some(1024), Some(8)]);
    let stores = world
        .kinds
        .iter()
        .filter(|kind| matches!(kind, tilec_ir::EntityKind::Store))
        .count();
    assert_eq!(stores, 1, "the macro's store is part of the kernel");
}

#[test]
fn editing_a_helper_module_reanalyses_only_its_importers() {
    let mut workspace = workspace();
    check_all(&workspace);
    workspace.db.take_executed();

    // A comment in the helper module changes nothing anyone imports.
    let commented = format!("# helpers\n{COMMON}");
    workspace.common.set_text(&mut workspace.db).to(commented);
    check_all(&workspace);
    assert_eq!(world_runs(&workspace.db.take_executed()), 0);

    // A new block size re-analyses the importer's kernel, not the other file's.
    let edited = COMMON.replace("BLOCK = 64", "BLOCK = 32");
    workspace.common.set_text(&mut workspace.db).to(edited);
    assert_eq!(check_all(&workspace), Vec::<String>::new());
    let log = workspace.db.take_executed();
    assert_eq!(world_runs(&log), 1, "only `zeros` is rebuilt");
    let zeros = instances(&workspace.db, workspace.ops)[0];
    let world = kernel_world(&workspace.db, zeros);
    let shape = world.shapes.get(world.params[0]).expect("a tensor");
    // align(1000, 32) = 1024 still; the grid is now 32 blocks of 32 rows.
    assert_eq!(world.exprs.as_int(shape[0]), Some(1024));
    let (_, launch) = world.launches.iter().next().expect("one launch");
    let launch_grid: Vec<Option<i64>> = launch
        .grid
        .iter()
        .map(|extent| world.exprs.as_int(*extent))
        .collect();
    assert_eq!(launch_grid, vec![Some(32)]);
}

#[test]
fn a_missing_module_or_an_import_cycle_is_not_a_crash() {
    let mut db = RootDatabase::default();
    let a = SourceFile::new(
        &db,
        PathBuf::from("/ws/a.py"),
        "from b import helper\nfrom missing_module import thing\nX = 1\n".to_owned(),
        Vec::new(),
    );
    let b = SourceFile::new(
        &db,
        PathBuf::from("/ws/b.py"),
        format!("from a import X\n\ndef helper():\n    return X\n\n{OTHER}"),
        Vec::new(),
    );
    register_files(&mut db, &[a, b]);
    // Both files are analysed; the cycle is cut where it closes, and said so.
    let _ = file_diagnostics(&db, a);
    let diagnostics: Vec<String> = file_diagnostics(&db, b)
        .iter()
        .map(|d| format!("{} {} {}", d.severity, d.code, d.message))
        .collect();
    assert_eq!(
        diagnostics,
        vec![
            "info unresolved-import this import closes a cycle: `/ws/a.py` imports this file \
             back; tilec runs each module once, so what one takes from the other while it is \
             still being imported is unknown"
        ]
    );
    assert_eq!(instances(&db, b).len(), 1);
}

#[test]
fn a_relative_import_of_no_workspace_file_is_an_info() {
    let mut db = RootDatabase::default();
    let text = format!("from .missing_helpers import BLOCK\n{OTHER}");
    let ops = SourceFile::new(&db, PathBuf::from("/ws/pkg/ops.py"), text, Vec::new());
    register_files(&mut db, &[ops]);
    let found: Vec<String> = file_diagnostics(&db, ops)
        .iter()
        .map(|d| format!("{} {} {}", d.severity, d.code, d.message))
        .collect();
    assert_eq!(
        found,
        vec![
            "info unresolved-import `.missing_helpers` is not a file of this workspace that \
             tilec could read, so what this imports is unknown to it"
        ]
    );
}

/// A subpackage of the project named like a third-party module (`pkg/torch/`) is reached only as
/// `pkg.torch`: `import torch` inside the package is PyTorch, as in Python, where a package's own
/// folders are on no path. Resolving it to the subpackage made `torch.int8` unknown and every dtype
/// comparison of the importer an error.
#[test]
fn an_absolute_import_never_resolves_into_a_package_folder() {
    let mut db = RootDatabase::default();
    let file = |db: &RootDatabase, path: &str, text: &str| {
        SourceFile::new(db, PathBuf::from(path), text.to_owned(), Vec::new())
    };
    let kernel = r#"
import torch
import tilelang
import tilelang.language as T
from pkg.quant.common import BLOCK

DTYPE = T.float16 if torch.int8 != torch.float16 else T.float32


@tilelang.jit
def copy(N):
    @T.prim_func
    def main(A: T.Tensor((N,), DTYPE), B: T.Tensor((N,), DTYPE)):
        with T.Kernel(N // BLOCK, threads=128) as bx:
            T.copy(A[bx * BLOCK : (bx + 1) * BLOCK], B[bx * BLOCK : (bx + 1) * BLOCK])

    return main


copy(1024)
"#;
    let files = [
        file(&db, "/ws/pkg/__init__.py", ""),
        file(
            &db,
            "/ws/pkg/torch/__init__.py",
            "from pkg.quant.cast import copy\n",
        ),
        file(&db, "/ws/pkg/quant/__init__.py", ""),
        file(&db, "/ws/pkg/quant/common.py", "BLOCK = 128\n"),
        file(&db, "/ws/pkg/quant/cast.py", kernel),
    ];
    register_files(&mut db, &files);
    let cast = files[4];
    let resolved: Vec<String> = tilec_db::resolved_imports(&db, cast)
        .iter()
        .map(|(written, module)| format!("{written} -> {}", module.path(&db).display()))
        .collect();
    assert_eq!(
        resolved,
        vec!["pkg.quant.common -> /ws/pkg/quant/common.py"]
    );
    let messages: Vec<String> = file_diagnostics(&db, cast)
        .iter()
        .map(|diagnostic| format!("{} {}", diagnostic.code, diagnostic.message))
        .collect();
    assert_eq!(messages, Vec::<String>::new());
}

/// A package with TileLang as an optional dependency imports it in a helper of its own
/// (`tilelang, T = load_tilelang()`): the kernel file never imports TileLang itself, and is
/// still a TileLang file whose kernel is analysed with the modules the helper returns.
#[test]
fn tilelang_from_a_helper_of_the_package_is_tilelang() {
    let mut db = RootDatabase::default();
    let file = |db: &RootDatabase, path: &str, text: &str| {
        SourceFile::new(db, PathBuf::from(path), text.to_owned(), Vec::new())
    };
    let helper = r#"
def load_tilelang():
    try:
        import tilelang
        import tilelang.language as T
    except Exception as exc:
        raise RuntimeError("tilelang is not installed") from exc
    return tilelang, T
"#;
    let kernel = r#"
from .common import load_tilelang


def double(n: int, block: int):
    tilelang, T = load_tilelang()

    @tilelang.jit
    def factory(N: int, block_size: int = 256):
        @T.prim_func
        def kernel(A: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, block_size), threads=block_size) as bx:
                for i in T.Parallel(block_size):
                    if bx * block_size + i < N:
                        C[bx * block_size + i] = A[bx * block_size + i] * 2

        return kernel

    return factory(n, block)


double(4096, 128)
"#;
    let files = [
        file(&db, "/ws/lab/__init__.py", ""),
        file(&db, "/ws/lab/common.py", helper),
        file(&db, "/ws/lab/basic.py", kernel),
    ];
    register_files(&mut db, &files);
    let basic = files[2];
    assert!(tilec_db::outline(&db, basic).uses_tilelang);
    let messages: Vec<String> = file_diagnostics(&db, basic)
        .iter()
        .map(|diagnostic| format!("{} {}", diagnostic.code, diagnostic.message))
        .collect();
    assert_eq!(messages, Vec::<String>::new());
    let found = instances(&db, basic);
    assert_eq!(found.len(), 1);
    let world = kernel_world(&db, found[0]);
    assert_eq!(
        world.args,
        vec![
            ("n".to_owned(), tilec_ir::ConstValue::Int(4096)),
            ("block".to_owned(), tilec_ir::ConstValue::Int(128)),
        ]
    );
}

/// A project in the src layout: its tests import the package under `src/` by its own name
/// (`from tileops import trace` in `tests/`, where the package is `src/tileops/`), as Python
/// does once the project is installed.
#[test]
fn a_test_of_a_src_layout_project_imports_its_package() {
    let mut db = RootDatabase::default();
    let file = |db: &RootDatabase, path: &str, text: &str| {
        SourceFile::new(db, PathBuf::from(path), text.to_owned(), Vec::new())
    };
    let kernel = r#"
import tilelang
import tilelang.language as T
from pkg.common import BLOCK


@tilelang.jit
def copy(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // BLOCK, threads=128) as bx:
            T.copy(A[bx * BLOCK : (bx + 1) * BLOCK], B[bx * BLOCK : (bx + 1) * BLOCK])

    return main


copy(1024)
"#;
    let files = [
        file(&db, "/proj/src/pkg/__init__.py", ""),
        file(&db, "/proj/src/pkg/common.py", "BLOCK = 128\n"),
        file(&db, "/proj/tests/test_copy.py", kernel),
    ];
    register_files(&mut db, &files);
    let test = files[2];
    let resolved: Vec<String> = tilec_db::resolved_imports(&db, test)
        .iter()
        .map(|(written, module)| format!("{written} -> {}", module.path(&db).display()))
        .collect();
    assert_eq!(resolved, vec!["pkg.common -> /proj/src/pkg/common.py"]);
    let messages: Vec<String> = file_diagnostics(&db, test)
        .iter()
        .map(|diagnostic| format!("{} {}", diagnostic.code, diagnostic.message))
        .collect();
    assert_eq!(messages, Vec::<String>::new());
}

/// `from . import sizes` in a module that the package's own `__init__.py` is importing: the
/// package has not bound `sizes` yet (it is still running its first line), and Python then
/// imports the submodule `sizes.py` itself. Operator libraries are built so (a package whose
/// `__init__.py` re-exports its API module, which imports its sibling modules through the
/// package); reading the name from the half-run package was an import cycle, and the kernel that
/// used the API was not analysed.
#[test]
fn from_the_package_a_name_it_has_not_bound_yet_is_its_submodule() {
    let mut db = RootDatabase::default();
    let file = |db: &RootDatabase, path: &str, text: &str| {
        SourceFile::new(db, PathBuf::from(path), text.to_owned(), Vec::new())
    };
    let init = file(&db, "/ws/pkg/__init__.py", "from .api import block_of\n");
    let api = file(
        &db,
        "/ws/pkg/api.py",
        "from . import sizes\n\n\ndef block_of(n):\n    return sizes.BLOCK * n\n",
    );
    let sizes = file(&db, "/ws/pkg/sizes.py", "BLOCK = 32\n");
    let kernel = file(
        &db,
        "/ws/kernel.py",
        r#"
import tilelang
import tilelang.language as T
from pkg import block_of


@tilelang.jit
def copy(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // block_of(4), threads=block_of(4)) as bx:
            T.copy(A[bx * block_of(4)], B[bx * block_of(4)])

    return main


copy(1024)
"#,
    );
    register_files(&mut db, &[init, api, sizes, kernel]);
    let diagnostics: Vec<String> = file_diagnostics(&db, kernel)
        .iter()
        .map(|d| format!("{} {} {}", d.severity, d.code, d.message))
        .collect();
    assert_eq!(diagnostics, Vec::<String>::new());
    let world = kernel_world(&db, instances(&db, kernel)[0]);
    let threads: Vec<i64> = world
        .launches
        .iter()
        .map(|(_, launch)| launch.thread_count())
        .collect();
    assert_eq!(threads, vec![128]);
}
