//! FlashAttention-3's schedule for a warp-specialized loop whose consumers run two wgmma gemms
//! with other arithmetic between them (attention: `S = Q Kᵀ`, the online softmax, `O += P V`).
//!
//! Lowered as written, each consumer warpgroup waits for its first gemm, runs the softmax while the
//! tensor cores idle, then waits for its second gemm. The rotated loop issues iteration `k`'s first
//! gemm and iteration `k - 1`'s second gemm back to back, waits only for the first
//! (`wgmma.wait_group 1`), and runs the part of the softmax that does not touch the second gemm's
//! operands while that gemm still runs:
//!
//! ```text
//! k = 0:       wait(A 0); pre; [take turn] G1 issue [pass turn]; wait_group 0; release(A 0);
//!              mid_a; post; mid_b
//! k = 1..n:    wait(A k); pre; [take turn] G1(k) issue; wait(B k-1); G2(k-1) issue [pass turn]
//!              wait_group 1; release(A k); mid_a; post; wait_group 0; release(B k-1); mid_b
//! after:       wait(B n-1); G2(n-1) issue; wait_group 0; release(B n-1)
//! ```
//!
//! `mid_a` is what lies between the gemms and neither touches the second gemm's buffers nor
//! depends on a statement that does; `mid_b` is the rest (attention's rescaling of `O` and the cast
//! of `P`), which must wait for the second gemm. `post` (after the second gemm) must be independent
//! of both. The consumer warpgroups also take turns at issuing each iteration's pair of gemms, so
//! one warpgroup's softmax runs while the other's gemms do (FlashAttention-3's "ping-pong").
//!
//! The stage splits in two halves with their own full and empty mbarriers: B, the copies only the
//! second gemm reads (attention's V), and A, the others (K), which nothing after the first gemm may
//! read. A is released as soon as the first gemm retires and B once the second does, so the
//! producer refills K while V is still in use; with one barrier per stage K's refill would wait
//! for the late second gemm too (on the H200 that version measured 2.29 ms, no faster than the loop
//! as written, against 2.12 ms with the halves split).
//!
//! Whether two statements may trade places is decided on the kernel world's accesses of the
//! entities they were lowered from: buffers each reads and writes, aliases resolved.

use std::collections::BTreeSet;

use tilec_ir::thread::{BufferId, Place, Stmt, TurnStep};
use tilec_ir::{EntityId, ExprId, VarId, World};

use super::pipeline::Pipeline;
use super::{Lowering, rewrite};

/// The buffers (storage entities) a lowered statement reads and writes.
#[derive(Clone, Debug, Default)]
struct Footprint {
    reads: BTreeSet<EntityId>,
    writes: BTreeSet<EntityId>,
}

impl Footprint {
    /// Whether running `self` and `other` in the other order could change a result: one writes
    /// what the other reads or writes.
    fn conflicts(&self, other: &Footprint) -> bool {
        let touches = |f: &Footprint, b: &EntityId| f.reads.contains(b) || f.writes.contains(b);
        self.writes.iter().any(|b| touches(other, b))
            || other.writes.iter().any(|b| self.reads.contains(b))
    }

    /// Everything the footprints together read and write.
    fn union<'f>(footprints: impl IntoIterator<Item = &'f Footprint>) -> Footprint {
        let mut all = Footprint::default();
        footprints.into_iter().for_each(|f| all.join(f));
        all
    }

    fn join(&mut self, other: &Footprint) {
        self.reads.extend(other.reads.iter().copied());
        self.writes.extend(other.writes.iter().copied());
    }
}

/// One of the loop's two gemm blocks, split where its issue ends.
struct GemmIssue {
    /// The block with its statements up to and including the commit.
    issue: Stmt,
    footprint: Footprint,
}

/// The consumer iteration, cut into the parts the rotation moves.
struct TwoGemmIteration {
    /// What `pre`, the first gemm and `mid` touch before the second gemm, and what `mid` and
    /// `post` touch after the first: where a stage's copies may be read.
    before_second: Footprint,
    after_first: Footprint,
    wait: Stmt,
    pre: Vec<Stmt>,
    first: GemmIssue,
    mid_a: Vec<Stmt>,
    mid_b: Vec<Stmt>,
    second: GemmIssue,
    post: Vec<Stmt>,
}

impl TwoGemmIteration {
    /// The stage's wait, `pre` and the first gemm's issue.
    fn own_issue(&self) -> Vec<Stmt> {
        let mut stmts = vec![self.wait.clone()];
        stmts.extend(self.pre.iter().cloned());
        stmts.push(self.first.issue.clone());
        stmts
    }

    /// What runs once the first gemm has retired and while the second may still run.
    fn after_first_gemm(&self) -> Vec<Stmt> {
        let mut stmts = self.mid_a.clone();
        stmts.extend(self.post.iter().cloned());
        stmts
    }
}

/// The mbarriers a rotated loop releases and waits for itself: `empty` for the A half of each
/// stage, `late_full` and `late_empty` for the B half (the iteration's first statement, which the
/// loop keeps, waits for the A half's full barrier).
#[derive(Clone, Copy, Debug)]
pub(super) struct HalfBarriers {
    pub empty: BufferId,
    pub late_full: BufferId,
    pub late_empty: BufferId,
}

/// A loop the rotation applies to: its parts, and which of the pipeline's copies (by position)
/// fill the B half of a stage.
pub(super) struct OverlapPlan {
    parts: TwoGemmIteration,
    pub late_copies: Vec<bool>,
}

impl Lowering<'_> {
    /// Whether FlashAttention-3's schedule applies to the consumer iteration `body` (the stage's
    /// wait, then the consumer statements): two wgmma gemms, every move the rotation makes
    /// between independent statements, at least two warpgroups, a constant trip count of at
    /// least one, and the stage's copies split into a half only the second gemm reads and a half
    /// nothing after the first gemm reads.
    pub(super) fn overlap_plan(
        &self,
        pipeline: &Pipeline,
        body: &[Stmt],
        dsts: &[EntityId],
        warpgroups: u32,
    ) -> Option<OverlapPlan> {
        let extent = self.program.exprs.as_int(pipeline.extent)?;
        if extent < 1 || warpgroups < 2 {
            return None;
        }
        let parts = self.two_gemm_iteration(body)?;
        let mut late_copies = Vec::new();
        for &dst in dsts {
            let dst = self.world.storage_of(dst);
            let read = |f: &Footprint| f.reads.contains(&dst) || f.writes.contains(&dst);
            let by_second = read(&parts.second.footprint);
            let after_first = by_second || read(&parts.after_first);
            match (by_second, read(&parts.before_second)) {
                (true, false) => late_copies.push(true),
                (false, _) if !after_first => late_copies.push(false),
                _ => return None,
            }
        }
        let late = late_copies.iter().filter(|&&late| late).count();
        if late == 0 || late == late_copies.len() {
            return None;
        }
        Some(OverlapPlan { parts, late_copies })
    }

    /// The rotated consumer loop of `plan` (see the module documentation).
    pub(super) fn overlapped_gemm_loop(
        &mut self,
        pipeline: &Pipeline,
        plan: &OverlapPlan,
        barriers: HalfBarriers,
        warpgroups: u32,
    ) -> Vec<Stmt> {
        let parts = &plan.parts;
        let var = pipeline.var;
        let extent = self.program.exprs.as_int(pipeline.extent).unwrap_or(1);
        let name = self.program.exprs.var_info(var).name.clone();
        let exprs = &mut self.program.exprs;
        let (zero, one) = (exprs.int(0), exprs.int(1));
        let last = exprs.int(extent - 1);
        // The rotated loop runs iterations 1..n over a counter from 0: `previous` is k - 1.
        let step = exprs.var(&name, Some(extent - 1));
        let previous = exprs.var_expr(step);
        let current = exprs.add(previous, one);
        let turn = |step| Stmt::WarpgroupTurn {
            step,
            warpgroups,
            first_barrier: super::specialize::TURN_BARRIERS,
        };

        // The first iteration's gemm is issued in turns too: warpgroup 0's softmax then runs while
        // warpgroup 1's gemm does, instead of both softmaxes running with the tensor cores idle.
        let mut prologue = parts.own_issue();
        let issue = prologue.len() - 1;
        prologue.splice(issue..issue, [turn(TurnStep::Start), turn(TurnStep::Take)]);
        prologue.push(turn(TurnStep::Pass));
        prologue.push(Stmt::WgmmaWait { pending: 0 });
        prologue.push(self.release(barriers.empty, zero, pipeline.stages));
        prologue.extend(parts.after_first_gemm());
        prologue.extend(parts.mid_b.iter().cloned());
        let mut out = self.at(var, zero, &prologue);
        let body =
            self.rotated_iteration(pipeline, parts, (barriers, warpgroups), (previous, current));
        out.push(Stmt::For {
            var: step,
            extent: self.program.exprs.int(extent - 1),
            unroll: false,
            body,
        });
        out.push(turn(TurnStep::End));
        out.extend(self.second_gemm(pipeline, parts, barriers.late_full, last));
        out.push(Stmt::WgmmaWait { pending: 0 });
        out.push(self.release(barriers.late_empty, last, pipeline.stages));
        out
    }

    /// One iteration `current` of the rotated loop, which also finishes iteration `previous`: its
    /// own first gemm and the previous second one issued in one turn of the warpgroups, then what
    /// may run while the second gemm does, then what needs it.
    fn rotated_iteration(
        &mut self,
        pipeline: &Pipeline,
        parts: &TwoGemmIteration,
        (barriers, warpgroups): (HalfBarriers, u32),
        (previous, current): (ExprId, ExprId),
    ) -> Vec<Stmt> {
        let (var, stages) = (pipeline.var, pipeline.stages);
        let turn = |step| Stmt::WarpgroupTurn {
            step,
            warpgroups,
            first_barrier: super::specialize::TURN_BARRIERS,
        };
        let mut stmts = self.at(var, current, &parts.own_issue());
        stmts.insert(stmts.len() - 1, turn(TurnStep::Take));
        stmts.extend(self.second_gemm(pipeline, parts, barriers.late_full, previous));
        stmts.push(turn(TurnStep::Pass));
        stmts.push(Stmt::WgmmaWait { pending: 1 });
        stmts.push(self.release(barriers.empty, current, stages));
        stmts.extend(self.at(var, current, &parts.after_first_gemm()));
        stmts.push(Stmt::WgmmaWait { pending: 0 });
        stmts.push(self.release(barriers.late_empty, previous, stages));
        stmts.extend(self.at(var, current, &parts.mid_b));
        stmts
    }

    /// `stmts` with the loop variable `var` replaced by `value`.
    fn at(&mut self, var: VarId, value: ExprId, stmts: &[Stmt]) -> Vec<Stmt> {
        rewrite::substitute_stmts(&mut self.program, stmts, &|v| (v == var).then_some(value))
    }

    /// The wait for iteration `ko`'s B half, then the issue of its second gemm.
    fn second_gemm(
        &mut self,
        pipeline: &Pipeline,
        parts: &TwoGemmIteration,
        late_full: BufferId,
        ko: ExprId,
    ) -> Vec<Stmt> {
        let (index, parity) = self.stage_and_parity(ko, pipeline.stages, false);
        let mut stmts = vec![Stmt::MbarrierWait {
            barrier: Place {
                buffer: late_full,
                index,
            },
            parity,
        }];
        stmts.extend(self.at(pipeline.var, ko, std::slice::from_ref(&parts.second.issue)));
        stmts
    }

    /// Every consumer thread's arrival on `empty` for the stage of iteration `ko`.
    fn release(&mut self, empty: BufferId, ko: ExprId, stages: i64) -> Stmt {
        let (index, _) = self.stage_and_parity(ko, stages, false);
        Stmt::MbarrierArrive {
            barrier: Place {
                buffer: empty,
                index,
            },
            expect_bytes: None,
        }
    }

    /// Cuts the consumer iteration into the rotation's parts, checking every move it makes.
    fn two_gemm_iteration(&self, body: &[Stmt]) -> Option<TwoGemmIteration> {
        let (wait, rest) = body.split_first()?;
        if !matches!(wait, Stmt::MbarrierWait { .. }) {
            return None;
        }
        let gemms: Vec<usize> = rest
            .iter()
            .enumerate()
            .filter(|(_, stmt)| is_wgmma_block(stmt))
            .map(|(at, _)| at)
            .collect();
        let [g1, g2] = gemms[..] else {
            return None;
        };
        let footprints: Vec<Footprint> = rest
            .iter()
            .map(|stmt| self.footprint(stmt))
            .collect::<Option<_>>()?;
        let first = gemm_issue(&rest[g1], footprints[g1].clone())?;
        let second = gemm_issue(&rest[g2], footprints[g2].clone())?;
        // `pre` and the first gemm of iteration k run before the second gemm of k - 1 is issued.
        if (0..=g1).any(|at| footprints[at].conflicts(&second.footprint)) {
            return None;
        }
        let (mut mid_a, mut mid_b) = (Vec::new(), Vec::new());
        let mut waits_for_second = second.footprint.clone();
        for at in g1 + 1..g2 {
            if footprints[at].conflicts(&waits_for_second) {
                waits_for_second.join(&footprints[at]);
                mid_b.push(rest[at].clone());
            } else {
                mid_a.push(rest[at].clone());
            }
        }
        // `post` runs while the second gemm is in flight, and before `mid_b`.
        if footprints[g2 + 1..]
            .iter()
            .any(|f| f.conflicts(&waits_for_second))
        {
            return None;
        }
        let after_first = (g1 + 1..rest.len()).filter(|&at| at != g2);
        Some(TwoGemmIteration {
            before_second: Footprint::union(&footprints[..g2]),
            after_first: Footprint::union(after_first.map(|at| &footprints[at])),
            wait: wait.clone(),
            pre: rest[..g1].to_vec(),
            first,
            mid_a,
            mid_b,
            second,
            post: rest[g2 + 1..].to_vec(),
        })
    }

    /// What a consumer statement reads and writes, from the accesses of the entity it was lowered
    /// from; `None` for a statement that is not such a block or that synchronizes threads.
    fn footprint(&self, stmt: &Stmt) -> Option<Footprint> {
        let Stmt::Block {
            origin: Some(entity),
            body,
            ..
        } = stmt
        else {
            return None;
        };
        let synchronizes = tilec_ir::thread::any_stmt(body, |s| {
            matches!(
                s,
                Stmt::Barrier
                    | Stmt::NamedBarrier { .. }
                    | Stmt::WarpgroupTurn { .. }
                    | Stmt::MbarrierWait { .. }
                    | Stmt::MbarrierArrive { .. }
                    | Stmt::MbarrierExpectTx { .. }
            )
        });
        if synchronizes {
            return None;
        }
        let mut footprint = Footprint::default();
        entity_footprint(self.world, *entity, &mut footprint);
        Some(footprint)
    }
}

/// Adds the accesses of `entity` and of every statement nested in it.
fn entity_footprint(world: &World, entity: EntityId, footprint: &mut Footprint) {
    for access in world.accesses.get(entity).into_iter().flatten() {
        let buffer = world.storage_of(access.region.buffer);
        match access.kind {
            tilec_ir::AccessKind::Read => {
                footprint.reads.insert(buffer);
            }
            tilec_ir::AccessKind::Write => {
                footprint.writes.insert(buffer);
            }
            tilec_ir::AccessKind::ReadWrite => {
                footprint.reads.insert(buffer);
                footprint.writes.insert(buffer);
            }
        }
    }
    let nested = world.body(entity).iter();
    let otherwise = world.else_bodies.get(entity).into_iter().flatten();
    for &child in nested.chain(otherwise) {
        entity_footprint(world, child, footprint);
    }
}

fn is_wgmma_block(stmt: &Stmt) -> bool {
    matches!(stmt, Stmt::Block { body, .. } if tilec_ir::thread::uses_wgmma(body))
}

/// A gemm block cut after its commit; `None` unless it ends with the commit and a wait for it.
fn gemm_issue(block: &Stmt, footprint: Footprint) -> Option<GemmIssue> {
    let Stmt::Block {
        origin,
        label,
        body,
    } = block
    else {
        return None;
    };
    let [
        issue @ ..,
        Stmt::WgmmaCommit,
        Stmt::WgmmaWait { pending: 0 },
    ] = &body[..]
    else {
        return None;
    };
    let mut stmts = issue.to_vec();
    stmts.push(Stmt::WgmmaCommit);
    Some(GemmIssue {
        issue: Stmt::Block {
            origin: *origin,
            label: label.clone(),
            body: stmts,
        },
        footprint,
    })
}
