//! How each element type is stored in memory and computed on in the printed C.
//!
//! Native C types are stored and computed as themselves. The 16-bit and 8-bit floats are stored as
//! the prelude's bit-pattern structs (tf32 too: a float32 word that holds a TF32 value) and computed as `float`: a load widens through the prelude's
//! conversion, a store narrows through it, and arithmetic results are rounded back at once with the
//! type's `tl_round_*` function, so a `float` holding one of them always holds a value of the type.

use tilec_ir::DType;

/// The prelude's functions for a float type stored as bits: its struct, widening, narrowing and
/// rounding a float to its nearest value.
#[derive(Clone, Copy, Debug)]
pub(super) struct Packed {
    pub storage: &'static str,
    pub to_float: &'static str,
    pub from_float: &'static str,
    pub round: &'static str,
}

/// The prelude functions of `dtype` when it is one of the float types stored as bits.
pub(super) fn packed(dtype: DType) -> Option<Packed> {
    let (storage, to_float, from_float, round) = match dtype {
        DType::Float16 => (
            "tl_half",
            "tl_half_to_float",
            "tl_float_to_half",
            "tl_round_f16",
        ),
        DType::BFloat16 => (
            "tl_bfloat16",
            "tl_bfloat16_to_float",
            "tl_float_to_bfloat16",
            "tl_round_bf16",
        ),
        DType::Float8E4M3 => (
            "tl_fp8_e4m3",
            "tl_e4m3_to_float",
            "tl_float_to_e4m3",
            "tl_round_e4m3",
        ),
        DType::Float8E5M2 => (
            "tl_fp8_e5m2",
            "tl_e5m2_to_float",
            "tl_float_to_e5m2",
            "tl_round_e5m2",
        ),
        DType::TFloat32 => (
            "tl_tfloat32",
            "tl_tfloat32_to_float",
            "tl_float_to_tfloat32",
            "tl_round_tf32",
        ),
        DType::Float4E2M1 => (
            "tl_fp4_e2m1",
            "tl_e2m1_to_float",
            "tl_float_to_e2m1",
            "tl_round_e2m1",
        ),
        _ => return None,
    };
    Some(Packed {
        storage,
        to_float,
        from_float,
        round,
    })
}

/// The C type values of `dtype` are computed in.
pub(super) fn compute_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "bool",
        DType::Int8 | DType::Int4 => "signed char",
        DType::Int16 => "short",
        DType::Int32 => "int",
        DType::Int64 => "long long",
        DType::UInt8 | DType::UInt4 => "unsigned char",
        DType::UInt16 => "unsigned short",
        DType::UInt32 => "unsigned int",
        DType::UInt64 => "unsigned long long",
        DType::Float64 => "double",
        DType::Float8E4M3
        | DType::Float8E5M2
        | DType::Float16
        | DType::BFloat16
        | DType::Float32
        | DType::TFloat32
        | DType::Float4E2M1 => "float",
    }
}

/// The C type elements of `dtype` are stored as.
pub(super) fn storage_type(dtype: DType) -> &'static str {
    packed(dtype).map_or_else(|| compute_type(dtype), |p| p.storage)
}

/// The C type a buffer of `dtype` in global or shared memory is declared as: its storage type, or
/// bytes for the 4-bit types, which pack two elements a byte there and are read and written
/// through the prelude's `tl_load_*` / `tl_store_nibble` (see [`nibble_load`]).
pub(super) fn memory_type(dtype: DType) -> &'static str {
    if dtype.is_sub_byte() {
        "unsigned char"
    } else {
        storage_type(dtype)
    }
}

/// The prelude's function that reads element `i` of packed 4-bit memory as `dtype`'s storage type.
pub(super) fn nibble_load(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::Int4 => Some("tl_load_s4"),
        DType::UInt4 => Some("tl_load_u4"),
        DType::Float4E2M1 => Some("tl_load_e2m1"),
        _ => None,
    }
}

/// The prelude's function that makes `dtype`'s storage type from a 4-bit code (the low nibble of
/// an `unsigned int`), for unpacking several elements read at once.
pub(super) fn nibble_from_code(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::Int4 => Some("tl_s4_from_code"),
        DType::UInt4 => Some("tl_u4_from_code"),
        DType::Float4E2M1 => Some("tl_e2m1_from_code"),
        _ => None,
    }
}

/// `operand` (an `int` expression, already in C's operand form) wrapped into `dtype`'s range as
/// integer arithmetic on a type narrower than `int` must be: a cast for the 8- and 16-bit types,
/// the prelude's sign extension or mask for the 4-bit ones.
pub(super) fn wrap_int(dtype: DType, operand: &str) -> String {
    match dtype {
        DType::Int4 => format!("tl_wrap_s4({operand})"),
        DType::UInt4 => format!("tl_wrap_u4({operand})"),
        _ => format!("({}){operand}", compute_type(dtype)),
    }
}

/// Whether values of `dtype` are computed as C `float`.
pub(super) fn computes_as_float(dtype: DType) -> bool {
    compute_type(dtype) == "float"
}

/// Integer types narrower than `int`: C promotes them before arithmetic, so results are converted
/// back to wrap into the type's range.
pub(super) fn is_small_int(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::Bool
            | DType::Int4
            | DType::UInt4
            | DType::Int8
            | DType::Int16
            | DType::UInt8
            | DType::UInt16
    )
}
