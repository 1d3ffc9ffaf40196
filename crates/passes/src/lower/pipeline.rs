//! Software pipelining of `T.Pipelined(n, num_stages=k)` with `k ≥ 2`.
//!
//! The loop's *producers* are the `T.copy`s from global to shared memory directly in its body, and
//! the gather loops (`T.Parallel` loops that store into a shared tile a value read from global
//! memory, see [`gather_target`]), whose shared buffer nothing else touches outside the loop and
//! nothing earlier in the body touches. Each such buffer gets `k` copies (stages); iteration `i`
//! uses stage `i % k`. Producers run `k - 1` iterations ahead of the rest of the body (the
//! *consumers*), with `cp.async` where the copy is vectorized, one commit group per iteration:
//!
//! ```text
//! for s in 0..k-1:  if s < n: producers(s)      ; commit
//! for i in 0..n:    wait_group(k-2); barrier
//!                   if i+k-1 < n: producers(i+k-1); commit
//!                   consumers(i)
//! ```
//!
//! Before iteration `i` waits, `i + k - 1` groups were committed, so `wait_group(k - 2)` leaves
//! exactly iteration `i`'s group complete; the barrier after it publishes every thread's copies, and
//! also proves that every thread has finished iteration `i - 1`, the last reader of the stage the
//! new producers overwrite. The emulator checks both halves of that argument element by element.

use std::collections::BTreeMap;

use tilec_ir::data::CompareOp;
use tilec_ir::thread::{Memory, Place, Stmt, Value};
use tilec_ir::visit::{VisitorMut, walk_body_mut, walk_stmt_mut};
use tilec_ir::{EntityId, ExprId, LoopKind, Scope, TileOp, VarId, World};

use super::{Lowering, Unlowerable, rewrite};

/// One `T.Pipelined` loop being lowered.
pub(super) struct Pipeline {
    pub entity: EntityId,
    /// Its producer copies, in body order.
    pub producers: Vec<EntityId>,
    pub var: VarId,
    pub extent: ExprId,
    pub stages: i64,
}

/// A `cp.async` pipeline's offer to the gemm that is its only consumer: load the next
/// iteration's first k step of fragments before the last k step's mma, as CUTLASS's multistage
/// main loop does. The loop's wait and barrier move there, right after the last reads of the
/// iteration's stage, so the next stage's first `ldmatrix` latency hides behind that mma:
///
/// ```text
/// wait_group(k-2); barrier; fragments(0)
/// for i in 0..n:   if i+k-1 < n: producers(i+k-1); commit
///                  steps 0..s-1 of gemm(i), each loading step+1's fragments first
///                  wait_group(k-2); barrier; fragments(min(i+1, n-1))
///                  step s-1 of gemm(i)
/// ```
///
/// When iteration `i` waits, `i + k` groups were committed, so `wait_group(k - 2)` completes
/// iteration `i + 1`'s; the barrier publishes it, and follows every read of stage `i % k` (the
/// fragments are in registers by then), which iteration `i + 1`'s producers overwrite.
pub(super) struct FragmentPrefetch {
    var: VarId,
    extent: ExprId,
    wait: Vec<Stmt>,
    /// Set by the gemm that takes the offer: the wait, the barrier and iteration 0's fragments,
    /// which run before the loop.
    before_loop: Option<Vec<Stmt>>,
}

/// What distinguishes one form of the software pipeline's steady state from another.
pub(super) struct SteadyParts {
    /// Waits for the iteration's stage, before the barrier.
    pub wait: Vec<Stmt>,
    /// The issue `k - 1` iterations ahead, after the barrier (left out of the tail).
    pub ahead: Vec<Stmt>,
    /// What follows the issue, kept in the tail too.
    pub after_ahead: Vec<Stmt>,
    pub label: String,
    /// Whether a gemm that is the only consumer may prefetch the next iteration's fragments
    /// (`wait` is then a `cp.async` wait, which may move to before the gemm's last k step).
    pub prefetch_fragments: bool,
}

/// Whether a statement of the launch's own body (not a nested one) is a `T.Pipelined` loop with
/// copies to run ahead, the only loop warp specialization applies to: checked before trying a
/// persistent lowering, so that other launches do not pay for lowering twice.
pub(super) fn may_be_persistent(world: &World, launch: EntityId) -> bool {
    world.body(launch).iter().any(|&entity| {
        let pipelined = world.loops.get(entity).is_some_and(
            |info| matches!(info.kind, LoopKind::Pipelined { num_stages } if num_stages >= 2),
        );
        if !pipelined {
            return false;
        }
        // Gather loops have no TMA form, and only TMA pipelines are warp specialized.
        let producers = producers(world, entity);
        let all_copies = producers
            .iter()
            .all(|&producer| matches!(world.ops.get(producer), Some(TileOp::Copy { .. })));
        !producers.is_empty() && all_copies
    })
}

/// The shared buffers a launch's pipelines multi-buffer, with their stage counts.
pub(crate) fn staged_buffers(world: &World, launch: EntityId) -> BTreeMap<EntityId, i64> {
    let mut staged = BTreeMap::new();
    for entity in crate::liveness::linearize(world, launch) {
        let Some(info) = world.loops.get(entity) else {
            continue;
        };
        let LoopKind::Pipelined { num_stages } = info.kind else {
            continue;
        };
        if num_stages < 2 {
            continue;
        }
        for producer in producers(world, entity) {
            if let Some(target) = producer_target(world, producer) {
                staged.insert(target, num_stages);
            }
        }
    }
    staged
}

/// The producer copies of a pipelined loop, in body order.
pub(super) fn producers(world: &World, pipelined: EntityId) -> Vec<EntityId> {
    let body = world.body(pipelined);
    let mut found = Vec::new();
    for (position, &entity) in body.iter().enumerate() {
        let Some(target) = producer_target(world, entity) else {
            continue;
        };
        let touched_before = body[..position]
            .iter()
            .any(|&earlier| touches(world, earlier, target));
        let touched_outside = crate::liveness::linearize(world, world_root(world, pipelined))
            .into_iter()
            .filter(|&other| !is_within(world, other, pipelined))
            .any(|other| direct_touch(world, other, target));
        if !touched_before && !touched_outside {
            found.push(entity);
        }
    }
    found
}

/// The shared buffer `entity` fills if it can be a producer: a `T.copy` from global memory no
/// kernel writes into a shared buffer of its own, or a gather loop ([`gather_target`]).
pub(super) fn producer_target(world: &World, entity: EntityId) -> Option<EntityId> {
    let Some(TileOp::Copy { src, dst }) = world.ops.get(entity) else {
        return gather_target(world, entity);
    };
    let shared_dst =
        world.scopes.get(dst.buffer).is_some_and(|s| s.is_shared()) && !world.is_alias(dst.buffer);
    let global_src = world.scopes.get(world.storage_of(src.buffer)) == Some(&Scope::Global)
        && !written_anywhere(world, world.storage_of(src.buffer));
    (shared_dst && global_src).then_some(dst.buffer)
}

/// The shared buffer of a *gather loop*: a `T.Parallel` loop whose only statement stores into a
/// shared buffer of its own a value that reads global memory no kernel writes, through index
/// arithmetic and `T.if_then_else` only (a `T.im2col` tile, rows gathered by run-time indices, a
/// padded tile). It copies as a `T.copy` does, so the pipeline can run it ahead; where its
/// elements are vectorized, with `cp.async` (zero-filling what a guard keeps out).
fn gather_target(world: &World, entity: EntityId) -> Option<EntityId> {
    let info = world.loops.get(entity)?;
    let [child] = world.body(entity) else {
        return None;
    };
    let store = world.stores.get(*child)?;
    let shared_dst = world
        .scopes
        .get(store.buffer)
        .is_some_and(|s| s.is_shared())
        && !world.is_alias(store.buffer);
    let mut loads = Vec::new();
    world.data.loads(store.value, &mut loads);
    let from_global = !loads.is_empty()
        && loads.iter().all(|(buffer, _)| {
            let storage = world.storage_of(*buffer);
            world.scopes.get(storage) == Some(&Scope::Global) && !written_anywhere(world, storage)
        });
    let gathers = info.kind == LoopKind::Parallel
        && shared_dst
        && from_global
        && !reads_registers(world, store.value);
    gathers.then_some(store.buffer)
}

/// Whether a data expression reads a `T.alloc_var` or draws a random number: values an issue
/// ahead of its iteration would take from the wrong one.
fn reads_registers(world: &World, value: tilec_ir::DataId) -> bool {
    let node = world.data.get(value);
    matches!(
        node,
        tilec_ir::DataExpr::ReadVar(_)
            | tilec_ir::DataExpr::Random(_)
            | tilec_ir::DataExpr::Shuffle { .. }
            | tilec_ir::DataExpr::WarpReduce { .. }
    ) || node
        .operands()
        .any(|operand| reads_registers(world, operand))
}

/// The variables a producer's addresses use: a copy's regions, a gather loop's store and loads.
fn producer_vars(world: &World, producer: EntityId) -> Vec<VarId> {
    let mut vars = Vec::new();
    if let Some(TileOp::Copy { src, dst }) = world.ops.get(producer) {
        for dim in src.dims.iter().chain(&dst.dims) {
            vars.extend(world.exprs.vars_of(dim.start));
            vars.extend(dim.extent.iter().flat_map(|&e| world.exprs.vars_of(e)));
        }
    }
    if gather_target(world, producer).is_some() {
        for &child in world.body(producer) {
            let Some(store) = world.stores.get(child) else {
                continue;
            };
            let mut indices = store.indices.clone();
            world.data.index_exprs(store.value, &mut indices);
            let mut loads = Vec::new();
            world.data.loads(store.value, &mut loads);
            indices.extend(loads.into_iter().flat_map(|(_, at)| at));
            vars.extend(indices.iter().flat_map(|&index| world.exprs.vars_of(index)));
        }
    }
    vars
}

/// The bindings of the loop body (other than the `hoisted` ones) that the producer copies'
/// regions read, directly or through other such bindings, in body order.
fn iteration_binds(
    world: &World,
    pipelined: EntityId,
    producers: &[EntityId],
    hoisted: &[EntityId],
) -> Vec<EntityId> {
    let body_binds: Vec<EntityId> = world
        .body(pipelined)
        .iter()
        .copied()
        .filter(|entity| !hoisted.contains(entity) && world.bindings.get(*entity).is_some())
        .collect();
    let mut needed: Vec<VarId> = producers
        .iter()
        .flat_map(|&producer| producer_vars(world, producer))
        .collect();
    let mut chosen: Vec<EntityId> = Vec::new();
    // Each pass adds the bindings of needed variables and what their values read; a chain of
    // bindings is at most as long as the body.
    for _ in 0..=body_binds.len() {
        let mut grew = false;
        for &entity in &body_binds {
            let Some(binding) = world.bindings.get(entity) else {
                continue;
            };
            if chosen.contains(&entity) || !needed.contains(&binding.var) {
                continue;
            }
            chosen.push(entity);
            let mut indices = Vec::new();
            world.data.index_exprs(binding.value, &mut indices);
            needed.extend(indices.iter().flat_map(|&index| world.exprs.vars_of(index)));
            grew = true;
        }
        if !grew {
            break;
        }
    }
    body_binds
        .into_iter()
        .filter(|entity| chosen.contains(entity))
        .collect()
}

/// The run-time scalars bound directly in a pipelined loop's body whose value is the same in every
/// iteration: their index expressions use neither the loop variable nor a scalar bound inside
/// the loop, and nothing in the loop writes a buffer they read.
pub(super) fn invariant_binds(world: &World, pipelined: EntityId, var: VarId) -> Vec<EntityId> {
    let inside = crate::liveness::linearize(world, pipelined);
    let written: Vec<EntityId> = inside
        .iter()
        .filter_map(|&entity| world.accesses.get(entity))
        .flatten()
        .filter(|access| access.kind != tilec_ir::AccessKind::Read)
        .map(|access| world.storage_of(access.region.buffer))
        .collect();
    let mut varying = vec![var];
    varying.extend(
        inside
            .iter()
            .filter_map(|&entity| world.bindings.get(entity))
            .map(|binding| binding.var),
    );
    world
        .body(pipelined)
        .iter()
        .copied()
        .filter(|&entity| {
            let Some(binding) = world.bindings.get(entity) else {
                return false;
            };
            let mut loads = Vec::new();
            world.data.loads(binding.value, &mut loads);
            let reads_written = loads
                .iter()
                .any(|(buffer, _)| written.contains(&world.storage_of(*buffer)));
            let mut indices = Vec::new();
            world.data.index_exprs(binding.value, &mut indices);
            let uses_varying = indices.iter().any(|&index| {
                world
                    .exprs
                    .vars_of(index)
                    .iter()
                    .any(|used| varying.contains(used))
            });
            !reads_written && !uses_varying
        })
        .collect()
}

/// The launch an entity belongs to.
fn world_root(world: &World, mut entity: EntityId) -> EntityId {
    while let Some(&parent) = world.parents.get(entity) {
        entity = parent;
    }
    entity
}

fn is_within(world: &World, mut entity: EntityId, ancestor: EntityId) -> bool {
    loop {
        if entity == ancestor {
            return true;
        }
        match world.parents.get(entity) {
            Some(&parent) => entity = parent,
            None => return false,
        }
    }
}

/// Whether `entity` itself (not its body) accesses `buffer`.
fn direct_touch(world: &World, entity: EntityId, buffer: EntityId) -> bool {
    world.accesses.get(entity).is_some_and(|accesses| {
        accesses
            .iter()
            .any(|a| world.storage_of(a.region.buffer) == buffer)
    })
}

/// Whether `entity` or anything nested in it accesses `buffer`.
pub(super) fn touches(world: &World, entity: EntityId, buffer: EntityId) -> bool {
    direct_touch(world, entity, buffer)
        || crate::liveness::linearize(world, entity)
            .into_iter()
            .any(|inner| direct_touch(world, inner, buffer))
}

/// Whether any statement writes a tensor parameter (then a copy from it cannot be hoisted ahead).
fn written_anywhere(world: &World, param: EntityId) -> bool {
    world.accesses.iter().any(|(_, accesses)| {
        accesses.iter().any(|a| {
            world.storage_of(a.region.buffer) == param
                && !matches!(a.kind, tilec_ir::AccessKind::Read)
        })
    }) || world.ops.iter().any(
        |(_, op)| matches!(op, TileOp::Atomic { dst, .. } if world.storage_of(dst.buffer) == param),
    )
}

impl Lowering<'_> {
    /// Lowers a `T.Pipelined` loop with two or more stages; `None` when it has no producer to
    /// run ahead (then it is an ordinary loop). On sm_90 the producers run on TMA when every one
    /// of them has a TMA form, else on `cp.async`.
    pub(super) fn pipelined_loop(
        &mut self,
        entity: EntityId,
        (var, extent): (VarId, ExprId),
        stages: i64,
        out: &mut Vec<Stmt>,
    ) -> Result<Option<()>, Unlowerable> {
        let producers = producers(self.world, entity);
        if producers.is_empty() {
            return Ok(None);
        }
        // The copies issued ahead of their iteration read the body's run-time scalars before the
        // body binds them: those that stay the same across iterations are bound once, first.
        for bind in invariant_binds(self.world, entity, var) {
            self.bind(bind, out)?;
            self.hoisted_binds.push(bind);
        }
        self.begin_pipeline_count(extent)?;
        let ko = self.program.exprs.var_expr(var);
        let count = self.pipeline_count(ko);
        let exprs = &mut self.program.exprs;
        let stage_count = exprs.int(stages);
        let stage = exprs.floormod(count, stage_count);
        for &producer in &producers {
            if let Some(target) = producer_target(self.world, producer) {
                self.current_stage.insert(target, stage);
            }
        }
        let pipeline = Pipeline {
            entity,
            producers,
            var,
            extent,
            stages,
        };
        self.sync_before_first_issue(&pipeline.producers, out);
        let not_tma = if self.options.tma {
            match self.plan_tma(&pipeline.producers) {
                Ok(copies) => {
                    self.tma_pipeline(&pipeline, &copies, out)?;
                    self.current_stage.clear();
                    return Ok(Some(()));
                }
                Err(why) => Some(why),
            }
        } else {
            None
        };
        self.refuse_persistence("the pipelined loop runs on cp.async, with no producer warpgroup")?;
        // Producers of iteration `var`, stage `var % k`; shifted below by substitution.
        let issue = self.producer_stmts(&pipeline.producers)?;
        let issue = self.with_iteration_binds(&pipeline, issue)?;
        out.push(self.prologue(&issue, var, extent, stages));
        let exprs = &mut self.program.exprs;
        let ahead = exprs.int(stages - 1);
        let next = exprs.add(ko, ahead);
        let shifted =
            rewrite::substitute_stmts(&mut self.program, &issue, &|v| (v == var).then_some(next));
        let wait = vec![Stmt::AsyncWait {
            pending: u32::try_from(stages - 2).unwrap_or(0),
        }];
        let mut label =
            "T.Pipelined: the iterations that issue a stage ahead, then the last ones".to_owned();
        if let Some(why) = not_tma {
            label.push_str(&format!(" (cp.async, not TMA: {why})"));
        }
        let parts = SteadyParts {
            wait,
            ahead: shifted,
            after_ahead: vec![Stmt::AsyncCommit],
            label,
            prefetch_fragments: true,
        };
        let steady = self.steady_state(&pipeline, parts)?;
        out.push(steady);
        self.current_stage.clear();
        Ok(Some(()))
    }

    /// Places a barrier before the stages issued ahead of the loop when what came before still
    /// reads or writes their bytes (a gemm over a buffer the shared-memory plan put under a
    /// stage): the issues are placed outside the statement walk that inserts barriers.
    pub(super) fn sync_before_first_issue(&mut self, producers: &[EntityId], out: &mut Vec<Stmt>) {
        let mut issued = super::sync::Accesses::default();
        for &producer in producers {
            if let Some(target) = producer_target(self.world, producer)
                && let Some(&id) = self.buffers.get(&target)
            {
                issued.add(id, tilec_ir::AccessKind::Write);
            }
        }
        self.sync.before(&issued, out);
    }

    /// `issue` preceded by the loop body's bindings the producers' copies read (a paged kernel's
    /// `kv_start = block_table[...]`), in a scope of their own: the issue ahead of an iteration
    /// must compute them for that iteration, and the consumers bind them again for theirs.
    pub(super) fn with_iteration_binds(
        &mut self,
        pipeline: &Pipeline,
        issue: Vec<Stmt>,
    ) -> Result<Vec<Stmt>, Unlowerable> {
        let binds = iteration_binds(
            self.world,
            pipeline.entity,
            &pipeline.producers,
            &self.hoisted_binds,
        );
        if binds.is_empty() {
            return Ok(issue);
        }
        let mut body = Vec::new();
        for bind in binds {
            self.bind(bind, &mut body)?;
        }
        body.extend(issue);
        Ok(vec![Stmt::Block {
            origin: Some(pipeline.entity),
            label: "the run-time values the issued copies read, for their iteration".to_owned(),
            body,
        }])
    }

    /// The producers' statements for iteration `var`, async where vectorized.
    pub(super) fn producer_stmts(
        &mut self,
        producers: &[EntityId],
    ) -> Result<Vec<Stmt>, Unlowerable> {
        let mut stmts = Vec::new();
        for &producer in producers {
            let (body, label) = match self.world.ops.get(producer).cloned() {
                Some(TileOp::Copy { src, dst }) => {
                    let mut body = Vec::new();
                    self.copy(producer, &src, &dst, &mut body)?;
                    (body, "T.copy (pipelined: cp.async into its stage)")
                }
                _ => (
                    vec![self.laid_out_loop(producer)?],
                    "T.Parallel gather (pipelined: cp.async into its stage)",
                ),
            };
            stmts.push(Stmt::Block {
                origin: Some(producer),
                label: label.to_owned(),
                body: self.asynchronous(body),
            });
        }
        Ok(stmts)
    }

    /// `stmts` with every vector copy from global to shared memory made a `cp.async`.
    fn asynchronous(&mut self, mut stmts: Vec<Stmt>) -> Vec<Stmt> {
        Asynchronous(self).visit_body(&mut stmts);
        stmts
    }

    /// Vectorization moves a tile through registers: a vector load into one register array, a
    /// lane loop copying it into another, a vector store out of that. When the lane loop is a
    /// plain copy (no conversion), the three are one vector copy from the source to the target,
    /// which is what a `cp.async` needs.
    ///
    /// A lane loop that reads a guarded element (`vec[lane] = in_bounds ? src[base + lane] : 0`,
    /// as a padded or gathered tile reads) followed by the vector store of `vec` is the same
    /// vector copy where the guard holds, and a store of zeros where it does not: `cp.async`
    /// under the guard, the zeros stored directly otherwise.
    fn fuse_register_staging(&mut self, stmts: Vec<Stmt>) -> Vec<Stmt> {
        let mut out: Vec<Stmt> = Vec::with_capacity(stmts.len());
        for stmt in stmts {
            out.push(stmt);
            let n = out.len();
            if n >= 2
                && let Some(fused) = self.guarded_staged_copy(&out[n - 2], &out[n - 1])
            {
                out.truncate(n - 2);
                out.push(fused);
                continue;
            }
            if n < 3 {
                continue;
            }
            if let Some(fused) = self.staged_copy(&out[n - 3], &out[n - 2], &out[n - 1]) {
                out.truncate(n - 3);
                out.push(fused);
            }
        }
        out
    }

    /// `if (guard) cp.async(dst, src + base) else { vec = 0; dst = vec }` for `lanes; store` where
    /// `lanes` fills `vec[lane]` with `guard ? src[base + lane] : 0`, the guard the same for every
    /// lane, and `store` copies `vec` to shared memory that `cp.async` can reach.
    fn guarded_staged_copy(&mut self, lanes: &Stmt, store: &Stmt) -> Option<Stmt> {
        let Stmt::VectorCopy {
            dst,
            src: staged,
            lanes: width,
        } = *store
        else {
            return None;
        };
        let (lane, buffer, value) = self.lane_loop(lanes, width)?;
        if self.program.exprs.as_int(staged.index) != Some(0) || buffer != staged.buffer {
            return None;
        }
        let (guard, source, source_index) = self.guarded_element(value)?;
        let dtype = self.program.buffer(staged.buffer).dtype;
        let same_type = self.program.buffer(source).dtype == dtype
            && self.program.buffer(dst.buffer).dtype == dtype;
        if !same_type
            || !self.async_capable(dst.buffer, source, width)
            || self.value_uses_var(guard, lane)
        {
            return None;
        }
        let zero = self.program.exprs.int(0);
        let base = self
            .program
            .exprs
            .substitute(source_index, &|v| (v == lane).then_some(zero));
        let lane_expr = self.program.exprs.var_expr(lane);
        if self.program.exprs.add(base, lane_expr) != source_index {
            return None;
        }
        let zeros = self.constant(0.0, dtype);
        let fill = vec![
            Stmt::For {
                var: lane,
                extent: self.program.exprs.int(i64::from(width)),
                unroll: true,
                body: vec![Stmt::Store {
                    place: Place {
                        buffer,
                        index: lane_expr,
                    },
                    value: zeros,
                }],
            },
            store.clone(),
        ];
        Some(Stmt::If {
            cond: guard,
            then: vec![Stmt::AsyncCopy {
                dst,
                src: Place {
                    buffer: source,
                    index: base,
                },
                lanes: width,
            }],
            otherwise: fill,
        })
    }

    /// `(guard, buffer, index)` for a value `guard ? buffer[index] : 0`, the guards of nested such
    /// selects joined with `and`.
    fn guarded_element(
        &mut self,
        value: tilec_ir::thread::ValueId,
    ) -> Option<(
        tilec_ir::thread::ValueId,
        tilec_ir::thread::BufferId,
        ExprId,
    )> {
        let Value::Select {
            cond,
            then,
            otherwise,
            ..
        } = *self.program.value(value)
        else {
            return None;
        };
        let is_zero = match *self.program.value(otherwise) {
            Value::Float { bits, .. } => bits == 0,
            Value::Int { value, .. } => value == 0,
            _ => false,
        };
        if !is_zero {
            return None;
        }
        match *self.program.value(then) {
            Value::Load { buffer, index } => Some((cond, buffer, index)),
            Value::Select { .. } => {
                let (inner, buffer, index) = self.guarded_element(then)?;
                let both = self.and(Some(cond), inner);
                Some((both, buffer, index))
            }
            _ => None,
        }
    }

    /// Whether `value` reads variable `var` anywhere in its tree.
    fn value_uses_var(&self, value: tilec_ir::thread::ValueId, var: VarId) -> bool {
        let node = self.program.value(value);
        let direct = match *node {
            Value::Index(e) => self.program.exprs.vars_of(e).contains(&var),
            Value::Load { index, .. } => self.program.exprs.vars_of(index).contains(&var),
            _ => false,
        };
        direct
            || node
                .operands()
                .any(|operand| self.value_uses_var(operand, var))
    }

    /// The single vector copy equivalent to `load; lanes; store`, if they are a staged copy.
    fn staged_copy(&self, load: &Stmt, lanes: &Stmt, store: &Stmt) -> Option<Stmt> {
        let Stmt::VectorCopy {
            dst: loaded,
            src,
            lanes: width,
        } = load
        else {
            return None;
        };
        let Stmt::VectorCopy {
            dst,
            src: stored,
            lanes: store_width,
        } = store
        else {
            return None;
        };
        let exprs = &self.program.exprs;
        let from_start =
            exprs.as_int(loaded.index) == Some(0) && exprs.as_int(stored.index) == Some(0);
        if width != store_width || !from_start {
            return None;
        }
        let (lane, buffer, value) = self.lane_loop(lanes, *width)?;
        let is_lane = |e: ExprId| matches!(exprs.get(e), tilec_ir::Expr::Var(v) if *v == lane);
        let plain = matches!(
            self.program.value(value),
            Value::Load { buffer: b, index: i } if *b == loaded.buffer && is_lane(*i)
        );
        let same_type =
            self.program.buffer(loaded.buffer).dtype == self.program.buffer(stored.buffer).dtype;
        (plain && same_type && buffer == stored.buffer).then_some(Stmt::VectorCopy {
            dst: *dst,
            src: *src,
            lanes: *width,
        })
    }

    /// Vectorization's lane loop, `for lane in 0..width { buffer[lane] = value }`, as
    /// `(lane, buffer, value)`.
    fn lane_loop(
        &self,
        lanes: &Stmt,
        width: u32,
    ) -> Option<(VarId, tilec_ir::thread::BufferId, tilec_ir::thread::ValueId)> {
        let Stmt::For {
            var, extent, body, ..
        } = lanes
        else {
            return None;
        };
        let [
            Stmt::Store {
                place: Place { buffer, index },
                value,
            },
        ] = body.as_slice()
        else {
            return None;
        };
        let exprs = &self.program.exprs;
        let is_lane = matches!(exprs.get(*index), tilec_ir::Expr::Var(v) if v == var);
        (exprs.as_int(*extent) == Some(i64::from(width)) && is_lane)
            .then_some((*var, *buffer, *value))
    }

    fn async_capable(
        &self,
        dst: tilec_ir::thread::BufferId,
        src: tilec_ir::thread::BufferId,
        lanes: u32,
    ) -> bool {
        let (d, s) = (self.program.buffer(dst), self.program.buffer(src));
        // 4-bit elements are packed in memory, and `cp.async` copies whole bytes the printer
        // does not pair up: they stay ordinary (vector) copies.
        matches!(d.memory, Memory::Shared { .. })
            && matches!(s.memory, Memory::Global { .. })
            && !d.dtype.is_sub_byte()
            && matches!(u64::from(lanes) * d.dtype.bytes(), 4 | 8 | 16)
    }

    /// The first `k - 1` iterations' producers, each its own commit group.
    fn prologue(&mut self, issue: &[Stmt], var: VarId, extent: ExprId, stages: i64) -> Stmt {
        let mut stage = self.prologue_stages(issue, var, extent, stages);
        if let Stmt::Block { body, .. } = &mut stage
            && let Some(Stmt::For { body, .. }) = body.first_mut()
        {
            body.push(Stmt::AsyncCommit);
        }
        stage
    }

    /// The first `k - 1` iterations' producers (`issue` over `var`), each under
    /// `stage < extent` unless that is known.
    pub(super) fn prologue_stages(
        &mut self,
        issue: &[Stmt],
        var: VarId,
        extent: ExprId,
        stages: i64,
    ) -> Stmt {
        let exprs = &mut self.program.exprs;
        let s = exprs.var("stage", Some(stages - 1));
        let s_expr = exprs.var_expr(s);
        let shifted =
            rewrite::substitute_stmts(&mut self.program, issue, &|v| (v == var).then_some(s_expr));
        let body = self.unless_past_end(s_expr, extent, shifted);
        let count = self.program.exprs.int(stages - 1);
        Stmt::Block {
            origin: None,
            label: format!("pipeline prologue: the first {} stages", stages - 1),
            body: vec![Stmt::For {
                var: s,
                extent: count,
                unroll: true,
                body,
            }],
        }
    }

    /// `stmts` under `iteration < extent`, unless that is known to hold.
    pub(super) fn unless_past_end(
        &mut self,
        iteration: ExprId,
        extent: ExprId,
        stmts: Vec<Stmt>,
    ) -> Vec<Stmt> {
        let exprs = &self.program.exprs;
        let always = matches!(
            (exprs.bounds(iteration), exprs.as_int(extent)),
            (Some((_, high)), Some(n)) if high < n
        );
        if always {
            return stmts;
        }
        let cond = self.compare_indices(CompareOp::Lt, iteration, extent);
        vec![Stmt::If {
            cond,
            then: stmts,
            otherwise: Vec::new(),
        }]
    }

    /// The loop itself: wait, barrier, issue `k - 1` ahead, then the consumers (a gemm that takes
    /// the [`FragmentPrefetch`] offer places the wait and the barrier itself). It is split in
    /// two so that no `if` guards the issue: the main loop runs the iterations that have one
    /// `k - 1` ahead, the tail the last `k - 1` (or fewer) with nothing left to issue. Unguarded
    /// issues are straight-line code that ptxas can interleave with the consumers' math.
    pub(super) fn steady_state(
        &mut self,
        pipeline: &Pipeline,
        parts: SteadyParts,
    ) -> Result<Stmt, Unlowerable> {
        let (var, extent, stages) = (pipeline.var, pipeline.extent, pipeline.stages);
        let exprs = &mut self.program.exprs;
        let ahead = exprs.int(stages - 1);
        let remaining = exprs.sub(extent, ahead);
        let zero = exprs.int(0);
        let main_extent = exprs.max(remaining, zero);
        let mut head = parts.wait.clone();
        head.push(Stmt::Barrier);
        // The barrier heads every iteration, so a loop that runs no iteration leaves what is
        // pending now pending after it.
        let before_loop_barrier = self.sync.pending();
        self.sync.barrier_placed();
        if parts.prefetch_fragments && self.only_consumer_is_a_gemm(pipeline) {
            self.fragment_prefetch = Some(FragmentPrefetch {
                var,
                extent,
                wait: parts.wait,
                before_loop: None,
            });
        }
        let mut consumers = Vec::new();
        self.sync.begin_loop();
        // With the offer taken the barrier sits inside the gemm rather than at the top; the
        // tracker may still count it from the top, since a gemm writes no shared memory.
        self.sync.barrier_placed();
        self.consumers(pipeline, &mut consumers)?;
        let may_run_zero_times = self.program.exprs.as_int(extent).is_none_or(|n| n < 1);
        self.sync.end_loop(&mut consumers, may_run_zero_times);
        if may_run_zero_times {
            self.sync.join(&before_loop_barrier);
        }
        let before_loop = self.fragment_prefetch.take().and_then(|p| p.before_loop);
        // A gemm that took the offer placed the wait and the barrier itself.
        let mut body = if before_loop.is_some() {
            Vec::new()
        } else {
            head
        };
        let issued = (body.len(), parts.ahead.len());
        body.extend(parts.ahead);
        body.extend(parts.after_ahead);
        body.extend(consumers);
        let tail = self.tail_loop(&body, issued, (var, extent), main_extent);
        let main = Stmt::For {
            var,
            extent: main_extent,
            unroll: false,
            body,
        };
        let mut stmts = match before_loop {
            Some(first) => {
                let zero = self.program.exprs.int(0);
                self.unless_past_end(zero, extent, first)
            }
            None => Vec::new(),
        };
        stmts.extend([main, tail]);
        Ok(Stmt::Block {
            origin: Some(pipeline.entity),
            label: parts.label,
            body: stmts,
        })
    }

    /// Whether the loop body, producers aside, is a single `T.gemm`.
    fn only_consumer_is_a_gemm(&self, pipeline: &Pipeline) -> bool {
        let mut consumers = self
            .world
            .body(pipeline.entity)
            .iter()
            .filter(|child| !pipeline.producers.contains(child));
        let first = consumers.next();
        consumers.next().is_none()
            && first.is_some_and(|&op| matches!(self.world.ops.get(op), Some(TileOp::Gemm { .. })))
    }

    /// Whether the enclosing pipeline offers its next iteration's fragments to this gemm.
    pub(super) fn fragment_prefetch_offered(&self) -> bool {
        self.fragment_prefetch
            .as_ref()
            .is_some_and(|offer| offer.before_loop.is_none())
    }

    /// Takes the offer: `first` (the gemm's first k step of loads, over the loop variable) runs
    /// for iteration 0 before the loop, after the wait and the barrier.
    pub(super) fn take_fragment_prefetch(&mut self, first: &[Stmt]) {
        let Some(offer) = self.fragment_prefetch.as_ref() else {
            return;
        };
        let (var, mut stmts) = (offer.var, offer.wait.clone());
        let zero = self.program.exprs.int(0);
        stmts.push(Stmt::Barrier);
        stmts.extend(rewrite::substitute_stmts(&mut self.program, first, &|v| {
            (v == var).then_some(zero)
        }));
        if let Some(offer) = self.fragment_prefetch.as_mut() {
            offer.before_loop = Some(stmts);
        }
    }

    /// The wait, the barrier and the next iteration's first fragments. The last iteration has no
    /// next one; it reloads its own (a stage whose copies are complete) rather than branch.
    pub(super) fn fragments_of_next_iteration(&mut self, first: &[Stmt], out: &mut Vec<Stmt>) {
        let Some(offer) = self.fragment_prefetch.as_ref() else {
            return;
        };
        let (var, extent) = (offer.var, offer.extent);
        out.extend(offer.wait.iter().cloned());
        out.push(Stmt::Barrier);
        let exprs = &mut self.program.exprs;
        let (one, current) = (exprs.int(1), exprs.var_expr(var));
        let (following, last) = (exprs.add(current, one), exprs.sub(extent, one));
        let next = exprs.min(following, last);
        out.extend(rewrite::substitute_stmts(&mut self.program, first, &|v| {
            (v == var).then_some(next)
        }));
    }

    /// The loop body without its producers.
    pub(super) fn consumers(
        &mut self,
        pipeline: &Pipeline,
        body: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        for child in self.world.body(pipeline.entity).to_vec() {
            if pipeline.producers.contains(&child) {
                continue;
            }
            self.statement(child, body)?;
        }
        Ok(())
    }

    /// The last iterations: the main body without its issue (`issued`: where it starts in the
    /// body and how many statements it has), over `ko = main_extent + t`. `cp.async` commits
    /// stay, as empty groups, so that `wait_group(k - 2)` still waits for the right copies.
    fn tail_loop(
        &mut self,
        body: &[Stmt],
        (first, issued): (usize, usize),
        (var, extent): (VarId, ExprId),
        main_extent: ExprId,
    ) -> Stmt {
        let kept: Vec<Stmt> = body
            .iter()
            .enumerate()
            .filter(|(k, _)| !(first..first + issued).contains(k))
            .map(|(_, stmt)| stmt.clone())
            .collect();
        let exprs = &mut self.program.exprs;
        let t = exprs.var("t", None);
        let t_expr = exprs.var_expr(t);
        let ko = exprs.add(t_expr, main_extent);
        let count = exprs.sub(extent, main_extent);
        let body =
            rewrite::substitute_stmts(&mut self.program, &kept, &|v| (v == var).then_some(ko));
        Stmt::For {
            var: t,
            extent: count,
            unroll: false,
            body,
        }
    }
}

/// Makes every vector copy from global to shared memory that can be one a `cp.async`, in every
/// statement list, once the list's register staging is fused into plain copies.
struct Asynchronous<'l, 'w>(&'l mut Lowering<'w>);

impl VisitorMut for Asynchronous<'_, '_> {
    fn visit_body(&mut self, stmts: &mut Vec<Stmt>) {
        *stmts = self.0.fuse_register_staging(std::mem::take(stmts));
        walk_body_mut(self, stmts);
    }

    fn visit_stmt(&mut self, stmt: &mut Stmt) {
        if let Stmt::VectorCopy { dst, src, lanes } = *stmt
            && self.0.async_capable(dst.buffer, src.buffer, lanes)
        {
            *stmt = Stmt::AsyncCopy { dst, src, lanes };
        }
        walk_stmt_mut(self, stmt);
    }
}
