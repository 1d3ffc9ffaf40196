//! Element computations: the world's data expressions as thread-program values, with TVM's dtype
//! rules made explicit (every node gets a dtype, operands are cast to it).

use tilec_ir::data::{BinaryOp, DataExpr};
use tilec_ir::thread::{UnaryOp, Value, ValueId};
use tilec_ir::{DType, DataId, EntityId, ExprId};

use super::{Lowering, Unlowerable};

/// The wider of two dtypes as TVM combines operands: floats win over integers, more bits win, and
/// fp16 with bf16 meet in fp32.
pub(super) fn promote(a: Option<DType>, b: Option<DType>) -> Option<DType> {
    match (a, b) {
        (None, other) | (other, None) => other,
        (Some(a), Some(b)) if a == b => Some(a),
        (Some(a), Some(b)) => Some(match (a.is_float(), b.is_float()) {
            (true, false) => a,
            (false, true) => b,
            _ if a.bytes() != b.bytes() => {
                if a.bytes() > b.bytes() {
                    a
                } else {
                    b
                }
            }
            (true, true) => DType::Float32,
            _ => a,
        }),
    }
}

impl Lowering<'_> {
    /// The dtype an expression has on its own; `None` for untyped Python literals, which take the
    /// dtype of what they are combined with.
    pub(super) fn natural_dtype(&self, data: DataId) -> Option<DType> {
        match self.world.data.get(data) {
            DataExpr::Float { dtype, .. } | DataExpr::Int { dtype, .. } => *dtype,
            DataExpr::Index(_) => Some(DType::Int32),
            DataExpr::Load { buffer, .. } | DataExpr::ReadVar(buffer) => {
                self.world.dtypes.get(*buffer).copied()
            }
            DataExpr::Neg(inner) => self.natural_dtype(*inner),
            DataExpr::Not(_) | DataExpr::Compare { .. } => Some(DType::Bool),
            DataExpr::Binary { op, lhs, rhs } => {
                if matches!(op, BinaryOp::And | BinaryOp::Or) {
                    return Some(DType::Bool);
                }
                promote(self.natural_dtype(*lhs), self.natural_dtype(*rhs))
            }
            DataExpr::Call { args, .. } => args
                .iter()
                .fold(None, |acc, &arg| promote(acc, self.natural_dtype(arg))),
            DataExpr::Cast { dtype, .. } | DataExpr::Reinterpret { dtype, .. } => Some(*dtype),
            DataExpr::Shuffle { value, .. } | DataExpr::WarpReduce { value, .. } => {
                self.natural_dtype(*value)
            }
            DataExpr::Random(kind) => Some(kind.dtype()),
            DataExpr::Select {
                then, otherwise, ..
            } => promote(self.natural_dtype(*then), self.natural_dtype(*otherwise)),
        }
    }

    fn literal_default(&self, data: DataId) -> DType {
        match self.world.data.get(data) {
            DataExpr::Float { .. } => DType::Float32,
            _ => DType::Int32,
        }
    }

    /// Lowers `data` to a value of dtype `want` (casting when its own dtype differs).
    pub(super) fn value_as(&mut self, data: DataId, want: DType) -> Result<ValueId, Unlowerable> {
        let value = self.value(data, Some(want))?;
        Ok(self.cast(value, want))
    }

    pub(super) fn cast(&mut self, value: ValueId, want: DType) -> ValueId {
        if self.program.dtype_of(value) == want {
            return value;
        }
        self.program.add_value(Value::Cast { dtype: want, value })
    }

    /// Lowers `data`; `hint` types untyped literals.
    pub(super) fn value(
        &mut self,
        data: DataId,
        hint: Option<DType>,
    ) -> Result<ValueId, Unlowerable> {
        let dtype = self
            .natural_dtype(data)
            .or(hint)
            .unwrap_or_else(|| self.literal_default(data));
        let node = match self.world.data.get(data).clone() {
            DataExpr::Float { bits, .. } => Value::Float { bits, dtype },
            DataExpr::Int { value, .. } if dtype.is_float() => Value::Float {
                bits: (value as f64).to_bits(),
                dtype,
            },
            DataExpr::Int { value, .. } => Value::Int { value, dtype },
            DataExpr::Index(expr) => Value::Index(expr),
            DataExpr::Load { buffer, indices } => return self.load(buffer, &indices, dtype),
            DataExpr::ReadVar(var) => {
                let zero = self.program.exprs.int(0);
                let buffer = self.buffer_of(var)?;
                Value::Load {
                    buffer,
                    index: zero,
                }
            }
            DataExpr::Neg(inner) => {
                let arg = self.value_as(inner, dtype)?;
                Value::Unary {
                    op: UnaryOp::Neg,
                    arg,
                    dtype,
                }
            }
            DataExpr::Not(inner) => {
                let arg = self.value_as(inner, DType::Bool)?;
                Value::Unary {
                    op: UnaryOp::Not,
                    arg,
                    dtype: DType::Bool,
                }
            }
            DataExpr::Binary { op, lhs, rhs } => {
                let operand = if matches!(op, BinaryOp::And | BinaryOp::Or) {
                    DType::Bool
                } else {
                    dtype
                };
                let lhs = self.value_as(lhs, operand)?;
                let rhs = self.value_as(rhs, operand)?;
                Value::Binary {
                    op,
                    lhs,
                    rhs,
                    dtype,
                }
            }
            DataExpr::Compare { op, lhs, rhs } => {
                let common = promote(self.natural_dtype(lhs), self.natural_dtype(rhs))
                    .unwrap_or_else(|| self.literal_default(lhs));
                let lhs = self.value_as(lhs, common)?;
                let rhs = self.value_as(rhs, common)?;
                Value::Compare { op, lhs, rhs }
            }
            DataExpr::Call { intrinsic, args } => {
                let lowered = args
                    .iter()
                    .map(|&arg| self.value_as(arg, dtype))
                    .collect::<Result<Vec<_>, _>>()?;
                match lowered.as_slice() {
                    [arg] => Value::Unary {
                        op: UnaryOp::Intrinsic(intrinsic),
                        arg: *arg,
                        dtype,
                    },
                    [lhs, rhs] => self.binary_intrinsic(intrinsic, *lhs, *rhs, dtype)?,
                    _ => {
                        return Err(Unlowerable::new(format!(
                            "`T.{}` with {} arguments",
                            intrinsic.name(),
                            args.len()
                        )));
                    }
                }
            }
            DataExpr::Cast { dtype, value } => {
                let inner = self.value(value, Some(dtype))?;
                Value::Cast {
                    dtype,
                    value: inner,
                }
            }
            DataExpr::Reinterpret { dtype, from, value } => {
                let arg = self.value_as(value, from)?;
                Value::Unary {
                    op: UnaryOp::Reinterpret { from },
                    arg,
                    dtype,
                }
            }
            DataExpr::Shuffle {
                kind,
                value,
                lane,
                width,
                mask,
            } => Value::Shuffle {
                kind,
                value: self.value_as(value, dtype)?,
                lane: self.value_as(lane, DType::Int32)?,
                width: self.value_as(width, DType::Int32)?,
                mask: self.value_as(mask, DType::UInt32)?,
                dtype,
            },
            DataExpr::WarpReduce { op, value } => {
                let value = self.value_as(value, dtype)?;
                return Ok(self.warp_reduce(op, value, dtype));
            }
            DataExpr::Random(kind) => Value::Random(kind),
            DataExpr::Select {
                cond,
                then,
                otherwise,
            } => {
                let known = self.known_comparisons.len();
                self.conjuncts_of(cond);
                let taken = self.value_as(then, dtype);
                self.known_comparisons.truncate(known);
                let then = taken?;
                let cond = self.value_as(cond, DType::Bool)?;
                let otherwise = self.value_as(otherwise, dtype)?;
                Value::Select {
                    cond,
                    then,
                    otherwise,
                    dtype,
                }
            }
        };
        Ok(self.program.add_value(node))
    }

    /// A load of `buffer[indices]`. A global load whose indices the compiler cannot prove inside
    /// the buffer reads zero where they are not, as TileLang's safe-memory pass makes it
    /// (`if_then_else(in_bounds, load, 0)`): the statement around it still runs, so a kernel that
    /// pads a tile past the tensor's edge stores zeros there instead of skipping the store. The
    /// load sits in one branch of the select, which the printer keeps inline and the emulator
    /// evaluates only for the lanes that take it.
    fn load(
        &mut self,
        buffer: EntityId,
        indices: &[ExprId],
        dtype: DType,
    ) -> Result<ValueId, Unlowerable> {
        let (address, index) = self.address(buffer, indices)?;
        let load = self.program.add_value(Value::Load {
            buffer: address,
            index,
        });
        let mut in_bounds = None;
        for (op, lhs, rhs) in self.bounds_conditions(buffer, indices) {
            if !self.known_comparisons.contains(&(op, lhs, rhs)) {
                let cond = self.compare_indices(op, lhs, rhs);
                in_bounds = Some(self.and(in_bounds, cond));
            }
        }
        let Some(in_bounds) = in_bounds else {
            return Ok(load);
        };
        let zero = self.constant(0.0, dtype);
        Ok(self.program.add_value(Value::Select {
            cond: in_bounds,
            then: load,
            otherwise: zero,
            dtype,
        }))
    }

    /// Records the index comparisons `cond` is a conjunction of (`a >= 0 and a < n`) as known while
    /// the branch it selects is lowered.
    fn conjuncts_of(&mut self, cond: DataId) {
        match self.world.data.get(cond).clone() {
            DataExpr::Binary {
                op: BinaryOp::And,
                lhs,
                rhs,
            } => {
                self.conjuncts_of(lhs);
                self.conjuncts_of(rhs);
            }
            DataExpr::Compare { op, lhs, rhs } => {
                if let (Some(lhs), Some(rhs)) = (self.index_of(lhs), self.index_of(rhs)) {
                    self.known_comparisons.push((op, lhs, rhs));
                }
            }
            _ => {}
        }
    }

    /// An integer data expression as an index expression, where it is one.
    fn index_of(&mut self, data: DataId) -> Option<ExprId> {
        match *self.world.data.get(data) {
            DataExpr::Index(expr) => Some(expr),
            DataExpr::Int { value, .. } => Some(self.program.exprs.int(value)),
            _ => None,
        }
    }

    /// `T.warp_reduce_*`: the butterfly TileLang's `tl::warp_reduce` runs, `value = op(value,
    /// shfl_xor(value, offset))` for offsets 16, 8, 4, 2, 1, so that a float sum adds in the same
    /// order and every lane ends with the same result.
    fn warp_reduce(&mut self, op: BinaryOp, value: ValueId, dtype: DType) -> ValueId {
        let mut acc = value;
        for offset in [16, 8, 4, 2, 1] {
            let theirs = self.program.add_value(Value::ShuffleXor {
                value: acc,
                mask: offset,
                dtype,
            });
            acc = self.program.add_value(Value::Binary {
                op,
                lhs: acc,
                rhs: theirs,
                dtype,
            });
        }
        acc
    }

    /// `T.max(a, b)` and `T.min(a, b)` as the two-operand [`BinaryOp::Max`] and
    /// [`BinaryOp::Min`], the form the reductions combine with too (one `max.f32` on the GPU).
    fn binary_intrinsic(
        &mut self,
        intrinsic: tilec_ir::Intrinsic,
        lhs: ValueId,
        rhs: ValueId,
        dtype: DType,
    ) -> Result<Value, Unlowerable> {
        use tilec_ir::Intrinsic;
        let op = match intrinsic {
            Intrinsic::Min => BinaryOp::Min,
            Intrinsic::Max => BinaryOp::Max,
            Intrinsic::Pow => BinaryOp::Pow,
            Intrinsic::CopySign => BinaryOp::CopySign,
            Intrinsic::TruncDiv => BinaryOp::Div,
            Intrinsic::TruncMod => BinaryOp::TruncMod,
            Intrinsic::Exp
            | Intrinsic::Exp2
            | Intrinsic::Log
            | Intrinsic::Log2
            | Intrinsic::Sqrt
            | Intrinsic::Rsqrt
            | Intrinsic::Abs
            | Intrinsic::Sigmoid
            | Intrinsic::Tanh
            | Intrinsic::Floor
            | Intrinsic::Ceil
            | Intrinsic::Trunc
            | Intrinsic::Round
            | Intrinsic::Erf
            | Intrinsic::Sin
            | Intrinsic::Cos
            | Intrinsic::Tan
            | Intrinsic::Sinh
            | Intrinsic::Cosh
            | Intrinsic::Asin
            | Intrinsic::Acos
            | Intrinsic::Atan
            | Intrinsic::Exp10
            | Intrinsic::Log10
            | Intrinsic::Log1p => {
                return Err(Unlowerable::new(format!(
                    "`T.{}` with two arguments",
                    intrinsic.name()
                )));
            }
        };
        Ok(Value::Binary {
            op,
            lhs,
            rhs,
            dtype,
        })
    }

    /// The program buffer and flat element index of `buffer[indices]`, as the current thread sees
    /// it: global and shared buffers row-major, fragments through their layout's local index.
    /// The element offset within one stage at which `buffer`'s inferred shared layout stores
    /// `buffer[indices]`; `None` when the buffer has no shared layout.
    pub(super) fn shared_layout_offset(
        &mut self,
        buffer: EntityId,
        indices: &[ExprId],
    ) -> Option<ExprId> {
        let map = &self.layouts.shared.get(&buffer)?.map;
        let offset = *map.outputs.first()?;
        let bindings: Vec<(tilec_ir::VarId, ExprId)> = map
            .vars
            .iter()
            .copied()
            .zip(indices.iter().copied())
            .collect();
        let lookup = |v| bindings.iter().find(|(var, _)| *var == v).map(|(_, e)| *e);
        Some(self.program.exprs.substitute(offset, &lookup))
    }

    pub(super) fn address(
        &mut self,
        buffer: EntityId,
        indices: &[ExprId],
    ) -> Result<(tilec_ir::thread::BufferId, ExprId), Unlowerable> {
        if self.world.is_alias(buffer) && !self.fragments.contains_key(&buffer) {
            let (base, indices) =
                self.world
                    .resolve_alias(&mut self.program.exprs, buffer, indices);
            return self.address(base, &indices);
        }
        let id = self.buffer_of(buffer)?;
        let index = match self.fragments.get(&buffer) {
            Some(fragment) => fragment.local_index(&mut self.program.exprs, indices),
            None if self.layouts.shared.contains_key(&buffer) => {
                let offset = match self.shared_layout_offset(buffer, indices) {
                    Some(offset) => offset,
                    None => self.program.exprs.int(0),
                };
                match self.current_stage.get(&buffer).copied() {
                    // Stage `s` of a pipelined buffer starts `s` storages further on.
                    Some(stage) => {
                        let storage = self.layouts.shared[&buffer].storage_elements;
                        let exprs = &mut self.program.exprs;
                        let size = exprs.int(storage);
                        let start = exprs.mul(stage, size);
                        exprs.add(offset, start)
                    }
                    None => offset,
                }
            }
            None => match self.program.buffer(id).strides.clone() {
                // A `T.StridedTensor`: each index steps over its dimension's stride.
                Some(strides) => {
                    let exprs = &mut self.program.exprs;
                    let mut offset = exprs.int(0);
                    for (&index, &stride) in indices.iter().zip(&strides) {
                        let step = exprs.mul(index, stride);
                        offset = exprs.add(offset, step);
                    }
                    offset
                }
                None => {
                    let shape = self.program.buffer(id).shape.clone();
                    self.program.exprs.flatten_row_major(indices, &shape)
                }
            },
        };
        Ok((id, index))
    }
}
