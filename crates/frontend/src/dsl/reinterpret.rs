//! `T.reinterpret(value, dtype)`: a value's bits read as another dtype of the same width.
//!
//! Kernels use it to order floats as unsigned integers (radix top-k flips the bits of negative
//! values so that the integer order is the float order) and to pack or unpack narrow formats.
//! TVM's `tir.reinterpret` takes the dtype first; TileLang's wrapper takes the value first. Both
//! spellings are read: the argument that is a dtype is the dtype.

use tilec_ir::{Code, DataExpr};

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::value::Value;

impl Builder<'_> {
    pub(super) fn reinterpret<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let first_is_dtype = matches!(args.get(0, "value"), Some(Value::DType(_) | Value::Str(_)));
        let (dtype_index, value_index) = if first_is_dtype { (0, 1) } else { (1, 0) };
        // `T.reinterpret(T.uint64(0), dtype="handle")`: a null pointer, which hand-written
        // reductions give `T.attr(..., "reduce_scope", ...)`. tilec reads nothing from it.
        if matches!(args.get(dtype_index, "dtype"), Some(Value::Str(name)) if &**name == "handle") {
            return Ok(Value::Opaque(
                "a handle (`T.reinterpret(..., dtype=\"handle\")`)".into(),
            ));
        }
        let dtype = self.dtype_arg(&args, dtype_index, "dtype")?;
        let value = self.required(&args, value_index, "value")?;
        let (id, from) = self.data_expr(&value, args.span)?;
        let Some(from) = from else {
            return Err(self.error(
                Code::DtypeMismatch,
                args.span_of(value_index, "value"),
                format!(
                    "`T.reinterpret` to {dtype} needs a value whose dtype is known; give the literal one (`T.uint32(0)`)"
                ),
            ));
        };
        if from.bytes() != dtype.bytes() {
            return Err(self.error(
                Code::DtypeMismatch,
                args.span,
                format!(
                    "`T.reinterpret` reads the bits of a {from} ({} bytes) as a {dtype} ({} bytes): the widths must agree",
                    from.bytes(),
                    dtype.bytes()
                ),
            ));
        }
        Ok(self.data(
            DataExpr::Reinterpret {
                dtype,
                from,
                value: id,
            },
            Some(dtype),
        ))
    }
}
