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
}

impl DType {
    /// Every dtype, in a stable order (used for suggestions and tests).
    pub const ALL: [DType; 15] = [
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
            "uint32" => DType::UInt32,
            "uint64" => DType::UInt64,
            "float8_e4m3" | "float8_e4m3fn" | "e4m3_float8" => DType::Float8E4M3,
            "float8_e5m2" | "e5m2_float8" => DType::Float8E5M2,
            "float16" | "half" | "fp16" => DType::Float16,
            "bfloat16" | "bf16" => DType::BFloat16,
            "float32" | "float" | "fp32" => DType::Float32,
            "float64" | "double" | "fp64" => DType::Float64,
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
        }
    }

    /// Size of one element in bytes (`bool` is stored as one byte, as in TVM).
    pub fn bytes(self) -> u64 {
        match self {
            DType::Bool | DType::Int8 | DType::UInt8 | DType::Float8E4M3 | DType::Float8E5M2 => 1,
            DType::Int16 | DType::UInt16 | DType::Float16 | DType::BFloat16 => 2,
            DType::Int32 | DType::UInt32 | DType::Float32 => 4,
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
        )
    }

    pub fn is_int(self) -> bool {
        !self.is_float() && self != DType::Bool
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
