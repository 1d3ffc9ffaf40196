//! TVM's thread all-reduce as TileLang kernels write it by hand:
//!
//! ```python
//! with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, accum_dtype)]),
//!             "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
//!     T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, out[0], tk, dtype="handle"))
//! ```
//!
//! Every thread ends with, in `out[0]`, the combination of `acc[0]` over the threads that differ
//! from it only in the thread dimensions named at the end (`tk`). The combiner is read by calling
//! the lambda on two placeholder values: tilec knows the combiners that are one associative and
//! commutative operation of the two (`+`, `*`, `T.max`, `T.min`, `&`, `|`, `^`), which is what a
//! reduction across threads in any order needs. The identity is not needed: every thread of a
//! group contributes.

use tilec_ir::data::BinaryOp;
use tilec_ir::{Code, DataExpr, Intrinsic, Region, Span, TileOp};

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::value::Value;

impl Builder<'_> {
    /// `T.comm_reducer(combiner, identity)`: the operation `combiner(x, y)` is.
    pub(super) fn comm_reducer<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let span = args.span_of(0, "combiner");
        let Some(Value::Function(function)) = args.get(0, "combiner").cloned() else {
            return Err(self.error(
                Code::InvalidCall,
                span,
                "`T.comm_reducer` takes the combiner as a function of two values",
            ));
        };
        let dtype = match args.get(1, "identity") {
            Some(Value::List(items) | Value::Tuple(items)) if items.len() == 1 => {
                self.data_expr(&items[0], args.span_of(1, "identity"))?.1
            }
            _ => {
                return Err(self.error(
                    Code::NotAnalysed,
                    args.span_of(1, "identity"),
                    "tilec supports `T.comm_reducer` over one value: its identity is a list of \
                     one element",
                ));
            }
        };
        let x = self.placeholder("x");
        let y = self.placeholder("y");
        let placeholders = vec![
            (Value::Data { id: x, dtype }, span),
            (Value::Data { id: y, dtype }, span),
        ];
        let combined = self.call_function(
            &function,
            Args {
                positional: placeholders,
                keywords: Vec::new(),
                span,
            },
            span,
        )?;
        match self.combiner_of(&combined, x, y) {
            Some(op) => Ok(Value::CommReducer(op)),
            None => Err(self.error(
                Code::NotAnalysed,
                span,
                "tilec supports `T.comm_reducer` combiners that are one associative and \
                 commutative operation of their two arguments (`x + y`, `x * y`, `T.max(x, y)`, \
                 `T.min(x, y)`, `x & y`, `x | y`, `x ^ y`)",
            )),
        }
    }

    /// A data value that stands for an argument of a combiner: an index variable of its own, so
    /// that nothing else in the kernel is the same node.
    fn placeholder(&mut self, name: &str) -> tilec_ir::DataId {
        let var = self.world.exprs.var(name, None);
        let index = self.world.exprs.var_expr(var);
        self.world.data.push(DataExpr::Index(index))
    }

    /// The operation `combined` applies to the placeholders `x` and `y`, if it is one tilec folds
    /// across threads.
    fn combiner_of(
        &self,
        combined: &Value<'_>,
        x: tilec_ir::DataId,
        y: tilec_ir::DataId,
    ) -> Option<BinaryOp> {
        let Value::Data { id, .. } = combined else {
            return None;
        };
        let operands_are_xy =
            |a: tilec_ir::DataId, b: tilec_ir::DataId| (a, b) == (x, y) || (a, b) == (y, x);
        match self.world.data.get(*id) {
            DataExpr::Binary { op, lhs, rhs } if operands_are_xy(*lhs, *rhs) => match op {
                BinaryOp::Add
                | BinaryOp::Mul
                | BinaryOp::BitAnd
                | BinaryOp::BitOr
                | BinaryOp::BitXor
                | BinaryOp::Max
                | BinaryOp::Min
                | BinaryOp::And
                | BinaryOp::Or => Some(*op),
                _ => None,
            },
            DataExpr::Call { intrinsic, args } if args.len() == 2 => {
                if !operands_are_xy(args[0], args[1]) {
                    return None;
                }
                match intrinsic {
                    Intrinsic::Max => Some(BinaryOp::Max),
                    Intrinsic::Min => Some(BinaryOp::Min),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// `T.attr(node, key, value)`: tilec knows the reduce scope of a `T.comm_reducer`, which
    /// `T.tvm_thread_allreduce` inside it combines with, and the keys that only tell the code
    /// generator how to emit what the body does: `"async_scope"` (TileLang issues the body's
    /// stores to shared memory as `cp.async`, which the kernel's own barriers then wait for) and
    /// the `"pragma_*"` loop hints. Those run their body as written: the same values reach the
    /// same places.
    pub(super) fn attr_frame<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let key = match args.get(1, "attr_key") {
            Some(Value::Str(key)) => key.to_string(),
            _ => String::new(),
        };
        match (args.get(0, "node"), key.as_str()) {
            (Some(Value::CommReducer(op)), "reduce_scope") => Ok(Value::ReduceScope(*op)),
            (Some(Value::Poison), _) => Err(crate::builder::Stop),
            (_, "async_scope") => Ok(Value::NoOpFrame),
            (_, key) if key.starts_with("pragma_") => Ok(Value::NoOpFrame),
            _ => Err(self.error(
                Code::NotAnalysed,
                args.span,
                format!(
                    "tilec supports `T.attr` as the `\"reduce_scope\"` of a \
                     `T.comm_reducer`, `\"async_scope\"` and `\"pragma_*\"` hints (found key \
                     {key:?})"
                ),
            )),
        }
    }

    /// `T.tvm_thread_allreduce(count, source, cond, result, *threads)`.
    pub(super) fn thread_allreduce<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let Some(&combiner) = self.reduce_scopes.last() else {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "`T.tvm_thread_allreduce` belongs inside `with T.attr(T.comm_reducer(...), \
                 \"reduce_scope\", ...)`, which says how values combine",
            ));
        };
        let positional: Vec<(Value<'a>, Span)> = args.positional.clone();
        let count = positional
            .first()
            .map(|(value, _)| self.integer_value(value));
        if count != Some(Some(1)) || positional.len() < 5 {
            return Err(self.error(
                Code::NotAnalysed,
                args.span,
                "tilec supports `T.tvm_thread_allreduce(1, source, True, result, *threads)`: one \
                 value reduced over the given thread dimensions",
            ));
        }
        let (source_value, source_span) = &positional[1];
        let (source, _) = self.data_expr(source_value, *source_span)?;
        let (cond, cond_span) = &positional[2];
        if !matches!(cond, Value::Bool(true)) && self.integer_value(cond) != Some(1) {
            return Err(self.error(
                Code::NotAnalysed,
                *cond_span,
                "tilec supports `T.tvm_thread_allreduce` whose condition is `True`: every \
                 thread contributes",
            ));
        }
        let result = match &positional[3].0 {
            Value::Region(region) if region.dims.iter().all(|dim| dim.extent.is_none()) => {
                region.clone()
            }
            other => {
                let what = other.describe();
                return Err(self.error(
                    Code::InvalidCall,
                    positional[3].1,
                    format!(
                        "the result of `T.tvm_thread_allreduce` is a buffer element, found {what}"
                    ),
                ));
            }
        };
        let mut dims = Vec::new();
        for (value, span) in &positional[4..] {
            let dim = self.reduced_thread_dimension(value, *span)?;
            if !dims.contains(&dim) {
                dims.push(dim);
            }
        }
        self.add_thread_allreduce(combiner, source, result, dims, args.span)?;
        Ok(Value::None)
    }

    fn add_thread_allreduce(
        &mut self,
        combiner: BinaryOp,
        source: tilec_ir::DataId,
        result: Region,
        dims: Vec<usize>,
        span: Span,
    ) -> Eval<()> {
        let op = TileOp::ThreadAllReduce {
            combiner,
            source,
            result,
            dims,
        };
        self.add_tile_op(op, "`T.tvm_thread_allreduce`", span)
            .map(|_| ())
    }

    /// Which thread dimension (0, 1, 2 for x, y, z) a reduced thread argument is: it must be
    /// that dimension's index as `T.get_thread_binding(d)` or `T.thread_binding` gives it.
    fn reduced_thread_dimension(&mut self, value: &Value<'_>, span: Span) -> Eval<usize> {
        let index = match value {
            Value::Index(index) | Value::ThreadBinding(index) => Some(*index),
            _ => None,
        };
        let (flat, threads) = self.flat_thread_index(span, "tvm_thread_allreduce")?;
        let found = index.and_then(|index| {
            (0..threads.len()).find(|&dim| self.thread_dimension(flat, &threads, dim) == index)
        });
        found.ok_or_else(|| {
            self.error(
                Code::InvalidCall,
                span,
                "`T.tvm_thread_allreduce` reduces over thread indices: pass \
                 `T.get_thread_binding(d)` or a `T.thread_binding(...)` of the launch",
            )
        })
    }

    /// A Python int, or an integer constant such as `T.uint32(1)`.
    fn integer_value(&self, value: &Value<'_>) -> Option<i64> {
        match value {
            Value::Int(value) => Some(*value),
            Value::Index(index) => self.world.exprs.as_int(*index),
            Value::Data { id, .. } => match self.world.data.get(*id) {
                DataExpr::Int { value, .. } => Some(*value),
                DataExpr::Index(index) => self.world.exprs.as_int(*index),
                _ => None,
            },
            _ => None,
        }
    }
}
