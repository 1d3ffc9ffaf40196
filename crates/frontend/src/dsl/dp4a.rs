//! `T.dp4a(a, b, c)`: the four consecutive int8 elements from `a` times those from `b`, summed
//! into the int32 element `c` (CUDA's `__dp4a`). tilec reads it as the store it means,
//! `c += a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]` with every product in int32,
//! so checks, lowering and the emulator need nothing of their own; the CUDA compiler turns such
//! a sum back into the instruction.

use ruff_python_ast::Operator;
use tilec_ir::{Code, DType, DataExpr, Region};

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::value::Value;

/// Elements per operand of one `dp4a`.
const LANES: i64 = 4;

impl Builder<'_> {
    pub(super) fn dp4a<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let a = self.dp4a_operand(&args, 0, "A", DType::Int8)?;
        let b = self.dp4a_operand(&args, 1, "B", DType::Int8)?;
        let c = self.dp4a_operand(&args, 2, "C", DType::Int32)?;
        let mut total = Value::Region(c.clone());
        for lane in 0..LANES {
            let (a_lane, b_lane) = (self.shifted(&a, lane), self.shifted(&b, lane));
            let x = self.widened(&a_lane, args.span_of(0, "A"))?;
            let y = self.widened(&b_lane, args.span_of(1, "B"))?;
            let product = self.binary(Operator::Mult, x, y, args.span)?;
            total = self.binary(Operator::Add, total, product, args.span)?;
        }
        self.store(c, total, args.span)?;
        Ok(Value::None)
    }

    /// Operand `index`: an element of a buffer of `dtype` (a whole buffer is its first element).
    fn dp4a_operand(
        &mut self,
        args: &Args<'_>,
        index: usize,
        name: &str,
        dtype: DType,
    ) -> Eval<Region> {
        let region = match args.get(index, name) {
            Some(Value::Buffer(buffer)) => {
                let mut region = self.world.full_region(*buffer);
                let zero = self.world.exprs.int(0);
                for dim in &mut region.dims {
                    dim.start = zero;
                    dim.extent = None;
                }
                region
            }
            _ => self.element_arg(args, index, name, "dp4a")?,
        };
        let found = self.world.dtypes.get(region.buffer).copied();
        if found != Some(dtype) {
            let found = found.map_or("an unknown dtype", |d| d.name());
            return Err(self.error(
                Code::InvalidCall,
                args.span_of(index, name),
                format!(
                    "`T.dp4a` needs {} `{name}`, found {found}",
                    if dtype == DType::Int8 {
                        "int8 inputs as"
                    } else {
                        "an int32 accumulator as"
                    }
                ),
            ));
        }
        Ok(region)
    }

    /// The element `region` as an int32 value.
    fn widened<'a>(&mut self, region: &Region, span: tilec_ir::Span) -> Eval<Value<'a>> {
        let (id, _) = self.data_expr(&Value::Region(region.clone()), span)?;
        Ok(self.data(
            DataExpr::Cast {
                dtype: DType::Int32,
                value: id,
            },
            Some(DType::Int32),
        ))
    }
}
