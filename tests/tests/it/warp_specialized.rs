//! Hand-written warp specialization, end to end: warpgroup roles (`with T.ws(i)`, `if tx >= 128`),
//! the user's mbarriers (`T.alloc_barrier`, `T.barrier_arrive`, `T.barrier_wait`,
//! `T.mbarrier_*`), TMA copies that complete on them (`T.tma_copy(..., barrier=b)`) and
//! `T.fence_proxy_async`. Kernels written here and TileLang's `warp_specialize` examples are laid
//! out for the threads that run each part, lowered, printed as CUDA and run in the emulator
//! against a plain matrix product computed here; broken protocols are reported by the emulator.

use tilec_db::{RootDatabase, file_diagnostics, instances, layouts, thread_programs};
use tilec_ir::{Severity, Target, ThreadProgram};
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::{HostTensor, run_program};
use tilec_tests::{assert_matches, instance_with, on_analysis_stack, source_file};

/// A 128 × 128 × 256 gemm in two roles: warpgroup 0 loads each K tile by TMA onto
/// `data_is_ready`, warpgroup 1 waits for it, multiplies and releases the tiles on
/// `compute_is_done`. `CONSUMER_PARITY` is the parity the consumer waits for.
const PRODUCER_CONSUMER: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def matmul(M=128, N=128, K=256, block_M=128, block_N=128, block_K=64):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float16")
            B_shared = T.alloc_shared((block_K, block_N), "float16")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            data_is_ready = T.alloc_barrier(arrive_count=128)
            compute_is_done = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                T.clear(C_local)
            for ko in T.serial(T.ceildiv(K, block_K)):
                with T.ws(0):
                    T.barrier_wait(compute_is_done, (ko + 1) % 2)
                    T.tma_copy(A[by * block_M, ko * block_K], A_shared, barrier=data_is_ready)
                    T.tma_copy(B[ko * block_K, bx * block_N], B_shared, barrier=data_is_ready)
                    T.barrier_arrive(data_is_ready)
                with T.ws(1):
                    T.barrier_wait(data_is_ready, CONSUMER_PARITY)
                    T.gemm(A_shared, B_shared, C_local)
                    T.barrier_arrive(compute_is_done)
            with T.ws(1):
                T.copy(C_local, C[by * block_M, bx * block_N])

    return main


matmul()
"#;

fn producer_consumer(parity: &str) -> String {
    PRODUCER_CONSUMER.replace("CONSUMER_PARITY", parity)
}

/// Lowers the first instance of `source`, which must check without errors.
fn lower(source: &str) -> ThreadProgram {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/warp_specialized.py", source);
        let errors: Vec<String> = file_diagnostics(&db, file)
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| d.message.clone())
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
        let instance = instances(&db, file)[0];
        let _ = layouts(&db, instance);
        match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs[0].clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        }
    })
}

/// `C = A × B` of the first two tensors, rounded through fp32 accumulation as the kernel does.
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

fn run_and_compare(program: &ThreadProgram, seed: u64) {
    let mut tensors = make_tensors(program, &[], seed, false).expect("shapes evaluate");
    run_program(program, &mut tensors, &[]).expect("the emulator runs the protocol");
    let expected = matmul_reference(&tensors);
    assert_matches("C", &tensors[2], expected);
}

#[test]
fn a_producer_and_a_consumer_warpgroup_multiply_through_their_own_mbarriers() {
    let program = lower(&producer_consumer("ko % 2"));
    run_and_compare(&program, 3);
}

#[test]
fn each_role_is_laid_out_and_lowered_for_its_own_warpgroup() {
    let source = producer_consumer("ko % 2");
    let (threads, origin) = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/warp_specialized.py", source.clone());
        let instance = instances(&db, file)[0];
        let layouts = layouts(&db, instance);
        let (_, inferred) = layouts.buffers.iter().next().expect("C_local is laid out");
        let holders = inferred.layout.thread_histogram(&layouts.exprs);
        (holders.len(), format!("{:?}", inferred.origin))
    });
    // The accumulator is spread over the 128 threads of warpgroup 1, numbered from 0, as
    // TileLang lays it out for `T.ws(1)` (not over the block's 256).
    assert_eq!((threads, origin.as_str()), (128, "Gemm"));
    let cuda = tilec_passes::cuda::emit_cuda(&lower(&source), &Target::Sm90);
    for expected in [
        "tl_mbarrier_init(data_is_ready + 0, 128);",
        "if ((tx / 128) == 1) {",
        "const int tx_128 = tx - 128;",
        "tl_mbarrier_wait(compute_is_done + 0, (ko + 1) % 2);",
        "tl_mbarrier_expect_tx(data_is_ready + 0, 16384);",
        "tl_mbarrier_arrive(compute_is_done + 0);",
    ] {
        assert!(cuda.contains(expected), "missing `{expected}` in:\n{cuda}");
    }
    // The role runs wgmma on its own warpgroup, never a block barrier the other role would miss.
    let inside_roles = cuda.split("for (int ko").nth(1).expect("the K loop");
    assert!(
        inside_roles.contains("tl_wgmma_m64n128k16"),
        "{inside_roles}"
    );
    assert!(!inside_roles.contains("__syncthreads"), "{inside_roles}");
}

#[test]
fn a_consumer_that_does_not_wait_reads_a_tile_still_in_flight() {
    let source = producer_consumer("ko % 2").replace(
        "                    T.barrier_wait(data_is_ready, ko % 2)\n",
        "",
    );
    let program = lower(&source);
    let mut tensors = make_tensors(&program, &[], 3, false).expect("shapes evaluate");
    let error = run_program(&program, &mut tensors, &[]).expect_err("the protocol is broken");
    let message = error.to_string();
    assert!(
        message.contains("accessed while a TMA copy to it is in flight"),
        "{message}"
    );
}

#[test]
fn a_consumer_that_waits_for_the_wrong_parity_deadlocks_and_the_wait_is_named() {
    // Parity 1 of a fresh barrier passes at once, but once the producer's first phase has
    // completed it is the phase after it, which only the consumer's own progress could complete:
    // on the GPU the block hangs.
    let program = lower(&producer_consumer("(ko + 1) % 2"));
    let mut tensors = make_tensors(&program, &[], 3, false).expect("shapes evaluate");
    let error = run_program(&program, &mut tensors, &[]).expect_err("the protocol is broken");
    let message = error.to_string();
    assert!(
        message.contains("deadlock: the second branch waits for parity 1 of `data_is_ready[0]`"),
        "{message}"
    );
}

#[test]
fn a_consumer_waiting_for_a_phase_nobody_completes_is_a_deadlock_naming_the_wait() {
    let source = producer_consumer("ko % 2")
        .replace("                    T.barrier_arrive(data_is_ready)\n", "");
    let program = lower(&source);
    let mut tensors = make_tensors(&program, &[], 3, false).expect("shapes evaluate");
    let error = run_program(&program, &mut tensors, &[]).expect_err("nobody arrives");
    let message = error.to_string();
    assert!(
        message.contains("deadlock") && message.contains("data_is_ready[0]"),
        "{message}"
    );
}

#[test]
fn barrier_operations_take_barriers_and_integers() {
    let source = producer_consumer("ko % 2").replace(
        "T.barrier_arrive(data_is_ready)",
        "T.barrier_arrive(A_shared)",
    );
    let errors: Vec<String> = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/warp_specialized.py", source);
        file_diagnostics(&db, file)
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| d.message.clone())
            .collect()
    });
    assert_eq!(
        errors,
        [
            "`mbarrier` must be a barrier from `T.alloc_barrier` (or one element of it), found a buffer"
        ]
    );
}

/// TileLang's `warp_specialize` examples at 256³: the producer/consumer pairs with TMA and
/// mbarriers (either warpgroup producing), the one that pipelines nothing, the one whose gemm
/// takes a stage of 3-D shared buffers, and two warpgroups that
/// each copy and multiply their own half of the tile with no mbarrier at all (their shared
/// copies are ordered by named barriers of their own warpgroup).
#[test]
fn the_real_world_warp_specialized_gemms_run_and_multiply() {
    let Some(dir) = tilec_tests::realworld_dir() else {
        return;
    };
    for (file, kernel) in [
        (
            "example_warp_specialize_gemm_copy_0_gemm_1.py",
            "matmul_warp_specialize_copy_0_gemm_1",
        ),
        (
            "example_warp_specialize_gemm_copy_1_gemm_0.py",
            "matmul_warp_specialize_copy_1_gemm_0",
        ),
        ("example_warp_specialize_gemm_softpipe_stage2.py", "matmul"),
        // Multiplies `A_shared[ko % num_stages, :, :]`: a stage of a 3-D buffer picked at run time.
        (
            "example_warp_specialize_gemm_barrierpipe_stage2.py",
            "matmul",
        ),
        (
            "example_warp_specialize_gemm_copy_gemm_0_1.py",
            "matmul_warp_specialize_copy_gemm_0_1",
        ),
    ] {
        let path = dir.join("warp_specialize").join(file);
        let text = std::fs::read_to_string(&path).expect("the real-world file is readable");
        let program = on_analysis_stack(|| {
            let db = RootDatabase::default();
            let source = source_file(&db, &path, text);
            let size = tilec_ir::ConstValue::Int(256);
            let overrides = [("M", size.clone()), ("N", size.clone()), ("K", size)];
            let instance = instance_with(&db, source, kernel, &overrides);
            match thread_programs(&db, instance).as_ref() {
                Ok(programs) => programs[0].clone(),
                Err(diagnostics) => panic!("{file}: cannot lower: {diagnostics:#?}"),
            }
        });
        run_and_compare(&program, 5);
        if file.contains("copy_gemm_0_1") {
            let cuda = tilec_passes::cuda::emit_cuda(&program, &Target::Sm90);
            assert!(cuda.contains("tl_named_barrier(4, 128);"), "{cuda}");
        }
    }
}

/// Warpgroup 1 copies a 64 × 64 tile into shared memory thread by thread (`T.ptx_cp_async` of
/// `T.access_ptr`s, 8 elements each) and arrives on `ready` with `T.cp_async_barrier_noinc`;
/// warpgroup 0 waits and writes the tile out doubled.
const ELEMENT_COPIES: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def staged():
    @T.prim_func
    def main(X: T.Tensor((64, 64), "float16"), Y: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=256) as bx:
            tile = T.alloc_shared((64, 64), "float16")
            ready = T.alloc_barrier(arrive_count=[128])
            tx = T.get_thread_binding()
            with T.ws(1):
                for r in T.serial(4):
                    row = r * 16 + (tx - 128) // 8
                    T.ptx_cp_async(
                        T.access_ptr(tile[row, (tx - 128) % 8 * 8], "w", 8),
                        T.access_ptr(X[row, (tx - 128) % 8 * 8], "r", 8),
                        8,
                    )
                T.ptx_commit_group()
                T.ptx_wait_group(0)
                T.cp_async_barrier_noinc(ready[0])
            with T.ws(0):
                T.barrier_wait(ready[0], 0)
                for i, j in T.Parallel(64, 64):
                    Y[i, j] = tile[i, j] * 2

    return main


staged()
"#;

#[test]
fn threads_copy_elements_by_access_pointer_and_arrive_when_their_copies_land() {
    let program = lower(ELEMENT_COPIES);
    let mut tensors = make_tensors(&program, &[], 9, false).expect("shapes evaluate");
    run_program(&program, &mut tensors, &[]).expect("the emulator runs the protocol");
    let doubled = tensors[0].values.iter().map(|x| x * 2.0).collect();
    assert_matches("Y", &tensors[1], doubled);
}

#[test]
fn an_element_copy_without_its_arrival_is_a_deadlock() {
    let source = ELEMENT_COPIES.replace("                T.cp_async_barrier_noinc(ready[0])\n", "");
    let program = lower(&source);
    let mut tensors = make_tensors(&program, &[], 9, false).expect("shapes evaluate");
    let error = run_program(&program, &mut tensors, &[]).expect_err("nobody arrives");
    assert!(error.to_string().contains("deadlock"), "{error}");
}

/// `clear_accum=` known only when the kernel runs (the index of an unrolled loop, as
/// FlashMLA's `clear_accum=(j == 0)`): the first K tile starts the sum, the second adds to it.
#[test]
fn a_run_time_clear_accum_clears_only_where_it_holds() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def matmul():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((64, 32), "float16")
            B_shared = T.alloc_shared((32, 64), "float16")
            C_local = T.alloc_fragment((64, 64), "float32")
            for k in T.unroll(2):
                T.copy(A[0, k * 32], A_shared)
                T.copy(B[k * 32, 0], B_shared)
                T.gemm(A_shared, B_shared, C_local, clear_accum=(k == 0))
            T.copy(C_local, C[0, 0])

    return main


matmul()
"#;
    let program = lower(source);
    run_and_compare(&program, 13);
}

/// FlashMLA's shape of warp specialization: each role runs its own whole loop — the producer
/// warpgroup (`T.ws(1)`) loads every K tile, the consumer (`T.ws(0)`) multiplies every tile — and
/// they meet only at the `full` and `empty` mbarriers. On the GPU the two loops run side by side;
/// the emulator runs the roles' branches as concurrent tasks, so the consumer's first wait does
/// not deadlock waiting for a producer that has not run yet.
const SEPARATE_LOOPS: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def matmul(M=128, N=128, K=256, block_M=128, block_N=128, block_K=64):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float16")
            B_shared = T.alloc_shared((block_K, block_N), "float16")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            full = T.alloc_barrier(arrive_count=128)
            empty = T.alloc_barrier(arrive_count=128)
            with T.ws(0):
                T.clear(C_local)
                for ko in T.serial(T.ceildiv(K, block_K)):
                    T.barrier_wait(full, ko % 2)
                    T.gemm(A_shared, B_shared, C_local)
                    T.barrier_arrive(empty)
                T.copy(C_local, C[by * block_M, bx * block_N])
            with T.ws(1):
                for ko in T.serial(T.ceildiv(K, block_K)):
                    T.barrier_wait(empty, (ko + 1) % 2)
                    T.tma_copy(A[by * block_M, ko * block_K], A_shared, barrier=full)
                    T.tma_copy(B[ko * block_K, bx * block_N], B_shared, barrier=full)
                    T.barrier_arrive(full)

    return main


matmul()
"#;

#[test]
fn roles_that_each_run_a_whole_loop_meet_only_at_their_mbarriers() {
    let program = lower(SEPARATE_LOOPS);
    run_and_compare(&program, 17);
    // The two roles are one `if` / `else if` chain in the CUDA, which is what the GPU runs.
    let cuda = tilec_passes::cuda::emit_cuda(&program, &Target::Sm90);
    assert!(
        cuda.contains("} else {\n        if ((tx / 128) == 1) {"),
        "{cuda}"
    );
}

#[test]
fn a_producer_that_refills_before_the_consumer_releases_the_tile_is_reported() {
    // Without the wait on `empty`, the producer's next copy overwrites the tile the consumer is
    // still to multiply.
    let source = SEPARATE_LOOPS.replace(
        "                    T.barrier_wait(empty, (ko + 1) % 2)\n",
        "",
    );
    let program = lower(&source);
    let mut tensors = make_tensors(&program, &[], 17, false).expect("shapes evaluate");
    let error = run_program(&program, &mut tensors, &[]).expect_err("the protocol is broken");
    let message = error.to_string();
    assert!(
        message.contains("`A_shared[0]` accessed while a TMA copy to it is in flight"),
        "{message}"
    );
}

/// The project's `examples/warp_specialized_gemm.py`, at its own sizes (four blocks, eight K
/// tiles), against the plain product.
#[test]
fn the_warp_specialized_example_multiplies() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/warp_specialized_gemm.py");
    let text = std::fs::read_to_string(&path).expect("the example is readable");
    let program = lower(&text);
    run_and_compare(&program, 21);
}

/// DeepSeek's warp-specialized MLA decode (`deepseek_mla/example_mla_decode_ws.py`): two consumer
/// warpgroups and a producer warpgroup, each a branch of one `if` / `elif` chain with loops of its
/// own, meeting at five mbarrier arrays; the producer copies K/V by `T.ptx_cp_async` and the
/// consumers multiply staged slices of them. At one head group over 512 keys, against softmax
/// attention computed here from the same inputs.
#[test]
fn the_real_world_warp_specialized_mla_decode_attends() {
    let Some(dir) = tilec_tests::realworld_dir() else {
        return;
    };
    let path = dir.join("deepseek_mla/example_mla_decode_ws.py");
    let text = std::fs::read_to_string(&path).expect("the real-world file is readable");
    let program = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let source = source_file(&db, &path, text);
        let overrides = [
            ("batch", tilec_ir::ConstValue::Int(1)),
            ("heads", tilec_ir::ConstValue::Int(64)),
            ("seqlen_kv", tilec_ir::ConstValue::Int(512)),
        ];
        let instance = instance_with(&db, source, "flashattn", &overrides);
        match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs[0].clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        }
    });
    let mut tensors = make_tensors(&program, &[], 23, false).expect("shapes evaluate");
    run_program(&program, &mut tensors, &[]).expect("the emulator runs the three roles");
    let tensor = |name: &str| {
        let index = program
            .params
            .iter()
            .position(|param| param.name == name)
            .unwrap_or_else(|| panic!("no tensor {name}"));
        &tensors[index]
    };
    let (q, q_pe, kv, k_pe) = (tensor("Q"), tensor("Q_pe"), tensor("KV"), tensor("K_pe"));
    let (heads, dim, pe, keys) = (64, 512, 64, 512);
    let scale = 1.0 / ((dim + pe) as f64).sqrt();
    let mut expected = vec![0.0; heads * dim];
    for h in 0..heads {
        let scores: Vec<f64> = (0..keys)
            .map(|n| {
                let main: f64 = (0..dim)
                    .map(|d| q.values[h * dim + d] * kv.values[n * dim + d])
                    .sum();
                let rope: f64 = (0..pe)
                    .map(|d| q_pe.values[h * pe + d] * k_pe.values[n * pe + d])
                    .sum();
                (main + rope) * scale
            })
            .collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let total: f64 = weights.iter().sum();
        for d in 0..dim {
            expected[h * dim + d] = (0..keys)
                .map(|n| weights[n] * kv.values[n * dim + d])
                .sum::<f64>()
                / total;
        }
    }
    assert_matches("Output", tensor("Output"), expected);
}
