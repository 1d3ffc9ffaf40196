//! TileLang's ldmatrix-friendly swizzle of a shared tile (`tilelang.cuda.intrinsics`:
//! `get_swizzle_layout`, `make_mma_swizzle_layout`), which kernels written against its
//! tensor-core intrinsics annotate their operand buffers with.
//!
//! A row is cut into 16-byte chunks; within each group of `swizzle_bytes` (128 at most, the row
//! if it is shorter) the chunk number is XOR-ed with bits of the row number, so that the eight
//! rows an `ldmatrix` reads land in different banks. Groups of chunks beyond the first become an
//! outer dimension: the layout's outputs are `(group, row, swizzled column)`. The XOR is index
//! arithmetic (`bitwise.rs`), so the layout is an ordinary `T.Layout`.

use std::rc::Rc;

use ruff_python_ast::Operator;
use tilec_ir::{Code, LayoutAnnotation, LayoutKind};

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::value::Value;

impl Builder<'_> {
    /// `get_swizzle_layout(row, col, row_size, dtype, swizzle_bytes=None)`: the coordinates
    /// `(group, row, swizzled column)` that element `(row, col)` of a row of `row_size` elements
    /// is stored at.
    pub(crate) fn get_swizzle_layout<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let row = self.required(&args, 0, "row_idx")?;
        let col = self.required(&args, 1, "col_idx")?;
        let row_size = self.int_arg(&args, 2, "row_size", 0)?;
        let dtype = self.dtype_arg(&args, 3, "dtype")?;
        let swizzle_bytes = match args.get(4, "swizzle_bytes") {
            None | Some(Value::None) => None,
            Some(_) => Some(self.int_arg(&args, 4, "swizzle_bytes", 128)?),
        };
        let bits = crate::value::dtype_bytes(dtype) * 8;
        let row_bytes = bits * row_size / 8;
        if row_bytes <= 0 || row_bytes % 32 != 0 {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                format!(
                    "`get_swizzle_layout` swizzles rows of whole 32-byte sectors; a row of \
                     {row_size} {dtype} is {row_bytes} bytes"
                ),
            ));
        }
        let swizzle_bytes = swizzle_bytes.unwrap_or(row_bytes.min(128));
        let vectors = swizzle_bytes / 16;
        if !matches!(vectors, 2 | 4 | 8) {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                format!(
                    "`get_swizzle_layout` swizzles over 32, 64 or 128 bytes, not {swizzle_bytes}"
                ),
            ));
        }
        let per_chunk = 128 / bits;
        let span = args.span;
        let op = |builder: &mut Self, op, lhs: Value<'a>, rhs: i64| {
            builder.binary(op, lhs, Value::Int(rhs), span)
        };
        let chunk = op(self, Operator::FloorDiv, col.clone(), per_chunk)?;
        let within = op(self, Operator::Mod, col, per_chunk)?;
        let group = op(self, Operator::FloorDiv, chunk.clone(), vectors)?;
        let column_chunk = op(self, Operator::Mod, chunk, vectors)?;
        let row_in_atom = op(self, Operator::Mod, row.clone(), 8)?;
        let source = op(self, Operator::FloorDiv, row_in_atom, 8 / vectors)?;
        let mixed = self.binary(Operator::BitXor, column_chunk, source, span)?;
        let scaled = op(self, Operator::Mult, mixed, per_chunk)?;
        let swizzled = self.binary(Operator::Add, scaled, within, span)?;
        Ok(Value::tuple(vec![group, row, swizzled]))
    }

    /// `make_mma_swizzle_layout(buffer, is_smooth=False)`: the buffer's last two dimensions
    /// swizzled by [`Builder::get_swizzle_layout`] when a row is a whole number of 64-byte
    /// halves of a bank line, else (or with `is_smooth`) left row-major.
    pub(crate) fn make_mma_swizzle_layout<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let Some(Value::Buffer(buffer)) = args.get(0, "shared_buf").cloned() else {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "`make_mma_swizzle_layout` takes the shared buffer to lay out",
            ));
        };
        let smooth = self.bool_arg(&args, 1, "is_smooth", false)?;
        let (Some(shape), Some(&dtype)) = (
            self.world.const_shape(buffer),
            self.world.dtypes.get(buffer),
        ) else {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "`make_mma_swizzle_layout` needs a buffer of known shape and dtype",
            ));
        };
        let names = ["i", "j", "k", "l"];
        let vars: Vec<_> = shape
            .iter()
            .enumerate()
            .map(|(dim, &extent)| {
                let name = names.get(dim).copied().unwrap_or("x");
                self.world.exprs.var(name, Some(extent))
            })
            .collect();
        let mut outputs: Vec<_> = vars.iter().map(|&v| self.world.exprs.var_expr(v)).collect();
        let last = shape.last().copied().unwrap_or(0);
        let swizzles = shape.len() >= 2 && (last * crate::value::dtype_bytes(dtype) * 8) % 512 == 0;
        if swizzles && !smooth {
            let j = outputs.pop().map(Value::Index);
            let i = outputs.pop().map(Value::Index);
            let (Some(i), Some(j)) = (i, j) else {
                return Err(self.error(
                    Code::InvalidCall,
                    args.span,
                    "a swizzle needs two dimensions",
                ));
            };
            let coordinates = Args {
                positional: vec![
                    (i, args.span),
                    (j, args.span),
                    (Value::Int(last), args.span),
                    (Value::DType(dtype), args.span),
                ],
                keywords: Vec::new(),
                span: args.span,
            };
            let Value::Tuple(items) = self.get_swizzle_layout(coordinates)? else {
                return Err(self.error(
                    Code::InvalidCall,
                    args.span,
                    "a swizzle gives three coordinates",
                ));
            };
            for item in items.iter() {
                let Some(index) = self.index_expr(item) else {
                    return Err(self.error(
                        Code::InvalidCall,
                        args.span,
                        "a swizzle coordinate is not an index expression",
                    ));
                };
                outputs.push(index);
            }
        }
        Ok(Value::Layout(Rc::new(LayoutAnnotation {
            kind: LayoutKind::Layout,
            shape,
            vars,
            outputs,
            replica: None,
        })))
    }
}
