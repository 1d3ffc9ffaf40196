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

use crate::data::{BinaryOp, CompareOp, Intrinsic, RandomKind, ShuffleKind};
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

/// One element of a buffer, `buffer[index]`: where a statement reads or writes (a store, an
/// atomic, either end of a copy, an mbarrier, a TMA box, the start of a tensor-core operand).
/// Statements hold it as one field rather than a buffer and an index side by side, so that code
/// about where a statement writes (fences, races, a test that moves a store) reads one value and
/// cannot pair a buffer with another operand's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Place {
    pub buffer: BufferId,
    /// The flat element index, an integer expression of the program.
    pub index: ExprId,
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
    /// How many elements the flat index may address (the product of `shape` for a row-major
    /// global tensor, one past its last element for a strided one).
    pub elements: ExprId,
    /// The element stride of each dimension of a global tensor that is not row-major (a
    /// `T.StridedTensor`), over the scalar parameters: element `(i, j)` is at `i * s0 + j * s1`.
    /// `None` for row-major tensors and every other buffer.
    pub strides: Option<Vec<ExprId>>,
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
    /// The operand's bits, as a value of `from`, read as the node's dtype (of the same width).
    Reinterpret {
        from: DType,
    },
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
    /// A shuffle the user wrote (`__shfl{,_xor,_down,_up}_sync(mask, value, lane, width)`):
    /// `value` as computed for the same statement by the lane [`ShuffleKind::source_lane`]
    /// chooses. Every lane of `mask` (a `uint32`) must execute the statement, and the source
    /// lane must be one of them; `lane` and `width` are `int32`.
    Shuffle {
        kind: ShuffleKind,
        value: ValueId,
        lane: ValueId,
        width: ValueId,
        mask: ValueId,
        dtype: DType,
    },
    /// The next number of the executing thread's random generator (see [`Stmt::RngInit`]). It
    /// has an effect: each evaluation draws, in the order the statement evaluates its values
    /// (the printer declares every draw as a temporary, in value order, to keep that order).
    Random(RandomKind),
}

impl Value {
    /// The value operands of this node, in order (indices and addresses are not value operands).
    pub fn operands(&self) -> impl Iterator<Item = ValueId> {
        let operands = match *self {
            Value::Float { .. }
            | Value::Int { .. }
            | Value::Index(_)
            | Value::Load { .. }
            | Value::Random(_) => [None; 3],
            // The mask is evaluated with the others but listed last (see `Value::shuffle_mask`).
            Value::Shuffle {
                value, lane, width, ..
            } => [Some(value), Some(lane), Some(width)],
            Value::Unary { arg, .. } => [Some(arg), None, None],
            Value::Cast { value, .. } | Value::ShuffleXor { value, .. } => {
                [Some(value), None, None]
            }
            Value::Binary { lhs, rhs, .. } | Value::Compare { lhs, rhs, .. } => {
                [Some(lhs), Some(rhs), None]
            }
            Value::Select {
                cond,
                then,
                otherwise,
                ..
            } => [Some(cond), Some(then), Some(otherwise)],
        };
        operands.into_iter().flatten().chain(self.shuffle_mask())
    }

    /// The mask operand of a [`Value::Shuffle`]: the fourth value operand no other node has.
    pub fn shuffle_mask(&self) -> Option<ValueId> {
        match *self {
            Value::Shuffle { mask, .. } => Some(mask),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    Add,
    Max,
    Min,
}

/// The K extent of one `mma.sync` or `wgmma` for A and B elements of `bytes` bytes: every form
/// reduces over 32 bytes of K (m16n8k16 for 16-bit, m16n8k8 for tf32, m16n8k32 for 8-bit).
pub fn mma_k(bytes: i64) -> i64 {
    32 / bytes.clamp(1, 4)
}

/// How many A elements (of `bytes` bytes) a lane holds for one [`Stmt::Mma`]: four 32-bit
/// registers' worth.
pub fn mma_a_registers(bytes: i64) -> i64 {
    16 / bytes.clamp(1, 4)
}

/// How many B elements (of `bytes` bytes) a lane holds for one [`Stmt::Mma`]: two 32-bit
/// registers' worth.
pub fn mma_b_registers(bytes: i64) -> i64 {
    8 / bytes.clamp(1, 4)
}

/// The row and column of the 16×`mma_k` A tile that element `r` of lane `lane` holds for
/// [`Stmt::Mma`] with `bytes`-byte operands: PTX's fragments for m16n8k16 (16-bit), m16n8k8
/// (tf32) and m16n8k32 (8-bit), shared by the lowering and the emulator. Element `r` sits in
/// 32-bit register `j = r / p` (`p = 4 / bytes` elements per register) at position `r % p`;
/// register `j` covers row `g + 8 (j % 2)` and columns `p t + r % p + mma_k / 2 * (j / 2)`.
pub fn mma_a_element(bytes: i64, lane: i64, r: i64) -> (i64, i64) {
    let (g, t) = (lane / 4, lane % 4);
    let per = 4 / bytes.clamp(1, 4);
    let j = r / per;
    (
        g + 8 * (j % 2),
        per * t + r % per + mma_k(bytes) / 2 * (j / 2),
    )
}

/// The k row and n column of the `mma_k`×8 B tile that element `r` of lane `lane` holds: 32-bit
/// register `j = r / p` covers column `g` and rows `p t + r % p + mma_k / 2 * j`.
pub fn mma_b_element(bytes: i64, lane: i64, r: i64) -> (i64, i64) {
    let (g, t) = (lane / 4, lane % 4);
    let per = 4 / bytes.clamp(1, 4);
    let j = r / per;
    (per * t + r % per + mma_k(bytes) / 2 * j, g)
}

/// The row and column of the 16×8 C tile that register `r` (of four) of lane `lane` holds.
pub fn mma_c_element(lane: i64, r: i64) -> (i64, i64) {
    let (g, t) = (lane / 4, lane % 4);
    (g + 8 * (r / 2), 2 * t + r % 2)
}

/// The shared-memory swizzle a `wgmma` matrix descriptor names: the 16-byte chunk number inside a
/// row of 128, 64 or 32 bytes is XOR-ed with the row number inside an eight-row atom (bits 7.. of
/// the shared address). Only swizzled layouts are described; tilec gives every wgmma operand one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DescriptorSwizzle {
    Bytes128,
    Bytes64,
    Bytes32,
}

impl DescriptorSwizzle {
    /// Bytes of one swizzled row: 128, 64 or 32.
    pub fn row_bytes(self) -> i64 {
        match self {
            DescriptorSwizzle::Bytes128 => 128,
            DescriptorSwizzle::Bytes64 => 64,
            DescriptorSwizzle::Bytes32 => 32,
        }
    }

    /// The descriptor's two-bit layout type (bits 62..64): 1, 2 or 3.
    pub fn layout_type(self) -> u64 {
        match self {
            DescriptorSwizzle::Bytes128 => 1,
            DescriptorSwizzle::Bytes64 => 2,
            DescriptorSwizzle::Bytes32 => 3,
        }
    }

    /// Bytes after which the pattern repeats: the XOR reads address bits up to `7 + b`, so
    /// 1024, 512 or 256.
    pub fn period_bytes(self) -> i64 {
        self.row_bytes() * 8
    }

    /// The swizzled shared address: address bits `4..4+b` are XOR-ed with bits `7..7+b`, where
    /// `b` is 3, 2 or 1. The hardware swizzles the absolute address, which is why operands are
    /// placed at multiples of the 1024-byte pattern.
    pub fn apply(self, address: i64) -> i64 {
        let bits = (self.row_bytes() / 16).trailing_zeros();
        let mask = ((1i64 << bits) - 1) << 4;
        address ^ ((address >> 3) & mask)
    }
}

/// Which dimension of an operand is contiguous in shared memory: K (`imm-trans = 0`) or M/N
/// (`imm-trans = 1`, "transposed"; 16-bit operands only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Major {
    K,
    MN,
}

/// The fixed fields of a `wgmma` matrix descriptor: how an operand tile is laid out from its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DescriptorLayout {
    /// The leading-dimension byte offset: for M/N-major operands the distance between groups of
    /// `row_bytes` along M/N (unused for K-major).
    pub leading_bytes: i64,
    /// The stride-dimension byte offset: the distance between groups of eight rows (K-major: eight
    /// M/N rows; M/N-major: eight K rows).
    pub stride_bytes: i64,
    pub swizzle: DescriptorSwizzle,
    pub major: Major,
}

impl DescriptorLayout {
    /// The byte offset from the operand's start, before swizzling, of element `(mn, k)` (`mn` along
    /// M or N, `k` along K) of elements of `element_bytes`: the canonical GMMA layouts of the PTX
    /// ISA. K-major: rows of `row_bytes` hold K, eight rows per group, groups `stride_bytes` apart.
    /// M/N-major: rows of `row_bytes` hold M/N and are indexed by K, eight K rows per group
    /// (`stride_bytes` apart), and groups along M/N sit `leading_bytes` apart.
    pub fn element_offset(&self, mn: i64, k: i64, element_bytes: i64) -> i64 {
        let row = self.swizzle.row_bytes();
        match self.major {
            Major::K => (mn % 8) * row + (mn / 8) * self.stride_bytes + k * element_bytes,
            Major::MN => {
                let per_row = row / element_bytes;
                (mn % per_row) * element_bytes
                    + (mn / per_row) * self.leading_bytes
                    + (k % 8) * row
                    + (k / 8) * self.stride_bytes
            }
        }
    }
}

/// A `wgmma` operand in shared memory: the fields of its 64-bit matrix descriptor. The printer
/// encodes them; the emulator reads the operand through [`DescriptorLayout::element_offset`] and
/// [`DescriptorSwizzle::apply`], the addressing the hardware applies to these fields.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MatrixDescriptor {
    pub buffer: BufferId,
    /// The byte offset from the start of `buffer` of the operand's element `(0, 0)`, before
    /// swizzling; it may depend on the warpgroup and on loop variables.
    pub start: ExprId,
    pub layout: DescriptorLayout,
}

/// Where the A operand of a [`Stmt::Wgmma`] comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WgmmaA {
    Shared(MatrixDescriptor),
    /// A register array: from the place on, four 32-bit words' worth of registers per thread (eight
    /// 16-bit elements, four tf32 or sixteen 8-bit ones), the same fragment as [`mma_a_element`]
    /// for the warp's 16 rows (warp `w % 4` of the warpgroup holds rows
    /// `16 (w % 4)..`).
    Registers(Place),
}

/// The row and column of the 64×n accumulator that register `r` of thread `t` (0..128 within the
/// warpgroup) holds for [`Stmt::Wgmma`]: mma.sync's C fragment per warp, warps stacked along M,
/// n8 atoms along N.
pub fn wgmma_c_element(thread: i64, r: i64) -> (i64, i64) {
    let (row, col) = mma_c_element(thread % 32, r % 4);
    (16 * (thread / 32) + row, 8 * (r / 4) + col)
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
    /// Binds `var` to an integer value computed at run time (an element read from memory, by
    /// [`tilec_ir::Binding`](crate::Binding)) for the rest of the enclosing statement list. The
    /// value is converted to a 64-bit index.
    Bind { var: VarId, value: ValueId },
    If {
        cond: ValueId,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    /// `while (cond) body`: the condition is evaluated again before every iteration. Each thread
    /// leaves when its condition is false; lowering emits it only where the condition is the same
    /// for the whole block, so barriers inside are reached by all.
    While { cond: ValueId, body: Vec<Stmt> },
    /// `place = value` (the value is converted to the buffer's dtype when they differ).
    Store { place: Place, value: ValueId },
    /// `lanes` consecutive elements copied with one access of `lanes × element size` bytes: both
    /// buffers have the same dtype and both indices are multiples of `lanes`.
    VectorCopy { dst: Place, src: Place, lanes: u32 },
    /// An atomic read-modify-write of one global or shared element; with `old`, the element's
    /// value before the operation is stored to that register (`T.atomic_add(..., return_prev=True)`).
    Atomic {
        op: AtomicOp,
        place: Place,
        value: ValueId,
        old: Option<Place>,
    },
    /// `__syncthreads()`: every thread of the block waits for all others.
    Barrier,
    /// `cp.async`: starts copying `lanes` consecutive elements from a global buffer to a shared
    /// one (`lanes × element size` is 4, 8 or 16 bytes, both indices multiples of `lanes`). The
    /// copy joins the thread's open group; its elements may be read only after an
    /// [`Stmt::AsyncWait`] has completed that group (and, for other threads, a barrier after it).
    AsyncCopy { dst: Place, src: Place, lanes: u32 },
    /// `cp.async.commit_group`: closes the thread's open group of async copies (possibly empty).
    AsyncCommit,
    /// `cp.async.wait_group pending`: waits until at most `pending` of the thread's committed
    /// groups are still in flight; the copies of the others have landed.
    AsyncWait { pending: u32 },
    /// `ldmatrix.sync.aligned.m8n8.x{matrices}[.trans].shared.b16`, executed by whole warps.
    /// Lane `l` gives the start of row `l % 8` of matrix `l / 8` (16 consecutive bytes from `src`
    /// on, 16-byte aligned); it receives, for each matrix `q`, the 32-bit word at bytes
    /// `4 (l % 4)..` of row `l / 4`: for 16-bit elements two elements at `dst.index + 2q` and
    /// `dst.index + 2q + 1` of `dst.buffer` (columns `2 (l % 4)` and `2 (l % 4) + 1`), or with
    /// `transpose` rows `2 (l % 4)` and `2 (l % 4) + 1` of column `l / 4`. The instruction moves
    /// bits, so 8-bit and 32-bit elements go the same way untransposed: `p = 4 / bytes` of them
    /// per word, at `dst.index + p q..`. `transpose` takes 16-bit elements only. Only lanes
    /// below `8 × matrices` give addresses.
    LoadMatrix {
        matrices: u32,
        transpose: bool,
        dst: Place,
        src: Place,
    },
    /// `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}`, executed by whole warps:
    /// `D = A × B + C` in place on `c`, with the instruction's register ownership. Lane `l`
    /// (`g = l / 4`, `t = l % 4`) holds, from `a` on, `A[g][2t..2t+2]`, `A[g+8][2t..2t+2]`,
    /// `A[g][2t+8..2t+10]`, `A[g+8][2t+8..2t+10]` of the 16×16 A; from `b` on,
    /// `B[2t..2t+2][g]` and `B[2t+8..2t+10][g]` of the 16×8 B; from `c` on, `C[g][2t..2t+2]`
    /// and `C[g+8][2t..2t+2]` of the 16×8 fp32 C. All three are register arrays.
    ///
    /// The operands' dtypes choose the form: float32 or tf32 A and B make it
    /// `m16n8k8.row.col.f32.tf32.tf32.f32` (each input rounded to tf32 first, as `cvt.rna` does),
    /// fp8 ones `m16n8k32.row.col.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32`, and 8-bit integers with an
    /// int32 C `m16n8k32.row.col.s32.{s8,u8}.{s8,u8}.s32` (wrapping); [`mma_a_element`] and
    /// [`mma_b_element`] say which lane holds what.
    Mma { a: Place, b: Place, c: Place },
    /// `wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{f16,bf16}`, executed by whole warpgroups
    /// (128 consecutive threads from a multiple of 128): `D = A × B + D` on the 64×`n` fp32
    /// accumulator held by the warpgroup as [`wgmma_c_element`] says, `n / 2` registers per thread
    /// from `c` on. B is `k16 × n` in shared memory, A is `64 × k16` in shared memory or in
    /// registers. As for [`Stmt::Mma`] the dtypes choose the form: `k8.f32.tf32.tf32`,
    /// `k32.f32.{e4m3,e5m2}.{e4m3,e5m2}` and `k32.s32.{s8,u8}.{s8,u8}` (int32 accumulator), K
    /// being 32 bytes of the operands; those read both operands K-major from shared memory. The
    /// instruction is asynchronous: its registers may be touched again only after
    /// a [`Stmt::WgmmaWait`], and registers written before it need a [`Stmt::WgmmaFence`].
    Wgmma {
        n: u32,
        a: WgmmaA,
        b: MatrixDescriptor,
        c: Place,
    },
    /// `wgmma.fence.sync.aligned`: orders the warpgroup's earlier register and shared-memory
    /// accesses before the `wgmma`s that follow.
    WgmmaFence,
    /// `wgmma.commit_group.sync.aligned`: closes the warpgroup's open group of `wgmma`s.
    WgmmaCommit,
    /// `wgmma.wait_group.sync.aligned pending`: waits until at most `pending` committed groups
    /// are in flight.
    WgmmaWait { pending: u32 },
    /// `fence.proxy.async.shared::cta`: makes this thread's earlier shared-memory writes (generic
    /// proxy) visible to the async proxy that `wgmma` reads its operands through, once a barrier
    /// has followed.
    FenceProxyAsync,
    /// Initialises the mbarrier at `barrier` (a 64-bit shared element) to expect `count`
    /// arrivals per phase, and makes the initialisation visible to the async proxy (TMA). Executed
    /// by one thread, before a barrier that publishes it to the others.
    MbarrierInit { barrier: Place, count: u32 },
    /// `mbarrier.inval` on `barrier`: the mbarrier is no longer one, and may be
    /// initialised again (a pipeline nested in another loop sets up its barriers on every entry).
    /// Every phase must be complete and no thread may still wait on it.
    MbarrierInval { barrier: Place },
    /// `mbarrier.arrive` on `barrier`, each executing thread one arrival; with
    /// `expect_bytes`, `mbarrier.arrive.expect_tx` first raises the phase's pending transaction
    /// count by that many bytes (which [`Stmt::TmaLoad`]s on the barrier then complete). A phase
    /// completes when all its arrivals have come and its pending transaction count is zero.
    MbarrierArrive {
        barrier: Place,
        expect_bytes: Option<u32>,
    },
    /// `mbarrier.expect_tx`: raises the pending transaction count of the current phase of
    /// `barrier` by `bytes`, without arriving (a hand-written `T.tma_copy` announces its
    /// bytes so; the user's own arrivals complete the phase once the bytes have landed).
    MbarrierExpectTx { barrier: Place, bytes: u32 },
    /// `mbarrier.try_wait.parity` in a loop: waits until the phase of `barrier` with parity
    /// `parity` (0 or 1) has completed, that is until the barrier's current phase has the other
    /// parity. A [`Stmt::TmaLoad`] completing on that phase has landed for the waiting thread.
    MbarrierWait { barrier: Place, parity: ExprId },
    /// `cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes`, issued
    /// by one thread: copies one box of tensor map `map` (an index into
    /// [`ThreadProgram::tensor_maps`]) whose first element has the global coordinates `coords`
    /// (innermost dimension first; coordinates outside the tensor read zeros) into shared memory
    /// at `dst`. The box is stored as a dense array, innermost dimension fastest, with
    /// the map's swizzle applied to the absolute shared address. Its bytes complete on the mbarrier
    /// at `barrier`.
    TmaLoad {
        map: usize,
        dst: Place,
        coords: Vec<ExprId>,
        barrier: Place,
    },
    /// `cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group`, then
    /// `cp.async.bulk.commit_group`, issued by one thread: copies the box of tensor map `map` stored
    /// at `src` (a dense array, innermost dimension fastest, the map's swizzle applied
    /// to the absolute shared address, as a [`Stmt::TmaLoad`] lands it) into the map's tensor at
    /// the global coordinates `coords` (innermost first); elements outside the tensor are not
    /// written. Generic writes of the box need a [`Stmt::FenceProxyAsync`] and a barrier before
    /// it, and the issuing thread must pass a [`Stmt::TmaStoreWait`] before the box is written
    /// again.
    TmaStore {
        map: usize,
        src: Place,
        coords: Vec<ExprId>,
    },
    /// `cp.async.bulk.wait_group.read 0`: waits until every TMA store the thread committed has
    /// read its shared box.
    TmaStoreWait,
    /// Warp specialization: threads below `consumers` run `consumer`, the others `producer`, and the
    /// two run concurrently (they meet only at mbarriers and named barriers, never at a block-wide
    /// [`Stmt::Barrier`]). Both `consumers` and the block's thread count are multiples of 128.
    WarpRoles {
        consumers: u32,
        consumer: Vec<Stmt>,
        producer: Vec<Stmt>,
    },
    /// `setmaxnreg.{inc,dec}.sync.aligned.u32 count`, executed by whole warpgroups: moves registers
    /// between warpgroups of different roles.
    SetMaxRegisters { count: u32, increase: bool },
    /// `bar.sync id, threads`: a barrier among the `threads` threads that execute it (a role of a
    /// [`Stmt::WarpRoles`]), for the same purpose as [`Stmt::Barrier`].
    NamedBarrier { id: u32, threads: u32 },
    /// `bar.arrive id, threads`: the executing threads count towards named barrier `id`, which
    /// completes once `threads` threads have arrived or synced on it, and go on without waiting.
    /// It orders nothing for the arriving threads; the ones that sync there see the arrivers'
    /// earlier accesses.
    NamedBarrierArrive { id: u32, threads: u32 },
    /// One step of the turn-taking ("ping-pong") of the `warpgroups` consumer warpgroups of a
    /// warp-specialized loop, which lets one warpgroup's tensor-core work run while another does
    /// its other arithmetic. Warpgroup `w` waits for its turn on named barrier
    /// `first_barrier + w` and hands it on to `w + 1` (modulo `warpgroups`) on the next one's
    /// barrier: `bar.sync` of 2 × 128 threads, completed by the taker's own threads and the
    /// giver's `bar.arrive`. Every step is executed by all the consumer warpgroups together; the
    /// turn protects no data, it only orders the warpgroups' issue.
    WarpgroupTurn {
        step: TurnStep,
        warpgroups: u32,
        first_barrier: u32,
    },
    /// `__syncwarp()`: the threads of each warp wait for each other, and their earlier shared-memory
    /// accesses are ordered before their later ones. Every lane of a warp that executes it must
    /// execute it (or have returned).
    SyncWarp,
    /// `return`: the executing threads stop. A thread that has returned counts as arrived at every
    /// later barrier, as on the GPU.
    Return,
    /// `T.device_assert`: a thread in which `cond` is false stops the run with `message`.
    Assert { cond: ValueId, message: String },
    /// `griddepcontrol.wait` (sm_90): waits for the grids this one depends on through
    /// programmatic dependent launch. A launch without that dependency returns at once.
    GridDependencyWait,
    /// `griddepcontrol.launch_dependents` (sm_90): lets a dependent grid start early.
    LaunchDependents,
    /// A call of a device function of the user's own CUDA source ([`ThreadProgram::extern_sources`])
    /// by each executing thread. The printer passes it through; the emulator cannot run it and
    /// reports so.
    CallExtern { name: String, args: Vec<ExternArg> },
    /// Starts the executing thread's random generator: curand's `curand_init(seed, subsequence,
    /// offset, &state)` for Philox4x32-10 (64-bit operands), which later [`Value::Random`] draws
    /// advance.
    RngInit {
        seed: ValueId,
        subsequence: ValueId,
        offset: ValueId,
    },
    /// A grid-wide barrier: every thread of every block waits until all threads of the grid have
    /// reached it, and global-memory writes before it are visible to all reads after it. The
    /// program must be launched cooperatively (all blocks resident at once); it is also a block
    /// barrier, so every thread of the block must reach it (or have returned).
    GridSync,
    /// Statements lowered from one entity of the kernel world (a tile op, a parallel loop, a store):
    /// the printer prints `label` as a comment above them, and the emulator names `origin` in what
    /// it reports, which the caller maps to a source range.
    Block {
        origin: Option<EntityId>,
        label: String,
        body: Vec<Stmt>,
    },
}

/// One argument of a [`Stmt::CallExtern`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ExternArg {
    /// The address of the element.
    Pointer(Place),
    Value(ValueId),
}

/// The steps of [`Stmt::WarpgroupTurn`]. The protocol is `Start`, then pairs of `Take` and
/// `Pass`, then `End`, all executed by every consumer warpgroup in the same order, so that no
/// warpgroup ever waits for a turn that nobody will hand on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TurnStep {
    /// The last warpgroup hands the first turn to warpgroup 0.
    Start,
    /// Each warpgroup waits until the previous one has handed it the turn.
    Take,
    /// Each warpgroup hands the turn on to the next one.
    Pass,
    /// Warpgroup 0 takes the turn the last warpgroup handed on last, so that every barrier phase
    /// is complete when the block exits.
    End,
}

/// Calls `visit` on every statement of `stmts`, nested ones included, in program order. The walk
/// keeps its own stack, so that a program nested deeper than the thread's stack allows is walked
/// too (the printer reports such programs rather than crash on them).
pub fn for_each_stmt(stmts: &[Stmt], visit: &mut impl FnMut(&Stmt)) {
    let mut pending: Vec<std::slice::Iter<'_, Stmt>> = vec![stmts.iter()];
    while let Some(list) = pending.last_mut() {
        let Some(stmt) = list.next() else {
            pending.pop();
            continue;
        };
        visit(stmt);
        // The second body is walked after the first: it goes on the stack first. The bodies come
        // from the one walker's list of nested bodies (`crate::visit`).
        for body in stmt.bodies().into_iter().rev() {
            if !body.is_empty() {
                pending.push(body.iter());
            }
        }
    }
}

/// Whether any statement of `stmts`, nested ones included, satisfies `test`.
pub fn any_stmt(stmts: &[Stmt], test: impl Fn(&Stmt) -> bool) -> bool {
    let mut found = false;
    for_each_stmt(stmts, &mut |stmt| found |= test(stmt));
    found
}

/// Whether any statement of `stmts`, nested ones included, is a [`Stmt::GridSync`]: the program
/// must then be launched cooperatively.
pub fn uses_grid_sync(stmts: &[Stmt]) -> bool {
    any_stmt(stmts, |stmt| matches!(stmt, Stmt::GridSync))
}

/// Whether any statement of `stmts`, nested ones included, is a [`Stmt::Wgmma`].
pub fn uses_wgmma(stmts: &[Stmt]) -> bool {
    any_stmt(stmts, |stmt| matches!(stmt, Stmt::Wgmma { .. }))
}

/// A TMA tensor map over one tensor parameter, created by the host at launch
/// (`cuTensorMapEncodeTiled`) and passed to the kernel as a `__grid_constant__` parameter.
///
/// The tensor is the parameter's row-major array: its dimensions, innermost first, are the
/// parameter's shape reversed, and the byte stride of dimension `d` is the product of the inner
/// dimensions times the element size. Element strides are 1, out-of-bounds elements read as zero.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorMap {
    /// The kernel parameter's name, a C identifier.
    pub name: String,
    /// The global buffer (a tensor parameter) the map describes.
    pub buffer: BufferId,
    /// The box one [`Stmt::TmaLoad`] copies, innermost dimension first, one entry per dimension of
    /// the tensor (each 1..=256).
    pub box_dims: Vec<u32>,
    /// The shared-memory swizzle the copy applies; `None` stores the box unswizzled.
    pub swizzle: Option<DescriptorSwizzle>,
}

impl TensorMap {
    /// Elements of one box.
    pub fn box_elements(&self) -> i64 {
        self.box_dims.iter().map(|&d| i64::from(d)).product()
    }
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
    /// `blockIdx.x`, `blockIdx.y`, `blockIdx.z`; in a persistent program, the tile's indices,
    /// which the body binds itself (see [`PersistentGrid`]).
    pub block_index: [VarId; 3],
    /// Set when the program is persistent: launched on fewer blocks than `grid` has tiles, each
    /// block walking several of them.
    pub persistent: Option<PersistentGrid>,
    /// Bytes of dynamic shared memory per block.
    pub shared_bytes: i64,
    /// The TMA tensor maps the kernel takes, after the tensor and scalar parameters.
    pub tensor_maps: Vec<TensorMap>,
    /// The user's CUDA source of `T.import_source`, in program order, each text once: the printer
    /// places it before the kernel, for the [`Stmt::CallExtern`]s to call.
    pub extern_sources: Vec<String>,
    pub body: Vec<Stmt>,
}

/// How a persistent program is launched and walks its tiles.
///
/// `grid` then counts tiles, not blocks: the program is launched on `min(tiles, B)` blocks along x,
/// where `tiles` is the product of `grid` and `B` is the launcher's choice (one block per
/// multiprocessor on a GPU, since such a program fills a multiprocessor's registers). Block `b` of
/// `n` handles tiles `b`, `b + n`, `b + 2n`, …: its body loops over those rounds and binds
/// [`ThreadProgram::block_index`] to each tile's `(x, y, z)` (x fastest) with `let`s, so tiles are
/// visited in the order a non-persistent launch would schedule its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PersistentGrid {
    /// `blockIdx.x`: the first tile of the block.
    pub block: VarId,
    /// `gridDim.x`: the blocks launched, which is the stride between a block's tiles.
    pub blocks: VarId,
}

impl ThreadProgram {
    /// The blocks to launch per grid dimension, given the grid's tile counts (`grid` evaluated) and
    /// the most blocks a persistent program should get.
    pub fn launch_blocks(&self, grid: [u32; 3], resident_blocks: u32) -> [u32; 3] {
        match self.persistent {
            None => grid,
            Some(_) => persistent_blocks(grid, resident_blocks),
        }
    }
}

/// The blocks a persistent launch over `tiles` starts: one per resident slot, no more than tiles,
/// along x (the kernel reads `gridDim.x` as the stride between a block's tiles).
pub fn persistent_blocks(tiles: [u32; 3], resident_blocks: u32) -> [u32; 3] {
    let tiles = tiles.iter().map(|&g| u64::from(g)).product::<u64>();
    let blocks = tiles.min(u64::from(resident_blocks.max(1)));
    [u32::try_from(blocks).unwrap_or(u32::MAX), 1, 1]
}

/// A single-precision `±(a × b) ± c` computed with one rounding (`fmaf`, one FFMA instruction): what
/// a `float32` sum or difference with a `float32` product as an operand means in a thread program.
/// The printer emits it and the emulator computes it the same way, so results stay bit for bit
/// equal. The product node itself keeps its own rounding wherever else it is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FusedMultiplyAdd {
    pub a: ValueId,
    pub b: ValueId,
    pub c: ValueId,
    /// `c - a × b`: the product is negated.
    pub negate_product: bool,
    /// `a × b - c`: the addend is negated.
    pub negate_addend: bool,
}

impl ThreadProgram {
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }

    /// How the kernel uses `buffer` when it is a tensor parameter; `None` for other buffers.
    pub fn param_access(&self, buffer: BufferId) -> Option<ParamAccess> {
        match self.buffers.get(buffer.index())?.memory {
            Memory::Global { param } => self.params.get(param).map(|p| p.access),
            _ => None,
        }
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
            | Value::ShuffleXor { dtype, .. }
            | Value::Shuffle { dtype, .. } => *dtype,
            Value::Random(kind) => kind.dtype(),
            Value::Index(_) => DType::Int32,
            Value::Load { buffer, .. } => self.buffer(*buffer).dtype,
            Value::Compare { .. } => DType::Bool,
        }
    }

    /// The fused multiply-add that value `id` is, if it is a `float32` sum or difference with a
    /// `float32` product as an operand (the left one when both are products); `None` otherwise or
    /// for a dangling id.
    pub fn fused_multiply_add(&self, id: ValueId) -> Option<FusedMultiplyAdd> {
        let Some(&Value::Binary {
            op: op @ (BinaryOp::Add | BinaryOp::Sub),
            lhs,
            rhs,
            dtype: DType::Float32,
        }) = self.values.get(id.index())
        else {
            return None;
        };
        let product = |v: ValueId| match self.values.get(v.index()) {
            Some(&Value::Binary {
                op: BinaryOp::Mul,
                lhs,
                rhs,
                dtype: DType::Float32,
            }) => Some((lhs, rhs)),
            _ => None,
        };
        let fused =
            |(a, b): (ValueId, ValueId), c, negate_product, negate_addend| FusedMultiplyAdd {
                a,
                b,
                c,
                negate_product,
                negate_addend,
            };
        let subtract = op == BinaryOp::Sub;
        match (product(lhs), product(rhs)) {
            (Some(ab), _) => Some(fused(ab, rhs, false, subtract)),
            (None, Some(ab)) => Some(fused(ab, lhs, subtract, false)),
            (None, None) => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The canonical layouts of the PTX ISA, spot-checked: 128-byte K-major rows with eight-row
    /// groups 1024 bytes apart, and an M/N-major tile whose second 64-column group sits `leading`
    /// bytes on.
    #[test]
    fn descriptor_addressing_follows_the_canonical_layouts() {
        let k_major = DescriptorLayout {
            leading_bytes: 16,
            stride_bytes: 1024,
            swizzle: DescriptorSwizzle::Bytes128,
            major: Major::K,
        };
        assert_eq!(k_major.element_offset(0, 5, 2), 10);
        assert_eq!(k_major.element_offset(3, 0, 2), 3 * 128);
        assert_eq!(k_major.element_offset(9, 1, 2), 1024 + 128 + 2);
        let mn_major = DescriptorLayout {
            leading_bytes: 8192,
            stride_bytes: 1024,
            swizzle: DescriptorSwizzle::Bytes128,
            major: Major::MN,
        };
        assert_eq!(mn_major.element_offset(65, 0, 2), 8192 + 2);
        assert_eq!(mn_major.element_offset(0, 9, 2), 1024 + 128);
        // Row 3 of an atom: chunk c is stored at chunk c ^ 3.
        let swizzled = DescriptorSwizzle::Bytes128.apply(3 * 128 + 16);
        assert_eq!(swizzled, 3 * 128 + 2 * 16);
        // The 64-byte swizzle reads two row bits (bits 7 and 8), the 32-byte one a single bit.
        assert_eq!(DescriptorSwizzle::Bytes64.apply(3 * 128), 3 * 128 + 3 * 16);
        assert_eq!(DescriptorSwizzle::Bytes32.apply(3 * 128 + 16), 3 * 128);
    }

    /// Every element of a 64×n accumulator is held by exactly one (thread, register).
    #[test]
    fn wgmma_accumulator_covers_its_tile_once() {
        let n = 64;
        let mut seen = vec![0u32; 64 * n];
        for thread in 0..128 {
            for r in 0..i64::try_from(n / 2).expect("32 fits") {
                let (row, col) = wgmma_c_element(thread, r);
                let row = usize::try_from(row).expect("a row is not negative");
                let col = usize::try_from(col).expect("a column is not negative");
                seen[row * n + col] += 1;
            }
        }
        assert!(seen.iter().all(|&count| count == 1));
    }
}
