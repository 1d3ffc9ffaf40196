//! Warp shuffles, warp reductions, per-thread random numbers and the grid barrier, end to end —
//! checked, lowered, printed as CUDA and run in the emulator — against references computed here:
//! the lanes CUDA's `__shfl*_sync` read (from the CUDA programming guide's description, not from
//! tilec's lowering), the butterfly sum TileLang's `tl::warp_reduce` adds in, curand's
//! Philox4x32-10 stream (checked against Random123's published known answers), and TileLang's own
//! `rand_uint.py` and warp-shuffle Hadamard transform.

use tilec_db::{RootDatabase, file_diagnostics, instances, thread_programs};
use tilec_ir::{ConstValue, Severity, Target, ThreadProgram};
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::{HostTensor, run_program};
use tilec_tests::{assert_matches, index, instance_with, int, on_analysis_stack, source_file};

/// Checks `source` (no error allowed) and lowers its first instance.
fn lower(source: &str) -> ThreadProgram {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/warps.py", source);
        let errors: Vec<String> = file_diagnostics(&db, file)
            .iter()
            .filter(|d| d.severity == Severity::Error || d.severity.stops_analysis())
            .map(|d| d.message.clone())
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
        let instance = instances(&db, file)[0];
        match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs[0].clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        }
    })
}

/// Runs `program` on seeded inputs: the tensors after the run, or the emulator's error.
fn run_lowered(program: &ThreadProgram) -> Result<Vec<HostTensor>, String> {
    let mut tensors = make_tensors(program, &[], 7, false).expect("shapes evaluate");
    run_program(program, &mut tensors, &[]).map_err(|error| error.to_string())?;
    Ok(tensors)
}

fn run(source: &str) -> Vec<HostTensor> {
    run_lowered(&lower(source)).expect("the emulator runs it")
}

fn cuda(source: &str) -> String {
    tilec_passes::cuda::emit_cuda(&lower(source), &Target::Sm90)
}

/// The lane `__shfl*_sync` gives lane `lane` of a warp, as the CUDA programming guide describes
/// the four intrinsics: `__shfl_sync` reads lane `src % width` of the caller's group of `width`
/// lanes; `__shfl_up_sync` lane `lane - delta`, unless that is before the group (then the caller's
/// own value); `__shfl_down_sync` lane `lane + delta`, unless that is past the group;
/// `__shfl_xor_sync` lane `lane ^ mask`, unless that is in a later group.
fn cuda_source_lane(kind: &str, lane: i64, operand: i64, width: i64) -> i64 {
    let group = lane / width * width;
    match kind {
        "sync" => group + operand.rem_euclid(width),
        "up" if lane - operand >= group => lane - operand,
        "down" if lane + operand < group + width => lane + operand,
        "xor" if lane ^ operand < group + width => lane ^ operand,
        _ => lane,
    }
}

/// One shuffle of the test kernel: the intrinsic, the lane operand of thread `t`, the width.
type ShuffleRow = (&'static str, fn(i64) -> i64, i64);

const SHUFFLES: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[0, 1])
def shuffles():
    @T.prim_func
    def main(O: T.Tensor((11, 64), "float32"), I: T.Tensor((2, 64), "int32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            x = T.alloc_local((1,), "float32")
            x[0] = tx * 3 + 1
            O[0, tx] = T.shfl_sync(x[0], 5)
            O[1, tx] = T.shfl_sync(x[0], tx + 3, width=8)
            O[2, tx] = T.shfl_xor(x[0], 3)
            O[3, tx] = T.shfl_xor(x[0], 16, 16)
            O[4, tx] = T.shfl_down(x[0], 2)
            O[5, tx] = T.shfl_down(x[0], 3, width=8)
            O[6, tx] = T.shfl_up(x[0], 1)
            O[7, tx] = T.shfl_up(x[0], 4, 16)
            O[8, tx] = T.tvm_warp_shuffle(0xFFFFFFFF, x[0], (tx + 7) % 32, 32, 32)
            O[9, tx] = T.tvm_warp_shuffle_down(0xFFFFFFFF, x[0], 1, 16, 32)
            O[10, tx] = T.tvm_warp_shuffle_up(0xFFFFFFFF, x[0], 2, 32, 32)
            I[0, tx] = T.shfl_down(tx * 2, 1)
            I[1, tx] = T.shfl_sync(T.Cast("int32", tx), 31 - tx % 32)

    return main


shuffles()
"#;

/// Every spelling of the shuffles reads the lane CUDA's intrinsic reads, with and without a
/// segment width, for both warps of the block; integers shuffle as integers.
#[test]
fn shuffles_read_the_lanes_cudas_intrinsics_read() {
    let tensors = run(SHUFFLES);
    // (intrinsic, operand of lane `t`, width) per row of `O`.
    let rows: [ShuffleRow; 11] = [
        ("sync", |_| 5, 32),
        ("sync", |t| t + 3, 8),
        ("xor", |_| 3, 32),
        ("xor", |_| 16, 16),
        ("down", |_| 2, 32),
        ("down", |_| 3, 8),
        ("up", |_| 1, 32),
        ("up", |_| 4, 16),
        ("sync", |t| (t + 7) % 32, 32),
        ("down", |_| 1, 16),
        ("up", |_| 2, 32),
    ];
    let mut expected = Vec::new();
    for (kind, operand, width) in rows {
        for t in 0..64i64 {
            let (warp, lane) = (t / 32 * 32, t % 32);
            let source = warp + cuda_source_lane(kind, lane, operand(t), width);
            expected.push((source * 3 + 1) as f64);
        }
    }
    assert_matches("O", &tensors[0], expected);
    let mut ints = Vec::new();
    for t in 0..64i64 {
        let (warp, lane) = (t / 32 * 32, t % 32);
        ints.push(((warp + cuda_source_lane("down", lane, 1, 32)) * 2) as f64);
    }
    for t in 0..64i64 {
        ints.push((t / 32 * 32 + 31 - t % 32) as f64);
    }
    assert_matches("I", &tensors[1], ints);
    let text = cuda(SHUFFLES);
    for call in [
        "__shfl_sync(4294967295u, ",
        "__shfl_xor_sync(4294967295u, ",
        "__shfl_down_sync(4294967295u, ",
        "__shfl_up_sync(4294967295u, ",
    ] {
        assert!(text.contains(call), "{call} in\n{text}");
    }
}

const DIVERGENT: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[0])
def divergent(mask=0xFFFFFFFF):
    @T.prim_func
    def main(O: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            tx = T.get_thread_binding()
            O[tx] = 0.0
            if tx < 16:
                O[tx] = T.shfl_xor(T.Cast("float32", tx), 1, mask=mask)

    return main


divergent()
"#;

/// A shuffle under an `if` that only half the warp takes, with the full mask, names lanes that
/// never arrive: undefined on the GPU, an error of the emulator naming the first missing thread.
/// With the mask of the lanes that do take the branch it is correct.
#[test]
fn a_shuffle_whose_mask_names_lanes_that_do_not_arrive_is_reported() {
    let error = run_lowered(&lower(DIVERGENT)).expect_err("the divergent shuffle is reported");
    assert!(
        error.contains(
            "__shfl_xor_sync with mask 0xffffffff in divergent code: thread 16 is in the mask but \
             does not execute the shuffle"
        ),
        "{error}"
    );
    let partial = DIVERGENT.replace("divergent()", "divergent(0xFFFF)");
    let tensors = run(&partial);
    let expected = (0..32)
        .map(|t: i64| if t < 16 { (t ^ 1) as f64 } else { 0.0 })
        .collect();
    assert_matches("O", &tensors[0], expected);
}

const REDUCTIONS: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[0, 1])
def reductions():
    @T.prim_func
    def main(F: T.Tensor((3, 64), "float32"), I: T.Tensor((3, 64), "int32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            x = T.alloc_local((1,), "float32")
            x[0] = T.Cast("float32", (tx * 37) % 23) * 0.1 - 1.0
            F[0, tx] = T.warp_reduce_sum(x[0])
            F[1, tx] = T.warp_reduce_max(x[0])
            F[2, tx] = T.warp_reduce_min(x[0])
            I[0, tx] = T.warp_reduce_bitand(T.Cast("int32", tx * 5 + 3))
            I[1, tx] = T.warp_reduce_bitor(T.Cast("int32", 1 << (tx % 32 % 20)))
            I[2, tx] = T.warp_reduce_sum(T.Cast("int32", tx))

    return main


reductions()
"#;

/// The warp reductions give every lane the reduction over its warp; a float sum adds in the
/// butterfly order of TileLang's `tl::warp_reduce` (offsets 16, 8, 4, 2, 1), in single precision.
#[test]
fn warp_reductions_combine_the_32_lanes_of_each_warp() {
    let tensors = run(REDUCTIONS);
    let x = |t: i64| ((t * 37) % 23) as f32 * 0.1f32 - 1.0f32;
    let mut floats = [Vec::new(), Vec::new(), Vec::new()];
    let mut ints = [Vec::new(), Vec::new(), Vec::new()];
    for t in 0..64i64 {
        let warp = t / 32 * 32;
        let lanes = || warp..warp + 32;
        // The butterfly: at each offset every lane adds the value of the lane `offset` away.
        let mut values: Vec<f32> = lanes().map(x).collect();
        for offset in [16usize, 8, 4, 2, 1] {
            values = (0..32).map(|l| values[l] + values[l ^ offset]).collect();
        }
        floats[0].push(f64::from(values[index(t % 32)]));
        floats[1].push(f64::from(lanes().map(x).fold(f32::MIN, f32::max)));
        floats[2].push(f64::from(lanes().map(x).fold(f32::MAX, f32::min)));
        ints[0].push(lanes().map(|l| l * 5 + 3).fold(-1, |a, b| a & b) as f64);
        ints[1].push(lanes().map(|l| 1i64 << (l % 32 % 20)).fold(0, |a, b| a | b) as f64);
        ints[2].push(lanes().sum::<i64>() as f64);
    }
    assert_matches("F", &tensors[0], floats.concat());
    assert_matches("I", &tensors[1], ints.concat());
    let text = cuda(REDUCTIONS);
    assert!(text.contains("__shfl_xor_sync(0xffffffffu, "), "{text}");
}

/// Philox4x32-10, written here from the algorithm for the references (independently of the
/// emulator's), and checked against Random123's known answers before use.
// Splitting 64-bit products into their 32-bit halves truncates, on purpose.
#[allow(clippy::cast_possible_truncation)]
fn philox(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let mut k = key;
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(0x9E37_79B9);
            k[1] = k[1].wrapping_add(0xBB67_AE85);
        }
        let p0 = u64::from(c[0]) * 0xD251_1F53;
        let p1 = u64::from(c[2]) * 0xCD9E_8D57;
        c = [
            (p1 >> 32) as u32 ^ c[1] ^ k[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
    }
    c
}

/// The first `count` numbers curand's Philox stream gives after `curand_init(seed, subsequence,
/// offset)`: word `offset + n` of the stream is word `(offset + n) % 4` of the block at counter
/// `(offset + n) / 4 + subsequence · 2^64` (small offsets: no carry across the low 64 bits).
// Splitting 64-bit words into their 32-bit halves truncates, on purpose.
#[allow(clippy::cast_possible_truncation)]
fn curand_stream(seed: u64, subsequence: u64, offset: u64, count: u64) -> Vec<u32> {
    (offset..offset + count)
        .map(|position| {
            let block = position / 4;
            let counter = [
                block as u32,
                (block >> 32) as u32,
                subsequence as u32,
                (subsequence >> 32) as u32,
            ];
            philox(counter, [seed as u32, (seed >> 32) as u32])[(position % 4) as usize]
        })
        .collect()
}

#[test]
fn the_reference_philox_matches_random123s_known_answers() {
    assert_eq!(
        philox([0; 4], [0; 2]),
        [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
    );
    assert_eq!(
        philox(
            [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
            [0xa409_3822, 0x299f_31d0]
        ),
        [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
    );
}

/// TileLang's `rand/rand_uint.py`: one thread per block initialises Philox with seed 42,
/// subsequence 0 and offset `bx * 128`, and stores 128 draws. The emulator's numbers are
/// curand's, and so match `triton.randint4x`, which the example compares with.
#[test]
fn the_real_world_random_kernel_draws_curands_philox_stream() {
    let Some(dir) = tilec_tests::realworld_dir() else {
        return;
    };
    let path = dir.join("rand/rand_uint.py");
    let text = std::fs::read_to_string(&path).expect("the real-world file is readable");
    let program = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, &path, text);
        let found: Vec<String> = file_diagnostics(&db, file)
            .iter()
            .map(|d| d.message.clone())
            .collect();
        assert!(found.is_empty(), "{found:#?}");
        let overrides = [("M", ConstValue::Int(512)), ("seed", ConstValue::Int(123))];
        let instance = instance_with(&db, file, "tilelang_rand_1d", &overrides);
        match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs[0].clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        }
    });
    let tensors = run_lowered(&program).expect("the emulator runs it");
    let expected: Vec<f64> = (0..4)
        .flat_map(|bx| curand_stream(123, 0, bx * 128, 128))
        .map(f64::from)
        .collect();
    assert_eq!(tensors[0].values, expected);
}

const UNIFORM: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[0, 1])
def uniform(seed=7):
    @T.prim_func
    def main(U: T.Tensor((2, 64, 3), "float32"), B: T.Tensor((2, 64), "uint32")):
        with T.Kernel(2, threads=64) as bx:
            tx = T.get_thread_binding()
            T.rng_init(seed)
            B[bx, tx] = T.rng_rand()
            for k in T.serial(3):
                U[bx, tx, k] = T.rng_rand_float()

    return main


uniform()
"#;

/// Without `seq`, each thread takes subsequence `tx + bx * blockDim.x`, as TileLang's
/// `rng_init` does; `T.rng_rand_float()` is curand_uniform, a word scaled into (0, 1].
#[test]
fn each_thread_draws_from_its_own_subsequence() {
    let tensors = run(UNIFORM);
    let (mut uniforms, mut bits) = (Vec::new(), Vec::new());
    for bx in 0..2u64 {
        for tx in 0..64u64 {
            let words = curand_stream(7, tx + bx * 64, 0, 4);
            bits.push(f64::from(words[0]));
            for &word in &words[1..] {
                let scaled = word as f32 * 2f32.powi(-32) + 2f32.powi(-33);
                uniforms.push(f64::from(scaled));
            }
        }
    }
    assert_eq!(tensors[1].values, bits);
    assert_eq!(tensors[0].values, uniforms);
    let text = cuda(UNIFORM);
    assert!(text.contains("tl_philox rng_state;"), "{text}");
    assert!(
        text.contains("tl_rng_init(&rng_state, 7ull, (unsigned long long)(bx * 64 + tx), "),
        "{text}"
    );
    assert!(text.contains("tl_rng_uniform(&rng_state)"), "{text}");
}

/// A draw with no generator started is reported; the generators TileLang offers besides Philox
/// are not reproduced, which tilec says.
#[test]
fn draws_without_a_generator_and_other_generators_are_reported() {
    let unstarted = UNIFORM.replace("T.rng_init(seed)", "pass");
    let error = run_lowered(&lower(&unstarted)).expect_err("the draw is reported");
    assert!(
        error.contains(
            "T.rng_rand() in a thread whose random generator no `T.rng_init` has started"
        ),
        "{error}"
    );
    let other = UNIFORM.replace(
        "T.rng_init(seed)",
        "T.rng_init(seed, generator=\"curandStateXORWOW_t\")",
    );
    let found = on_analysis_stack(move || {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/warps.py", other);
        file_diagnostics(&db, file)
            .iter()
            .map(|d| d.message.clone())
            .collect::<Vec<_>>()
    });
    assert!(
        found.iter().any(|m| m
            .contains("the random generator `curandStateXORWOW_t` is not supported by tilec yet")),
        "{found:#?}"
    );
}

const GRID: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1, 2])
def grid(blocks=1):
    @T.prim_func
    def main(
        A: T.Tensor((blocks, 64), "float32"),
        W: T.Tensor((3, blocks, 64), "float32"),
        O: T.Tensor((blocks, 64), "float32"),
    ):
        with T.Kernel(blocks, threads=64) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), "float32")
            S[tx] = A[bx, tx]
            for r in T.serial(3):
                T.sync_threads()
                W[r, bx, tx] = S[63 - tx] + r
                T.sync_grid()
                S[tx] = W[r, (bx + 1) % blocks, tx]
            O[bx, tx] = S[tx]

    return main


grid()
"#;

/// The reference of [`GRID`]: each round a block publishes its shared row reversed, plus the
/// round, and takes the next block's row; after three rounds row `b` holds the rows of blocks
/// `b + 1`, `b + 2`, `b + 3` folded in.
fn grid_reference(a: &[f64], blocks: usize) -> (Vec<f64>, Vec<f64>) {
    let mut rows: Vec<Vec<f64>> = a.chunks(64).map(<[f64]>::to_vec).collect();
    let mut published = Vec::new();
    for r in 0..3 {
        let round: Vec<Vec<f64>> = rows
            .iter()
            .map(|row| (0..64).map(|t| row[63 - t] + r as f64).collect())
            .collect();
        rows = (0..blocks)
            .map(|b| round[(b + 1) % blocks].clone())
            .collect();
        published.extend(round.concat());
    }
    (published, rows.concat())
}

/// `T.sync_grid()` is a grid-wide barrier: the CUDA calls the prelude's barrier (and the runner
/// launches the kernel cooperatively); the emulator runs the blocks interleaved, each up to the
/// barrier, so every block reads what the others published before it — here in a loop, with a
/// shared tile that each block keeps across the barriers.
#[test]
fn blocks_meet_at_the_grid_barrier() {
    for blocks in [1usize, 5] {
        let program = lower(&GRID.replace("grid()", &format!("grid({blocks})")));
        assert!(tilec_ir::thread::uses_grid_sync(&program.body));
        let mut tensors = make_tensors(&program, &[], 3, false).expect("shapes evaluate");
        let a = tensors[0].values.clone();
        run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
        let (published, rows) = grid_reference(&a, blocks);
        assert_matches("W", &tensors[1], published);
        assert_matches("O", &tensors[2], rows);
    }
    let text = cuda(GRID);
    assert!(text.contains("tl_sync_grid();"), "{text}");
    assert!(
        text.contains("__device__ unsigned int tl_grid_barrier_word;"),
        "{text}"
    );
}

/// A block that ends before a grid barrier leaves the others waiting there forever on the GPU; a
/// barrier under a thread-dependent `if` is not reached by the whole block. Both are reported.
#[test]
fn grid_barriers_some_blocks_or_threads_skip_are_reported() {
    let early = GRID
        .replace(
            "            S = T.alloc_shared",
            "            if bx == 2:\n                T.thread_return()\n            S = T.alloc_shared",
        )
        .replace("grid()", "grid(4)");
    let error = run_lowered(&lower(&early)).expect_err("the missing block is reported");
    assert!(
        error.contains(
            "block [2, 0, 0] ended without reaching the grid barrier that block [0, 0, 0] waits at"
        ),
        "{error}"
    );
    let divergent = GRID
        .replace(
            "                T.sync_grid()",
            "                if tx < 32:\n                    T.sync_grid()",
        )
        .replace("grid()", "grid(2)");
    let error = run_lowered(&lower(&divergent)).expect_err("the partial barrier is reported");
    assert!(
        error.contains("barrier in divergent code: reached by 32 of the block's 64 threads"),
        "{error}"
    );
}

/// TileLang's warp-shuffle Hadamard transform (`hadamard_transform/example_hadamard.py`) for
/// transforms of 32 and 256 points (one warp, shuffles only): each output row is the input row
/// times the Sylvester Hadamard matrix. The shared-memory layout annotation, which needs
/// `tilelang.cuda.intrinsics`, is left out (it changes no value).
#[test]
fn the_real_world_hadamard_transform_shuffles_within_a_warp() {
    let Some(dir) = tilec_tests::realworld_dir() else {
        return;
    };
    let path = dir.join("hadamard_transform/example_hadamard.py");
    let text = std::fs::read_to_string(&path).expect("the real-world file is readable");
    let text: String = text
        .lines()
        .filter(|line| !line.contains("make_mma_swizzle_layout"))
        .map(|line| format!("{line}\n"))
        .collect();
    for n in [32i64, 256] {
        let text = text.clone();
        let program = on_analysis_stack(move || {
            let db = RootDatabase::default();
            let file = source_file(&db, "/kernels/hadamard.py", text);
            let overrides = [("n", ConstValue::Int(n)), ("b", ConstValue::Int(2))];
            let instance = instance_with(&db, file, "hadamard", &overrides);
            match thread_programs(&db, instance).as_ref() {
                Ok(programs) => programs[0].clone(),
                Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
            }
        });
        let mut tensors = make_tensors(&program, &[], 5, false).expect("shapes evaluate");
        let a = tensors[0].values.clone();
        run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
        let n = index(n);
        let sign = |i: usize, j: usize| {
            if (i & j).count_ones().is_multiple_of(2) {
                1.0
            } else {
                -1.0
            }
        };
        let expected: Vec<f64> = (0..2 * n)
            .map(|e| {
                let (row, col) = (e / n, e % n);
                (0..n).map(|k| a[row * n + k] * sign(k, col)).sum()
            })
            .collect();
        let actual = &tensors[1];
        for (e, (&got, &want)) in actual.values.iter().zip(&expected).enumerate() {
            assert!(
                (got - want).abs() <= 1e-3 * (1.0 + want.abs()),
                "n = {n}: B[{e}] = {got}, expected {want}"
            );
        }
    }
}

/// DeepSeek's persistent MLA decode (`deepseek_mla/example_mla_decode_persistent.py`): one block
/// per multiprocessor (132 on sm_90) computes split-KV partial attentions, `T.sync_grid()`, then
/// the blocks combine the splits. Run at a small size in the emulator, where most blocks have no
/// tile and only meet the others at the barrier, it gives attention as computed here in `f64`
/// (up to the fp16 rounding of the partial results the kernel stores).
#[test]
fn the_real_world_persistent_mla_decode_combines_splits_after_the_grid_barrier() {
    let Some(dir) = tilec_tests::realworld_dir() else {
        return;
    };
    let path = dir.join("deepseek_mla/example_mla_decode_persistent.py");
    let text = std::fs::read_to_string(&path).expect("the real-world file is readable");
    let (batch, heads, seqlen, dim, pe_dim) = (2usize, 64usize, 256usize, 64usize, 32usize);
    let program = on_analysis_stack(move || {
        let db = RootDatabase::default();
        let file = source_file(&db, &path, text);
        let overrides = [
            ("batch", ConstValue::Int(int(batch))),
            ("heads", ConstValue::Int(int(heads))),
            ("seqlen_kv", ConstValue::Int(int(seqlen))),
            ("dim", ConstValue::Int(int(dim))),
            ("pe_dim", ConstValue::Int(int(pe_dim))),
            ("block_N", ConstValue::Int(32)),
        ];
        let instance = instance_with(&db, file, "flashattn", &overrides);
        match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs[0].clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        }
    });
    assert!(tilec_ir::thread::uses_grid_sync(&program.body));
    let mut tensors = make_tensors(&program, &[], 9, false).expect("shapes evaluate");
    let report = run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
    assert_eq!(report.blocks, 132);
    let [q, q_pe, kv, k_pe] = [0, 1, 2, 3].map(|k| tensors[k].values.clone());
    let scale = 1.0 / ((dim + pe_dim) as f64).sqrt();
    let mut expected = Vec::new();
    for b in 0..batch {
        for h in 0..heads {
            let scores: Vec<f64> = (0..seqlen)
                .map(|j| {
                    let nope: f64 = (0..dim)
                        .map(|d| q[(b * heads + h) * dim + d] * kv[(b * seqlen + j) * dim + d])
                        .sum();
                    let rope: f64 = (0..pe_dim)
                        .map(|d| {
                            q_pe[(b * heads + h) * pe_dim + d] * k_pe[(b * seqlen + j) * pe_dim + d]
                        })
                        .sum();
                    (nope + rope) * scale
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            for d in 0..dim {
                let value: f64 = (0..seqlen)
                    .map(|j| weights[j] * kv[(b * seqlen + j) * dim + d])
                    .sum();
                expected.push(value / total);
            }
        }
    }
    let output = &tensors[6];
    assert_eq!(output.values.len(), expected.len());
    for (e, (&got, &want)) in output.values.iter().zip(&expected).enumerate() {
        assert!(
            (got - want).abs() <= 2e-2 + 2e-2 * want.abs(),
            "Output[{e}] = {got}, expected {want}"
        );
    }
}

/// A grid larger than the GPU holds at once can never pass its grid barrier: `tilec check`
/// reports it at the barrier, with the occupancy that limits it (32 blocks of 64 threads per
/// multiprocessor, 132 multiprocessors on sm_90's default H200); a grid that fits is clean.
#[test]
fn a_grid_too_large_for_its_barrier_is_an_error_at_the_barrier() {
    let described = |blocks: usize| {
        let source = GRID.replace("grid()", &format!("grid({blocks})"));
        on_analysis_stack(move || {
            let db = RootDatabase::default();
            let file = source_file(&db, "/kernels/grid.py", source);
            file_diagnostics(&db, file)
                .iter()
                .map(|d| tilec_tests::describe(&db, file, d))
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(
        described(100_000),
        [
            "21:17 error invalid-call [grid#0] `T.sync_grid` needs all 100000 blocks of the grid \
             resident at once, but H200 (sm_90) holds at most 4224: 32 per multiprocessor \
             (limited by the block limit) on 132 multiprocessors, so the barrier would never be \
             passed (help: launch at most one wave of blocks (`driver.get_num_sms()` times the \
             blocks one multiprocessor holds) and let each block walk several tiles)"
        ]
    );
    assert!(described(4224).is_empty(), "{:#?}", described(4224));
}

const STAGED: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def staged(M=128, N=64, K=64):
    @T.prim_func
    def main(
        A: T.Tensor((M, K), "float16"),
        B: T.Tensor((K, N), "float16"),
        C: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(N // 64, M // 64, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // 32, num_stages=2):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_l)
                T.sync_grid()
            T.copy(C_l, C[by * 64, bx * 64])

    return main


staged()
"#;

/// A pipelined loop that holds a grid barrier keeps its schedule: tilec's own pipelining of a
/// gemm loop (a producer warp role running ahead of the consumers) would reach the barrier with
/// one role only, and a persistent launch once per tile. The loop runs as written, every block
/// meeting the other each iteration, and multiplies.
#[test]
fn a_loop_with_a_grid_barrier_is_not_pipelined_by_tilec() {
    let program = lower(STAGED);
    let roles = tilec_ir::thread::any_stmt(&program.body, |s| {
        matches!(s, tilec_ir::thread::Stmt::WarpRoles { .. })
    });
    assert!(
        !roles && program.persistent.is_none(),
        "{:#?}",
        program.body
    );
    let mut tensors = make_tensors(&program, &[], 4, false).expect("shapes evaluate");
    let (a, b) = (tensors[0].values.clone(), tensors[1].values.clone());
    run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
    let expected = (0..128 * 64)
        .map(|e| {
            (0..64)
                .map(|k| a[e / 64 * 64 + k] * b[k * 64 + e % 64])
                .sum()
        })
        .collect();
    assert_matches("C", &tensors[2], expected);
}
