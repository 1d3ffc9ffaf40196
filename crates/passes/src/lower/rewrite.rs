//! Rewriting statements after they were lowered: index expressions substituted through the arena's
//! simplifying constructors, and loads and stores redirected to other buffers.
//!
//! Lowering first emits one iteration of a laid-out loop over the loop's own variables (`i`, `j`)
//! and binds them with `let`s. Substituting the bindings afterwards is what lets the arena see
//! through them: a fragment's register index becomes a function of the step counter alone (so an
//! unrolled loop addresses registers by constants, never through local memory), and global
//! addresses become affine in the step, which is what vectorization needs to prove contiguity.

use rustc_hash::FxHashMap;
use tilec_ir::thread::{
    BufferId, ExternArg, MatrixDescriptor, Place, Stmt, Value, ValueId, WgmmaA,
};
use tilec_ir::{ExprArena, ExprId, ThreadProgram};

/// What a rewrite changes at the leaves of statements and values.
pub(super) trait Leaves {
    /// The replacement of an index expression.
    fn expr(&mut self, arena: &mut ExprArena, e: ExprId) -> ExprId;

    /// Where a load of `buffer[index]` (index already rewritten) reads instead.
    fn load(
        &mut self,
        _arena: &mut ExprArena,
        buffer: BufferId,
        index: ExprId,
    ) -> (BufferId, ExprId) {
        (buffer, index)
    }

    /// Where a store to `buffer[index]` (index already rewritten) writes instead.
    fn store(
        &mut self,
        _arena: &mut ExprArena,
        buffer: BufferId,
        index: ExprId,
    ) -> (BufferId, ExprId) {
        (buffer, index)
    }
}

/// Rewrites statements and the value nodes they use, sharing rewritten values the way the
/// originals were shared (a value used twice is rewritten once).
pub(super) struct Rewriter<'p, L> {
    program: &'p mut ThreadProgram,
    leaves: L,
    memo: FxHashMap<ValueId, ValueId>,
}

impl<'p, L: Leaves> Rewriter<'p, L> {
    pub(super) fn new(program: &'p mut ThreadProgram, leaves: L) -> Self {
        Rewriter {
            program,
            leaves,
            memo: FxHashMap::default(),
        }
    }

    pub(super) fn stmts(&mut self, stmts: &[Stmt]) -> Vec<Stmt> {
        stmts.iter().map(|stmt| self.stmt(stmt)).collect()
    }

    fn expr(&mut self, e: ExprId) -> ExprId {
        self.leaves.expr(&mut self.program.exprs, e)
    }

    /// `place` with its index rewritten (its buffer stays: a store's redirect is `Leaves::store`).
    fn place(&mut self, place: Place) -> Place {
        Place {
            buffer: place.buffer,
            index: self.expr(place.index),
        }
    }

    fn stmt(&mut self, stmt: &Stmt) -> Stmt {
        match stmt {
            Stmt::For {
                var,
                extent,
                unroll,
                body,
            } => Stmt::For {
                var: *var,
                extent: self.expr(*extent),
                unroll: *unroll,
                body: self.stmts(body),
            },
            Stmt::Let { var, value } => Stmt::Let {
                var: *var,
                value: self.expr(*value),
            },
            Stmt::Bind { var, value } => Stmt::Bind {
                var: *var,
                value: self.value(*value),
            },
            Stmt::If {
                cond,
                then,
                otherwise,
            } => Stmt::If {
                cond: self.value(*cond),
                then: self.stmts(then),
                otherwise: self.stmts(otherwise),
            },
            Stmt::While { cond, body } => Stmt::While {
                cond: self.value(*cond),
                body: self.stmts(body),
            },
            Stmt::Store {
                place: Place { buffer, index },
                value,
            } => {
                let value = self.value(*value);
                let index = self.expr(*index);
                let (buffer, index) = self.leaves.store(&mut self.program.exprs, *buffer, index);
                Stmt::Store {
                    place: Place { buffer, index },
                    value,
                }
            }
            Stmt::VectorCopy { dst, src, lanes } => Stmt::VectorCopy {
                dst: self.place(*dst),
                src: self.place(*src),
                lanes: *lanes,
            },
            Stmt::Atomic {
                op,
                place: Place { buffer, index },
                value,
                old,
            } => Stmt::Atomic {
                op: *op,
                place: Place {
                    buffer: *buffer,
                    index: self.expr(*index),
                },
                value: self.value(*value),
                old: old.map(|old| self.place(old)),
            },
            Stmt::Barrier => Stmt::Barrier,
            Stmt::SyncWarp => Stmt::SyncWarp,
            Stmt::Return => Stmt::Return,
            Stmt::Assert { cond, message } => Stmt::Assert {
                cond: self.value(*cond),
                message: message.clone(),
            },
            Stmt::GridDependencyWait => Stmt::GridDependencyWait,
            Stmt::LaunchDependents => Stmt::LaunchDependents,
            // A pointer may be written through, so it follows where stores go.
            Stmt::CallExtern { name, args } => Stmt::CallExtern {
                name: name.clone(),
                args: args
                    .iter()
                    .map(|arg| match *arg {
                        ExternArg::Pointer(Place { buffer, index }) => {
                            let index = self.expr(index);
                            let (buffer, index) =
                                self.leaves.store(&mut self.program.exprs, buffer, index);
                            ExternArg::Pointer(Place { buffer, index })
                        }
                        ExternArg::Value(value) => ExternArg::Value(self.value(value)),
                    })
                    .collect(),
            },
            Stmt::GridSync => Stmt::GridSync,
            Stmt::RngInit {
                seed,
                subsequence,
                offset,
            } => Stmt::RngInit {
                seed: self.value(*seed),
                subsequence: self.value(*subsequence),
                offset: self.value(*offset),
            },
            Stmt::AsyncCopy { dst, src, lanes } => Stmt::AsyncCopy {
                dst: self.place(*dst),
                src: self.place(*src),
                lanes: *lanes,
            },
            Stmt::AsyncCommit => Stmt::AsyncCommit,
            Stmt::AsyncWait { pending } => Stmt::AsyncWait { pending: *pending },
            Stmt::LoadMatrix {
                matrices,
                transpose,
                dst,
                src,
            } => Stmt::LoadMatrix {
                matrices: *matrices,
                transpose: *transpose,
                dst: self.place(*dst),
                src: self.place(*src),
            },
            Stmt::Mma { a, b, c } => Stmt::Mma {
                a: self.place(*a),
                b: self.place(*b),
                c: self.place(*c),
            },
            Stmt::Wgmma { n, a, b, c } => Stmt::Wgmma {
                n: *n,
                a: match a {
                    WgmmaA::Shared(descriptor) => WgmmaA::Shared(self.descriptor(descriptor)),
                    WgmmaA::Registers(registers) => WgmmaA::Registers(self.place(*registers)),
                },
                b: self.descriptor(b),
                c: self.place(*c),
            },
            Stmt::WgmmaFence => Stmt::WgmmaFence,
            Stmt::WgmmaCommit => Stmt::WgmmaCommit,
            Stmt::WgmmaWait { pending } => Stmt::WgmmaWait { pending: *pending },
            Stmt::FenceProxyAsync => Stmt::FenceProxyAsync,
            Stmt::MbarrierInit { barrier, count } => Stmt::MbarrierInit {
                barrier: self.place(*barrier),
                count: *count,
            },
            Stmt::MbarrierInval { barrier } => Stmt::MbarrierInval {
                barrier: self.place(*barrier),
            },
            Stmt::MbarrierArrive {
                barrier,
                expect_bytes,
            } => Stmt::MbarrierArrive {
                barrier: self.place(*barrier),
                expect_bytes: *expect_bytes,
            },
            Stmt::MbarrierExpectTx { barrier, bytes } => Stmt::MbarrierExpectTx {
                barrier: self.place(*barrier),
                bytes: *bytes,
            },
            Stmt::MbarrierWait { barrier, parity } => Stmt::MbarrierWait {
                barrier: self.place(*barrier),
                parity: self.expr(*parity),
            },
            Stmt::TmaLoad {
                map,
                dst,
                coords,
                barrier,
            } => Stmt::TmaLoad {
                map: *map,
                dst: self.place(*dst),
                coords: coords.iter().map(|&c| self.expr(c)).collect(),
                barrier: self.place(*barrier),
            },
            Stmt::TmaStore { map, src, coords } => Stmt::TmaStore {
                map: *map,
                src: self.place(*src),
                coords: coords.iter().map(|&c| self.expr(c)).collect(),
            },
            Stmt::TmaStoreWait => Stmt::TmaStoreWait,
            Stmt::WarpRoles {
                consumers,
                consumer,
                producer,
            } => Stmt::WarpRoles {
                consumers: *consumers,
                consumer: self.stmts(consumer),
                producer: self.stmts(producer),
            },
            Stmt::SetMaxRegisters { count, increase } => Stmt::SetMaxRegisters {
                count: *count,
                increase: *increase,
            },
            Stmt::NamedBarrier { id, threads } => Stmt::NamedBarrier {
                id: *id,
                threads: *threads,
            },
            Stmt::NamedBarrierArrive { id, threads } => Stmt::NamedBarrierArrive {
                id: *id,
                threads: *threads,
            },
            Stmt::WarpgroupTurn { .. } => stmt.clone(),
            Stmt::Block {
                origin,
                label,
                body,
            } => Stmt::Block {
                origin: *origin,
                label: label.clone(),
                body: self.stmts(body),
            },
        }
    }

    fn descriptor(&mut self, descriptor: &MatrixDescriptor) -> MatrixDescriptor {
        MatrixDescriptor {
            start: self.expr(descriptor.start),
            ..descriptor.clone()
        }
    }

    pub(super) fn value(&mut self, id: ValueId) -> ValueId {
        if let Some(&done) = self.memo.get(&id) {
            return done;
        }
        let rewritten = match self.program.value(id).clone() {
            Value::Index(e) => Value::Index(self.expr(e)),
            Value::Load { buffer, index } => {
                let index = self.expr(index);
                let (buffer, index) = self.leaves.load(&mut self.program.exprs, buffer, index);
                Value::Load { buffer, index }
            }
            Value::Unary { op, arg, dtype } => Value::Unary {
                op,
                arg: self.value(arg),
                dtype,
            },
            Value::Binary {
                op,
                lhs,
                rhs,
                dtype,
            } => Value::Binary {
                op,
                lhs: self.value(lhs),
                rhs: self.value(rhs),
                dtype,
            },
            Value::Compare { op, lhs, rhs } => Value::Compare {
                op,
                lhs: self.value(lhs),
                rhs: self.value(rhs),
            },
            Value::Cast { dtype, value } => Value::Cast {
                dtype,
                value: self.value(value),
            },
            Value::Select {
                cond,
                then,
                otherwise,
                dtype,
            } => Value::Select {
                cond: self.value(cond),
                then: self.value(then),
                otherwise: self.value(otherwise),
                dtype,
            },
            Value::ShuffleXor { value, mask, dtype } => Value::ShuffleXor {
                value: self.value(value),
                mask,
                dtype,
            },
            Value::Shuffle {
                kind,
                value,
                lane,
                width,
                mask,
                dtype,
            } => Value::Shuffle {
                kind,
                value: self.value(value),
                lane: self.value(lane),
                width: self.value(width),
                mask: self.value(mask),
                dtype,
            },
            leaf @ (Value::Float { .. } | Value::Int { .. } | Value::Random(_)) => leaf,
        };
        // An unchanged node keeps its id, so untouched values stay shared with the rest of the
        // program.
        let result = if &rewritten == self.program.value(id) {
            id
        } else {
            self.program.add_value(rewritten)
        };
        self.memo.insert(id, result);
        result
    }
}

/// Substitutes variables in index expressions.
pub(super) struct Substitution<'m> {
    map: &'m dyn Fn(tilec_ir::VarId) -> Option<ExprId>,
    memo: FxHashMap<ExprId, ExprId>,
}

impl<'m> Substitution<'m> {
    pub(super) fn new(map: &'m dyn Fn(tilec_ir::VarId) -> Option<ExprId>) -> Self {
        Substitution {
            map,
            memo: FxHashMap::default(),
        }
    }
}

impl Leaves for Substitution<'_> {
    fn expr(&mut self, arena: &mut ExprArena, e: ExprId) -> ExprId {
        if let Some(&done) = self.memo.get(&e) {
            return done;
        }
        let result = arena.substitute(e, self.map);
        self.memo.insert(e, result);
        result
    }
}

/// Substitutes `map` into `stmts`.
pub(super) fn substitute_stmts(
    program: &mut ThreadProgram,
    stmts: &[Stmt],
    map: &dyn Fn(tilec_ir::VarId) -> Option<ExprId>,
) -> Vec<Stmt> {
    Rewriter::new(program, Substitution::new(map)).stmts(stmts)
}
