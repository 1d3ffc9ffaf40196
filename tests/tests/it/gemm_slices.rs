//! `T.gemm` on a window of a shared buffer: one stage of a multi-stage buffer picked by a run-time
//! index, and column (row) ranges of a 2-D buffer, as TileLang's pipelined and FlashMLA kernels
//! pass them. Each kernel is checked, lowered for sm_80 (mma.sync) and sm_90 and run in the
//! emulator against an f64 matmul computed here.

use tilec_db::{RootDatabase, Settings, file_diagnostics, instances, thread_programs};
use tilec_ir::Target;
use tilec_ir::thread::ThreadProgram;
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::run_program;
use tilec_runtime::tensor::HostTensor;
use tilec_tests::{assert_matches, on_analysis_stack, source_file};

/// A 64×64×64 product whose K runs in two stages of 32, each stage copied into its own slice of
/// 3-D shared buffers and multiplied from there with the stage index a loop variable.
const STAGED: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def staged():
    @T.prim_func
    def main(
        A: T.Tensor((64, 64), "float16"),
        B: T.Tensor((64, 64), "float16"),
        C: T.Tensor((64, 64), "float32"),
    ):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((2, 64, 32), "float16")
            B_s = T.alloc_shared((2, 32, 64), "float16")
            C_local = T.alloc_fragment((64, 64), "float32")
            T.clear(C_local)
            for s in T.serial(2):
                T.copy(A[0, s * 32], A_s[s, :, :])
                T.copy(B[s * 32, 0], B_s[s, :, :])
            for s in T.serial(2):
                T.gemm(A_s[s, :, :], B_s[s, :, :], C_local)
            T.copy(C_local, C)

    return main
"#;

/// The same product as two gemms over column halves of A and row halves of B, accumulating.
const HALVES: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def halves():
    @T.prim_func
    def main(
        A: T.Tensor((64, 64), "float16"),
        B: T.Tensor((64, 64), "float16"),
        C: T.Tensor((64, 64), "float32"),
    ):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((64, 64), "float16")
            B_shared = T.alloc_shared((64, 64), "float16")
            C_local = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.clear(C_local)
            T.gemm(A_shared[:, 0:32], B_shared[0:32, :], C_local)
            T.gemm(A_shared[:, 32:64], B_shared[32:64, :], C_local)
            T.copy(C_local, C)

    return main
"#;

/// The halves again, picked by a loop variable: windows whose columns (rows of B) start at a
/// run-time offset, as FlashMLA's `Q_shared_l[:, j * k_tile : (j + 1) * k_tile]`.
const LOOPED_HALVES: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def looped_halves():
    @T.prim_func
    def main(
        A: T.Tensor((64, 64), "float16"),
        B: T.Tensor((64, 64), "float16"),
        C: T.Tensor((64, 64), "float32"),
    ):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((64, 64), "float16")
            B_shared = T.alloc_shared((64, 64), "float16")
            C_local = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.clear(C_local)
            for j in T.serial(2):
                T.gemm(A_shared[:, j * 32 : (j + 1) * 32], B_shared[j * 32 : (j + 1) * 32, :], C_local)
            T.copy(C_local, C)

    return main
"#;

/// A column slice of a fragment as A: refused with a reason (registers are not windowed).
const FRAGMENT_SLICE: &str = r#"import tilelang
import tilelang.language as T


@tilelang.jit
def frag():
    @T.prim_func
    def main(
        A: T.Tensor((64, 64), "float16"),
        B: T.Tensor((64, 64), "float16"),
        C: T.Tensor((64, 64), "float32"),
    ):
        with T.Kernel(1, threads=128) as bx:
            A_local = T.alloc_fragment((64, 64), "float16")
            B_shared = T.alloc_shared((64, 64), "float16")
            C_local = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_local)
            T.copy(B, B_shared)
            T.clear(C_local)
            T.gemm(A_local[:, 0:32], B_shared[0:32, :], C_local)
            T.copy(C_local, C)

    return main
"#;

/// The kernel checked without errors and lowered for `target`.
fn lower(source: &str, target: Target) -> ThreadProgram {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let _settings = Settings::builder(target, Vec::new()).new(&db);
        let file = source_file(&db, "/kernels/gemm_slices.py", source);
        let errors: Vec<String> = file_diagnostics(&db, file)
            .iter()
            .map(|d| format!("{}: {}", d.code.name(), d.message))
            .collect();
        assert!(errors.is_empty(), "{target}: {errors:#?}");
        let instance = instances(&db, file)[0];
        match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs[0].clone(),
            Err(diagnostics) => panic!("{target}: cannot lower: {diagnostics:#?}"),
        }
    })
}

/// `A @ B` in f64 for row-major `A` (M×K) and `B` (K×N).
fn matmul_reference(tensors: &[HostTensor]) -> Vec<f64> {
    let (a, b) = (&tensors[0], &tensors[1]);
    let (m, k, n) = (a.shape[0], a.shape[1], b.shape[1]);
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k)
                .map(|p| a.values[i * k + p] * b.values[p * n + j])
                .sum();
        }
    }
    c
}

/// Why `source` does not lower for `target`.
fn refusal(source: &str, target: Target) -> String {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let _settings = Settings::builder(target, Vec::new()).new(&db);
        let file = source_file(&db, "/kernels/gemm_slices.py", source);
        let instance = instances(&db, file)[0];
        match thread_programs(&db, instance).as_ref() {
            Ok(_) => panic!("{target}: a fragment slice lowered"),
            Err(diagnostics) => diagnostics
                .iter()
                .map(|d| d.message.clone())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    })
}

/// Lowers `source` for `target`, runs it and compares C with the reference.
fn run_and_compare(source: &str, target: Target) -> ThreadProgram {
    let program = lower(source, target);
    let mut tensors = make_tensors(&program, &[], 7, false).expect("shapes evaluate");
    run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
    let expected = matmul_reference(&tensors);
    assert_matches("C", &tensors[2], expected);
    program
}

#[test]
fn a_stage_of_a_3d_shared_buffer_multiplies_on_mma_sync() {
    run_and_compare(STAGED, Target::Sm80);
}

#[test]
fn a_stage_of_a_3d_shared_buffer_multiplies_on_sm90() {
    run_and_compare(STAGED, Target::Sm90);
}

#[test]
fn column_halves_of_a_shared_buffer_accumulate_on_mma_sync() {
    run_and_compare(HALVES, Target::Sm80);
}

#[test]
fn column_halves_of_a_shared_buffer_accumulate_on_sm90() {
    run_and_compare(HALVES, Target::Sm90);
}

/// The CUDA of `source` for `target`.
fn cuda_of(source: &str, target: Target) -> String {
    tilec_passes::cuda::emit_cuda(&lower(source, target), &target)
}

#[test]
fn windows_are_read_with_ldmatrix_on_sm80_and_wgmma_descriptors_on_sm90() {
    for source in [STAGED, HALVES] {
        let sm80 = cuda_of(source, Target::Sm80);
        assert!(sm80.contains("ldmatrix"), "{sm80}");
        let sm90 = cuda_of(source, Target::Sm90);
        assert!(sm90.contains("wgmma.mma_async"), "{sm90}");
    }
}

#[test]
fn windows_at_a_run_time_column_offset_accumulate_on_both_targets() {
    for target in [Target::Sm80, Target::Sm90] {
        run_and_compare(LOOPED_HALVES, target);
    }
}

#[test]
fn a_slice_of_a_fragment_a_operand_is_refused_with_a_reason() {
    let why = refusal(FRAGMENT_SLICE, Target::Sm80);
    assert!(
        why.contains(
            "`T.gemm` operand A must be a whole buffer or a 2-D window of a shared buffer: \
             a slice of a fragment"
        ),
        "{why}"
    );
}
