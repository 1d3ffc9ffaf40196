//! `T.reinterpret` in C: a value's bits, taken as an unsigned integer of its width, read back as
//! another type of the same width.
//!
//! Values are computed in their compute type (fp16 as `float`, see [`super::types`]), so a type
//! stored as bits is narrowed to its struct first and its `bits` taken (`tl_bits`), and a result of
//! such a type is rebuilt from the bits (`tl_from_bits`) and widened. Native floats go through the
//! CUDA bit-cast intrinsics, integers through C conversions, which keep the low bits.

use tilec_ir::DType;

use super::types::{compute_type, packed};

/// The C text of `operand` (a value of `from`, in its compute type) reinterpreted as `to`.
pub(super) fn reinterpret(operand: &str, from: DType, to: DType) -> String {
    let bits = bits_of(operand, from);
    from_bits(&bits, to)
}

/// `operand`'s bits as an `unsigned int` (`unsigned long long` for 8-byte types).
fn bits_of(operand: &str, from: DType) -> String {
    if let Some(p) = packed(from) {
        return format!("tl_bits({}({operand}))", p.from_float);
    }
    match from {
        DType::Float32 => format!("__float_as_uint({operand})"),
        DType::Float64 => format!("(unsigned long long)__double_as_longlong({operand})"),
        _ if from.bytes() == 8 => format!("(unsigned long long)({operand})"),
        _ => format!("(unsigned int)({operand})"),
    }
}

/// The value of type `to` whose bits are the low bits of `bits`, in `to`'s compute type.
fn from_bits(bits: &str, to: DType) -> String {
    if let Some(p) = packed(to) {
        return format!("{}(tl_from_bits({bits}, ({}*)0))", p.to_float, p.storage);
    }
    match to {
        DType::Float32 => format!("__uint_as_float({bits})"),
        DType::Float64 => format!("__longlong_as_double((long long)({bits}))"),
        DType::Bool => format!("(({bits}) & 1u) != 0u"),
        _ => format!("({})({bits})", compute_type(to)),
    }
}
