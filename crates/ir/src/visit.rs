//! The one walker of the thread program: the only place that knows which statements nest
//! statement lists, so that a new statement with a body is descended into by every walk.
//!
//! It works as ruff's `ruff_python_ast::visitor` does. A [`Visitor`] (or a [`VisitorMut`], to
//! rewrite the program in place) overrides `visit_stmt` or `visit_body` for what it cares about and
//! calls [`walk_stmt`] / [`walk_body`] (or [`walk_stmt_mut`] / [`walk_body_mut`]) for the rest; the
//! default methods do nothing but walk, so a visitor that overrides nothing visits every statement,
//! nested ones included, in program order.
//!
//! The walk recurses, one native frame per nesting level of the program. That is as deep as the
//! source nests, which the analysis thread's stack allows for (`tilec_frontend::ANALYSIS_STACK_BYTES`);
//! a caller that must not recurse uses [`for_each_stmt`](crate::thread::for_each_stmt), which keeps
//! its own stack.

use crate::thread::Stmt;

/// The statement lists nested directly in a statement, as `[Option<body>; 2]`: a loop's or
/// block's body, an `if`'s two branches, the two roles of warp specialization, `None` for a leaf.
///
/// This match lists every statement and is the only one that knows which of them nest others:
/// a new variant is a compile error here until it is listed. It is a macro because Rust cannot be
/// generic over the mutability of a reference, and the same match serves `&Stmt` (whose bindings
/// are shared references) and `&mut Stmt` (whose bindings are mutable ones).
macro_rules! nested_bodies {
    ($stmt:expr) => {
        match $stmt {
            Stmt::For { body, .. } | Stmt::Block { body, .. } | Stmt::While { body, .. } => {
                [Some(body), None]
            }
            Stmt::If {
                then, otherwise, ..
            } => [Some(then), Some(otherwise)],
            Stmt::WarpRoles {
                consumer, producer, ..
            } => [Some(consumer), Some(producer)],
            Stmt::Let { .. }
            | Stmt::Bind { .. }
            | Stmt::Store { .. }
            | Stmt::VectorCopy { .. }
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
            | Stmt::GridSync => [None, None],
        }
    };
}

impl Stmt {
    /// The statement lists nested directly in this statement (empty lists for a leaf, and for the
    /// missing second list of a loop or block), in program order.
    pub fn bodies(&self) -> [&[Stmt]; 2] {
        nested_bodies!(self).map(|body| body.map_or(&[][..], Vec::as_slice))
    }

    /// [`Stmt::bodies`], to rewrite them: `None` where the statement has no such list.
    pub fn bodies_mut(&mut self) -> [Option<&mut Vec<Stmt>>; 2] {
        nested_bodies!(self)
    }
}

/// A walk over the thread program that reads it. `'a` is the program's lifetime, so that a
/// visitor may keep references to what it visits.
pub trait Visitor<'a> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        walk_stmt(self, stmt);
    }

    fn visit_body(&mut self, body: &'a [Stmt]) {
        walk_body(self, body);
    }
}

/// Visits the statement lists nested directly in `stmt`, in program order.
pub fn walk_stmt<'a, V: Visitor<'a> + ?Sized>(visitor: &mut V, stmt: &'a Stmt) {
    for body in nested_bodies!(stmt).into_iter().flatten() {
        visitor.visit_body(body);
    }
}

/// Visits each statement of `body`, in order.
pub fn walk_body<'a, V: Visitor<'a> + ?Sized>(visitor: &mut V, body: &'a [Stmt]) {
    for stmt in body {
        visitor.visit_stmt(stmt);
    }
}

/// A walk over the thread program that rewrites it in place. A statement list is visited as a
/// `Vec`, so that a visitor may insert, remove or replace statements of it.
pub trait VisitorMut {
    fn visit_stmt(&mut self, stmt: &mut Stmt) {
        walk_stmt_mut(self, stmt);
    }

    fn visit_body(&mut self, body: &mut Vec<Stmt>) {
        walk_body_mut(self, body);
    }
}

/// Visits the statement lists nested directly in `stmt`, in program order.
pub fn walk_stmt_mut<V: VisitorMut + ?Sized>(visitor: &mut V, stmt: &mut Stmt) {
    for body in stmt.bodies_mut().into_iter().flatten() {
        visitor.visit_body(body);
    }
}

/// Visits each statement of `body`, in order. It takes a slice, so that a visitor may start on
/// statements it cannot grow or shrink.
pub fn walk_body_mut<V: VisitorMut + ?Sized>(visitor: &mut V, body: &mut [Stmt]) {
    for stmt in body {
        visitor.visit_stmt(stmt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::ExprArena;
    use crate::thread::ValueId;

    fn program() -> Vec<Stmt> {
        let mut exprs = ExprArena::default();
        let extent = exprs.int(4);
        let var = exprs.var("i", Some(4));
        vec![
            Stmt::Barrier,
            Stmt::For {
                var,
                extent,
                unroll: false,
                body: vec![Stmt::If {
                    cond: ValueId(0),
                    then: vec![Stmt::Barrier],
                    otherwise: vec![Stmt::While {
                        cond: ValueId(1),
                        body: vec![Stmt::Barrier],
                    }],
                }],
            },
            Stmt::WarpRoles {
                consumers: 128,
                consumer: vec![Stmt::SyncWarp],
                producer: vec![Stmt::Barrier],
            },
        ]
    }

    /// The statements a visitor that overrides nothing else sees, by variant name, in the order
    /// it sees them.
    struct Names(Vec<String>);

    impl<'a> Visitor<'a> for Names {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            let debug = format!("{stmt:?}");
            let name = debug.split([' ', '{', '(']).next().unwrap_or_default();
            self.0.push(name.to_owned());
            walk_stmt(self, stmt);
        }
    }

    #[test]
    fn a_walk_visits_every_statement_in_program_order() {
        let stmts = program();
        let mut names = Names(Vec::new());
        names.visit_body(&stmts);
        assert_eq!(
            names.0,
            [
                "Barrier",
                "For",
                "If",
                "Barrier",
                "While",
                "Barrier",
                "WarpRoles",
                "SyncWarp",
                "Barrier"
            ]
        );
    }

    /// A rewrite reaches statements nested in every kind of body.
    #[test]
    fn a_rewrite_reaches_every_body() {
        struct Narrow;
        impl VisitorMut for Narrow {
            fn visit_stmt(&mut self, stmt: &mut Stmt) {
                if matches!(stmt, Stmt::Barrier) {
                    *stmt = Stmt::SyncWarp;
                }
                walk_stmt_mut(self, stmt);
            }
        }
        let mut stmts = program();
        Narrow.visit_body(&mut stmts);
        let mut barriers = 0;
        crate::thread::for_each_stmt(&stmts, &mut |stmt| {
            barriers += usize::from(matches!(stmt, Stmt::Barrier));
        });
        assert_eq!(barriers, 0);
    }
}
