//! Generic instances (kernels no call site gives every value) through the checks and lowering:
//! what the values tilec assumed make of resource limits, and what lowering says of the strided
//! tensors of operator libraries. Stands alone: the kernels are written here.

use expect_test::expect;
use tilec_db::{RootDatabase, instances};
use tilec_tests::{describe_all, on_analysis_stack, run_pipeline, source_file};

/// Four 128×128 float32 shared tiles with the block sizes tilec assumed: 256 KiB, past the
/// 227 KiB of a block, but the kernel's callers may well pass 64. A warning that says the sizes
/// were assumed, not the kernel's error.
#[test]
fn shared_memory_past_the_limit_with_assumed_sizes_is_a_warning() {
    let source = r#"
import tilelang
import tilelang.language as T


def tiles(block_M, block_N):
    @T.prim_func
    def main(A: T.Tensor((1024, 1024), "float32"), B: T.Tensor((1024, 1024), "float32")):
        with T.Kernel(1024 // block_M, threads=128) as bx:
            a = T.alloc_shared((block_M, block_N), "float32")
            b = T.alloc_shared((block_M, block_N), "float32")
            c = T.alloc_shared((block_M, block_N), "float32")
            d = T.alloc_shared((block_M, block_N), "float32")
            T.copy(A[bx * block_M, 0], a)
            T.copy(A[bx * block_M, 0], b)
            T.copy(A[bx * block_M, 0], c)
            T.copy(A[bx * block_M, 0], d)
            T.copy(a, B[bx * block_M, 0])
            T.copy(b, B[bx * block_M, 0])
            T.copy(c, B[bx * block_M, 0])
            T.copy(d, B[bx * block_M, 0])

    return main
"#;
    let described = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "tiles.py", source);
        let diagnostics: Vec<_> = run_pipeline(&db, file)
            .into_iter()
            .filter(|d| d.severity != tilec_ir::Severity::Info)
            .collect();
        let described = describe_all(&db, file, &diagnostics);
        described
            .lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join("\n")
    });
    expect![[r#"
            10:13 warning shared-memory-capacity [tiles#0] this kernel needs at least 256 KiB of shared memory: 4 buffer(s) are live at the same time, and one block can use at most 227 KiB on sm_90 (`a` alone is 64 KiB), with the values tilec assumed for this generic instance (help: the kernel may fit with the sizes it is called with: pass them at a call site, or list the instance in tilec.toml)
            related 11:13 `b` adds 64 KiB
            related 12:13 `c` adds 64 KiB
            related 13:13 `d` adds 64 KiB
            related 17:13 all of them are live here"#]].assert_eq(&described);
}

/// A `T.StridedTensor` whose rows lie further apart than its shape says is checked and laid out,
/// and lowering says plainly that it does not address such a tensor yet; strides that are the
/// row-major ones are an ordinary tensor and lower.
#[test]
fn strided_tensors_are_checked_and_lowering_says_what_it_cannot_do() {
    let kernel = |strides: &str| {
        format!(
            r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def gate(stride):
    @T.prim_func
    def main(
        k: T.StridedTensor[(256, 512), ({strides}, 1), T.float32],
        out: T.Tensor((256, 512), T.float32),
    ):
        with T.Kernel(256, threads=128) as bx:
            row = T.alloc_fragment((512,), T.float32)
            T.copy(k[bx, 0], row)
            T.copy(row, out[bx, 0])

    return main


gate(1024)
"#
        )
    };
    let lowered = |source: String| {
        on_analysis_stack(move || {
            let db = RootDatabase::default();
            let file = source_file(&db, "gate.py", &source);
            let errors: Vec<_> = run_pipeline(&db, file)
                .into_iter()
                .filter(|d| d.severity != tilec_ir::Severity::Info)
                .collect();
            assert!(errors.is_empty(), "{}", describe_all(&db, file, &errors));
            let instance = instances(&db, file)[0];
            match tilec_db::thread_programs(&db, instance).as_ref() {
                Ok(programs) => format!("lowered: {} program(s)", programs.len()),
                Err(diagnostics) => diagnostics
                    .iter()
                    .map(|d| format!("{} {}: {}", d.severity, d.code, d.message))
                    .collect::<Vec<_>>()
                    .join("\n"),
            }
        })
    };
    expect!["not-analysed not-analysed: `k` is a `T.StridedTensor` whose strides are not row-major: tilec checks such a kernel and infers its layouts, but does not lower it to CUDA yet"].assert_eq(&lowered(kernel("stride")));
    expect!["lowered: 1 program(s)"].assert_eq(&lowered(kernel("512")));
}
