//! The world of one kernel instance: entities in source order and the component columns keyed by them.

use crate::data::{BinaryOp, DataArena, DataId};
use crate::dtype::DType;
use crate::expr::{ExprArena, ExprId, VarId};
use crate::value::ConstValue;

/// A small integer id for something a user can point at or a pass can say something about.
///
/// Ids are assigned in source order while the kernel is built, so an edit elsewhere in the file
/// does not renumber them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntityId(u32);

impl EntityId {
    pub fn index(self) -> usize {
        self.0 as usize
    }

    pub fn from_index(index: usize) -> EntityId {
        EntityId(u32::try_from(index).unwrap_or(u32::MAX))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntityKind {
    /// A tensor parameter of the kernel (global memory), or an eager-style `T.empty` output.
    Param,
    /// One `with T.Kernel(...)` launch.
    Kernel,
    /// A buffer allocated inside the kernel (`T.alloc_shared`, `alloc_fragment`, `alloc_local`).
    Buffer,
    /// A mutable scalar (`T.alloc_var`).
    Var,
    /// A loop: `T.Parallel`, `T.Pipelined`, `T.serial`, `T.unroll` or `range`.
    Loop,
    /// A tile operation (`T.copy`, `T.gemm`, `T.reduce_*`, ...).
    TileOp,
    /// A store to one element of a buffer (or to a scalar variable).
    Store,
    /// A runtime `if`.
    If,
    /// A run-time scalar given a name for index arithmetic: a value read from memory
    /// (`Indices[bz, i]`, a `T.alloc_var`) used as an index, a slice bound, a loop extent or a
    /// `T.ceildiv` argument. It binds a fresh index variable, of no known range, to the value
    /// where the statement that uses it stands (see [`Binding`]).
    Bind,
}

/// Where a buffer lives. The names are TileLang's scope strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    Global,
    Shared,
    SharedDyn,
    Fragment,
    Local,
    LocalVar,
    /// `T.alloc_barrier(...)`: an array of mbarriers (64-bit words in shared memory), each
    /// initialised with its arrival count when the block starts (see [`World::barrier_counts`]).
    /// Only the barrier operations touch it, so it is not a shared buffer for data.
    Barrier,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Shared => "shared",
            Scope::SharedDyn => "shared.dyn",
            Scope::Fragment => "local.fragment",
            Scope::Local => "local",
            Scope::LocalVar => "local.var",
            Scope::Barrier => "shared.barrier",
        }
    }

    pub fn from_name(name: &str) -> Option<Scope> {
        Some(match name {
            "global" => Scope::Global,
            "shared" => Scope::Shared,
            "shared.dyn" => Scope::SharedDyn,
            "local.fragment" | "fragment" => Scope::Fragment,
            "local" => Scope::Local,
            "local.var" => Scope::LocalVar,
            "shared.barrier" => Scope::Barrier,
            _ => return None,
        })
    }

    pub fn is_shared(self) -> bool {
        matches!(self, Scope::Shared | Scope::SharedDyn)
    }
}

/// One dimension of a region: where it starts and, when written as a slice or known from the buffer,
/// how far it extends. A point index (`A[y, x]` passed to `T.copy`) has no extent: it is taken from
/// the other operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegionDim {
    pub start: ExprId,
    pub extent: Option<ExprId>,
}

/// A rectangular part of a buffer, as tile operations take it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Region {
    pub buffer: EntityId,
    pub dims: Vec<RegionDim>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoopKind {
    Parallel,
    Pipelined {
        num_stages: i64,
    },
    Serial,
    Unroll,
    /// `while cond:` on a run-time condition (`World::conditions` holds it, re-read before each
    /// iteration): no loop variable and no extent.
    While,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LoopInfo {
    pub kind: LoopKind,
    pub vars: Vec<VarId>,
    pub extents: Vec<ExprId>,
}

/// The grid and thread block of one `with T.Kernel(...)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Launch {
    pub grid: Vec<ExprId>,
    pub block_vars: Vec<VarId>,
    pub threads: Vec<i64>,
    /// The flat thread index `threadIdx.x + threads[0] * (threadIdx.y + threads[1] * threadIdx.z)`,
    /// ranging over `0..thread_count()`, once the kernel reads it (`T.get_thread_binding`,
    /// `T.thread_binding`, `T.get_warp_idx`, `T.get_lane_idx`): lowering makes it the thread
    /// program's own thread index.
    pub thread_var: Option<VarId>,
}

impl Launch {
    pub fn thread_count(&self) -> i64 {
        self.threads.iter().product()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WarpPolicy {
    Square,
    FullRow,
    FullCol,
}

/// How `T.cumsum` and `T.cummax` combine a running value with the next element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanOp {
    Sum,
    Max,
}

impl ScanOp {
    /// The TileLang operation's name (`"cumsum"`).
    pub fn name(self) -> &'static str {
        match self {
            ScanOp::Sum => "cumsum",
            ScanOp::Max => "cummax",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Sum,
    Max,
    Min,
    AbsSum,
    AbsMax,
}

impl ReduceKind {
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "reduce_sum",
            ReduceKind::Max => "reduce_max",
            ReduceKind::Min => "reduce_min",
            ReduceKind::AbsSum => "reduce_abssum",
            ReduceKind::AbsMax => "reduce_absmax",
        }
    }
}

/// What `T.atomic_add` adds: a whole region (tile form) or one value (element form).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AtomicSource {
    Region(Region),
    Value(DataId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayoutKind {
    /// `T.Fragment(shape, forward_fn=...)`: outputs are `(thread, local indices...)`.
    Fragment,
    /// `T.Layout(shape, fn)`: outputs are storage indices.
    Layout,
    /// `tilelang.layout.make_swizzled_layout(buf)`: the bank-swizzled storage TileLang gives a
    /// gemm operand tile of this shape (no formulas: the shared-layout pass builds it).
    Swizzled,
}

/// A user-written layout: the function evaluated symbolically on fresh index variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LayoutAnnotation {
    pub kind: LayoutKind,
    pub shape: Vec<i64>,
    pub vars: Vec<VarId>,
    pub outputs: Vec<ExprId>,
    /// `T.Fragment(..., replicate=n)` with `n > 1`: the replica variable the layout function took
    /// after the indices (ranging over `0..n`), and `n`. Each element is then held by `n` threads,
    /// the thread output depending on the replica.
    pub replica: Option<(VarId, i64)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TileOp {
    Copy {
        src: Region,
        dst: Region,
    },
    /// `T.fill(dst, value)`; `T.clear(dst)` is a fill with zero (`clear` records the spelling).
    Fill {
        dst: Region,
        value: DataId,
        clear: bool,
    },
    Gemm {
        a: Region,
        b: Region,
        c: Region,
        transpose_a: bool,
        transpose_b: bool,
        policy: WarpPolicy,
        clear_accum: bool,
        k_pack: i64,
    },
    Reduce {
        kind: ReduceKind,
        src: Region,
        dst: Region,
        /// The reduced dimension of `src`, counted from 0: the front end normalises a negative
        /// `dim` (counted from the end, as in Python) when it builds the op, so nothing after it
        /// does. It is out of range only when the user's was, which the shape check reports.
        dim: i64,
        clear: bool,
    },
    /// `T.cumsum` / `T.cummax`: an inclusive scan of `src` along `dim` into `dst`.
    Scan {
        op: ScanOp,
        src: Region,
        dst: Region,
        /// The scanned dimension of `src`, counted from 0 (normalised as [`TileOp::Reduce`]'s).
        dim: i64,
        reverse: bool,
    },
    /// `T.atomic_add`, `T.atomic_max`, `T.atomic_min`: an element (or, with a region source, each
    /// element of a tile) combined atomically with `op`.
    Atomic {
        op: crate::thread::AtomicOp,
        dst: Region,
        src: AtomicSource,
        /// The `T.alloc_var`-like scalar that receives the element's value before the addition
        /// (`return_prev=True`), which the call returns.
        prev: Option<EntityId>,
    },
    UseSwizzle {
        panel_size: i64,
        column_major: bool,
        enable: bool,
    },
    AnnotateLayout {
        buffer: EntityId,
        layout: LayoutAnnotation,
    },
    /// A statement about the threads themselves rather than about data.
    Control(ControlOp),
    /// `T.tvm_thread_allreduce(1, source, True, result, *threads)` inside
    /// `with T.attr(T.comm_reducer(combiner, [identity]), "reduce_scope", ...)`: every thread of
    /// the block stores into the element `result` the `combiner` fold of `source` as computed by
    /// each thread that differs from it only in the thread dimensions `dims` (0, 1, 2 for x, y, z).
    ThreadAllReduce {
        combiner: BinaryOp,
        source: DataId,
        result: Region,
        dims: Vec<usize>,
    },
    /// `T.call_extern(dtype, name, *args)` as a statement: each executing thread calls a device
    /// function of the user's CUDA source (`T.import_source`), which tilec passes through to the
    /// generated CUDA and does not model.
    ExternCall(ExternCall),
    /// `T.finalize_reducer(reducer)`: every copy of each element of the `T.alloc_reducer`
    /// fragment `buffer` (one per thread that holds it) becomes the `combiner` fold of all of them,
    /// so that the fragment holds the reduction of every contribution made to it; then, with
    /// `init` (`T.reducer_init(acc, init)`), `combiner(init, total)`, `init` counted once.
    FinalizeReducer {
        buffer: EntityId,
        combiner: BinaryOp,
        init: Option<DataId>,
    },
    /// `T.import_source(source)`: CUDA source the kernel's extern calls need, placed before the
    /// kernel in the generated CUDA. `None` when the text is a value tilec cannot know (built in
    /// another module), which is fine for checking and layouts, but not for generating code.
    ImportSource {
        source: Option<String>,
    },
}

/// A call of an extern device function (see [`TileOp::ExternCall`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExternCall {
    /// The function's name; `None` when it is a value tilec cannot know.
    pub name: Option<String>,
    pub args: Vec<ExternArg>,
}

/// Whether `name` can be printed as the callee of a C++ call: an identifier, possibly qualified
/// (`tl::f`) or with template arguments (`decode<half, 8>`), as TileLang passes it through.
pub fn is_extern_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '<' | '>' | ',' | ' '))
}

/// One argument of an [`ExternCall`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ExternArg {
    /// `T.access_ptr(buffer[indices], ...)`: the address of the point region `element`. The
    /// function may read and write any element of the buffer from there (tilec cannot see how far
    /// it goes), so `reach` is the whole buffer and the access counts as a read and a write.
    Pointer { element: Region, reach: Region },
    /// A value passed by value.
    Value(DataId),
}

/// What a [`TileOp::Control`] does. Each is executed by every thread that reaches it, as written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ControlOp {
    /// `T.sync_threads()`: every thread of the block waits for all others (`__syncthreads()`).
    /// With `named`, `T.sync_threads(barrier_id, arrive_count)`: hardware barrier `id` among
    /// the `threads` threads that execute it or arrive on it (`bar.sync id, threads`), which may
    /// belong to different warp roles.
    SyncThreads { named: Option<NamedBarrier> },
    /// `T.named_barrier_arrive(barrier_id, arrive_count)`: the executing threads count towards
    /// hardware barrier `id`'s `threads` and go on without waiting (`bar.arrive id, threads`).
    NamedBarrierArrive(NamedBarrier),
    /// `T.sync_warp()`: the threads of each warp wait for each other (`__syncwarp()`).
    SyncWarp,
    /// `T.pdl_sync()`: waits until the grids this launch depends on have completed or triggered
    /// (programmatic dependent launch, `griddepcontrol.wait`).
    PdlSync,
    /// `T.pdl_trigger()`: lets a dependent grid start (`griddepcontrol.launch_dependents`).
    PdlTrigger,
    /// `T.thread_return()`: the executing thread stops here.
    ThreadReturn,
    /// `T.device_assert(cond, msg)`: the run fails, saying `message`, when `cond` is false in a
    /// thread that reaches it.
    DeviceAssert { cond: DataId, message: String },
    /// `T.mbarrier_arrive(b)` / `T.barrier_arrive(b)`: each executing thread arrives once on the
    /// mbarrier.
    BarrierArrive { barrier: BarrierRef },
    /// `T.mbarrier_wait_parity(b, parity)` / `T.barrier_wait(b, parity)`: each executing thread
    /// waits until the mbarrier's phase of parity `parity` (taken modulo 2) has completed.
    BarrierWait { barrier: BarrierRef, parity: ExprId },
    /// `T.mbarrier_expect_tx(b, bytes)`: raises the current phase's pending transaction count by
    /// `bytes`, which asynchronous copies on the barrier then complete; no arrival.
    BarrierExpectTx { barrier: BarrierRef, bytes: ExprId },
    /// `T.fence_proxy_async()`: orders this thread's earlier shared-memory writes before later
    /// asynchronous-proxy reads (TMA stores, `wgmma` operands).
    FenceProxyAsync,
    /// `T.rng_init(seed, seq, off)`: (re)starts the executing thread's random generator, curand's
    /// Philox4x32-10, at subsequence `subsequence` and offset `offset` of the stream of `seed`.
    RngInit {
        seed: DataId,
        subsequence: DataId,
        offset: DataId,
    },
    /// `T.sync_grid()`: every thread of every block of the grid waits for all others, which needs
    /// a cooperative launch (all blocks resident at once).
    SyncGrid,
}

/// A hardware barrier the user names: its id (0..16) and how many threads complete it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NamedBarrier {
    pub id: u32,
    pub threads: u32,
}

/// One mbarrier of a [`Scope::Barrier`] buffer: `mbars[i]`, or the buffer itself for its element 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BarrierRef {
    pub buffer: EntityId,
    pub index: ExprId,
}

impl ControlOp {
    pub fn name(&self) -> &'static str {
        match self {
            ControlOp::SyncThreads { .. } => "sync_threads",
            ControlOp::NamedBarrierArrive(_) => "named_barrier_arrive",
            ControlOp::SyncWarp => "sync_warp",
            ControlOp::PdlSync => "pdl_sync",
            ControlOp::PdlTrigger => "pdl_trigger",
            ControlOp::ThreadReturn => "thread_return",
            ControlOp::DeviceAssert { .. } => "device_assert",
            ControlOp::BarrierArrive { .. } => "mbarrier_arrive",
            ControlOp::BarrierWait { .. } => "mbarrier_wait_parity",
            ControlOp::BarrierExpectTx { .. } => "mbarrier_expect_tx",
            ControlOp::FenceProxyAsync => "fence_proxy_async",
            ControlOp::RngInit { .. } => "rng_init",
            ControlOp::SyncGrid => "sync_grid",
        }
    }
}

impl TileOp {
    pub fn name(&self) -> &'static str {
        match self {
            TileOp::Copy { .. } => "copy",
            TileOp::Fill { clear: true, .. } => "clear",
            TileOp::Fill { .. } => "fill",
            TileOp::Gemm { .. } => "gemm",
            TileOp::Reduce { kind, .. } => kind.name(),
            TileOp::Scan { op, .. } => op.name(),
            TileOp::Atomic { op, .. } => match op {
                crate::thread::AtomicOp::Add => "atomic_add",
                crate::thread::AtomicOp::Max => "atomic_max",
                crate::thread::AtomicOp::Min => "atomic_min",
            },
            TileOp::UseSwizzle { .. } => "use_swizzle",
            TileOp::AnnotateLayout { .. } => "annotate_layout",
            TileOp::Control(control) => control.name(),
            TileOp::ThreadAllReduce { .. } => "tvm_thread_allreduce",
            TileOp::ExternCall(_) => "call_extern",
            TileOp::FinalizeReducer { .. } => "finalize_reducer",
            TileOp::ImportSource { .. } => "import_source",
        }
    }
}

/// The index variable a [`EntityKind::Bind`] entity introduces and the integer value it takes
/// each time the statement runs. Every later index expression of the kernel may use the variable;
/// passes treat it as a symbol whose range is unknown, as they treat a symbolic size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Binding {
    pub var: VarId,
    pub value: DataId,
}

/// A store of one value to one element (`A[i, j] = v`; `A[i] += v` is stored desugared).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Store {
    pub buffer: EntityId,
    pub indices: Vec<ExprId>,
    pub value: DataId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    Read,
    Write,
    ReadWrite,
}

/// One buffer access of a statement: the Accesses component, derived when the entity is added.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    pub kind: AccessKind,
    pub region: Region,
}

/// A component column: one optional value per entity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column<T> {
    values: Vec<Option<T>>,
}

impl<T> Default for Column<T> {
    fn default() -> Self {
        Column { values: Vec::new() }
    }
}

impl<T> Column<T> {
    pub fn get(&self, entity: EntityId) -> Option<&T> {
        self.values.get(entity.index()).and_then(Option::as_ref)
    }

    pub fn get_mut(&mut self, entity: EntityId) -> Option<&mut T> {
        self.values.get_mut(entity.index()).and_then(Option::as_mut)
    }

    pub fn set(&mut self, entity: EntityId, value: T) {
        let index = entity.index();
        if self.values.len() <= index {
            self.values.resize_with(index + 1, || None);
        }
        self.values[index] = Some(value);
    }

    /// Every entity that has this component, with its value, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (EntityId, &T)> {
        self.values
            .iter()
            .enumerate()
            .filter_map(|(index, value)| value.as_ref().map(|v| (EntityId::from_index(index), v)))
    }
}

/// A value the front end assumed for a parameter no call site gives.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AssumedArg {
    pub name: String,
    pub value: ConstValue,
    /// Where the value came from ("the first `@autotune` config", "a representative choice").
    pub source: String,
}

/// The position-free IR of one kernel instance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct World {
    /// The factory (classic) or jit function (eager) this instance comes from.
    pub kernel_name: String,
    /// The concrete meta arguments, by parameter name, in parameter order.
    pub args: Vec<(String, ConstValue)>,
    /// Parameters (and eager `T.const` symbols) no call site gives a value for, kept symbolic:
    /// the instance is generic over them, as a `T.dynamic` size.
    pub symbolic_args: Vec<String>,
    /// Parameters no call site gives a value for that the kernel needs at compile time (a tile
    /// size, a dtype), with the value assumed for them and where it came from.
    pub assumed_args: Vec<AssumedArg>,
    /// `pass_configs` of the kernel's `@tilelang.jit(...)` or `tilelang.compile(...)`.
    pub pass_configs: Vec<(String, ConstValue)>,
    /// True when the front end reported an error for this instance: the world is then only as
    /// complete as evaluation got, and passes must not add diagnostics of their own on top.
    pub incomplete: bool,
    pub exprs: ExprArena,
    pub data: DataArena,
    pub kinds: Vec<EntityKind>,
    /// The top-level entities (parameters and kernel launches), in source order.
    pub roots: Vec<EntityId>,
    /// Kernel parameters in signature order (eager outputs last), and which of them are outputs.
    pub params: Vec<EntityId>,
    pub outputs: Vec<EntityId>,
    pub names: Column<String>,
    pub parents: Column<EntityId>,
    /// Ordered children of a kernel launch, a loop or the then-branch of an `if`.
    pub bodies: Column<Vec<EntityId>>,
    pub else_bodies: Column<Vec<EntityId>>,
    pub shapes: Column<Vec<ExprId>>,
    pub dtypes: Column<DType>,
    pub scopes: Column<Scope>,
    pub launches: Column<Launch>,
    pub loops: Column<LoopInfo>,
    pub ops: Column<TileOp>,
    pub stores: Column<Store>,
    pub bindings: Column<Binding>,
    /// The symbol an integer scalar parameter (`n: T.int32`) stands for in index expressions: the
    /// kernel takes it by value, as it takes a dynamic size.
    pub scalar_params: Column<VarId>,
    pub conditions: Column<DataId>,
    pub accesses: Column<Vec<Access>>,
    /// Buffers made by `T.reshape` / `T.view`: the buffer whose storage each shares, never itself
    /// an alias (chains are resolved when the alias is made). An alias has its own shape and
    /// entity, so tile operations see it with its own shape, but no storage of its own.
    pub aliases: Column<EntityId>,
    /// The strides of global tensors declared with `T.StridedTensor` whose strides are not the
    /// row-major ones of their shape, one index expression per dimension. The checks and layout
    /// inference see such a tensor by its shape alone; lowering addresses it through these
    /// (`BufferDecl::strides`), and a launch passes it as its storage.
    pub strides: Column<Vec<ExprId>>,
    /// The arrival count of each mbarrier of a [`Scope::Barrier`] buffer, in index order.
    pub barrier_counts: Column<Vec<u32>>,
    /// The mbarrier a `T.tma_copy(src, dst, barrier=b)` completes its bytes on: such a copy is
    /// issued asynchronously by one thread of those that reach it, and its destination may be
    /// read only once the barrier's phase has completed (the user's protocol says when).
    pub copy_barriers: Column<BarrierRef>,
    /// Fragments made by `T.alloc_reducer`, with the operation that combines contributions.
    /// Each thread holding a copy of an element accumulates its own contributions into it
    /// (several iterations of a `T.Parallel` loop may update one element), and
    /// [`TileOp::FinalizeReducer`] combines the copies.
    pub reducers: Column<BinaryOp>,
    /// Global buffers the function allocates itself (`T.alloc_global`), which are also in
    /// `params`, after the signature's: TileLang makes each a workspace the runtime allocates and
    /// passes to every launch, so launches exchange data through it, and the caller never sees it.
    pub workspaces: Vec<EntityId>,
    /// Global tensors a kernel reaches through a pointer it reads at run time
    /// (`T.make_tensor(ptrs[i], shape, dtype)` over a `T.ptr` table), with the pointer's value.
    /// They are also in `params`, after the signature's, so that checks and layout inference
    /// see a global tensor of that shape; the lowering does not take them yet.
    pub pointer_tensors: Column<DataId>,
    /// Shared buffers made by `T.view(base, shape, dtype=...)` with another dtype: each is a
    /// buffer of its own (its own shape, dtype and layout) over the bytes of `base`, which it
    /// maps to. Unlike an alias it is not addressed through its base; the two share space, so
    /// the base is live wherever the view is, and the view takes no space of its own.
    pub byte_views: Column<EntityId>,
    /// `T.Parallel` loops whose extents the front end computed from values it assumed for a generic instance
    /// (`T.Parallel(threads_arg, npt_arg)` with both assumed): a layout conflict inside one may
    /// be the assumption's doing rather than the kernel's, and is reported as not analysed.
    pub assumed_extent_loops: Vec<EntityId>,
}

impl World {
    /// Adds an entity of `kind`, as the last child of `parent` (or as a root).
    pub fn add_entity(&mut self, kind: EntityKind, parent: Option<EntityId>) -> EntityId {
        let id = EntityId::from_index(self.kinds.len());
        self.kinds.push(kind);
        match parent {
            Some(parent) => {
                self.parents.set(id, parent);
                match self.bodies.get_mut(parent) {
                    Some(body) => body.push(id),
                    None => self.bodies.set(parent, vec![id]),
                }
            }
            None => self.roots.push(id),
        }
        id
    }

    /// Adds an entity of `kind` as the last child of the else-branch of the runtime `if` `parent`.
    pub fn add_else_entity(&mut self, kind: EntityKind, parent: EntityId) -> EntityId {
        let id = EntityId::from_index(self.kinds.len());
        self.kinds.push(kind);
        self.parents.set(id, parent);
        match self.else_bodies.get_mut(parent) {
            Some(body) => body.push(id),
            None => self.else_bodies.set(parent, vec![id]),
        }
        id
    }

    pub fn kind(&self, entity: EntityId) -> Option<EntityKind> {
        self.kinds.get(entity.index()).copied()
    }

    pub fn entities(&self) -> impl Iterator<Item = EntityId> + '_ {
        (0..self.kinds.len()).map(EntityId::from_index)
    }

    /// The buffer that holds `buffer`'s elements: its base when it is an alias, itself otherwise.
    pub fn storage_of(&self, buffer: EntityId) -> EntityId {
        self.aliases.get(buffer).copied().unwrap_or(buffer)
    }

    pub fn is_alias(&self, buffer: EntityId) -> bool {
        self.aliases.get(buffer).is_some()
    }

    /// Whether `buffer` is a view of another shared buffer's bytes with another dtype
    /// ([`World::byte_views`]).
    pub fn is_byte_view(&self, buffer: EntityId) -> bool {
        self.byte_views.get(buffer).is_some()
    }

    /// `buffer[indices]` as an element of the buffer that stores it: an alias's indices are
    /// flattened row-major over the alias's shape and unflattened over its base's (both views
    /// of one contiguous storage, as TVM's buffers sharing a data pointer are).
    pub fn resolve_alias(
        &self,
        arena: &mut ExprArena,
        buffer: EntityId,
        indices: &[ExprId],
    ) -> (EntityId, Vec<ExprId>) {
        let Some(&base) = self.aliases.get(buffer) else {
            return (buffer, indices.to_vec());
        };
        let alias_shape = self.shapes.get(buffer).cloned().unwrap_or_default();
        let base_shape = self.shapes.get(base).cloned().unwrap_or_default();
        let flat = arena.flatten_row_major(indices, &alias_shape);
        let unflattened = arena.unflatten_row_major(flat, &base_shape);
        (base, unflattened)
    }

    pub fn name(&self, entity: EntityId) -> &str {
        self.names.get(entity).map_or("?", String::as_str)
    }

    /// The entities that enclose `entity`, innermost first, up to its launch.
    pub fn ancestors(&self, entity: EntityId) -> impl Iterator<Item = EntityId> + '_ {
        std::iter::successors(self.parents.get(entity).copied(), |&parent| {
            self.parents.get(parent).copied()
        })
    }

    pub fn body(&self, entity: EntityId) -> &[EntityId] {
        self.bodies.get(entity).map_or(&[], Vec::as_slice)
    }

    /// The concrete shape of a buffer, when every extent is a constant.
    pub fn const_shape(&self, buffer: EntityId) -> Option<Vec<i64>> {
        self.shapes
            .get(buffer)?
            .iter()
            .map(|&extent| self.exprs.as_int(extent))
            .collect()
    }

    /// Every buffer allocated in shared memory, in source order.
    /// Shared buffers with storage of their own (aliases of them excluded).
    pub fn shared_buffers(&self) -> impl Iterator<Item = EntityId> + '_ {
        self.scopes
            .iter()
            .filter(|(entity, scope)| scope.is_shared() && !self.is_alias(*entity))
            .map(|(entity, _)| entity)
    }

    /// The region covering all of `buffer`.
    pub fn full_region(&mut self, buffer: EntityId) -> Region {
        let shape = self.shapes.get(buffer).cloned().unwrap_or_default();
        let zero = self.exprs.int(0);
        Region {
            buffer,
            dims: shape
                .into_iter()
                .map(|extent| RegionDim {
                    start: zero,
                    extent: Some(extent),
                })
                .collect(),
        }
    }
}
