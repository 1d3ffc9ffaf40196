//! Exact C literals for constants, and the rounding of a constant to its element type.
//!
//! A literal must denote exactly the value the CPU emulator uses, so floats are never printed with
//! a rounded decimal: values with a short exact decimal expansion (0.5, 448.0, 0.0625) print as
//! decimals, every other value as a C++17 hexadecimal float, which is exact by construction.

use tilec_ir::DType;

/// A rounding format: fraction bits, the exponent of the smallest normal value, the exponent of
/// the largest finite value, and whether overflow saturates (fp8) instead of giving infinity.
#[derive(Clone, Copy, Debug)]
struct Format {
    mantissa_bits: i32,
    min_exponent: i32,
    max_exponent: i32,
    max_mantissa: u64,
    saturates: bool,
}

const F16: Format = Format {
    mantissa_bits: 10,
    min_exponent: -14,
    max_exponent: 15,
    max_mantissa: 0x3ff,
    saturates: false,
};
const BF16: Format = Format {
    mantissa_bits: 7,
    min_exponent: -126,
    max_exponent: 127,
    max_mantissa: 0x7f,
    saturates: false,
};
/// e4m3 "fn": the largest finite value is 1.75 * 2^8 = 448 (mantissa 0b110), there is no infinity.
const E4M3: Format = Format {
    mantissa_bits: 3,
    min_exponent: -6,
    max_exponent: 8,
    max_mantissa: 0b110,
    saturates: true,
};
/// e5m2, saturating at 1.75 * 2^15 = 57344 as the prelude's conversion does.
const E5M2: Format = Format {
    mantissa_bits: 2,
    min_exponent: -14,
    max_exponent: 15,
    max_mantissa: 0b11,
    saturates: true,
};

/// `value` rounded to the nearest value of the float type `dtype` (ties to even; ties away from
/// zero for tf32, as its conversion instruction rounds), as an `f64`.
/// Integer and bool types, and `float64`, return the value unchanged.
pub(super) fn round_to_dtype(value: f64, dtype: DType) -> f64 {
    match dtype {
        // Rounding to `f32` is the point (past its range to an infinity, as the GPU converts).
        #[allow(clippy::cast_possible_truncation)]
        DType::Float32 => f64::from(value as f32),
        DType::Float16 => round_to_format(value, F16),
        DType::BFloat16 => round_to_format(value, BF16),
        DType::Float8E4M3 => round_to_format(value, E4M3),
        DType::Float8E5M2 => round_to_format(value, E5M2),
        DType::TFloat32 => tilec_ir::dtype::round_to_tf32(value),
        _ => value,
    }
}

/// Rounds with the quantum of `value`'s binade (or of the smallest normals for subnormals):
/// dividing by a power of two is exact, so one `round_ties_even` does the whole rounding.
fn round_to_format(value: f64, format: Format) -> f64 {
    if value.is_nan() {
        return value;
    }
    let max = (1.0 + format.max_mantissa as f64 / 2f64.powi(format.mantissa_bits))
        * 2f64.powi(format.max_exponent);
    if value.is_infinite() {
        return if format.saturates {
            max.copysign(value)
        } else {
            value
        };
    }
    let magnitude = value.abs();
    let biased = ((magnitude.to_bits() >> 52) & 0x7ff) as i32;
    let exponent = (biased - 1023).max(format.min_exponent);
    let quantum = 2f64.powi(exponent - format.mantissa_bits);
    let rounded = (magnitude / quantum).round_ties_even() * quantum;
    let rounded = if rounded <= max {
        rounded
    } else if format.saturates {
        max
    } else {
        f64::INFINITY
    };
    rounded.copysign(value)
}

/// Whether `value` is exactly `n / 1024` for an integer `n` below 2^53, so that its decimal
/// expansion has at most ten fraction digits and prints exactly.
fn short_decimal(value: f64) -> Option<String> {
    let scaled = value.abs() * 1024.0;
    if !(scaled.fract() == 0.0 && scaled < 2f64.powi(53)) {
        return None;
    }
    // Just checked: a whole number in 0..2^53, so exact in `u64`.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let n = scaled as u64;
    let whole = n >> 10;
    // 10^10 / 1024 = 9765625 exactly, so the fraction's ten digits are an integer.
    let fraction = (n & 1023) * 9_765_625;
    let digits = format!("{fraction:010}");
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let sign = if value.is_sign_negative() { "-" } else { "" };
    Some(format!("{sign}{whole}.{digits}"))
}

/// `significand * 2^exponent` as a normalized hexadecimal float body (`0x1.8p+1`).
/// `significand` is not zero, so its top bit `top` is in 0..=63.
#[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation)] // `top + pad` is in 0..=64
fn hex_float(negative: bool, significand: u64, exponent: i32) -> String {
    let top = 63 - significand.leading_zeros().cast_signed();
    let fraction = significand - (1u64 << top);
    let pad = (4 - top % 4) % 4;
    let width = ((top + pad) / 4) as usize;
    let hex = format!("{:0width$x}", fraction << pad);
    let hex = hex.trim_end_matches('0');
    let sign = if negative { "-" } else { "" };
    let exponent = exponent + top;
    let dot = if hex.is_empty() {
        String::new()
    } else {
        format!(".{hex}")
    };
    format!("{sign}0x1{dot}p{exponent:+}")
}

/// A literal of C type `float` with exactly the value `value`; `None` for NaN and infinities,
/// which have no literal.
pub(super) fn float_literal(value: f32) -> Option<String> {
    if !value.is_finite() {
        return None;
    }
    if let Some(decimal) = short_decimal(f64::from(value)) {
        return Some(format!("{decimal}f"));
    }
    let bits = value.to_bits();
    let biased = i32::from(((bits >> 23) & 0xff) as u8);
    let mantissa = u64::from(bits & 0x7f_ffff);
    let (significand, exponent) = if biased == 0 {
        (mantissa, -149)
    } else {
        (mantissa | 1 << 23, biased - 150)
    };
    Some(format!(
        "{}f",
        hex_float(value.is_sign_negative(), significand, exponent)
    ))
}

/// A literal of C type `double` with exactly the value `value`; `None` for NaN and infinities.
pub(super) fn double_literal(value: f64) -> Option<String> {
    if !value.is_finite() {
        return None;
    }
    if let Some(decimal) = short_decimal(value) {
        return Some(decimal);
    }
    let bits = value.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let mantissa = bits & 0xf_ffff_ffff_ffff;
    let (significand, exponent) = if biased == 0 {
        (mantissa, -1074)
    } else {
        (mantissa | 1 << 52, biased - 1075)
    };
    Some(hex_float(value.is_sign_negative(), significand, exponent))
}

/// An integer literal of the C type of `dtype` for `value`, wrapped into the type's range as a C
/// conversion would. Negative values and `INT_MIN`-like values are returned unparenthesized.
// The wrapping casts are that C conversion, on purpose.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]
pub(super) fn int_literal(value: i64, dtype: DType) -> String {
    match dtype {
        DType::Int8 => (value as i8).to_string(),
        DType::Int16 => (value as i16).to_string(),
        DType::UInt8 => (value as u8).to_string(),
        DType::UInt16 => (value as u16).to_string(),
        DType::UInt32 => format!("{}u", value as u32),
        DType::UInt64 => format!("{}ull", value as u64),
        DType::Int64 => long_literal(value),
        _ => int32_literal(value as i32),
    }
}

/// An `int` literal; `INT_MIN` has none (its magnitude is not an `int`), so it is spelled as a
/// difference.
pub(super) fn int32_literal(value: i32) -> String {
    if value == i32::MIN {
        "(-2147483647 - 1)".to_owned()
    } else {
        value.to_string()
    }
}

/// A `long long` literal, with the same care for its minimum.
pub(super) fn long_literal(value: i64) -> String {
    if value == i64::MIN {
        "(-9223372036854775807LL - 1)".to_owned()
    } else {
        format!("{value}LL")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_exactly() {
        let show = |v: f32| float_literal(v).unwrap_or_default();
        assert_eq!(show(0.0), "0.0f");
        assert_eq!(show(-0.0), "-0.0f");
        assert_eq!(show(1.0), "1.0f");
        assert_eq!(show(-2.5), "-2.5f");
        assert_eq!(show(448.0), "448.0f");
        assert_eq!(show(0.0009765625), "0.0009765625f");
        assert_eq!(show(3.0), "3.0f");
        assert_eq!(show(0.1), "0x1.99999ap-4f");
        assert_eq!(show(f32::MAX), "0x1.fffffep+127f");
        assert_eq!(show(f32::from_bits(1)), "0x1p-149f");
        assert_eq!(show(1.0 / 3.0), "0x1.555556p-2f");
        assert_eq!(show(16777216.0), "16777216.0f");
        assert_eq!(show(1e30), "0x1.93e594p+99f");
        assert_eq!(float_literal(f32::INFINITY), None);
        assert_eq!(
            double_literal(0.1).unwrap_or_default(),
            "0x1.999999999999ap-4"
        );
        assert_eq!(double_literal(-1.5).unwrap_or_default(), "-1.5");
        assert_eq!(double_literal(5e-324).unwrap_or_default(), "0x1p-1074");
    }

    #[test]
    fn hex_floats_parse_back() {
        for bits in [
            1u32,
            0x3dcc_cccd,
            0x7f7f_ffff,
            0x0080_0000,
            0x007f_ffff,
            0x4049_0fdb,
        ] {
            let value = f32::from_bits(bits);
            let text = float_literal(value).unwrap_or_default();
            assert_eq!(
                parse_hex(text.trim_end_matches('f')),
                f64::from(value),
                "{text}"
            );
        }
    }

    /// Reads `[-]0x1[.hhh]p±e` back, to check the printed digits.
    fn parse_hex(text: &str) -> f64 {
        let (negative, text) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let text = text.trim_start_matches("0x");
        let (mantissa, exponent) = text.split_once('p').unwrap_or((text, "0"));
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let mut value = u64::from_str_radix(whole, 16).unwrap_or(0) as f64;
        for (i, digit) in fraction.chars().enumerate() {
            let d = digit.to_digit(16).unwrap_or(0);
            let i = i32::try_from(i).expect("a short literal");
            value += f64::from(d) * 16f64.powi(-i - 1);
        }
        let value = value * 2f64.powi(exponent.parse().unwrap_or(0));
        if negative { -value } else { value }
    }

    #[test]
    fn rounds_to_narrow_formats() {
        assert_eq!(round_to_dtype(1.0 + 1.0 / 4096.0, DType::Float16), 1.0);
        assert_eq!(
            round_to_dtype(1.0 + 3.0 / 2048.0, DType::Float16),
            1.0 + 2.0 / 1024.0
        );
        assert_eq!(round_to_dtype(65519.0, DType::Float16), 65504.0);
        assert_eq!(round_to_dtype(65520.0, DType::Float16), f64::INFINITY);
        assert_eq!(round_to_dtype(-1e-9, DType::Float16), -0.0);
        assert_eq!(
            round_to_dtype(2f64.powi(-24), DType::Float16),
            2f64.powi(-24)
        );
        assert_eq!(
            round_to_dtype(1.5 * 2f64.powi(-25), DType::Float16),
            2f64.powi(-24)
        );
        assert_eq!(round_to_dtype(1.0 + 1.0 / 256.0, DType::BFloat16), 1.0);
        assert_eq!(round_to_dtype(0.1, DType::BFloat16), 0.10009765625);
        assert_eq!(round_to_dtype(1000.0, DType::Float8E4M3), 448.0);
        assert_eq!(round_to_dtype(f64::NEG_INFINITY, DType::Float8E4M3), -448.0);
        assert_eq!(round_to_dtype(0.3, DType::Float8E4M3), 0.3125);
        assert_eq!(round_to_dtype(2f64.powi(-10), DType::Float8E4M3), 0.0);
        assert_eq!(round_to_dtype(1e6, DType::Float8E5M2), 57344.0);
        assert!(round_to_dtype(f64::NAN, DType::Float16).is_nan());
        assert_eq!(round_to_dtype(0.1, DType::Float32), f64::from(0.1f32));
    }

    #[test]
    fn integer_literals_wrap_to_their_type() {
        assert_eq!(int_literal(300, DType::Int8), "44");
        assert_eq!(int_literal(-1, DType::UInt32), "4294967295u");
        assert_eq!(int_literal(5, DType::Int64), "5LL");
        assert_eq!(
            int_literal(i64::from(i32::MIN), DType::Int32),
            "(-2147483647 - 1)"
        );
        assert_eq!(
            int_literal(i64::MIN, DType::Int64),
            "(-9223372036854775807LL - 1)"
        );
        assert_eq!(int_literal(-3, DType::UInt64), "18446744073709551613ull");
    }
}
