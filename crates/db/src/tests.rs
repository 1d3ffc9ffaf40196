//! The database's own tests: what is memoized and what an edit re-runs, read from the event log of
//! a [`RootDatabase`], and the CUDA query keyed by instance and target. Every kernel is written
//! here, so the tests need nothing outside the crate.

use std::sync::Arc;

use salsa::{Durability, Setter};
use tilec_ir::Target;

use crate::{
    Executed, Instance, RootDatabase, Settings, SourceFile, cuda_source, file_diagnostics,
    instances, thread_programs, thread_programs_for,
};

/// Two small kernels in one file; `double`'s factor and `triple`'s are what the tests edit.
const TWO_KERNELS: &str = r#"import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def double(N, block=128):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2.0

    return main


@tilelang.jit(out_idx=[-1])
def triple(N, block=128):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 3.0

    return main


double(1024)
triple(1024)
"#;

/// 3 × 64 KiB of float16 staging tiles, all live at once: they fit sm_90's shared memory (227 KiB)
/// but not sm_80's (163 KiB), so the kernel lowers for one target and not the other.
const STAGED: &str = r#"import tilelang
import tilelang.language as T


@tilelang.jit
def stage(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((128, 256), "float16")
            b = T.alloc_shared((128, 256), "float16")
            c = T.alloc_shared((128, 256), "float16")
            T.copy(A[0, 0], a)
            for i, j in T.Parallel(128, 256):
                b[i, j] = a[i, j]
                c[i, j] = b[i, j]
            T.copy(c, B[0, 0])

    return main


stage(1024, 1024)
"#;

/// A database that logs executions, configured for sm_90 as the command line configures it.
fn database() -> RootDatabase {
    let db = RootDatabase::with_event_log();
    let _settings = Settings::builder(Target::Sm90, Vec::new())
        .durability(Durability::HIGH)
        .new(&db);
    db
}

/// The instance of the kernel called `kernel` in `file` (the first, when it has several).
fn instance<'db>(db: &'db RootDatabase, file: SourceFile, kernel: &str) -> Instance<'db> {
    let found = instances(db, file)
        .iter()
        .copied()
        .find(|instance| instance.kernel(db).name(db) == kernel);
    found.unwrap_or_else(|| panic!("no instance of `{kernel}` in {:?}", file.path(db)))
}

/// The CUDA of an instance for `target`, which these kernels all have.
fn cuda(db: &RootDatabase, file: SourceFile, kernel: &str, target: Target) -> Arc<[String]> {
    let source = cuda_source(db, instance(db, file, kernel), target).clone();
    source.unwrap_or_else(|| panic!("`{kernel}` lowers for {target}"))
}

/// How many times `query` executed in `log`.
fn runs(log: &[Executed], query: &str) -> usize {
    log.iter()
        .filter(|executed| executed.query == query)
        .count()
}

/// Queries of one file are not re-executed when another file changes: salsa finds that nothing
/// they read changed without running any of them again.
#[test]
fn an_edit_to_one_file_re_executes_no_query_of_another() {
    let mut db = database();
    let kept = SourceFile::new(&db, "kept.py".into(), TWO_KERNELS.to_owned(), Vec::new());
    let edited = SourceFile::new(&db, "edited.py".into(), TWO_KERNELS.to_owned(), Vec::new());
    for file in [kept, edited] {
        file_diagnostics(&db, file);
        cuda(&db, file, "double", Target::Sm90);
    }
    db.take_executed();
    let before = cuda(&db, kept, "double", Target::Sm90);
    assert_eq!(db.take_executed(), Vec::new(), "memoized");

    edited
        .set_text(&mut db)
        .to(TWO_KERNELS.replace("* 2.0", "* 4.0"));
    file_diagnostics(&db, kept);
    let after = cuda(&db, kept, "double", Target::Sm90);
    assert_eq!(db.take_executed(), Vec::new(), "nothing of kept.py re-runs");
    assert!(Arc::ptr_eq(&before, &after), "the very same memoized text");

    file_diagnostics(&db, edited);
    cuda(&db, edited, "double", Target::Sm90);
    let log = db.take_executed();
    assert_eq!(runs(&log, "parse"), 1, "edited.py is parsed again: {log:?}");
    assert_eq!(runs(&log, "cuda_source"), 1, "its CUDA is printed again");
}

/// Editing one kernel re-prints that kernel's CUDA only; the other instance's result is the same
/// `Arc`, which is how `tilec watch` tells what changed. An edit outside every kernel (a comment)
/// re-prints nothing.
#[test]
fn the_cuda_query_re_executes_only_for_the_instance_that_changed() {
    let mut db = database();
    let file = SourceFile::new(&db, "two.py".into(), TWO_KERNELS.to_owned(), Vec::new());
    let double = cuda(&db, file, "double", Target::Sm90);
    let triple = cuda(&db, file, "triple", Target::Sm90);
    let log = db.take_executed();
    assert_eq!(runs(&log, "cuda_source"), 2, "{log:?}");
    assert!(double[0].contains("2.0") && triple[0].contains("3.0"));

    file.set_text(&mut db)
        .to(TWO_KERNELS.replace("* 2.0", "* 4.0"));
    let double_after = cuda(&db, file, "double", Target::Sm90);
    let triple_after = cuda(&db, file, "triple", Target::Sm90);
    let log = db.take_executed();
    assert_eq!(runs(&log, "cuda_source"), 1, "only double's: {log:?}");
    assert_eq!(
        runs(&log, "kernel_world"),
        1,
        "only double's world: {log:?}"
    );
    assert!(double_after[0].contains("4.0"), "{}", double_after[0]);
    assert!(!Arc::ptr_eq(&double, &double_after));
    assert!(
        Arc::ptr_eq(&triple, &triple_after),
        "triple is not re-printed"
    );

    file.set_text(&mut db).to(format!(
        "# a comment\n{}",
        TWO_KERNELS.replace("* 2.0", "* 4.0")
    ));
    let double_again = cuda(&db, file, "double", Target::Sm90);
    let triple_again = cuda(&db, file, "triple", Target::Sm90);
    let log = db.take_executed();
    assert_eq!(runs(&log, "cuda_source"), 0, "{log:?}");
    assert_eq!(runs(&log, "thread_programs"), 0, "{log:?}");
    assert!(Arc::ptr_eq(&double_after, &double_again));
    assert!(Arc::ptr_eq(&triple_after, &triple_again));
}

/// The CUDA of one instance for two targets: each is lowered and printed for its own target, both
/// are memoized side by side (asking again runs nothing), and the configured target's shares the
/// lowering that diagnostics and hovers use.
#[test]
fn two_targets_are_lowered_printed_and_memoized_separately() {
    let db = database();
    let file = SourceFile::new(&db, "two.py".into(), TWO_KERNELS.to_owned(), Vec::new());
    let hopper = cuda(&db, file, "double", Target::Sm90);
    let ampere = cuda(&db, file, "double", Target::Sm80);
    let log = db.take_executed();
    assert_eq!(runs(&log, "cuda_source"), 2, "{log:?}");
    assert_eq!(
        runs(&log, "thread_programs"),
        1,
        "sm_90's lowering: {log:?}"
    );
    assert_eq!(
        runs(&log, "thread_programs_for_target"),
        1,
        "sm_80's lowering: {log:?}"
    );
    assert_eq!(runs(&log, "kernel_world"), 1, "one world for both: {log:?}");
    assert_ne!(hopper, ampere);
    assert!(hopper[0].starts_with("// Generated by tilec for sm_90"));
    assert!(ampere[0].starts_with("// Generated by tilec for sm_80"));

    assert!(Arc::ptr_eq(
        &hopper,
        &cuda(&db, file, "double", Target::Sm90)
    ));
    assert!(Arc::ptr_eq(
        &ampere,
        &cuda(&db, file, "double", Target::Sm80)
    ));
    assert_eq!(db.take_executed(), Vec::new(), "both are memoized");

    let double = instance(&db, file, "double");
    assert!(std::ptr::eq(
        thread_programs_for(&db, double, Target::Sm90),
        thread_programs(&db, double)
    ));
}

/// A kernel whose shared memory fits one target and not the other has CUDA for the first only:
/// each target's lowering waits for that target's checks.
#[test]
fn each_target_is_checked_before_it_is_lowered() {
    let db = database();
    let file = SourceFile::new(&db, "stage.py".into(), STAGED.to_owned(), Vec::new());
    let stage = instance(&db, file, "stage");
    assert!(cuda_source(&db, stage, Target::Sm90).is_some());
    assert!(cuda_source(&db, stage, Target::Sm80).is_none());
    let why = thread_programs_for(&db, stage, Target::Sm80);
    let Err(errors) = why.as_ref() else {
        panic!("sm_80 refuses 192 KiB of shared memory");
    };
    assert!(
        errors
            .iter()
            .any(|d| d.code == tilec_ir::Code::SharedMemoryCapacity),
        "{errors:?}"
    );
}
