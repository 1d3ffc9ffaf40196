//! Runtime (data) expressions: what a kernel computes on tensor elements.
//!
//! Index arithmetic lives in the integer [`ExprArena`](crate::expr::ExprArena); everything whose value
//! is only known when the kernel runs (a loaded element, `T.exp(x)`, a comparison of a loop variable
//! with a block index used as a mask) is a [`DataExpr`] here. A data expression may embed an index
//! expression (`bx * 128 + i >= k * 128 + j`).

use std::fmt;

use crate::dtype::DType;
use crate::expr::ExprId;
use crate::world::EntityId;

/// The id of a data expression in its world's [`DataArena`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DataId(u32);

impl DataId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    And,
    Or,
    /// The larger operand. The front end writes `T.max(a, b)` as an intrinsic call; lowering turns
    /// that call and `T.reduce_max`'s combining step into this node. On floats it is IEEE
    /// 754-2019's maximumNumber, which C's `fmaxf` and the GPU's `max.f32` implement: a NaN operand
    /// gives the other operand, and −0 counts as less than +0.
    Max,
    /// The smaller operand, as [`BinaryOp::Max`] is the larger (minimumNumber on floats).
    Min,
    /// The remainder of the quotient rounded toward zero, with the dividend's sign (C's `%` on
    /// integers, TVM's `truncmod`); [`BinaryOp::Mod`] is Python's, with the divisor's sign.
    TruncMod,
    /// The first operand's magnitude with the second's sign, sign bit included (`-0.0` is
    /// negative): C's `copysignf`.
    CopySign,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::FloorDiv => "//",
            BinaryOp::Mod => "%",
            BinaryOp::Pow => "**",
            BinaryOp::BitAnd => "&",
            BinaryOp::BitOr => "|",
            BinaryOp::BitXor => "^",
            BinaryOp::Shl => "<<",
            BinaryOp::Shr => ">>",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
            BinaryOp::TruncMod => "truncmod",
            BinaryOp::CopySign => "copysign",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl CompareOp {
    /// Whether `a op b` holds.
    pub fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CompareOp::Lt => a < b,
            CompareOp::Le => a <= b,
            CompareOp::Gt => a > b,
            CompareOp::Ge => a >= b,
            CompareOp::Eq => a == b,
            CompareOp::Ne => a != b,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
        }
    }
}

/// Element-wise math the DSL offers as `T.<name>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Intrinsic {
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Abs,
    Max,
    Min,
    Sigmoid,
    Tanh,
    /// Rounding to an integral value of the same float type: down, up, toward zero, and to the
    /// nearest with halves away from zero (C's `roundf`, which TVM's `round` is on CUDA).
    Floor,
    Ceil,
    Trunc,
    Round,
    /// The error function, `erf(x) = 2/√π ∫₀ˣ e^(−t²) dt` (GELU's exact form).
    Erf,
    /// Trigonometric and hyperbolic functions of radians (rotary embeddings, activations).
    Sin,
    Cos,
    Tan,
    Sinh,
    Cosh,
    Asin,
    Acos,
    Atan,
    /// `10^x`, `log10(x)` and `log(1 + x)` (exact for small `x`).
    Exp10,
    Log10,
    Log1p,
    /// `x^y` of two operands; lowering writes it as the power node.
    Pow,
    /// `T.copysign(x, y)`, `T.truncdiv(a, b)`, `T.truncmod(a, b)`: two operands each, written as
    /// their binary nodes by lowering (`truncdiv` is the integer [`BinaryOp::Div`]).
    CopySign,
    TruncDiv,
    TruncMod,
}

impl Intrinsic {
    pub fn from_name(name: &str) -> Option<Intrinsic> {
        Some(match name {
            "exp" => Intrinsic::Exp,
            "exp2" => Intrinsic::Exp2,
            "log" => Intrinsic::Log,
            "log2" => Intrinsic::Log2,
            "sqrt" => Intrinsic::Sqrt,
            "rsqrt" => Intrinsic::Rsqrt,
            "abs" => Intrinsic::Abs,
            "max" => Intrinsic::Max,
            "min" => Intrinsic::Min,
            "sigmoid" => Intrinsic::Sigmoid,
            "tanh" => Intrinsic::Tanh,
            "floor" => Intrinsic::Floor,
            "ceil" => Intrinsic::Ceil,
            "trunc" => Intrinsic::Trunc,
            "round" => Intrinsic::Round,
            "erf" => Intrinsic::Erf,
            "sin" => Intrinsic::Sin,
            "cos" => Intrinsic::Cos,
            "tan" => Intrinsic::Tan,
            "sinh" => Intrinsic::Sinh,
            "cosh" => Intrinsic::Cosh,
            "asin" => Intrinsic::Asin,
            "acos" => Intrinsic::Acos,
            "atan" => Intrinsic::Atan,
            "exp10" => Intrinsic::Exp10,
            "log10" => Intrinsic::Log10,
            "log1p" => Intrinsic::Log1p,
            "pow" => Intrinsic::Pow,
            "copysign" => Intrinsic::CopySign,
            "truncdiv" => Intrinsic::TruncDiv,
            "truncmod" => Intrinsic::TruncMod,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Intrinsic::Exp => "exp",
            Intrinsic::Exp2 => "exp2",
            Intrinsic::Log => "log",
            Intrinsic::Log2 => "log2",
            Intrinsic::Sqrt => "sqrt",
            Intrinsic::Rsqrt => "rsqrt",
            Intrinsic::Abs => "abs",
            Intrinsic::Max => "max",
            Intrinsic::Min => "min",
            Intrinsic::Sigmoid => "sigmoid",
            Intrinsic::Tanh => "tanh",
            Intrinsic::Floor => "floor",
            Intrinsic::Ceil => "ceil",
            Intrinsic::Trunc => "trunc",
            Intrinsic::Round => "round",
            Intrinsic::Erf => "erf",
            Intrinsic::Sin => "sin",
            Intrinsic::Cos => "cos",
            Intrinsic::Tan => "tan",
            Intrinsic::Sinh => "sinh",
            Intrinsic::Cosh => "cosh",
            Intrinsic::Asin => "asin",
            Intrinsic::Acos => "acos",
            Intrinsic::Atan => "atan",
            Intrinsic::Exp10 => "exp10",
            Intrinsic::Log10 => "log10",
            Intrinsic::Log1p => "log1p",
            Intrinsic::Pow => "pow",
            Intrinsic::CopySign => "copysign",
            Intrinsic::TruncDiv => "truncdiv",
            Intrinsic::TruncMod => "truncmod",
        }
    }

    /// How many operands the intrinsic takes.
    pub fn arity(self) -> usize {
        match self {
            Intrinsic::Max
            | Intrinsic::Min
            | Intrinsic::Pow
            | Intrinsic::CopySign
            | Intrinsic::TruncDiv
            | Intrinsic::TruncMod => 2,
            _ => 1,
        }
    }
}

/// One node of a data expression. `dtype` is `None` where the type follows from the operands
/// (Python literals take the type of what they are combined with, as in TVM).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DataExpr {
    /// A Python float literal, by bit pattern, with the dtype it was given (`T.float32(1.0)`) if any.
    Float {
        bits: u64,
        dtype: Option<DType>,
    },
    /// A Python int literal, with the dtype it was given if any.
    Int {
        value: i64,
        dtype: Option<DType>,
    },
    /// An index expression used as a value (int32).
    Index(ExprId),
    /// A read of one buffer element.
    Load {
        buffer: EntityId,
        indices: Vec<ExprId>,
    },
    /// A read of a scalar variable made with `T.alloc_var`.
    ReadVar(EntityId),
    Neg(DataId),
    Not(DataId),
    Binary {
        op: BinaryOp,
        lhs: DataId,
        rhs: DataId,
    },
    Compare {
        op: CompareOp,
        lhs: DataId,
        rhs: DataId,
    },
    Call {
        intrinsic: Intrinsic,
        args: Vec<DataId>,
    },
    Cast {
        dtype: DType,
        value: DataId,
    },
    /// `T.if_then_else(cond, then, else)`.
    Select {
        cond: DataId,
        then: DataId,
        otherwise: DataId,
    },
    /// `T.reinterpret(value, dtype)`: the bits of `value`, a value of `from`, read as a `dtype`
    /// of the same width (a float's bit pattern as an unsigned integer, for radix selection).
    Reinterpret {
        dtype: DType,
        from: DType,
        value: DataId,
    },
    /// A warp shuffle (`T.shfl_sync`, `T.shfl_xor`, `T.shfl_down`, `T.shfl_up`,
    /// `T.tvm_warp_shuffle*`): `value` as another lane of the same warp computed it, the lane
    /// chosen by `kind` from `lane` within segments of `width` lanes, among the lanes of `mask`.
    Shuffle {
        kind: ShuffleKind,
        value: DataId,
        lane: DataId,
        width: DataId,
        mask: DataId,
    },
    /// `T.warp_reduce_sum(value)` and its siblings: `value` combined with `op` (`Add`, `Max`,
    /// `Min`, `BitAnd` or `BitOr`) over the 32 lanes of the warp, the result in every lane.
    WarpReduce {
        op: BinaryOp,
        value: DataId,
    },
    /// `T.rng_rand()` / `T.rng_rand_float()`: the next number of the executing thread's random
    /// generator (the one `T.rng_init` set up). Each evaluation draws a new number.
    Random(RandomKind),
}

/// Which lane a warp shuffle reads, as CUDA's four `__shfl*_sync` intrinsics choose it. Lanes are
/// numbered within segments of `width` lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShuffleKind {
    /// `__shfl_sync`: lane `lane % width` of the segment.
    Index,
    /// `__shfl_xor_sync`: lane `own ^ lane`.
    Xor,
    /// `__shfl_down_sync`: lane `own + lane`.
    Down,
    /// `__shfl_up_sync`: lane `own - lane`.
    Up,
}

impl ShuffleKind {
    /// TileLang's spelling: `shfl_sync`, `shfl_xor`, `shfl_down`, `shfl_up`.
    pub fn name(self) -> &'static str {
        match self {
            ShuffleKind::Index => "shfl_sync",
            ShuffleKind::Xor => "shfl_xor",
            ShuffleKind::Down => "shfl_down",
            ShuffleKind::Up => "shfl_up",
        }
    }

    /// The CUDA intrinsic.
    pub fn intrinsic(self) -> &'static str {
        match self {
            ShuffleKind::Index => "__shfl_sync",
            ShuffleKind::Xor => "__shfl_xor_sync",
            ShuffleKind::Down => "__shfl_down_sync",
            ShuffleKind::Up => "__shfl_up_sync",
        }
    }

    /// The lane of the warp that lane `own` reads, for the operand `lane` and a segment `width`
    /// (a power of two from 1 to 32), as the PTX ISA defines `shfl.sync` with the clamp CUDA's
    /// intrinsics pass: only the low five bits of `lane` count; `Index` reads lane `lane % width`
    /// of its own segment; `Xor` and `Down` may read earlier segments but not later ones, `Up`
    /// not before its segment's start; a lane they may not read gives the reader its own value.
    pub fn source_lane(self, own: u32, lane: i64, width: u32) -> u32 {
        let own = own & 31;
        let segment_mask = 32u32.saturating_sub(width) & 31;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // masked to 0..=31
        let operand = (lane & 31) as u32;
        let clamp = if self == ShuffleKind::Up { 0 } else { 31 };
        let last = (own & segment_mask) | (clamp & !segment_mask);
        let first = own & segment_mask;
        let (source, valid) = match self {
            ShuffleKind::Index => {
                let source = first | (operand & !segment_mask & 31);
                (i64::from(source), source <= last)
            }
            ShuffleKind::Xor => {
                let source = own ^ operand;
                (i64::from(source), source <= last)
            }
            ShuffleKind::Down => {
                let source = own + operand;
                (i64::from(source), source <= last)
            }
            ShuffleKind::Up => {
                let source = i64::from(own) - i64::from(operand);
                (source, source >= i64::from(last))
            }
        };
        if valid {
            u32::try_from(source).unwrap_or(own)
        } else {
            own
        }
    }
}

/// What a random draw returns: curand's `curand`, `curand_uniform` (one 32-bit draw as a float
/// in (0, 1]), of the Philox4x32-10 generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RandomKind {
    /// A uniformly distributed `uint32`.
    Bits,
    /// A `float32` uniform in (0, 1]: `bits × 2^-32 + 2^-33`.
    Uniform,
}

impl RandomKind {
    pub fn dtype(self) -> DType {
        match self {
            RandomKind::Bits => DType::UInt32,
            RandomKind::Uniform => DType::Float32,
        }
    }

    /// The TileLang spelling.
    pub fn name(self) -> &'static str {
        match self {
            RandomKind::Bits => "T.rng_rand()",
            RandomKind::Uniform => "T.rng_rand_float()",
        }
    }
}

impl DataExpr {
    /// The data operands of this node, in order (index expressions are not data operands).
    pub fn operands(&self) -> impl Iterator<Item = DataId> + '_ {
        let (fixed, rest): ([Option<DataId>; 3], &[DataId]) = match self {
            DataExpr::Float { .. }
            | DataExpr::Int { .. }
            | DataExpr::Index(_)
            | DataExpr::Load { .. }
            | DataExpr::ReadVar(_)
            | DataExpr::Random(_) => ([None; 3], &[]),
            DataExpr::Neg(inner) | DataExpr::Not(inner) => ([Some(*inner), None, None], &[]),
            DataExpr::Shuffle {
                value,
                lane,
                width,
                mask,
                ..
            } => (
                [Some(*value), Some(*lane), Some(*width)],
                std::slice::from_ref(mask),
            ),
            DataExpr::Cast { value, .. }
            | DataExpr::Reinterpret { value, .. }
            | DataExpr::WarpReduce { value, .. } => ([Some(*value), None, None], &[]),
            DataExpr::Binary { lhs, rhs, .. } | DataExpr::Compare { lhs, rhs, .. } => {
                ([Some(*lhs), Some(*rhs), None], &[])
            }
            DataExpr::Call { args, .. } => ([None; 3], args.as_slice()),
            DataExpr::Select {
                cond,
                then,
                otherwise,
            } => ([Some(*cond), Some(*then), Some(*otherwise)], &[]),
        };
        fixed.into_iter().flatten().chain(rest.iter().copied())
    }
}

/// The data expressions of one world, in creation order.
///
/// Nodes may share operands (`v = v + v` makes one node whose two operands are the same id), so
/// an expression's tree, which every walk over it visits in full, can be exponentially larger
/// than the arena. `tree_size` keeps each node's tree size so that the front end can refuse an
/// expression whose walks would not finish.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataArena {
    nodes: Vec<DataExpr>,
    tree_sizes: Vec<u64>,
}

impl DataArena {
    pub fn push(&mut self, node: DataExpr) -> DataId {
        let id = DataId(u32::try_from(self.nodes.len()).unwrap_or(u32::MAX));
        let size = node.operands().fold(1u64, |size, operand| {
            size.saturating_add(self.tree_size(operand))
        });
        self.nodes.push(node);
        self.tree_sizes.push(size);
        id
    }

    /// How many nodes the expression `id` has written out as a tree (saturating at `u64::MAX`).
    pub fn tree_size(&self, id: DataId) -> u64 {
        self.tree_sizes[id.index()]
    }

    /// The node of `id`. Ids only come from `push` on the same arena, so the index is in range.
    pub fn get(&self, id: DataId) -> &DataExpr {
        &self.nodes[id.index()]
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every buffer element this expression reads, in evaluation order.
    /// Every index expression `id` reads: those used as values and the indices of its loads.
    pub fn index_exprs(&self, id: DataId, out: &mut Vec<ExprId>) {
        let node = self.get(id);
        match node {
            DataExpr::Index(index) => out.push(*index),
            DataExpr::Load { indices, .. } => out.extend(indices.iter().copied()),
            _ => {}
        }
        for operand in node.operands() {
            self.index_exprs(operand, out);
        }
    }

    pub fn loads(&self, id: DataId, out: &mut Vec<(EntityId, Vec<ExprId>)>) {
        let node = self.get(id);
        if let DataExpr::Load { buffer, indices } = node {
            out.push((*buffer, indices.clone()));
        }
        for operand in node.operands() {
            self.loads(operand, out);
        }
    }
}

impl fmt::Display for BinaryOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.symbol())
    }
}
