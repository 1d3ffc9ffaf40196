//! `T.alloc_reducer(shape, dtype, op="sum", replication=...)` and `T.finalize_reducer(reducer)`,
//! TileLang's legacy (v1) reducers:
//!
//! ```python
//! acc = T.alloc_reducer(block_M, accum_dtype, replication="all")
//! T.clear(acc)
//! for i, j in T.Parallel(block_M, block_N):
//!     acc[i] += a[i, j] * x[j]          # many iterations update one element
//! T.finalize_reducer(acc)               # acc[i] is the sum of all of them
//! ```
//!
//! The reducer is a fragment. Each thread that holds a copy of an element (layout inference
//! replicates it over the threads of the loop that update it) accumulates its own contributions,
//! and finalizing combines the copies of each element. `replication` only chose TileLang's
//! physical plan, which tilec's layout inference makes; the result is the same. The v2 form
//! (`T.finalize_reducer(acc, dst)` with `T.reducer_init` / `T.reducer_update`) is not read yet.

use tilec_ir::data::BinaryOp;
use tilec_ir::{Access, AccessKind, Code, EntityKind, Scope, TileOp};

use crate::builder::{Builder, Eval, Stop};
use crate::eval::Args;
use crate::value::Value;

impl Builder<'_> {
    pub(super) fn alloc_reducer<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let op = match args.get(2, "op") {
            None => "sum".to_owned(),
            Some(Value::Str(op)) => op.to_string(),
            Some(other) => {
                let found = other.describe();
                return Err(self.error(
                    Code::InvalidCall,
                    args.span_of(2, "op"),
                    format!("a reducer's `op` is a string (\"sum\", \"max\", ...), found {found}"),
                ));
            }
        };
        let Some(combiner) = reducer_combiner(&op) else {
            return Err(self.error(
                Code::InvalidCall,
                args.span_of(2, "op"),
                format!(
                    "unknown reducer op {op:?}: TileLang's are \"sum\", \"max\", \"min\", \
                     \"bitand\", \"bitor\" and \"bitxor\""
                ),
            ));
        };
        if let Some(Value::Str(replication)) = args.get(3, "replication")
            && !matches!(&**replication, "all" | "none")
        {
            return Err(self.error(
                Code::InvalidCall,
                args.span_of(3, "replication"),
                format!("a reducer's `replication` is \"all\" or \"none\", found {replication:?}"),
            ));
        }
        // The shape and dtype make a fragment as `T.alloc_fragment` does; `op` and
        // `replication` are not a scope.
        let fragment_args = Args {
            positional: args.positional.iter().take(2).cloned().collect(),
            keywords: args
                .keywords
                .iter()
                .filter(|(name, ..)| name == "shape" || name == "dtype")
                .cloned()
                .collect(),
            span: args.span,
        };
        let value = self.alloc(fragment_args, Scope::Fragment, "T.alloc_reducer")?;
        let Value::Buffer(buffer) = value else {
            return Err(Stop);
        };
        let bitwise = matches!(
            combiner,
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor
        );
        let dtype = self.world.dtypes.get(buffer).copied();
        if bitwise && dtype.is_some_and(|dtype| dtype.is_float()) {
            return Err(self.error(
                Code::DtypeMismatch,
                args.span_of(2, "op"),
                format!("the bitwise reducer op {op:?} needs an integer dtype"),
            ));
        }
        self.world.reducers.set(buffer, combiner);
        Ok(Value::Buffer(buffer))
    }

    /// `T.finalize_reducer(reducer)`: the in-place (legacy) form.
    pub(super) fn finalize_reducer<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let span = args.span_of(0, "reducer");
        let buffer = match args.get(0, "reducer") {
            Some(Value::Buffer(buffer)) if self.world.kind(*buffer) == Some(EntityKind::Buffer) => {
                *buffer
            }
            Some(Value::Poison) => return Err(Stop),
            _ => {
                return Err(self.error(
                    Code::InvalidCall,
                    span,
                    "`T.finalize_reducer` takes a buffer made by `T.alloc_reducer`",
                ));
            }
        };
        let Some(&combiner) = self.world.reducers.get(buffer) else {
            let name = self.world.name(buffer).to_owned();
            return Err(self.error(
                Code::InvalidCall,
                span,
                format!("`{name}` is not a reducer: make it with `T.alloc_reducer`"),
            ));
        };
        if !matches!(args.get(1, "dst"), None | Some(Value::None)) {
            return Err(self.error(
                Code::NotAnalysed,
                args.span_of(1, "dst"),
                "tilec reads the in-place `T.finalize_reducer(reducer)`; the form with a \
                 destination (reducer v2) is not supported yet",
            ));
        }
        let op = TileOp::FinalizeReducer { buffer, combiner };
        let entity = self.add_tile_op(op, "`T.finalize_reducer`", args.span)?;
        let whole = self.world.full_region(buffer);
        self.world.accesses.set(
            entity,
            vec![Access {
                kind: AccessKind::ReadWrite,
                region: whole,
            }],
        );
        Ok(Value::None)
    }
}

/// The operation of a reducer `op` string.
fn reducer_combiner(op: &str) -> Option<BinaryOp> {
    Some(match op {
        "sum" => BinaryOp::Add,
        "max" => BinaryOp::Max,
        "min" => BinaryOp::Min,
        "bitand" => BinaryOp::BitAnd,
        "bitor" => BinaryOp::BitOr,
        "bitxor" => BinaryOp::BitXor,
        _ => return None,
    })
}
