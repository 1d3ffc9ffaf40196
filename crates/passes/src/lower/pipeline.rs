//! Software pipelining of `T.Pipelined(n, num_stages=k)` with `k ≥ 2`.
//!
//! The loop's *producers* are the `T.copy`s from global to shared memory directly in its body whose
//! shared buffer nothing else touches outside the loop and nothing earlier in the body touches. Each
//! such buffer gets `k` copies (stages); iteration `i` uses stage `i % k`. Producers run `k - 1`
//! iterations ahead of the rest of the body (the *consumers*), with `cp.async` where the copy is
//! vectorized, one commit group per iteration:
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
use tilec_ir::thread::{Memory, Stmt, Value};
use tilec_ir::{EntityId, ExprId, LoopKind, Scope, TileOp, VarId, World};

use super::{Lowering, Unlowerable, rewrite};

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
            if let Some(TileOp::Copy { dst, .. }) = world.ops.get(producer) {
                staged.insert(dst.buffer, num_stages);
            }
        }
    }
    staged
}

/// The producer copies of a pipelined loop, in body order.
fn producers(world: &World, pipelined: EntityId) -> Vec<EntityId> {
    let body = world.body(pipelined);
    let mut found = Vec::new();
    for (position, &entity) in body.iter().enumerate() {
        let Some(TileOp::Copy { src, dst }) = world.ops.get(entity) else {
            continue;
        };
        let shared_dst = world.scopes.get(dst.buffer).is_some_and(|s| s.is_shared())
            && !world.is_alias(dst.buffer);
        let global_src = world.scopes.get(world.storage_of(src.buffer)) == Some(&Scope::Global)
            && !written_anywhere(world, world.storage_of(src.buffer));
        if !shared_dst || !global_src {
            continue;
        }
        let touched_before = body[..position]
            .iter()
            .any(|&earlier| touches(world, earlier, dst.buffer));
        let touched_outside = crate::liveness::linearize(world, world_root(world, pipelined))
            .into_iter()
            .filter(|&other| !is_within(world, other, pipelined))
            .any(|other| direct_touch(world, other, dst.buffer));
        if !touched_before && !touched_outside {
            found.push(entity);
        }
    }
    found
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
fn touches(world: &World, entity: EntityId, buffer: EntityId) -> bool {
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
    }) || world.ops.iter().any(|(_, op)| {
        matches!(op, TileOp::AtomicAdd { dst, .. } if world.storage_of(dst.buffer) == param)
    })
}

impl Lowering<'_> {
    /// Lowers a `T.Pipelined` loop with two or more stages; `None` when it has no producer to
    /// run ahead (then it is an ordinary loop).
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
        let exprs = &mut self.program.exprs;
        let ko = exprs.var_expr(var);
        let stage_count = exprs.int(stages);
        let stage = exprs.floormod(ko, stage_count);
        for &producer in &producers {
            if let Some(TileOp::Copy { dst, .. }) = self.world.ops.get(producer) {
                self.current_stage.insert(dst.buffer, stage);
            }
        }
        // Producers of iteration `var`, stage `var % k`; shifted below by substitution.
        let issue = self.producer_stmts(&producers)?;
        out.push(self.prologue(&issue, var, extent, stages));
        let steady = self.steady_state(entity, &issue, &producers, (var, extent), stages)?;
        out.push(steady);
        self.current_stage.clear();
        Ok(Some(()))
    }

    /// The producers' statements for iteration `var`, async where vectorized.
    fn producer_stmts(&mut self, producers: &[EntityId]) -> Result<Vec<Stmt>, Unlowerable> {
        let mut stmts = Vec::new();
        for &producer in producers {
            let Some(TileOp::Copy { src, dst }) = self.world.ops.get(producer).cloned() else {
                continue;
            };
            let mut body = Vec::new();
            self.copy(producer, &src, &dst, &mut body)?;
            stmts.push(Stmt::Block {
                origin: Some(producer),
                label: "T.copy (pipelined: cp.async into its stage)".to_owned(),
                body: self.asynchronous(body),
            });
        }
        Ok(stmts)
    }

    /// `stmts` with every vector copy from global to shared memory made a `cp.async`.
    fn asynchronous(&self, stmts: Vec<Stmt>) -> Vec<Stmt> {
        self.fuse_register_staging(stmts)
            .into_iter()
            .map(|stmt| match stmt {
                Stmt::VectorCopy {
                    dst,
                    dst_index,
                    src,
                    src_index,
                    lanes,
                } if self.async_capable(dst, src, lanes) => Stmt::AsyncCopy {
                    dst,
                    dst_index,
                    src,
                    src_index,
                    lanes,
                },
                Stmt::For {
                    var,
                    extent,
                    unroll,
                    body,
                } => Stmt::For {
                    var,
                    extent,
                    unroll,
                    body: self.asynchronous(body),
                },
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                } => Stmt::If {
                    cond,
                    then: self.asynchronous(then),
                    otherwise: self.asynchronous(otherwise),
                },
                Stmt::Block {
                    origin,
                    label,
                    body,
                } => Stmt::Block {
                    origin,
                    label,
                    body: self.asynchronous(body),
                },
                other => other,
            })
            .collect()
    }

    /// Vectorization moves a tile through registers: a vector load into one register array, a
    /// lane loop copying it into another, a vector store out of that. When the lane loop is a
    /// plain copy (no conversion), the three are one vector copy from the source to the target,
    /// which is what a `cp.async` needs.
    fn fuse_register_staging(&self, stmts: Vec<Stmt>) -> Vec<Stmt> {
        let mut out: Vec<Stmt> = Vec::with_capacity(stmts.len());
        for stmt in stmts {
            out.push(stmt);
            let n = out.len();
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

    /// The single vector copy equivalent to `load; lanes; store`, if they are a staged copy.
    fn staged_copy(&self, load: &Stmt, lanes: &Stmt, store: &Stmt) -> Option<Stmt> {
        let Stmt::VectorCopy {
            dst: loaded,
            dst_index: loaded_at,
            src,
            src_index,
            lanes: width,
        } = load
        else {
            return None;
        };
        let Stmt::VectorCopy {
            dst,
            dst_index,
            src: stored,
            src_index: stored_at,
            lanes: store_width,
        } = store
        else {
            return None;
        };
        let Stmt::For {
            var, extent, body, ..
        } = lanes
        else {
            return None;
        };
        let exprs = &self.program.exprs;
        let from_start = exprs.as_int(*loaded_at) == Some(0) && exprs.as_int(*stored_at) == Some(0);
        if width != store_width || exprs.as_int(*extent) != Some(i64::from(*width)) || !from_start {
            return None;
        }
        let [
            Stmt::Store {
                buffer,
                index,
                value,
            },
        ] = body.as_slice()
        else {
            return None;
        };
        let is_lane = |e: ExprId| matches!(exprs.get(e), tilec_ir::Expr::Var(v) if v == var);
        let plain = matches!(
            self.program.value(*value),
            Value::Load { buffer: b, index: i } if b == loaded && is_lane(*i)
        );
        let same_type = self.program.buffer(*loaded).dtype == self.program.buffer(*stored).dtype;
        (plain && same_type && buffer == stored && is_lane(*index)).then_some(Stmt::VectorCopy {
            dst: *dst,
            dst_index: *dst_index,
            src: *src,
            src_index: *src_index,
            lanes: *width,
        })
    }

    fn async_capable(
        &self,
        dst: tilec_ir::thread::BufferId,
        src: tilec_ir::thread::BufferId,
        lanes: u32,
    ) -> bool {
        let (d, s) = (self.program.buffer(dst), self.program.buffer(src));
        matches!(d.memory, Memory::Shared { .. })
            && matches!(s.memory, Memory::Global { .. })
            && matches!(u64::from(lanes) * d.dtype.bytes(), 4 | 8 | 16)
    }

    /// The first `k - 1` iterations' producers, each its own commit group.
    fn prologue(&mut self, issue: &[Stmt], var: VarId, extent: ExprId, stages: i64) -> Stmt {
        let exprs = &mut self.program.exprs;
        let s = exprs.var("stage", Some(stages - 1));
        let s_expr = exprs.var_expr(s);
        let shifted =
            rewrite::substitute_stmts(&mut self.program, issue, &|v| (v == var).then_some(s_expr));
        let mut body = self.unless_past_end(s_expr, extent, shifted);
        body.push(Stmt::AsyncCommit);
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
    fn unless_past_end(
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

    /// The loop itself: wait, barrier, issue `k - 1` ahead, then the consumers. It is split in
    /// two so that no `if` guards the issue: the main loop runs the iterations that have one
    /// `k - 1` ahead, the tail the last `k - 1` (or fewer) with nothing left to issue. Unguarded
    /// `cp.async`s are straight-line code that ptxas can interleave with the consumers' math.
    fn steady_state(
        &mut self,
        entity: EntityId,
        issue: &[Stmt],
        producers: &[EntityId],
        (var, extent): (VarId, ExprId),
        stages: i64,
    ) -> Result<Stmt, Unlowerable> {
        let exprs = &mut self.program.exprs;
        let ko = exprs.var_expr(var);
        let ahead = exprs.int(stages - 1);
        let next = exprs.add(ko, ahead);
        let remaining = exprs.sub(extent, ahead);
        let zero = exprs.int(0);
        let main_extent = exprs.max(remaining, zero);
        let shifted =
            rewrite::substitute_stmts(&mut self.program, issue, &|v| (v == var).then_some(next));
        let mut body = vec![
            Stmt::AsyncWait {
                pending: u32::try_from(stages - 2).unwrap_or(0),
            },
            Stmt::Barrier,
        ];
        self.sync.barrier_placed();
        let issued = shifted.len();
        body.extend(shifted);
        body.push(Stmt::AsyncCommit);
        self.sync.begin_loop();
        self.sync.barrier_placed();
        for child in self.world.body(entity).to_vec() {
            if producers.contains(&child) {
                continue;
            }
            self.statement(child, &mut body)?;
        }
        self.sync.end_loop(&mut body);
        let tail = self.tail_loop(&body, issued, (var, extent), main_extent);
        let main = Stmt::For {
            var,
            extent: main_extent,
            unroll: false,
            body,
        };
        Ok(Stmt::Block {
            origin: Some(entity),
            label: "T.Pipelined: the iterations that issue a stage ahead, then the last ones"
                .to_owned(),
            body: vec![main, tail],
        })
    }

    /// The last iterations: the main body without its issue (which sits right after the wait and
    /// the barrier), over `ko = main_extent + t`. Their commits stay, as empty groups, so that
    /// `wait_group(k - 2)` still waits for the right copies.
    fn tail_loop(
        &mut self,
        body: &[Stmt],
        issued: usize,
        (var, extent): (VarId, ExprId),
        main_extent: ExprId,
    ) -> Stmt {
        let kept: Vec<Stmt> = body
            .iter()
            .enumerate()
            .filter(|(k, _)| !(2..2 + issued).contains(k))
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
