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
}

impl DType {
    /// Every dtype, in a stable order (used for suggestions and tests).
    pub const ALL: [DType; 16] = [
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
        }
    }

    /// Size of one element in bytes (`bool` is stored as one byte, as in TVM).
    pub fn bytes(self) -> u64 {
        match self {
            DType::Bool | DType::Int8 | DType::UInt8 | DType::Float8E4M3 | DType::Float8E5M2 => 1,
            DType::Int16 | DType::UInt16 | DType::Float16 | DType::BFloat16 => 2,
            DType::Int32 | DType::UInt32 | DType::Float32 | DType::TFloat32 => 4,
            DType::Int64 | DType::UInt64 | DType::Float64 => 8,
        }
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
    }
}
