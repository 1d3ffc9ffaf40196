//! Lowering: a kernel world and its layouts become one [`ThreadProgram`] per `T.Kernel` launch.
//!
//! Parallel loops run through their loop layouts (each thread walks its own iterations, found by
//! inverting the layout in `iteration`), tile operations become explicit per-thread loops, shared
//! memory gets a plan with offsets, and barriers are inserted where one thread's shared-memory
//! writes meet other threads' accesses. Anything the lowering cannot express becomes a diagnostic
//! on the entity that needs it, never a panic and never a silently wrong program.

mod allreduce;
mod bounded_copy;
mod epilogue;
mod extern_call;
mod fences;
mod gemm;
mod groups;
mod iteration;
mod overlap;
mod persistent;
mod pipeline;
mod raster;
mod reduce;
mod rewrite;
mod shared_plan;
mod single_stage;
mod specialize;
mod sync;
mod threads;
mod tile;
mod tma;
mod values;
mod vectorize;
mod versioning;
mod wgmma;

use std::collections::BTreeMap;

use tilec_ir::data::CompareOp;
use tilec_ir::thread::{
    BufferDecl, BufferId, Memory, ParamAccess, Place, ScalarParam, Stmt, TensorParam, Value,
    ValueId,
};
use tilec_ir::{
    Anchor, Cancellation, Code, ControlOp, DType, Diagnostic, EntityId, EntityKind, ExprArena,
    ExprId, LoopKind, Scope, ThreadProgram, TileOp, VarId, World,
};

use crate::CodegenOptions;
use crate::layout::{FragmentLayout, Layouts};
use crate::thread_groups::{ThreadGroup, ThreadGroups};
use iteration::Iteration;
pub(crate) use pipeline::staged_buffers;

/// Why an entity could not be lowered (becomes a `cannot-lower` diagnostic on it).
#[derive(Clone, Debug)]
pub(crate) struct Unlowerable {
    message: String,
    /// Set when what stops lowering is something tilec cannot know rather than a gap in
    /// lowering: the entity it is about, reported as `not-analysed` with the message as is.
    not_analysed: Option<EntityId>,
}

/// `value`, a size or index of a lowering plan, as an index into the plan's tables. Plans are
/// built from checked, positive shapes; a negative value is refused as unlowerable rather than
/// wrapped around into a huge index.
pub(super) fn table_index(value: i64) -> Result<usize, Unlowerable> {
    usize::try_from(value)
        .map_err(|_| Unlowerable::new(format!("a negative size or index ({value}) in the plan")))
}

/// `index`, a position in or the length of an in-memory table, as an integer of the IR. Memory
/// holds at most `isize::MAX` bytes, so every such number fits an i64; the conversion saturates
/// rather than panics.
pub(super) fn table_int(index: usize) -> i64 {
    i64::try_from(index).unwrap_or(i64::MAX)
}

impl Unlowerable {
    pub(crate) fn new(message: impl Into<String>) -> Unlowerable {
        Unlowerable {
            message: message.into(),
            not_analysed: None,
        }
    }

    /// Lowering needs something of `entity` that tilec cannot know (a value built by another
    /// module): a `not-analysed` diagnostic at that entity, never the user's error.
    pub(crate) fn not_analysed(entity: EntityId, message: impl Into<String>) -> Unlowerable {
        Unlowerable {
            message: message.into(),
            not_analysed: Some(entity),
        }
    }
}

/// Lowers every launch of `world`; the diagnostics say what could not be lowered and where.
pub fn lower_world(
    world: &World,
    layouts: &Layouts,
    options: CodegenOptions,
    cancellation: Cancellation<'_>,
) -> Result<Vec<ThreadProgram>, Vec<Diagnostic>> {
    if world.incomplete {
        return Err(Vec::new());
    }
    // A program lowered from conflicting layouts would compute wrong results: the layout errors
    // are the answer.
    let layout_errors: Vec<Diagnostic> = layouts
        .diagnostics
        .iter()
        .filter(|d| d.severity.stops_analysis())
        .cloned()
        .collect();
    if !layout_errors.is_empty() {
        return Err(layout_errors);
    }
    if let Some((tensor, _)) = world.pointer_tensors.iter().next() {
        return Err(vec![Diagnostic::not_analysed(
            Anchor::Entity(tensor),
            "this tensor starts at a pointer the kernel reads at run time (`T.make_tensor`): \
             tilec checks such a kernel and infers its layouts, but does not lower it to CUDA yet",
        )]);
    }
    let launches: Vec<EntityId> = world
        .roots
        .iter()
        .copied()
        .filter(|&e| world.kind(e) == Some(EntityKind::Kernel))
        .collect();
    let mut programs = Vec::new();
    let mut diagnostics = Vec::new();
    for (position, &launch) in launches.iter().enumerate() {
        let name = if launches.len() == 1 {
            c_identifier(&world.kernel_name)
        } else {
            format!("{}_{position}", c_identifier(&world.kernel_name))
        };
        match lower_launch(world, layouts, (options, cancellation), launch, name) {
            Ok(program) => programs.push(program),
            Err(diagnostic) => diagnostics.push(diagnostic),
        }
    }
    if diagnostics.is_empty() {
        Ok(programs)
    } else {
        Err(diagnostics)
    }
}

/// `name` with every character that C does not allow in an identifier replaced.
pub fn c_identifier(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'k');
    }
    out
}

/// How a launch's blocks cover its grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TileOrder {
    /// One block per tile, as written.
    PerBlock,
    /// One block per multiprocessor, each walking several tiles (`persistent.rs`), every
    /// shared buffer in space of its own.
    Persistent,
    /// The same, with buffers that carry nothing between tiles sharing space by their live
    /// ranges within a tile (`shared_plan.rs`). Sharing costs a barrier wherever a buffer's
    /// space is reused, so it is only taken where the launch would not fit otherwise.
    PersistentSharingSpace,
}

/// Lowers one launch: persistent where that applies and its shared memory fits a block
/// (`persistent.rs`), with its gemm epilogues staged through shared memory where that needs no
/// more shared memory than the launch as written or the launch is persistent (`epilogue.rs`).
pub fn lower_launch(
    world: &World,
    layouts: &Layouts,
    (options, cancellation): (CodegenOptions, Cancellation<'_>),
    launch: EntityId,
    name: String,
) -> Result<ThreadProgram, Diagnostic> {
    let limit = i64::try_from(options.target.shared_memory_per_block()).unwrap_or(i64::MAX);
    // A launch that synchronises its threads by hand keeps the schedule it was written with.
    let by_hand = groups::hand_synchronized(world, launch, &ThreadGroups::new(world));
    let staged = match options.stage_epilogues && !by_hand {
        true => epilogue::stage_epilogues(world, layouts, launch),
        false => None,
    };
    let staged = staged.as_ref().map(|(world, layouts)| (world, layouts));
    if options.persistent
        && !by_hand
        && !groups::holds_grid_barrier(world, launch)
        && pipeline::may_be_persistent(world, launch)
        && let Some(program) = persistent_launch(
            staged,
            (world, layouts),
            (options, cancellation),
            launch,
            &name,
        )
    {
        return Ok(program);
    }
    if let Some((staged_world, staged_layouts)) = staged {
        // Staging is an optimization: a staged launch whose shared-memory plan grows (perhaps
        // fitting fewer blocks per SM), or that does not lower, leaves the launch as written.
        let planned = |world, layouts| {
            Lowering::new(
                world,
                layouts,
                options,
                (launch, TileOrder::PerBlock),
                String::new(),
            )
            .map(|lowering| lowering.program.shared_bytes)
        };
        let fits = matches!(
            (planned(staged_world, staged_layouts), planned(world, layouts)),
            (Ok(staged), Ok(as_written)) if staged <= as_written
        );
        if fits
            && let Ok(program) = lower_launch_as_written(
                staged_world,
                staged_layouts,
                (options, cancellation),
                (launch, TileOrder::PerBlock),
                name.clone(),
            )
            && program.shared_bytes <= limit
        {
            return Ok(program);
        }
    }
    let program = lower_launch_as_written(
        world,
        layouts,
        (options, cancellation),
        (launch, TileOrder::PerBlock),
        name.clone(),
    )?;
    // Rows padded against bank conflicts are an optimization: a launch they push past a block's
    // shared memory runs with those buffers unpadded rather than not at all.
    if program.shared_bytes > limit
        && let Some(unpadded) = layouts.without_exchange_padding(world)
        && let Ok(fitting) = lower_launch_as_written(
            world,
            &unpadded,
            (options, cancellation),
            (launch, TileOrder::PerBlock),
            name,
        )
        && fitting.shared_bytes <= limit
    {
        return Ok(fitting);
    }
    within_shared_limit(world, program, options, launch)
}

/// The persistent form of a launch, its epilogue staged if that fits: `None` where persistence
/// does not apply (the lowering says why, and the launch is lowered per block instead) or where
/// shared memory, which a persistent launch cannot share between its phases, exceeds a block's.
fn persistent_launch(
    staged: Option<(&World, &Layouts)>,
    as_written: (&World, &Layouts),
    (options, cancellation): (CodegenOptions, Cancellation<'_>),
    launch: EntityId,
    name: &str,
) -> Option<ThreadProgram> {
    let limit = i64::try_from(options.target.shared_memory_per_block()).unwrap_or(i64::MAX);
    for (world, layouts) in staged.into_iter().chain([as_written]) {
        for order in [TileOrder::Persistent, TileOrder::PersistentSharingSpace] {
            // A refusal holds for the staged and the unstaged launch alike, and for either
            // plan of shared memory: all have the same loop.
            let walk = (launch, order);
            let program = lower_launch_as_written(
                world,
                layouts,
                (options, cancellation),
                walk,
                name.to_owned(),
            )
            .ok()?;
            if program.shared_bytes <= limit {
                return Some(program);
            }
        }
    }
    None
}

/// Lowers one launch exactly as its world says, with its blocks covering the grid as `walk` says.
fn lower_launch_as_written(
    world: &World,
    layouts: &Layouts,
    (options, cancellation): (CodegenOptions, Cancellation<'_>),
    (launch, walk): (EntityId, TileOrder),
    name: String,
) -> Result<ThreadProgram, Diagnostic> {
    let limit = i64::try_from(options.target.shared_memory_per_block()).unwrap_or(i64::MAX);
    let program = lower_with_workspaces(
        world,
        layouts,
        (options, cancellation),
        (launch, walk),
        name.clone(),
        false,
    )?;
    if program.shared_bytes <= limit {
        return Ok(program);
    }
    // One scratch area for all cross-warp reductions may fit where one each does not.
    lower_with_workspaces(
        world,
        layouts,
        (options, cancellation),
        (launch, walk),
        name,
        true,
    )
}

/// The checks count the buffers; lowering adds reduction scratch and pipeline barriers. A launch
/// they push over the limit would fail when launched: say so here instead. With sizes tilec
/// assumed for a generic instance the excess is the assumption's, and said as not analysed.
fn within_shared_limit(
    world: &World,
    program: ThreadProgram,
    options: CodegenOptions,
    launch: EntityId,
) -> Result<ThreadProgram, Diagnostic> {
    let limit = options.target.shared_memory_per_block();
    let needed = u64::try_from(program.shared_bytes).unwrap_or(u64::MAX);
    if needed <= limit {
        return Ok(program);
    }
    let message = format!(
        "once lowered, this launch needs {needed} bytes of shared memory (its buffers, plus \
         scratch for cross-warp reductions and barriers for its pipelines), more than the \
         {limit} a block may use on {}",
        options.target.name()
    );
    if world.assumed_args.is_empty() {
        return Err(Diagnostic::error(
            Code::CannotLower,
            Anchor::Entity(launch),
            message,
        ));
    }
    Err(Diagnostic::not_analysed(
        Anchor::Entity(launch),
        format!("{message}, with the values tilec assumed for this generic instance"),
    )
    .with_help(
        "the kernel may fit with the sizes it is called with: pass them at a call site, or list \
         the instance in tilec.toml",
    ))
}

fn lower_with_workspaces(
    world: &World,
    layouts: &Layouts,
    (options, cancellation): (CodegenOptions, Cancellation<'_>),
    (launch, walk): (EntityId, TileOrder),
    name: String,
    share_reduce_workspaces: bool,
) -> Result<ThreadProgram, Diagnostic> {
    let mut lowering =
        Lowering::new(world, layouts, options, (launch, walk), name).map_err(|e| e.at(launch))?;
    lowering.share_reduce_workspaces = share_reduce_workspaces;
    lowering.cancellation = cancellation;
    let body = world.body(launch).to_vec();
    let setup = lowering.declare_barriers();
    let mut stmts = lowering.rasterization(&body);
    stmts.extend(setup);
    lowering.top_lets = stmts
        .iter()
        .filter_map(|stmt| match stmt {
            Stmt::Let { var, .. } => Some(*var),
            _ => None,
        })
        .collect();
    for entity in body {
        lowering
            .statement(entity, &mut stmts)
            .map_err(|e| e.at(entity))?;
    }
    match lowering.producer_role.take() {
        Some(role) => stmts = lowering.warp_specialize(stmts, role),
        None => lowering
            .refuse_persistence("no pipelined loop has a producer warpgroup")
            .map_err(|e| e.at(launch))?,
    }
    groups::chain_group_ifs(&mut stmts, &lowering.group_ifs);
    fences::fence_barriers(&lowering.program, &mut stmts);
    lowering.program.body = stmts;
    Ok(lowering.program)
}

impl Unlowerable {
    fn at(self, entity: EntityId) -> Diagnostic {
        if let Some(entity) = self.not_analysed {
            return Diagnostic::error(Code::NotAnalysed, Anchor::Entity(entity), self.message);
        }
        Diagnostic::error(
            Code::CannotLower,
            Anchor::Entity(entity),
            format!("cannot lower this to a thread program: {}", self.message),
        )
    }
}

/// A fragment's storage: its layout and the per-thread register array it lives in.
#[derive(Clone, Debug)]
pub(crate) struct FragmentStorage {
    layout: FragmentLayout,
    local_shape: Vec<i64>,
}

impl FragmentStorage {
    /// The flat register index of `buffer[indices]` in the thread that holds it.
    fn local_index(&self, arena: &mut ExprArena, indices: &[ExprId]) -> ExprId {
        let map: Vec<(VarId, ExprId)> = self
            .layout
            .vars
            .iter()
            .copied()
            .zip(indices.iter().copied())
            .collect();
        let lookup = |v: VarId| map.iter().find(|(var, _)| *var == v).map(|(_, e)| *e);
        let local: Vec<ExprId> = self
            .layout
            .index
            .iter()
            .map(|&index| arena.substitute(index, &lookup))
            .collect();
        crate::layout::fragment::flatten_exprs(arena, &local, &self.local_shape)
    }

    fn local_size(&self) -> i64 {
        self.local_shape.iter().product()
    }
}

/// The lowering of one launch in progress.
pub(crate) struct Lowering<'w> {
    world: &'w World,
    layouts: &'w Layouts,
    options: CodegenOptions,
    launch: EntityId,
    program: ThreadProgram,
    buffers: BTreeMap<EntityId, BufferId>,
    fragments: BTreeMap<EntityId, FragmentStorage>,
    threads: i64,
    /// The replica variable of the laid-out loop being lowered, when it has more than one replica:
    /// stores to shared and global memory then run on replica 0 only.
    replica: Option<VarId>,
    /// The index comparisons (`index >= 0`, `index < extent`) that hold where the expression being
    /// lowered is evaluated: the conditions of the `T.if_then_else` branches it sits in. A load
    /// there needs no bounds guard of its own for them (a padded border's read, an im2col tile).
    known_comparisons: Vec<(CompareOp, ExprId, ExprId)>,
    sync: sync::SyncState,
    /// The shared buffers software pipelines keep several stages of, with the stage count.
    staged: BTreeMap<EntityId, i64>,
    /// While a pipelined loop is lowered: the stage its statements address in each staged buffer.
    current_stage: BTreeMap<EntityId, ExprId>,
    /// The variables the launch's leading `let`s bind (rasterized block indices), which both
    /// roles of a warp-specialized launch see.
    top_lets: Vec<VarId>,
    /// The producer warpgroup's part, once a pipelined loop has been warp specialized.
    producer_role: Option<specialize::ProducerRole>,
    /// While a `cp.async` pipeline's only consumer, a gemm, is lowered: its offer to prefetch the
    /// next iteration's fragments.
    fragment_prefetch: Option<pipeline::FragmentPrefetch>,
    /// In a persistent lowering, the variables its loops over tiles bind (`persistent.rs`).
    tile_walk: Option<persistent::TileWalk>,
    /// How the launch's blocks cover its tiles (and so which shared buffers may share space).
    tile_order: TileOrder,
    /// In a persistent lowering's pipelined loop: the iterations of the block's earlier rounds.
    stage_offset: Option<ExprId>,
    /// The shared scratch areas of cross-warp reductions so far, by dtype and element count.
    reduce_workspaces: Vec<(DType, i64, BufferId)>,
    /// Which statements differ between threads (`threads.rs`).
    thread_dependence: threads::ThreadDependence,
    /// Whether a later reduction reuses an earlier one's scratch area when it is large enough.
    /// Reuse costs a barrier before each reuse (the earlier readers must be done), so it is only
    /// asked for when separate areas would not fit in shared memory.
    share_reduce_workspaces: bool,
    /// Asked before each statement, so that an edit never waits for the lowering of the text it
    /// replaced.
    cancellation: Cancellation<'w>,
    /// Which threads run each statement (`T.ws` and other conditions on the thread index).
    groups: ThreadGroups,
    /// The group whose statements are being lowered, numbering its threads from 0
    /// (`groups.rs`); `None` for the whole block.
    group: Option<ThreadGroup>,
    /// The block's own thread index, which a group's index is computed from.
    block_thread: VarId,
    /// The launch synchronises its threads by hand (`groups::hand_synchronized`).
    hand_synchronized: bool,
    /// The groups given a named barrier so far, in the order of their barrier ids.
    group_barriers: Vec<ThreadGroup>,
    /// The conditions of the `if`s whose only branch is a thread group's, with the group
    /// (`groups::chain_group_ifs`).
    group_ifs: Vec<(ValueId, ThreadGroup)>,
    /// The conditions of the group `if`s whose statements follow the user's barrier protocol
    /// (see `concurrent_role`).
    protocol_ifs: Vec<ValueId>,
    /// Run-time scalars of pipelined loop bodies bound once before their loop instead
    /// (`pipeline::invariant_binds`), which the body then skips.
    hoisted_binds: Vec<EntityId>,
}

impl<'w> Lowering<'w> {
    fn new(
        world: &'w World,
        layouts: &'w Layouts,
        options: CodegenOptions,
        (launch, walk): (EntityId, TileOrder),
        name: String,
    ) -> Result<Lowering<'w>, Unlowerable> {
        let info = world
            .launches
            .get(launch)
            .ok_or_else(|| Unlowerable::new("the launch has no grid"))?;
        let threads = info.thread_count();
        let mut exprs = layouts.exprs.clone();
        // The kernel's own thread index where it reads one (`T.get_thread_binding`), so that its
        // uses in the world's expressions are the program's thread index.
        let thread = match info.thread_var {
            Some(var) => var,
            None => exprs.var("tx", Some(threads)),
        };
        let mut block_index = [thread; 3];
        for (k, slot) in block_index.iter_mut().enumerate() {
            *slot = match info.block_vars.get(k) {
                Some(&var) => var,
                None => exprs.var(["bx", "by", "bz"][k], Some(1)),
            };
        }
        let one = exprs.int(1);
        let mut grid = [one; 3];
        for (slot, &extent) in grid.iter_mut().zip(&info.grid) {
            *slot = extent;
        }
        let mut block = [1i64; 3];
        block[0] = threads;
        let tiles = grid
            .iter()
            .map(|&extent| exprs.as_int(extent))
            .product::<Option<i64>>();
        let groups = ThreadGroups::new(world);
        let hand_synchronized = groups::hand_synchronized(world, launch, &groups);
        let tile_walk = (walk != TileOrder::PerBlock)
            .then(|| persistent::TileWalk::new(&mut exprs, tiles, block_index));
        let program = ThreadProgram {
            name,
            exprs,
            values: Vec::new(),
            buffers: Vec::new(),
            params: Vec::new(),
            scalars: Vec::new(),
            grid,
            block,
            thread,
            block_index,
            persistent: tile_walk.map(|walk| walk.grid),
            shared_bytes: 0,
            tensor_maps: Vec::new(),
            extern_sources: Vec::new(),
            body: Vec::new(),
        };
        let mut lowering = Lowering {
            world,
            layouts,
            options,
            launch,
            program,
            buffers: BTreeMap::new(),
            fragments: BTreeMap::new(),
            threads,
            replica: None,
            known_comparisons: Vec::new(),
            sync: sync::SyncState::default(),
            staged: match hand_synchronized {
                true => BTreeMap::new(),
                false => staged_buffers(world, launch),
            },
            current_stage: BTreeMap::new(),
            top_lets: Vec::new(),
            producer_role: None,
            fragment_prefetch: None,
            tile_walk,
            tile_order: walk,
            stage_offset: None,
            reduce_workspaces: Vec::new(),
            share_reduce_workspaces: false,
            cancellation: Cancellation::default(),
            thread_dependence: threads::ThreadDependence::new(world, info.thread_var),
            groups,
            group: None,
            block_thread: thread,
            hand_synchronized,
            group_barriers: Vec::new(),
            group_ifs: Vec::new(),
            protocol_ifs: Vec::new(),
            hoisted_binds: Vec::new(),
        };
        lowering.declare_params();
        lowering.declare_buffers()?;
        Ok(lowering)
    }

    fn declare_params(&mut self) {
        let world = self.world;
        let mut scalar_vars: Vec<VarId> = Vec::new();
        for &param in &world.params {
            // An integer scalar parameter is passed by value, as a dynamic size is.
            if let Some(&var) = world.scalar_params.get(param) {
                if !scalar_vars.contains(&var) {
                    scalar_vars.push(var);
                }
                continue;
            }
            let shape = world.shapes.get(param).cloned().unwrap_or_default();
            let strides = world.strides.get(param).cloned();
            for &extent in shape.iter().chain(strides.iter().flatten()) {
                for var in world.exprs.vars_of(extent) {
                    if !scalar_vars.contains(&var) {
                        scalar_vars.push(var);
                    }
                }
            }
            let elements = match &strides {
                Some(strides) => self.strided_elements(&shape, strides),
                None => shape.iter().fold(self.program.exprs.int(1), |acc, &e| {
                    self.program.exprs.mul(acc, e)
                }),
            };
            let buffer = self.program.add_buffer(BufferDecl {
                name: c_identifier(world.name(param)),
                dtype: self.element_dtype(param),
                memory: Memory::Global {
                    param: self.program.params.len(),
                },
                shape,
                elements,
                strides,
            });
            self.buffers.insert(param, buffer);
            self.program.params.push(TensorParam {
                name: c_identifier(world.name(param)),
                buffer,
                access: self.param_access(param),
            });
        }
        // A symbol only the grid names (`T.ceildiv(max_seqlen, block)` of a `T.dynamic`) is passed
        // too: the launch computes the grid from it.
        let grid = world
            .launches
            .get(self.launch)
            .map(|launch| launch.grid.clone());
        for extent in grid.unwrap_or_default() {
            for var in world.exprs.vars_of(extent) {
                if !scalar_vars.contains(&var) {
                    scalar_vars.push(var);
                }
            }
        }
        for var in scalar_vars {
            let name = c_identifier(&world.exprs.var_info(var).name);
            self.program.scalars.push(ScalarParam { name, var });
        }
    }

    /// How many elements a strided tensor's storage spans: one past its last element,
    /// `1 + sum((extent - 1) * stride)`.
    fn strided_elements(&mut self, shape: &[ExprId], strides: &[ExprId]) -> ExprId {
        let exprs = &mut self.program.exprs;
        let one = exprs.int(1);
        let mut last = exprs.int(0);
        for (&extent, &stride) in shape.iter().zip(strides) {
            let steps = exprs.sub(extent, one);
            let span = exprs.mul(steps, stride);
            last = exprs.add(last, span);
        }
        exprs.add(last, one)
    }

    /// Whether the launch reads, writes or both reads and writes `param`.
    fn param_access(&self, param: EntityId) -> ParamAccess {
        let (mut read, mut write) = (false, false);
        for entity in crate::liveness::linearize(self.world, self.launch) {
            for access in self.world.accesses.get(entity).into_iter().flatten() {
                if self.world.storage_of(access.region.buffer) == param {
                    match access.kind {
                        tilec_ir::AccessKind::Read => read = true,
                        tilec_ir::AccessKind::Write => write = true,
                        tilec_ir::AccessKind::ReadWrite => (read, write) = (true, true),
                    }
                }
            }
            if let Some(TileOp::Atomic { dst, .. }) = self.world.ops.get(entity)
                && self.world.storage_of(dst.buffer) == param
            {
                read = true;
            }
        }
        match (read, write) {
            (_, false) => ParamAccess::Read,
            (false, true) => ParamAccess::Write,
            (true, true) => ParamAccess::ReadWrite,
        }
    }

    /// Declares the launch's fragments, locals and scalar variables, and plans shared memory.
    fn declare_buffers(&mut self) -> Result<(), Unlowerable> {
        let world = self.world;
        let order = crate::liveness::linearize(world, self.launch);
        let mut shared = Vec::new();
        let mut aliases = Vec::new();
        for &entity in &order {
            if world.is_alias(entity) {
                aliases.push(entity);
                continue;
            }
            match world.kind(entity) {
                Some(EntityKind::Var) => self.declare_local(entity, vec![1])?,
                Some(EntityKind::Buffer) => match world.scopes.get(entity) {
                    Some(Scope::Fragment) => self.declare_fragment(entity)?,
                    Some(Scope::Local | Scope::LocalVar) => {
                        let shape = world.const_shape(entity).ok_or_else(|| {
                            Unlowerable::new("a local buffer needs a constant shape")
                        })?;
                        self.declare_local(entity, shape)?;
                    }
                    Some(scope) if scope.is_shared() => shared.push(entity),
                    _ => {}
                },
                _ => {}
            }
        }
        // TMA boxes land swizzled by absolute address, like wgmma operands read them.
        let mut swizzle_aligned = self.wgmma_operands();
        if self.options.tma {
            swizzle_aligned.extend(self.staged.keys().copied());
        }
        let placed = shared_plan::plan(
            world,
            self.layouts,
            &order,
            &shared,
            &self.staged,
            &swizzle_aligned,
            match self.tile_order {
                TileOrder::PerBlock => shared_plan::SpaceSharing::ByLiveRange,
                TileOrder::Persistent => shared_plan::SpaceSharing::None,
                TileOrder::PersistentSharingSpace => shared_plan::SpaceSharing::WithinTile,
            },
        )?;
        let mut placement = Vec::new();
        for (entity, offset) in placed.offsets {
            let shape = world.const_shape(entity).unwrap_or_default();
            let id = self.add_buffer(entity, Memory::Shared { offset }, &shape);
            // A padded layout addresses more than the tile's elements, and a pipeline keeps
            // one copy of that storage per stage.
            let logical: i64 = shape.iter().product();
            let storage = self
                .layouts
                .shared
                .get(&entity)
                .map_or(logical, |assigned| assigned.storage_elements.max(logical));
            let stages = self.staged.get(&entity).copied().unwrap_or(1);
            self.program.buffers[id.index()].elements = self.program.exprs.int(storage * stages);
            let count = u64::try_from(storage * stages).unwrap_or(u64::MAX);
            let bytes = self.element_dtype(entity).storage_bytes(count);
            let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
            placement.push((id, offset, bytes));
        }
        self.sync.set_placement(&placement);
        self.program.shared_bytes = placed.bytes;
        for alias in aliases {
            self.declare_alias(alias);
        }
        Ok(())
    }

    /// A `T.reshape` / `T.view` alias shares its base's storage. A fragment alias keeps its own
    /// (reshaped) layout over the base's register array, so tile operations on it see its shape;
    /// other aliases are addressed through their base (`address`).
    fn declare_alias(&mut self, alias: EntityId) {
        let base = self.world.storage_of(alias);
        let Some(&id) = self.buffers.get(&base) else {
            return;
        };
        self.buffers.insert(alias, id);
        if let (Some(inferred), Some(storage)) =
            (self.layouts.buffers.get(&alias), self.fragments.get(&base))
        {
            let storage = FragmentStorage {
                layout: inferred.layout.clone(),
                local_shape: storage.local_shape.clone(),
            };
            self.fragments.insert(alias, storage);
        }
    }

    fn add_buffer(&mut self, entity: EntityId, memory: Memory, shape: &[i64]) -> BufferId {
        let shape: Vec<ExprId> = shape.iter().map(|&e| self.program.exprs.int(e)).collect();
        let count: i64 = shape
            .iter()
            .filter_map(|&e| self.program.exprs.as_int(e))
            .product();
        let elements = self.program.exprs.int(count);
        let name = self.unique_name(self.world.name(entity));
        let id = self.program.add_buffer(BufferDecl {
            name,
            dtype: self.element_dtype(entity),
            memory,
            shape,
            elements,
            strides: None,
        });
        self.buffers.insert(entity, id);
        id
    }

    fn unique_name(&self, base: &str) -> String {
        self.program.unique_buffer_name(&c_identifier(base))
    }

    fn declare_local(&mut self, entity: EntityId, shape: Vec<i64>) -> Result<(), Unlowerable> {
        self.add_buffer(entity, Memory::Local, &shape);
        Ok(())
    }

    fn declare_fragment(&mut self, entity: EntityId) -> Result<(), Unlowerable> {
        let Some(inferred) = self.layouts.buffers.get(&entity) else {
            // A fragment nothing uses has no layout and needs no registers.
            return Ok(());
        };
        let layout = inferred.layout.clone();
        let local_shape = layout.local_shape(&self.program.exprs);
        let storage = FragmentStorage {
            layout,
            local_shape,
        };
        let size = storage.local_size();
        // The register array is flat; addressing goes through the layout.
        self.add_buffer(entity, Memory::Local, &[size]);
        self.fragments.insert(entity, storage);
        Ok(())
    }

    /// The element dtype of a buffer (float32 for one the front end left untyped).
    pub(super) fn element_dtype(&self, buffer: EntityId) -> DType {
        self.world
            .dtypes
            .get(buffer)
            .copied()
            .unwrap_or(DType::Float32)
    }

    pub(super) fn buffer_of(&self, entity: EntityId) -> Result<BufferId, Unlowerable> {
        self.buffers.get(&entity).copied().ok_or_else(|| {
            Unlowerable::new(format!(
                "`{}` has no storage (no layout was inferred for it)",
                self.world.name(entity)
            ))
        })
    }

    /// Whether every thread has its own copy of `buffer` (registers), so that no store to it
    /// needs a single writer.
    pub(super) fn is_private(&self, buffer: EntityId) -> bool {
        matches!(
            self.scope_of(buffer),
            Some(Scope::Fragment | Scope::Local | Scope::LocalVar)
        )
    }

    fn scope_of(&self, entity: EntityId) -> Option<Scope> {
        if self.world.kind(entity) == Some(EntityKind::Var) {
            return Some(Scope::LocalVar);
        }
        self.world.scopes.get(entity).copied()
    }

    /// Lowers one statement of a launch or loop body (outside parallel loops).
    fn statement(&mut self, entity: EntityId, out: &mut Vec<Stmt>) -> Result<(), Unlowerable> {
        self.cancellation.check();
        let cooperative = match self.world.kind(entity) {
            // An atomic on one element is each thread's own, as a store is.
            Some(EntityKind::TileOp) => match self.world.ops.get(entity) {
                Some(
                    TileOp::Control(_)
                    | TileOp::UseSwizzle { .. }
                    | TileOp::AnnotateLayout { .. }
                    | TileOp::ExternCall(_)
                    | TileOp::ImportSource { .. },
                )
                | None => false,
                Some(TileOp::Atomic {
                    dst,
                    src: tilec_ir::AtomicSource::Value(_),
                    ..
                }) => dst.dims.iter().any(|dim| dim.extent.is_some()),
                Some(_) => true,
            },
            Some(EntityKind::Loop) => self
                .world
                .loops
                .get(entity)
                .is_some_and(|info| info.kind == LoopKind::Parallel),
            _ => false,
        };
        let in_group = self.group.is_some() && self.groups.narrowed(entity) == self.group;
        if cooperative
            && !in_group
            && self
                .thread_dependence
                .under_thread_condition(self.world, entity)
        {
            return Err(Unlowerable::new(
                "it sits under a condition (or in a loop) that depends on the thread index, but \
                 every thread of the block takes part in a tile operation or parallel loop",
            ));
        }
        let start = out.len();
        let lowered = self.statement_of_kind(entity, out);
        if cooperative && lowered.is_ok() {
            self.version_lowered(out, start);
        }
        lowered
    }

    /// The statements of the cooperative operation lowered into `out` from `start` on, each
    /// versioned on its full tiles ([`Lowering::version_on_full_tiles`]); the barriers in front
    /// of them stay as they are.
    fn version_lowered(&mut self, out: &mut Vec<Stmt>, start: usize) {
        let mut lowered = out.split_off(start);
        let barriers = lowered
            .iter()
            .take_while(|stmt| matches!(stmt, Stmt::Barrier))
            .count();
        let rest = lowered.split_off(barriers);
        out.extend(lowered);
        for mut stmt in rest {
            // A labelled block keeps its label outside the two versions.
            if let Stmt::Block { body, .. } = &mut stmt {
                *body = self.version_on_full_tiles(std::mem::take(body));
                out.push(stmt);
                continue;
            }
            out.extend(self.version_on_full_tiles(vec![stmt]));
        }
    }

    /// [`Lowering::statement`] by the entity's kind.
    fn statement_of_kind(
        &mut self,
        entity: EntityId,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        match self.world.kind(entity) {
            Some(EntityKind::Loop) => self.lower_loop(entity, out),
            Some(EntityKind::TileOp) => self.tile_op(entity, out),
            Some(EntityKind::Store) => self.top_level_store(entity, out),
            Some(EntityKind::If) => self.lower_if(entity, out, false),
            Some(EntityKind::Bind) if self.hoisted_binds.contains(&entity) => Ok(()),
            Some(EntityKind::Bind) => {
                let accesses = self.entity_shared_accesses(entity);
                self.sync.before(&accesses, out);
                self.bind(entity, out)?;
                // A later write of what it read must not overtake the read in another thread.
                self.sync.after(&accesses);
                Ok(())
            }
            // Declarations: buffers were declared with the launch, and parameters and launches
            // are not statements of a body.
            Some(EntityKind::Param | EntityKind::Kernel | EntityKind::Buffer | EntityKind::Var)
            | None => Ok(()),
        }
    }

    /// A run-time scalar named for the index arithmetic after it. Every thread computes it (a
    /// block-wide scalar is read by all threads from the same address, which the cache serves
    /// once), so no thread waits for another to publish it.
    fn bind(&mut self, entity: EntityId, out: &mut Vec<Stmt>) -> Result<(), Unlowerable> {
        let binding = *self
            .world
            .bindings
            .get(entity)
            .ok_or_else(|| Unlowerable::new("a run-time scalar without a value"))?;
        let value = self.value_as(binding.value, DType::Int64)?;
        out.push(Stmt::Bind {
            var: binding.var,
            value,
        });
        Ok(())
    }

    fn lower_loop(&mut self, entity: EntityId, out: &mut Vec<Stmt>) -> Result<(), Unlowerable> {
        let info = self
            .world
            .loops
            .get(entity)
            .ok_or_else(|| Unlowerable::new("a loop without bounds"))?
            .clone();
        if info.kind == LoopKind::Parallel {
            return self.parallel_loop(entity, out);
        }
        if info.kind == LoopKind::While {
            return self.while_loop(entity, out);
        }
        let (var, extent) = match (info.vars.as_slice(), info.extents.as_slice()) {
            ([var], [extent]) => (*var, *extent),
            _ => return Err(Unlowerable::new("a serial loop over several variables")),
        };
        if self.thread_dependence.index(self.world, extent) {
            return self.divergent_loop(entity, (var, extent), info.kind, out);
        }
        if let LoopKind::Pipelined { num_stages } = info.kind
            && num_stages >= 2
            && !self.hand_synchronized
            && !groups::holds_grid_barrier(self.world, entity)
            && self
                .pipelined_loop(entity, (var, extent), num_stages, out)?
                .is_some()
        {
            return Ok(());
        }
        if let LoopKind::Pipelined { num_stages: 1 } = info.kind
            && !self.hand_synchronized
            && !groups::holds_grid_barrier(self.world, entity)
            && self
                .single_stage_loop(entity, (var, extent), out)?
                .is_some()
        {
            return Ok(());
        }
        self.sync.begin_loop();
        let mut body = Vec::new();
        for child in self.world.body(entity).to_vec() {
            self.statement(child, &mut body)?;
        }
        let may_run_zero_times = self.world.exprs.as_int(extent).is_none_or(|n| n < 1);
        self.sync.end_loop(&mut body, may_run_zero_times);
        out.push(Stmt::For {
            var,
            extent,
            unroll: info.kind == LoopKind::Unroll,
            body,
        });
        Ok(())
    }

    /// A serial loop whose extent depends on the thread index (a grid-stride loop,
    /// `T.serial(thread_idx, n, num_threads)`): each thread runs its own iterations, so no
    /// barrier may be inside it. The block barrier insertion sees the whole loop as one operation
    /// of the block, as it sees a thread group's `if`; its body is lowered from nothing pending,
    /// and a body that still needs a barrier (threads exchanging data through shared memory
    /// within it, an explicit `T.sync_threads()`) is not lowered.
    fn divergent_loop(
        &mut self,
        entity: EntityId,
        (var, extent): (VarId, ExprId),
        kind: LoopKind,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let accesses = self.entity_shared_accesses(entity);
        self.sync.before(&accesses, out);
        let fresh = self.sync.for_group();
        let outer = std::mem::replace(&mut self.sync, fresh);
        let mut body = Vec::new();
        let lowered = self
            .world
            .body(entity)
            .to_vec()
            .into_iter()
            .try_for_each(|child| self.statement(child, &mut body));
        self.sync = outer;
        lowered?;
        let mut barrier = false;
        tilec_ir::thread::for_each_stmt(&body, &mut |stmt| {
            barrier |= matches!(stmt, Stmt::Barrier | Stmt::NamedBarrier { .. });
        });
        if barrier {
            return Err(Unlowerable::new(
                "a loop whose extent depends on the thread index needs a barrier inside it \
                 (threads would reach it different numbers of times)",
            ));
        }
        self.sync.after(&accesses);
        out.push(Stmt::For {
            var,
            extent,
            unroll: kind == LoopKind::Unroll,
            body,
        });
        Ok(())
    }

    /// A `while` on a run-time condition the whole block shares (a persistent kernel's work
    /// counter, Stream-K's iteration range): every thread leaves it after the same iteration, so
    /// the barriers inside are reached by all. The condition is read again before every
    /// iteration; one reading shared memory would need a barrier there, which is not planned.
    fn while_loop(&mut self, entity: EntityId, out: &mut Vec<Stmt>) -> Result<(), Unlowerable> {
        let cond = *self
            .world
            .conditions
            .get(entity)
            .ok_or_else(|| Unlowerable::new("a `while` without a condition"))?;
        if self.thread_dependence.data(self.world, cond) {
            return Err(Unlowerable::new(
                "a `while` whose condition differs between threads (they would reach the \
                 barriers inside it different numbers of times)",
            ));
        }
        let mut loads = Vec::new();
        self.world.data.loads(cond, &mut loads);
        let reads_shared = loads
            .iter()
            .any(|(buffer, _)| self.world.scopes.get(*buffer) == Some(&Scope::Shared));
        if reads_shared {
            return Err(Unlowerable::new(
                "a `while` whose condition reads shared memory (each iteration would need a \
                 barrier before it reads the condition)",
            ));
        }
        let cond = self.value_as(cond, DType::Bool)?;
        self.sync.begin_loop();
        let mut body = Vec::new();
        for child in self.world.body(entity).to_vec() {
            self.statement(child, &mut body)?;
        }
        self.sync.end_loop(&mut body, true);
        out.push(Stmt::While { cond, body });
        Ok(())
    }

    /// A runtime `if`; inside a laid-out loop (`inside`) its branches hold per-iteration statements.
    fn lower_if(
        &mut self,
        entity: EntityId,
        out: &mut Vec<Stmt>,
        inside: bool,
    ) -> Result<(), Unlowerable> {
        let condition = *self
            .world
            .conditions
            .get(entity)
            .ok_or_else(|| Unlowerable::new("an `if` without a condition"))?;
        let cond = self.value_as(condition, DType::Bool)?;
        let then_body = self.world.body(entity).to_vec();
        let else_body = self
            .world
            .else_bodies
            .get(entity)
            .cloned()
            .unwrap_or_default();
        let groups = match inside {
            true => (None, None),
            false => (self.branch_group(&then_body), self.branch_group(&else_body)),
        };
        // Threads differ on the condition, and no thread group takes a branch (`if tx == 0:`):
        // no block barrier may go inside.
        let divergent =
            !inside && groups == (None, None) && self.thread_dependence.data(self.world, condition);
        let role_run = match (groups, else_body.is_empty()) {
            ((Some(group), None), true) => self.concurrent_role(entity, group, out),
            _ => false,
        };
        if groups.0.is_some() || groups.1.is_some() || divergent {
            // The branches run on fewer threads than the statements around them: the block
            // barrier insertion sees the whole `if` as one operation of the block. A warp role
            // that runs beside the ones before it gets no barrier in between, which would hold
            // it until they have finished (see `concurrent_role`).
            let accesses = self.entity_shared_accesses(entity);
            if !role_run {
                self.sync.before(&accesses, out);
            }
            self.sync.after(&accesses);
        }
        if divergent {
            return self.divergent_if(cond, (&then_body, &else_body), out);
        }
        let mut then = Vec::new();
        let mut otherwise = Vec::new();
        // Each arm is placed from what was pending before the `if`: a barrier in one arm does
        // not separate the other arm (or no arm at all) from what came before.
        let before = self.sync.pending();
        self.branch(&then_body, groups.0, &mut then, inside)?;
        let after_then = self.sync.pending();
        self.sync.branch_from(&before);
        self.branch(&else_body, groups.1, &mut otherwise, inside)?;
        self.sync.join(&after_then);
        if let (Some(group), true) = (groups.0, else_body.is_empty()) {
            self.group_ifs.push((cond, group));
            if self.follows_protocol(entity) {
                self.protocol_ifs.push(cond);
            }
        }
        out.push(Stmt::If {
            cond,
            then,
            otherwise,
        });
        Ok(())
    }

    /// Whether the group `if` `entity`, for `group`, is a warp role that runs beside the roles
    /// just before it in `out`: those are group `if`s of groups disjoint from it (which
    /// `groups::chain_group_ifs` makes one `if` chain), and it or one of them follows the user's
    /// barrier protocol (mbarriers, named barriers, a barrier across roles). Such roles hand
    /// data to each other through that protocol: TileLang places no `__syncthreads()` between
    /// them (their shared accesses are disjoint, `Os[0]` and `Os[1]`), and one there would
    /// deadlock a role waiting on a barrier the next completes.
    fn concurrent_role(&self, entity: EntityId, group: ThreadGroup, out: &[Stmt]) -> bool {
        let mut before = Vec::new();
        for stmt in out.iter().rev() {
            let Stmt::If {
                cond, otherwise, ..
            } = stmt
            else {
                break;
            };
            match self.group_ifs.iter().find(|(c, _)| c == cond) {
                Some(&(_, other)) if otherwise.is_empty() => before.push((*cond, other)),
                _ => break,
            }
        }
        !before.is_empty()
            && before
                .iter()
                .all(|&(_, other)| groups::disjoint(other, group))
            && (self.follows_protocol(entity)
                || before
                    .iter()
                    .any(|(cond, _)| self.protocol_ifs.contains(cond)))
    }

    /// Whether `entity`'s statements wait on or arrive at the user's barriers: mbarriers, named
    /// barriers, or a `T.sync_threads()` that several roles reach (a role's own one is not a
    /// protocol between roles).
    fn follows_protocol(&self, entity: EntityId) -> bool {
        crate::liveness::linearize(self.world, entity)
            .into_iter()
            .any(|e| match self.world.ops.get(e) {
                Some(TileOp::Control(ControlOp::SyncThreads { named: None })) => {
                    self.block_barrier_across_roles()
                }
                Some(TileOp::Control(
                    ControlOp::BarrierWait { .. }
                    | ControlOp::BarrierArrive { .. }
                    | ControlOp::SyncThreads { named: Some(_) }
                    | ControlOp::NamedBarrierArrive(_),
                )) => true,
                _ => false,
            })
    }

    /// An `if` whose branches run on the threads its condition selects, none of them a thread
    /// group: each branch is lowered from nothing pending and with no barrier placed inside it
    /// (the one before the `if` orders it against the block, and what it leaves is pending after
    /// it). Accesses within a branch are the selected threads' own, as TileLang orders them.
    fn divergent_if(
        &mut self,
        cond: ValueId,
        (then_body, else_body): (&[EntityId], &[EntityId]),
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let fresh = self.sync.for_divergent_branch();
        let outer = std::mem::replace(&mut self.sync, fresh);
        let mut then = Vec::new();
        let mut otherwise = Vec::new();
        let lowered = self
            .branch(then_body, None, &mut then, false)
            .and_then(|()| {
                self.sync = self.sync.for_divergent_branch();
                self.branch(else_body, None, &mut otherwise, false)
            });
        self.sync = outer;
        lowered?;
        out.push(Stmt::If {
            cond,
            then,
            otherwise,
        });
        Ok(())
    }

    fn branch(
        &mut self,
        body: &[EntityId],
        group: Option<ThreadGroup>,
        out: &mut Vec<Stmt>,
        inside: bool,
    ) -> Result<(), Unlowerable> {
        if let Some(group) = group {
            return self.lower_group(group, body, out);
        }
        for &child in body {
            self.nested(child, out, inside)?;
        }
        Ok(())
    }

    fn nested(
        &mut self,
        entity: EntityId,
        out: &mut Vec<Stmt>,
        inside: bool,
    ) -> Result<(), Unlowerable> {
        if inside {
            self.iteration_statement(entity, out)
        } else {
            self.statement(entity, out)
        }
    }

    /// A store outside any parallel loop: every thread computes it; for shared and global memory
    /// thread 0 alone writes, so that the element has one writer.
    fn top_level_store(
        &mut self,
        entity: EntityId,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let mut stmts = Vec::new();
        self.store(entity, &mut stmts)?;
        let store = self.world.stores.get(entity).map(|s| s.buffer);
        let on_chip_private = store.is_some_and(|b| self.is_private(b));
        let accesses = self.entity_shared_accesses(entity);
        self.sync.before(&accesses, out);
        // A store that differs between threads (`A[tx] = ...`) is per-thread code: each thread
        // makes its own, as written.
        if on_chip_private || self.thread_dependence.statement(self.world, entity) {
            out.extend(stmts);
        } else {
            let first = self.thread_is(0);
            out.push(Stmt::If {
                cond: first,
                then: stmts,
                otherwise: Vec::new(),
            });
        }
        // Other threads read what it wrote (thread 0's store of a value all read), or write
        // what it read: the next operation that meets it waits at a barrier.
        self.sync.after(&accesses);
        Ok(())
    }

    /// `thread == value` as a condition.
    fn thread_is(&mut self, value: i64) -> ValueId {
        let t = self.program.exprs.var_expr(self.program.thread);
        let v = self.program.exprs.int(value);
        self.compare_indices(CompareOp::Eq, t, v)
    }

    pub(super) fn compare_indices(&mut self, op: CompareOp, lhs: ExprId, rhs: ExprId) -> ValueId {
        let lhs = self.program.add_value(Value::Index(lhs));
        let rhs = self.program.add_value(Value::Index(rhs));
        self.program.add_value(Value::Compare { op, lhs, rhs })
    }

    pub(super) fn and(&mut self, lhs: Option<ValueId>, rhs: ValueId) -> ValueId {
        match lhs {
            None => rhs,
            Some(lhs) => self.program.add_value(Value::Binary {
                op: tilec_ir::data::BinaryOp::And,
                lhs,
                rhs,
                dtype: DType::Bool,
            }),
        }
    }

    /// A `T.Parallel` loop: each thread runs the iterations its loop layout gives it.
    fn parallel_loop(&mut self, entity: EntityId, out: &mut Vec<Stmt>) -> Result<(), Unlowerable> {
        let accesses = self.entity_shared_accesses(entity);
        self.sync.before(&accesses, out);
        let block = self.laid_out_loop(entity)?;
        out.push(block);
        self.sync.after(&accesses);
        Ok(())
    }

    /// A `T.Parallel` loop's statements, without the barriers around it (a pipeline places those
    /// of the loops it issues ahead itself).
    pub(super) fn laid_out_loop(&mut self, entity: EntityId) -> Result<Stmt, Unlowerable> {
        let layout = match self.layouts.loops.get(&entity) {
            Some((inferred, _)) => inferred.layout.clone(),
            None => {
                let info = self
                    .world
                    .loops
                    .get(entity)
                    .cloned()
                    .ok_or_else(|| Unlowerable::new("a loop without bounds"))?;
                self.planned_layout(&info.vars, &info.extents, 1)?
            }
        };
        let label = format!("T.Parallel({})", shape_text(&layout.shape));
        let body = self.world.body(entity).to_vec();
        // A replicated loop that writes only shared or global memory needs one replica: the
        // others would only read what replica 0 is writing (a race on the GPU, and work thrown
        // away), so the whole iteration, not each store, is replica 0's.
        let first_replica_only = layout.replicate > 1 && !self.writes_private(entity);
        let stmts = self.run_laid_out(&layout, |lowering, stmts| {
            if !first_replica_only {
                for &child in &body {
                    lowering.iteration_statement(child, stmts)?;
                }
                return Ok(());
            }
            let saved = lowering.replica.take();
            let mut iteration = Vec::new();
            let lowered = body
                .iter()
                .try_for_each(|&child| lowering.iteration_statement(child, &mut iteration));
            lowering.replica = saved;
            lowered?;
            let rep = lowering.program.exprs.var_expr(layout.rep);
            let zero = lowering.program.exprs.int(0);
            let first = lowering.compare_indices(CompareOp::Eq, rep, zero);
            stmts.push(Stmt::If {
                cond: first,
                then: iteration,
                otherwise: Vec::new(),
            });
            Ok(())
        })?;
        Ok(Stmt::Block {
            origin: Some(entity),
            label,
            body: stmts,
        })
    }

    /// Whether `entity` or a statement inside it writes a register buffer (a fragment, a local
    /// buffer or a `T.alloc_var`) declared outside it, which every replica of a replicated loop
    /// must write for itself. One declared inside lives and dies with the iteration.
    fn writes_private(&self, entity: EntityId) -> bool {
        std::iter::once(entity)
            .chain(crate::liveness::linearize(self.world, entity))
            .flat_map(|inside| self.world.accesses.get(inside).into_iter().flatten())
            .any(|access| {
                let buffer = access.region.buffer;
                access.kind != tilec_ir::AccessKind::Read
                    && self.is_private(buffer)
                    && !self
                        .world
                        .ancestors(buffer)
                        .any(|ancestor| ancestor == entity)
            })
    }

    /// A plan for a loop inference did not lay out (it touches no fragment).
    fn planned_layout(
        &mut self,
        vars: &[VarId],
        extents: &[ExprId],
        vector: i64,
    ) -> Result<FragmentLayout, Unlowerable> {
        let shape: Vec<i64> = extents
            .iter()
            .map(|&e| self.program.exprs.as_int(e))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                Unlowerable::new("a parallel loop with extents unknown at compile time")
            })?;
        let mut layout =
            FragmentLayout::plan(&mut self.program.exprs, &shape, self.threads, vector);
        rename_vars(&mut self.program.exprs, &mut layout, vars);
        Ok(layout)
    }

    /// Runs `body` (which emits the statements of one iteration over `layout.vars`) on the
    /// iterations each thread owns under `layout`.
    fn run_laid_out(
        &mut self,
        layout: &FragmentLayout,
        body: impl FnOnce(&mut Self, &mut Vec<Stmt>) -> Result<(), Unlowerable>,
    ) -> Result<Vec<Stmt>, Unlowerable> {
        let schedule = iteration::schedule(
            &mut self.program.exprs,
            layout,
            self.threads,
            self.program.thread,
        );
        let saved = self.replica;
        self.replica = (layout.replicate > 1).then_some(layout.rep);
        let mut inner = Vec::new();
        let result = body(self, &mut inner);
        self.replica = saved;
        result?;
        Ok(match schedule {
            Iteration::Closed {
                step,
                threads,
                steps,
                coords,
                rep,
                bound,
            } => self.closed_loop(layout, step, [threads, steps], coords, rep, bound, inner),
            Iteration::Scan => self.scan_loop(layout, inner),
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn closed_loop(
        &mut self,
        layout: &FragmentLayout,
        step: VarId,
        [threads, steps]: [i64; 2],
        coords: Vec<ExprId>,
        rep: ExprId,
        bound: Option<(ExprId, i64)>,
        inner: Vec<Stmt>,
    ) -> Vec<Stmt> {
        // The coordinates are substituted rather than bound, so that register indices and
        // global addresses are seen as functions of the step (see `rewrite`).
        let mut bindings: Vec<(VarId, ExprId)> = layout.vars.iter().copied().zip(coords).collect();
        if layout.replicate > 1 {
            bindings.push((layout.rep, rep));
        }
        let lookup = |v: VarId| bindings.iter().find(|(var, _)| *var == v).map(|(_, e)| *e);
        let inner = rewrite::substitute_stmts(&mut self.program, &inner, &lookup);
        let looped = match bound {
            Some((flat, limit)) => {
                let limit = self.program.exprs.int(limit);
                let cond = self.compare_indices(CompareOp::Lt, flat, limit);
                let body = vec![Stmt::If {
                    cond,
                    then: inner,
                    otherwise: Vec::new(),
                }];
                step_loop(&mut self.program.exprs, step, steps, body)
            }
            None => match vectorize::vectorize(&mut self.program, step, steps, &inner) {
                Some(vectorized) => step_loop(
                    &mut self.program.exprs,
                    vectorized.chunk,
                    vectorized.chunks,
                    vectorized.body,
                ),
                None => step_loop(&mut self.program.exprs, step, steps, inner),
            },
        };
        if threads >= self.threads {
            return looped;
        }
        let t = self.program.exprs.var_expr(self.program.thread);
        let limit = self.program.exprs.int(threads);
        let cond = self.compare_indices(CompareOp::Lt, t, limit);
        vec![Stmt::If {
            cond,
            then: looped,
            otherwise: Vec::new(),
        }]
    }

    /// Every thread walks the whole iteration space and runs what the layout gives it.
    fn scan_loop(&mut self, layout: &FragmentLayout, inner: Vec<Stmt>) -> Vec<Stmt> {
        let t = self.program.exprs.var_expr(self.program.thread);
        let mine = self.compare_indices(CompareOp::Eq, layout.thread, t);
        let mut body = vec![Stmt::If {
            cond: mine,
            then: inner,
            otherwise: Vec::new(),
        }];
        let rep_extent = self.program.exprs.int(layout.replicate);
        body = vec![Stmt::For {
            var: layout.rep,
            extent: rep_extent,
            unroll: false,
            body,
        }];
        for (&var, &extent) in layout.vars.iter().zip(&layout.shape).rev() {
            let extent = self.program.exprs.int(extent);
            body = vec![Stmt::For {
                var,
                extent,
                unroll: false,
                body,
            }];
        }
        body
    }

    /// One statement of a parallel loop's body, for one iteration.
    fn iteration_statement(
        &mut self,
        entity: EntityId,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        match self.world.kind(entity) {
            Some(EntityKind::Store) => self.store(entity, out),
            Some(EntityKind::If) => self.lower_if(entity, out, true),
            Some(EntityKind::Loop) => {
                let info = self
                    .world
                    .loops
                    .get(entity)
                    .cloned()
                    .ok_or_else(|| Unlowerable::new("a loop without bounds"))?;
                let mut body = Vec::new();
                for child in self.world.body(entity).to_vec() {
                    self.iteration_statement(child, &mut body)?;
                }
                // Nested loops run inside one iteration; several variables nest row-major.
                for (&var, &extent) in info.vars.iter().zip(&info.extents).rev() {
                    body = vec![Stmt::For {
                        var,
                        extent,
                        unroll: info.kind == LoopKind::Unroll,
                        body,
                    }];
                }
                out.extend(body);
                Ok(())
            }
            Some(EntityKind::TileOp) => match self.world.ops.get(entity) {
                Some(TileOp::Atomic { op, dst, src, prev }) => {
                    self.element_atomic((*op, dst.clone()), (src.clone(), *prev), out)
                }
                // An assertion is checked for each iteration, by the thread that runs it.
                Some(TileOp::Control(control @ ControlOp::DeviceAssert { .. })) => {
                    let control = control.clone();
                    let mut stmts = Vec::new();
                    self.control(&control, &mut stmts)?;
                    out.push(Stmt::Block {
                        origin: Some(entity),
                        label: "T.device_assert".to_owned(),
                        body: stmts,
                    });
                    Ok(())
                }
                Some(op) => Err(Unlowerable::new(format!(
                    "`T.{}` inside a parallel loop",
                    op.name()
                ))),
                None => Ok(()),
            },
            Some(EntityKind::Bind) => self.bind(entity, out),
            Some(EntityKind::Param | EntityKind::Kernel | EntityKind::Buffer | EntityKind::Var)
            | None => Ok(()),
        }
    }

    /// `buffer[indices] = value`, with bounds guards on global accesses the compiler cannot prove
    /// in range and a replica guard on shared and global stores of replicated loops.
    fn store(&mut self, entity: EntityId, out: &mut Vec<Stmt>) -> Result<(), Unlowerable> {
        let store = self
            .world
            .stores
            .get(entity)
            .ok_or_else(|| Unlowerable::new("a store without a target"))?
            .clone();
        let dtype = self.element_dtype(store.buffer);
        let value = self.value_as(store.value, dtype)?;
        let (buffer, index) = if self.world.kind(store.buffer) == Some(EntityKind::Var) {
            (self.buffer_of(store.buffer)?, self.program.exprs.int(0))
        } else {
            self.address(store.buffer, &store.indices)?
        };
        // Only the store's own indices guard it: a load in its value that may leave its buffer
        // reads zero there (`Lowering::load`), so the store still runs, as in TileLang.
        let guard = self.bounds_guard(store.buffer, &store.indices, None);
        let guard = self.replica_guard(store.buffer, guard);
        out.push(guarded(
            guard,
            Stmt::Store {
                place: Place { buffer, index },
                value,
            },
        ));
        Ok(())
    }

    /// Adds to `guard` the conditions that keep `buffer[indices]` inside a global buffer, for the
    /// indices whose range the compiler cannot prove.
    pub(super) fn bounds_guard(
        &mut self,
        buffer: EntityId,
        indices: &[ExprId],
        mut guard: Option<ValueId>,
    ) -> Option<ValueId> {
        for (op, lhs, rhs) in self.bounds_conditions(buffer, indices) {
            let cond = self.compare_indices(op, lhs, rhs);
            guard = Some(self.and(guard, cond));
        }
        guard
    }

    /// The comparisons that keep `buffer[indices]` inside a global buffer, for the indices whose
    /// range the compiler cannot prove: `(op, index, bound)` for `index >= 0` and `index < extent`.
    pub(super) fn bounds_conditions(
        &mut self,
        buffer: EntityId,
        indices: &[ExprId],
    ) -> Vec<(CompareOp, ExprId, ExprId)> {
        let mut conditions = Vec::new();
        if self.scope_of(buffer) != Some(Scope::Global) {
            return conditions;
        }
        let shape = self.world.shapes.get(buffer).cloned().unwrap_or_default();
        for (&index, &extent) in indices.iter().zip(&shape) {
            let bounds = self.program.exprs.bounds(index);
            let limit = self.program.exprs.as_int(extent);
            let (low_ok, high_ok) = match (bounds, limit) {
                (Some((low, high)), Some(limit)) => (low >= 0, high < limit),
                (Some((low, _)), None) => (low >= 0, false),
                _ => (false, false),
            };
            if !low_ok {
                let zero = self.program.exprs.int(0);
                conditions.push((CompareOp::Ge, index, zero));
            }
            if !high_ok {
                conditions.push((CompareOp::Lt, index, extent));
            }
        }
        conditions
    }

    /// The shared buffers an entity (and everything nested in it) reads and writes.
    fn entity_shared_accesses(&self, entity: EntityId) -> sync::Accesses {
        let mut accesses = sync::Accesses::default();
        let mut stack = vec![entity];
        while let Some(current) = stack.pop() {
            let asynchronous = self.completes_on_barrier(current);
            let atomic_target = match self.world.ops.get(current) {
                Some(TileOp::Atomic { dst, .. }) => Some(dst.buffer),
                _ => None,
            };
            for access in self.world.accesses.get(current).into_iter().flatten() {
                if asynchronous && access.kind == tilec_ir::AccessKind::Write {
                    continue;
                }
                if let Some(&id) = self.buffers.get(&access.region.buffer)
                    && self
                        .scope_of(access.region.buffer)
                        .is_some_and(Scope::is_shared)
                {
                    if atomic_target == Some(access.region.buffer)
                        && access.kind != tilec_ir::AccessKind::Read
                    {
                        accesses.add_atomic(id);
                    } else {
                        accesses.add(id, access.kind);
                    }
                }
            }
            if let Some(&cond) = self.world.conditions.get(current) {
                let mut loads = Vec::new();
                self.world.data.loads(cond, &mut loads);
                for (buffer, _) in loads {
                    if let Some(&id) = self.buffers.get(&buffer)
                        && self.scope_of(buffer).is_some_and(Scope::is_shared)
                    {
                        accesses.add(id, tilec_ir::AccessKind::Read);
                    }
                }
            }
            stack.extend(self.world.body(current).iter().copied());
            stack.extend(
                self.world
                    .else_bodies
                    .get(current)
                    .into_iter()
                    .flatten()
                    .copied(),
            );
        }
        accesses
    }
}

/// `for var in 0..steps { body }` as a one-statement list, unrolled when short.
fn step_loop(arena: &mut ExprArena, var: VarId, steps: i64, body: Vec<Stmt>) -> Vec<Stmt> {
    let extent = arena.int(steps);
    vec![Stmt::For {
        var,
        extent,
        unroll: steps <= 64,
        body,
    }]
}

/// `stmt` under `guard`, when there is one.
pub(crate) fn guarded(guard: Option<ValueId>, stmt: Stmt) -> Stmt {
    match guard {
        Some(cond) => Stmt::If {
            cond,
            then: vec![stmt],
            otherwise: Vec::new(),
        },
        None => stmt,
    }
}

/// Renames a freshly made layout's variables to `vars` (the loop's own).
pub(crate) fn rename_vars(arena: &mut ExprArena, layout: &mut FragmentLayout, vars: &[VarId]) {
    let mapping: Vec<(VarId, ExprId)> = layout
        .vars
        .iter()
        .zip(vars)
        .map(|(&fresh, &own)| (fresh, arena.var_expr(own)))
        .collect();
    let lookup = |var: VarId| {
        mapping
            .iter()
            .find(|(fresh, _)| *fresh == var)
            .map(|(_, own)| *own)
    };
    layout.thread = arena.substitute(layout.thread, &lookup);
    layout.index = layout
        .index
        .iter()
        .map(|&e| arena.substitute(e, &lookup))
        .collect();
    layout.vars = vars.to_vec();
}

fn shape_text(shape: &[i64]) -> String {
    shape
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
