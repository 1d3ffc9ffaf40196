//! Generic instances (kernels no call site gives every value) through the checks and lowering:
//! what the values tilec assumed make of resource limits, and what lowering says of the strided
//! tensors of operator libraries. Stands alone: the kernels are written here.

use expect_test::expect;
use tilec_db::{RootDatabase, instances};
use tilec_tests::{describe_all, on_analysis_stack, run_pipeline, source_file};

/// The diagnostics of `source` other than information, described, and the generic-instance
/// note that says which values were assumed.
fn checked_with_assumptions(source: &str) -> (String, String) {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "tiles.py", source);
        let diagnostics = run_pipeline(&db, file);
        let assumed = diagnostics
            .iter()
            .filter(|d| d.code == tilec_ir::Code::GenericInstance)
            .map(|d| d.message.clone())
            .collect::<Vec<_>>()
            .join("\n");
        let reported: Vec<_> = diagnostics
            .into_iter()
            .filter(|d| d.severity != tilec_ir::Severity::Info)
            .collect();
        let described = describe_all(&db, file, &reported)
            .lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join("\n");
        (described, assumed)
    })
}

/// A kernel with four `block_M × block_N` float32 shared tiles. With 128 for each size (the first
/// representative choice) they need 256 KiB, past the 227 KiB of a block; the kernel's callers
/// run it with smaller tiles. tilec retries the sizes the allocations read one step smaller,
/// together, and analyses the kernel at 64 × 64, saying which values it took.
const FOUR_TILES: &str = r#"
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

#[test]
fn assumed_sizes_whose_shared_memory_does_not_fit_are_retried_smaller() {
    let (described, assumed) = checked_with_assumptions(FOUR_TILES);
    assert_eq!(described, "(no diagnostics)");
    expect![[r#"`tiles` is analysed as a generic instance, without compile-time values for some parameters: `block_M` = 64 (a representative choice the kernel accepts), `block_N` = 64 (a representative choice the kernel accepts) assumed"#]].assert_eq(&assumed);
}

/// A shared tile that no assumed size makes fit (16 rows of 4096 float32 values are 256 KiB
/// already, and tiles shrink no further than 16): the build with the first representative
/// values is reported, as a warning that says the sizes were assumed, not the kernel's error.
#[test]
fn shared_memory_past_the_limit_with_every_assumed_size_is_a_warning() {
    let source = r#"
import tilelang
import tilelang.language as T


def rows(block_M):
    @T.prim_func
    def main(A: T.Tensor((1024, 4096), "float32"), B: T.Tensor((1024, 4096), "float32")):
        with T.Kernel(1024 // block_M, threads=128) as bx:
            a = T.alloc_shared((block_M, 4096), "float32")
            T.copy(A[bx * block_M, 0], a)
            T.copy(a, B[bx * block_M, 0])

    return main
"#;
    let (described, assumed) = checked_with_assumptions(source);
    expect![[r#"
        10:13 warning shared-memory-capacity [rows#0] this kernel needs at least 2048 KiB of shared memory: 1 buffer(s) are live at the same time, and one block can use at most 227 KiB on sm_90 (`a` alone is 2048 KiB), with the values tilec assumed for this generic instance (help: the kernel may fit with the sizes it is called with: pass them at a call site, or list the instance in tilec.toml)
        related 11:13 all of them are live here"#]].assert_eq(&described);
    expect!["`rows` is analysed as a generic instance, without compile-time values for some parameters: `block_M` = 128 (a representative choice) assumed"].assert_eq(&assumed);
}

/// A `T.StridedTensor` whose rows lie further apart than its shape says (a stride passed at run
/// time) is checked, laid out and lowered with its strides; strides that are the row-major ones
/// are an ordinary tensor.
#[test]
fn strided_tensors_are_checked_and_lowered_with_their_strides() {
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
                Ok(programs) => {
                    let strided: Vec<&str> = programs[0]
                        .params
                        .iter()
                        .filter(|param| programs[0].buffer(param.buffer).strides.is_some())
                        .map(|param| param.name.as_str())
                        .collect();
                    format!(
                        "lowered: {} program(s), strided {strided:?}",
                        programs.len()
                    )
                }
                Err(diagnostics) => diagnostics
                    .iter()
                    .map(|d| format!("{} {}: {}", d.severity, d.code, d.message))
                    .collect::<Vec<_>>()
                    .join("\n"),
            }
        })
    };
    expect![[r#"lowered: 1 program(s), strided ["k"]"#]].assert_eq(&lowered(kernel("stride")));
    expect!["lowered: 1 program(s), strided []"].assert_eq(&lowered(kernel("512")));
}

/// A hand-written warp-specialized kernel gives each warpgroup its part by testing the thread
/// index (`elif tx >= 256:` is the third). Its thread count, when no call site gives it, is
/// assumed large enough for every such test to go both ways: with the usual 128 the other roles
/// would not exist, and their tile operations would span the whole block.
#[test]
fn an_assumed_thread_count_gives_every_role_of_the_kernel_its_threads() {
    let source = r#"
import tilelang
import tilelang.language as T


def roles(threads):
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float32"), B: T.Tensor((128, 64), "float32"), C: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            tile = T.alloc_fragment((128, 64), "float32")
            if tx < 128:
                T.copy(A, tile)
                T.copy(tile, B)
            elif tx // 128 == 1:
                C[0] = A[0, 0]
            elif tx >= 256:
                C[1] = A[1, 0]

    return main
"#;
    let (described, assumed) = checked_with_assumptions(source);
    assert_eq!(described, "(no diagnostics)");
    expect![[r#"`roles` is analysed as a generic instance, without compile-time values for some parameters: `threads` = 384 (a representative choice) assumed"#]].assert_eq(&assumed);
    // The same roles in a nested factory whose `threads=128` default the kernel's callers
    // override (a wrapper tilec cannot follow passes its configured 384).
    let body: String = source
        .lines()
        .skip_while(|line| !line.contains("@T.prim_func"))
        .map(|line| format!("    {line}\n"))
        .collect();
    let nested = format!(
        "import tilelang\nimport tilelang.language as T\n\n\ndef roles(M):\n    \
         def factory(block, threads=128):\n{body}\n    return factory\n"
    );
    let (_, assumed_nested) = checked_with_assumptions(&nested);
    assert!(
        assumed_nested.contains("`threads` = 384 (a representative choice)"),
        "{assumed_nested}"
    );
    let lowered = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "roles.py", source);
        let instance = instances(&db, file)[0];
        tilec_db::thread_programs(&db, instance).is_ok()
    });
    assert!(lowered, "the roles lower, each on its own warpgroup");
}
