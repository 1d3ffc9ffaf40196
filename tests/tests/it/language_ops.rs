//! Operations added for real TileLang code, run end to end — checked, laid out, lowered and run
//! in the emulator — against references computed here in f64: `T.clamp`, the register hints of
//! warp-specialized kernels, and a row reduction of a Hopper accumulator whose rows are spread
//! over both warpgroups (the statistics of DeepSeek's MLA decode). Stands alone: the kernels are
//! written here.

use tilec_db::{RootDatabase, file_diagnostics, instances, layouts, thread_programs};
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::{HostTensor, run_program};
use tilec_tests::{assert_matches, on_analysis_stack, source_file};

/// The TIR-level functions and loops of library kernels (`steps` and `scalars`).
const TIR_FUNCTIONS: &str = include_str!("../../fixtures/kernels/tir_functions.py");

/// Checks `source` (no error allowed), lowers its first instance and runs it on seeded inputs;
/// returns the tensors after the run and the described layout of `fragment`.
fn run(source: &str, fragment: &str) -> (Vec<HostTensor>, String) {
    run_kernel(source, None, fragment)
}

/// As [`run`], for the first instance of `kernel` (or of the file's first kernel).
fn run_kernel(source: &str, kernel: Option<&str>, fragment: &str) -> (Vec<HostTensor>, String) {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/op.py", source);
        let errors: Vec<String> = file_diagnostics(&db, file)
            .iter()
            .filter(|d| d.severity == tilec_ir::Severity::Error)
            .map(|d| d.message.clone())
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
        let instance = match kernel {
            Some(kernel) => tilec_tests::instance(&db, file, kernel, 0),
            None => instances(&db, file)[0],
        };
        let laid_out = layouts(&db, instance);
        let world = tilec_db::kernel_world(&db, instance);
        let layout = laid_out
            .buffers
            .iter()
            .find(|(buffer, _)| world.name(**buffer) == fragment)
            .map(|(_, inferred)| inferred.layout.describe(&laid_out.exprs))
            .unwrap_or_default();
        let programs = match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs.clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        };
        let mut tensors = make_tensors(&programs[0], &[], 7, false).expect("shapes evaluate");
        run_program(&programs[0], &mut tensors, &[]).expect("the emulator runs it");
        (tensors, layout)
    })
}

const CLAMP: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def clamp(N=256):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.disable_warp_group_reg_alloc()
            T.no_set_max_nreg()
            T.set_max_nreg(240, 1)
            T.inc_max_nreg(232)
            T.dec_max_nreg(40)
            T.annotate_producer_reg_dealloc(24)
            T.annotate_consumer_reg_alloc(240)
            for i in T.Parallel(N):
                B[i] = T.clamp(A[i] * 4.0, -1.0, 1.5)

    return main


clamp()
"#;

#[test]
fn clamp_bounds_each_element_and_register_hints_change_nothing() {
    let (tensors, _) = run(CLAMP, "");
    let expected = tensors[0]
        .values
        .iter()
        .map(|&x| (x * 4.0).clamp(-1.0, 1.5))
        .collect();
    assert_matches("B", &tensors[1], expected);
    // The inputs reach both bounds, so both are tested.
    assert!(tensors[1].values.contains(&-1.0) && tensors[1].values.contains(&1.5));
}

const ROW_MAX: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2, 3])
def row_max(H=64, N=64, D=128):
    @T.prim_func
    def main(
        Q: T.Tensor((H, D), "float16"),
        K: T.Tensor((N, D), "float16"),
        O: T.Tensor((H, D), "float32"),
        M: T.Tensor((H,), "float32"),
    ):
        with T.Kernel(1, threads=256) as bx:
            Q_shared = T.alloc_shared([H, D], "float16")
            K_shared = T.alloc_shared([N, D], "float16")
            scores = T.alloc_fragment([H, N], "float32")
            scores_max = T.alloc_fragment([H], "float32")
            T.copy(Q, Q_shared)
            T.copy(K, K_shared)
            T.clear(scores)
            T.gemm(Q_shared, K_shared, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            T.reduce_max(scores, scores_max, dim=1)
            T.copy(scores_max, M)
            for i, j in T.Parallel(H, D):
                O[i, j] = Q_shared[i, j] * scores_max[i]

    return main


row_max()
"#;

#[test]
fn a_row_reduction_of_a_hopper_accumulator_spans_both_warpgroups() {
    let (tensors, layout) = run(ROW_MAX, "scores_max");
    // Each row of the 64×64 accumulator lies on four lanes of one warp in each of the two
    // warpgroups (256 threads, wgmma m64 per warpgroup): the maximum lands on all eight.
    assert_eq!(
        layout,
        "thread i // 16 * 32 + i % 8 * 4 + rep // 4 * 128 + rep % 4 | index (i % 16 // 8) | replicate 8"
    );
    let (q, k) = (&tensors[0], &tensors[1]);
    let (h, n, d) = (64, 64, 128);
    let maxima: Vec<f64> = (0..h)
        .map(|i| {
            (0..n)
                .map(|j| {
                    (0..d)
                        .map(|x| q.values[i * d + x] * k.values[j * d + x])
                        .sum::<f64>()
                })
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .collect();
    assert_matches("M", &tensors[3], maxima.clone());
    let scaled = (0..h * d).map(|e| q.values[e] * maxima[e / d]).collect();
    assert_matches("O", &tensors[2], scaled);
}

const SWIZZLED: &str = r#"
import tilelang
import tilelang.language as T
from tilelang.layout import make_swizzled_layout


@tilelang.jit(out_idx=[1])
def staged(M=64, N=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((M, N), "float16")
            B_shared = T.alloc_shared((M, N), "float16")
            tile = T.alloc_fragment((M, N), "float32")
            T.annotate_layout({
                A_shared: make_swizzled_layout(A_shared),
                B_shared: tilelang.layout.make_swizzled_layout(B_shared),
            })
            T.copy(A, A_shared)
            T.copy(A_shared, tile)
            for i, j in T.Parallel(M, N):
                tile[i, j] = tile[i, j] * 2.0
            T.copy(tile, B_shared)
            T.copy(B_shared, B)

    return main


staged()
"#;

#[test]
fn make_swizzled_layout_swizzles_shared_tiles_and_keeps_their_values() {
    let layouts_of = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/staged.py", SWIZZLED);
        let instance = instances(&db, file)[0];
        let world = tilec_db::kernel_world(&db, instance);
        layouts(&db, instance)
            .shared
            .iter()
            .map(|(buffer, assigned)| {
                format!(
                    "{}: {} ({:?})",
                    world.name(*buffer),
                    assigned.description,
                    assigned.origin
                )
            })
            .collect::<Vec<_>>()
    });
    assert_eq!(
        layouts_of,
        vec![
            "A_shared: 128-byte XOR swizzle over 64 rows × 64 halfs (Annotation)",
            "B_shared: 128-byte XOR swizzle over 64 rows × 64 halfs (Annotation)",
        ]
    );
    let (tensors, _) = run(SWIZZLED, "tile");
    let doubled = tensors[0].values.iter().map(|&x| x * 2.0).collect();
    assert_matches("B", &tensors[1], doubled);
}

/// `ROW_MAX` with a shared buffer that fills the block's shared memory to within 1 KiB of
/// sm_90's limit, live across the reduction: the buffers fit, the reduction's scratch does not.
const ROW_MAX_FULL: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2, 3])
def row_max(H=64, N=64, D=128, P=776):
    @T.prim_func
    def main(
        Q: T.Tensor((H, D), "float16"),
        K: T.Tensor((N, D), "float16"),
        O: T.Tensor((H, D), "float16"),
        M: T.Tensor((H,), "float32"),
    ):
        with T.Kernel(1, threads=256) as bx:
            Q_shared = T.alloc_shared([H, D], "float16")
            K_shared = T.alloc_shared([N, D], "float16")
            pad = T.alloc_shared([P, D], "float16")
            scores = T.alloc_fragment([H, N], "float32")
            scores_max = T.alloc_fragment([H], "float32")
            T.copy(Q, Q_shared)
            T.copy(K, K_shared)
            T.copy(Q, pad[0:H, :])
            T.clear(scores)
            T.gemm(Q_shared, K_shared, scores, transpose_B=True)
            T.reduce_max(scores, scores_max, dim=1)
            T.copy(scores_max, M)
            T.copy(pad[0:H, :], O)

    return main


row_max()
"#;

#[test]
fn a_launch_that_lowering_pushes_past_the_shared_memory_limit_says_so() {
    let message = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/full.py", ROW_MAX_FULL);
        let errors: Vec<String> = file_diagnostics(&db, file)
            .iter()
            .filter(|d| d.severity == tilec_ir::Severity::Error)
            .map(|d| d.message.clone())
            .collect();
        assert!(errors.is_empty(), "the buffers fit: {errors:#?}");
        let instance = instances(&db, file)[0];
        match thread_programs(&db, instance).as_ref() {
            Ok(_) => String::from("lowered"),
            Err(diagnostics) => diagnostics[0].message.clone(),
        }
    });
    assert!(
        message.starts_with("once lowered, this launch needs 23")
            && message.ends_with("more than the 232448 a block may use on sm_90"),
        "{message}"
    );
}

const INT_EXTREMES: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1, 2])
def int_extremes(M=64, N=64):
    @T.prim_func
    def main(
        A: T.Tensor((M, N), "int32"),
        Hi: T.Tensor((M,), "int32"),
        Lo: T.Tensor((M,), "int32"),
    ):
        with T.Kernel(1, threads=128) as bx:
            below = T.alloc_fragment((M, N), "int32")
            above = T.alloc_fragment((M, N), "int32")
            hi = T.alloc_fragment((M,), "int32")
            lo = T.alloc_fragment((M,), "int32")
            for i, j in T.Parallel(M, N):
                below[i, j] = A[i, j] - 100
                above[i, j] = A[i, j] + 100
            T.reduce_max(below, hi, dim=1)
            T.reduce_min(above, lo, dim=1)
            T.copy(hi, Hi)
            T.copy(lo, Lo)

    return main


int_extremes()
"#;

#[test]
fn integer_max_and_min_reductions_start_at_the_types_extremes() {
    // The starting value of a max (min) reduction is minus (plus) infinity, which an integer type
    // holds as its smallest (largest) value. Converted by a saturating cast to i64 and then
    // wrapped to int32, it became 0 (-1): the maximum of all-negative rows was 0, the minimum of
    // all-positive rows -1.
    let (tensors, _) = run(INT_EXTREMES, "hi");
    let (m, n) = (64, 64);
    let a = &tensors[0].values;
    let row = |i: usize| a[i * n..(i + 1) * n].iter().copied();
    let maxima: Vec<f64> = (0..m)
        .map(|i| row(i).fold(f64::MIN, f64::max) - 100.0)
        .collect();
    let minima: Vec<f64> = (0..m)
        .map(|i| row(i).fold(f64::MAX, f64::min) + 100.0)
        .collect();
    assert_matches("Hi", &tensors[1], maxima);
    assert_matches("Lo", &tensors[2], minima);
}

/// `T.grid(m, n)` is a nest of serial loops, `T.serial(start, stop, step)` steps as `range` does
/// (down as well as up), and a view of a tensor parameter made before `T.Kernel` addresses its
/// elements: B[r, c] = sum over the even k of A's row (through a flat view), A2[r, c] = the odd-k
/// sum counted down, as a reference computes here.
#[test]
fn grid_loops_stepped_serial_loops_and_views_before_the_kernel() {
    let source = TIR_FUNCTIONS;
    let (tensors, _) = run_kernel(source, Some("steps"), "");
    let a = &tensors[0].values;
    let (rows, cols, depth) = (4, 8, 16);
    let mut even = Vec::new();
    let mut odd = Vec::new();
    for r in 0..rows {
        for c in 0..cols {
            let at = |k: usize| a[(r * cols + c) * depth + k];
            even.push((0..depth).step_by(2).map(at).sum());
            odd.push((1..depth).rev().step_by(2).map(at).sum());
        }
    }
    assert_matches("B", &tensors[1], even);
    assert_matches("D", &tensors[2], odd);
}

/// `T.Fragment(shape, forward_thread_fn=...)` without an index function: TileLang gives each
/// thread the elements of the dimensions its thread formula leaves out, in row-major order, and
/// so does tilec (row `i` on thread `i`, its 16 columns in registers 0..16). The values go through
/// the annotated fragment unchanged.
#[test]
fn a_fragment_annotated_with_its_thread_function_alone() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def rows(M=128, N=16):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            o_local = T.alloc_fragment((M, N), "float32")
            T.annotate_layout({o_local: T.Fragment(o_local.shape, forward_thread_fn=lambda i, j: i)})
            T.copy(A, o_local)
            T.copy(o_local, B)

    return main
"#;
    let (tensors, layout) = run(source, "o_local");
    assert_eq!(layout, "thread i | index (j) | replicate 1");
    let expected = tensors[0].values.clone();
    assert_matches("B", &tensors[1], expected);
}

/// `T.Fragment(shape, forward_fn=lambda i, rep: (rep, i), replicate=64)`: the layout function
/// takes the replica after the indices (as TileLang's does), so every row sum is held by each of
/// the 64 threads. The source is laid out on 64 of the block's 128 threads: the other 64 hold
/// nothing and fold no element into the sum. Each element is divided by its row's sum.
#[test]
fn a_replicated_fragment_annotation_and_a_reduction_on_half_the_block() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=1)
def normalize(rows=4, width=512, vector_size=8):
    def x_layout(i, j):
        return j // vector_size, i * vector_size + j % vector_size

    @T.prim_func
    def main(x: T.Tensor((rows, width), "float32"), out: T.Tensor((rows, width), "float32")):
        with T.Kernel(1, threads=128):
            x_frag = T.alloc_fragment((rows, width), "float32")
            sum_frag = T.alloc_fragment((rows,), "float32")
            T.annotate_layout(
                {
                    x_frag: T.Fragment(x_frag.shape, forward_fn=x_layout),
                    sum_frag: T.Fragment(sum_frag.shape, forward_fn=lambda i, rep: (rep, i), replicate=64),
                }
            )
            for i, j in T.Parallel(rows, width):
                x_frag[i, j] = x[i, j]
            T.reduce_sum(x_frag, sum_frag, dim=1)
            for i, j in T.Parallel(rows, width):
                out[i, j] = x_frag[i, j] / sum_frag[i]

    return main
"#;
    let (tensors, layout) = run(source, "sum_frag");
    assert_eq!(layout, "thread rep | index (i) | replicate 64");
    let x = &tensors[0].values;
    let expected: Vec<f64> = x
        .chunks(512)
        .flat_map(|row| {
            let sum: f64 = row.iter().sum();
            row.iter().map(move |v| v / sum)
        })
        .collect();
    assert_matches("out", &tensors[1], expected);
}

/// Thread roles written as `if` / `elif` / `else` on the thread index, the output written only in
/// the last `else` (the `else` of the `elif`): the launch writes that parameter (it is not
/// declared read-only) and the statement runs.
#[test]
fn the_else_of_an_elif_is_part_of_the_launch() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def roles(N=128):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            if tx < 64:
                T.evaluate(0)
            elif tx < 128:
                T.evaluate(0)
            else:
                O[tx - 128] = A[tx - 128] * 2.0

    return main
"#;
    let (tensors, _) = run(source, "");
    let doubled = tensors[0].values.iter().map(|v| v * 2.0).collect();
    assert_matches("O", &tensors[1], doubled);
}

/// `T.async_copy` from global to shared memory, waited for with `T.ptx_wait_group` and a
/// barrier as TileKernels' engram gate does, and a fragment laid out by a `functools.partial` of a
/// layout function (`forward_fn=partial(interleave, vs=4)`): the values arrive unchanged, in the
/// layout the partial gives (groups of 4 columns to consecutive threads).
#[test]
fn async_copies_and_layouts_from_partial_functions() {
    let source = r#"
from functools import partial

import tilelang
import tilelang.language as T


def interleave(i, j, vs):
    return (i * 8 + j // vs) % 128, i // 16 * vs + j % vs


@tilelang.jit(out_idx=[1])
def staged(M=32, N=32):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a_shared = T.alloc_shared((M, N), "float32")
            a_local = T.alloc_fragment((M, N), "float32")
            T.annotate_layout({a_local: T.Fragment((M, N), forward_fn=partial(interleave, vs=4))})
            T.async_copy(A[0:M, 0:N], a_shared)
            T.ptx_wait_group(0)
            T.sync_threads()
            T.copy(a_shared, a_local)
            for i, j in T.Parallel(M, N):
                a_local[i, j] = a_local[i, j] * 2.0
            T.copy(a_local, B)

    return main
"#;
    let (tensors, layout) = run(source, "a_local");
    assert_eq!(
        layout,
        "thread i % 16 * 8 + j // 4 | index (i // 16 * 4 + j % 4) | replicate 1"
    );
    let expected = tensors[0].values.iter().map(|x| x * 2.0).collect();
    assert_matches("B", &tensors[1], expected);
}

/// A `T.copy` into or out of a `T.alloc_local` array is each thread's own, whole, as TileLang
/// lowers a copy with a `local` buffer: every thread loads its token's row of 3 (TileKernels'
/// n-gram hash), sums it, and writes the row back doubled. Spread over the threads as a shared
/// copy is, the 3 elements would have reached threads 0 to 2 alone.
#[test]
fn a_copy_with_a_local_array_is_each_threads_own() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1, 2])
def rows(M=64, K=3):
    @T.prim_func
    def main(A: T.Tensor((M, K), "int32"), S: T.Tensor((M,), "int32"), D: T.Tensor((M, K), "int32")):
        with T.Kernel(1, threads=64) as bx:
            tid = T.get_thread_binding()
            x_local = T.alloc_local((K,), "int32")
            T.copy(A[tid, :], x_local)
            acc = T.alloc_var("int32")
            acc = 0
            for k in T.serial(K):
                acc = acc + x_local[k]
                x_local[k] = x_local[k] * 2
            S[tid] = acc
            T.copy(x_local, D[tid, :])

    return main
"#;
    let (tensors, _) = run(source, "");
    let rows: Vec<&[f64]> = tensors[0].values.chunks(3).collect();
    let sums = rows.iter().map(|row| row.iter().sum()).collect();
    assert_matches("S", &tensors[1], sums);
    let doubled = tensors[0].values.iter().map(|x| x * 2.0).collect();
    assert_matches("D", &tensors[2], doubled);
}

/// `T.clear` and `T.fill` of a `T.alloc_local` array fill each thread's own array whole (3
/// elements over 64 threads: spread over them, 61 threads would read unwritten elements).
#[test]
fn filling_a_local_array_fills_each_threads_own() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def rows(M=64, K=3):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), D: T.Tensor((M, K), "float32")):
        with T.Kernel(1, threads=64) as bx:
            tid = T.get_thread_binding()
            x_local = T.alloc_local((K,), "float32")
            y_local = T.alloc_local((K,), "float32")
            T.clear(x_local)
            T.fill(y_local, 1.5)
            for k in T.serial(K):
                x_local[k] = x_local[k] + A[tid, k] + y_local[k]
            T.copy(x_local, D[tid, :])

    return main
"#;
    let (tensors, _) = run(source, "");
    let expected = tensors[0].values.iter().map(|x| x + 1.5).collect();
    assert_matches("D", &tensors[1], expected);
}

/// `T.copy` from one element to another (in a `T.Parallel` loop, as TileLang's tests write it)
/// is a store of the element.
#[test]
fn a_copy_of_one_element_is_a_store() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def elements(M=64, N=64, block_M=32, block_N=32):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                T.copy(A[by * block_M + i, bx * block_N + j], B[by * block_M + i, bx * block_N + j])

    return main
"#;
    let (tensors, _) = run(source, "");
    let expected = tensors[0].values.clone();
    assert_matches("B", &tensors[1], expected);
}

/// An eager kernel whose tensors are annotated in its signature (`def scale(A: T.Tensor(...),
/// ...)`, as TileLang's own tests write them) takes them as tensors, not as meta parameters, and
/// its other parameters keep their defaults.
#[test]
fn an_eager_kernel_with_tensors_in_its_signature() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def scale(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32), factor: float = 2.5):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            B[i] = A[i] * factor
"#;
    let (tensors, _) = run(source, "");
    let expected = tensors[0]
        .values
        .iter()
        .map(|x| f64::from(tilec_tests::f32_of(x * 2.5)))
        .collect();
    assert_matches("B", &tensors[1], expected);
}

/// TIR's scalar functions as library kernels write them: `T.isnan` / `T.isinf` / `T.isfinite` of
/// NaN, infinity and finite values, `T.floor` / `T.ceil` / `T.trunc` / `T.round` (halves away
/// from zero, as CUDA's `roundf`), `T.Select`, `T.And`, `T.max_value`, and the hints `T.assume`
/// and `T.warpgroup_fence_operand`, which change nothing. References computed here.
#[test]
fn tir_scalar_functions_and_hints() {
    let source = TIR_FUNCTIONS;
    let (tensors, _) = run_kernel(source, Some("scalars"), "");
    let a = &tensors[0].values;
    let flags = (0..96)
        .map(|i| match i % 3 {
            0 => 1.0,
            1 => 2.0,
            _ => 4.0 + if a[i] > 65504.0 { 8.0 } else { 0.0 },
        })
        .collect();
    assert_matches("F", &tensors[1], flags);
    let rounded = a
        .iter()
        .flat_map(|&x| {
            let v = f64::from(tilec_tests::f32_of(x * 7.5));
            [v.floor(), v.ceil(), v.trunc(), v.round()]
        })
        .collect();
    assert_matches("R", &tensors[2], rounded);
}

/// The math functions of activations and rotary embeddings, against references computed here in
/// f64: GELU through `T.erf` (the error function summed as its Taylor series, which converges
/// quickly for |x| ≤ 0.71), the trigonometric and hyperbolic functions, `exp10`, `log10`,
/// `log1p` of a tiny argument (where `log(1 + x)` would lose every digit) and `T.pow`.
#[test]
fn math_functions_of_activations_and_rotary_embeddings() {
    let (tensors, _) = run_kernel(TIR_FUNCTIONS, Some("math"), "");
    let erf = |x: f64| {
        let (mut term, mut sum) = (x, x);
        for n in 1..40 {
            let n = f64::from(n);
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    };
    let expected = tensors[0]
        .values
        .iter()
        .flat_map(|&x| {
            let f = |v: f64| f64::from(tilec_tests::f32_of(v));
            [
                0.5 * x * (1.0 + erf(f(x * std::f64::consts::FRAC_1_SQRT_2))),
                f(x * 3.0).sin(),
                f(x * 3.0).cos(),
                x.tan(),
                x.sinh(),
                x.cosh(),
                f(x * 0.5).asin(),
                f(x * 0.5).acos(),
                f(x * 4.0).atan(),
                10f64.powf(x),
                f(x + 2.0).log10(),
                f(x * 1e-5).ln_1p(),
                f(x + 2.0).powf(1.5),
            ]
        })
        .collect();
    assert_matches("M", &tensors[1], expected);
}

/// `T.truncdiv` and `T.truncmod` round toward zero (the remainder takes the dividend's sign: -32
/// and 5 give -6 and -2, where `//` and `%` would give -7 and 3), and `T.copysign` takes the
/// magnitude of its first operand and the sign of its second.
#[test]
fn truncating_division_and_copysign() {
    let (tensors, _) = run_kernel(TIR_FUNCTIONS, Some("signs"), "");
    let count = tensors[0].values.len();
    let quotients = (0..count)
        .flat_map(|i| {
            let v = i64::try_from(i).unwrap_or(0) - 32;
            let (magnitude, sign) = (v.abs(), v.signum());
            [
                (sign * (magnitude / 5)) as f64,
                (sign * (magnitude % 5)) as f64,
            ]
        })
        .collect();
    assert_matches("D", &tensors[1], quotients);
    let signed = tensors[0]
        .values
        .iter()
        .enumerate()
        .map(|(i, &x)| if i < 32 { -x.abs() } else { x.abs() })
        .collect();
    assert_matches("F", &tensors[2], signed);
}

/// A `T.alloc_local` in a `T.Parallel` body is each iteration's own: its stores are no race
/// (TileOPs' FFT stages a complex pair so), and each iteration reads back what it wrote.
#[test]
fn a_local_buffer_allocated_in_a_parallel_body_is_each_iterations_own() {
    let warnings = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/op.py", TIR_FUNCTIONS);
        file_diagnostics(&db, file)
            .iter()
            .filter(|d| d.code == tilec_ir::Code::DataRace)
            .map(|d| d.message.clone())
            .collect::<Vec<_>>()
    });
    assert_eq!(warnings, Vec::<String>::new());
    let (tensors, _) = run_kernel(TIR_FUNCTIONS, Some("private_pairs"), "");
    let expected = tensors[0]
        .values
        .iter()
        .flat_map(|&x| [x * 2.0, x + 1.0])
        .collect();
    assert_matches("Y", &tensors[1], expected);
}

/// `T.alloc_var(dtype, init=x)` starts at `x`, also inside a run-time `if` (DeepSeek's
/// TileKernels normalize top-k weights so, with `init=1e-20`): the initial value was dropped, and
/// the first `+=` read an unwritten register. D[row] = 0.5 + the sum of W's row.
#[test]
fn a_scalar_variable_starts_at_its_init() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def sums(num_topk=4, num_tokens=200):
    @T.prim_func
    def main(W: T.Tensor((num_tokens, num_topk), "float32"), D: T.Tensor((num_tokens,), "float32")):
        with T.Kernel(2, threads=128) as (pid,):
            tid = T.get_thread_binding()
            row = pid * 128 + tid
            if row < num_tokens:
                acc = T.alloc_var(T.float32, init=0.5)
                for i in T.unroll(num_topk):
                    acc += W[row, i]
                D[row] = acc

    return main
"#;
    let (tensors, _) = run(source, "");
    let w = &tensors[0].values;
    let expected = (0..200)
        .map(|row| 0.5 + (0..4).map(|i| w[row * 4 + i]).sum::<f64>())
        .collect();
    assert_matches("D", &tensors[1], expected);
}

/// A `T.Parallel` body that stores a shared element and reads it back (TileOPs' layer norm keeps
/// the padded input in shared memory so): the vector loop loaded the shared row into registers
/// before the lanes wrote it, a read of memory no thread had written (the emulator stopped on it;
/// the GPU's result was right, the load wasted). It now loads nothing it writes first.
#[test]
fn a_shared_element_written_then_read_in_one_parallel_body() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def widen(M=256, N=128, block_m=128):
    @T.prim_func
    def main(x: T.Tensor((M, N), "float16"), y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_m), threads=128) as pid_m:
            buf = T.alloc_shared((block_m, N), "float16")
            f = T.alloc_fragment((block_m, N), "float32")
            for i, j in T.Parallel(block_m, N):
                buf[i, j] = x[pid_m * block_m + i, j]
                f[i, j] = T.cast(buf[i, j], "float32") * 2.0
            T.copy(f, y[pid_m * block_m, 0])

    return main
"#;
    let (tensors, _) = run(source, "");
    let doubled = tensors[0].values.iter().map(|&x| x * 2.0).collect();
    assert_matches("y", &tensors[1], doubled);
}

/// `with T.attr("default", "async_scope", 1):` and the `"pragma_*"` hints tell TileLang's code
/// generator how to emit the body (here: the stores into shared memory as `cp.async`); the body
/// does what it says either way, and runs as written. Each thread stores eight elements of a row
/// under the hint, the block waits, and the rows come back out doubled.
#[test]
fn code_generation_hints_run_their_body_as_written() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def staged(M=16, N=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tile = T.alloc_shared((M, N), "float32")
            tx = T.get_thread_binding()
            with T.attr("default", "async_scope", 1):
                for v in T.serial(8):
                    tile[tx // 8, tx % 8 * 8 + v] = A[tx // 8, tx % 8 * 8 + v]
            T.sync_threads()
            with T.attr(0, "pragma_unroll_explicit", 1):
                for i, j in T.Parallel(M, N):
                    B[i, j] = tile[i, j] * 2

    return main
"#;
    let (tensors, _) = run(source, "");
    let doubled = tensors[0].values.iter().map(|x| x * 2.0).collect();
    assert_matches("B", &tensors[1], doubled);
}

/// A grid-stride loop (`T.serial(start, stop, step)` starting at each thread's own index) runs a
/// different number of iterations on each thread, so no barrier may sit inside it: the barrier
/// before it and the one after it are the kernel's own, and the atomic additions inside need
/// none between them. A histogram of expert indices as DeepSeek's MoE kernels count them, against
/// counts made here.
#[test]
fn a_grid_stride_loop_runs_each_threads_own_iterations() {
    let source = include_str!("../../fixtures/kernels/grid_stride_histogram.py");
    let (tokens, topk, groups) = (300usize, 4usize, 16usize);
    let expert = |k: usize| (!k.is_multiple_of(11)).then_some((k * 7 + k / 5) % groups);
    let indices: Vec<f64> = (0..tokens * topk)
        .map(|k| expert(k).map_or(-1.0, |g| g as f64))
        .collect();
    let mut expected = vec![0.0; groups];
    for g in (0..tokens * topk).filter_map(expert) {
        expected[g] += 1.0;
    }
    let out = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/count.py", source);
        let instance = instances(&db, file)[0];
        let programs = match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs.clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        };
        let mut tensors = make_tensors(&programs[0], &[], 7, false).expect("shapes evaluate");
        tensors[0].values.clone_from(&indices);
        tensors[1].values = vec![0.0; groups];
        run_program(&programs[0], &mut tensors, &[]).expect("the emulator runs it");
        tensors.swap_remove(1)
    });
    assert_matches("out", &out, expected);
}

/// A `T.copy` whose extent is a run-time length (`K[i * bc : i * bc + curr, :]` into
/// `k_shared[:curr, :]`, the last partial block of a sequence whose length the kernel reads from
/// a tensor) is lowered over the shared tile's rows, each guarded by the length: rows past it
/// keep what `T.fill` put there. Against rows made here for a length of 77 in blocks of 32.
#[test]
fn a_copy_of_a_run_time_length_fills_only_that_many_rows() {
    let source = include_str!("../../fixtures/kernels/run_time_length_copy.py");
    let (rows, width, length) = (200usize, 64usize, 77usize);
    let (tensors, before) = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/tail.py", source);
        let instance = instances(&db, file)[0];
        let programs = match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs.clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        };
        let mut tensors = make_tensors(&programs[0], &[], 7, false).expect("shapes evaluate");
        tensors[1].values = vec![length as f64];
        let before = tensors[2].values.clone();
        run_program(&programs[0], &mut tensors, &[]).expect("the emulator runs it");
        (tensors, before)
    });
    let copied_blocks = length.div_ceil(32) * 32;
    let expected = (0..rows * width)
        .map(|k| match k / width {
            row if row < length => tensors[0].values[k],
            row if row < copied_blocks => -1.0,
            _ => before[k],
        })
        .collect();
    assert_matches("O", &tensors[2], expected);
}

/// Statements under a condition that selects some threads and no thread group (`if tx == 0:`)
/// get no barrier inside, even where they write and then read the same shared buffer: the other
/// threads never reach such a barrier (the kernel would hang). One thread's prefix sum, against
/// sums made here.
#[test]
fn one_threads_statements_get_no_barrier_inside_its_branch() {
    let source = include_str!("../../fixtures/kernels/single_thread_prefix.py");
    let block = 16u32;
    let counts: Vec<u32> = (0..64u32).map(|g| (g * 37) % 100).collect();
    let sizes: Vec<f64> = counts.iter().map(|&c| f64::from(c)).collect();
    let tiles = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/prefix.py", source);
        let instance = instances(&db, file)[0];
        let programs = match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs.clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        };
        let mut tensors = make_tensors(&programs[0], &[], 7, false).expect("shapes evaluate");
        tensors[0].values.clone_from(&sizes);
        run_program(&programs[0], &mut tensors, &[]).expect("the emulator runs it");
        tensors.swap_remove(1)
    });
    let mut expected = vec![0.0];
    for &count in &counts {
        let tiles = count.div_ceil(block);
        expected.push(expected.last().copied().unwrap_or(0.0) + f64::from(tiles));
    }
    assert_matches("tiles", &tiles, expected);
}

/// The first thread program of `source`'s first instance, which must lower.
fn first_program(name: &str, source: &str) -> tilec_ir::ThreadProgram {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, name, source);
        let instance = instances(&db, file)[0];
        match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs[0].clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        }
    })
}

/// `T.sync_threads()` written in each of several warp roles is TileLang's block-wide barrier,
/// which the roles reach at different places in their code: it is lowered as `bar.sync 0` among
/// all of the block's threads (not narrowed to each role's own, which would split it), and the
/// emulator runs the roles side by side until all have reached it. The producer's tile reaches
/// both consumers; the first hands its sums to the second through named barrier 1
/// (`T.named_barrier_arrive` on one side, `T.sync_threads(barrier_id=1, arrive_count=256)` on the
/// other). Against values computed here.
#[test]
fn a_block_barrier_in_each_warp_role_and_a_named_barrier_between_two_of_them() {
    let source = include_str!("../../fixtures/kernels/role_barriers.py");
    let program = first_program("/kernels/role_barriers.py", source);
    let mut barriers = Vec::new();
    tilec_ir::thread::for_each_stmt(&program.body, &mut |stmt| {
        if let tilec_ir::thread::Stmt::Barrier = stmt {
            barriers.push("__syncthreads".to_owned());
        }
        if let tilec_ir::thread::Stmt::NamedBarrier { id, threads } = stmt {
            barriers.push(format!("bar.sync {id}, {threads}"));
        }
        if let tilec_ir::thread::Stmt::NamedBarrierArrive { id, threads } = stmt {
            barriers.push(format!("bar.arrive {id}, {threads}"));
        }
    });
    assert_eq!(
        barriers,
        [
            "bar.sync 0, 384",
            "bar.sync 0, 384",
            "bar.arrive 1, 256",
            "bar.sync 0, 384",
            "bar.sync 1, 256"
        ]
    );
    let mut tensors = make_tensors(&program, &[], 7, false).expect("shapes evaluate");
    run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
    let expected = tensors[0]
        .values
        .iter()
        .map(|&a| {
            let f32_round = |x: f64| tilec_runtime::tensor::round_to(tilec_ir::DType::Float32, x);
            let doubled = f32_round(a * 2.0);
            f32_round(f32_round(doubled + 1.0) * doubled)
        })
        .collect();
    assert_matches("B", &tensors[1], expected);
}

/// A role that never reaches the block barrier the others wait at (its `T.sync_threads()` is
/// missing) would hang the GPU: the emulator reports the deadlock, naming the barrier and how
/// many of its threads reached it.
#[test]
fn a_block_barrier_one_role_never_reaches_is_a_deadlock() {
    let source = include_str!("../../fixtures/kernels/role_barriers.py").replacen(
        "                stage[tx] = A[tx] * 2.0\n                T.sync_threads()\n",
        "                stage[tx] = A[tx] * 2.0\n",
        1,
    );
    let program = first_program("/kernels/role_barriers.py", &source);
    let mut tensors = make_tensors(&program, &[], 7, false).expect("shapes evaluate");
    let error = run_program(&program, &mut tensors, &[]).expect_err("a deadlock");
    let message = error.to_string();
    assert!(
        message.contains(
            "deadlock: the second branch waits at named barrier 0, which 256 of its 384 threads \
             have reached"
        ),
        "{message}"
    );
}

/// A name bound to an expression of buffer elements (`mid = (lo[0] + hi[0]) >> 1`) keeps the
/// value it had when bound, in both branches of an `if` that writes one of those buffers in
/// one branch (`lo[0] = mid + 1`) and reads the name in the other (`hi[0] = mid`): the binary
/// search of a grouped GEMM's tile scheduler. Against the same search run here.
#[test]
fn a_name_read_in_both_branches_of_an_if_that_stores_keeps_its_value() {
    let source = include_str!("../../fixtures/kernels/binary_search.py");
    let program = first_program("/kernels/search.py", source);
    let mut tensors = make_tensors(&program, &[], 7, false).expect("shapes evaluate");
    let cumulative: Vec<i32> = (0..65).map(|g| g * 3 + g % 5).collect();
    let queries: Vec<i32> = (0..128).map(|t| (t * 37) % 200).collect();
    tensors[0].values = cumulative.iter().map(|&v| f64::from(v)).collect();
    tensors[1].values = queries.iter().map(|&v| f64::from(v)).collect();
    run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
    let expected = queries
        .iter()
        .map(|&query| {
            let (mut lo, mut hi) = (0usize, 63usize);
            for _ in 0..6 {
                let mid = (lo + hi) >> 1;
                if cumulative[mid + 1] <= query {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            f64::from(u32::try_from(lo).unwrap_or(u32::MAX))
        })
        .collect();
    assert_matches("G", &tensors[2], expected);
}
