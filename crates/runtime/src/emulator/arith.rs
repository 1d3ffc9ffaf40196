//! Element arithmetic: what one value node computes from its operands in one thread.
//!
//! Every value is carried as an `f64` holding a value of the node's dtype exactly. Float results are
//! computed in `f64` and rounded once to the node's dtype with [`round_to`]. For `+ - *` and `sqrt`
//! that equals the IEEE operation in the narrower format, because `f64` carries more than twice the
//! significand bits of `f32`, `f16` and `bf16` plus two, so the double rounding is innocuous. `/`
//! below `f64` is [`float_division`], the generated code's formula, rounded to the dtype. Other
//! intrinsics (`exp`, `tanh`, ...) are computed correctly rounded-ish in `f64`; the GPU's versions are
//! approximations, so results that use them match only up to a tolerance.
//!
//! Integer results are computed on `i64` and wrapped to the dtype's width, as C does for unsigned
//! types and as the GPU does for signed ones. Integer `/` truncates toward zero: TileLang's `/` on
//! integers is TVM's `tir.Div`, which has C semantics, and the CUDA printer prints it as C's `/`.
//! `//` and `%` are floor division and floor modulo (TVM's `floordiv`/`floormod`), for floats too.

use tilec_ir::DType;
use tilec_ir::data::{BinaryOp, CompareOp, Intrinsic};
use tilec_ir::expr::{floor_div, floor_mod};
use tilec_ir::thread::UnaryOp;

use crate::tensor::round_to;

/// `value` wrapped to the width and signedness of the integer dtype (`Bool` to 0 or 1).
// The truncating casts are that wrapping, on purpose.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]
pub(super) fn wrap_int(dtype: DType, value: i64) -> i64 {
    match dtype {
        DType::Bool => i64::from(value != 0),
        DType::Int8 => i64::from(value as i8),
        DType::Int16 => i64::from(value as i16),
        DType::Int32 => i64::from(value as i32),
        DType::UInt8 => i64::from(value as u8),
        DType::UInt16 => i64::from(value as u16),
        DType::UInt32 => i64::from(value as u32),
        _ => value,
    }
}

/// The value of an integer constant of `dtype`.
pub(super) fn int_constant(dtype: DType, value: i64) -> f64 {
    if dtype.is_float() {
        round_to(dtype, value as f64)
    } else {
        wrap_int(dtype, value) as f64
    }
}

/// The rounding to `dtype` as a plain function, chosen once for a batch of values.
// `as f32` is the rounding to single precision being modelled.
#[allow(clippy::cast_possible_truncation)]
pub(super) fn rounder(dtype: DType) -> fn(f64) -> f64 {
    match dtype {
        DType::Float64 => |x| x,
        DType::Float32 => |x| f64::from(x as f32),
        DType::Float16 => |x| half::f16::from_f64(x).to_f64(),
        DType::BFloat16 => |x| half::bf16::from_f64(x).to_f64(),
        DType::Bool => |x| f64::from(u8::from(x != 0.0)),
        DType::Int8 => |x| round_to(DType::Int8, x),
        DType::Int16 => |x| round_to(DType::Int16, x),
        DType::Int32 => |x| round_to(DType::Int32, x),
        DType::Int64 => |x| round_to(DType::Int64, x),
        DType::UInt8 => |x| round_to(DType::UInt8, x),
        DType::UInt16 => |x| round_to(DType::UInt16, x),
        DType::UInt32 => |x| round_to(DType::UInt32, x),
        DType::UInt64 => |x| round_to(DType::UInt64, x),
        DType::Float8E4M3 => |x| round_to(DType::Float8E4M3, x),
        DType::Float8E5M2 => |x| round_to(DType::Float8E5M2, x),
        DType::TFloat32 => crate::tensor::round_to_tf32,
        DType::Int4 => |x| round_to(DType::Int4, x),
        DType::UInt4 => |x| round_to(DType::UInt4, x),
        DType::Float4E2M1 => tilec_ir::dtype::round_to_e2m1,
    }
}

/// The common float operations that cannot fail, as plain functions of their operands, for the
/// widths kernels compute in; `None` for everything else (see [`binary`]).
// `as f32` is the rounding to single precision being modelled (exact for the narrower types'
// operands, which f32 holds).
#[allow(clippy::cast_possible_truncation)]
pub(super) fn fast_binary(op: BinaryOp, dtype: DType) -> Option<fn(f64, f64) -> f64> {
    let f: fn(f64, f64) -> f64 = match (op, dtype) {
        (BinaryOp::Add, DType::Float32) => |a, b| f64::from((a + b) as f32),
        (BinaryOp::Sub, DType::Float32) => |a, b| f64::from((a - b) as f32),
        (BinaryOp::Mul, DType::Float32) => |a, b| f64::from((a * b) as f32),
        (BinaryOp::Div, DType::Float32) => |a, b| f64::from(float_division(a as f32, b as f32)),
        (BinaryOp::Add, DType::Float64) => |a, b| a + b,
        (BinaryOp::Sub, DType::Float64) => |a, b| a - b,
        (BinaryOp::Mul, DType::Float64) => |a, b| a * b,
        (BinaryOp::Div, DType::Float64) => |a, b| a / b,
        (BinaryOp::Add, DType::Float16) => |a, b| half::f16::from_f64(a + b).to_f64(),
        (BinaryOp::Sub, DType::Float16) => |a, b| half::f16::from_f64(a - b).to_f64(),
        (BinaryOp::Mul, DType::Float16) => |a, b| half::f16::from_f64(a * b).to_f64(),
        (BinaryOp::Div, DType::Float16) => {
            |a, b| half::f16::from_f32(float_division(a as f32, b as f32)).to_f64()
        }
        (BinaryOp::Add, DType::BFloat16) => |a, b| half::bf16::from_f64(a + b).to_f64(),
        (BinaryOp::Sub, DType::BFloat16) => |a, b| half::bf16::from_f64(a - b).to_f64(),
        (BinaryOp::Mul, DType::BFloat16) => |a, b| half::bf16::from_f64(a * b).to_f64(),
        (BinaryOp::Div, DType::BFloat16) => {
            |a, b| half::bf16::from_f32(float_division(a as f32, b as f32)).to_f64()
        }
        _ => return None,
    };
    Some(f)
}

/// `a / b` as the generated code computes it for every float type narrower than `f64` (the
/// prelude's `tl_div`): the correctly rounded reciprocal, the first quotient, one fused correction
/// with the first quotient's sign, and the first quotient where the correction is NaN. It is IEEE
/// division wherever |a| and |b| lie in [2^-60, 2^60] (every pair of significands was checked on
/// a GPU, `bench/division_check.cu`) and for zeros, infinities and NaN. Near the ends of the
/// exponent range it may differ (in the last place for subnormal operands or quotients; a divisor
/// below 2^-128 has an infinite reciprocal and gives an infinite quotient), and the emulator
/// follows the GPU there too.
pub(crate) fn float_division(a: f32, b: f32) -> f32 {
    let reciprocal = 1.0 / b;
    let first = a * reciprocal;
    let corrected = (-b.mul_add(first, -a)).mul_add(reciprocal, first);
    if corrected.is_nan() {
        first
    } else {
        corrected.copysign(first)
    }
}

fn is_integral(dtype: DType) -> bool {
    !dtype.is_float()
}

// A value of an integer type is a whole number in the type's range, so `as i64` is exact.
#[allow(clippy::cast_possible_truncation)]
pub(super) fn unary(op: UnaryOp, dtype: DType, x: f64) -> Result<f64, String> {
    match op {
        UnaryOp::Neg if is_integral(dtype) => Ok(wrap_int(dtype, (x as i64).wrapping_neg()) as f64),
        UnaryOp::Neg => Ok(round_to(dtype, -x)),
        // `~x` on an integer flips its bits; on `bool` (and, leniently, on floats) it is `not`.
        UnaryOp::Not if dtype.is_int() => Ok(wrap_int(dtype, !(x as i64)) as f64),
        UnaryOp::Not => Ok(round_to(dtype, f64::from(u8::from(x == 0.0)))),
        UnaryOp::Intrinsic(intrinsic) => intrinsic_value(intrinsic, dtype, x),
        UnaryOp::Reinterpret { from } => Ok(crate::tensor::reinterpret_bits(from, dtype, x)),
    }
}

// A value of an integer type is a whole number in the type's range, so `as i64` is exact.
#[allow(clippy::cast_possible_truncation)]
fn intrinsic_value(intrinsic: Intrinsic, dtype: DType, x: f64) -> Result<f64, String> {
    let value = match intrinsic {
        Intrinsic::Abs if is_integral(dtype) => {
            return Ok(wrap_int(dtype, (x as i64).wrapping_abs()) as f64);
        }
        Intrinsic::Exp => x.exp(),
        Intrinsic::Exp2 => exp2(dtype, x),
        Intrinsic::Log => x.ln(),
        Intrinsic::Log2 => x.log2(),
        Intrinsic::Sqrt => x.sqrt(),
        Intrinsic::Rsqrt => 1.0 / x.sqrt(),
        Intrinsic::Abs => x.abs(),
        Intrinsic::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Intrinsic::Tanh => x.tanh(),
        // An integer is integral already; a float rounds in f64, exact for every narrower type.
        Intrinsic::Floor => x.floor(),
        Intrinsic::Ceil => x.ceil(),
        Intrinsic::Trunc => x.trunc(),
        Intrinsic::Round => x.round(),
        // Rust's standard library has no `erf`; libm's is the C library's, correctly rounded
        // to within an ulp of f64, far finer than the float32 the GPU's `erff` rounds to.
        Intrinsic::Erf => libm::erf(x),
        Intrinsic::Sin => x.sin(),
        Intrinsic::Cos => x.cos(),
        Intrinsic::Tan => x.tan(),
        Intrinsic::Sinh => x.sinh(),
        Intrinsic::Cosh => x.cosh(),
        Intrinsic::Asin => x.asin(),
        Intrinsic::Acos => x.acos(),
        Intrinsic::Atan => x.atan(),
        Intrinsic::Exp10 => 10f64.powf(x),
        Intrinsic::Log10 => x.log10(),
        Intrinsic::Log1p => x.ln_1p(),
        // A value node has one operand; lowering expresses the two-operand intrinsics otherwise.
        Intrinsic::Max
        | Intrinsic::Min
        | Intrinsic::Pow
        | Intrinsic::CopySign
        | Intrinsic::TruncDiv
        | Intrinsic::TruncMod => {
            return Err(format!(
                "`{}` takes two operands but is a unary node",
                intrinsic.name()
            ));
        }
    };
    Ok(round_to(dtype, value))
}

/// `2^x` as the GPU computes it: single precision (and the narrower types, computed in it) runs on
/// `ex2.approx.ftz.f32`, which reads subnormal inputs as zero and flushes results below 2^-126 to
/// zero; `f64` keeps the whole range.
fn exp2(dtype: DType, x: f64) -> f64 {
    if dtype == DType::Float64 {
        return x.exp2();
    }
    let smallest_normal = f64::from(f32::MIN_POSITIVE);
    let x = if x.abs() < smallest_normal { 0.0 } else { x };
    let y = x.exp2();
    if y < smallest_normal { 0.0 } else { y }
}

// A value of an integer type is a whole number in the type's range, so `as i64` is exact.
#[allow(clippy::cast_possible_truncation)]
pub(super) fn binary(op: BinaryOp, dtype: DType, a: f64, b: f64) -> Result<f64, String> {
    match op {
        BinaryOp::And => return Ok(round_to(dtype, f64::from(u8::from(a != 0.0 && b != 0.0)))),
        BinaryOp::Or => return Ok(round_to(dtype, f64::from(u8::from(a != 0.0 || b != 0.0)))),
        _ => {}
    }
    if dtype.is_float() {
        float_binary(op, dtype, a, b)
    } else {
        int_binary(op, dtype, a as i64, b as i64)
    }
}

// Operands of the types narrower than f64 are held exactly in f32, so `as f32` is exact.
#[allow(clippy::cast_possible_truncation)]
fn float_binary(op: BinaryOp, dtype: DType, a: f64, b: f64) -> Result<f64, String> {
    let value = match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div if dtype == DType::Float64 => a / b,
        BinaryOp::Div => f64::from(float_division(a as f32, b as f32)),
        BinaryOp::FloorDiv => (a / b).floor(),
        BinaryOp::Mod => a - (a / b).floor() * b,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Max => maximum_number(a, b),
        BinaryOp::Min => -maximum_number(-a, -b),
        BinaryOp::CopySign => a.copysign(b),
        _ => return Err(format!("`{}` on {dtype} operands", op.symbol())),
    };
    Ok(round_to(dtype, value))
}

fn int_binary(op: BinaryOp, dtype: DType, a: i64, b: i64) -> Result<f64, String> {
    let division_by_zero = || format!("integer division by zero (`{}`)", op.symbol());
    let value = match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Div | BinaryOp::FloorDiv | BinaryOp::Mod | BinaryOp::TruncMod if b == 0 => {
            return Err(division_by_zero());
        }
        BinaryOp::Div => a.wrapping_div(b),
        // Only `i64::MIN // -1` overflows; it wraps like every other integer result.
        BinaryOp::FloorDiv => floor_div(a, b).unwrap_or(a.wrapping_neg()),
        BinaryOp::Mod => floor_mod(a, b).unwrap_or(0),
        BinaryOp::TruncMod => a.wrapping_rem(b),
        BinaryOp::CopySign => return Err(format!("`copysign` on {dtype} operands")),
        BinaryOp::Pow => int_pow(a, b)?,
        BinaryOp::BitAnd => a & b,
        BinaryOp::BitOr => a | b,
        BinaryOp::BitXor => a ^ b,
        BinaryOp::Shl | BinaryOp::Shr => shift(op, dtype, a, b)?,
        BinaryOp::And | BinaryOp::Or => i64::from(op == BinaryOp::And && a != 0 && b != 0),
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
    };
    Ok(wrap_int(dtype, value) as f64)
}

/// IEEE 754-2019's maximumNumber, the GPU's `max.f32`: a NaN operand gives the other operand, and
/// −0 is less than +0. (The minimum is the negated maximum of the negated operands.)
fn maximum_number(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        b
    } else if b.is_nan() || a > b || (a == b && b.is_sign_negative()) {
        a
    } else {
        b
    }
}

/// `a ** b` on integers; a negative exponent truncates `1 / a^-b` toward zero.
fn int_pow(a: i64, b: i64) -> Result<i64, String> {
    if b < 0 {
        return match a {
            0 => Err("integer `0 ** negative`".to_owned()),
            1 => Ok(1),
            -1 => Ok(if b % 2 == 0 { 1 } else { -1 }),
            _ => Ok(0),
        };
    }
    let exponent = u32::try_from(b).map_err(|_| format!("integer exponent {b} is too large"))?;
    Ok(a.wrapping_pow(exponent))
}

/// `a << b` or `a >> b`: shifting by the width or more is undefined in C, so it is reported.
fn shift(op: BinaryOp, dtype: DType, a: i64, b: i64) -> Result<i64, String> {
    let width = dtype.bytes() * 8;
    let amount = u32::try_from(b)
        .ok()
        .filter(|&amount| u64::from(amount) < width);
    let Some(amount) = amount else {
        return Err(format!("shift of a {dtype} by {b}"));
    };
    Ok(if op == BinaryOp::Shl {
        a.wrapping_shl(amount)
    } else {
        a >> amount
    })
}

pub(super) fn compare(op: CompareOp, a: f64, b: f64) -> f64 {
    f64::from(u8::from(op.holds(a, b)))
}

/// `value` converted to `dtype` as a C cast does: floats round to nearest even, float to integer
/// truncates toward zero, integers wrap.
pub(super) fn cast(dtype: DType, value: f64) -> f64 {
    if dtype.is_int() && value.is_finite() {
        // The truncation toward zero is the conversion modelled; values past i64 saturate before
        // they wrap.
        #[allow(clippy::cast_possible_truncation)]
        let whole = value.trunc() as i64;
        wrap_int(dtype, whole) as f64
    } else {
        round_to(dtype, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_division_truncates_and_floor_division_floors() {
        assert_eq!(binary(BinaryOp::Div, DType::Int32, -7.0, 2.0), Ok(-3.0));
        assert_eq!(
            binary(BinaryOp::FloorDiv, DType::Int32, -7.0, 2.0),
            Ok(-4.0)
        );
        assert_eq!(binary(BinaryOp::Mod, DType::Int32, -7.0, 2.0), Ok(1.0));
        assert!(binary(BinaryOp::Div, DType::Int32, 1.0, 0.0).is_err());
        assert_eq!(binary(BinaryOp::Mod, DType::Float32, -7.5, 2.0), Ok(0.5));
    }

    #[test]
    fn max_and_min_ignore_nan_and_order_signed_zeros() {
        let max = |a: f64, b: f64| binary(BinaryOp::Max, DType::Float32, a, b);
        let min = |a: f64, b: f64| binary(BinaryOp::Min, DType::Float32, a, b);
        assert_eq!(max(f64::NAN, 2.0), Ok(2.0));
        assert_eq!(max(2.0, f64::NAN), Ok(2.0));
        assert_eq!(min(f64::NAN, -2.0), Ok(-2.0));
        assert!(max(f64::NAN, f64::NAN).is_ok_and(f64::is_nan));
        assert_eq!(max(f64::NEG_INFINITY, -3.5), Ok(-3.5));
        assert_eq!(min(f64::INFINITY, 3.5), Ok(3.5));
        for (a, b) in [(0.0, -0.0), (-0.0, 0.0)] {
            assert_eq!(max(a, b).map(f64::is_sign_positive), Ok(true));
            assert_eq!(min(a, b).map(f64::is_sign_negative), Ok(true));
        }
        assert_eq!(binary(BinaryOp::Max, DType::Int32, -7.0, 3.0), Ok(3.0));
        assert_eq!(binary(BinaryOp::Min, DType::UInt8, 200.0, 7.0), Ok(7.0));
    }

    #[test]
    fn integers_wrap_to_their_width() {
        let big = f64::from(i32::MAX);
        assert_eq!(binary(BinaryOp::Mul, DType::Int32, big, big), Ok(1.0));
        assert_eq!(binary(BinaryOp::Add, DType::UInt8, 255.0, 1.0), Ok(0.0));
        assert_eq!(cast(DType::Int32, -2.7), -2.0);
        assert!(binary(BinaryOp::Shl, DType::Int32, 1.0, 32.0).is_err());
    }

    #[test]
    fn fast_kernels_and_rounders_agree_with_the_general_path() {
        let samples = [0.1, -3.75, 1e-7, 65504.0, 1.0 / 3.0, f64::MAX, -0.0];
        for dtype in DType::ALL {
            for &x in &samples {
                let (a, b) = (rounder(dtype)(x), round_to(dtype, x));
                assert!(a == b || (a.is_nan() && b.is_nan()), "{dtype} {x}");
            }
        }
        for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
            for dtype in [
                DType::Float16,
                DType::BFloat16,
                DType::Float32,
                DType::Float64,
            ] {
                let Some(fast) = fast_binary(op, dtype) else {
                    panic!("{op} {dtype}")
                };
                for &x in &samples {
                    let (x, y) = (round_to(dtype, x), round_to(dtype, 0.3));
                    assert_eq!(Ok(fast(x, y)), binary(op, dtype, x, y), "{op} {dtype}");
                }
            }
        }
    }

    /// IEEE division of `f32`s, computed independently of the formula: in `f64`, exact enough that
    /// rounding to `f32` once more is innocuous.
    #[allow(clippy::cast_possible_truncation)] // the final rounding to f32 is the point
    fn ieee_quotient(a: f32, b: f32) -> f32 {
        (f64::from(a) / f64::from(b)) as f32
    }

    fn same_bits(x: f32, y: f32) -> bool {
        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
    }

    #[test]
    fn float_division_is_ieee_division_in_range() {
        // Divisors whose significands sit at the ends and in the middle of the binade, each with
        // a sweep of dividend significands, at exponents across the range.
        let mut state = 0x2545_f491_u32;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        for divisor_bits in [
            0x3f80_0000,
            0x3f80_0001,
            0x3fc0_0000,
            0x3fff_fffe,
            0x3fff_ffff,
        ] {
            for dividend_significand in (0..1u32 << 23).step_by(97) {
                for scale in [-60, -1, 0, 7, 59] {
                    let a = f32::from_bits(0x3f80_0000 | dividend_significand) * 2f32.powi(scale);
                    let b = -f32::from_bits(divisor_bits) * 2f32.powi(-scale / 2);
                    assert!(
                        same_bits(float_division(a, b), ieee_quotient(a, b)),
                        "{a:e} / {b:e}"
                    );
                }
            }
        }
        for _ in 0..200_000 {
            let a = f32::from_bits(0x3f80_0000 | (next() >> 9));
            let b = f32::from_bits(0x3f80_0000 | (next() >> 9));
            assert!(
                same_bits(float_division(a, b), ieee_quotient(a, b)),
                "{a:e} / {b:e}"
            );
        }
    }

    #[test]
    fn float_division_keeps_ieee_zeros_infinities_and_nan() {
        let specials = [
            0.0f32,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1.5,
            -3.0,
        ];
        for &a in &specials {
            for &b in &specials {
                assert!(same_bits(float_division(a, b), a / b), "{a} / {b}");
            }
        }
    }

    #[test]
    fn float_division_differs_only_at_the_ends_of_the_range() {
        // A subnormal divisor's reciprocal overflows, so the quotient is infinite, as the GPU's is.
        let tiny = f32::from_bits(0x0000_4000);
        assert_eq!(float_division(tiny, tiny), f32::INFINITY);
        assert_eq!(tiny / tiny, 1.0);
        let f16 = |x: f64| round_to(DType::Float16, x);
        assert_eq!(
            binary(BinaryOp::Div, DType::Float16, f16(1.0), f16(3.0)),
            Ok(f16(1.0 / 3.0))
        );
    }

    #[test]
    fn floats_round_once_to_the_node_dtype() {
        let tiny = 1.0 / 4096.0;
        assert_eq!(binary(BinaryOp::Add, DType::Float16, 1.0, tiny), Ok(1.0));
        assert_eq!(
            binary(BinaryOp::Add, DType::Float32, 1.0, tiny),
            Ok(1.0 + tiny)
        );
        let sigmoid = unary(UnaryOp::Intrinsic(Intrinsic::Sigmoid), DType::Float64, 0.0);
        assert_eq!(sigmoid, Ok(0.5));
    }
}
