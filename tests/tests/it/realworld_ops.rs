//! Operations and dtypes that real TileLang files use (issue 31), each run end to end — checked,
//! laid out, lowered, printed as CUDA and run in the emulator — on a small kernel written here,
//! against a reference computed here independently of the emulator.

use tilec_db::{RootDatabase, file_diagnostics, instances, thread_programs};
use tilec_ir::thread::ThreadProgram;
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::{HostTensor, run_program};
use tilec_tests::{assert_matches, f32_of, int, on_analysis_stack, source_file};

/// Checks `source` (no error allowed), lowers its first instance, prints its launches as CUDA and
/// runs them one after the other on the same seeded tensors, as the launches of one TileLang
/// function run; returns the tensors after the run and the CUDA text of every launch.
fn run(source: &str) -> (Vec<HostTensor>, Vec<String>) {
    let (_, after, cuda) = run_from(source);
    (after, cuda)
}

/// [`run`], also returning the tensors as they were before the launches.
fn run_from(source: &str) -> (Vec<HostTensor>, Vec<HostTensor>, Vec<String>) {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/op.py", source);
        let errors: Vec<String> = file_diagnostics(&db, file)
            .iter()
            .filter(|d| d.severity == tilec_ir::Severity::Error)
            .map(|d| d.message.clone())
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
        let instance = instances(&db, file)[0];
        let programs: Vec<ThreadProgram> = match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs.clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        };
        let cuda = programs
            .iter()
            .map(|program| tilec_passes::cuda::emit_cuda(program, &tilec_ir::Target::Sm90))
            .collect();
        let mut tensors = make_tensors(&programs[0], &[], 7, false).expect("shapes evaluate");
        let before = tensors.clone();
        for program in &programs {
            run_program(program, &mut tensors, &[]).expect("the emulator runs it");
        }
        (before, tensors, cuda)
    })
}

/// TF32 rounding written from the format's definition on float32 bits, independently of
/// tilec's: add half of the 13 dropped bits' weight to the magnitude and clear them (ties away
/// from zero, carrying into the exponent).
fn tf32(value: f64) -> f64 {
    let bits = f32_of(value).to_bits();
    f64::from(f32::from_bits((bits + 0x1000) & !0x1fff))
}

const TF32_SQUARES: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def tf32_squares(M=64, N=32):
    @T.prim_func
    def main(
        A: T.Tensor((M, N), T.float32),
        B: T.Tensor((M, N), T.tfloat32),
        C: T.Tensor((M, N), T.float32),
    ):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((M, N), T.float32)
            A_tf32 = T.alloc_fragment((M, N), T.tfloat32)
            B_shared = T.alloc_shared((M, N), T.tfloat32)
            C_local = T.alloc_fragment((M, N), T.float32)
            T.copy(A, A_shared)
            T.copy(A_shared, A_tf32)
            T.copy(B, B_shared)
            for i, j in T.Parallel(M, N):
                A_tf32[i, j] = A_tf32[i, j] * B_shared[i, j]
            for i, j in T.Parallel(M, N):
                C_local[i, j] = A_tf32[i, j] + A[i, j]
            T.copy(C_local, C)

    return main


tf32_squares()
"#;

#[test]
fn tfloat32_values_round_ties_away_at_every_store_and_product() {
    let (tensors, cuda) = run(TF32_SQUARES);
    let (a, b) = (&tensors[0], &tensors[1]);
    // The inputs of a tf32 tensor hold tf32 values already; A is rounded by the copy.
    assert!(b.values.iter().all(|&x| tf32(x) == x));
    assert!(a.values.iter().any(|&x| tf32(x) != x));
    let expected = a
        .values
        .iter()
        .zip(&b.values)
        .map(|(&x, &y)| f64::from(f32_of(tf32(tf32(x) * y) + x)))
        .collect::<Vec<f64>>();
    // Exact: every rounding is reproduced, so the comparison allows no difference at all.
    assert_eq!(tensors[2].values, expected);
    assert!(
        cuda[0].contains("tl_tfloat32") && cuda[0].contains("tl_round_tf32"),
        "{}",
        cuda[0]
    );
}

#[test]
fn tf32_rounding_ties_away_from_zero_and_overflows_past_the_largest_value() {
    use tilec_ir::dtype::round_to_tf32;
    // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties go away from zero.
    let half_step = 1.0 + 2f64.powi(-11);
    assert_eq!(round_to_tf32(half_step), 1.0 + 2f64.powi(-10));
    assert_eq!(round_to_tf32(-half_step), -(1.0 + 2f64.powi(-10)));
    for x in [0.1, -3.7, 1e-39, 6.02e23, 1.0 / 3.0] {
        assert_eq!(round_to_tf32(x), tf32(x), "{x}");
    }
    assert_eq!(round_to_tf32(f64::from(f32::MAX)), f64::INFINITY);
}

const SPLIT_SUM: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def split_sum(M=64, N=256, splits=4):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), Out: T.Tensor((M,), T.float32)):
        partial = T.alloc_global((splits, M), T.float32)
        with T.Kernel(splits, threads=64) as bx:
            tile = T.alloc_fragment((M, N // splits), T.float32)
            row = T.alloc_fragment((M,), T.float32)
            T.copy(A[0, bx * (N // splits)], tile)
            T.reduce_sum(tile, row, dim=1)
            T.copy(row, partial[bx, 0])
        with T.Kernel(1, threads=64) as bx:
            parts = T.alloc_fragment((splits, M), T.float32)
            total = T.alloc_fragment((M,), T.float32)
            T.copy(partial, parts)
            T.reduce_sum(parts, total, dim=0)
            T.copy(total, Out)

    return main


split_sum()
"#;

#[test]
fn a_global_workspace_carries_partial_results_from_one_launch_to_the_next() {
    let (tensors, cuda) = run(SPLIT_SUM);
    // The workspace is the third tensor: allocated by the runner, not by the caller.
    assert_eq!(tensors.len(), 3);
    assert_eq!(tensors[2].shape, [4, 64]);
    let (m, n, splits) = (64, 256, 4);
    let a = &tensors[0];
    let partials = (0..splits * m)
        .map(|e| {
            let (split, row) = (e / m, e % m);
            let columns = split * (n / splits)..(split + 1) * (n / splits);
            columns.map(|j| a.values[row * n + j]).sum::<f64>()
        })
        .collect::<Vec<f64>>();
    assert_matches("partial", &tensors[2], partials);
    let sums = (0..m)
        .map(|row| (0..n).map(|j| a.values[row * n + j]).sum::<f64>())
        .collect();
    assert_matches("Out", &tensors[1], sums);
    // Each launch takes the workspace as one more pointer after the function's own tensors.
    assert_eq!(cuda.len(), 2);
    for text in &cuda {
        assert!(text.contains("float* __restrict__ partial"), "{text}");
    }
}

const RADIX_KEYS: &str = r#"
import tilelang
import tilelang.language as T


def convert_to_uint16(x):
    hval = T.cast(x, T.float16)
    bits_uint = T.reinterpret(hval, T.uint16)
    bits_uint = T.if_then_else(x < 0, ~bits_uint & (0xFFFF), bits_uint | (0x8000))
    return bits_uint >> 8


def convert_to_uint32(x):
    bits_uint = T.reinterpret(x, T.uint32)
    bits_uint = T.if_then_else(
        x < 0,
        ~bits_uint & T.cast((0xFFFFFFFF), T.uint32),
        bits_uint | T.cast((0x80000000), T.uint32),
    )
    return bits_uint


@tilelang.jit(out_idx=[1, 2, 3])
def radix_keys(N=256):
    @T.prim_func
    def main(
        A: T.Tensor((N,), T.float32),
        Keys: T.Tensor((N,), T.uint32),
        Buckets: T.Tensor((N,), T.uint16),
        Negated: T.Tensor((N,), T.float32),
    ):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                Keys[i] = convert_to_uint32(A[i])
                Buckets[i] = convert_to_uint16(A[i])
                flipped = T.reinterpret(A[i], T.uint32) ^ T.uint32(0x80000000)
                Negated[i] = T.reinterpret(T.float32, flipped)

    return main


radix_keys()
"#;

#[test]
fn reinterpret_reads_a_floats_bits_as_an_unsigned_key_and_back() {
    let (tensors, cuda) = run(RADIX_KEYS);
    let a = &tensors[0];
    let keys = a
        .values
        .iter()
        .map(|&x| {
            let bits = f32_of(x).to_bits();
            f64::from(if x < 0.0 { !bits } else { bits | 0x8000_0000 })
        })
        .collect::<Vec<f64>>();
    assert_eq!(tensors[1].values, keys);
    let buckets = a
        .values
        .iter()
        .map(|&x| {
            let bits = half::f16::from_f64(x).to_bits();
            let key = if x < 0.0 { !bits } else { bits | 0x8000 };
            f64::from(key >> 8)
        })
        .collect::<Vec<f64>>();
    assert_eq!(tensors[2].values, buckets);
    let negated = a.values.iter().map(|&x| -x).collect::<Vec<f64>>();
    assert_eq!(tensors[3].values, negated);
    // Radix order is float order: sorting by key sorts the values.
    let mut order: Vec<usize> = (0..a.values.len()).collect();
    order.sort_by(|&i, &j| keys[i].total_cmp(&keys[j]));
    assert!(order.windows(2).all(|w| a.values[w[0]] <= a.values[w[1]]));
    assert!(cuda[0].contains("__float_as_uint") && cuda[0].contains("__uint_as_float"));
    assert!(cuda[0].contains("tl_bits(tl_float_to_half("), "{}", cuda[0]);
}

const VECTOR_ATOMICS: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def scatter_add(M=16, N=32, blocks=3):
    @T.prim_func
    def main(
        A: T.Tensor((M, N), T.float32),
        Rows: T.Tensor((M,), T.int32),
        Out: T.Tensor((M, N), T.float32),
    ):
        with T.Kernel(blocks, threads=128) as bx:
            A_shared = T.alloc_shared((M, N), T.float32)
            T.copy(A, A_shared)
            for i, j in T.Parallel(M, N // 4):
                T.atomic_addx4(Out[Rows[i] % M, j * 4], A_shared[i, j * 4])
            for i, j in T.Parallel(M, N // 2):
                T.atomic_addx2(Out[i, j * 2 : j * 2 + 2], A_shared[i, j * 2 : j * 2 + 2])

    return main


scatter_add()
"#;

/// `T.atomic_addx4` on the vector's first element and `T.atomic_addx2` on regions of two
/// elements (both spellings TileLang takes): each adds every one of its consecutive elements.
#[test]
fn vector_atomic_adds_add_each_of_their_consecutive_elements() {
    let (before, after, cuda) = run_from(VECTOR_ATOMICS);
    let (m, n, blocks) = (16, 32, 3.0);
    let (a, rows) = (&before[0], &before[1]);
    let mut expected = before[2].values.clone();
    for i in 0..m {
        // The row numbers are index inputs, whole numbers in 0..8.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let row = (rows.values[i] as usize) % m;
        for j in 0..n {
            expected[row * n + j] += blocks * a.values[i * n + j];
            expected[i * n + j] += blocks * a.values[i * n + j];
        }
    }
    assert_matches("Out", &after[2], expected);
    assert!(cuda[0].contains("atomicAdd"), "{}", cuda[0]);
}

const DATA_VIEWS: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def flatten_filter(KH=3, KW=3, C=8, F=32, block=24):
    @T.prim_func
    def main(
        kernel: T.Tensor((KH, KW, C, F), T.float16),
        out: T.Tensor((KH, KW, C, F), T.float16),
    ):
        with T.Kernel(KH * KW * C // block, threads=128) as bx:
            kernel_flat = T.Tensor((KH * KW * C, F), T.float16, kernel.data)
            out_flat = T.Tensor((KH * KW * C, F), T.float16, out.data)
            tile = T.alloc_fragment((block, F), T.float32)
            T.copy(kernel_flat[bx * block, 0], tile)
            for i, j in T.Parallel(block, F):
                tile[i, j] = tile[i, j] * 2.0 + (bx * block + i)
            T.copy(tile, out_flat[bx * block, 0])

    return main


flatten_filter()
"#;

#[test]
fn a_tensor_over_another_buffers_data_addresses_its_elements_with_a_new_shape() {
    let (tensors, _) = run(DATA_VIEWS);
    let f = 32;
    // The flat view is the filter's storage read as (72, 32): its element (r, j) is the filter's
    // element r * 32 + j in row-major order.
    let expected = tensors[0]
        .values
        .iter()
        .enumerate()
        .map(|(e, &x)| x * 2.0 + (e / f) as f64)
        .collect();
    assert_matches("out", &tensors[1], expected);
}

const CONVOLUTION: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def convolution(N=2, C=16, H=8, W=8, F=32, K=3, S=2, D=2, P=2, block_M=32, block_N=32, block_K=16):
    KH, KW = K, K
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    @T.prim_func
    def main(
        data: T.Tensor((N, H, W, C), T.float16),
        kernel: T.Tensor((KH, KW, C, F), T.float16),
        out: T.Tensor((N, OH, OW, F), T.float16),
    ):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=128) as (bx, by):
            data_shared = T.alloc_shared((block_M, block_K), T.float16)
            kernel_shared = T.alloc_shared((block_K, block_N), T.float16)
            out_local = T.alloc_fragment((block_M, block_N), T.float32)
            kernel_flat = T.Tensor((KH * KW * C, F), T.float16, kernel.data)
            out_flat = T.Tensor((N * OH * OW, F), T.float16, out.data)
            T.clear(out_local)
            for k_iter in T.Pipelined(T.ceildiv(KH * KW * C, block_K), num_stages=2):
                T.im2col(data, data_shared, by, k_iter, KH, S, D, P)
                T.copy(kernel_flat[k_iter * block_K, bx * block_N], kernel_shared)
                T.gemm(data_shared, kernel_shared, out_local)
            T.copy(out_local, out_flat[by * block_M, bx * block_N])

    return main


convolution()
"#;

#[test]
fn im2col_feeds_a_gemm_that_computes_a_strided_dilated_padded_convolution() {
    let (tensors, cuda) = run(CONVOLUTION);
    let (n, c, h, w, f, k, s, d, p) = (2, 16, 8, 8, 32, 3, 2, 2, 2);
    let (oh, ow) = (4, 4);
    let (data, kernel) = (&tensors[0], &tensors[1]);
    let mut expected = vec![0.0; n * oh * ow * f];
    for (b, y, x, o) in
        (0..n * oh * ow * f).map(|e| (e / (oh * ow * f), e / (ow * f) % oh, e / f % ow, e % f))
    {
        let mut sum = 0.0;
        for (kh, kw, ci) in (0..k * k * c).map(|q| (q / (k * c), q / c % k, q % c)) {
            let (iy, ix) = (int(y * s + kh * d) - p, int(x * s + kw * d) - p);
            if let (Ok(iy), Ok(ix)) = (usize::try_from(iy), usize::try_from(ix))
                && iy < h
                && ix < w
            {
                let pixel = ((b * h + iy) * w + ix) * c + ci;
                sum += data.values[pixel] * kernel.values[((kh * k + kw) * c + ci) * f + o];
            }
        }
        expected[((b * oh + y) * ow + x) * f + o] = sum;
    }
    assert_matches("out", &tensors[2], expected);
    assert_eq!(cuda.len(), 1);
    // The im2col tile is a gather the pipeline issues ahead: `cp.async` where the pixel is inside
    // the image, zeros stored where it lies in the padding.
    let gather = cuda[0]
        .split("// T.Parallel gather (pipelined: cp.async into its stage)")
        .nth(1)
        .expect("the im2col tile is pipelined");
    let issue = &gather[..gather.find("// T.copy").unwrap_or(gather.len())];
    assert!(
        issue.contains("tl_cp_async<16>(data_shared") && issue.contains("} else {"),
        "{issue}"
    );
}

const COORDINATES: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def unflatten(M=4, N=6, L=8):
    assert T.index_to_coordinates(23, (M, N)) == [3, 5]
    @T.prim_func
    def main(A: T.Tensor((M * N * L,), T.float32), B: T.Tensor((L, M, N), T.float32)):
        with T.Kernel(1, threads=64) as bx:
            for index in T.Parallel(M * N * L):
                l, m, n = T.index_to_coordinates(index, (L, M, N))
                B[l, m, n] = A[index] + m * 10 + n

    return main


unflatten()
"#;

#[test]
fn index_to_coordinates_unflattens_a_row_major_index() {
    let (tensors, _) = run(COORDINATES);
    let (m, n) = (4, 6);
    let expected = tensors[0]
        .values
        .iter()
        .enumerate()
        .map(|(e, &x)| x + (e / n % m * 10 + e % n) as f64)
        .collect();
    assert_matches("B", &tensors[1], expected);
}

const DTYPE_META: &str = r#"
import tilelang
import tilelang.language as T
from tilelang import DataType


@tilelang.jit(out_idx=[1])
def packed_copy(N=64, storage_dtype=T.int8, source_format="uint"):
    # TileLang's dtypes are strings with TVM's DataType fields; "uint" alone is uint32, as in TVM.
    storage_nbit = int("".join(c for c in storage_dtype if c.isdigit()))
    assert storage_nbit == 8 and DataType(T.float16).bits == 16
    assert T.dtype(source_format) == T.uint32
    @T.prim_func
    def main(A: T.Tensor((N,), storage_dtype), B: T.Tensor((N,), T.dtype(source_format))):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(N):
                B[i] = A[i] * storage_nbit

    return main


packed_copy()
"#;

#[test]
fn dtypes_iterate_as_their_names_and_tell_their_bits() {
    let (tensors, _) = run(DTYPE_META);
    assert_eq!(tensors[1].dtype, tilec_ir::DType::UInt32);
    // int8 times 8 in int8 wraps before the store converts it to uint32 (as C and TVM do).
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_possible_wrap
    )]
    let expected = tensors[0]
        .values
        .iter()
        .map(|&x| f64::from((x as i8).wrapping_mul(8) as u32))
        .collect::<Vec<f64>>();
    assert_eq!(tensors[1].values, expected);
}

const TORCH_ARITHMETIC: &str = r#"
import torch
import tilelang
import tilelang.language as T

A = torch.rand(64, 32, device="cuda", dtype=torch.float16) * 2 - 1
M, K = A.shape


@tilelang.jit(out_idx=[1])
def scaled(block=M // 4):
    @T.prim_func
    def main(X: T.Tensor((M, K), T.float16), Y: T.Tensor((M, K), T.float16)):
        with T.Kernel(M // block, threads=128) as bx:
            for i, j in T.Parallel(block, K):
                Y[bx * block + i, j] = X[bx * block + i, j] * 2.0

    return main


scaled()
"#;

#[test]
fn arithmetic_on_a_torch_tensor_keeps_its_shape_for_the_script() {
    let (tensors, _) = run(TORCH_ARITHMETIC);
    assert_eq!(tensors[1].shape, [64, 32]);
    let doubled = tensors[0].values.iter().map(|&x| x * 2.0).collect();
    assert_matches("Y", &tensors[1], doubled);
}

/// TVM's IR namespace as TileLang's dequantization examples reach for it (`from tvm import
/// tirx`): typed constants, `Select`, `Cast`, `reinterpret` and `Min` in a helper whose
/// annotations name `tirx.PrimExpr`, and `.astype` on a loop index. Each 4-bit value (sign, two
/// exponent bits, one mantissa bit: fp4 e2m1) is rebuilt as a float16's bits, as
/// `example_dequant_gemm_fp4_hopper.py` does.
const TIRX_UNPACK: &str = include_str!("../../fixtures/kernels/tirx_unpack.py");

/// fp4 e2m1's value of a 4-bit code, from the format's table.
fn e2m1(code: u8) -> f64 {
    let magnitude = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0][usize::from(code & 7)];
    if code & 8 != 0 { -magnitude } else { magnitude }
}

#[test]
fn tvm_ir_constants_and_constructors_unpack_fp4_values() {
    let (tensors, cuda) = run(TIRX_UNPACK);
    let expected = (0..256)
        .map(|j| {
            // The input holds uint8 values, whole numbers that `as u8` keeps.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let byte = tensors[0].values[j / 2] as u8;
            e2m1((byte >> (j % 2 * 4)) & 15)
        })
        .collect();
    assert_matches("Out", &tensors[1], expected);
    assert!(
        cuda[0].contains("? "),
        "Select is a conditional:\n{}",
        cuda[0]
    );
}

/// TVM's function spellings of the bitwise operators (`T.shift_left` in
/// `example_dequant_gemm_bf16_mxfp4_hopper.py`), on int32 values.
const BITWISE_FUNCTIONS: &str = include_str!("../../fixtures/kernels/bitwise_functions.py");

#[test]
fn bitwise_functions_are_the_operators() {
    let (tensors, _) = run(BITWISE_FUNCTIONS);
    let expected = tensors[0]
        .values
        .iter()
        .map(|&value| {
            // The input holds int32 values, whole numbers that `as i32` keeps.
            #[allow(clippy::cast_possible_truncation)]
            let x = value as i32;
            let mixed = (x << 3) ^ !x;
            f64::from((mixed & 0xFF0) | ((x >> 2) & 15))
        })
        .collect();
    assert_matches("Out", &tensors[1], expected);
}

/// Stream compaction as DeepSeek-V3.2's top-k selector (`deepseek_v32/topk_selector.py`) writes
/// it: each thread whose value passes a threshold claims a slot with `T.atomic_add(...,
/// return_prev=True)` on a shared counter, which returns the count before its addition, and
/// marks that slot. A histogram counts by atomic additions on elements chosen per thread,
/// under a condition on the thread's own value.
const COMPACTION: &str = include_str!("../../fixtures/kernels/compaction.py");

#[test]
fn an_atomic_add_returning_the_old_count_gives_each_thread_its_own_slot() {
    let (tensors, cuda) = run(COMPACTION);
    let a = &tensors[0].values;
    let kept: Vec<f64> = a.iter().copied().filter(|&x| f32_of(x) > 0.5).collect();
    let count = kept.len();
    assert_eq!(tensors[2].values, vec![count as f64]);
    // Each passing thread marked the slot it claimed: distinct slots fill 0..count exactly.
    let marked: Vec<f64> = (0..512).map(|i| f64::from(u8::from(i < count))).collect();
    assert_eq!(
        tensors[1].values, marked,
        "every kept value has its own slot"
    );
    let mut bins = vec![0.0; 4];
    for &x in &kept {
        // The kernel's bin: the float32 value times 4, truncated, modulo 4 (the values are
        // positive, so the bin is in 0..4).
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let bin = ((f32_of(x) * 4.0) as i64 % 4) as usize;
        bins[bin] += 1.0;
    }
    assert_eq!(tensors[3].values, bins);
    assert!(cuda[0].contains("= atomicAdd(&"), "{}", cuda[0]);
}

/// Names of the language's submodules imported by their full path, as TileLang's fp8 examples
/// do: the platform's fp8 dtype and the warp policy enum.
const SUBMODULE_IMPORTS: &str = include_str!("../../fixtures/kernels/fp8_submodules.py");

#[test]
fn language_submodules_give_the_platform_fp8_dtype_and_the_warp_policy() {
    let world = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/fp8.py", SUBMODULE_IMPORTS);
        let errors: Vec<String> = file_diagnostics(&db, file)
            .iter()
            .map(|d| d.message.clone())
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
        tilec_db::kernel_world(&db, instances(&db, file)[0]).pretty()
    });
    assert!(world.contains("param A: float8_e5m2[64, 64]"), "{world}");
    assert!(world.contains("policy=FullRow"), "{world}");
}

/// A shared layout written with XOR, as swizzles are (`T.Layout` with a lambda mixing the row into
/// the 16-byte chunk): exact index arithmetic, so the layout is a permutation tilec checks and
/// stores by, and the data it holds comes back unchanged.
const XOR_LAYOUT: &str = include_str!("../../fixtures/kernels/xor_layout.py");

#[test]
fn a_layout_written_with_xor_is_the_swizzle_it_says() {
    let offsets = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/xor.py", XOR_LAYOUT);
        let instance = instances(&db, file)[0];
        let world = tilec_db::kernel_world(&db, instance);
        let layouts = tilec_db::layouts(&db, instance);
        let (_, shared) = layouts
            .shared
            .iter()
            .find(|(buffer, _)| world.name(**buffer) == "S")
            .expect("S has a storage layout");
        let mut out = Vec::new();
        let points = [[0, 0], [1, 0], [1, 9], [7, 63], [9, 17], [63, 40]];
        points
            .iter()
            .map(|point| {
                shared.map.eval_into(&layouts.exprs, point, &mut out);
                out[0]
            })
            .collect::<Vec<i64>>()
    });
    let expected: Vec<i64> = [[0i64, 0], [1, 0], [1, 9], [7, 63], [9, 17], [63, 40]]
        .iter()
        .map(|&[i, j]| i * 64 + (((j >> 3) ^ (i & 7)) * 8) + j % 8)
        .collect();
    assert_eq!(offsets, expected);
    let (tensors, _) = run(XOR_LAYOUT);
    assert_eq!(tensors[1].values, tensors[0].values);
}

/// `make_mma_swizzle_layout` from TileLang's intrinsics package on a tile whose rows are two
/// 128-byte groups: each group becomes a plane of its own, and within it the 16-byte chunk is
/// XOR-ed with the row modulo 8.
const MMA_SWIZZLE: &str = include_str!("../../fixtures/kernels/mma_swizzle.py");

#[test]
fn the_mma_swizzle_puts_each_128_byte_group_in_a_plane_and_xors_its_chunks() {
    let points: Vec<[i64; 2]> = (0..32)
        .flat_map(|i| (0..128).step_by(7).map(move |j| [i, j]))
        .collect();
    let offsets = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/mma_swizzle.py", MMA_SWIZZLE);
        let instance = instances(&db, file)[0];
        let world = tilec_db::kernel_world(&db, instance);
        let layouts = tilec_db::layouts(&db, instance);
        let (_, shared) = layouts
            .shared
            .iter()
            .find(|(buffer, _)| world.name(**buffer) == "S")
            .expect("S has a storage layout");
        let mut out = Vec::new();
        points
            .iter()
            .map(|point| {
                shared.map.eval_into(&layouts.exprs, point, &mut out);
                out[0]
            })
            .collect::<Vec<i64>>()
    });
    // Eight halfs per 16-byte chunk, eight chunks per 128-byte group, two groups per row.
    let expected: Vec<i64> = points
        .iter()
        .map(|&[i, j]| {
            let (group, chunk) = (j / 64, (j / 8) % 8);
            group * 32 * 64 + i * 64 + ((chunk ^ (i % 8)) * 8 + j % 8)
        })
        .collect();
    assert_eq!(offsets, expected);
    let (tensors, _) = run(MMA_SWIZZLE);
    assert_eq!(tensors[1].values, tensors[0].values);
}
