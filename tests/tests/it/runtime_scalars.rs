//! Run-time scalars inside kernels (issue 30): a value read from a tensor or a `T.alloc_var`
//! used as an index, a slice bound, a loop extent or a `T.ceildiv` argument; `T.clear`, `T.fill`
//! and `.astype` on run-time values. Each kernel is
//! written for the test; it is checked, lowered, and run in the emulator on inputs chosen here,
//! against a reference computed here from the same inputs. The kernels are
//! `examples/runtime_scalars.py`.

use tilec_db::RootDatabase;
use tilec_ir::ThreadProgram;
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::{HostTensor, run_program};
use tilec_tests::{
    assert_matches, describe_all, index, int, on_analysis_stack, run_pipeline, source_file,
};

/// `Rows[bx]` as the row index of a gather, `Offsets[bx]` as the start of a copied slice, a
/// count read from a tensor as a serial loop's extent and through `T.ceildiv`, and a
/// `T.alloc_var` as an index.
const KERNELS: &str = include_str!("../../../examples/runtime_scalars.py");

/// The file's database, after checking that it has no diagnostics.
fn analysed(name: &str, text: &str) -> (RootDatabase, tilec_db::SourceFile) {
    let db = RootDatabase::default();
    let file = source_file(&db, name, text);
    let diagnostics = run_pipeline(&db, file);
    assert!(
        diagnostics.is_empty(),
        "{}",
        describe_all(&db, file, &diagnostics)
    );
    (db, file)
}

/// The printed world and the thread program of the first instance of `kernel`.
fn lowered(db: &RootDatabase, file: tilec_db::SourceFile, kernel: &str) -> (String, ThreadProgram) {
    let instance = tilec_tests::instance(db, file, kernel, 0);
    let world = tilec_db::kernel_world(db, instance).pretty();
    let programs = match tilec_db::thread_programs(db, instance).as_ref() {
        Ok(programs) => programs.clone(),
        Err(diagnostics) => panic!("{kernel}: cannot lower: {diagnostics:#?}"),
    };
    assert_eq!(programs.len(), 1, "{kernel}: one launch");
    (world, programs[0].clone())
}

/// Runs `program` with the integer tensor at `index_param` replaced by `indices` (the others
/// seeded random) and returns the tensors after the run.
fn emulate(program: &ThreadProgram, index_param: usize, indices: &[i64]) -> Vec<HostTensor> {
    let mut tensors = make_tensors(program, &[], 7, false).expect("shapes evaluate");
    let slot = &mut tensors[index_param];
    assert_eq!(slot.values.len(), indices.len(), "index tensor size");
    slot.values = indices.iter().map(|&i| i as f64).collect();
    if let Err(error) = run_program(program, &mut tensors, &[]) {
        panic!("{}: emulator: {error}", program.name);
    }
    tensors
}

fn row(t: &HostTensor, r: usize) -> &[f64] {
    let width = t.shape[1];
    &t.values[r * width..(r + 1) * width]
}

#[test]
fn a_value_read_from_a_tensor_indexes_a_gather() {
    on_analysis_stack(|| {
        let (db, file) = analysed("gather.py", KERNELS);
        let (world, program) = lowered(&db, file, "gather_rows");
        // The read is bound where it is used, inside the parallel loop, and named after its tensor.
        assert!(world.contains("let Rows_i0 = Rows[bx]"), "{world}");
        let rows = [63, 0, 5, 5, 17, 2, 40, 33, 1, 62, 9, 9, 12, 50, 7, 31];
        let t = emulate(&program, 1, &rows);
        let expected: Vec<f64> = rows
            .iter()
            .flat_map(|&r| row(&t[0], index(r)).to_vec())
            .collect();
        assert_matches("Y", &t[2], expected);
    });
}

#[test]
fn a_read_offset_bounds_a_copied_slice_of_constant_extent() {
    on_analysis_stack(|| {
        let (db, file) = analysed("segments.py", KERNELS);
        let (world, program) = lowered(&db, file, "copy_segments");
        // One binding for both bounds: the slice `start:start + 16` has extent 16, which the copy
        // into a 16-row tile needs.
        assert!(
            world.contains("copy X[Offsets_i0:Offsets_i0 + 16, :] -> s[:, :]"),
            "{world}"
        );
        assert_eq!(world.matches("let ").count(), 1, "{world}");
        // The segment at 250 runs six rows past the end of X: those read as zeros.
        let offsets = [0, 250, 17, 3, 100, 99, 128, 5];
        let t = emulate(&program, 1, &offsets);
        let rows = t[0].shape[0];
        let expected: Vec<f64> = offsets
            .iter()
            .flat_map(|&o| (0..16).map(move |r| index(o) + r))
            .flat_map(|r| match r < rows {
                true => row(&t[0], r).to_vec(),
                false => vec![0.0; t[0].shape[1]],
            })
            .collect();
        assert_matches("Y", &t[2], expected);
        // A segment whose 16 rows all lie inside X takes the copy without row guards; the others
        // take the guarded one. The row guard is the same for the four lanes of a 16-byte
        // access: the copy is vectorized inside it, and only the zero fill of rows past the end
        // runs lane by lane.
        let cuda = tilec_passes::cuda::emit_cuda(&program, &tilec_ir::Target::Sm90);
        let whole_segment = "(((int)(Offsets_i0 + 15)) < 256)) {";
        let guarded = "< 256)) {\n                    *(uint4*)(X_vec + 0) = *(const uint4*)(X + \
                       Offsets_i0 * 32";
        assert!(cuda.contains(whole_segment), "{cuda}");
        assert!(cuda.contains(guarded), "{cuda}");
    });
}

#[test]
fn a_count_read_from_a_tensor_is_a_loop_extent_and_a_ceildiv_argument() {
    on_analysis_stack(|| {
        let (db, file) = analysed("prefix.py", KERNELS);
        let (_, program) = lowered(&db, file, "prefix_rows");
        // Counts of 0 (the loops do not run), odd and even, up to M.
        let counts = [0, 1, 2, 5, 16, 7, 8, 3];
        let t = emulate(&program, 1, &counts);
        let n = t[0].shape[1];
        let sum_rows = |rows: &mut dyn Iterator<Item = usize>| {
            let mut total = vec![0.0; n];
            for r in rows {
                for (acc, x) in total.iter_mut().zip(row(&t[0], r)) {
                    *acc += x;
                }
            }
            total
        };
        let prefix: Vec<f64> = counts
            .iter()
            .flat_map(|&c| sum_rows(&mut (0..index(c))))
            .collect();
        let even: Vec<f64> = counts
            .iter()
            .flat_map(|&c| sum_rows(&mut (0..index(c).div_ceil(2)).map(|k| 2 * k)))
            .collect();
        assert_matches("Y", &t[2], prefix);
        assert_matches("Z", &t[3], even);
    });
}

#[test]
fn an_alloc_var_indexes_and_a_write_to_it_rebinds() {
    on_analysis_stack(|| {
        let (db, file) = analysed("var.py", KERNELS);
        let (world, program) = lowered(&db, file, "var_index");
        // The variable is written between the two loops, so the second read is a new binding.
        assert_eq!(world.matches("let r_").count(), 2, "{world}");
        let rows = [0, 1, 5, 5, 17, 2, 40, 33, 1, 62, 9, 9, 12, 50, 7, 31];
        let t = emulate(&program, 1, &rows);
        let expected: Vec<f64> = rows
            .iter()
            .flat_map(|&r| {
                let (a, b) = (row(&t[0], index(r)), row(&t[0], index(r) + 1));
                a.iter().zip(b).map(|(x, y)| x + y).collect::<Vec<_>>()
            })
            .collect();
        assert_matches("Y", &t[2], expected);
    });
}

#[test]
fn clear_and_fill_set_an_alloc_var() {
    on_analysis_stack(|| {
        let (db, file) = analysed("count.py", KERNELS);
        let (_, program) = lowered(&db, file, "count_positive");
        let mut t = make_tensors(&program, &[], 11, false).expect("shapes evaluate");
        if let Err(error) = run_program(&program, &mut t, &[]) {
            panic!("count_positive: emulator: {error}");
        }
        let positive: Vec<f64> = (0..t[0].shape[0])
            .map(|r| row(&t[0], r).iter().filter(|&&x| x > 0.0).count() as f64)
            .collect();
        assert!(positive.iter().any(|&n| n > 0.0), "some positive inputs");
        assert_matches("C", &t[1], positive.clone());
        assert_matches("D", &t[2], positive.iter().map(|n| n + 3.0).collect());
    });
}

/// `.astype(dtype)` on an element, on a run-time value and on a `T.alloc_var` casts as
/// `T.Cast` does; `.dtype` of an element is its buffer's.
#[test]
fn astype_casts_elements_values_and_variables() {
    on_analysis_stack(|| {
        let (db, file) = analysed("astype.py", KERNELS);
        let (world, program) = lowered(&db, file, "half_sum");
        assert!(
            world.contains("acc[] = acc + T.Cast(float32, T.Cast(float16, X[bx, j]))")
                && world.contains("Y[bx] = T.Cast(float16, acc)"),
            "{world}"
        );
        let mut t = make_tensors(&program, &[], 3, false).expect("shapes evaluate");
        if let Err(error) = run_program(&program, &mut t, &[]) {
            panic!("half_sum: emulator: {error}");
        }
        let half = |x: f64| tilec_runtime::tensor::round_to(tilec_ir::DType::Float16, x);
        let sums: Vec<f64> = (0..t[0].shape[0])
            .map(|r| row(&t[0], r).iter().map(|&x| half(x)).sum())
            .collect();
        assert_matches("Y", &t[1], sums);
    });
}

/// A float read from memory is not an index: the message says what was found, at the index.
#[test]
fn a_float_read_from_memory_is_still_not_an_index() {
    let text = r#"import tilelang
import tilelang.language as T


@tilelang.jit
def k(M=16, N=16):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), W: T.Tensor((M,), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M, threads=32) as bx:
            for j in T.Parallel(N):
                Y[bx, j] = X[W[bx], j]

    return main
"#;
    let (listing, count) = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "float_index.py", text);
        let diagnostics = run_pipeline(&db, file);
        (describe_all(&db, file, &diagnostics), diagnostics.len())
    });
    assert_eq!(count, 1, "{listing}");
    assert!(
        listing.contains("11")
            && listing.contains("unsupported-syntax")
            && listing.contains("an index must be an integer expression, found a buffer region"),
        "{listing}"
    );
}

/// TileLang's variable-length FlashAttention (`flash_attention/example_mha_fwd_varlen.py`, read
/// from `shared/realworld`): two sequences of different lengths packed into one tensor, their
/// offsets in `cu_seqlens_q` / `cu_seqlens_k`, the longest query length a scalar parameter. Run in
/// the emulator at a small size against attention computed here per sequence in f64.
#[test]
fn varlen_attention_from_the_real_world_file_matches_a_reference() {
    let Some(dir) = tilec_tests::realworld_dir() else {
        return;
    };
    let path = dir.join("flash_attention/example_mha_fwd_varlen.py");
    let text = std::fs::read_to_string(&path).expect("the real-world file is readable");
    let (uq, ukv, dim) = (100usize, 100usize, 64usize);
    let (cu_q, cu_k) = ([0i64, 40, 100], [0i64, 70, 100]);
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, &path, text);
        let overrides = [
            ("batch_size", 2),
            ("UQ", int(uq)),
            ("UKV", int(ukv)),
            ("heads", 1),
            ("dim", int(dim)),
            ("max_seqlen_q", 60),
        ]
        .map(|(name, value)| (name, tilec_ir::ConstValue::Int(value)));
        let instance = tilec_tests::instance_with(&db, file, "flashattn", &overrides);
        let programs = match tilec_db::thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs.clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        };
        let program = &programs[0];
        let names: Vec<&str> = program.scalars.iter().map(|s| s.name.as_str()).collect();
        let scalars: Vec<i64> = names
            .iter()
            .map(|name| match *name {
                "UQ" => int(uq),
                "UKV" => int(ukv),
                "max_seqlen_q" => 60,
                other => panic!("unexpected scalar parameter {other}"),
            })
            .collect();
        let mut t = make_tensors(program, &scalars, 9, false).expect("shapes evaluate");
        let position = |name: &str| {
            let found = program.params.iter().position(|p| p.name == name);
            found.unwrap_or_else(|| panic!("no parameter {name}"))
        };
        t[position("cu_seqlens_q")].values = cu_q.iter().map(|&v| v as f64).collect();
        t[position("cu_seqlens_k")].values = cu_k.iter().map(|&v| v as f64).collect();
        if let Err(error) = run_program(program, &mut t, &scalars) {
            panic!("emulator: {error}");
        }
        let (q, k, v) = (
            &t[position("Q_unpad")],
            &t[position("K_unpad")],
            &t[position("V_unpad")],
        );
        let scale = 1.0 / (dim as f64).sqrt();
        let mut expected = vec![0.0; uq * dim];
        for b in 0..2 {
            let (q0, q1) = (index(cu_q[b]), index(cu_q[b + 1]));
            let (k0, k1) = (index(cu_k[b]), index(cu_k[b + 1]));
            for i in q0..q1 {
                let scores: Vec<f64> = (k0..k1)
                    .map(|j| {
                        let dot: f64 = (0..dim)
                            .map(|d| q.values[i * dim + d] * k.values[j * dim + d])
                            .sum();
                        dot * scale
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = weights.iter().sum();
                for d in 0..dim {
                    let sum: f64 = (k0..k1)
                        .zip(&weights)
                        .map(|(j, w)| w * v.values[j * dim + d])
                        .sum();
                    expected[i * dim + d] = sum / total;
                }
            }
        }
        assert_matches("Output_unpad", &t[position("Output_unpad")], expected);
    });
}

/// A kernel whose blocks each walk a range of row tiles read from a tensor, as Stream-K and
/// persistent kernels do: `while tile[0] < Ranges[bx, 1]` is a loop on a run-time condition the
/// whole block shares, and each trip runs a TMA pipeline, which is entered once per trip (its
/// mbarriers are set up and invalidated each time).
const WORK_RANGES: &str = include_str!("../../fixtures/kernels/work_ranges.py");

#[test]
fn a_while_on_a_range_read_from_a_tensor_runs_a_pipeline_per_trip() {
    on_analysis_stack(|| {
        let (db, file) = analysed("ranges.py", WORK_RANGES);
        let (world, program) = lowered(&db, file, "work_ranges");
        assert!(world.contains("while tile[0] < Ranges[bx, 1]"), "{world}");
        let cuda = tilec_passes::cuda::emit_cuda(&program, &tilec_ir::Target::Sm90);
        assert!(cuda.contains("while (true) {"), "{cuda}");
        assert!(cuda.contains("tl_mbarrier_inval("), "{cuda}");
        // Block 0 takes row tiles 0..3, block 1 tile 3 only: every row is computed once.
        let t = emulate(&program, 2, &[0, 3, 3, 4]);
        let (a, b) = (&t[0].values, &t[1].values);
        let expected = (0..256 * 128)
            .map(|at| {
                let (m, n) = (at / 128, at % 128);
                (0..128).map(|k| a[m * 128 + k] * b[n * 128 + k]).sum()
            })
            .collect();
        assert_matches("C", &t[3], expected);
    });
}

#[test]
fn a_while_whose_condition_differs_between_threads_is_not_lowered() {
    let source = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def spin(N=128):
    @T.prim_func
    def main(Counts: T.Tensor((N,), T.int32), Out: T.Tensor((N,), T.int32)):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            left = T.alloc_local((1,), T.int32)
            left[0] = Counts[tx]
            while left[0] > 0:
                T.sync_threads()
                left[0] = left[0] - 1
            Out[tx] = left[0]

    return main


spin()
"#;
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "spin.py", source);
        let instance = tilec_tests::instance(&db, file, "spin", 0);
        let Err(diagnostics) = tilec_db::thread_programs(&db, instance).as_ref() else {
            panic!("a per-thread `while` around a barrier was lowered");
        };
        let text = format!("{diagnostics:?}");
        assert!(text.contains("condition differs between threads"), "{text}");
    });
}

/// A `T.StridedTensor` with padded rows (row stride 80 for rows of 64, passed at launch) is
/// addressed through its strides: read by a tile copy, written elementwise, its storage is
/// one past the last element it reaches, and the gaps between rows are left alone. Against
/// element positions computed here from the stride.
#[test]
fn a_strided_tensor_is_addressed_through_its_run_time_strides() {
    let source = include_str!("../../fixtures/kernels/strided_rows.py");
    let (rows, width, stride) = (100usize, 64usize, 80usize);
    let (db, file) = analysed("/kernels/strided_rows.py", source);
    let (_, program) = lowered(&db, file, "padded_rows");
    let names: Vec<&str> = program.scalars.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["M", "stride"],
        "the sizes and the stride are launch parameters"
    );
    let scalars = [100_i64, 80];
    let mut tensors = make_tensors(&program, &scalars, 7, false).expect("shapes evaluate");
    let storage = (rows - 1) * stride + width;
    assert_eq!(
        tensors[0].shape,
        vec![storage],
        "X is passed as its storage"
    );
    assert_eq!(
        tensors[1].shape,
        vec![storage],
        "Y is passed as its storage"
    );
    assert_eq!(tensors[2].shape, vec![width, rows]);
    let gap_marker = -7.0;
    tensors[1].values = vec![gap_marker; storage];
    if let Err(error) = run_program(&program, &mut tensors, &scalars) {
        panic!("emulator: {error}");
    }
    let x = &tensors[0].values;
    let mut doubled = vec![gap_marker; storage];
    let mut transposed = vec![0.0; width * rows];
    for i in 0..rows {
        for j in 0..width {
            doubled[i * stride + j] = x[i * stride + j] * 2.0;
            transposed[j * rows + i] = x[i * stride + j];
        }
    }
    assert_matches("Y", &tensors[1], doubled);
    assert_matches("Z", &tensors[2], transposed);
}
