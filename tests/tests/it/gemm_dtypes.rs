//! `T.gemm` on tf32 (float32 operands), fp8 (e4m3, e5m2) and 8-bit integer operands: lowered for
//! sm_80 (mma.sync m16n8k8 and m16n8k32) and sm_90 (wgmma where layout inference chose it, for
//! K-major fp8 and integer operands; mma.sync otherwise), run in the emulator and compared with
//! references computed here in plain loops over the same inputs, for B stored K×N and N×K. The
//! CUDA is checked for the instruction each form must use; `bench/gpu_session_checks.sh` runs the
//! same kernels on the GPU.

use tilec_db::{RootDatabase, Settings, thread_programs};
use tilec_ir::dtype::round_to_tf32;
use tilec_ir::{DType, Target};
use tilec_runtime::HostTensor;
use tilec_runtime::inputs::make_tensors;
use tilec_runtime::run_program;
use tilec_tests::{instance, on_analysis_stack, source_file};

const GEMM_DTYPES: &str = include_str!("../../fixtures/kernels/gemm_dtypes.py");

/// The fixture's instances: operand dtype and whether B is stored N×K, by instance index.
const INSTANCES: [(DType, bool); 12] = [
    (DType::Float32, false),
    (DType::Float8E4M3, false),
    (DType::Float8E5M2, false),
    (DType::Int8, false),
    (DType::UInt8, false),
    (DType::Float32, true),
    (DType::Float8E4M3, true),
    (DType::Float8E5M2, true),
    (DType::Int8, true),
    (DType::UInt8, true),
    (DType::TFloat32, false),
    (DType::TFloat32, true),
];

/// The tensors after a run in the emulator and the kernel's CUDA, or the lowering's diagnostics.
fn run(target: Target, index: u32) -> Result<(Vec<HostTensor>, String), String> {
    on_analysis_stack(|| {
        let db = RootDatabase::default();
        let _settings = Settings::builder(target, Vec::new()).new(&db);
        let file = source_file(&db, "/kernels/gemm_dtypes.py", GEMM_DTYPES);
        let instance = instance(&db, file, "gemm", index);
        let programs = match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs.clone(),
            Err(diagnostics) => return Err(format!("{diagnostics:?}")),
        };
        let program = &programs[0];
        let mut tensors =
            make_tensors(program, &[], 11 + u64::from(index), false).expect("the shapes evaluate");
        run_program(program, &mut tensors, &[]).expect("the emulator runs the gemm");
        Ok((tensors, tilec_passes::cuda::emit_cuda(program, &target)))
    })
}

/// Compares C with `A × B` computed here: exactly (wrapping at 32 bits) for integers; for floats
/// within the fp32 rounding of the instructions' partial sums, after rounding every input to tf32
/// for float32 operands. For tf32 it also checks that the rounding mattered, so that a run that
/// skipped it would fail.
fn check(tensors: &[HostTensor], dtype: DType, transposed: bool, what: &str) {
    let (a, b, c) = (&tensors[0], &tensors[1], &tensors[2]);
    let (m, k, n) = (a.shape[0], a.shape[1], c.shape[1]);
    let b_at = |l: usize, j: usize| {
        if transposed {
            b.values[j * k + l]
        } else {
            b.values[l * n + j]
        }
    };
    // float32 inputs are rounded by the gemm; tfloat32 ones are tf32 values already.
    let tf32 = dtype == DType::Float32;
    let input = |x: f64| if tf32 { round_to_tf32(x) } else { x };
    let mut rounding_seen = 0.0f64;
    for i in 0..m {
        for j in 0..n {
            let products = (0..k).map(|l| (a.values[i * k + l], b_at(l, j)));
            let exact: f64 = products.clone().map(|(x, y)| input(x) * input(y)).sum();
            let got = c.values[i * n + j];
            if dtype.is_int() {
                // The int32 accumulator wraps; `exact` is a whole number far inside i64.
                #[allow(clippy::cast_possible_truncation)]
                let wrapped = f64::from(exact as i64 as i32);
                assert_eq!(got, wrapped, "{what}: C[{i}, {j}]");
                continue;
            }
            let magnitude: f64 = products.clone().map(|(x, y)| (x * y).abs()).sum();
            let allowed = 1e-6 * magnitude + 1e-30;
            assert!(
                (got - exact).abs() <= allowed,
                "{what}: C[{i}, {j}] is {got}, the reference {exact} (sum of |products| {magnitude})"
            );
            if tf32 {
                let unrounded: f64 = products.map(|(x, y)| x * y).sum();
                rounding_seen = rounding_seen.max((got - unrounded).abs() / magnitude);
            }
        }
    }
    if tf32 {
        assert!(
            rounding_seen > 1e-5,
            "{what}: the inputs' rounding to tf32 never showed ({rounding_seen})"
        );
    }
}

/// Every instance on `target`: the result, and the mma form in the CUDA.
fn every_instance(target: Target) {
    for (index, &(dtype, transposed)) in INSTANCES.iter().enumerate() {
        let what = format!("{target} {dtype} transpose_B={transposed}");
        let fp8 = matches!(dtype, DType::Float8E4M3 | DType::Float8E5M2);
        let ran = run(target, u32::try_from(index).expect("a few instances"));
        if fp8 && target == Target::Sm80 {
            let error = ran.err().unwrap_or_default();
            assert!(
                error.contains("sm_89 and newer") && error.contains("m16n8k32"),
                "{what}: {error}"
            );
            continue;
        }
        let (tensors, cuda) = ran.unwrap_or_else(|error| panic!("{what}: {error}"));
        check(&tensors, dtype, transposed, &what);
        let suffix = match dtype {
            DType::Float8E4M3 => "e4m3",
            DType::Float8E5M2 => "e5m2",
            DType::Int8 => "s8",
            DType::UInt8 => "u8",
            _ => "tf32",
        };
        // wgmma where CheckWgmma allows it: K-major tfloat32, fp8 and 8-bit integers on sm_90.
        let wgmma = target == Target::Sm90 && transposed && dtype != DType::Float32;
        let depth = if suffix == "tf32" { 8 } else { 32 };
        let instruction = match dtype {
            _ if wgmma => {
                let accumulator = if dtype.is_int() { "s32" } else { "f32" };
                format!(
                    "wgmma.mma_async.sync.aligned.m64n64k{depth}.{accumulator}.{suffix}.{suffix}"
                )
            }
            DType::Float32 | DType::TFloat32 => "tl_mma_m16n8k8_tf32(".to_owned(),
            _ => format!("tl_mma_m16n8k32_{suffix}_{suffix}("),
        };
        assert!(cuda.contains(&instruction), "{what}: no {instruction}");
        if !wgmma {
            // A is K-major, so ldmatrix reads it; B only when it is too (no `.trans` for 8-bit
            // and 32-bit elements).
            assert!(
                cuda.contains("tl_ldmatrix_x4(a_frag"),
                "{what}: A not by ldmatrix"
            );
            assert_eq!(
                cuda.contains("tl_ldmatrix_x4(b_frag"),
                transposed,
                "{what}: B by ldmatrix"
            );
            for operand in ["a_frag", "b_frag"] {
                let trans = format!("_trans({operand}");
                assert!(
                    !cuda.contains(&trans),
                    "{what}: ldmatrix.trans into {operand}"
                );
            }
        }
    }
}

#[test]
fn tf32_fp8_and_int8_gemms_run_on_mma_sync_for_sm80() {
    every_instance(Target::Sm80);
}

#[test]
fn tf32_fp8_and_int8_gemms_run_on_wgmma_or_mma_sync_for_sm90() {
    every_instance(Target::Sm90);
}

/// A tf32 gemm whose A operand is a register fragment (the shape of TileLang's
/// `gdn/example_chunk_delta_bwd.py`) beside a 16-bit one: on sm_90 both run on wgmma, the tf32
/// one with A from registers (four tf32 registers per thread and k8 step). Checked against
/// `O = tf32(Q) · tf32(D)ᵀ − Wᵀ · W`.
const TF32_REGISTER_OPERAND: &str = include_str!("../../fixtures/kernels/tf32_register_operand.py");

#[test]
fn a_tf32_register_operand_runs_on_wgmma_from_registers() {
    let (tensors, cuda) = on_analysis_stack(|| {
        let db = RootDatabase::default();
        let _settings = Settings::builder(Target::Sm90, Vec::new()).new(&db);
        let file = source_file(
            &db,
            "/kernels/tf32_register_operand.py",
            TF32_REGISTER_OPERAND,
        );
        let instance = instance(&db, file, "combined", 0);
        let programs = match thread_programs(&db, instance).as_ref() {
            Ok(programs) => programs.clone(),
            Err(diagnostics) => panic!("cannot lower: {diagnostics:?}"),
        };
        let mut tensors = make_tensors(&programs[0], &[], 5, false).expect("the shapes evaluate");
        run_program(&programs[0], &mut tensors, &[]).expect("the emulator runs it");
        let cuda = tilec_passes::cuda::emit_cuda(&programs[0], &Target::Sm90);
        (tensors, cuda)
    });
    assert!(
        cuda.contains("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32")
            && cuda.contains("_tf32_rs_t0("),
        "the tf32 gemm is not a wgmma with A from registers"
    );
    let (q, d, w, o) = (&tensors[0], &tensors[1], &tensors[2], &tensors[3]);
    for i in 0..64 {
        for j in 0..64 {
            let first = (0..64)
                .map(|k| round_to_tf32(q.values[i * 64 + k]) * round_to_tf32(d.values[j * 64 + k]));
            let second = (0..64).map(|k| w.values[k * 64 + i] * w.values[k * 64 + j]);
            let exact: f64 = first.clone().sum::<f64>() - second.clone().sum::<f64>();
            let magnitude: f64 = first.chain(second).map(f64::abs).sum();
            let got = o.values[i * 64 + j];
            assert!(
                (got - exact).abs() <= 1e-6 * magnitude + 1e-30,
                "O[{i}, {j}] is {got}, the reference {exact}"
            );
        }
    }
}

/// `tilec run --check` judges an fp8 gemm on wgmma with Hopper's fp8 accumulation in mind (its
/// sums keep fewer bits than the emulator's, measured on an H200), and every other gemm, fp8 on
/// mma.sync included, by its output dtype alone.
#[test]
fn fp8_wgmma_results_are_checked_with_the_hardwares_precision() {
    let tolerance = |target: Target, index: u32| {
        on_analysis_stack(|| {
            let db = RootDatabase::default();
            let _settings = Settings::builder(target, Vec::new()).new(&db);
            let file = source_file(&db, "/kernels/gemm_dtypes.py", GEMM_DTYPES);
            let instance = instance(&db, file, "gemm", index);
            let programs = thread_programs(&db, instance);
            let program = &programs.as_ref().as_ref().expect("it lowers")[0];
            (
                tilec_runtime::tolerance_in(program, DType::Float32),
                tilec_runtime::tolerance_in(program, DType::Int32),
            )
        })
    };
    let wgmma = tilec_runtime::FP8_WGMMA_TOLERANCE;
    assert_eq!(tolerance(Target::Sm90, 6), (wgmma, 0.0));
    assert_eq!(tolerance(Target::Sm90, 7), (wgmma, 0.0));
    assert_eq!(tolerance(Target::Sm90, 1), (1e-4, 0.0));
    assert_eq!(tolerance(Target::Sm90, 10), (1e-4, 0.0));
    assert_eq!(tolerance(Target::Sm90, 8), (1e-4, 0.0));
}
