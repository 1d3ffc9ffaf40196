//! `T.isnan`, `T.isinf`, `T.isfinite` and `T.max_value` / `T.min_value`: written with the data
//! expressions tilec already has, so checks, lowering, the CUDA printer and the emulator need
//! nothing of their own. `isnan(x)` is `x != x` (only NaN is unequal to itself), `isinf(x)` is
//! `|x| == inf` and `isfinite(x)` is `|x| < inf` (false for NaN, as every comparison with it is);
//! the extremes are constants of the dtype.

use tilec_ir::data::CompareOp;
use tilec_ir::{Code, DType, DataExpr, Intrinsic};

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::value::Value;

impl Builder<'_> {
    pub(super) fn float_class<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let value = self.required(&args, 0, "x")?;
        let (x, dtype) = self.data_expr(&value, args.span)?;
        if dtype.is_some_and(|dtype| !dtype.is_float()) {
            // An integer is never NaN nor infinite.
            let answer = i64::from(name == "isfinite");
            return Ok(self.data(
                DataExpr::Int {
                    value: answer,
                    dtype: Some(DType::Bool),
                },
                Some(DType::Bool),
            ));
        }
        let (op, lhs, rhs) = match name {
            "isnan" => (CompareOp::Ne, x, x),
            _ => {
                let magnitude = self.world.data.push(DataExpr::Call {
                    intrinsic: Intrinsic::Abs,
                    args: vec![x],
                });
                let infinity = self.world.data.push(DataExpr::Float {
                    bits: f64::INFINITY.to_bits(),
                    dtype,
                });
                let op = if name == "isinf" {
                    CompareOp::Eq
                } else {
                    CompareOp::Lt
                };
                (op, magnitude, infinity)
            }
        };
        Ok(self.data(DataExpr::Compare { op, lhs, rhs }, Some(DType::Bool)))
    }

    /// `T.max_value(dtype)` / `T.min_value(dtype)`: the largest and smallest finite values of a
    /// dtype, as constants of it.
    pub(super) fn extreme_value<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let dtype = self.dtype_arg(&args, 0, "dtype")?;
        let largest = name == "max_value";
        let node = match extremes(dtype) {
            Extremes::Float(max) => DataExpr::Float {
                bits: if largest { max } else { -max }.to_bits(),
                dtype: Some(dtype),
            },
            Extremes::Int(min, max) => DataExpr::Int {
                value: if largest { max } else { min },
                dtype: Some(dtype),
            },
            Extremes::Unknown => {
                return Err(self.error(
                    Code::NotAnalysed,
                    args.span,
                    format!("`T.{name}` of {dtype} is not supported by tilec yet"),
                ));
            }
        };
        Ok(self.data(node, Some(dtype)))
    }
}

enum Extremes {
    /// The largest finite value; the smallest is its negative.
    Float(f64),
    Int(i64, i64),
    /// `uint64`'s largest value does not fit the `i64` of an integer constant.
    Unknown,
}

fn extremes(dtype: DType) -> Extremes {
    match dtype {
        DType::Bool => Extremes::Int(0, 1),
        DType::Int8 => Extremes::Int(i64::from(i8::MIN), i64::from(i8::MAX)),
        DType::Int16 => Extremes::Int(i64::from(i16::MIN), i64::from(i16::MAX)),
        DType::Int32 => Extremes::Int(i64::from(i32::MIN), i64::from(i32::MAX)),
        DType::Int64 => Extremes::Int(i64::MIN, i64::MAX),
        DType::UInt8 => Extremes::Int(0, i64::from(u8::MAX)),
        DType::UInt16 => Extremes::Int(0, i64::from(u16::MAX)),
        DType::UInt32 => Extremes::Int(0, i64::from(u32::MAX)),
        DType::UInt64 => Extremes::Unknown,
        DType::Float8E4M3 => Extremes::Float(448.0),
        DType::Float8E5M2 => Extremes::Float(57344.0),
        DType::Float16 => Extremes::Float(65504.0),
        // (2 - 2^-7) * 2^127 and (2 - 2^-23) * 2^127: bfloat16 and tfloat32 have float32's
        // exponent, with 7 and 10 fraction bits.
        DType::BFloat16 => Extremes::Float(3.389_531_389_251_535_5e38),
        DType::TFloat32 => Extremes::Float(3.401_162_140_171_328e38),
        DType::Float32 => Extremes::Float(f64::from(f32::MAX)),
        DType::Float64 => Extremes::Float(f64::MAX),
        DType::Int4 => Extremes::Int(-8, 7),
        DType::UInt4 => Extremes::Int(0, 15),
        DType::Float4E2M1 => Extremes::Float(6.0),
    }
}
