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
//!
//! On sm_90, when every copy has a TMA form, thread 0 issues each copy's boxes on an mbarrier of
//! its own (after the same barrier) and the readers wait for that barrier's phase of the
//! iteration (parity `i % 2`) instead of a commit group and a block barrier.

use tilec_ir::thread::{BufferId, Place, Stmt};
use tilec_ir::{EntityId, ExprId, VarId, World};

use super::pipeline::{Pipeline, invariant_binds, producer_target, producers, touches};
use super::tma::TmaCopy;
use super::{Lowering, Unlowerable, rewrite};

/// How the copies of a single-stage loop are issued and waited for.
#[derive(Clone, Copy)]
enum CopyForm {
    /// `cp.async`, one commit group per copy.
    Async,
    /// TMA boxes, completing on `full[j]` for the copy `j` of the commit order.
    Tma { full: BufferId },
}

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
        self.sync_before_first_issue(&producers, out);
        let in_order: Vec<EntityId> = copies.iter().map(|copy| copy.producer).collect();
        let tma = match self.options.tma {
            true => self.plan_tma(&in_order).map_err(Some),
            false => Err(None),
        };
        let (form, issues, how) = match tma {
            Ok(boxes) => {
                let full = self.single_stage_barriers(entity, boxes.len(), out)?;
                let issues = self.tma_issues(entity, (var, extent), &boxes, full)?;
                (CopyForm::Tma { full }, issues, "TMA".to_owned())
            }
            Err(why) => {
                let mut issues = Vec::with_capacity(copies.len());
                for &producer in &in_order {
                    let pipeline = single_copy_pipeline(entity, producer, (var, extent));
                    let stmts = self.producer_stmts(&pipeline.producers)?;
                    issues.push(self.with_iteration_binds(&pipeline, stmts)?);
                }
                let how = match why {
                    Some(why) => format!("cp.async, not TMA: {why}"),
                    None => "cp.async".to_owned(),
                };
                (CopyForm::Async, issues, how)
            }
        };
        out.push(self.first_copies(&issues, form, var, extent));
        let loop_body = self.single_stage_body(&body, &copies, (&issues, form), (var, extent))?;
        out.push(Stmt::Block {
            origin: Some(entity),
            label: format!(
                "T.Pipelined with one stage: each copy of the next iteration issued once the \
                 last reader of its buffer is done ({how})"
            ),
            body: vec![Stmt::For {
                var,
                extent,
                unroll: false,
                body: loop_body,
            }],
        });
        if let CopyForm::Tma { full } = form
            && self.inside_loop(entity)
        {
            let count = i64::try_from(copies.len()).unwrap_or(i64::MAX);
            out.push(self.mbarrier_teardown(entity, full, count));
        }
        Ok(Some(()))
    }

    /// One mbarrier per copy, initialised by thread 0 before the loop.
    fn single_stage_barriers(
        &mut self,
        entity: EntityId,
        copies: usize,
        out: &mut Vec<Stmt>,
    ) -> Result<BufferId, Unlowerable> {
        let count = i64::try_from(copies).map_err(|_| Unlowerable::new("too many copies"))?;
        let full = self.mbarriers("full_barrier", count);
        let mut setup = self.mbarrier_setup(&[(full, 1)], count);
        setup.push(Stmt::Barrier);
        self.sync.barrier_placed();
        out.push(Stmt::Block {
            origin: Some(entity),
            label: "the copies' mbarriers, initialised by thread 0".to_owned(),
            body: setup,
        });
        Ok(full)
    }

    /// Each copy's boxes for iteration `var`, issued by thread 0 on `full[j]`.
    fn tma_issues(
        &mut self,
        entity: EntityId,
        (var, extent): (VarId, ExprId),
        boxes: &[TmaCopy],
        full: BufferId,
    ) -> Result<Vec<Vec<Stmt>>, Unlowerable> {
        let mut issues = Vec::with_capacity(boxes.len());
        for (j, copy) in boxes.iter().enumerate() {
            let exprs = &mut self.program.exprs;
            let (index, zero, ko) = (
                exprs.int(i64::try_from(j).unwrap_or(0)),
                exprs.int(0),
                exprs.var_expr(var),
            );
            let barrier = Place {
                buffer: full,
                index,
            };
            let copies = std::slice::from_ref(copy);
            let stmts = self.boxes_on_barrier(var, copies, (barrier, zero), ko)?;
            let pipeline = single_copy_pipeline(entity, copy.producer, (var, extent));
            let stmts = self.with_iteration_binds(&pipeline, stmts)?;
            let elected = self.thread_is(0);
            issues.push(vec![Stmt::If {
                cond: elected,
                then: stmts,
                otherwise: Vec::new(),
            }]);
        }
        Ok(issues)
    }

    /// Iteration 0's copies in commit order (each its own group on `cp.async`).
    fn first_copies(
        &mut self,
        issues: &[Vec<Stmt>],
        form: CopyForm,
        var: VarId,
        extent: ExprId,
    ) -> Stmt {
        let zero = self.program.exprs.int(0);
        let mut first = Vec::new();
        for issue in issues {
            first.extend(rewrite::substitute_stmts(&mut self.program, issue, &|v| {
                (v == var).then_some(zero)
            }));
            if let CopyForm::Async = form {
                first.push(Stmt::AsyncCommit);
            }
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
        (issues, form): (&[Vec<Stmt>], CopyForm),
        (var, extent): (VarId, ExprId),
    ) -> Result<Vec<Stmt>, Unlowerable> {
        let exprs = &mut self.program.exprs;
        let (current, one, two) = (exprs.var_expr(var), exprs.int(1), exprs.int(2));
        let next = exprs.add(current, one);
        let parity = exprs.floormod(current, two);
        let mut out = Vec::new();
        self.sync.begin_loop();
        for (position, &child) in body.iter().enumerate() {
            if copies.iter().any(|copy| copy.producer == child) {
                continue;
            }
            self.wait_for_copies(copies, position, (form, parity), &mut out);
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
                if let CopyForm::Async = form {
                    out.push(Stmt::AsyncCommit);
                }
            }
        }
        let may_run_zero_times = self.program.exprs.as_int(extent).is_none_or(|n| n < 1);
        self.sync.end_loop(&mut out, may_run_zero_times);
        Ok(out)
    }

    /// The waits before the statement at `position` for the copies it is the first reader of:
    /// a `cp.async` wait and a barrier that publishes every thread's copies, or each copy's
    /// mbarrier phase of this iteration.
    fn wait_for_copies(
        &mut self,
        copies: &[CopySchedule],
        position: usize,
        (form, parity): (CopyForm, ExprId),
        out: &mut Vec<Stmt>,
    ) {
        let waiting = || {
            copies
                .iter()
                .enumerate()
                .filter(move |(_, copy)| copy.wait_before == position)
        };
        match form {
            CopyForm::Async => {
                if let Some(pending) = waiting().map(|(_, copy)| copy.pending).min() {
                    out.extend([Stmt::AsyncWait { pending }, Stmt::Barrier]);
                    self.sync.barrier_placed();
                }
            }
            CopyForm::Tma { full } => {
                for (j, _) in waiting() {
                    let index = self.program.exprs.int(i64::try_from(j).unwrap_or(0));
                    out.push(Stmt::MbarrierWait {
                        barrier: Place {
                            buffer: full,
                            index,
                        },
                        parity,
                    });
                }
            }
        }
    }
}

/// The pipeline of one copy of a single-stage loop, for the helpers shared with the staged one.
fn single_copy_pipeline(
    entity: EntityId,
    producer: EntityId,
    (var, extent): (VarId, ExprId),
) -> Pipeline {
    Pipeline {
        entity,
        producers: vec![producer],
        var,
        extent,
        stages: 1,
    }
}
