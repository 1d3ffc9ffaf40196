//! Full tiles without their bounds guards.
//!
//! A tile whose rows may run past the end of a tensor (a ragged size, or a symbolic one the
//! compiler cannot compare with the tile) guards every element it loads or stores:
//! `if (bx * 4 + r < m)`. Only the last tile needs the guard, but every tile evaluates it, and the
//! branches keep the compiler from issuing a thread's loads together (a row softmax with a symbolic
//! row count ran 1.31× slower than with a static one, and as fast once the guards were gone:
//! BENCHMARKS.md, fourteenth session).
//!
//! A guard `e < b` is split into the part of `e` that the statement's own loop variables and the
//! thread index move (`r`, whose range is known) and the rest (`u`); `u + max(r) < b` then says the
//! guard holds for every element the statement touches. The statement becomes
//! `if (every such condition) { statement without those guards } else { statement }`. The condition
//! is a sufficient one for the executing thread whatever `u` is, so the fast copy is exact; it is
//! the same for the whole block when `u` depends on block indices and scalars only, which is the
//! common case. Statements that synchronize are left alone, since their threads could take
//! different copies.

use std::collections::{BTreeSet, VecDeque};

use tilec_ir::data::{BinaryOp, CompareOp};
use tilec_ir::thread::{Stmt, Value, ValueId};
use tilec_ir::visit::{Visitor, VisitorMut, walk_body_mut, walk_stmt};
use tilec_ir::{Expr, ExprArena, ExprId, VarId};

use super::Lowering;

/// A guard's comparison, as the block-level condition that proves it: `lhs op rhs`.
type Proof = (CompareOp, ExprId, ExprId);

impl Lowering<'_> {
    /// `stmts` (one tile operation's statements) versioned on its full tiles, or as they are when
    /// no guard in them can be proven at the block level.
    pub(super) fn version_on_full_tiles(&mut self, stmts: Vec<Stmt>) -> Vec<Stmt> {
        if !stmts.iter().all(plain) {
            return stmts;
        }
        let mut inner = vec![self.program.thread];
        let (mut guards, mut bound) = (Vec::new(), Vec::new());
        collect(&stmts, &mut inner, (&mut guards, &mut bound));
        let mut proofs: Vec<Proof> = Vec::new();
        let mut removable = BTreeSet::new();
        for guard in guards {
            if let Some(found) = self.guard_proofs(guard, (&inner, &bound)) {
                for proof in found {
                    if !proofs.contains(&proof) {
                        proofs.push(proof);
                    }
                }
                removable.insert(guard);
            }
        }
        let mut cond = None;
        for (op, lhs, rhs) in proofs {
            let holds = self.compare_indices(op, lhs, rhs);
            cond = Some(self.and(cond, holds));
        }
        // No guard to drop, or only guards that hold everywhere: nothing to version on.
        let Some(cond) = cond.filter(|_| !removable.is_empty()) else {
            return stmts;
        };
        let mut fast = stmts.clone();
        WithoutGuards(&removable).visit_body(&mut fast);
        vec![Stmt::If {
            cond,
            then: fast,
            otherwise: stmts,
        }]
    }

    /// The block-level conditions that prove every comparison of `guard`, or `None` when one of
    /// them cannot be proven so (or can only be proven false).
    fn guard_proofs(
        &mut self,
        guard: ValueId,
        (inner, bound): (&[VarId], &[VarId]),
    ) -> Option<Vec<Proof>> {
        let mut comparisons = Vec::new();
        self.comparisons(guard, &mut comparisons)?;
        let mut proofs = Vec::new();
        for (op, lhs, rhs) in comparisons {
            let proof = tile_proof(&mut self.program.exprs, (op, lhs, rhs), inner)?;
            // The condition is evaluated before the statements: what they bind is not known yet.
            let exprs = &self.program.exprs;
            let reads_bound = [proof.1, proof.2]
                .iter()
                .any(|&e| exprs.vars_of(e).iter().any(|v| bound.contains(v)));
            if reads_bound {
                return None;
            }
            match constant_truth(&self.program.exprs, proof) {
                Some(true) => {}
                Some(false) => return None,
                None => proofs.push(proof),
            }
        }
        Some(proofs)
    }

    /// The index comparisons a guard is the conjunction of, or `None` if it is anything else.
    fn comparisons(&self, value: ValueId, out: &mut Vec<Proof>) -> Option<()> {
        match *self.program.value(value) {
            Value::Binary {
                op: BinaryOp::And,
                lhs,
                rhs,
                ..
            } => {
                self.comparisons(lhs, out)?;
                self.comparisons(rhs, out)
            }
            Value::Compare { op, lhs, rhs } => {
                let (&Value::Index(lhs), &Value::Index(rhs)) =
                    (self.program.value(lhs), self.program.value(rhs))
                else {
                    return None;
                };
                out.push((op, lhs, rhs));
                Some(())
            }
            _ => None,
        }
    }
}

/// `u + max(r) < rhs` (or the matching form of another comparison) for `lhs = u + r`, where `r`
/// is what the `inner` variables move; `None` when `rhs` depends on them, `lhs` mixes them with
/// other variables in one term, or their range is unknown.
fn tile_proof(exprs: &mut ExprArena, (op, lhs, rhs): Proof, inner: &[VarId]) -> Option<Proof> {
    let moves = |exprs: &ExprArena, e: ExprId| exprs.vars_of(e).iter().any(|v| inner.contains(v));
    if moves(exprs, rhs) {
        return None;
    }
    let mut terms = Vec::new();
    flatten_sum(exprs, lhs, true, &mut terms);
    let (mut uniform, mut low, mut high) = (exprs.int(0), 0i64, 0i64);
    for (term, positive) in terms {
        if !moves(exprs, term) {
            uniform = match positive {
                true => exprs.add(uniform, term),
                false => exprs.sub(uniform, term),
            };
            continue;
        }
        if exprs.vars_of(term).iter().any(|v| !inner.contains(v)) {
            return None;
        }
        let (lo, hi) = exprs.bounds(term)?;
        let (lo, hi) = if positive { (lo, hi) } else { (-hi, -lo) };
        low = low.checked_add(lo)?;
        high = high.checked_add(hi)?;
    }
    let extreme = match op {
        CompareOp::Lt | CompareOp::Le => high,
        CompareOp::Gt | CompareOp::Ge => low,
        CompareOp::Eq | CompareOp::Ne => return None,
    };
    let shift = exprs.int(extreme);
    Some((op, exprs.add(uniform, shift), rhs))
}

/// The signed terms of a sum.
fn flatten_sum(exprs: &ExprArena, e: ExprId, positive: bool, out: &mut Vec<(ExprId, bool)>) {
    match *exprs.get(e) {
        Expr::Add(a, b) => {
            flatten_sum(exprs, a, positive, out);
            flatten_sum(exprs, b, positive, out);
        }
        Expr::Sub(a, b) => {
            flatten_sum(exprs, a, positive, out);
            flatten_sum(exprs, b, !positive, out);
        }
        Expr::Int(_)
        | Expr::Var(_)
        | Expr::Mul(..)
        | Expr::FloorDiv(..)
        | Expr::FloorMod(..)
        | Expr::Min(..)
        | Expr::Max(..) => out.push((e, positive)),
    }
}

/// Whether a comparison of two constants holds; `None` if either is not constant.
fn constant_truth(exprs: &ExprArena, (op, lhs, rhs): Proof) -> Option<bool> {
    Some(op.holds(exprs.as_int(lhs)?, exprs.as_int(rhs)?))
}

/// Whether a statement is one a versioned copy may hold: loops, bindings, guarded and plain
/// stores and copies, nothing that synchronizes threads or has an effect a second copy would
/// repeat differently.
fn plain(stmt: &Stmt) -> bool {
    match stmt {
        Stmt::For { body, .. } | Stmt::Block { body, .. } => body.iter().all(plain),
        Stmt::If {
            then, otherwise, ..
        } => then.iter().chain(otherwise).all(plain),
        Stmt::Let { .. } | Stmt::Store { .. } | Stmt::VectorCopy { .. } => true,
        Stmt::Bind { .. }
        | Stmt::While { .. }
        | Stmt::Atomic { .. }
        | Stmt::Barrier
        | Stmt::AsyncCopy { .. }
        | Stmt::AsyncCommit
        | Stmt::AsyncWait { .. }
        | Stmt::LoadMatrix { .. }
        | Stmt::Mma { .. }
        | Stmt::Wgmma { .. }
        | Stmt::WgmmaFence
        | Stmt::WgmmaCommit
        | Stmt::WgmmaWait { .. }
        | Stmt::FenceProxyAsync
        | Stmt::MbarrierInit { .. }
        | Stmt::MbarrierInval { .. }
        | Stmt::MbarrierArrive { .. }
        | Stmt::MbarrierExpectTx { .. }
        | Stmt::MbarrierWait { .. }
        | Stmt::TmaLoad { .. }
        | Stmt::TmaStore { .. }
        | Stmt::TmaStoreWait
        | Stmt::WarpRoles { .. }
        | Stmt::SetMaxRegisters { .. }
        | Stmt::NamedBarrier { .. }
        | Stmt::NamedBarrierArrive { .. }
        | Stmt::WarpgroupTurn { .. }
        | Stmt::SyncWarp
        | Stmt::Return
        | Stmt::Assert { .. }
        | Stmt::GridDependencyWait
        | Stmt::LaunchDependents
        | Stmt::CallExtern { .. }
        | Stmt::RngInit { .. }
        | Stmt::GridSync => false,
    }
}

/// The loop variables of `stmts` (added to `inner`), the conditions of its `if`s (`guards`) and the
/// variables its `let`s bind (`bound`).
fn collect(
    stmts: &[Stmt],
    inner: &mut Vec<VarId>,
    (guards, bound): (&mut Vec<ValueId>, &mut Vec<VarId>),
) {
    struct Collector<'v> {
        inner: &'v mut Vec<VarId>,
        guards: &'v mut Vec<ValueId>,
        bound: &'v mut Vec<VarId>,
    }
    impl<'a> Visitor<'a> for Collector<'_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if let Stmt::For { var, .. } = stmt {
                self.inner.push(*var);
            }
            if let Stmt::If { cond, .. } = stmt {
                self.guards.push(*cond);
            }
            if let Stmt::Let { var, .. } = stmt {
                self.bound.push(*var);
            }
            walk_stmt(self, stmt);
        }
    }
    Collector {
        inner,
        guards,
        bound,
    }
    .visit_body(stmts);
}

/// Replaces each `if` whose condition is proven by its `then` statements.
struct WithoutGuards<'p>(&'p BTreeSet<ValueId>);

impl VisitorMut for WithoutGuards<'_> {
    fn visit_body(&mut self, body: &mut Vec<Stmt>) {
        let mut pending: VecDeque<Stmt> = std::mem::take(body).into();
        let mut out = Vec::with_capacity(pending.len());
        while let Some(stmt) = pending.pop_front() {
            // The `then` statements may be proven guards themselves: they go back in line.
            if let Stmt::If { cond, then, .. } = &stmt
                && self.0.contains(cond)
            {
                for inner in then.iter().rev() {
                    pending.push_front(inner.clone());
                }
                continue;
            }
            out.push(stmt);
        }
        walk_body_mut(self, &mut out);
        *body = out;
    }
}
