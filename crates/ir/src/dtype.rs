//! Element types of buffers and scalars, with the spellings TileLang accepts for each.

use std::fmt;

/// The element type of a buffer, scalar or data expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float8E4M3,
    Float8E5M2,
    Float16,
    BFloat16,
    Float32,
    Float64,
    /// NVIDIA's TensorFloat-32: stored in 32 bits as a float32, carrying 10 fraction bits (as
    /// bfloat16's exponent range with fp16's precision). TileLang declares tensor-core operands of
    /// float32 data with it; a value narrowed to it rounds to nearest with ties away from zero, as
    /// `cvt.rna.tf32.f32` does.
    TFloat32,
    /// A signed 4-bit integer in [-8, 7]. The 4-bit types pack two elements a byte in memory,
    /// the element of even index in the low nibble (as torch's packed `int8`/`float4_e2m1fn_x2`
    /// tensors and TileLang lay them out); in registers each element has a byte of its own.
    Int4,
    /// An unsigned 4-bit integer in [0, 15], packed as [`DType::Int4`].
    UInt4,
    /// The OCP MX 4-bit float (`float4_e2m1fn`): a sign, two exponent bits and one mantissa bit,
    /// values ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no infinities and no NaN; a value narrowed to it
    /// rounds to nearest even and saturates at ±6 (`cvt.rn.satfinite.e2m1x2.f32`). Packed as
    /// [`DType::Int4`].
    Float4E2M1,
}

impl DType {
    /// Every dtype, in a stable order (used for suggestions and tests).
    pub const ALL: [DType; 19] = [
        DType::Bool,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Float8E4M3,
        DType::Float8E5M2,
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
        DType::TFloat32,
        DType::Int4,
        DType::UInt4,
        DType::Float4E2M1,
    ];

    /// Parses a spelling users write: `"float16"`, `"half"`, `"float"` (float32), `"bf16"`, ...
    ///
    /// The same names are accepted as attributes of the language module (`T.float16`).
    pub fn from_name(name: &str) -> Option<DType> {
        let dtype = match name {
            "bool" => DType::Bool,
            "int8" => DType::Int8,
            "int16" => DType::Int16,
            "int32" | "int" => DType::Int32,
            "int64" => DType::Int64,
            "uint8" => DType::UInt8,
            "uint16" => DType::UInt16,
            "uint32" | "uint" => DType::UInt32,
            "uint64" => DType::UInt64,
            "float8_e4m3" | "float8_e4m3fn" | "e4m3_float8" => DType::Float8E4M3,
            "float8_e5m2" | "e5m2_float8" => DType::Float8E5M2,
            "float16" | "half" | "fp16" => DType::Float16,
            "bfloat16" | "bf16" => DType::BFloat16,
            "float32" | "float" | "fp32" => DType::Float32,
            "float64" | "double" | "fp64" => DType::Float64,
            "tfloat32" | "tf32" => DType::TFloat32,
            "int4" => DType::Int4,
            "uint4" => DType::UInt4,
            "float4_e2m1fn" | "float4_e2m1" => DType::Float4E2M1,
            _ => return None,
        };
        Some(dtype)
    }

    /// The canonical TileLang name (`"float16"`).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt8 => "uint8",
            DType::UInt16 => "uint16",
            DType::UInt32 => "uint32",
            DType::UInt64 => "uint64",
            DType::Float8E4M3 => "float8_e4m3",
            DType::Float8E5M2 => "float8_e5m2",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
            DType::TFloat32 => "tfloat32",
            DType::Int4 => "int4",
            DType::UInt4 => "uint4",
            DType::Float4E2M1 => "float4_e2m1fn",
        }
    }

    /// Size of one element in bits (`bool` is stored as one byte, as in TVM).
    pub fn bits(self) -> u64 {
        match self {
            DType::Int4 | DType::UInt4 | DType::Float4E2M1 => 4,
            DType::Bool | DType::Int8 | DType::UInt8 | DType::Float8E4M3 | DType::Float8E5M2 => 8,
            DType::Int16 | DType::UInt16 | DType::Float16 | DType::BFloat16 => 16,
            DType::Int32 | DType::UInt32 | DType::Float32 | DType::TFloat32 => 32,
            DType::Int64 | DType::UInt64 | DType::Float64 => 64,
        }
    }

    /// The smallest addressable storage of one element, in bytes: its size, or one byte for the
    /// 4-bit types, whose elements share bytes in memory (see [`DType::storage_bytes`] for the
    /// size of several) and have a byte each in registers.
    pub fn bytes(self) -> u64 {
        self.bits().div_ceil(8)
    }

    /// The bytes `count` elements take in memory, packed as the device stores them.
    pub fn storage_bytes(self, count: u64) -> u64 {
        count.saturating_mul(self.bits()).div_ceil(8)
    }

    /// Whether elements pack several to a byte in memory (the 4-bit types).
    pub fn is_sub_byte(self) -> bool {
        self.bits() < 8
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float8E4M3
                | DType::Float8E5M2
                | DType::Float16
                | DType::BFloat16
                | DType::Float32
                | DType::Float64
                | DType::TFloat32
                | DType::Float4E2M1
        )
    }

    pub fn is_int(self) -> bool {
        !self.is_float() && self != DType::Bool
    }
}

/// `value` rounded once to the nearest TensorFloat-32 value, ties away from zero (`cvt.rna`).
///
/// TF32 has float32's exponent range and 10 fraction bits. Normal values are rounded on their f64
/// bits (adding half a TF32 quantum carries into the exponent where the fraction rounds up to the
/// next power of two); values below float32's smallest normal share its quantum, 2^-136, where
/// `f64::round` rounds ties away from zero as well; results past the largest TF32 value overflow to
/// infinity, as the instruction does.
pub fn round_to_tf32(value: f64) -> f64 {
    const SMALLEST_NORMAL: f64 = 1.1754943508222875e-38; // 2^-126
    const SUBNORMAL_QUANTUM: f64 = 1.1479437019748901e-41; // 2^-136
    const LARGEST: f64 = 3.4011621342146535e38; // (2 - 2^-10) * 2^127
    if !value.is_finite() {
        return value;
    }
    if value.abs() < SMALLEST_NORMAL {
        return (value / SUBNORMAL_QUANTUM).round() * SUBNORMAL_QUANTUM;
    }
    let dropped_bits = 52 - 10;
    let bits = value.to_bits();
    let rounded = f64::from_bits((bits + (1 << (dropped_bits - 1))) & !((1 << dropped_bits) - 1));
    if rounded.abs() > LARGEST {
        f64::INFINITY.copysign(value)
    } else {
        rounded
    }
}

/// The values of the eight non-negative `float4_e2m1fn` codes, code 0 to 7; bit 3 is the sign.
const E2M1_MAGNITUDES: [f64; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// The value of a `float4_e2m1fn` code (its low four bits).
pub fn e2m1_value(code: u8) -> f64 {
    let magnitude = E2M1_MAGNITUDES[usize::from(code & 0x7)];
    if code & 0x8 != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// The `float4_e2m1fn` code nearest to `value`: ties to the even code, saturating at ±6 (infinities
/// included), NaN to +0 — as `cvt.rn.satfinite.e2m1x2.f32`, which has no NaN to give.
pub fn e2m1_code(value: f64) -> u8 {
    if value.is_nan() {
        return 0;
    }
    let sign = if value.is_sign_negative() { 0x8 } else { 0 };
    let magnitude = value.abs();
    // At and past the largest value (infinities included) every distance below is infinite or
    // larger than the last code's: saturate first.
    if magnitude >= 6.0 {
        return sign | 0x7;
    }
    let mut best = 0u8;
    for code in 1..8u8 {
        let error = (E2M1_MAGNITUDES[usize::from(code)] - magnitude).abs();
        let best_error = (E2M1_MAGNITUDES[usize::from(best)] - magnitude).abs();
        if error < best_error || (error == best_error && code % 2 == 0) {
            best = code;
        }
    }
    sign | best
}

/// `value` rounded once to the nearest `float4_e2m1fn` value (see [`e2m1_code`]).
pub fn round_to_e2m1(value: f64) -> f64 {
    e2m1_value(e2m1_code(value))
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::DType;

    #[test]
    fn every_canonical_name_round_trips() {
        for dtype in DType::ALL {
            assert_eq!(DType::from_name(dtype.name()), Some(dtype));
        }
    }

    #[test]
    fn tilelang_aliases() {
        assert_eq!(DType::from_name("float"), Some(DType::Float32));
        assert_eq!(DType::from_name("float8_e4m3fn"), Some(DType::Float8E4M3));
        assert_eq!(DType::from_name("float17"), None);
        assert_eq!(DType::BFloat16.bytes(), 2);
        assert_eq!(DType::from_name("float4_e2m1fn"), Some(DType::Float4E2M1));
        assert_eq!(DType::Int4.bytes(), 1);
        assert_eq!(DType::Int4.storage_bytes(7), 4);
    }

    #[test]
    fn e2m1_rounds_to_nearest_even_and_saturates() {
        use super::{e2m1_code, round_to_e2m1};
        let cases = [
            (0.2, 0.0),
            (0.25, 0.0), // a tie between 0 (code 0) and 0.5 (code 1): the even code
            (0.75, 1.0), // 0.5 (code 1) and 1.0 (code 2)
            (1.25, 1.0), // 1.0 (code 2) and 1.5 (code 3)
            (2.5, 2.0),  // 2 (code 4) and 3 (code 5)
            (3.5, 4.0),  // 3 (code 5) and 4 (code 6)
            (5.0, 4.0),  // 4 (code 6) and 6 (code 7)
            (5.1, 6.0),
            (100.0, 6.0),
            (f64::INFINITY, 6.0),
            (-1.4, -1.5),
            (-0.0, -0.0),
        ];
        for (value, expected) in cases {
            assert_eq!(round_to_e2m1(value), expected, "{value}");
        }
        assert_eq!(e2m1_code(-6.0), 0xf);
        assert_eq!(e2m1_code(f64::NAN), 0);
    }
}
