//! Comparison of a kernel's result with a reference (the emulator's output, or an `.npy` file), and
//! the tolerance each dtype is judged by.
//!
//! The verdict uses the relative error of the whole tensor, ‖actual − expected‖₂ / ‖expected‖₂: GPU
//! and emulator legitimately differ in the last bits (fused multiply-add, summation order), and a norm
//! over the tensor tolerates that while still catching a wrong element of ordinary size. The element
//! count of mismatches and the first of them are reported beside it, to point at where things go wrong.

use std::fmt;

use tilec_ir::DType;
use tilec_ir::thread::{Stmt, ThreadProgram, any_stmt};

use crate::tensor::HostTensor;

/// The largest relative error a result of `dtype` may have and still pass: 1e-4 for fp32 and fp64,
/// 1e-2 for fp16, bf16 and tf32 (ten fraction bits, as fp16), 1e-1 for fp8 (three mantissa bits at
/// most), 0.2 for fp4 (one mantissa bit: its rounding errs by a sixth at most, and neighbouring
/// values differ by a third at least), and 0 (exact) for integers and booleans.
pub fn tolerance_for(dtype: DType) -> f64 {
    match dtype {
        DType::Float32 | DType::Float64 => 1e-4,
        DType::Float16 | DType::BFloat16 | DType::TFloat32 => 1e-2,
        DType::Float8E4M3 | DType::Float8E5M2 => 1e-1,
        DType::Float4E2M1 => 0.2,
        DType::Bool
        | DType::Int8
        | DType::Int16
        | DType::Int32
        | DType::Int64
        | DType::UInt8
        | DType::UInt16
        | DType::UInt32
        | DType::UInt64
        | DType::Int4
        | DType::UInt4 => 0.0,
    }
}

/// The relative error a floating-point result of an fp8 `wgmma` may have against the emulator's
/// exact sums. Hopper's tensor cores add fp8 products in wgmma with fewer bits than fp32 (about
/// 14, as DeepSeek-V3's report measured; mma.sync on the same GPU sums exactly), which the
/// emulator does not model. Measured on an H200 with tilec's fp8 fixture
/// (`tests/fixtures/kernels/gemm_dtypes.py`, instances 6 and 7): 0.7–1.0e-4 at K = 128 and
/// 1.1–1.7e-4 at K = 256, growing about as the square root of K; the bound leaves room for
/// K = 16384. A misplaced or missing element costs far more than that.
pub const FP8_WGMMA_TOLERANCE: f64 = 2e-3;

/// The tolerance a result of `dtype` written by `program` is judged by: the dtype's, or wider when
/// the program sums on hardware whose precision the emulator does not reproduce (fp8 `wgmma`).
pub fn tolerance_in(program: &ThreadProgram, dtype: DType) -> f64 {
    let by_dtype = tolerance_for(dtype);
    if by_dtype == 0.0 || !sums_fp8_on_wgmma(program) {
        return by_dtype;
    }
    by_dtype.max(FP8_WGMMA_TOLERANCE)
}

fn sums_fp8_on_wgmma(program: &ThreadProgram) -> bool {
    let fp8 = |buffer: tilec_ir::thread::BufferId| {
        program
            .buffers
            .get(buffer.index())
            .is_some_and(|decl| matches!(decl.dtype, DType::Float8E4M3 | DType::Float8E5M2))
    };
    any_stmt(
        &program.body,
        |stmt| matches!(stmt, Stmt::Wgmma { b, .. } if fp8(b.buffer)),
    )
}

/// One element that differs by more than the expected dtype's tolerance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mismatch {
    /// Row-major index into the tensor.
    pub index: usize,
    pub actual: f64,
    pub expected: f64,
}

/// How far a result is from the reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Whether the shapes agree. When they do not, the common prefix of the elements is compared.
    pub shape_matches: bool,
    /// How many elements were compared.
    pub compared: usize,
    /// ‖actual − expected‖₂ / ‖expected‖₂, or ‖actual − expected‖₂ itself when the reference is all
    /// zeros (so a zero result matches a zero reference with error 0).
    pub relative_error: f64,
    pub max_abs_error: f64,
    /// The first element whose error exceeds the dtype's tolerance relative to max(1, |expected|).
    pub first_mismatch: Option<Mismatch>,
    /// How many elements exceed that tolerance.
    pub mismatches: usize,
    /// Elements where exactly one of the two is NaN. A NaN in both places is a match (a reference
    /// can legitimately hold NaN); these elements are left out of the norms.
    pub nan_count: usize,
}

impl Comparison {
    /// The verdict: same shape, no unexpected NaN, and a relative error within `tolerance`.
    pub fn passes(&self, tolerance: f64) -> bool {
        self.shape_matches
            && self.nan_count == 0
            && self.relative_error.is_finite()
            && self.relative_error <= tolerance
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.shape_matches {
            f.write_str("shapes differ; ")?;
        }
        write!(
            f,
            "relative error {:.3e}, max abs error {:.3e}, {} of {} elements mismatch",
            self.relative_error, self.max_abs_error, self.mismatches, self.compared
        )?;
        if let Some(mismatch) = self.first_mismatch {
            write!(
                f,
                " (first at index {}: {} instead of {})",
                mismatch.index, mismatch.actual, mismatch.expected
            )?;
        }
        if self.nan_count > 0 {
            write!(f, ", {} unexpected NaN", self.nan_count)?;
        }
        Ok(())
    }
}

/// Compares `actual` with `expected`, element by element in row-major order. The element tolerance
/// (for `first_mismatch` and `mismatches`) is the one of `expected`'s dtype.
pub fn compare(actual: &HostTensor, expected: &HostTensor) -> Comparison {
    let tolerance = tolerance_for(expected.dtype);
    let compared = actual.values.len().min(expected.values.len());
    let mut difference_squares = 0.0;
    let mut expected_squares = 0.0;
    let mut max_abs_error: f64 = 0.0;
    let mut first_mismatch = None;
    let mut mismatches = 0;
    let mut nan_count = 0;
    for (index, (&a, &e)) in actual.values.iter().zip(&expected.values).enumerate() {
        if a.is_nan() || e.is_nan() {
            if a.is_nan() != e.is_nan() {
                nan_count += 1;
                mismatches += 1;
                first_mismatch.get_or_insert(Mismatch {
                    index,
                    actual: a,
                    expected: e,
                });
            }
            continue;
        }
        // Equal infinities subtract to NaN, so equality is tested first.
        let error = if a == e { 0.0 } else { (a - e).abs() };
        if error > tolerance * e.abs().max(1.0) {
            mismatches += 1;
            first_mismatch.get_or_insert(Mismatch {
                index,
                actual: a,
                expected: e,
            });
        }
        max_abs_error = max_abs_error.max(error);
        difference_squares += error * error;
        if e.is_finite() {
            expected_squares += e * e;
        }
    }
    let difference_norm = f64::sqrt(difference_squares);
    let relative_error = if expected_squares > 0.0 {
        difference_norm / expected_squares.sqrt()
    } else {
        difference_norm
    };
    Comparison {
        shape_matches: actual.shape == expected.shape,
        compared,
        relative_error,
        max_abs_error,
        first_mismatch,
        mismatches,
        nan_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(dtype: DType, values: &[f64]) -> HostTensor {
        HostTensor {
            dtype,
            shape: vec![values.len()],
            values: values.to_vec(),
        }
    }

    #[test]
    fn identical_tensors_pass_with_zero_error() {
        let a = HostTensor::random(DType::Float32, &[8, 8], 5);
        let comparison = compare(&a, &a);
        assert_eq!(comparison.relative_error, 0.0);
        assert_eq!(comparison.max_abs_error, 0.0);
        assert_eq!(comparison.first_mismatch, None);
        assert!(comparison.passes(0.0));
    }

    #[test]
    fn relative_error_is_the_norm_ratio() {
        let expected = tensor(DType::Float32, &[3.0, 4.0]);
        let actual = tensor(DType::Float32, &[3.0, 4.5]);
        let comparison = compare(&actual, &expected);
        assert!((comparison.relative_error - 0.1).abs() < 1e-12);
        assert_eq!(comparison.max_abs_error, 0.5);
        assert_eq!(
            comparison.first_mismatch,
            Some(Mismatch {
                index: 1,
                actual: 4.5,
                expected: 4.0
            })
        );
        assert_eq!(comparison.mismatches, 1);
        assert!(!comparison.passes(tolerance_for(DType::Float32)));
        assert!(comparison.passes(0.2));
        assert!(comparison.to_string().contains("first at index 1"));
    }

    #[test]
    fn small_float_noise_passes_but_is_not_a_mismatch() {
        let expected = tensor(DType::Float32, &[1.0, -2.0, 0.5]);
        let actual = tensor(DType::Float32, &[1.0 + 1e-7, -2.0, 0.5 - 1e-7]);
        let comparison = compare(&actual, &expected);
        assert!(comparison.passes(tolerance_for(DType::Float32)));
        assert_eq!(comparison.mismatches, 0);
    }

    #[test]
    fn zero_reference_uses_the_absolute_norm() {
        let zeros = tensor(DType::Float32, &[0.0, 0.0]);
        assert_eq!(compare(&zeros, &zeros).relative_error, 0.0);
        let comparison = compare(&tensor(DType::Float32, &[0.0, 2.0]), &zeros);
        assert_eq!(comparison.relative_error, 2.0);
        assert!(!comparison.passes(1e-4));
    }

    #[test]
    fn nans_and_infinities() {
        let expected = tensor(DType::Float32, &[f64::NAN, 1.0, f64::INFINITY]);
        let same = compare(&expected, &expected);
        assert_eq!(same.nan_count, 0);
        assert!(same.passes(0.0), "{same}");
        let actual = tensor(DType::Float32, &[f64::NAN, f64::NAN, f64::INFINITY]);
        let comparison = compare(&actual, &expected);
        assert_eq!(comparison.nan_count, 1);
        assert_eq!(
            comparison.first_mismatch.map(|mismatch| mismatch.index),
            Some(1)
        );
        assert!(!comparison.passes(1.0));
        let infinite = compare(&tensor(DType::Float32, &[0.0, 1.0, 1.0]), &expected);
        assert!(!infinite.passes(1.0), "{infinite}");
    }

    #[test]
    fn integers_must_match_exactly() {
        let expected = tensor(DType::Int32, &[1.0, 2.0, 3.0]);
        let off_by_one = compare(&tensor(DType::Int32, &[1.0, 2.0, 4.0]), &expected);
        assert_eq!(off_by_one.mismatches, 1);
        assert!(!off_by_one.passes(tolerance_for(DType::Int32)));
        assert!(compare(&expected, &expected).passes(tolerance_for(DType::Int32)));
    }

    #[test]
    fn shape_mismatch_fails() {
        let a = HostTensor::zeros(DType::Float32, &[2, 3]);
        let b = HostTensor::zeros(DType::Float32, &[3, 2]);
        let comparison = compare(&a, &b);
        assert!(!comparison.shape_matches);
        assert_eq!(comparison.compared, 6);
        assert!(!comparison.passes(1.0));
        let shorter = compare(&HostTensor::zeros(DType::Float32, &[4]), &b);
        assert_eq!(shorter.compared, 4);
    }

    #[test]
    fn tolerances_per_dtype() {
        assert_eq!(tolerance_for(DType::Float32), 1e-4);
        assert_eq!(tolerance_for(DType::Float64), 1e-4);
        assert_eq!(tolerance_for(DType::Float16), 1e-2);
        assert_eq!(tolerance_for(DType::BFloat16), 1e-2);
        assert_eq!(tolerance_for(DType::Int8), 0.0);
        assert_eq!(tolerance_for(DType::Bool), 0.0);
    }
}
