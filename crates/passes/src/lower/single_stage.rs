//! `T.Pipelined(n, num_stages=1)`: one buffer per copy, each refilled as soon as it is free.
//!
//! TileLang reads one stage as "no second buffer, but the copy still runs ahead": the copy of
//! iteration `i + 1` into a buffer is issued right after the last statement of iteration `i` that
//! reads the buffer, and iteration `i + 1` waits for it just before the first statement that
//! does. In attention the next key tile then loads while the softmax and the second gemm run,
//! and the next value tile while the next first gemm runs. On `cp.async`, each copy is a commit
//! group of its own:
//!
//! ```text
//! if 0 < n: copies(0), each committed, in the order the loop commits them
//! for i in 0..n:   ...
//!                  wait_group(pending(c)); barrier        before c's first reader
//!                  ...
//!                  barrier; if i+1 < n: copy c(i+1); commit   after c's last reader
//! ```
//!
//! The commits of one iteration come in a fixed order (by where each copy's last reader is), and
//! the prologue commits iteration 0's copies in that order too, so at copy `c`'s wait the groups
//! committed after `c(i)` are known: the copies of iteration `i` after `c` in that order, and the
//! copies of iteration `i + 1` issued earlier in this iteration's body. `wait_group` with that
//! count leaves exactly those pending. The commit stays outside the `i + 1 < n` guard (an empty
//! group in the last iteration), so the count holds in every iteration. The barrier before an
//! issue proves every thread has read the buffer; the one after a wait publishes every thread's
//! copy. The emulator checks both element by element.

use tilec_ir::thread::Stmt;
use tilec_ir::{EntityId, ExprId, VarId, World};

use super::pipeline::{Pipeline, invariant_binds, producer_target, producers, touches};
use super::{Lowering, Unlowerable, rewrite};

/// Where one copy of a single-stage loop waits and is issued again.
struct CopySchedule {
    producer: EntityId,
    /// The position in the loop body of the first statement that reads the copy's buffer.
    wait_before: usize,
    /// The position of the last statement that touches it.
    issue_after: usize,
    /// Commit groups allowed to stay pending at the wait.
    pending: u32,
}

/// The schedule of every producer of a loop whose `body` is given, in commit order; `None` when
/// a producer's buffer has no reader in the body (nothing to wait for: the loop stays as written).
fn schedule(world: &World, body: &[EntityId], producers: &[EntityId]) -> Option<Vec<CopySchedule>> {
    let mut copies = Vec::new();
    for &producer in producers {
        let position = body.iter().position(|&entity| entity == producer)?;
        let target = producer_target(world, producer)?;
        let touching: Vec<usize> = (0..body.len())
            .filter(|&q| q != position && touches(world, body[q], target))
            .collect();
        copies.push(CopySchedule {
            producer,
            wait_before: *touching.first()?,
            issue_after: *touching.last()?,
            pending: 0,
        });
    }
    // `producers` is in body order, and the sort is stable: ties keep it.
    copies.sort_by_key(|copy| copy.issue_after);
    let counts: Vec<usize> = (0..copies.len())
        .map(|rank| {
            let later_in_order = copies.len() - rank - 1;
            let issued_before_wait = copies
                .iter()
                .filter(|other| other.issue_after < copies[rank].wait_before)
                .count();
            later_in_order + issued_before_wait
        })
        .collect();
    for (copy, count) in copies.iter_mut().zip(counts) {
        copy.pending = u32::try_from(count).ok()?;
    }
    Some(copies)
}

impl Lowering<'_> {
    /// Lowers a `T.Pipelined` loop of one stage whose copies can be issued ahead; `None` when it
    /// has none (then it is an ordinary loop).
    pub(super) fn single_stage_loop(
        &mut self,
        entity: EntityId,
        (var, extent): (VarId, ExprId),
        out: &mut Vec<Stmt>,
    ) -> Result<Option<()>, Unlowerable> {
        // A persistent launch counts its pipelines' iterations across tiles; this loop has no
        // stage to count, and is lowered as written there.
        if self.tile_walk.is_some() {
            return Ok(None);
        }
        let producers = producers(self.world, entity);
        let body = self.world.body(entity).to_vec();
        let Some(copies) = schedule(self.world, &body, &producers) else {
            return Ok(None);
        };
        if copies.is_empty() {
            return Ok(None);
        }
        for bind in invariant_binds(self.world, entity, var) {
            self.bind(bind, out)?;
            self.hoisted_binds.push(bind);
        }
        let mut issues = Vec::with_capacity(copies.len());
        for copy in &copies {
            let pipeline = Pipeline {
                entity,
                producers: vec![copy.producer],
                var,
                extent,
                stages: 1,
            };
            let stmts = self.producer_stmts(&pipeline.producers)?;
            issues.push(self.with_iteration_binds(&pipeline, stmts)?);
        }
        self.sync_before_first_issue(&producers, out);
        out.push(self.first_copies(&issues, var, extent));
        let loop_body = self.single_stage_body(&body, &copies, &issues, (var, extent))?;
        out.push(Stmt::Block {
            origin: Some(entity),
            label: "T.Pipelined with one stage: each copy of the next iteration issued once the \
                    last reader of its buffer is done (cp.async)"
                .to_owned(),
            body: vec![Stmt::For {
                var,
                extent,
                unroll: false,
                body: loop_body,
            }],
        });
        Ok(Some(()))
    }

    /// Iteration 0's copies, each its own commit group, in commit order.
    fn first_copies(&mut self, issues: &[Vec<Stmt>], var: VarId, extent: ExprId) -> Stmt {
        let zero = self.program.exprs.int(0);
        let mut first = Vec::new();
        for issue in issues {
            first.extend(rewrite::substitute_stmts(&mut self.program, issue, &|v| {
                (v == var).then_some(zero)
            }));
            first.push(Stmt::AsyncCommit);
        }
        Stmt::Block {
            origin: None,
            label: "single-stage pipeline prologue: iteration 0's copies".to_owned(),
            body: self.unless_past_end(zero, extent, first),
        }
    }

    /// The loop body: the consumers, a wait before each copy's first reader and the next
    /// iteration's copy after its last.
    fn single_stage_body(
        &mut self,
        body: &[EntityId],
        copies: &[CopySchedule],
        issues: &[Vec<Stmt>],
        (var, extent): (VarId, ExprId),
    ) -> Result<Vec<Stmt>, Unlowerable> {
        let exprs = &mut self.program.exprs;
        let (current, one) = (exprs.var_expr(var), exprs.int(1));
        let next = exprs.add(current, one);
        let mut out = Vec::new();
        self.sync.begin_loop();
        for (position, &child) in body.iter().enumerate() {
            if copies.iter().any(|copy| copy.producer == child) {
                continue;
            }
            let waits = copies.iter().filter(|copy| copy.wait_before == position);
            if let Some(pending) = waits.map(|copy| copy.pending).min() {
                out.extend([Stmt::AsyncWait { pending }, Stmt::Barrier]);
                self.sync.barrier_placed();
            }
            self.statement(child, &mut out)?;
            let mut issued = copies
                .iter()
                .zip(issues)
                .filter(|(copy, _)| copy.issue_after == position)
                .peekable();
            if issued.peek().is_some() {
                out.push(Stmt::Barrier);
                self.sync.barrier_placed();
            }
            for (_, issue) in issued {
                let shifted = rewrite::substitute_stmts(&mut self.program, issue, &|v| {
                    (v == var).then_some(next)
                });
                out.extend(self.unless_past_end(next, extent, shifted));
                out.push(Stmt::AsyncCommit);
            }
        }
        let may_run_zero_times = self.program.exprs.as_int(extent).is_none_or(|n| n < 1);
        self.sync.end_loop(&mut out, may_run_zero_times);
        Ok(out)
    }
}
