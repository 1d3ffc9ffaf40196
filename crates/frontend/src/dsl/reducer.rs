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
//! physical plan, which tilec's layout inference makes; the result is the same.
//!
//! The current form is read as the same thing: `T.reducer_init(acc, init=None)` starts every copy
//! at the operation's identity, `T.reducer_update(acc[i], v)` is `acc[i] = op(acc[i], v)`, and
//! `T.finalize_reducer(acc, dst)` combines the copies, then `init` once, and copies the result
//! into `dst`. A contribution of a replicated `T.Parallel` loop is made by one of its replicas.

use tilec_ir::data::BinaryOp;
use tilec_ir::{
    Access, AccessKind, Code, DType, DataExpr, EntityId, EntityKind, Intrinsic, Scope, TileOp,
};

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
        let dst = match args.get(1, "dst") {
            None | Some(Value::None) => None,
            Some(Value::Buffer(dst)) if self.world.kind(*dst) == Some(EntityKind::Buffer) => {
                Some(*dst)
            }
            Some(other) => {
                let found = other.describe();
                return Err(self.error(
                    Code::InvalidCall,
                    args.span_of(1, "dst"),
                    format!("`T.finalize_reducer` writes into a fragment, found {found}"),
                ));
            }
        };
        let init = self
            .reducer_inits
            .iter()
            .rev()
            .find(|(reducer, _)| *reducer == buffer)
            .and_then(|(_, init)| *init);
        let op = TileOp::FinalizeReducer {
            buffer,
            combiner,
            init,
        };
        let entity = self.add_tile_op(op, "`T.finalize_reducer`", args.span)?;
        let whole = self.world.full_region(buffer);
        self.world.accesses.set(
            entity,
            vec![Access {
                kind: AccessKind::ReadWrite,
                region: whole.clone(),
            }],
        );
        if let Some(dst) = dst {
            let copy = TileOp::Copy {
                src: whole,
                dst: self.world.full_region(dst),
            };
            self.add_tile_op(copy, "`T.finalize_reducer`", args.span)?;
        }
        Ok(Value::None)
    }

    /// The reducer a reducer operation's argument names, with its operation.
    fn reducer_arg(
        &mut self,
        value: Option<&Value<'_>>,
        span: tilec_ir::Span,
        what: &str,
    ) -> Eval<(EntityId, BinaryOp)> {
        let buffer = match value {
            Some(Value::Buffer(buffer)) => Some(*buffer),
            Some(Value::Region(region)) => Some(region.buffer),
            Some(Value::Poison) => return Err(Stop),
            _ => None,
        };
        match buffer.and_then(|b| self.world.reducers.get(b).map(|&op| (b, op))) {
            Some(found) => Ok(found),
            None => Err(self.error(
                Code::InvalidCall,
                span,
                format!("`T.{what}` takes a reducer made by `T.alloc_reducer`"),
            )),
        }
    }

    /// `T.reducer_init(acc, init=None)`: every copy starts at the operation's identity; `init`
    /// is combined once, when the reducer is finalized.
    pub(super) fn reducer_init<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let span = args.span_of(0, "reducer");
        let (buffer, combiner) = self.reducer_arg(args.get(0, "reducer"), span, "reducer_init")?;
        let dtype = self
            .world
            .dtypes
            .get(buffer)
            .copied()
            .unwrap_or(DType::Float32);
        let Some(identity) = identity(combiner, dtype) else {
            return Err(self.error(
                Code::NotAnalysed,
                span,
                format!(
                    "tilec has no identity of `{}` on {dtype} yet",
                    combiner.symbol()
                ),
            ));
        };
        let init = match args.get(1, "init") {
            None | Some(Value::None) => None,
            Some(value) => {
                let value = value.clone();
                let init_span = args.span_of(1, "init");
                let (id, _) = self.data_expr(&value, init_span)?;
                let mut loads = Vec::new();
                self.world.data.loads(id, &mut loads);
                if !loads.is_empty() {
                    return Err(self.error(
                        Code::NotAnalysed,
                        init_span,
                        "tilec supports a reducer's `init` that reads no buffer (it is \
                         combined in when the reducer is finalized)",
                    ));
                }
                Some(id)
            }
        };
        self.reducer_inits.push((buffer, init));
        let value = self.world.data.push(identity);
        let fill = TileOp::Fill {
            dst: self.world.full_region(buffer),
            value,
            clear: false,
        };
        self.add_tile_op(fill, "`T.reducer_init`", args.span)?;
        Ok(Value::None)
    }

    /// `T.reducer_update(acc[indices], value)`: `acc[indices] = op(acc[indices], value)`.
    pub(super) fn reducer_update<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let span = args.span_of(0, "target");
        let (buffer, combiner) = self.reducer_arg(args.get(0, "target"), span, "reducer_update")?;
        let Some(Value::Region(target)) = args.get(0, "target").cloned() else {
            return Err(self.error(
                Code::InvalidCall,
                span,
                "`T.reducer_update` takes the element it updates, `acc[indices]`",
            ));
        };
        let dtype = self.world.dtypes.get(buffer).copied();
        let value = self.required(&args, 1, "value")?;
        let (value, value_dtype) = self.data_expr(&value, args.span_of(1, "value"))?;
        let value = match dtype {
            Some(dtype) if value_dtype != Some(dtype) => {
                self.world.data.push(DataExpr::Cast { dtype, value })
            }
            _ => value,
        };
        let (current, _) = self.data_expr(&Value::Region(target.clone()), span)?;
        let combined = match combiner {
            BinaryOp::Max | BinaryOp::Min => DataExpr::Call {
                intrinsic: if combiner == BinaryOp::Max {
                    Intrinsic::Max
                } else {
                    Intrinsic::Min
                },
                args: vec![current, value],
            },
            op => DataExpr::Binary {
                op,
                lhs: current,
                rhs: value,
            },
        };
        let combined = self.data(combined, dtype);
        self.store(target, combined, args.span)?;
        Ok(Value::None)
    }
}

/// The value `combiner` leaves any value unchanged with, as a value of `dtype` (TileLang's:
/// the lowest and highest values for `max` and `min`, all ones for `bitand`). `None` where an
/// `i64` cannot say it (the highest `uint64`).
fn identity(combiner: BinaryOp, dtype: DType) -> Option<DataExpr> {
    let float = |value: f64| DataExpr::Float {
        bits: value.to_bits(),
        dtype: Some(dtype),
    };
    let int = |value: i64| DataExpr::Int {
        value,
        dtype: Some(dtype),
    };
    let bits = u32::try_from(dtype.bytes() * 8).unwrap_or(64);
    let unsigned = matches!(
        dtype,
        DType::Bool | DType::UInt8 | DType::UInt16 | DType::UInt32 | DType::UInt64
    );
    let highest = |bits: u32| {
        i64::MAX
            .checked_shr(64 - bits)
            .filter(|_| bits < 64 || !unsigned)
    };
    Some(match combiner {
        BinaryOp::Max if dtype.is_float() => float(f64::NEG_INFINITY),
        BinaryOp::Min if dtype.is_float() => float(f64::INFINITY),
        BinaryOp::Max if unsigned => int(0),
        BinaryOp::Max => int(i64::MIN.checked_shr(64 - bits).unwrap_or(i64::MIN)),
        BinaryOp::Min | BinaryOp::BitAnd if unsigned => {
            int(((1i128 << bits) - 1).try_into().ok()?)
        }
        BinaryOp::Min => int(highest(bits)?),
        BinaryOp::BitAnd => int(-1),
        _ => int(0),
    })
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
