//! Layout inference: a fragment layout for every fragment buffer and a loop layout for every
//! parallel loop, in TileLang's three levels — strict (annotations, gemm accumulators, scalars read
//! at a constant index), common (propagation through accesses until nothing changes), free (for each
//! group of ops linked by fragments, plan each candidate loop in turn and keep the plan with the
//! fewest registers). Every fact is decided by enumerating the tile's domain.

use std::collections::BTreeMap;

use tilec_ir::{
    Access, AccessKind, Anchor, Cancellation, Code, DType, Diagnostic, EntityId, EntityKind,
    ExprArena, ExprId, LoopKind, Scope, TileOp, VarId, World,
};

use super::fragment::{FragmentLayout, fresh_vars};
use super::tensor_core::{
    GemmInstruction, GemmShape, gemm_accumulator_layout, select_gemm_instruction,
};
use crate::options::CodegenOptions;
use crate::regions::resolve_extents;
use crate::thread_groups::ThreadGroups;

/// The most candidate roots free mode tries per group of linked ops. TileLang tries every member
/// of a group, and so does tilec for any kernel a person writes: the root that wins is often the
/// last op of a group (a copy of an 8-bit fragment out to memory, whose wide vectors give every
/// row statistic fewer replicas). The cap only bounds the time on machine-generated kernels with
/// hundreds of linked loops, where each trial is a full propagation.
const MAX_ROOTS: usize = 64;

/// What one conflict adds to a free-mode trial's cost: more than any plan's registers.
const CONFLICT_COST: u64 = 1_000_000;

/// How a layout came to be.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// `T.annotate_layout`.
    Annotation,
    /// The tensor-core accumulator layout a `T.gemm` requires.
    Gemm,
    /// The tensor-core register layout a `T.gemm` reads its A operand in, when A is a fragment.
    GemmOperand,
    /// Read at a constant index inside a parallel loop: every thread needs the element.
    Broadcast,
    /// Read outside every parallel loop (an `if` on `mask[k]` in a serial loop, a run-time
    /// scalar, a store's value): every thread runs the statement and needs every element.
    ReadByEveryThread,
    /// Planned freely: consecutive chunks of `vector` elements to consecutive threads.
    Plan { vector: i64 },
    /// Derived from another layout through an access of this op.
    Propagated { from: EntityId },
    /// The destination of a reduction: the source's layout with the reduced dimension folded into
    /// replication.
    Reduce { from: EntityId },
}

/// A layout with its provenance: the op that established it, and the access it propagated through.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Inferred {
    pub layout: FragmentLayout,
    pub origin: Origin,
    /// The op (tile op, loop or annotation) where this layout was decided.
    pub op: EntityId,
}

/// The layouts of one instance: per fragment buffer and per parallel loop (or fragment copy).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layouts {
    /// The world's arena extended with the layouts' variables and formulas.
    pub exprs: ExprArena,
    pub buffers: BTreeMap<EntityId, Inferred>,
    pub loops: BTreeMap<EntityId, (Inferred, i64)>,
    /// The storage layout of every shared buffer with a constant shape.
    pub shared: BTreeMap<EntityId, super::shared_infer::SharedAssigned>,
    /// The instruction each `T.gemm` with a fragment accumulator runs on; its accumulator layout
    /// is that instruction's.
    pub gemms: BTreeMap<EntityId, GemmInstruction>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Layouts {
    /// These layouts with the shared buffers padded for a fragment exchange stored row-major
    /// instead, or `None` when there is none (see `shared_infer::without_exchange_padding`).
    pub fn without_exchange_padding(&self, world: &World) -> Option<Layouts> {
        let mut layouts = self.clone();
        layouts.shared =
            super::shared_infer::without_exchange_padding(world, &mut layouts.exprs, &self.shared)?;
        Some(layouts)
    }

    /// The bytes of one stage of `buffer`'s shared storage as its layout addresses it (a padded
    /// layout stores more than the tile's elements), if it has a layout.
    pub fn shared_storage_bytes(&self, world: &World, buffer: EntityId) -> Option<u64> {
        let elements = u64::try_from(self.shared.get(&buffer)?.storage_elements).ok()?;
        Some(world.dtypes.get(buffer)?.storage_bytes(elements))
    }
}

/// How lowering runs a laid-out loop on the threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoopPlan {
    /// Every thread `0..threads` runs exactly `per_thread` iterations, one per local index: the
    /// layout fills the (thread, local) box, so each thread walks its local indices and maps each
    /// back to an iteration.
    Dense { threads: i64, per_thread: i64 },
    /// The layout leaves holes in the (thread, local) box (a sparse thread map such as
    /// `thread = i * 16 + j` over a 4-iteration loop): each thread runs the iterations whose
    /// thread formula names it, checking the formula as a guard, instead of inverting it. Only the
    /// `active` threads have work; each has at most `per_thread` iterations.
    Guarded { active: Vec<i64>, per_thread: i64 },
}

/// One op that layout inference reasons about: a parallel loop (or a copy, seen as one) with the
/// buffer accesses of its body, or a reduction.
#[derive(Clone, Debug)]
enum Op {
    Loop {
        entity: EntityId,
        vars: Vec<VarId>,
        shape: Vec<i64>,
        serial: Vec<(VarId, i64)>,
        accesses: Vec<LoopAccess>,
    },
    Reduce {
        entity: EntityId,
        src: EntityId,
        dst: EntityId,
        dim: usize,
    },
}

#[derive(Clone, Debug)]
pub(crate) struct LoopAccess {
    pub buffer: EntityId,
    pub indices: Vec<ExprId>,
    pub write: bool,
    /// The statement that makes the access (for diagnostics).
    pub statement: EntityId,
}

impl Op {
    fn entity(&self) -> EntityId {
        match self {
            Op::Loop { entity, .. } | Op::Reduce { entity, .. } => *entity,
        }
    }

    fn fragments(&self, world: &World) -> Vec<EntityId> {
        match self {
            Op::Loop { accesses, .. } => {
                let mut found: Vec<EntityId> = accesses
                    .iter()
                    .map(|a| a.buffer)
                    .filter(|&b| is_fragment(world, b))
                    .collect();
                found.dedup();
                found
            }
            Op::Reduce { src, dst, .. } => vec![*src, *dst],
        }
    }
}

pub(super) fn is_fragment(world: &World, buffer: EntityId) -> bool {
    world.scopes.get(buffer) == Some(&Scope::Fragment)
}

/// The state inference works on; free mode clones it to try each candidate root.
#[derive(Clone, Debug)]
struct State<'c> {
    exprs: ExprArena,
    buffers: BTreeMap<EntityId, Inferred>,
    loops: BTreeMap<EntityId, (Inferred, i64)>,
    conflicts: Vec<Diagnostic>,
    failed: Vec<EntityId>,
    /// (op, buffer) derivations that found no layout: their inputs are fixed once set, so they are
    /// not retried on every pass.
    dead_ends: Vec<(EntityId, EntityId)>,
    /// Reduce layouts derived so far, by (source layout, reduced dimension, whether the destination
    /// keeps that dimension with extent 1).
    reductions: Vec<((FragmentLayout, usize, bool), Option<FragmentLayout>)>,
    /// Asked between steps, so that an edit never waits for the inference of the text it
    /// replaced (a fragment of a million elements takes a good part of a second).
    cancellation: Cancellation<'c>,
}

/// Infers the layouts of every fragment and parallel loop of `world` for the architecture and
/// pass configs of `options`, asking `cancellation` between steps.
pub fn infer_layouts(
    world: &World,
    options: CodegenOptions,
    cancellation: Cancellation<'_>,
) -> Layouts {
    // Inference enumerates every element of a fragment. One no block could hold has its
    // `register-pressure` error from the checks, which names the limit; it gets no layouts.
    let oversized = crate::check::oversized_register_buffers(world)
        .next()
        .is_some()
        || crate::check::oversized_parallel_loops(world)
            .next()
            .is_some();
    if world.incomplete || oversized {
        return Layouts {
            exprs: world.exprs.clone(),
            ..Layouts::default()
        };
    }
    let mut scratch = world.clone();
    let ops = collect_ops(&mut scratch);
    let block = block_threads(world);
    let threads = Threads {
        block,
        groups: ThreadGroups::new(world),
    };
    let mut state = State {
        exprs: scratch.exprs.clone(),
        buffers: BTreeMap::new(),
        loops: BTreeMap::new(),
        conflicts: Vec::new(),
        failed: Vec::new(),
        dead_ends: Vec::new(),
        reductions: Vec::new(),
        cancellation,
    };
    let gemms = select_instructions(world, options, &threads);
    strict(&scratch, &ops, &threads, &gemms, &mut state);
    propagate(&scratch, &ops, &mut state);
    free(&scratch, &ops, &threads, &mut state);
    sync_aliases(&scratch, &mut state);
    validate_accesses(&scratch, &ops, &mut state);
    let mut diagnostics = std::mem::take(&mut state.conflicts);
    let views = ops_view(&scratch, &ops);
    diagnostics.extend(super::diagnose::races(&scratch, &views, &state.exprs));
    diagnostics.extend(super::diagnose::uneven_partitions(
        &views,
        &state.loops,
        &state.exprs,
        &|entity| threads.of(entity),
    ));
    let (shared, shared_diagnostics) =
        super::shared_infer::infer_shared(world, &mut state.exprs, options.tma_store);
    diagnostics.extend(shared_diagnostics);
    super::diagnose::blame_assumed_values(world, &mut diagnostics);
    Layouts {
        exprs: state.exprs,
        buffers: state.buffers,
        loops: state.loops,
        shared,
        gemms,
        diagnostics,
    }
}

/// The threads layouts are made for: the block's, or fewer for an op that a condition on the
/// thread index gives to some of them (`T.ws`); such an op's layouts number its threads from 0.
struct Threads {
    block: i64,
    groups: ThreadGroups,
}

impl Threads {
    fn of(&self, entity: EntityId) -> i64 {
        self.groups.threads_of(entity, self.block)
    }

    /// Whether the op's threads start on a warpgroup boundary (`wgmma` runs on whole
    /// warpgroups).
    fn warpgroup_aligned(&self, entity: EntityId) -> bool {
        self.groups
            .narrowed(entity)
            .is_none_or(|group| group.start % 128 == 0)
    }
}

/// The instruction of every `T.gemm` whose accumulator is a fragment of constant shape.
fn select_instructions(
    world: &World,
    options: CodegenOptions,
    threads: &Threads,
) -> BTreeMap<EntityId, GemmInstruction> {
    let mut chosen = BTreeMap::new();
    for (entity, op) in world.ops.iter() {
        let TileOp::Gemm {
            a,
            b,
            c,
            transpose_a,
            transpose_b,
            policy,
            ..
        } = op
        else {
            continue;
        };
        let (Some([a0, a1]), Some(c_shape)) = (
            super::tensor_core::operand_shape(world, a),
            world.const_shape(c.buffer),
        ) else {
            continue;
        };
        let &[m, n] = c_shape.as_slice() else {
            continue;
        };
        if !is_fragment(world, c.buffer) {
            continue;
        }
        let dtype = |buffer| world.dtypes.get(buffer).copied().unwrap_or(DType::Float32);
        let shape = GemmShape {
            m,
            n,
            k: if *transpose_a { a0 } else { a1 },
            threads: threads.of(entity),
            policy: *policy,
            dtypes: [dtype(a.buffer), dtype(b.buffer), dtype(c.buffer)],
            b_in_registers: is_fragment(world, b.buffer),
            transposed: [*transpose_a, *transpose_b],
        };
        let instruction = match select_gemm_instruction(options, &shape) {
            GemmInstruction::Wgmma if !threads.warpgroup_aligned(entity) => {
                GemmInstruction::MmaSync
            }
            instruction => instruction,
        };
        chosen.insert(entity, instruction);
    }
    chosen
}

/// Checks every fragment access of every laid-out loop against the fragment's layout, and reports
/// the first misplaced access of each loop as a conflict.
fn validate_accesses(world: &World, ops: &[Op], state: &mut State) {
    let mut owners: BTreeMap<EntityId, super::fragment::Owners> = BTreeMap::new();
    for op in ops {
        state.cancellation.check();
        let Op::Loop {
            entity,
            serial,
            accesses,
            ..
        } = op
        else {
            continue;
        };
        let Some((loop_layout, _)) = state.loops.get(entity).cloned() else {
            continue;
        };
        if state.failed.contains(entity) {
            continue;
        }
        for access in accesses {
            let Some(inferred) = state.buffers.get(&access.buffer).cloned() else {
                continue;
            };
            if super::validate::same_layout(
                &mut state.exprs,
                &loop_layout.layout,
                &inferred.layout,
                &access.indices,
            ) || reduced_in_loop_layout(ops, state, &loop_layout.layout, &inferred, access)
            {
                continue;
            }
            let table = owners
                .entry(access.buffer)
                .or_insert_with(|| inferred.layout.owners(&state.exprs));
            let loop_shape = super::validate::LoopShape {
                layout: &loop_layout.layout,
                serial,
            };
            let Some(misplaced) = super::validate::misplaced_access(
                &state.exprs,
                &loop_shape,
                &inferred.layout,
                table,
                &access.indices,
                access.write,
            ) else {
                continue;
            };
            let report = super::diagnose::MisplacedAccess {
                buffer: access.buffer,
                inferred: &inferred,
                statement: access.statement,
                loop_layout: &loop_layout,
                misplaced: &misplaced,
            };
            state.conflicts.push(report.diagnostic(world, &state.exprs));
            // One conflict per loop: the others usually share its cause.
            break;
        }
    }
}

/// Whether `inferred` is, as a function, the layout of a reduction's result (it may be a copy of
/// one, like `scores_scale` next to `scores_max`), accessed in a loop laid out like the reduction's
/// source (see [`super::validate::reduced_in_source_layout`]).
fn reduced_in_loop_layout(
    ops: &[Op],
    state: &mut State,
    loop_layout: &FragmentLayout,
    inferred: &Inferred,
    access: &LoopAccess,
) -> bool {
    for op in ops {
        let Op::Reduce { src, dst, dim, .. } = op else {
            continue;
        };
        let (Some(source), Some(result)) = (
            state.buffers.get(src).cloned(),
            state.buffers.get(dst).cloned(),
        ) else {
            continue;
        };
        let same = *dst == access.buffer
            || super::validate::same_function(&mut state.exprs, &result.layout, &inferred.layout);
        if same
            && super::validate::reduced_in_source_layout(
                &mut state.exprs,
                loop_layout,
                &access.indices,
                &source.layout,
                *dim,
            )
        {
            return true;
        }
    }
    false
}

/// The plan of every laid-out loop: what lowering needs, kept out of [`infer_layouts`] so that
/// the editor's path (diagnostics, hovers) does not pay for it. Loops laid out from the same tile
/// (every loop over `acc_s` in flash attention) share a thread function; the plan is enumerated
/// once per function.
pub fn plan_loops(layouts: &Layouts) -> BTreeMap<EntityId, LoopPlan> {
    let mut arena = layouts.exprs.clone();
    let mut known: Vec<(FragmentLayout, i64, LoopPlan)> = Vec::new();
    let mut plans = BTreeMap::new();
    for (&entity, (inferred, _)) in &layouts.loops {
        let layout = &inferred.layout;
        let local_size = layout.local_size(&arena);
        let reused = known.iter().find(|(seen, size, _)| {
            *size == local_size && super::validate::same_function(&mut arena, seen, layout)
        });
        let plan = match reused {
            Some((_, _, plan)) => plan.clone(),
            None => {
                let plan = loop_plan(&arena, layout, local_size);
                known.push((layout.clone(), local_size, plan.clone()));
                plan
            }
        };
        plans.insert(entity, plan);
    }
    plans
}

/// Dense when every thread up to the largest one used runs the same number of iterations, which
/// is the number of local indices; guarded otherwise.
fn loop_plan(arena: &ExprArena, layout: &FragmentLayout, local_size: i64) -> LoopPlan {
    let loads = layout.thread_histogram(arena);
    let threads = i64::try_from(loads.len()).unwrap_or(i64::MAX);
    let per_thread = i64::try_from(loads.iter().copied().max().unwrap_or(0)).unwrap_or(i64::MAX);
    if loads
        .iter()
        .all(|&load| i64::try_from(load) == Ok(per_thread))
        && per_thread == local_size
    {
        return LoopPlan::Dense {
            threads,
            per_thread,
        };
    }
    let active = (0..threads)
        .zip(&loads)
        .filter(|(_, load)| **load > 0)
        .map(|(thread, _)| thread)
        .collect();
    LoopPlan::Guarded { active, per_thread }
}

/// The threads of the (first) launch: layouts are made for that block size.
fn block_threads(world: &World) -> i64 {
    world
        .launches
        .iter()
        .next()
        .map_or(128, |(_, launch)| launch.thread_count())
}

/// A read-only view of the loop ops for the diagnostics module.
pub(super) struct LoopView<'a> {
    /// The loop (or the copy seen as one).
    pub entity: EntityId,
    /// Whether any access of the loop is to a fragment.
    pub touches_fragment: bool,
    pub vars: &'a [VarId],
    pub shape: &'a [i64],
    pub writes: Vec<(EntityId, &'a [ExprId], EntityId)>,
}

fn ops_view<'a>(world: &World, ops: &'a [Op]) -> Vec<LoopView<'a>> {
    ops.iter()
        .filter_map(|op| match op {
            Op::Loop {
                entity,
                vars,
                shape,
                accesses,
                ..
            } => Some(LoopView {
                entity: *entity,
                touches_fragment: accesses.iter().any(|a| is_fragment(world, a.buffer)),
                vars,
                shape,
                writes: accesses
                    .iter()
                    .filter(|a| a.write)
                    .map(|a| (a.buffer, a.indices.as_slice(), a.statement))
                    .collect(),
            }),
            Op::Reduce { .. } => None,
        })
        .collect()
}

// ----- collecting ops --------------------------------------------------------------------------

fn collect_ops(world: &mut World) -> Vec<Op> {
    let mut ops = collect_raw_ops(world);
    resolve_alias_accesses(world, &mut ops);
    ops
}

/// Element accesses through a `T.reshape` / `T.view` alias become accesses of the buffer that
/// stores the elements, so a loop over the alias and a loop over its base agree on one layout.
fn resolve_alias_accesses(world: &mut World, ops: &mut [Op]) {
    let mut arena = std::mem::take(&mut world.exprs);
    for op in ops.iter_mut() {
        if let Op::Loop { accesses, .. } = op {
            for access in accesses.iter_mut() {
                let (buffer, indices) =
                    world.resolve_alias(&mut arena, access.buffer, &access.indices);
                access.buffer = buffer;
                access.indices = indices;
            }
        }
    }
    world.exprs = arena;
}

fn collect_raw_ops(world: &mut World) -> Vec<Op> {
    let mut ops = Vec::new();
    let entities: Vec<EntityId> = world.entities().collect();
    for entity in entities {
        match world.kind(entity) {
            Some(EntityKind::Loop) => {
                if let Some(op) = loop_op(world, entity) {
                    ops.push(op);
                }
            }
            Some(EntityKind::TileOp) => {
                if let Some(op) = tile_op(world, entity) {
                    ops.push(op);
                }
            }
            _ => {}
        }
    }
    ops
}

/// A `T.Parallel` loop that is not nested in another one, with every access in its body.
fn loop_op(world: &World, entity: EntityId) -> Option<Op> {
    let info = world.loops.get(entity)?;
    if info.kind != LoopKind::Parallel {
        return None;
    }
    let parent_is_parallel = world
        .parents
        .get(entity)
        .and_then(|&p| world.loops.get(p))
        .is_some_and(|parent| parent.kind == LoopKind::Parallel);
    if parent_is_parallel {
        return None;
    }
    let shape: Option<Vec<i64>> = info
        .extents
        .iter()
        .map(|&e| world.exprs.as_int(e))
        .collect();
    let shape = shape?;
    let mut accesses = Vec::new();
    let mut serial = Vec::new();
    collect_body_accesses(world, entity, &mut accesses, &mut serial);
    serial.extend(enclosing_serial(world, entity, &accesses));
    Some(Op::Loop {
        entity,
        vars: info.vars.clone(),
        shape,
        serial,
        accesses,
    })
}

/// The variables of the sequential loops around `entity` that are a whole index of a fragment it
/// accesses (`lse_local[k, j]` in a `T.Parallel` over `j` inside `T.serial(k)`: one row per `k`),
/// with their extents. They count as the loop's serial variables: every iteration of the parallel
/// loop meets each of their values, so a layout derived from such an access may not depend on
/// them (it would change from one `k` to the next), and a fragment laid out from the loop keeps
/// that dimension in each thread's registers. A variable mixed into an index (`x[i, jj * 4 + j]`)
/// is left as before: like TileLang, the loop's layout may then be a function of it. Variables
/// that index no fragment are left out: they change nothing, and each one multiplies the points
/// the checks enumerate.
fn enclosing_serial(world: &World, entity: EntityId, accesses: &[LoopAccess]) -> Vec<(VarId, i64)> {
    let indexes_fragment = |var: VarId| {
        accesses.iter().any(|access| {
            is_fragment(world, access.buffer)
                && access
                    .indices
                    .iter()
                    .any(|&index| *world.exprs.get(index) == tilec_ir::Expr::Var(var))
        })
    };
    let mut found = Vec::new();
    let mut current = world.parents.get(entity).copied();
    while let Some(parent) = current {
        if let Some(info) = world.loops.get(parent) {
            let sequential = match info.kind {
                LoopKind::Serial
                | LoopKind::Unroll
                | LoopKind::Pipelined { .. }
                | LoopKind::While => true,
                LoopKind::Parallel => false,
            };
            for (&var, &extent) in info.vars.iter().zip(&info.extents) {
                let Some(extent) = world.exprs.as_int(extent) else {
                    continue;
                };
                if sequential && indexes_fragment(var) {
                    found.push((var, extent));
                }
            }
        }
        current = world.parents.get(parent).copied();
    }
    found
}

fn collect_body_accesses(
    world: &World,
    entity: EntityId,
    out: &mut Vec<LoopAccess>,
    serial: &mut Vec<(VarId, i64)>,
) {
    let children = world
        .body(entity)
        .iter()
        .chain(world.else_bodies.get(entity).into_iter().flatten());
    for &child in children {
        if let Some(info) = world.loops.get(child) {
            for (&var, &extent) in info.vars.iter().zip(&info.extents) {
                serial.push((var, world.exprs.as_int(extent).unwrap_or(1)));
            }
        }
        for access in world.accesses.get(child).into_iter().flatten() {
            out.push(point_access(access, child));
        }
        if let Some(&cond) = world.conditions.get(child) {
            let mut loads = Vec::new();
            world.data.loads(cond, &mut loads);
            for (buffer, indices) in loads {
                out.push(LoopAccess {
                    buffer,
                    indices,
                    write: false,
                    statement: child,
                });
            }
        }
        collect_body_accesses(world, child, out, serial);
    }
}

fn point_access(access: &Access, statement: EntityId) -> LoopAccess {
    LoopAccess {
        buffer: access.region.buffer,
        indices: access.region.dims.iter().map(|dim| dim.start).collect(),
        write: access.kind != AccessKind::Read,
        statement,
    }
}

/// Copies that touch a fragment are parallel loops over the fragment's side of the copy;
/// reductions are ops of their own.
fn tile_op(world: &mut World, entity: EntityId) -> Option<Op> {
    let op = world.ops.get(entity)?.clone();
    match op {
        TileOp::Copy { src, dst } => {
            if !is_fragment(world, src.buffer) && !is_fragment(world, dst.buffer) {
                return None;
            }
            let copy = copy_loop(world, &src, &dst)?;
            let accesses = vec![
                LoopAccess {
                    buffer: src.buffer,
                    indices: copy.src_indices,
                    write: false,
                    statement: entity,
                },
                LoopAccess {
                    buffer: dst.buffer,
                    indices: copy.dst_indices,
                    write: true,
                    statement: entity,
                },
            ];
            Some(Op::Loop {
                entity,
                vars: copy.vars,
                shape: copy.shape,
                serial: Vec::new(),
                accesses,
            })
        }
        TileOp::Reduce { src, dst, dim, .. } => {
            // A source without a shape takes no part in inference. The front end made a negative
            // `dim` count from the end already.
            world.shapes.get(src.buffer)?;
            Some(Op::Reduce {
                entity,
                src: src.buffer,
                dst: dst.buffer,
                dim: usize::try_from(dim).ok()?,
            })
        }
        _ => None,
    }
}

/// A `T.copy` seen as a parallel loop: fresh variables over the non-unit extents of the copied
/// tile (the fragment side's, when there is one), and the indices each side reads or writes.
#[derive(Clone, Debug)]
pub(crate) struct CopyLoop {
    pub vars: Vec<VarId>,
    pub shape: Vec<i64>,
    pub src_indices: Vec<ExprId>,
    pub dst_indices: Vec<ExprId>,
}

pub(crate) fn copy_loop(
    world: &mut World,
    src: &tilec_ir::Region,
    dst: &tilec_ir::Region,
) -> Option<CopyLoop> {
    let src_extents = resolve_extents(world, src, Some(dst))?;
    let dst_extents = resolve_extents(world, dst, Some(src))?;
    let driver = if is_fragment(world, dst.buffer) || !is_fragment(world, src.buffer) {
        &dst_extents
    } else {
        &src_extents
    };
    let shape: Vec<i64> = driver
        .iter()
        .map(|&e| world.exprs.as_int(e))
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .filter(|&e| e != 1)
        .collect();
    let vars = fresh_vars(&mut world.exprs, &shape);
    let src_indices = region_indices(world, src, &src_extents, &vars);
    let dst_indices = region_indices(world, dst, &dst_extents, &vars);
    Some(CopyLoop {
        vars,
        shape,
        src_indices,
        dst_indices,
    })
}

/// The indices of `region` for loop variables over its non-unit extents (trailing-aligned).
pub(crate) fn region_indices(
    world: &mut World,
    region: &tilec_ir::Region,
    extents: &[ExprId],
    vars: &[VarId],
) -> Vec<ExprId> {
    let mut remaining = vars.iter().rev();
    let mut indices: Vec<ExprId> = region
        .dims
        .iter()
        .zip(extents)
        .rev()
        .map(|(dim, &extent)| {
            if world.exprs.as_int(extent) == Some(1) {
                return dim.start;
            }
            match remaining.next() {
                Some(&var) => {
                    let offset = world.exprs.var_expr(var);
                    world.exprs.add(dim.start, offset)
                }
                None => dim.start,
            }
        })
        .collect();
    indices.reverse();
    indices
}

// ----- strict ----------------------------------------------------------------------------------

/// A fragment A operand of a `T.gemm` takes the register layout its instruction reads it in, as
/// TileLang's gemm fixes it at the strict level: the loops that fill it then follow it, and the
/// fragments they read get layouts that agree. Where no such layout exists (a slice of a buffer,
/// a transposed A on wgmma) the operand stays free, and lowering says what it cannot do.
fn operand_a_strict(
    world: &World,
    entity: EntityId,
    (a, transposed): (&tilec_ir::Region, bool),
    (instruction, [m, n], threads): (GemmInstruction, [i64; 2], i64),
    state: &mut State,
) {
    let Some(TileOp::Gemm { policy, .. }) = world.ops.get(entity) else {
        return;
    };
    if !is_fragment(world, a.buffer) || state.buffers.contains_key(&a.buffer) {
        return;
    }
    let Some(shape) = world.const_shape(a.buffer) else {
        return;
    };
    let same_region = shape.len() == a.dims.len()
        && shape.iter().zip(&a.dims).all(|(&full, dim)| {
            world.exprs.as_int(dim.start) == Some(0)
                && dim
                    .extent
                    .is_none_or(|extent| world.exprs.as_int(extent) == Some(full))
        });
    let [rows, depth] = shape[..] else { return };
    let k = if transposed { rows } else { depth };
    if !same_region || (if transposed { depth } else { rows }) != m {
        return;
    }
    let element_bits = world
        .dtypes
        .get(a.buffer)
        .map_or(16, |dtype| dtype.bytes() * 8);
    let layout = super::tensor_core::gemm_operand_a_layout(
        &mut state.exprs,
        instruction,
        [m, n, k],
        (threads, element_bits),
        *policy,
        transposed,
    );
    if let Ok(layout) = layout {
        state.buffers.insert(
            a.buffer,
            Inferred {
                layout,
                origin: Origin::GemmOperand,
                op: entity,
            },
        );
    }
}

fn strict(
    world: &World,
    ops: &[Op],
    threads: &Threads,
    gemms: &BTreeMap<EntityId, GemmInstruction>,
    state: &mut State,
) {
    for (entity, op) in world.ops.iter() {
        match op {
            TileOp::AnnotateLayout { buffer, layout }
                if layout.kind == tilec_ir::LayoutKind::Fragment =>
            {
                annotate(world, entity, *buffer, layout, threads.of(entity), state);
            }
            TileOp::Gemm {
                a,
                c,
                policy,
                transpose_a,
                ..
            } if is_fragment(world, c.buffer) => {
                let Some(shape) = world.const_shape(c.buffer) else {
                    continue;
                };
                let [m, n] = shape[..] else { continue };
                let instruction = gemms
                    .get(&entity)
                    .copied()
                    .unwrap_or(GemmInstruction::MmaSync);
                let operand = (a, *transpose_a);
                let threads = threads.of(entity);
                operand_a_strict(
                    world,
                    entity,
                    operand,
                    (instruction, [m, n], threads),
                    state,
                );
                match gemm_accumulator_layout(&mut state.exprs, instruction, m, n, threads, *policy)
                {
                    Ok(layout) => {
                        state.buffers.entry(c.buffer).or_insert(Inferred {
                            layout,
                            origin: Origin::Gemm,
                            op: entity,
                        });
                    }
                    Err(message) => state.conflicts.push(Diagnostic::error(
                        Code::LayoutConflict,
                        Anchor::Entity(entity),
                        message,
                    )),
                }
            }
            _ => {}
        }
    }
    serial_reads(world, threads, state);
    // A fragment read at a constant index inside a parallel loop must be on every thread.
    for op in ops {
        let Op::Loop {
            entity, accesses, ..
        } = op
        else {
            continue;
        };
        for access in accesses
            .iter()
            .filter(|a| !a.write && is_fragment(world, a.buffer))
        {
            let constant = access
                .indices
                .iter()
                .all(|&i| world.exprs.as_int(i).is_some());
            if constant && !state.buffers.contains_key(&access.buffer) {
                let Some(shape) = world.const_shape(access.buffer) else {
                    continue;
                };
                let layout =
                    FragmentLayout::fully_replicated(&mut state.exprs, &shape, threads.of(*entity));
                state.buffers.insert(
                    access.buffer,
                    Inferred {
                        layout,
                        origin: Origin::Broadcast,
                        op: *entity,
                    },
                );
            }
        }
    }
}

/// Fragments read by statements outside every parallel loop (a runtime `if` or `while`
/// condition, a run-time scalar, a top-level store's value): every thread runs the statement, so
/// each needs every element it may read, which TileLang gives by replicating the fragment on
/// all threads. Layouts decided by a strict source (a gemm, an annotation) stand, and the reads
/// are checked against them.
fn serial_reads(world: &World, threads: &Threads, state: &mut State) {
    for entity in world.entities() {
        let Some(kind) = world.kind(entity) else {
            continue;
        };
        let value = match kind {
            EntityKind::If | EntityKind::Loop => world.conditions.get(entity).copied(),
            EntityKind::Bind => world.bindings.get(entity).map(|binding| binding.value),
            EntityKind::Store => world.stores.get(entity).map(|store| store.value),
            _ => None,
        };
        let Some(value) = value else { continue };
        if inside_parallel_loop(world, entity) {
            continue;
        }
        let mut loads = Vec::new();
        world.data.loads(value, &mut loads);
        for (buffer, _) in loads {
            if !is_fragment(world, buffer) || state.buffers.contains_key(&buffer) {
                continue;
            }
            let Some(shape) = world.const_shape(buffer) else {
                continue;
            };
            let layout =
                FragmentLayout::fully_replicated(&mut state.exprs, &shape, threads.of(entity));
            state.buffers.insert(
                buffer,
                Inferred {
                    layout,
                    origin: Origin::ReadByEveryThread,
                    op: entity,
                },
            );
        }
    }
}

/// Whether a parallel loop encloses `entity` (its statements run once per iteration, each on the
/// thread the loop's layout gives it).
fn inside_parallel_loop(world: &World, entity: EntityId) -> bool {
    world.ancestors(entity).any(|parent| {
        world
            .loops
            .get(parent)
            .is_some_and(|info| info.kind == LoopKind::Parallel)
    })
}

/// Takes a `T.annotate_layout` fragment as the buffer's layout, unless it is invalid: then the
/// diagnostic says why and the buffer is inferred as if it were not annotated.
fn annotate(
    world: &World,
    entity: EntityId,
    buffer: EntityId,
    annotation: &tilec_ir::LayoutAnnotation,
    threads: i64,
    state: &mut State,
) {
    let Some(layout) = annotation_layout(&mut state.exprs, annotation) else {
        return;
    };
    if world.const_shape(buffer).as_deref() != Some(layout.shape.as_slice()) {
        // The checks report the mismatch; a layout of another shape is of no use.
        return;
    }
    let check = super::diagnose::AnnotationCheck {
        annotation: entity,
        buffer,
        threads,
    };
    if let Some(problem) = check.problem(world, &state.exprs, &layout) {
        state.conflicts.push(problem);
        return;
    }
    let inferred = Inferred {
        layout,
        origin: Origin::Annotation,
        op: entity,
    };
    state.buffers.insert(buffer, inferred);
}

/// The user's `T.Fragment(shape, forward_fn=...)`: outputs are `(thread, local...)`, the thread
/// over the replica variable too when the fragment is replicated.
fn annotation_layout(
    arena: &mut ExprArena,
    annotation: &tilec_ir::LayoutAnnotation,
) -> Option<FragmentLayout> {
    let (&thread, index) = annotation.outputs.split_first()?;
    let (rep, replicate) = match annotation.replica {
        Some(replica) => replica,
        None => (arena.var("rep", Some(1)), 1),
    };
    let index = if index.is_empty() {
        vec![arena.int(0)]
    } else {
        index.to_vec()
    };
    Some(FragmentLayout {
        shape: annotation.shape.clone(),
        vars: annotation.vars.clone(),
        rep,
        replicate,
        thread,
        index,
    })
}

// ----- common propagation ----------------------------------------------------------------------

/// Propagates layouts through every op until nothing changes.
fn propagate(world: &World, ops: &[Op], state: &mut State) {
    loop {
        let mut changed = sync_aliases(world, state);
        for op in ops {
            state.cancellation.check();
            if state.failed.contains(&op.entity()) {
                continue;
            }
            changed |= match op {
                Op::Loop { .. } => step_loop(world, op, state),
                Op::Reduce {
                    entity,
                    src,
                    dst,
                    dim,
                } => step_reduce(world, *entity, *src, *dst, *dim, state),
            };
            // The next op sees a view's layout as soon as its base has one, and checks it.
            changed |= sync_aliases(world, state);
        }
        if !changed {
            return;
        }
    }
}

/// Gives each alias fragment the reshaped layout of its base, or the base the reshaped layout of
/// an alias that got one first (a reduction into it); `true` when something was set. An alias
/// whose own layout disagrees with its base's is a conflict.
fn sync_aliases(world: &World, state: &mut State) -> bool {
    let mut changed = false;
    for (alias, &base) in world.aliases.iter() {
        if !is_fragment(world, alias) {
            continue;
        }
        let (Some(alias_shape), Some(base_shape)) =
            (world.const_shape(alias), world.const_shape(base))
        else {
            continue;
        };
        match (
            state.buffers.get(&base).cloned(),
            state.buffers.get(&alias).cloned(),
        ) {
            (Some(from), None) => {
                let layout = from.layout.reshape(&mut state.exprs, &alias_shape);
                let origin = Origin::Propagated { from: base };
                state.buffers.insert(
                    alias,
                    Inferred {
                        layout,
                        origin,
                        ..from
                    },
                );
                changed = true;
            }
            (None, Some(from)) => {
                let layout = from.layout.reshape(&mut state.exprs, &base_shape);
                let origin = Origin::Propagated { from: alias };
                state.buffers.insert(
                    base,
                    Inferred {
                        layout,
                        origin,
                        ..from
                    },
                );
                changed = true;
            }
            // One made from the other (above, on an earlier step) agrees by construction, and
            // a layout once given is never replaced: comparing them again point by point would
            // cost a walk of the whole tile on every propagation step.
            (Some(from), Some(own))
                if own.origin == (Origin::Propagated { from: base })
                    || from.origin == (Origin::Propagated { from: alias }) => {}
            (Some(from), Some(own)) => {
                let seen = from.layout.reshape(&mut state.exprs, &alias_shape);
                let agrees = super::algebra::equal_on_domain(&state.exprs, &seen, &own.layout);
                if agrees == Ok(false) && !state.failed.contains(&alias) {
                    state.failed.push(alias);
                    state.conflicts.push(Diagnostic::error(
                        Code::LayoutConflict,
                        Anchor::Entity(alias),
                        format!(
                            "`{}` is a view of `{}`, but the two were given different layouts: {} for the view, {} for `{}`",
                            world.name(alias),
                            world.name(base),
                            own.layout.describe(&state.exprs),
                            from.layout.describe(&state.exprs),
                            world.name(base),
                        ),
                    ));
                }
            }
            (None, None) => {}
        }
    }
    changed
}

fn step_loop(world: &World, op: &Op, state: &mut State) -> bool {
    let Op::Loop {
        entity,
        vars,
        shape,
        serial,
        accesses,
    } = op
    else {
        return false;
    };
    let mut changed = false;
    if !state.loops.contains_key(entity) {
        let Some(source) = pick_source(world, accesses, state) else {
            return false;
        };
        match super::derive::loop_from_buffer(
            &mut state.exprs,
            &state.buffers[&source.buffer].layout,
            &source.indices,
            vars,
            shape,
            serial,
        ) {
            Ok(layout) => {
                let inferred = Inferred {
                    layout,
                    origin: Origin::Propagated {
                        from: source.buffer,
                    },
                    op: *entity,
                };
                state.loops.insert(*entity, (inferred, 1));
                changed = true;
            }
            Err(witness) => {
                let diagnostic = super::diagnose::conflict(
                    world,
                    &state.exprs,
                    &state.buffers[&source.buffer],
                    source.buffer,
                    source.statement,
                    &witness,
                );
                state.conflicts.push(diagnostic);
                state.failed.push(*entity);
                return true;
            }
        }
    }
    let Some((loop_layout, _)) = state.loops.get(entity).cloned() else {
        return changed;
    };
    for access in accesses.iter().filter(|a| is_fragment(world, a.buffer)) {
        if state.buffers.contains_key(&access.buffer)
            || state.dead_ends.contains(&(*entity, access.buffer))
        {
            continue;
        }
        let Some(shape) = world.const_shape(access.buffer) else {
            continue;
        };
        match super::derive::buffer_from_loop(
            &mut state.exprs,
            &loop_layout.layout,
            &access.indices,
            &shape,
            serial,
        ) {
            Some(layout) => {
                state.buffers.insert(
                    access.buffer,
                    Inferred {
                        layout,
                        origin: Origin::Propagated { from: *entity },
                        op: *entity,
                    },
                );
                changed = true;
            }
            None => state.dead_ends.push((*entity, access.buffer)),
        }
    }
    changed
}

/// A reduction into a fragment that already has a layout (an annotation, a loop, a view of it):
/// the results land where the reduction's own layout puts them, so the two must be the same
/// function, or the stored rows would sit on the wrong threads. Checked once per reduction.
/// Whether a reduction's destination keeps the reduced dimension with extent 1 (`[X, 1, Y]` for
/// a source `[X, d, Y]`), which TileLang accepts beside the shape without it.
fn keeps_reduced_dim(world: &World, src: EntityId, dst: EntityId) -> bool {
    let rank = |buffer| world.shapes.get(buffer).map(Vec::len);
    rank(src).is_some() && rank(src) == rank(dst)
}

fn check_reduce_destination(
    world: &World,
    entity: EntityId,
    (src, source): (EntityId, &Inferred),
    (dst, existing): (EntityId, &Inferred),
    dim: usize,
    state: &mut State,
) -> bool {
    state.dead_ends.push((entity, dst));
    let keep_dim = keeps_reduced_dim(world, src, dst);
    let Some(derived) =
        super::derive::reduce_layout(&mut state.exprs, &source.layout, dim, keep_dim)
    else {
        return false;
    };
    if super::algebra::equal_on_domain(&state.exprs, &derived, &existing.layout) != Ok(false) {
        return false;
    }
    let op = world.ops.get(entity).map_or("reduce", |op| op.name());
    state.conflicts.push(Diagnostic::error(
        Code::LayoutConflict,
        Anchor::Entity(entity),
        format!(
            "`T.{op}` leaves each result of `{}` on {}, but `{}` is already laid out as {}",
            world.name(src),
            derived.describe(&state.exprs),
            world.name(dst),
            existing.layout.describe(&state.exprs),
        ),
    ));
    state.failed.push(entity);
    true
}

/// The access a loop takes its layout from: a written fragment that has one, else the read
/// fragment with a layout that is least replicated and has the most indices.
fn pick_source<'a>(
    world: &World,
    accesses: &'a [LoopAccess],
    state: &State,
) -> Option<&'a LoopAccess> {
    let laid_out =
        |a: &&LoopAccess| is_fragment(world, a.buffer) && state.buffers.contains_key(&a.buffer);
    if let Some(written) = accesses.iter().filter(laid_out).find(|a| a.write) {
        return Some(written);
    }
    // As in TileLang's common level, only a read fragment that is not replicated decides a loop's
    // layout; a replicated one (a row statistic read by every column) leaves the choice to the
    // free level, where planning the loop costs fewer registers.
    accesses
        .iter()
        .filter(laid_out)
        .filter(|a| state.buffers[&a.buffer].layout.replicate == 1)
        .filter(|a| !a.indices.iter().all(|&i| state.exprs.as_int(i).is_some()))
        .max_by_key(|a| a.indices.len())
}

fn step_reduce(
    world: &World,
    entity: EntityId,
    src: EntityId,
    dst: EntityId,
    dim: usize,
    state: &mut State,
) -> bool {
    if !is_fragment(world, dst) || state.dead_ends.contains(&(entity, dst)) {
        return false;
    }
    let Some(source) = state.buffers.get(&src).cloned() else {
        return false;
    };
    if let Some(existing) = state.buffers.get(&dst).cloned() {
        return check_reduce_destination(
            world,
            entity,
            (src, &source),
            (dst, &existing),
            dim,
            state,
        );
    }
    // Row statistics of one tile (`scores_max`, `scores_sum`) reduce the same layout over the same
    // dimension: derive it once. The result is a function of its inputs only, so sharing it (and
    // its variables) between buffers changes nothing.
    let keep_dim = keeps_reduced_dim(world, src, dst);
    let key = (source.layout.clone(), dim, keep_dim);
    let derived = match state.reductions.iter().find(|(k, _)| *k == key) {
        Some((_, derived)) => derived.clone(),
        None => {
            let derived =
                super::derive::reduce_layout(&mut state.exprs, &source.layout, dim, keep_dim);
            state.reductions.push((key, derived.clone()));
            derived
        }
    };
    match derived {
        Some(layout) => {
            state.buffers.insert(
                dst,
                Inferred {
                    layout,
                    origin: Origin::Reduce { from: src },
                    op: entity,
                },
            );
            true
        }
        None => {
            state.dead_ends.push((entity, dst));
            false
        }
    }
}

// ----- free mode -------------------------------------------------------------------------------

/// For each group of ops linked by fragments that still lacks layouts, plans each candidate loop
/// and keeps the complete result with the fewest registers.
fn free(world: &World, ops: &[Op], threads: &Threads, state: &mut State) {
    loop {
        let pending: Vec<&Op> = ops
            .iter()
            .filter(|op| matches!(op, Op::Loop { entity, .. } if !state.loops.contains_key(entity) && !state.failed.contains(entity)))
            .collect();
        let Some(first) = pending.first() else { break };
        let group = component(world, ops, first.entity());
        // Every loop of the group is tried as the root: the cheapest layout of a fragment can come
        // from a loop that only reads it (a row read by one thread in a serial loop).
        // As TileLang discards an attempt that throws, a trial that misplaces an access is only
        // kept when every root does: past [`MAX_ROOTS`], the search goes on until one trial is
        // free of conflicts (a free plan of `logsum` made before the loop that ties it
        // to a reduction's result would put the result's rows on the wrong threads).
        let roots = pending.iter().filter(|op| group.contains(&op.entity()));
        let mut best: Option<(u64, State)> = None;
        for (tried, candidate) in roots.enumerate() {
            let clean = best.as_ref().is_some_and(|(cost, _)| *cost < CONFLICT_COST);
            if tried >= MAX_ROOTS && clean {
                break;
            }
            state.cancellation.check();
            let mut trial = state.clone();
            plan_loop(world, candidate, threads.of(candidate.entity()), &mut trial);
            propagate(world, ops, &mut trial);
            let cost = completed_cost(world, ops, (&group, threads), trial.clone());
            if best.as_ref().is_none_or(|(best_cost, _)| cost < *best_cost) {
                best = Some((cost, trial));
            }
        }
        match best {
            Some((_, chosen)) => *state = chosen,
            None => break,
        }
    }
    // Fragments no loop touches (only filled or reduced into) get a plan over their own shape.
    let fragments: Vec<EntityId> = world
        .scopes
        .iter()
        .filter(|(_, s)| **s == Scope::Fragment)
        .map(|(b, _)| b)
        .collect();
    for buffer in fragments {
        // An alias takes its base's layout (`sync_aliases`).
        if state.buffers.contains_key(&buffer) || world.is_alias(buffer) {
            continue;
        }
        let Some(shape) = world.const_shape(buffer) else {
            continue;
        };
        let layout = FragmentLayout::plan(&mut state.exprs, &shape, threads.block, 1);
        state.buffers.insert(
            buffer,
            Inferred {
                layout,
                origin: Origin::Plan { vector: 1 },
                op: buffer,
            },
        );
        propagate(world, ops, state);
    }
}

/// The cost of a trial once the loops of `group` it left without a layout are planned in source
/// order, as TileLang's free level runs every other member of the group after the root: a root
/// whose plan forces a later loop into a conflict costs that conflict.
fn completed_cost(
    world: &World,
    ops: &[Op],
    (group, threads): (&[EntityId], &Threads),
    mut trial: State,
) -> u64 {
    while let Some(next) = ops.iter().find(|op| {
        let entity = op.entity();
        matches!(op, Op::Loop { .. })
            && group.contains(&entity)
            && !trial.loops.contains_key(&entity)
            && !trial.failed.contains(&entity)
    }) {
        trial.cancellation.check();
        plan_loop(world, next, threads.of(next.entity()), &mut trial);
        propagate(world, ops, &mut trial);
    }
    registers(world, &trial) + CONFLICT_COST * misplacing_loops(ops, group, &mut trial)
}

/// The loops of `group` whose layout puts an access to a laid-out fragment on a thread that does
/// not hold the element: the conflicts [`validate_accesses`] would report once inference ends.
fn misplacing_loops(ops: &[Op], group: &[EntityId], state: &mut State) -> u64 {
    let mut count = 0;
    for op in ops.iter().filter(|op| group.contains(&op.entity())) {
        let Some((layout, _)) = state.loops.get(&op.entity()).cloned() else {
            continue;
        };
        let Op::Loop {
            serial, accesses, ..
        } = op
        else {
            continue;
        };
        let misplaced = accesses.iter().any(|access| {
            let Some(inferred) = state.buffers.get(&access.buffer).cloned() else {
                return false;
            };
            !reduced_in_loop_layout(ops, state, &layout.layout, &inferred, access)
                && !access_fits(serial, &layout.layout, &inferred.layout, access, state)
        });
        count += u64::from(misplaced);
    }
    count
}

/// Whether `layout` runs every iteration of `access` on a thread holding the accessed element of
/// a fragment laid out as `fragment`.
fn access_fits(
    serial: &[(VarId, i64)],
    layout: &FragmentLayout,
    fragment: &FragmentLayout,
    access: &LoopAccess,
    state: &mut State,
) -> bool {
    if super::validate::same_layout(&mut state.exprs, layout, fragment, &access.indices) {
        return true;
    }
    let owners = fragment.owners(&state.exprs);
    let shape = super::validate::LoopShape { layout, serial };
    super::validate::misplaced_access(
        &state.exprs,
        &shape,
        fragment,
        &owners,
        &access.indices,
        access.write,
    )
    .is_none()
}

fn plan_loop(world: &World, op: &Op, threads: i64, state: &mut State) {
    let Op::Loop {
        entity,
        vars,
        shape,
        ..
    } = op
    else {
        return;
    };
    let vector = super::vectorize::vector_width(world, op_accesses(op), vars, shape, threads);
    let mut layout = FragmentLayout::plan(&mut state.exprs, shape, threads, vector);
    // The plan's fresh variables stand for the loop's own.
    let mapping: Vec<(VarId, ExprId)> = layout
        .vars
        .iter()
        .zip(vars)
        .map(|(&fresh, &own)| (fresh, state.exprs.var_expr(own)))
        .collect();
    let lookup = |var: VarId| {
        mapping
            .iter()
            .find(|(fresh, _)| *fresh == var)
            .map(|(_, own)| *own)
    };
    layout.thread = state.exprs.substitute(layout.thread, &lookup);
    layout.index = layout
        .index
        .iter()
        .map(|&e| state.exprs.substitute(e, &lookup))
        .collect();
    layout.vars = vars.clone();
    let planned = Inferred {
        layout,
        origin: Origin::Plan { vector },
        op: *entity,
    };
    // As TileLang validates each candidate against the fragments the loop touches, a plan that
    // puts an already laid-out fragment's element on the wrong thread gives way to the layout
    // derived from that fragment (a replicated row statistic copied out, say).
    let chosen = if fits_fragments(op, &planned.layout, state) {
        (planned, vector)
    } else {
        match from_laid_out_read(op, state) {
            Some(derived) => (derived, 1),
            None => (planned, vector),
        }
    };
    state.loops.insert(*entity, chosen);
}

/// Whether every laid-out fragment the loop accesses holds each accessed element on the thread
/// `layout` runs the iteration on.
fn fits_fragments(op: &Op, layout: &FragmentLayout, state: &mut State) -> bool {
    let Op::Loop {
        serial, accesses, ..
    } = op
    else {
        return true;
    };
    accesses.iter().all(|access| {
        let Some(inferred) = state.buffers.get(&access.buffer).cloned() else {
            return true;
        };
        access_fits(serial, layout, &inferred.layout, access, state)
    })
}

/// The loop layout derived from a laid-out fragment the loop reads (replicated ones included),
/// when one fits every fragment the loop accesses.
fn from_laid_out_read(op: &Op, state: &mut State) -> Option<Inferred> {
    let Op::Loop {
        entity,
        vars,
        shape,
        serial,
        accesses,
    } = op
    else {
        return None;
    };
    for access in accesses.iter().filter(|a| !a.write) {
        let Some(inferred) = state.buffers.get(&access.buffer).cloned() else {
            continue;
        };
        let Ok(layout) = super::derive::loop_from_buffer(
            &mut state.exprs,
            &inferred.layout,
            &access.indices,
            vars,
            shape,
            serial,
        ) else {
            continue;
        };
        if fits_fragments(op, &layout, state) {
            return Some(Inferred {
                layout,
                origin: Origin::Propagated {
                    from: access.buffer,
                },
                op: *entity,
            });
        }
    }
    None
}

fn op_accesses(op: &Op) -> &[LoopAccess] {
    match op {
        Op::Loop { accesses, .. } => accesses,
        Op::Reduce { .. } => &[],
    }
}

/// The ops linked to `root` through shared fragment buffers.
fn component(world: &World, ops: &[Op], root: EntityId) -> Vec<EntityId> {
    let mut members = vec![root];
    let mut buffers: Vec<EntityId> = Vec::new();
    loop {
        let before = members.len() + buffers.len();
        for op in ops {
            let fragments = op.fragments(world);
            if members.contains(&op.entity()) {
                for b in fragments {
                    if !buffers.contains(&b) {
                        buffers.push(b);
                    }
                }
            } else if fragments.iter().any(|b| buffers.contains(b)) {
                members.push(op.entity());
            }
        }
        if members.len() + buffers.len() == before {
            return members;
        }
    }
}

/// Registers per thread of every fragment laid out so far, with large penalties per conflict and
/// per fragment left without a layout, so that a complete, conflict-free plan always wins. Layouts outside the group are the same in every trial, so
/// counting them does not change which trial is cheapest.
fn registers(world: &World, state: &State) -> u64 {
    let mut total = state.conflicts.len() as u64 * CONFLICT_COST;
    // A fragment the trial could not lay out at all is worse than any layout it could have had.
    let unresolved = world
        .scopes
        .iter()
        .filter(|(buffer, scope)| {
            **scope == Scope::Fragment
                && !state.buffers.contains_key(buffer)
                && !world.is_alias(*buffer)
        })
        .count() as u64;
    total += unresolved * 100_000;
    for (buffer, inferred) in state.buffers.iter().filter(|(b, _)| !world.is_alias(**b)) {
        let bytes = world.dtypes.get(*buffer).map_or(4, |d| d.bytes());
        // A local size is a product of extents, never negative.
        let local_size = u64::try_from(inferred.layout.local_size(&state.exprs)).unwrap_or(0);
        total += (local_size * bytes).div_ceil(4);
    }
    total
}
