//! A `T.gemm` whose A operand is a fragment: layout inference gives the fragment the register
//! layout the gemm's instruction reads (wgmma on sm_90, mma.sync on sm_80), as TileLang's gemm
//! does at its strict level, so that the loops filling it follow it instead of fixing it first.
//! The kernel is the shape of Mamba's chunk scan (a row scale read both by the loop that scales A
//! and, through another fragment, by the loop that scales the accumulator): a first-access layout
//! gave it a false `layout-conflict`. Checked, laid out, lowered and run in the emulator against a
//! reference computed here. Stands alone: the kernel is `examples/scaled_gemm.py`.

use tilec_db::{RootDatabase, Settings, file_diagnostics, instances, layouts, thread_programs};
use tilec_ir::{DType, Target};
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::run_program;
use tilec_runtime::tensor::round_to;
use tilec_tests::{assert_matches, on_analysis_stack, source_file};

const SCALED_GEMM: &str = include_str!("../../../examples/scaled_gemm.py");

/// Checks, lays out, lowers and runs the kernel for `target`; returns the described layout of
/// `a_local` and where it came from.
fn run_on(target: Target) -> String {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let _settings = Settings::builder(target, Vec::new()).new(&db);
        let file = source_file(&db, "/kernels/scaled_gemm.py", SCALED_GEMM);
        let errors: Vec<String> = file_diagnostics(&db, file)
            .iter()
            .map(|d| format!("{}: {}", d.code.name(), d.message))
            .collect();
        assert!(errors.is_empty(), "{target}: {errors:#?}");
        let instance = instances(&db, file)[0];
        let laid_out = layouts(&db, instance);
        let world = tilec_db::kernel_world(&db, instance);
        let a_local = laid_out
            .buffers
            .iter()
            .find(|(buffer, _)| world.name(**buffer) == "a_local")
            .map(|(_, inferred)| {
                format!(
                    "{} ({})",
                    inferred.layout.describe(&laid_out.exprs),
                    tilec_ide::describe::origin_words(world, inferred)
                )
            })
            .unwrap_or_default();
        let programs = match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs.clone(),
            Err(diagnostics) => panic!("{target}: cannot lower: {diagnostics:#?}"),
        };
        let mut t = make_tensors(&programs[0], &[], 5, false).expect("shapes evaluate");
        run_program(&programs[0], &mut t, &[]).expect("the emulator runs it");
        let (a, b, s) = (&t[0], &t[1], &t[2]);
        let (m, k, n) = (a.shape[0], a.shape[1], b.shape[1]);
        let mut expected = Vec::with_capacity(m * n);
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k)
                    .map(|l| {
                        round_to(DType::Float16, a.values[i * k + l] * s.values[i])
                            * b.values[l * n + j]
                    })
                    .sum();
                expected.push(dot * s.values[i] * 2.0);
            }
        }
        assert_matches("C", &t[3], expected);
        a_local
    })
}

#[test]
fn a_fragment_a_operand_takes_the_wgmma_register_layout_on_sm90() {
    let layout = run_on(Target::Sm90);
    // One warpgroup: warp w holds rows 16w..16w+15 on lanes i % 8 * 4 + j % 8 // 2, and the
    // eight registers of each 16×16 tile together: TileLang's formula for a register A operand.
    assert_eq!(
        layout,
        "thread i // 16 * 32 + i % 8 * 4 + j % 8 // 2 | index (i % 16 // 8 * 2 + j // 8 * 4 + j % 2) \
         | replicate 1 (T.gemm (tensor-core A operand))"
    );
}

#[test]
fn a_fragment_a_operand_takes_the_mma_register_layout_on_sm80() {
    let layout = run_on(Target::Sm80);
    // mma.sync splits 64×64 over 2×2 warps (Square): a warp row holds 32 rows, two 16-row micro
    // tiles, and both warps of the row hold a copy (replica `rep` is the warp column).
    assert_eq!(
        layout,
        "thread i // 32 * 32 + i % 8 * 4 + j % 8 // 2 + rep * 64 | index (i % 16 // 8 * 2 + \
         i % 32 // 16 * 8 + j // 16 * 16 + j % 16 // 8 * 4 + j % 2) | replicate 2 \
         (T.gemm (tensor-core A operand))"
    );
}
