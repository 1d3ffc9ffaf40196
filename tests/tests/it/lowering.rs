//! The SIMT kernels, lowered to thread programs and run in the emulator at small sizes, against
//! references computed here in f64 (independently of tilec's lowering): the repository's own
//! (`tests/fixtures/kernels/`, `examples/`), which run in every clone, and the corpus beside the
//! clone (a conformance suite).

use tilec_ir::ConstValue;
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::{HostTensor, run_program};
use tilec_tests::{assert_matches, corpus_dir, instance_with, load_corpus, on_analysis_stack};

/// Lowers `kernel` of the corpus file `file` with `overrides`, runs it on seeded inputs and returns
/// the tensors after the run (inputs unchanged, outputs written).
fn emulate(file: &str, kernel: &str, overrides: &[(&str, i64)]) -> Option<Vec<HostTensor>> {
    let program = lowered(file, kernel, overrides)?;
    Some(run_seeded(file, &program))
}

/// [`emulate`] on a fixture of `tests/fixtures/kernels/`.
fn emulate_fixture(file: &str, kernel: &str, overrides: &[(&str, i64)]) -> Vec<HostTensor> {
    let dir = tilec_tests::fixture_path("kernels");
    let program = lowered_in(&dir, file, kernel, overrides);
    run_seeded(file, &program)
}

fn run_seeded(file: &str, program: &tilec_ir::ThreadProgram) -> Vec<HostTensor> {
    let mut tensors = make_tensors(program, &[], 42, false).expect("shapes evaluate");
    if let Err(error) = run_program(program, &mut tensors, &[]) {
        panic!("{file}: emulator: {error}");
    }
    tensors
}

/// The lowered program (one launch) of a corpus kernel at the given sizes.
fn lowered(file: &str, kernel: &str, overrides: &[(&str, i64)]) -> Option<tilec_ir::ThreadProgram> {
    let dir = corpus_dir()?;
    Some(lowered_in(&dir, file, kernel, overrides))
}

/// The lowered program (one launch) of `kernel` in `dir/file` at the given sizes.
fn lowered_in(
    dir: &std::path::Path,
    file: &str,
    kernel: &str,
    overrides: &[(&str, i64)],
) -> tilec_ir::ThreadProgram {
    let overrides: Vec<(&str, ConstValue)> = overrides
        .iter()
        .map(|&(name, value)| (name, ConstValue::Int(value)))
        .collect();
    on_analysis_stack(|| {
        let (db, source) = load_corpus(dir, file);
        let instance = instance_with(&db, source, kernel, &overrides);
        let programs = match tilec_db::thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs.clone(),
            Err(diagnostics) => panic!("{file}: cannot lower: {diagnostics:#?}"),
        };
        assert_eq!(programs.len(), 1, "{file}: one launch");
        programs[0].clone()
    })
}

fn map(input: &HostTensor, f: impl Fn(f64) -> f64) -> Vec<f64> {
    input.values.iter().map(|&x| f(x)).collect()
}

fn rows(t: &HostTensor) -> Vec<&[f64]> {
    let width = *t.shape.last().unwrap_or(&1);
    t.values.chunks(width).collect()
}

#[test]
fn elementwise_add() {
    let overrides = [
        ("M", 256),
        ("N", 512),
        ("block_M", 32),
        ("block_N", 64),
        ("threads", 128),
    ];
    let Some(t) = emulate("elementwise_add.py", "elementwise_add", &overrides) else {
        return;
    };
    let expected = t[0]
        .values
        .iter()
        .zip(&t[1].values)
        .map(|(a, b)| a + b)
        .collect();
    assert_matches("C", &t[2], expected);
}

/// The fixture's 2-D addition, at tiles smaller than its own.
#[test]
fn elementwise_add_fixture() {
    let overrides = [
        ("M", 256),
        ("N", 512),
        ("block_M", 32),
        ("block_N", 64),
        ("threads", 128),
    ];
    let t = emulate_fixture("elementwise_add.py", "add", &overrides);
    let expected = t[0]
        .values
        .iter()
        .zip(&t[1].values)
        .map(|(a, b)| a + b)
        .collect();
    assert_matches("C", &t[2], expected);
}

/// The emulator reports its progress after every block, in order, ending at the grid's size:
/// what `tilec run` draws its progress line from.
#[test]
fn the_emulator_reports_each_block_done() {
    let overrides = [
        ("M", 256),
        ("N", 512),
        ("block_M", 32),
        ("block_N", 64),
        ("threads", 128),
    ];
    let dir = tilec_tests::fixture_path("kernels");
    let program = lowered_in(&dir, "elementwise_add.py", "add", &overrides);
    let mut tensors = make_tensors(&program, &[], 42, false).expect("shapes evaluate");
    let mut seen = Vec::new();
    tilec_runtime::run_program_observed(&program, &mut tensors, &[], None, &mut |done, total| {
        seen.push((done, total));
    })
    .expect("the emulator runs it");
    let blocks = (256 / 32) * (512 / 64);
    let expected: Vec<(u64, u64)> = (1..=blocks).map(|done| (done, blocks)).collect();
    assert_eq!(seen, expected);
}

#[test]
fn vector_add_eager() {
    let Some(t) = emulate(
        "vector_add_eager.py",
        "vector_add",
        &[("N", 4096), ("block_N", 256), ("threads", 128)],
    ) else {
        return;
    };
    let expected = t[0]
        .values
        .iter()
        .zip(&t[1].values)
        .map(|(a, b)| a + b)
        .collect();
    assert_matches("C", &t[2], expected);
}

#[test]
fn transpose_shared() {
    let Some(t) = emulate(
        "transpose_shared.py",
        "transpose",
        &[("M", 128), ("N", 64), ("block", 32), ("threads", 128)],
    ) else {
        return;
    };
    let (m, n) = (128, 64);
    let expected = (0..n * m)
        .map(|k| t[0].values[(k % m) * n + k / m])
        .collect();
    assert_matches("B", &t[1], expected);
}

#[test]
fn row_reduce() {
    let Some(t) = emulate(
        "row_reduce.py",
        "row_reduce",
        &[("M", 64), ("N", 128), ("block_M", 8)],
    ) else {
        return;
    };
    let sums = rows(&t[0]).iter().map(|r| r.iter().sum()).collect();
    let maxes = rows(&t[0])
        .iter()
        .map(|r| r.iter().copied().fold(f64::NEG_INFINITY, f64::max))
        .collect();
    assert_matches("RowSum", &t[1], sums);
    assert_matches("RowMax", &t[2], maxes);
}

/// `T.reduce_max` is `fmaxf` (the GPU's `max.f32`, TileLang's CUDA `max`): a NaN in a row is passed
/// over, and a row of NaNs only leaves the reduction's initial value, −inf.
#[test]
fn reduce_max_passes_over_nan_as_fmaxf_does() {
    let Some(program) = lowered(
        "row_reduce.py",
        "row_reduce",
        &[("M", 16), ("N", 128), ("block_M", 8)],
    ) else {
        return;
    };
    let mut tensors = make_tensors(&program, &[], 7, false).expect("shapes evaluate");
    let width = 128;
    tensors[0].values[3 * width + 17] = f64::NAN;
    tensors[0].values[12 * width..13 * width].fill(f64::NAN);
    let x = tensors[0].clone();
    if let Err(error) = run_program(&program, &mut tensors, &[]) {
        panic!("row_reduce: emulator: {error}");
    }
    let maxes: Vec<f64> = rows(&x)
        .iter()
        .map(|r| r.iter().copied().fold(f64::NEG_INFINITY, f64::max))
        .collect();
    assert_eq!(maxes[12], f64::NEG_INFINITY);
    assert!(maxes[3].is_finite());
    assert_eq!(tensors[2].values, maxes);
}

fn softmax_rows(x: &HostTensor) -> Vec<f64> {
    rows(x)
        .iter()
        .flat_map(|r| {
            let max = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = r.iter().map(|v| (v - max).exp()).sum();
            r.iter()
                .map(move |v| (v - max).exp() / sum)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn softmax() {
    let Some(t) = emulate(
        "softmax.py",
        "softmax",
        &[("M", 16), ("N", 512), ("block_M", 2)],
    ) else {
        return;
    };
    assert_matches("Y", &t[1], softmax_rows(&t[0]));
}

/// The fixture's softmax (exp2 of the scaled difference) against `exp` in f64.
#[test]
fn softmax_fixture() {
    let t = emulate_fixture(
        "softmax.py",
        "softmax",
        &[("M", 16), ("N", 512), ("block_M", 2)],
    );
    assert_matches("Y", &t[1], softmax_rows(&t[0]));
}

#[test]
fn rms_norm_eager() {
    let Some(t) = emulate("rms_norm_eager.py", "rms_norm", &[("M", 16), ("N", 256)]) else {
        return;
    };
    let n = 256.0;
    let expected = rows(&t[0])
        .iter()
        .flat_map(|r| {
            let scale = 1.0 / (r.iter().map(|v| v * v).sum::<f64>() / n + 1e-6).sqrt();
            r.iter().map(move |v| v * scale).collect::<Vec<_>>()
        })
        .collect();
    assert_matches("Y", &t[1], expected);
}

#[test]
fn layernorm() {
    let Some(t) = emulate("layernorm.py", "layernorm", &[("M", 8), ("N", 256)]) else {
        return;
    };
    let n = 256.0;
    let (w, b) = (&t[1].values, &t[2].values);
    let expected = rows(&t[0])
        .iter()
        .flat_map(|r| {
            let mean = r.iter().sum::<f64>() / n;
            let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
            let rstd = 1.0 / (var + 1e-5).sqrt();
            r.iter()
                .enumerate()
                .map(move |(j, v)| (v - mean) * rstd * w[j] + b[j])
                .collect::<Vec<_>>()
        })
        .collect();
    assert_matches("Y", &t[3], expected);
}

#[test]
fn cumsum() {
    let Some(t) = emulate(
        "cumsum.py",
        "chunk_cumsum",
        &[("M", 64), ("N", 32), ("block_M", 16)],
    ) else {
        return;
    };
    let expected = rows(&t[0])
        .iter()
        .flat_map(|r| {
            r.iter()
                .scan(0.0, |acc, v| {
                    *acc += v;
                    Some(*acc)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_matches("Y", &t[1], expected);
}

#[test]
fn pointwise_family() {
    let Some(t) = emulate(
        "pointwise_family.py",
        "relu",
        &[("N", 1024), ("block", 256)],
    ) else {
        return;
    };
    assert_matches("relu", &t[1], map(&t[0], |x| x.max(0.0)));
    let Some(t) = emulate(
        "pointwise_family.py",
        "square_tile",
        &[("M", 64), ("N", 64), ("block_M", 32), ("block_N", 32)],
    ) else {
        return;
    };
    assert_matches("square", &t[1], map(&t[0], |x| x * x));
    let Some(t) = emulate(
        "pointwise_family.py",
        "sigmoid",
        &[("N", 1024), ("block", 256)],
    ) else {
        return;
    };
    assert_matches("sigmoid", &t[1], map(&t[0], |x| 1.0 / (1.0 + (-x).exp())));
}

/// Four of the five kernels of the pointwise fixture, at their call sites' scalars (`shift` by
/// -1.0, `axpy` with alpha 2.0).
#[test]
fn pointwise_family_fixture() {
    let sizes = [("N", 1024), ("block", 256)];
    let t = emulate_fixture("pointwise_family.py", "relu", &sizes);
    assert_matches("relu", &t[1], map(&t[0], |x| x.max(0.0)));
    let t = emulate_fixture("pointwise_family.py", "square", &sizes);
    assert_matches("square", &t[1], map(&t[0], |x| x * x));
    let t = emulate_fixture("pointwise_family.py", "shift", &sizes);
    assert_matches("shift", &t[1], map(&t[0], |x| x - 1.0));
    let t = emulate_fixture("pointwise_family.py", "axpy", &sizes);
    let expected = t[0]
        .values
        .iter()
        .zip(&t[1].values)
        .map(|(x, y)| 2.0 * x + y)
        .collect();
    assert_matches("axpy", &t[2], expected);
}

#[test]
fn scalar_broadcast() {
    let Some(t) = emulate(
        "scalar_broadcast.py",
        "scale_by_first",
        &[("M", 64), ("N", 64), ("block_M", 32), ("block_N", 32)],
    ) else {
        return;
    };
    let first = t[0].values[0];
    assert_matches("B", &t[1], map(&t[0], |x| x * first));
}

#[test]
fn meta_list_unroll() {
    let Some(t) = emulate("meta_list_unroll.py", "gather_three", &[("N", 16)]) else {
        return;
    };
    let a = &t[0].values;
    assert_matches("B", &t[1], vec![a[0], a[2], a[4]]);
}

#[test]
fn sparse_and_annotated_thread_maps() {
    for (file, kernel) in [
        ("layout_sparse_thread_map.py", "plan_then_buffer_layout"),
        ("layout_annotated.py", "annotated"),
    ] {
        let Some(t) = emulate(file, kernel, &[]) else {
            return;
        };
        let expected = (0..4).map(|row| t[0].values[row * 16]).collect();
        assert_matches(file, &t[1], expected);
    }
}

#[test]
fn serial_inner_read() {
    let Some(t) = emulate(
        "layout_serial_inner_read.py",
        "copy_rows",
        &[("M", 16), ("N", 16)],
    ) else {
        return;
    };
    assert_matches("O", &t[1], t[0].values.clone());
}

fn strip_barriers(stmts: &mut Vec<tilec_ir::thread::Stmt>) {
    use tilec_ir::thread::Stmt;
    use tilec_ir::visit::{VisitorMut, walk_body_mut};
    struct Strip;
    impl VisitorMut for Strip {
        fn visit_body(&mut self, stmts: &mut Vec<Stmt>) {
            stmts.retain(|s| !matches!(s, Stmt::Barrier));
            walk_body_mut(self, stmts);
        }
    }
    Strip.visit_body(stmts);
}

#[test]
fn the_emulator_catches_a_missing_barrier_in_a_lowered_kernel() {
    let sizes = [("M", 64), ("N", 64), ("block", 32), ("threads", 128)];
    let Some(mut program) = lowered("transpose_shared.py", "transpose", &sizes) else {
        return;
    };
    let mut tensors = make_tensors(&program, &[], 1, false).expect("shapes");
    run_program(&program, &mut tensors, &[]).expect("the lowered program is race-free");
    strip_barriers(&mut program.body);
    let mut tensors = make_tensors(&program, &[], 1, false).expect("shapes");
    let error = run_program(&program, &mut tensors, &[]).expect_err("a race without the barrier");
    let text = error.to_string();
    assert!(text.contains("race") && text.contains("tile"), "{text}");
}

#[test]
fn the_emulator_catches_an_out_of_bounds_index_in_a_lowered_kernel() {
    let sizes = [("N", 1024), ("block", 256)];
    let dir = tilec_tests::fixture_path("kernels");
    let mut program = lowered_in(&dir, "pointwise_family.py", "relu", &sizes);
    // Shift every store to Y (scalar or vector) by 8 elements: the last block then writes past
    // the end.
    use tilec_ir::thread::Stmt;
    use tilec_ir::visit::{VisitorMut, walk_stmt_mut};
    struct Shift<'a>(&'a mut tilec_ir::ThreadProgram);
    impl VisitorMut for Shift<'_> {
        fn visit_stmt(&mut self, stmt: &mut Stmt) {
            let program = &mut *self.0;
            if let Stmt::Store { place, .. } | Stmt::VectorCopy { dst: place, .. } = stmt
                && program.buffer(place.buffer).name == "Y"
            {
                let eight = program.exprs.int(8);
                place.index = program.exprs.add(place.index, eight);
            }
            walk_stmt_mut(self, stmt);
        }
    }
    let mut body = std::mem::take(&mut program.body);
    Shift(&mut program).visit_body(&mut body);
    program.body = body;
    let mut tensors = make_tensors(&program, &[], 1, false).expect("shapes");
    let error = run_program(&program, &mut tensors, &[]).expect_err("out of bounds");
    let text = error.to_string();
    assert!(text.contains("Y") && text.contains("1024"), "{text}");
}

/// The generated CUDA of each SIMT corpus kernel, at its corpus instance, is a snapshot: a change in
/// lowering or printing shows up as a reviewed diff.
#[test]
fn generated_cuda_snapshots() {
    let Some(dir) = corpus_dir() else { return };
    let kernels = [
        ("elementwise_add.py", "elementwise_add"),
        ("vector_add_eager.py", "vector_add"),
        ("transpose_shared.py", "transpose"),
        ("row_reduce.py", "row_reduce"),
        ("softmax.py", "softmax"),
        ("rms_norm_eager.py", "rms_norm"),
        ("layernorm.py", "layernorm"),
        ("cumsum.py", "chunk_cumsum"),
        ("pointwise_family.py", "axpy"),
        ("scalar_broadcast.py", "scale_by_first"),
        ("meta_list_unroll.py", "gather_three"),
        ("layout_sparse_thread_map.py", "plan_then_buffer_layout"),
        ("layout_annotated.py", "annotated"),
        ("layout_serial_inner_read.py", "copy_rows"),
    ];
    on_analysis_stack(|| {
        for (file, kernel) in kernels {
            let (db, source) = load_corpus(&dir, file);
            let instance = tilec_tests::instance(&db, source, kernel, 0);
            let programs = tilec_db::thread_programs(&db, instance);
            let program = &programs.as_ref().as_ref().expect("lowers")[0];
            let cuda = tilec_passes::cuda::emit_cuda(program, &tilec_ir::Target::Sm90);
            // The prelude has its own tests; the snapshot keeps the kernel.
            let kernel_text = cuda
                .split("end of the tilec prelude")
                .nth(1)
                .unwrap_or(&cuda);
            expect_test::expect_file![format!("snapshots/{kernel}.cu")].assert_eq(kernel_text);
        }
    });
}

/// A tile copy under `T.use_swizzle`: each block copies the tile its rasterized indices name.
const RASTERIZED_COPY: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def rasterized_copy(M, N, block, panel, order):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=32) as (bx, by):
            T.use_swizzle(panel_size=panel, order=order)
            for i, j in T.Parallel(block, block):
                B[by * block + i, bx * block + j] = A[by * block + i, bx * block + j]

    return main


def main():
    rasterized_copy(40, 56, 8, 3, "row")
    rasterized_copy(40, 56, 8, 3, "column")
"#;

/// TileLang's `rasterization2DRow` / `rasterization2DColumn`, transcribed branch by branch: the
/// block `(x, y)` of a `gx × gy` grid runs as `(col, row)`.
fn rasterized(x: i64, y: i64, [gx, gy]: [i64; 2], width: i64, column: bool) -> (i64, i64) {
    let block = x + y * gx;
    let cells = gx * gy;
    let along_extent = if column { gy } else { gx };
    let panel_cells = width * along_extent;
    let offset = block % panel_cells;
    let panel = block / panel_cells;
    let panels = (cells + panel_cells - 1) / panel_cells;
    let stride = if panel + 1 < panels {
        width
    } else {
        (cells - panel * panel_cells) / along_extent
    };
    let along = if panel % 2 == 1 {
        along_extent - 1 - offset / stride
    } else {
        offset / stride
    };
    let across = offset % stride + panel * width;
    if column {
        (across, along)
    } else {
        (along, across)
    }
}

#[test]
fn use_swizzle_rasterizes_blocks_as_tilelang_does() {
    let path = std::path::PathBuf::from("rasterized_copy.py");
    for (index, column) in [(0, false), (1, true)] {
        let program = on_analysis_stack(|| {
            let db = tilec_db::RootDatabase::default();
            let source = tilec_tests::source_file(&db, path.clone(), RASTERIZED_COPY);
            let instance = tilec_tests::instance(&db, source, "rasterized_copy", index);
            let programs = tilec_db::thread_programs(&db, instance);
            programs.as_ref().as_ref().expect("lowers")[0].clone()
        });
        // The launch opens with the two bindings; evaluate them on every hardware block.
        use tilec_ir::thread::Stmt::Let;
        let [Let { value: col, .. }, Let { value: row, .. }, ..] = program.body.as_slice() else {
            panic!("no rasterization bindings: {:?}", &program.body[..2]);
        };
        let [hx, hy, _] = program.block_index;
        let mut seen = std::collections::BTreeSet::new();
        for y in 0..5 {
            for x in 0..7 {
                let env = |v| (v == hx).then_some(x).or((v == hy).then_some(y));
                let got = (
                    program.exprs.eval(*col, &env).expect("evaluates"),
                    program.exprs.eval(*row, &env).expect("evaluates"),
                );
                assert_eq!(got, rasterized(x, y, [7, 5], 3, column), "block ({x}, {y})");
                seen.insert(got);
            }
        }
        assert_eq!(seen.len(), 35, "a permutation of the grid");
        // And the emulator finds every output element written with the right value.
        let mut tensors = make_tensors(&program, &[], 7, false).expect("shapes evaluate");
        run_program(&program, &mut tensors, &[]).expect("runs");
        assert_eq!(tensors[1].values, tensors[0].values);
    }
}

/// The project's `examples/views.py`, lowered (one launch) for instance `index` of `kernel`, with
/// its layouts.
fn lowered_example(kernel: &str) -> (tilec_ir::ThreadProgram, String) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/views.py");
    let text = std::fs::read_to_string(&path).expect("examples/views.py is readable");
    on_analysis_stack(|| {
        let db = tilec_db::RootDatabase::default();
        let source = tilec_tests::source_file(&db, path.clone(), text);
        let instance = tilec_tests::instance(&db, source, kernel, 0);
        let layouts = tilec_db::layouts(&db, instance);
        let world = tilec_db::kernel_world(&db, instance);
        let described: Vec<String> = layouts
            .buffers
            .iter()
            .map(|(&buffer, inferred)| {
                format!(
                    "{}: {}",
                    world.name(buffer),
                    inferred.layout.describe(&layouts.exprs)
                )
            })
            .collect();
        let programs = tilec_db::thread_programs(&db, instance);
        let program = programs.as_ref().as_ref().expect("lowers")[0].clone();
        (program, described.join("\n"))
    })
}

#[test]
fn a_fragment_reshape_shares_its_base_layout_and_registers() {
    let (program, layouts) = lowered_example("doubled_row_sums");
    // `rows` is `flat` seen as 4 x 64: the same thread and register for every element.
    expect_test::expect![[r#"
        flat: thread i // 2 | index (i % 2) | replicate 1
        rows: thread i * 32 + j // 2 | index (j % 2) | replicate 1
        sums: thread i * 32 + rep | index (0) | replicate 32"#]]
    .assert_eq(&layouts);
    let registers: Vec<&str> = program
        .buffers
        .iter()
        .filter(|b| b.memory == tilec_ir::thread::Memory::Local && b.name.starts_with("flat"))
        .map(|b| b.name.as_str())
        .collect();
    assert_eq!(
        registers,
        ["flat"],
        "one register array for `flat` and its view"
    );
    let mut tensors = make_tensors(&program, &[], 3, false).expect("shapes evaluate");
    run_program(&program, &mut tensors, &[]).expect("runs");
    let expected: Vec<f64> = rows(&tensors[0])
        .iter()
        .map(|row| row.iter().map(|x| 2.0 * x).sum())
        .collect();
    assert_matches("Y", &tensors[1], expected);
}

#[test]
fn views_of_a_global_tensor_and_a_shared_tile_address_their_base() {
    let (program, _) = lowered_example("tiles_through_views");
    assert_eq!(
        program.shared_bytes,
        8 * 64 * 4,
        "the view allocates nothing"
    );
    let mut tensors = make_tensors(&program, &[], 5, false).expect("shapes evaluate");
    run_program(&program, &mut tensors, &[]).expect("runs");
    let expected = map(&tensors[0], |x| x + 1.0);
    assert_matches("B", &tensors[1], expected);
}
