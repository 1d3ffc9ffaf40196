//! The thread and control operations of TileLang, run end to end — checked, laid out, lowered,
//! printed as CUDA and run in the emulator — against references computed here: the thread and
//! block indices (`T.get_thread_binding`, `T.get_block_binding`, `T.get_warp_idx`,
//! `T.get_lane_idx`, `T.thread_binding` as a frame and as a loop), `T.sync_threads`,
//! `T.sync_warp`, `T.vectorized`, the lower-case `T.parallel`, `T.Pipelined` with keywords,
//! `T.thread_return`, `T.device_assert`, `T.pdl_sync` and a `with` of several items (with IKET's
//! tracing ranges); the kernels are written here, and two of TileLang's examples run as well.

use tilec_db::{RootDatabase, file_diagnostics, instances, layouts, thread_programs};
use tilec_ir::{Severity, Target, ThreadProgram};
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::{HostTensor, run_program};
use tilec_tests::{assert_matches, f32_of, instance_with, on_analysis_stack, source_file};

/// The error messages of `source`.
fn errors(source: &str) -> Vec<String> {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/threads.py", source);
        file_diagnostics(&db, file)
            .iter()
            // What tilec cannot analyse yet (a partial thread binding) stops the kernel too.
            .filter(|d| d.severity.stops_analysis())
            .map(|d| d.message.clone())
            .collect()
    })
}

/// Checks `source` (no error allowed) and lowers its first instance.
fn lower(source: &str) -> ThreadProgram {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/threads.py", source);
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

const INDICES: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[0, 1])
def indices():
    @T.prim_func
    def main(O: T.Tensor((2, 3, 128), "float32"), P: T.Tensor((2, 128), "float32")):
        with T.Kernel(2, 3, threads=[32, 4]) as (bx, by):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            tz = T.get_thread_binding(2)
            b = T.get_block_binding()
            c = T.get_block_binding(1)
            flat = ty * 32 + tx
            O[b, c, flat] = tx + 100 * ty + 1000 * tz + 10000 * T.get_warp_idx() + 100000 * T.get_lane_idx()
            if c == 0:
                P[bx, flat] = (b + 1) * 1000 + T.get_warp_group_idx() + by

    return main


indices()
"#;

#[test]
fn thread_and_block_bindings_are_each_threads_own_indices() {
    let tensors = run(INDICES);
    let mut o = Vec::new();
    for _b in 0..2 {
        for _c in 0..3 {
            for flat in 0..128 {
                let (tx, ty) = (flat % 32, flat / 32);
                let (warp, lane) = (flat / 32, flat % 32);
                o.push((tx + 100 * ty + 10000 * warp + 100000 * lane) as f64);
            }
        }
    }
    assert_matches("O", &tensors[0], o);
    let p = (0..2 * 128)
        .map(|e| ((e / 128 + 1) * 1000) as f64)
        .collect();
    assert_matches("P", &tensors[1], p);
    // Every thread stores its own element: no single-writer guard on thread 0.
    let text = cuda(INDICES);
    assert!(!text.contains("if (tx == 0)"), "{text}");
    // A block of 32 × 4 threads is launched flat, the bindings computed from the flat index.
    assert!(text.contains("block (128, 1, 1)"), "{text}");
    assert!(text.contains("const int tx = threadIdx.x;"), "{text}");
    assert!(
        text.contains("(float)(tx / 32 * 10100 + tx % 32 * 100001)"),
        "{text}"
    );
}

const BINDING_AND_SYNC: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1, 2])
def reverse(N=64):
    @T.prim_func
    def main(
        A: T.Tensor((4, N * 4), "float32"),
        B: T.Tensor((4, N), "float32"),
        C: T.Tensor((4, N), "float32"),
    ):
        with T.Kernel(4, threads=N) as bx:
            tx = T.thread_binding(0, N, thread="threadIdx.x")
            S = T.alloc_shared((N,), "float32")
            L = T.alloc_local((4,), "float32")
            for v in T.vectorized(4):
                L[v] = A[bx, tx * 4 + v]
            S[tx] = L[0] + L[1] + L[2] + L[3]
            T.sync_threads()
            B[bx, tx] = S[N - 1 - tx]
            for t in T.thread_binding(N, thread="threadIdx.x"):
                for k in T.Pipelined(start=1, stop=3, num_stages=1):
                    C[bx, t] = S[t] * k

    return main


reverse()
"#;

#[test]
fn thread_binding_vectorized_loads_and_sync_threads_reverse_a_row() {
    let tensors = run(BINDING_AND_SYNC);
    let a = &tensors[0];
    // `L[0] + L[1] + L[2] + L[3]` in float32, left to right.
    let sum = |b: usize, t: usize| {
        f64::from((0..4).fold(0.0f32, |acc, v| acc + f32_of(a.values[b * 256 + t * 4 + v])))
    };
    let mut b_expected = Vec::new();
    let mut c_expected = Vec::new();
    for b in 0..4 {
        for t in 0..64 {
            b_expected.push(sum(b, 63 - t));
            // The last iteration of `k` in 1..3 stores last.
            c_expected.push(sum(b, t) * 2.0);
        }
    }
    assert_matches("B", &tensors[1], b_expected);
    assert_matches("C", &tensors[2], c_expected);
    let text = cuda(BINDING_AND_SYNC);
    // The user's barrier is the only one: the write of `S` and its reads are already separated.
    assert_eq!(text.matches("__syncthreads();").count(), 1, "{text}");
    assert!(text.contains("#pragma unroll"), "{text}");
}

const NESTED_PARALLEL: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def nested(M=16, N=32):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((M, N), "float32")
            T.copy(A, F)
            for i in T.parallel(M):
                for j in T.parallel(N):
                    F[i, j] = F[i, j] * 2.0 + i
            T.copy(F, B)

    return main


nested()
"#;

#[test]
fn nested_lower_case_parallel_loops_are_one_parallel_nest() {
    let tensors = run(NESTED_PARALLEL);
    let expected = (0..16 * 32)
        .map(|e| tensors[0].values[e] * 2.0 + (e / 32) as f64)
        .collect();
    assert_matches("B", &tensors[1], expected);
    // One nest of 16×32 laid out over the threads, not a loop of 16 with a serial inner loop.
    let layout = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/nested.py", NESTED_PARALLEL);
        let instance = instances(&db, file)[0];
        let laid_out = layouts(&db, instance);
        let world = tilec_db::kernel_world(&db, instance);
        laid_out
            .buffers
            .iter()
            .find(|(buffer, _)| world.name(**buffer) == "F")
            .map(|(_, inferred)| inferred.layout.describe(&laid_out.exprs))
            .unwrap_or_default()
    });
    assert!(layout.ends_with("replicate 1"), "{layout}");
}

const EARLY_RETURN: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def early(N=100):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "float32")
            S[tx] = tx * 1.0
            T.sync_warp()
            B[tx] = S[tx] + 1.0
            if tx >= N:
                T.thread_return()
            T.device_assert(tx < N, "only threads below N get here")
            T.pdl_sync()
            B[tx] = A[tx] * 3.0

    return main


early()
"#;

#[test]
fn threads_that_return_skip_the_rest_and_asserts_hold_for_the_others() {
    let tensors = run(EARLY_RETURN);
    let expected = (0..128)
        .map(|t| {
            if t < 100 {
                tensors[0].values[t] * 3.0
            } else {
                t as f64 + 1.0
            }
        })
        .collect();
    assert_matches("B", &tensors[1], expected);
    let text = cuda(EARLY_RETURN);
    for snippet in [
        "return;",
        "__syncwarp();",
        "tl_griddepcontrol_wait();",
        "device_assert failed in block (%d, %d, %d), thread (%d, %d, %d): only threads below N get here",
        "__trap();",
    ] {
        assert!(text.contains(snippet), "{snippet} missing from\n{text}");
    }
}

#[test]
fn a_failed_device_assert_stops_the_run_with_its_message() {
    let failing = EARLY_RETURN.replace(
        "            if tx >= N:\n                T.thread_return()\n",
        "",
    );
    let program = lower(&failing);
    let mut tensors = make_tensors(&program, &[], 7, false).expect("shapes evaluate");
    let error = run_program(&program, &mut tensors, &[]).expect_err("thread 100 fails the assert");
    let text = error.to_string();
    assert!(
        text.contains("device_assert failed: only threads below N get here"),
        "{text}"
    );
    assert_eq!(error.thread, Some(100), "{text}");
}

#[test]
fn a_barrier_skipped_by_returned_threads_still_completes_but_a_divergent_one_does_not() {
    let ok = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def k():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            if tx >= 32:
                T.thread_return()
            S = T.alloc_shared((64,), "float32")
            S[tx] = A[tx]
            T.sync_threads()
            B[tx] = S[(31 - tx) % 64]
            B[tx + 32] = 0.0

    return main


k()
"#;
    let tensors = run(ok);
    let expected = (0..64)
        .map(|e| {
            if e < 32 {
                tensors[0].values[31 - e]
            } else {
                0.0
            }
        })
        .collect();
    assert_matches("B", &tensors[1], expected);
    let divergent = ok.replace(
        "            T.sync_threads()\n",
        "            if tx < 16:\n                T.sync_threads()\n",
    );
    let program = lower(&divergent);
    let mut tensors = make_tensors(&program, &[], 7, false).expect("shapes evaluate");
    let error = run_program(&program, &mut tensors, &[]).expect_err("half the threads sync");
    assert!(
        error.to_string().contains("barrier in divergent code"),
        "{error}"
    );
}

#[test]
fn a_with_of_several_items_enters_each_in_turn() {
    let source = r#"
import tilelang
import tilelang.language as T
from tilelang.tools.cuda import iket


@tilelang.jit(out_idx=[1])
def k():
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx, iket.range("copy"), iket.range("inner"):
            iket.mark("start", payload=iket.payload(bx, dtype="int32"))
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2.0

    return main


k()
"#;
    let tensors = run(source);
    let doubled = tensors[0].values.iter().map(|x| x * 2.0).collect();
    assert_matches("B", &tensors[1], doubled);
    // The second item is entered inside the first: a kernel within a kernel is said as such.
    let nested = source.replace(
        "iket.range(\"copy\"), iket.range(\"inner\")",
        "T.Kernel(1) as inner",
    );
    let found = errors(&nested);
    assert!(
        found
            .iter()
            .any(|e| e.contains("a `T.Kernel` nested in another kernel")),
        "{found:#?}"
    );
}

#[test]
fn thread_indexed_fragments_and_misused_bindings_are_diagnosed() {
    let fragment = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def k():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            F = T.alloc_fragment((128,), "float32")
            T.copy(A, F)
            F[tx] = F[tx] + 1.0
            T.copy(F, B)

    return main


k()
"#;
    let found = errors(fragment);
    assert!(
        found.iter().any(|e| e.contains("`F` is a fragment")),
        "{found:#?}"
    );
    let partial = fragment.replace(
        "tx = T.get_thread_binding()",
        "tx = T.thread_binding(0, 64, thread=\"threadIdx.x\")",
    );
    let found = errors(&partial);
    assert!(
        found
            .iter()
            .any(|e| e.contains("over the whole `threadIdx.x` of the launch (0 to 128)")),
        "{found:#?}"
    );
    let outside = "import tilelang.language as T\n\nT.get_thread_binding()\n";
    let _ = errors(outside);
    // A constant step is `range`'s; one known only at run time is not analysed.
    let stepped = fragment.replace(
        "T.copy(A, F)",
        "for s in T.serial(0, 4, bx + 1):\n                T.copy(A, F)",
    );
    let found = errors(&stepped);
    assert!(
        found
            .iter()
            .any(|e| e.contains("whose step is not a non-zero integer known at compile time")),
        "{found:#?}"
    );
}

/// `dsa_hisa/clean_and_maintain_logits.py` of TileLang's examples: each of 512 threads, bound
/// with `T.thread_binding(0, threads, thread="threadIdx.x")`, masks its own columns of a row of
/// logits in place, from the row's `[ks, ke)`.
#[test]
fn the_real_world_logit_mask_binds_its_threads_and_masks_each_row() {
    let Some(dir) = tilec_tests::realworld_dir() else {
        return;
    };
    let path = dir.join("dsa_hisa/clean_and_maintain_logits.py");
    let text = std::fs::read_to_string(&path).expect("the real-world file is readable");
    let mut program = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, &path, text);
        // Eight rows of two 4096-column blocks (the file's 4096 × 4096 takes minutes here).
        let overrides = [
            ("seq_len", tilec_ir::ConstValue::Int(8)),
            ("seq_len_kv", tilec_ir::ConstValue::Int(8192)),
        ];
        let instance = instance_with(&db, file, "clean_and_maintain_logits_", &overrides);
        match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs[0].clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        }
    });
    // The kernel rewrites only the masked elements of `Logits`, which the caller passes in: an
    // in-place update (tilec, seeing only stores, takes the parameter for an output).
    program.params[0].access = tilec_ir::thread::ParamAccess::ReadWrite;
    let mut tensors = make_tensors(&program, &[], 11, false).expect("shapes evaluate");
    let (rows, columns) = (tensors[0].shape[0], tensors[0].shape[1]);
    assert_eq!((rows, columns), (8, 8192));
    // Rows masked at both ends, at the start only, in the middle, and at the last column.
    let starts: Vec<usize> = (0..rows)
        .map(|r| [0, 100, columns / 2, columns - 1][r % 4])
        .collect();
    let ends: Vec<usize> = (0..rows)
        .map(|r| [columns, columns - 7, columns / 2 + 3, columns][r % 4])
        .collect();
    tensors[1].values = starts.iter().map(|&s| s as f64).collect();
    tensors[2].values = ends.iter().map(|&e| e as f64).collect();
    let before = tensors[0].values.clone();
    run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
    for row in 0..rows {
        let (ks, ke) = (starts[row], ends[row]);
        for column in 0..columns {
            let original = before[row * columns + column];
            let expected = if column < ks || column >= ke {
                f64::NEG_INFINITY
            } else if column == ks || column == ke - 1 {
                f64::INFINITY
            } else {
                original
            };
            let actual = tensors[0].values[row * columns + column];
            assert!(
                actual == expected,
                "Logits[{row}, {column}] = {actual}, expected {expected}"
            );
        }
    }
}

/// `iket/minimal.py` of TileLang's examples: `with T.Kernel(...) as bx, iket.range(...)` — a `with`
/// of two items, the second an event-tracing range that changes no value — and trace marks inside.
#[test]
fn the_real_world_traced_kernel_enters_both_items_of_its_with() {
    let Some(dir) = tilec_tests::realworld_dir() else {
        return;
    };
    let path = dir.join("iket/minimal.py");
    let text = std::fs::read_to_string(&path).expect("the real-world file is readable");
    let program = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, &path, text);
        let found: Vec<String> = file_diagnostics(&db, file)
            .iter()
            .map(|d| d.message.clone())
            .collect();
        assert!(found.is_empty(), "{found:#?}");
        let instance = instances(&db, file)[0];
        match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs[0].clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        }
    });
    let mut tensors = make_tensors(&program, &[], 5, false).expect("shapes evaluate");
    run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
    let sums = tensors[0]
        .values
        .iter()
        .zip(&tensors[1].values)
        .map(|(a, b)| f64::from(f32_of(*a) + f32_of(*b)))
        .collect();
    assert_matches("C", &tensors[2], sums);
}

#[test]
fn elif_chains_after_a_runtime_if_pick_one_branch_per_thread() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[0])
def k(flag=False):
    @T.prim_func
    def main(B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            if tx < 32:
                B[tx] = 1.0
            elif tx < 64:
                B[tx] = 2.0
            elif flag:
                B[tx] = 9.0
            elif tx % 2 == 0:
                B[tx] = 3.0
            else:
                B[tx] = 4.0

    return main


k()
"#;
    let tensors = run(source);
    let expected = (0..128)
        .map(|t| match t {
            0..32 => 1.0,
            32..64 => 2.0,
            _ if t % 2 == 0 => 3.0,
            _ => 4.0,
        })
        .collect();
    assert_matches("B", &tensors[0], expected);
}

#[test]
fn a_persistent_loop_walks_each_tile_once_in_tilelangs_grouped_order() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[0])
def k():
    @T.prim_func
    def main(O: T.Tensor((3, 5), "float32")):
        with T.Kernel(4, threads=32) as bid:
            for i, j in T.Persistent([3, 5], 4, bid, group_size=2):
                O[i, j] = bid * 1.0

    return main


k()
"#;
    let tensors = run(source);
    // TileLang's walk: the last dimension in groups of 2, the grouped domain [3, 3, 2] taken
    // linearly, tile `w * 4 + b` to block `b`, and the tiles past the domain skipped.
    let mut expected = vec![f64::NAN; 15];
    let (group, groups, blocks) = (2usize, 3usize, 4usize);
    let grouped = 3 * groups * group;
    for w in 0..grouped.div_ceil(blocks) {
        for b in 0..blocks {
            let linear = w * blocks + b;
            if linear >= grouped {
                continue;
            }
            let offset = linear % group;
            let rest = linear / group;
            let (i, j) = (rest / groups, rest % groups * group + offset);
            if j < 5 {
                assert!(expected[i * 5 + j].is_nan(), "tile ({i}, {j}) twice");
                expected[i * 5 + j] = b as f64;
            }
        }
    }
    assert!(expected.iter().all(|x| !x.is_nan()));
    assert_matches("O", &tensors[0], expected);
}

#[test]
fn an_atomic_add_at_a_thread_indexed_element_is_made_by_every_thread() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def k():
    @T.prim_func
    def main(Out: T.Tensor((8,), "float32")):
        with T.Kernel(2, threads=64) as bx:
            tx = T.get_thread_binding()
            T.atomic_add(Out[tx % 8], 1.0)

    return main


k()
"#;
    let program = lower(source);
    let mut tensors = make_tensors(&program, &[], 3, false).expect("shapes evaluate");
    let before = tensors[0].values.clone();
    run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
    // 2 blocks of 64 threads, 8 threads per element.
    let expected = before
        .iter()
        .map(|&x| f64::from((0..16).fold(f32_of(x), |acc, _| acc + 1.0)))
        .collect();
    assert_matches("Out", &tensors[0], expected);
}
