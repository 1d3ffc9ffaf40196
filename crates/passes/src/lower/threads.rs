//! Which statements of a launch compute something different in each thread: those that read the
//! thread index (`T.get_thread_binding`, `T.get_lane_idx`, ...), directly or through a
//! per-thread buffer or variable written from it, or that sit under a condition that does.
//!
//! A store outside parallel loops to shared or global memory normally has one writer (thread 0,
//! every thread computing the same element and value); a thread-dependent one is per-thread code
//! that every thread runs, as TileLang runs it. Tile operations and parallel loops, which all the
//! threads of the block carry out together, cannot sit under a thread-dependent condition.

use std::collections::BTreeSet;

use tilec_ir::{
    AtomicSource, DataExpr, DataId, EntityId, EntityKind, ExprId, Scope, TileOp, VarId, World,
};

/// The thread-dependent per-thread buffers of one launch.
#[derive(Clone, Debug, Default)]
pub(super) struct ThreadDependence {
    thread: Option<VarId>,
    /// Local buffers and `T.alloc_var` variables some thread-dependent store writes.
    privates: BTreeSet<EntityId>,
    /// The variables of run-time scalars (`EntityKind::Bind`) whose value differs between
    /// threads: index arithmetic over them does too.
    bound: BTreeSet<VarId>,
}

impl ThreadDependence {
    /// The dependence of the statements of `launch`, whose thread index is `thread` when the
    /// kernel reads it.
    pub(super) fn new(world: &World, thread: Option<VarId>) -> ThreadDependence {
        let mut dependence = ThreadDependence {
            thread,
            privates: BTreeSet::new(),
            bound: BTreeSet::new(),
        };
        if thread.is_none() {
            return dependence;
        }
        // A private buffer written from a thread-dependent value makes its readers
        // thread-dependent in turn: iterate until nothing changes.
        loop {
            let mut changed = false;
            for (entity, store) in world.stores.iter() {
                let target = world.storage_of(store.buffer);
                if dependence.privates.contains(&target) || !is_private(world, target) {
                    continue;
                }
                if dependence.statement(world, entity) {
                    dependence.privates.insert(target);
                    changed = true;
                }
            }
            for (_, binding) in world.bindings.iter() {
                if !dependence.bound.contains(&binding.var) && dependence.data(world, binding.value)
                {
                    dependence.bound.insert(binding.var);
                    changed = true;
                }
            }
            if !changed {
                return dependence;
            }
        }
    }

    /// Whether the index expression reads the thread index.
    pub(super) fn index(&self, world: &World, e: ExprId) -> bool {
        self.thread.is_some_and(|thread| {
            world
                .exprs
                .vars_of(e)
                .iter()
                .any(|var| *var == thread || self.bound.contains(var))
        })
    }

    /// Whether the data expression reads the thread index or a thread-dependent private buffer.
    pub(super) fn data(&self, world: &World, value: DataId) -> bool {
        if self.thread.is_none() {
            return false;
        }
        let mut seen = BTreeSet::new();
        let mut stack = vec![value];
        while let Some(id) = stack.pop() {
            if id.index() >= world.data.len() || !seen.insert(id) {
                continue;
            }
            let node = world.data.get(id);
            let depends = match node {
                DataExpr::Index(e) => self.index(world, *e),
                DataExpr::Load { buffer, indices } => {
                    self.privates.contains(&world.storage_of(*buffer))
                        || indices.iter().any(|&i| self.index(world, i))
                }
                DataExpr::ReadVar(var) => self.privates.contains(var),
                // Another lane's value, a reduction every lane computes, and a draw from the
                // thread's own generator differ between threads.
                DataExpr::Shuffle { .. } | DataExpr::WarpReduce { .. } | DataExpr::Random(_) => {
                    true
                }
                DataExpr::Float { .. }
                | DataExpr::Int { .. }
                | DataExpr::Neg(_)
                | DataExpr::Not(_)
                | DataExpr::Binary { .. }
                | DataExpr::Compare { .. }
                | DataExpr::Call { .. }
                | DataExpr::Cast { .. }
                | DataExpr::Select { .. }
                | DataExpr::Reinterpret { .. } => false,
            };
            if depends {
                return true;
            }
            stack.extend(node.operands());
        }
        false
    }

    /// Whether the statement (a store, an element `T.atomic_add`, or any entity for its
    /// conditions) differs between threads: its own indices and value, or a condition or loop
    /// extent around it.
    pub(super) fn statement(&self, world: &World, entity: EntityId) -> bool {
        if self.thread.is_none() {
            return false;
        }
        if let Some(store) = world.stores.get(entity)
            && (store.indices.iter().any(|&i| self.index(world, i))
                || self.data(world, store.value))
        {
            return true;
        }
        if let Some(TileOp::Atomic {
            dst,
            src: AtomicSource::Value(value),
            ..
        }) = world.ops.get(entity)
            && (dst.dims.iter().any(|dim| self.index(world, dim.start)) || self.data(world, *value))
        {
            return true;
        }
        self.under_thread_condition(world, entity)
    }

    /// Whether a condition or loop extent around `entity` (up to its launch) differs between
    /// threads.
    pub(super) fn under_thread_condition(&self, world: &World, entity: EntityId) -> bool {
        let mut current = entity;
        while let Some(&parent) = world.parents.get(current) {
            let depends = match world.kind(parent) {
                Some(EntityKind::If) => world
                    .conditions
                    .get(parent)
                    .is_some_and(|&cond| self.data(world, cond)),
                Some(EntityKind::Loop) => world
                    .loops
                    .get(parent)
                    .is_some_and(|info| info.extents.iter().any(|&e| self.index(world, e))),
                Some(
                    EntityKind::Param
                    | EntityKind::Kernel
                    | EntityKind::Buffer
                    | EntityKind::Var
                    | EntityKind::TileOp
                    | EntityKind::Store
                    | EntityKind::Bind,
                )
                | None => false,
            };
            if depends {
                return true;
            }
            current = parent;
        }
        false
    }
}

/// A buffer each thread has its own copy of, in full.
fn is_private(world: &World, buffer: EntityId) -> bool {
    world.kind(buffer) == Some(EntityKind::Var)
        || matches!(
            world.scopes.get(buffer),
            Some(Scope::Local | Scope::LocalVar)
        )
}
