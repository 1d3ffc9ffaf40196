//! Reductions across threads and calls into the user's own CUDA, run end to end — checked, laid
//! out, lowered, printed as CUDA and run in the emulator — against references computed here:
//! TVM's hand-written thread all-reduce (`T.comm_reducer` in `T.attr(..., "reduce_scope", ...)`
//! around `T.tvm_thread_allreduce`), TileLang's legacy reducers (`T.alloc_reducer` /
//! `T.finalize_reducer`), `T.dp4a`, and `T.call_extern` / `T.import_source`, whose CUDA is passed
//! through and which the emulator says it cannot run.

use tilec_db::{RootDatabase, file_diagnostics, instances, lowering_diagnostics};
use tilec_ir::{Code, Target, ThreadProgram};
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::{HostTensor, run_program};
use tilec_tests::{assert_matches, line_of, lower_first, on_analysis_stack, source_file};

/// The diagnostics of `source` that stop its analysis, as `code: message`.
fn errors(source: &str) -> Vec<String> {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/reducers.py", source);
        file_diagnostics(&db, file)
            .iter()
            .filter(|d| d.severity.stops_analysis())
            .map(|d| format!("{}: {}", d.code.name(), d.message))
            .collect()
    })
}

/// Checks `source` (no error allowed) and lowers its first instance.
fn lower(source: &str) -> ThreadProgram {
    lower_first("/kernels/reducers.py", source)
}

/// Lowers `source`, runs it on seeded inputs and returns the tensors after the run.
fn run(source: &str) -> Vec<HostTensor> {
    let program = lower(source);
    let mut tensors = make_tensors(&program, &[], 7, false).expect("shapes evaluate");
    run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
    tensors
}

fn cuda(source: &str) -> String {
    tilec_passes::cuda::emit_cuda(&lower(source), &Target::Sm90)
}

/// `splitk_gemv_vectorized_tvm` of TileLang's gemv example, smaller: each of the 32 threads along
/// y sums part of a row, and the thread all-reduce over y gives every one of them the row's sum.
const ALLREDUCE_SUM: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def gemv(N=8, K=256, BLOCK_N=2, reduce_threads=32):
    TILE_K = K // reduce_threads

    @T.prim_func
    def main(A: T.Tensor((K,), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, reduce_threads)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            acc = T.alloc_local((1,), "float32")
            reduced = T.alloc_local((1,), "float32")
            T.clear(acc)
            for k in T.serial(TILE_K):
                acc[0] += A[tk * TILE_K + k] * B[bn * BLOCK_N + tn, tk * TILE_K + k]
            with T.attr(
                T.comm_reducer(lambda x, y: x + y, [T.cast(0, "float32")]),
                "reduce_scope",
                T.reinterpret(T.uint64(0), dtype="handle"),
            ):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, reduced[0], tk, dtype="handle"))
            C[bn * BLOCK_N + tn] = reduced[0]

    return main


gemv()
"#;

#[test]
fn thread_allreduce_sums_over_the_named_thread_dimension() {
    let tensors = run(ALLREDUCE_SUM);
    let (a, b) = (&tensors[0].values, &tensors[1].values);
    let (n, k) = (8, 256);
    let expected = (0..n)
        .map(|row| (0..k).map(|j| a[j] * b[row * k + j]).sum())
        .collect();
    assert_matches("C", &tensors[2], expected);
    // Along y (stride 2) over 32 threads: masks 2..16 within a warp, 32 across the two warps.
    let text = cuda(ALLREDUCE_SUM);
    for mask in [2, 4, 8, 16] {
        assert!(
            text.contains(&format!(
                "allreduce[0] = allreduce[0] + __shfl_xor_sync(0xffffffffu, allreduce[0], {mask}, 32);"
            )),
            "{text}"
        );
    }
    assert!(
        !text.contains("__shfl_xor_sync(0xffffffffu, allreduce[0], 1, 32)"),
        "{text}"
    );
    assert!(
        text.contains("reduce_workspace[tx] = allreduce[0];"),
        "{text}"
    );
}

/// A max over the x dimension of 64 threads (two warps), and an xor over y, both with the
/// combiners written as TileLang users write them.
const ALLREDUCE_MAX_XOR: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def extremes():
    @T.prim_func
    def main(A: T.Tensor((2, 64), "float32"), X: T.Tensor((2, 64), "int32"), M: T.Tensor((2,), "float32"), P: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=(64, 2)) as bx:
            tx = T.get_thread_binding(0)
            ty = T.thread_binding(0, 2, thread="threadIdx.y")
            best = T.alloc_local((1,), "float32")
            bits = T.alloc_local((1,), "int32")
            with T.attr(T.comm_reducer(lambda x, y: T.max(x, y), [T.cast(0, "float32")]), "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[ty, tx], True, best[0], tx, dtype="handle"))
            with T.attr(T.comm_reducer(lambda x, y: x ^ y, [T.int32(0)]), "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), X[ty, tx], True, bits[0], ty, dtype="handle"))
            if tx == 5:
                M[ty] = best[0]
            if ty == 1:
                P[tx] = bits[0]

    return main


extremes()
"#;

#[test]
fn thread_allreduce_takes_max_and_xor_combiners() {
    let tensors = run(ALLREDUCE_MAX_XOR);
    let (a, x) = (&tensors[0].values, &tensors[1].values);
    let maxima = (0..2)
        .map(|row| a[row * 64..][..64].iter().copied().fold(f64::MIN, f64::max))
        .collect();
    assert_matches("M", &tensors[2], maxima);
    // X holds int32 values, whole numbers that `as i32` keeps.
    #[allow(clippy::cast_possible_truncation)]
    let xors = (0..64)
        .map(|col| f64::from((x[col] as i32) ^ (x[64 + col] as i32)))
        .collect();
    assert_matches("P", &tensors[3], xors);
    let text = cuda(ALLREDUCE_MAX_XOR);
    // x spans lanes 0..64: five shuffles, then the two warps through shared memory; y is bit 64
    // of the flat index, so the xor meets entirely in shared memory.
    assert!(
        text.contains("fmaxf(allreduce[0], __shfl_xor_sync(0xffffffffu, allreduce[0], 16, 32))"),
        "{text}"
    );
    assert!(
        text.contains(
            "allreduce_1[0] = allreduce_1[0] ^ reduce_workspace_1[tx - tx / 64 * 64 + 64];"
        ),
        "{text}"
    );
}

#[test]
fn thread_allreduce_misuse_is_reported() {
    let subtract = ALLREDUCE_SUM.replace("lambda x, y: x + y", "lambda x, y: x - y");
    assert_eq!(
        errors(&subtract),
        [
            "not-analysed: tilec supports `T.comm_reducer` combiners that are one associative and \
          commutative operation of their two arguments (`x + y`, `x * y`, `T.max(x, y)`, \
          `T.min(x, y)`, `x & y`, `x | y`, `x ^ y`)"
        ]
    );
    let outside = ALLREDUCE_SUM.replace(
        "            with T.attr(\n                T.comm_reducer(lambda x, y: x + y, [T.cast(0, \"float32\")]),\n                \"reduce_scope\",\n                T.reinterpret(T.uint64(0), dtype=\"handle\"),\n            ):\n                T.evaluate",
        "            if True:\n                T.evaluate",
    );
    assert_ne!(outside, ALLREDUCE_SUM);
    assert_eq!(
        errors(&outside),
        [
            "invalid-call: `T.tvm_thread_allreduce` belongs inside `with T.attr(T.comm_reducer(...), \
          \"reduce_scope\", ...)`, which says how values combine"
        ]
    );
    let not_a_thread = ALLREDUCE_SUM.replace("reduced[0], tk, dtype", "reduced[0], bn, dtype");
    assert_eq!(
        errors(&not_a_thread),
        [
            "invalid-call: `T.tvm_thread_allreduce` reduces over thread indices: pass \
          `T.get_thread_binding(d)` or a `T.thread_binding(...)` of the launch"
        ]
    );
}

/// `gemv_alloc_reducer` of TileLang's gemv example, smaller: every iteration of the parallel
/// loop adds to one element of the reducer, and finalizing sums the copies of each element.
const ALLOC_REDUCER: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def gemv(M=64, N=64, block_M=32, block_N=32, threads=128):
    @T.prim_func
    def main(a: T.Tensor((M, N), "float32"), x: T.Tensor((N,), "float32"), o: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as i0_m:
            o_reducer = T.alloc_reducer(block_M, "float32", replication="all")
            T.clear(o_reducer)
            for i0_n in T.Pipelined(T.ceildiv(N, block_N), num_stages=2):
                a_smem = T.alloc_shared((block_M, block_N), "float32")
                T.copy(a[i0_m * block_M, i0_n * block_N], a_smem)
                a_frag = T.alloc_fragment((block_M, block_N), "float32")
                T.copy(a_smem, a_frag)
                x_frag = T.alloc_fragment(block_N, "float32")
                T.copy(x[i0_n * block_N], x_frag)
                for i1_m, i1_n in T.Parallel(block_M, block_N):
                    o_reducer[i1_m] += a_frag[i1_m, i1_n] * x_frag[i1_n]
            T.finalize_reducer(o_reducer)
            T.copy(o_reducer, o[i0_m * block_M])

    return main


gemv()
"#;

#[test]
fn alloc_reducer_sums_every_contribution_once() {
    let tensors = run(ALLOC_REDUCER);
    let (a, x) = (&tensors[0].values, &tensors[1].values);
    let expected = (0..64)
        .map(|row| (0..64).map(|j| a[row * 64 + j] * x[j]).sum())
        .collect();
    assert_matches("o", &tensors[2], expected);
    // Eight threads hold copies of each element (`thread = i % 16 * 8 + rep`): three shuffles.
    let text = cuda(ALLOC_REDUCER);
    for mask in [1, 2, 4] {
        assert!(
            text.contains(&format!(
                "__shfl_xor_sync(0xffffffffu, o_reducer[0], {mask}, 32)"
            )),
            "{text}"
        );
    }
}

/// A max reducer updated by a loop with fewer iterations than threads: the loop is replicated,
/// and only one replica of each iteration contributes (a sum would otherwise count it four
/// times); the copies then meet across warps through shared memory.
const REPLICATED_REDUCER: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def column_stats():
    @T.prim_func
    def main(a: T.Tensor((16, 32), "float32"), s: T.Tensor((32,), "float32"), m: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            total = T.alloc_reducer((32,), "float32")
            top = T.alloc_reducer((32,), "float32", op="max", replication="none")
            T.clear(total)
            T.fill(top, -T.infinity("float32"))
            for r in T.serial(16):
                for j in T.Parallel(32):
                    total[j] += a[r, j]
                    top[j] = T.max(top[j], a[r, j])
            T.finalize_reducer(total)
            T.finalize_reducer(top)
            T.copy(total, s)
            T.copy(top, m)

    return main


column_stats()
"#;

#[test]
fn replicated_loops_contribute_to_a_reducer_once() {
    let tensors = run(REPLICATED_REDUCER);
    let a = &tensors[0].values;
    let sums = (0..32)
        .map(|j| (0..16).map(|r| a[r * 32 + j]).sum())
        .collect();
    assert_matches("s", &tensors[1], sums);
    let maxima = (0..32)
        .map(|j| (0..16).map(|r| a[r * 32 + j]).fold(f64::MIN, f64::max))
        .collect();
    assert_matches("m", &tensors[2], maxima);
    // The loop's 32 iterations run on each of the four warps; the first warp's contribute.
    let text = cuda(REPLICATED_REDUCER);
    assert!(
        text.contains("if ((tx / 32) == 0) {\n                    total[0] = total[0] + a[r_2 * 32 + tx % 32];"),
        "{text}"
    );
}

/// TileLang's current reducer form: an identity start, an `init` counted once however many
/// threads hold copies, updates from a replicated loop, and the result in another fragment.
const REDUCER_V2: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def column_stats():
    @T.prim_func
    def main(a: T.Tensor((16, 32), "float32"), s: T.Tensor((32,), "float32"), m: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            total = T.alloc_reducer((32,), "float32")
            low = T.alloc_reducer((32,), "int32", op="min")
            T.reducer_init(total, 10.0)
            T.reducer_init(low)
            for r in T.serial(16):
                for j in T.Parallel(32):
                    T.reducer_update(total[j], a[r, j])
                    T.reducer_update(low[j], T.cast(a[r, j] * 100.0, "int32"))
            sums = T.alloc_fragment((32,), "float32")
            lows = T.alloc_fragment((32,), "int32")
            T.finalize_reducer(total, sums)
            T.finalize_reducer(low, lows)
            T.copy(sums, s)
            T.copy(lows, m)

    return main


column_stats()
"#;

#[test]
fn reducer_init_update_and_finalize_into_a_fragment() {
    let tensors = run(REDUCER_V2);
    let a = &tensors[0].values;
    let sums = (0..32)
        .map(|j| 10.0 + (0..16).map(|r| a[r * 32 + j]).sum::<f64>())
        .collect();
    assert_matches("s", &tensors[1], sums);
    let lows = (0..32)
        .map(|j| {
            (0..16)
                .map(|r| float32_times_100_truncated(a[r * 32 + j]))
                .min()
                .map_or(f64::NAN, f64::from)
        })
        .collect();
    assert_matches("m", &tensors[2], lows);
    // The min reducer starts at int32's highest value.
    let text = cuda(REDUCER_V2);
    assert!(text.contains("low[r_1] = 2147483647;"), "{text}");
}

#[test]
fn reducer_misuse_is_reported() {
    let unknown_op = ALLOC_REDUCER.replace("replication=\"all\")", "op=\"mean\")");
    assert_eq!(
        errors(&unknown_op),
        [
            "invalid-call: unknown reducer op \"mean\": TileLang's are \"sum\", \"max\", \"min\", \
          \"bitand\", \"bitor\" and \"bitxor\""
        ]
    );
    let not_a_reducer = ALLOC_REDUCER.replace(
        "T.finalize_reducer(o_reducer)",
        "T.finalize_reducer(a_frag)",
    );
    // `a_frag` is declared in the loop body; finalize a fragment made outside it instead.
    let not_a_reducer = not_a_reducer.replace(
        "            T.clear(o_reducer)\n",
        "            T.clear(o_reducer)\n            plain = T.alloc_fragment(block_M, \"float32\")\n",
    );
    let not_a_reducer =
        not_a_reducer.replace("T.finalize_reducer(a_frag)", "T.finalize_reducer(plain)");
    assert_eq!(
        errors(&not_a_reducer),
        ["invalid-call: `plain` is not a reducer: make it with `T.alloc_reducer`"]
    );
    let overwritten = ALLOC_REDUCER.replace(
        "o_reducer[i1_m] += a_frag[i1_m, i1_n] * x_frag[i1_n]",
        "o_reducer[i1_m] = a_frag[i1_m, i1_n] * x_frag[i1_n]",
    );
    assert_eq!(
        errors(&overwritten),
        [
            "invalid-call: a store to the reducer `o_reducer` must combine into it with its \
          operation: `o_reducer[i] = o_reducer[i] + v`"
        ]
    );
    let other_op = REPLICATED_REDUCER.replace(
        "top[j] = T.max(top[j], a[r, j])",
        "top[j] = T.min(top[j], a[r, j])",
    );
    assert_eq!(
        errors(&other_op),
        [
            "invalid-call: a store to the reducer `top` must combine into it with its operation: \
          `top[i] = T.max(top[i], v)`"
        ]
    );
    let started = ALLOC_REDUCER.replace("T.clear(o_reducer)", "T.fill(o_reducer, 1.0)");
    assert_eq!(
        errors(&started),
        [
            "invalid-call: the reducer `o_reducer` combines with `+`, so it starts at zero: each \
          thread's copy of an element would add this value once more (`T.clear(o_reducer)`)"
        ]
    );
}

/// The bitnet decode kernel's inner product: four int8 products summed into int32 per `T.dp4a`.
const DP4A: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def dot(K=64):
    @T.prim_func
    def main(A: T.Tensor((32, K), "int8"), B: T.Tensor((32, K), "int8"), C: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            tx = T.get_thread_binding()
            a = T.alloc_local((K,), "int8")
            b = T.alloc_local((K,), "int8")
            acc = T.alloc_local((1,), "int32")
            for k in T.vectorized(K):
                a[k] = A[tx, k]
                b[k] = B[tx, k]
            T.clear(acc)
            for k in T.serial(K // 4):
                T.dp4a(a[k * 4], b[k * 4], acc[0])
            C[tx] = acc[0]

    return main


dot()
"#;

#[test]
fn dp4a_adds_four_int8_products_in_int32() {
    let tensors = run(DP4A);
    let (a, b) = (&tensors[0].values, &tensors[1].values);
    let expected = (0..32)
        .map(|row| (0..64).map(|k| a[row * 64 + k] * b[row * 64 + k]).sum())
        .collect();
    assert_matches("C", &tensors[2], expected);
    let wrong = DP4A.replace(
        "acc = T.alloc_local((1,), \"int32\")",
        "acc = T.alloc_local((1,), \"float32\")",
    );
    assert_eq!(
        errors(&wrong),
        ["invalid-call: `T.dp4a` needs an int32 accumulator as `C`, found float32"]
    );
}

/// The user's own CUDA: the source goes before the kernel, the call is made with pointers to the
/// local buffers, and `dtype=` given by keyword moves to the front as in TileLang.
const EXTERN: &str = r#"
import tilelang
import tilelang.language as T

decode_source = """
__device__ void twice(signed char *in, float *out, int n) {
    for (int i = 0; i < n; ++i) out[i] = 2.0f * in[i];
}
"""


@tilelang.jit
def decode(N=128):
    @T.prim_func
    def main(A: T.Tensor((N, 4), "int8"), B: T.Tensor((N, 4), "float32")):
        with T.Kernel(1, threads=N) as bx:
            tx = T.get_thread_binding()
            packed = T.alloc_local((4,), "int8")
            unpacked = T.alloc_local((4,), "float32")
            T.import_source(decode_source)
            for v in T.vectorized(4):
                packed[v] = A[tx, v]
            T.call_extern("twice", T.access_ptr(packed, "r"), T.access_ptr(unpacked, "w"), 4, dtype="float32")
            for v in T.serial(4):
                B[tx, v] = unpacked[v]

    return main


decode()
"#;

#[test]
fn extern_calls_pass_the_users_cuda_through() {
    let text = cuda(EXTERN);
    let source = text
        .find("__device__ void twice(signed char *in, float *out, int n) {")
        .expect("the source is in the CUDA");
    let kernel = text.find("__global__").expect("a kernel");
    assert!(source < kernel, "{text}");
    // TileLang's headers define `uint` for such code; tilec's CUDA does too, before it.
    let uint = text
        .find("#define uint unsigned int")
        .expect("`uint` is defined");
    assert!(uint < source, "{text}");
    assert!(
        text.contains("twice(&packed[0], &unpacked[0], 4);"),
        "{text}"
    );
    let not_a_name = EXTERN.replace("T.call_extern(\"twice\"", "T.call_extern(\"twice(\"");
    assert_eq!(
        errors(&not_a_name),
        ["invalid-call: `T.call_extern` calls a function by its C++ name, found \"twice(\""]
    );
    let program = lower(EXTERN);
    let mut tensors = make_tensors(&program, &[], 7, false).expect("shapes evaluate");
    let error = run_program(&program, &mut tensors, &[]).expect_err("the emulator cannot run it");
    assert!(
        error.to_string().contains(
            "the emulator cannot run `twice`, a function of the kernel's own CUDA source \
             (`T.call_extern`, `T.import_source`): only a GPU can"
        ),
        "{error}"
    );
}

#[test]
fn a_kernel_prelude_is_imported_source() {
    let prelude = EXTERN
        .replace(
            "with T.Kernel(1, threads=N) as bx:",
            "with T.Kernel(1, threads=N, prelude=decode_source) as bx:",
        )
        .replace("            T.import_source(decode_source)\n", "");
    assert_ne!(prelude, EXTERN);
    let text = cuda(&prelude);
    let source = text
        .find("__device__ void twice(signed char *in, float *out, int n) {")
        .expect("the source is in the CUDA");
    assert!(
        source < text.find("__global__").expect("a kernel"),
        "{text}"
    );
    // From another module, the prelude stops lowering only.
    let unknown = UNKNOWN_SOURCE
        .replace(
            "with T.Kernel(1, threads=N) as bx:",
            "with T.Kernel(1, threads=N, prelude=info[\"c_source\"]) as bx:",
        )
        .replace("            T.import_source(info[\"c_source\"])\n", "");
    assert_eq!(errors(&unknown), Vec::<String>::new());
}

/// The source and name built by a module tilec does not have: checking needs neither, lowering
/// says it cannot go on, at the `T.import_source`.
const UNKNOWN_SOURCE: &str = r#"
import tilelang
import tilelang.language as T
from bitblas.gpu.intrin.lop3 import get_lop3_intrin_group

info = get_lop3_intrin_group(out_dtype="float16")


@tilelang.jit
def unknown_source(N=128):
    @T.prim_func
    def main(A: T.Tensor((N,), "int8"), B: T.Tensor((N,), "float16")):
        with T.Kernel(1, threads=N) as bx:
            tx = T.get_thread_binding()
            a = T.alloc_local((4,), "int8")
            b = T.alloc_local((4,), "float16")
            T.import_source(info["c_source"])
            a[0] = A[tx]
            T.call_extern("handle", info["func_name"], T.access_ptr(a, "r"), T.access_ptr(b, "w"))
            B[tx] = b[0]

    return main


unknown_source()
"#;

#[test]
fn an_unknown_extern_source_is_checked_but_not_lowered() {
    assert_eq!(errors(UNKNOWN_SOURCE), Vec::<String>::new());
    let lowering: Vec<(Code, usize, String)> = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/reducers.py", UNKNOWN_SOURCE);
        let instance = instances(&db, file)[0];
        lowering_diagnostics(&db, instance)
            .iter()
            .map(|d| (d.code, line_of(&db, file, d.span.start), d.message.clone()))
            .collect()
    });
    assert_eq!(
        lowering,
        [(
            Code::NotAnalysed,
            17,
            "the CUDA source of `T.import_source` is a value tilec cannot know (it comes from \
             another module), so tilec cannot generate the code that calls into it"
                .to_owned()
        )]
    );
}

/// TIR's names for the bit operators, as the mxfp4 dequantization examples use them.
const BIT_OPERATORS: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def bits():
    @T.prim_func
    def main(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            a = A[tx] & 15
            B[tx] = T.bitwise_xor(T.shift_left(1, a), T.bitwise_or(T.shift_right(A[tx], 2), T.bitwise_and(A[tx], 3)))

    return main


bits()
"#;

#[test]
fn tir_bit_operators_are_pythons() {
    let tensors = run(BIT_OPERATORS);
    let expected = tensors[0]
        .values
        .iter()
        .map(|&x| {
            // The input holds int32 values, whole numbers that `as i32` keeps.
            #[allow(clippy::cast_possible_truncation)]
            let x = x as i32;
            f64::from((1 << (x & 15)) ^ ((x >> 2) | (x & 3)))
        })
        .collect();
    assert_matches("B", &tensors[1], expected);
}

/// The values an instance assumes for what no call gives: an autotuned kernel's `None` defaults
/// take its first config (as the autotuner gives every config key a value), and an assumed block
/// size that exceeds 1024 threads moves on to the next representative, as a failed `assert` does.
const ASSUMED: &str = r#"
import itertools
import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune


def configs():
    iter_params = dict(BLOCK_N=[2, 4], reduce_threads=[4, 8, 32])
    return [dict(zip(iter_params, values)) for values in itertools.product(*iter_params.values())]


@autotune(configs=configs(), warmup=3, rep=20)
@tilelang.jit
def tuned(N, K, BLOCK_N=None, reduce_threads=None):
    BLOCK_K = reduce_threads * 8

    @T.prim_func
    def main(A: T.Tensor((N, K), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, reduce_threads)) as bn:
            C[bn] = A[bn, BLOCK_K]

    return main


@tilelang.jit
def untuned(N, K, BLOCK_N, reduce_threads):
    @T.prim_func
    def main(A: T.Tensor((N, K), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, reduce_threads)) as bn:
            C[bn] = A[bn, 0]

    return main


best = tuned(N=1024, K=1024)
untuned(N=1024, K=1024, **best.config)
"#;

#[test]
fn assumed_values_are_ones_the_kernel_accepts() {
    assert_eq!(errors(ASSUMED), Vec::<String>::new());
    let args: Vec<Vec<String>> = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/reducers.py", ASSUMED);
        instances(&db, file)
            .iter()
            .map(|&instance| {
                let world = tilec_db::kernel_world(&db, instance);
                world
                    .assumed_args
                    .iter()
                    .map(|arg| format!("{}={:?} ({})", arg.name, arg.value, arg.source))
                    .collect()
            })
            .collect()
    });
    assert_eq!(args.len(), 2, "{args:#?}");
    assert!(
        args[0].iter().any(|a| a.starts_with("BLOCK_N=Int(2)"))
            && args[0]
                .iter()
                .any(|a| a.starts_with("reduce_threads=Int(4)")),
        "{args:#?}"
    );
    // 128 × 128 threads is too many: BLOCK_N moves on until the block has 1024.
    assert!(
        args[1].iter().any(|a| a.starts_with("BLOCK_N=Int(8)"))
            && args[1]
                .iter()
                .any(|a| a.starts_with("reduce_threads=Int(128)")),
        "{args:#?}"
    );
}

/// `T.reduce_*` with shared buffers on either side, as TileLang's `reduce` macro lowers them:
/// through fragment temporaries named `<buffer>_frag`. A row sum from shared into a fragment, a
/// column max from a fragment into shared that keeps what is there (`clear=False`), and a
/// shared-to-shared row max of a one-row tile (a copy whose loop skips the unit dimension).
const SHARED_REDUCTIONS: &str = include_str!("../../fixtures/kernels/shared_reductions.py");

#[test]
fn reductions_from_and_into_shared_go_through_fragments() {
    let tensors = run(SHARED_REDUCTIONS);
    let (a, prior, one) = (&tensors[0].values, &tensors[1].values, &tensors[2].values);
    let rows = (0..32)
        .map(|i| (0..64).map(|j| a[i * 64 + j]).sum())
        .collect();
    assert_matches("rows", &tensors[3], rows);
    let cols = (0..64)
        .map(|j| (0..32).map(|i| a[i * 64 + j]).fold(prior[j], f64::max))
        .collect();
    assert_matches("cols", &tensors[4], cols);
    let top = one.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    assert_matches("top", &tensors[5], vec![top]);
    let program = lower(SHARED_REDUCTIONS);
    let names: Vec<&str> = program.buffers.iter().map(|b| b.name.as_str()).collect();
    for temporary in [
        "a_shared_frag",
        "col_max_frag",
        "one_shared_frag",
        "one_max_frag",
    ] {
        assert!(names.contains(&temporary), "{temporary} in {names:?}");
    }
}

/// Reductions whose destination keeps the reduced dimension with extent 1 (`[4, 128] -> [4, 1]`,
/// which TileLang accepts beside `[4]`), and a whole 1-D fragment reduced into a one-element
/// fragment read outside any loop (DeepSeek's block-scale quantizers do both).
const KEPT_DIMENSION_REDUCTIONS: &str =
    include_str!("../../fixtures/kernels/kept_dimension_reductions.py");

#[test]
fn reductions_keep_the_reduced_dimension_when_the_result_has_it() {
    let tensors = run(KEPT_DIMENSION_REDUCTIONS);
    let (a, v) = (&tensors[0].values, &tensors[1].values);
    let rows = (0..4)
        .map(|i| {
            a[i * 128..(i + 1) * 128]
                .iter()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .collect();
    assert_matches("rows", &tensors[2], rows);
    let top = v.iter().map(|x| x.abs()).fold(0.0, f64::max);
    assert_matches("top", &tensors[3], vec![top]);
}

/// The kernel's `T.Cast("int32", a * 100)` of a float32 input: the product in float32, truncated
/// toward zero (the inputs lie in -1..1, so the product is far inside int32).
#[allow(clippy::cast_possible_truncation)]
fn float32_times_100_truncated(a: f64) -> i32 {
    (a as f32 * 100.0) as i32
}
