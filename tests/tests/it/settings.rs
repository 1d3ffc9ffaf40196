//! The settings inputs: the target decides the shared-memory limit, changing it re-runs checks but
//! never a world, and project pass configs overlay each kernel's own.

use salsa::{Durability, Setter};
use tilec_db::{
    RootDatabase, Settings, SourceFile, effective_pass_configs, file_diagnostics, instances,
};
use tilec_ir::{Code, ConstValue, Target};

/// 3 × 64 KiB of float16 staging tiles, all live in one loop: fits sm_90 (227 KiB), not sm_80 (163 KiB).
const KERNEL: &str = r#"
import tilelang
import tilelang.language as T

@tilelang.jit(pass_configs={"tl.disable_tma_lower": False, "tl.enable_fast_math": True})
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

fn capacity_errors(db: &RootDatabase, file: SourceFile) -> usize {
    file_diagnostics(db, file)
        .iter()
        .filter(|d| d.code == Code::SharedMemoryCapacity)
        .count()
}

#[test]
fn the_target_decides_the_limit_and_reruns_only_checks() {
    let mut db = RootDatabase::with_event_log();
    let settings = Settings::builder(Target::Sm90, Vec::new())
        .durability(Durability::HIGH)
        .new(&db);
    let file = SourceFile::new(&db, "stage.py".into(), KERNEL.to_owned(), Vec::new());
    assert_eq!(
        capacity_errors(&db, file),
        0,
        "192 KiB fits in 227 KiB on sm_90"
    );
    db.take_executed();

    settings
        .set_target(&mut db)
        .with_durability(Durability::HIGH)
        .to(Target::Sm80);
    assert_eq!(
        capacity_errors(&db, file),
        1,
        "192 KiB exceeds 163 KiB on sm_80"
    );
    let executed: Vec<String> = db.take_executed().into_iter().map(|e| e.query).collect();
    assert!(
        executed.contains(&"instance_checks".to_owned()),
        "{executed:?}"
    );
    assert!(
        !executed.contains(&"kernel_world".to_owned()),
        "the world does not depend on the target: {executed:?}"
    );
    assert!(!executed.contains(&"parse".to_owned()), "{executed:?}");
}

#[test]
fn project_pass_configs_override_the_kernels_own() {
    let db = RootDatabase::default();
    let project = vec![("tl.disable_tma_lower".to_owned(), ConstValue::Bool(true))];
    let _settings = Settings::builder(Target::Sm90, project).new(&db);
    let file = SourceFile::new(&db, "stage.py".into(), KERNEL.to_owned(), Vec::new());
    let instance = instances(&db, file)[0];
    assert_eq!(
        effective_pass_configs(&db, instance),
        &vec![
            ("tl.enable_fast_math".to_owned(), ConstValue::Bool(true)),
            ("tl.disable_tma_lower".to_owned(), ConstValue::Bool(true)),
        ]
    );
}

/// A prim_func in TileLang's lazy style: its tensor parameter declared in the body
/// (`A: T.Tensor[...]`), its pass configs given by `T.annotate_pass_configs` with the key imported
/// from `tilelang.transform`. Both count as the decorator's would.
#[test]
fn pass_configs_annotated_in_a_lazily_declared_kernel() {
    let source = r#"
import tilelang.language as T
from tilelang.transform import PassConfigKey


@T.prim_func
def kernel(A, B):
    A: T.Tensor[[128, 64], T.float32]
    B: T.Tensor[[128, 64], T.float32]
    T.annotate_pass_configs({PassConfigKey.TL_ENABLE_FAST_MATH: True})
    with T.Kernel(2, threads=128) as bx:
        for i, j in T.Parallel(64, 64):
            B[bx * 64 + i, j] = A[bx * 64 + i, j] * 2.0
"#;
    let db = RootDatabase::default();
    let _settings = Settings::builder(Target::Sm90, Vec::new()).new(&db);
    let file = SourceFile::new(&db, "lazy.py".into(), source.to_owned(), Vec::new());
    let diagnostics: Vec<String> = file_diagnostics(&db, file)
        .iter()
        .map(|d| format!("{}: {}", d.code, d.message))
        .collect();
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    let instance = instances(&db, file)[0];
    let world = tilec_db::kernel_world(&db, instance);
    let shapes: Vec<Option<Vec<i64>>> = world
        .params
        .iter()
        .map(|&param| world.const_shape(param))
        .collect();
    assert_eq!(shapes, vec![Some(vec![128, 64]), Some(vec![128, 64])]);
    assert_eq!(
        effective_pass_configs(&db, instance),
        &vec![("tl.enable_fast_math".to_owned(), ConstValue::Bool(true))]
    );
}
