//! `T.index_to_coordinates(index, shape)`: the coordinates of a flat row-major index in `shape`,
//! as a list (the last dimension fastest), as TileLang computes them: repeated floor modulo and
//! floor division by the extents from the last one on, so the first coordinate wraps too. Integers give integers; run-time indices
//! give index expressions.

use tilec_ir::{Code, ExprId};

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::value::Value;

impl Builder<'_> {
    pub(super) fn index_to_coordinates<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let index = self.required(&args, 0, "index")?;
        let shape = self.required(&args, 1, "shape")?;
        let extents = match &shape {
            Value::Tuple(items) | Value::List(items) => items.to_vec(),
            single => vec![single.clone()],
        };
        let not_integers = |builder: &mut Self| {
            builder.error(
                Code::InvalidCall,
                args.span,
                "`T.index_to_coordinates` takes an integer index and a shape of integers",
            )
        };
        let Some(mut rest) = self.runtime_index(&index, args.span) else {
            return Err(not_integers(self));
        };
        let mut coordinates: Vec<ExprId> = Vec::with_capacity(extents.len());
        for extent in extents.iter().rev() {
            let Some(extent) = self.runtime_index(extent, args.span) else {
                return Err(not_integers(self));
            };
            coordinates.push(self.world.exprs.floormod(rest, extent));
            rest = self.world.exprs.floordiv(rest, extent);
        }
        coordinates.reverse();
        let values = coordinates
            .into_iter()
            .map(|id| self.index_value(id))
            .collect();
        Ok(Value::List(std::rc::Rc::new(values)))
    }
}
