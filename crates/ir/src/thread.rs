//! The thread program: what one thread of one block executes, after lowering.
//!
//! Lowering (in `tilec-passes`) turns a kernel world plus its layouts into a [`ThreadProgram`]. It is
//! the single description of what runs: the CUDA printer prints it statement by statement and the CPU
//! emulator executes it, so whatever the emulator proves about a program holds for the generated CUDA.
//!
//! The program is written for one thread. Every index is an integer expression in the program's own
//! [`ExprArena`] over a small set of variables: the flat thread index, the block indices, loop
//! variables, `let`-bound indices and the kernel's scalar parameters (symbolic dimensions). Element
//! values are [`Value`] nodes in the program's value arena.
//!
//! Two execution rules tie the printer and the emulator together:
//! - statements run in lockstep within a block: a [`Value::ShuffleXor`] reads its operand as computed by
//!   the partner lane for the same statement, as `__shfl_xor_sync` does when the whole warp is active;
//! - loop extents never depend on the thread index, so every thread of a block reaches every
//!   [`Stmt::Barrier`] the same number of times unless it sits under a thread-dependent `if` (which
//!   the emulator reports as an error).

use crate::data::{BinaryOp, CompareOp, Intrinsic};
use crate::dtype::DType;
use crate::expr::{ExprArena, ExprId, VarId};
use crate::world::EntityId;

/// The id of a buffer of a thread program (an index into [`ThreadProgram::buffers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(pub u32);

impl BufferId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The id of an element value (an index into [`ThreadProgram::values`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where a buffer's elements live.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Memory {
    /// A tensor parameter: the `param`-th entry of [`ThreadProgram::params`].
    Global { param: usize },
    /// A slice of the block's dynamic shared memory, `offset` bytes from its start.
    Shared { offset: i64 },
    /// A per-thread register array (a fragment's local part, an `alloc_local`, a scalar variable or a
    /// temporary of lowering).
    Local,
}

/// One buffer the program reads or writes, addressed by a flat element index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BufferDecl {
    /// A C identifier, unique within the program.
    pub name: String,
    pub dtype: DType,
    pub memory: Memory,
    /// The logical shape, over the program's scalar parameters for global tensors; constant otherwise.
    pub shape: Vec<ExprId>,
    /// How many elements the flat index may address (the product of `shape` for global tensors).
    pub elements: ExprId,
}

/// A tensor parameter of the kernel, in signature order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorParam {
    pub name: String,
    pub buffer: BufferId,
    pub access: ParamAccess,
}

/// How the kernel uses a tensor parameter. The emulator poisons write-only tensors before a run and
/// reports every element left unwritten after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamAccess {
    Read,
    Write,
    ReadWrite,
}

/// A scalar `int32` parameter: a symbolic dimension (`T.dynamic`) passed at launch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScalarParam {
    pub name: String,
    pub var: VarId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Not,
    Intrinsic(Intrinsic),
}

/// One node of an element computation. Every node knows its dtype; operands of a binary node have
/// the node's dtype already (lowering inserts the casts), except comparisons, whose operands share a
/// dtype and whose result is `Bool`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    /// A float constant, by bit pattern of its `f64` value.
    Float {
        bits: u64,
        dtype: DType,
    },
    Int {
        value: i64,
        dtype: DType,
    },
    /// An index expression as an `int32` value.
    Index(ExprId),
    /// The element `buffer[index]`.
    Load {
        buffer: BufferId,
        index: ExprId,
    },
    Unary {
        op: UnaryOp,
        arg: ValueId,
        dtype: DType,
    },
    Binary {
        op: BinaryOp,
        lhs: ValueId,
        rhs: ValueId,
        dtype: DType,
    },
    Compare {
        op: CompareOp,
        lhs: ValueId,
        rhs: ValueId,
    },
    Cast {
        dtype: DType,
        value: ValueId,
    },
    Select {
        cond: ValueId,
        then: ValueId,
        otherwise: ValueId,
        dtype: DType,
    },
    /// `value` as computed by lane `lane ^ mask` of the same warp (`__shfl_xor_sync(0xffffffff, ..)`).
    ShuffleXor {
        value: ValueId,
        mask: u32,
        dtype: DType,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    Add,
    Max,
    Min,
}

/// The row and column of the 16×16 A tile that register `r` (of eight) of lane `lane` holds for
/// [`Stmt::Mma`]: PTX's m16n8k16 fragment, shared by the lowering and the emulator.
pub fn mma_a_element(lane: i64, r: i64) -> (i64, i64) {
    let (g, t) = (lane / 4, lane % 4);
    let pair = r / 2;
    (g + 8 * (pair % 2), 2 * t + r % 2 + 8 * (pair / 2))
}

/// The k row and n column of the 16×8 B tile that register `r` (of four) of lane `lane` holds.
pub fn mma_b_element(lane: i64, r: i64) -> (i64, i64) {
    let (g, t) = (lane / 4, lane % 4);
    (2 * t + r % 2 + 8 * (r / 2), g)
}

/// The row and column of the 16×8 C tile that register `r` (of four) of lane `lane` holds.
pub fn mma_c_element(lane: i64, r: i64) -> (i64, i64) {
    let (g, t) = (lane / 4, lane % 4);
    (g + 8 * (r / 2), 2 * t + r % 2)
}

/// One statement of the thread program.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Stmt {
    /// `for var in 0..extent`; `unroll` asks the printer for `#pragma unroll`. The extent never
    /// depends on the thread index.
    For {
        var: VarId,
        extent: ExprId,
        unroll: bool,
        body: Vec<Stmt>,
    },
    /// Binds `var` to an index for the rest of the enclosing statement list.
    Let { var: VarId, value: ExprId },
    If {
        cond: ValueId,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    /// `buffer[index] = value` (the value is converted to the buffer's dtype when they differ).
    Store {
        buffer: BufferId,
        index: ExprId,
        value: ValueId,
    },
    /// `lanes` consecutive elements copied with one access of `lanes × element size` bytes: both
    /// buffers have the same dtype and both indices are multiples of `lanes`.
    VectorCopy {
        dst: BufferId,
        dst_index: ExprId,
        src: BufferId,
        src_index: ExprId,
        lanes: u32,
    },
    /// An atomic read-modify-write of one global or shared element.
    Atomic {
        op: AtomicOp,
        buffer: BufferId,
        index: ExprId,
        value: ValueId,
    },
    /// `__syncthreads()`: every thread of the block waits for all others.
    Barrier,
    /// `cp.async`: starts copying `lanes` consecutive elements from a global buffer to a shared
    /// one (`lanes × element size` is 4, 8 or 16 bytes, both indices multiples of `lanes`). The
    /// copy joins the thread's open group; its elements may be read only after an
    /// [`Stmt::AsyncWait`] has completed that group (and, for other threads, a barrier after it).
    AsyncCopy {
        dst: BufferId,
        dst_index: ExprId,
        src: BufferId,
        src_index: ExprId,
        lanes: u32,
    },
    /// `cp.async.commit_group`: closes the thread's open group of async copies (possibly empty).
    AsyncCommit,
    /// `cp.async.wait_group pending`: waits until at most `pending` of the thread's committed
    /// groups are still in flight; the copies of the others have landed.
    AsyncWait { pending: u32 },
    /// `ldmatrix.sync.aligned.m8n8.x{matrices}[.trans].shared.b16`, executed by whole warps.
    /// Lane `l` gives the start of row `l % 8` of matrix `l / 8` (eight consecutive 16-bit elements
    /// at `src[src_index]`, 16-byte aligned); it receives, for each matrix `q`, two elements in
    /// `dst[dst_index + 2q]` and `dst[dst_index + 2q + 1]`: row `l / 4`, columns `2 (l % 4)` and
    /// `2 (l % 4) + 1` of the matrix, or with `transpose` rows `2 (l % 4)` and `2 (l % 4) + 1` of
    /// column `l / 4`. Only lanes below `8 × matrices` give addresses.
    LoadMatrix {
        matrices: u32,
        transpose: bool,
        dst: BufferId,
        dst_index: ExprId,
        src: BufferId,
        src_index: ExprId,
    },
    /// `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}`, executed by whole warps:
    /// `D = A × B + C` in place on `c`, with the instruction's register ownership. Lane `l`
    /// (`g = l / 4`, `t = l % 4`) holds, from `a_index` on, `A[g][2t..2t+2]`, `A[g+8][2t..2t+2]`,
    /// `A[g][2t+8..2t+10]`, `A[g+8][2t+8..2t+10]` of the 16×16 A; from `b_index` on,
    /// `B[2t..2t+2][g]` and `B[2t+8..2t+10][g]` of the 16×8 B; from `c_index` on, `C[g][2t..2t+2]`
    /// and `C[g+8][2t..2t+2]` of the 16×8 fp32 C. All three are register arrays.
    Mma {
        a: BufferId,
        a_index: ExprId,
        b: BufferId,
        b_index: ExprId,
        c: BufferId,
        c_index: ExprId,
    },
    /// Statements lowered from one entity of the kernel world (a tile op, a parallel loop, a store):
    /// the printer prints `label` as a comment above them, and the emulator names `origin` in what
    /// it reports, which the caller maps to a source range.
    Block {
        origin: Option<EntityId>,
        label: String,
        body: Vec<Stmt>,
    },
}

/// The lowered form of one `with T.Kernel(...)` launch of one kernel instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadProgram {
    /// The CUDA function name, a C identifier.
    pub name: String,
    pub exprs: ExprArena,
    pub values: Vec<Value>,
    pub buffers: Vec<BufferDecl>,
    pub params: Vec<TensorParam>,
    pub scalars: Vec<ScalarParam>,
    /// Blocks per grid dimension (x, y, z), over the scalar parameters.
    pub grid: [ExprId; 3],
    /// Threads per block dimension (x, y, z).
    pub block: [i64; 3],
    /// The flat thread index `threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)`.
    pub thread: VarId,
    /// `blockIdx.x`, `blockIdx.y`, `blockIdx.z`.
    pub block_index: [VarId; 3],
    /// Bytes of dynamic shared memory per block.
    pub shared_bytes: i64,
    pub body: Vec<Stmt>,
}

impl ThreadProgram {
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }

    pub fn buffer(&self, id: BufferId) -> &BufferDecl {
        &self.buffers[id.index()]
    }

    /// Threads per block.
    pub fn threads(&self) -> i64 {
        self.block.iter().product()
    }

    /// The dtype a value has.
    pub fn dtype_of(&self, id: ValueId) -> DType {
        match self.value(id) {
            Value::Float { dtype, .. }
            | Value::Int { dtype, .. }
            | Value::Unary { dtype, .. }
            | Value::Binary { dtype, .. }
            | Value::Cast { dtype, .. }
            | Value::Select { dtype, .. }
            | Value::ShuffleXor { dtype, .. } => *dtype,
            Value::Index(_) => DType::Int32,
            Value::Load { buffer, .. } => self.buffer(*buffer).dtype,
            Value::Compare { .. } => DType::Bool,
        }
    }

    /// Appends a value node and returns its id.
    pub fn add_value(&mut self, value: Value) -> ValueId {
        let id = ValueId(u32::try_from(self.values.len()).unwrap_or(u32::MAX));
        self.values.push(value);
        id
    }

    /// `base`, or `base_N` for the first `N` that no buffer of the program is named yet.
    pub fn unique_buffer_name(&self, base: &str) -> String {
        let taken = |name: &str| self.buffers.iter().any(|b| b.name == name);
        if !taken(base) {
            return base.to_owned();
        }
        (1..)
            .map(|n| format!("{base}_{n}"))
            .find(|name| !taken(name))
            .unwrap_or_else(|| base.to_owned())
    }

    /// Appends a buffer declaration and returns its id.
    pub fn add_buffer(&mut self, buffer: BufferDecl) -> BufferId {
        let id = BufferId(u32::try_from(self.buffers.len()).unwrap_or(u32::MAX));
        self.buffers.push(buffer);
        id
    }
}
