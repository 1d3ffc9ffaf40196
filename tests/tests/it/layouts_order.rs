//! Layout inference in TileLang's order (issue 31, item 9): strict sources and common-level
//! propagation decide before any loop is planned freely, and a free plan that would put a
//! reduction's result on the wrong threads loses to one that follows it. Each mechanism has a
//! small kernel written here: its exact layouts, no error, and an emulator run against a
//! reference computed here.

use tilec_db::{RootDatabase, file_diagnostics, instances, kernel_world, layouts, thread_programs};
use tilec_ir::{Severity, ThreadProgram};
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::{HostTensor, run_program};
use tilec_tests::{assert_matches, on_analysis_stack, source_file};

/// The error messages of `source`.
fn errors(db: &RootDatabase, file: tilec_db::SourceFile) -> Vec<String> {
    file_diagnostics(db, file)
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| d.message.clone())
        .collect()
}

/// `(thread, index, replicate)` of each named fragment of the first instance of `source`, which
/// must check without an error.
fn fragment_layouts(source: &str, names: &[&str]) -> Vec<(String, String, i64)> {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    on_analysis_stack(move || {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/order.py", source);
        let errors = errors(&db, file);
        assert!(errors.is_empty(), "{errors:#?}");
        let instance = instances(&db, file)[0];
        let world = kernel_world(&db, instance);
        let layouts = layouts(&db, instance);
        names
            .iter()
            .map(|name| {
                let (_, inferred) = layouts
                    .buffers
                    .iter()
                    .find(|(entity, _)| world.name(**entity) == name)
                    .unwrap_or_else(|| panic!("no layout for {name}"));
                let layout = &inferred.layout;
                let show = |e| layouts.exprs.display(e).to_string();
                let index: Vec<String> = layout.index.iter().map(|&e| show(e)).collect();
                (show(layout.thread), index.join(", "), layout.replicate)
            })
            .collect()
    })
}

/// Lowers the first instance of `source`, runs it on seeded inputs and returns the tensors.
fn run(source: &str) -> Vec<HostTensor> {
    let program: ThreadProgram = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let file = source_file(&db, "/kernels/order.py", source);
        let instance = instances(&db, file)[0];
        match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs[0].clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:#?}"),
        }
    });
    let mut tensors = make_tensors(&program, &[], 7, false).expect("shapes evaluate");
    run_program(&program, &mut tensors, &[]).expect("the emulator runs it");
    tensors
}

/// `logsum` is first touched by `T.fill` (a loop free to be planned) and later tied to the row
/// sums of a gemm accumulator by `logsum[i] = logsum[i] * half[i] + row_sum[i]`. Planning the fill
/// first (one register, each row on threads `i` and `i + 64`) puts `row_sum[i]` on threads that do
/// not hold it; TileLang lets the reduction decide through that loop, and so does tilec now.
const ROW_STATS: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def row_stats():
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((64, 32), "float16"), L: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((64, 32), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            row_sum = T.alloc_fragment((64,), "float32")
            logsum = T.alloc_fragment((64,), "float32")
            half = T.alloc_shared((64,), "float32")
            T.fill(logsum, 0)
            for i in T.Parallel(64):
                half[i] = 0.5
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, transpose_B=True, clear_accum=True)
            T.reduce_sum(acc, row_sum, dim=1)
            for k in T.serial(2):
                for i in T.Parallel(64):
                    logsum[i] = logsum[i] * half[i] + row_sum[i]
            T.copy(logsum, L)

    return main


row_stats()
"#;

#[test]
fn a_fill_is_planned_after_the_reduction_decides_through_the_common_level() {
    let found = fragment_layouts(ROW_STATS, &["row_sum", "logsum"]);
    let reduced = (
        "i // 16 * 32 + i % 8 * 4 + rep".to_owned(),
        "i % 16 // 8".to_owned(),
        4,
    );
    assert_eq!(found, vec![reduced.clone(), reduced]);
}

#[test]
fn a_fill_planned_after_the_reduction_computes_the_row_sums() {
    let tensors = run(ROW_STATS);
    let (a, b) = (&tensors[0].values, &tensors[1].values);
    let expected = (0..64)
        .map(|i| {
            let row: f64 = (0..64)
                .map(|j| (0..32).map(|k| a[i * 32 + k] * b[j * 32 + k]).sum::<f64>())
                .sum();
            // Two steps of `logsum = logsum * 0.5 + row` from 0.
            1.5 * row
        })
        .collect();
    assert_matches("L", &tensors[2], expected);
}

/// A `T.Parallel` loop inside `T.serial(k)` reads `rows[k, j]`: one row per `k`. Deriving the
/// loop's layout from `rows` would make it a function of `k` (TileLang's examples
/// `flash_decoding/example_gqa_decode.py` and `example_mha_inference.py` combine the splits this
/// way); `k` is a serial variable of the loop, so each thread keeps its column of every row and
/// the reduction over rows stays in registers.
const COMBINE: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def combine():
    @T.prim_func
    def main(G: T.Tensor((4, 128), "float32"), O: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            rows = T.alloc_fragment((4, 128), "float32")
            row_max = T.alloc_fragment((128,), "float32")
            total = T.alloc_fragment((128,), "float32")
            T.clear(total)
            for k, j in T.Parallel(4, 128):
                rows[k, j] = G[k, j]
            T.reduce_max(rows, row_max, dim=0, clear=True)
            for k in T.serial(4):
                for j in T.Parallel(128):
                    total[j] += T.exp2(rows[k, j] - row_max[j])
            T.copy(total, O)

    return main


combine()
"#;

#[test]
fn a_fragment_row_chosen_by_an_enclosing_serial_loop_stays_in_registers() {
    let found = fragment_layouts(COMBINE, &["rows", "row_max", "total"]);
    let column = ("i".to_owned(), "0".to_owned(), 1);
    assert_eq!(
        found,
        vec![("j".to_owned(), "i".to_owned(), 1), column.clone(), column]
    );
}

#[test]
fn a_fragment_row_chosen_by_an_enclosing_serial_loop_combines_the_rows() {
    let tensors = run(COMBINE);
    let g = &tensors[0].values;
    let expected = (0..128)
        .map(|j| {
            let max = (0..4).map(|k| g[k * 128 + j]).fold(f64::MIN, f64::max);
            (0..4).map(|k| (g[k * 128 + j] - max).exp2()).sum()
        })
        .collect();
    assert_matches("O", &tensors[1], expected);
}

/// Dequantization as TileLang's `dequantize_gemm` examples write it: packed 4-bit values are
/// copied from shared memory into a fragment of bytes, unpacked by a `T.Parallel` loop that reads
/// `B_local[i, j // 2]` into a fragment the gemm then reads as its register A operand. The gemm
/// decides `B_deq`'s layout (through the fragment copy), the unpacking loop follows it, and the
/// byte fragment is derived from the loop through `j // 2` — the two iterations that read one
/// byte run on one thread — so the copy from shared memory fills it where it is read. Laying the
/// bytes out at the copy, as its first access, was a false `layout-conflict`.
const PACKED_BYTES: &str = include_str!("../../fixtures/kernels/packed_dequant.py");

#[test]
fn a_packed_byte_fragment_is_derived_through_the_unpacking_loop() {
    let layouts = fragment_layouts(PACKED_BYTES, &["B_local", "B_deq"]);
    // wgmma's A operand: a warp holds two 16-row slabs 64 rows apart; one copy per warp column.
    assert_eq!(
        layouts[1],
        (
            "i % 64 // 16 * 32 + i % 8 * 4 + j % 8 // 2 + rep * 128".to_owned(),
            "i // 64 * 8 + i % 16 // 8 * 2 + j // 16 * 16 + j % 16 // 8 * 4 + j % 2".to_owned(),
            2
        )
    );
    // Each byte sits with the two values it holds: byte `j` of a row with columns `2j, 2j + 1`.
    assert_eq!(
        layouts[0],
        (
            "i % 64 // 16 * 32 + i % 8 * 4 + j % 4 + rep * 128".to_owned(),
            "i // 64 * 4 + i % 16 // 8 + j // 8 * 8 + j % 8 // 4 * 2".to_owned(),
            2
        )
    );
}

#[test]
fn a_packed_byte_fragment_unpacks_into_the_gemm() {
    let tensors = run(PACKED_BYTES);
    let (a, b) = (&tensors[0].values, &tensors[1].values);
    let nibble = |n: usize, k: usize| {
        // B holds uint8 values, whole numbers that `as u8` keeps.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let byte = b[n * 32 + k / 2] as u8;
        f64::from((byte >> (k % 2 * 4)) & 15)
    };
    let expected = (0..128 * 128)
        .map(|at| {
            let (n, m) = (at / 128, at % 128);
            (0..64).map(|k| nibble(n, k) * a[m * 64 + k]).sum()
        })
        .collect();
    assert_matches("Ct", &tensors[2], expected);
}

/// A tf32 gemm whose A operand is a register fragment (`T.gemm(Q_t, dO_shared, acc,
/// transpose_B=True)`, as in TileLang's `gdn/example_chunk_delta_bwd.py`) runs on wgmma as its
/// shared-memory sibling does, so the two accumulators share a layout and a loop may combine them
/// element by element. The A operand's registers are tf32's: one element per lane and 8×4 atom.
const TF32_REGISTER_OPERAND: &str = include_str!("../../fixtures/kernels/tf32_register_operand.py");

#[test]
fn a_tf32_register_operand_runs_on_wgmma_beside_its_shared_memory_sibling() {
    let layouts = fragment_layouts(TF32_REGISTER_OPERAND, &["first", "second", "Q_t"]);
    assert_eq!(layouts[0], layouts[1]);
    assert_eq!(
        layouts[2],
        (
            "i // 16 * 32 + i % 8 * 4 + j % 4".to_owned(),
            "i % 16 // 8 + j // 4 * 2".to_owned(),
            1
        )
    );
}
