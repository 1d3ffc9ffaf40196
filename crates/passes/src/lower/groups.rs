//! Hand-written warp specialization: statements that a condition on the thread index gives to a
//! group of threads (`with T.ws(1):`, `if tx >= 128:`), the user's mbarriers, and copies that
//! complete on them (`T.tma_copy(..., barrier=b)`).
//!
//! A group's statements are lowered as if its threads were a block of their own: the layouts
//! inference made for them number the group's threads from 0, so lowering binds a thread index
//! of its own (`tx - start`) at the top of the branch and uses it wherever it would use the
//! block's; the user's own reads of the thread index keep the block's. Barriers inside a group
//! become named barriers among its threads, since the other threads never reach them.
//!
//! The user's protocol orders what the barriers carry: the destination of a copy that completes
//! on an mbarrier is not tracked by barrier insertion, because no `__syncthreads` can order an
//! asynchronous copy; the wait on the mbarrier does. The emulator checks the protocol: a wait
//! that can never pass is a deadlock naming every blocked wait, and a read of a stage before its
//! copy has landed is reported.

use tilec_ir::thread::{Place, Stmt, ValueId};
use tilec_ir::visit::{VisitorMut, walk_body_mut, walk_stmt_mut};
use tilec_ir::{BarrierRef, ControlOp, EntityId, EntityKind, Scope, TileOp, World};

use super::{Lowering, Unlowerable};
use crate::thread_groups::{ThreadGroup, ThreadGroups};

/// Named barriers 0–3 are `__syncthreads` and tilec's own warp specialization's; the groups of
/// hand-written code take the ones after.
const FIRST_GROUP_BARRIER: u32 = 4;
/// The named barriers a block has.
const NAMED_BARRIERS: u32 = 16;

/// Whether the launch synchronises its threads by hand: it allocates mbarriers or gives
/// statements to groups of its threads. tilec then keeps its own schedule out of the way: no
/// software pipelining, warp specialization or persistence of its own, which would reorder the
/// statements the user's protocol orders.
pub(crate) fn hand_synchronized(world: &World, launch: EntityId, groups: &ThreadGroups) -> bool {
    crate::liveness::linearize(world, launch)
        .into_iter()
        .any(|entity| {
            world.scopes.get(entity) == Some(&Scope::Barrier) || groups.narrowed(entity).is_some()
        })
}

/// Whether `entity`'s body, nested statements included, holds a `T.sync_grid()`. tilec then
/// keeps its own schedule out of that body: a persistent launch would pass the barrier once per
/// tile (blocks with fewer tiles would never meet the others), and a warp-specialized loop would
/// reach it with one role only.
pub(crate) fn holds_grid_barrier(world: &World, entity: EntityId) -> bool {
    crate::liveness::linearize(world, entity)
        .into_iter()
        .any(|e| matches!(world.ops.get(e), Some(TileOp::Control(ControlOp::SyncGrid))))
}

impl Lowering<'_> {
    /// Declares the launch's `T.alloc_barrier` arrays after everything else in shared memory, and
    /// returns their initialisation: thread 0 initialises each mbarrier with its arrival count,
    /// then a block barrier publishes them before any thread uses one.
    pub(super) fn declare_barriers(&mut self) -> Vec<Stmt> {
        let world = self.world;
        let mut inits = Vec::new();
        for entity in crate::liveness::linearize(world, self.launch) {
            let (Some(EntityKind::Buffer), Some(counts)) =
                (world.kind(entity), world.barrier_counts.get(entity))
            else {
                continue;
            };
            // The front end allows a few barriers per buffer; a length always fits `i64`.
            let id = self.mbarriers(
                world.name(entity),
                i64::try_from(counts.len()).unwrap_or(i64::MAX),
            );
            self.buffers.insert(entity, id);
            for (index, &count) in (0_i64..).zip(counts) {
                let index = self.program.exprs.int(index);
                inits.push(Stmt::MbarrierInit {
                    barrier: Place { buffer: id, index },
                    count,
                });
            }
        }
        if inits.is_empty() {
            return Vec::new();
        }
        let first = self.thread_is(0);
        vec![
            Stmt::If {
                cond: first,
                then: inits,
                otherwise: Vec::new(),
            },
            Stmt::Barrier,
        ]
    }

    /// `T.mbarrier_arrive`, `T.mbarrier_wait_parity`, `T.mbarrier_expect_tx` and
    /// `T.fence_proxy_async`, executed by every thread that reaches them.
    pub(super) fn barrier_control(
        &mut self,
        control: &ControlOp,
        stmts: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        match control {
            ControlOp::BarrierArrive { barrier } => {
                let (barrier, index) = self.barrier(barrier)?;
                stmts.push(Stmt::MbarrierArrive {
                    barrier: Place {
                        buffer: barrier,
                        index,
                    },
                    expect_bytes: None,
                });
            }
            ControlOp::BarrierWait { barrier, parity } => {
                let (barrier, index) = self.barrier(barrier)?;
                let exprs = &mut self.program.exprs;
                let two = exprs.int(2);
                let parity = exprs.floormod(*parity, two);
                stmts.push(Stmt::MbarrierWait {
                    barrier: Place {
                        buffer: barrier,
                        index,
                    },
                    parity,
                });
            }
            ControlOp::BarrierExpectTx { barrier, bytes } => {
                let (barrier, index) = self.barrier(barrier)?;
                let bytes = self
                    .program
                    .exprs
                    .as_int(*bytes)
                    .and_then(|bytes| u32::try_from(bytes).ok())
                    .ok_or_else(|| {
                        Unlowerable::new(
                            "`T.mbarrier_expect_tx` with a byte count not known at compile time",
                        )
                    })?;
                stmts.push(Stmt::MbarrierExpectTx {
                    barrier: Place {
                        buffer: barrier,
                        index,
                    },
                    bytes,
                });
            }
            ControlOp::FenceProxyAsync => stmts.push(Stmt::FenceProxyAsync),
            ControlOp::SyncThreads { .. }
            | ControlOp::NamedBarrierArrive(_)
            | ControlOp::SyncWarp
            | ControlOp::PdlSync
            | ControlOp::PdlTrigger
            | ControlOp::ThreadReturn
            | ControlOp::DeviceAssert { .. }
            | ControlOp::RngInit { .. }
            | ControlOp::SyncGrid => {
                return Err(Unlowerable::new("not a barrier operation"));
            }
        }
        Ok(())
    }

    fn barrier(
        &self,
        barrier: &BarrierRef,
    ) -> Result<(tilec_ir::thread::BufferId, tilec_ir::ExprId), Unlowerable> {
        Ok((self.buffer_of(barrier.buffer)?, barrier.index))
    }

    /// `T.tma_copy(src, dst, barrier=b)` from global to shared memory: one thread of those that
    /// reach it announces the copy's bytes on `b` and issues its TMA boxes, which complete on
    /// `b`. Returns the block's label, or `None` where TMA is off or no box covers the
    /// destination's layout: the copy is then made by the threads themselves, before anyone
    /// arrives on the barrier, which orders it as well.
    pub(super) fn barrier_copy(
        &mut self,
        entity: EntityId,
        barrier: &BarrierRef,
        out: &mut Vec<Stmt>,
    ) -> Result<Option<String>, Unlowerable> {
        if !self.options.tma {
            return Ok(None);
        }
        let Ok(plan) = self.plan_tma(&[entity]).map(|mut plans| plans.remove(0)) else {
            return Ok(None);
        };
        let (barrier_buffer, barrier_index) = self.barrier(barrier)?;
        let dst = self.buffer_of(plan.shared)?;
        let bytes = u32::try_from(plan.bytes)
            .map_err(|_| Unlowerable::new("a TMA copy of more than 4 GiB"))?;
        let mut issue = vec![Stmt::MbarrierExpectTx {
            barrier: Place {
                buffer: barrier_buffer,
                index: barrier_index,
            },
            bytes,
        }];
        for tma_box in &plan.boxes {
            issue.push(Stmt::TmaLoad {
                map: tma_box.map,
                dst: Place {
                    buffer: dst,
                    index: self.program.exprs.int(tma_box.shared_offset),
                },
                coords: tma_box.coords.clone(),
                barrier: Place {
                    buffer: barrier_buffer,
                    index: barrier_index,
                },
            });
        }
        let first = self.thread_is(0);
        out.push(Stmt::If {
            cond: first,
            then: issue,
            otherwise: Vec::new(),
        });
        Ok(Some(format!(
            "T.tma_copy into `{}`: {} TMA box(es), completing on `{}`",
            self.world.name(plan.shared),
            plan.boxes.len(),
            self.world.name(barrier.buffer)
        )))
    }

    /// The group the statements of a branch run on, when it is narrower than the threads the
    /// lowering is working for now.
    pub(super) fn branch_group(&self, body: &[EntityId]) -> Option<ThreadGroup> {
        let group = self.groups.narrowed(*body.first()?)?;
        (Some(group) != self.group).then_some(group)
    }

    /// Lowers `body` for the threads of `group` only (see the module comment).
    pub(super) fn lower_group(
        &mut self,
        group: ThreadGroup,
        body: &[EntityId],
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let mut stmts = Vec::new();
        let saved = (self.program.thread, self.threads, self.group);
        let group_sync = self.sync.for_group();
        let outer_sync = std::mem::replace(&mut self.sync, group_sync);
        self.group = Some(group);
        // An `elif` chain (`if tx < 128: ... elif tx < 256: ... elif ...`): the group of the
        // `else` is only the `if` that splits it further, whose branches bind thread indices of
        // their own; binding none here keeps the chain an `if` / `else if` chain, which the
        // emulator runs branch by branch side by side.
        let elif_chain = matches!(body, [only] if self.splits_further(*only, group));
        if !elif_chain {
            let local = self
                .program
                .exprs
                .var(&format!("tx_{}", group.start), Some(group.extent));
            let exprs = &mut self.program.exprs;
            let block_thread = exprs.var_expr(self.block_thread);
            let start = exprs.int(group.start);
            let value = exprs.sub(block_thread, start);
            stmts.push(Stmt::Let { var: local, value });
            self.program.thread = local;
            self.threads = group.extent;
        }
        let result = body
            .iter()
            .try_for_each(|&child| self.statement(child, &mut stmts));
        (self.program.thread, self.threads, self.group) = saved;
        self.sync = outer_sync;
        result?;
        // Nested groups narrowed their own barriers already: what is left is this group's.
        if tilec_ir::thread::any_stmt(&stmts, |stmt| matches!(stmt, Stmt::Barrier)) {
            let barrier_id = self.group_barrier(group)?;
            let threads = u32::try_from(group.extent).map_err(|_| {
                Unlowerable::new(format!(
                    "a thread group of {} threads cannot synchronise on a named barrier",
                    group.extent
                ))
            })?;
            narrow_barriers(&mut stmts, barrier_id, threads);
        }
        out.extend(stmts);
        Ok(())
    }

    /// Whether `entity` is a runtime `if` each of whose branches runs on a group narrower than
    /// `group` (or is empty).
    fn splits_further(&self, entity: EntityId, group: ThreadGroup) -> bool {
        if self.world.kind(entity) != Some(EntityKind::If) {
            return false;
        }
        let narrower = |body: &[EntityId]| match body.first() {
            None => true,
            Some(&first) => self
                .groups
                .narrowed(first)
                .is_some_and(|inner| inner != group),
        };
        let otherwise = self
            .world
            .else_bodies
            .get(entity)
            .map_or(&[][..], Vec::as_slice);
        narrower(self.world.body(entity)) && narrower(otherwise)
    }

    /// The named barrier of `group`'s threads: one per distinct group of the launch.
    fn group_barrier(&mut self, group: ThreadGroup) -> Result<u32, Unlowerable> {
        let position = match self.group_barriers.iter().position(|&g| g == group) {
            Some(position) => position,
            None => {
                self.group_barriers.push(group);
                self.group_barriers.len() - 1
            }
        };
        // The ids the user's own `T.sync_threads(barrier_id, ...)` and
        // `T.named_barrier_arrive(...)` name are theirs: the groups take the others.
        let taken = self.user_barrier_ids();
        let free: Vec<u32> = (FIRST_GROUP_BARRIER..NAMED_BARRIERS)
            .filter(|id| !taken.contains(id))
            .collect();
        free.get(position).copied().ok_or_else(|| {
            Unlowerable::new(format!(
                "more than {} distinct thread groups synchronise separately (a block has \
                 {NAMED_BARRIERS} named barriers, and the kernel names {} itself)",
                free.len(),
                taken.len()
            ))
        })
    }

    /// The hardware barrier ids the launch's code names itself.
    fn user_barrier_ids(&self) -> Vec<u32> {
        let mut ids = Vec::new();
        for entity in crate::liveness::linearize(self.world, self.launch) {
            let named = match self.world.ops.get(entity) {
                Some(TileOp::Control(
                    ControlOp::SyncThreads { named: Some(named) }
                    | ControlOp::NamedBarrierArrive(named),
                )) => named,
                _ => continue,
            };
            if !ids.contains(&named.id) {
                ids.push(named.id);
            }
        }
        ids
    }

    /// Whether the copy's destination is written by an asynchronous copy that completes on a
    /// user's mbarrier (so barrier insertion leaves its ordering to the user's protocol).
    pub(super) fn completes_on_barrier(&self, entity: EntityId) -> bool {
        self.world.copy_barriers.get(entity).is_some()
    }
}

/// Chains consecutive `if`s of disjoint thread groups into one `if` / `else if` chain (`with
/// T.ws(0): ...` then `with T.ws(1): ...`). The threads of the second never take the first, so the
/// chain does what the sequence does; it also says what the GPU does with it — the groups' warps
/// run side by side, not one group after the other — in a form the emulator runs so (it runs the
/// branches of a divergent `if` chain that waits on mbarriers concurrently).
pub(super) fn chain_group_ifs(stmts: &mut Vec<Stmt>, group_ifs: &[(ValueId, ThreadGroup)]) {
    ChainGroupIfs(group_ifs).visit_body(stmts);
}

/// Chains the group `if`s of every statement list, nested lists first.
struct ChainGroupIfs<'a>(&'a [(ValueId, ThreadGroup)]);

impl VisitorMut for ChainGroupIfs<'_> {
    fn visit_body(&mut self, stmts: &mut Vec<Stmt>) {
        walk_body_mut(self, stmts);
        chain_list(stmts, self.0);
    }
}

/// Chains the consecutive group `if`s of one statement list.
fn chain_list(stmts: &mut Vec<Stmt>, group_ifs: &[(ValueId, ThreadGroup)]) {
    let group_of = |stmt: &Stmt| {
        let Stmt::If {
            cond, otherwise, ..
        } = stmt
        else {
            return None;
        };
        let (_, group) = group_ifs.iter().find(|(c, _)| c == cond)?;
        otherwise.is_empty().then_some(*group)
    };
    let mut chained: Vec<Stmt> = Vec::with_capacity(stmts.len());
    let mut run: Vec<(Stmt, ThreadGroup)> = Vec::new();
    for stmt in stmts.drain(..) {
        match group_of(&stmt) {
            Some(group) if run.iter().all(|(_, other)| disjoint(*other, group)) => {
                run.push((stmt, group));
            }
            Some(group) => {
                chained.extend(fold_chain(std::mem::take(&mut run)));
                run.push((stmt, group));
            }
            None => {
                chained.extend(fold_chain(std::mem::take(&mut run)));
                chained.push(stmt);
            }
        }
    }
    chained.extend(fold_chain(run));
    *stmts = chained;
}

/// Whether two thread groups share no thread.
pub(super) fn disjoint(a: ThreadGroup, b: ThreadGroup) -> bool {
    a.start + a.extent <= b.start || b.start + b.extent <= a.start
}

/// `if a: A` `if b: B` `if c: C` as `if a: A else: (if b: B else: (if c: C))`.
fn fold_chain(run: Vec<(Stmt, ThreadGroup)>) -> Option<Stmt> {
    let mut folded: Option<Stmt> = None;
    for (stmt, _) in run.into_iter().rev() {
        folded = Some(match (stmt, folded) {
            (
                Stmt::If {
                    cond,
                    then,
                    otherwise: _,
                },
                Some(rest),
            ) => Stmt::If {
                cond,
                then,
                otherwise: vec![rest],
            },
            (stmt, _) => stmt,
        });
    }
    folded
}

/// Replaces the block-wide barriers of `stmts`, nested ones included, by named barrier `id` among
/// `threads` threads: those of a thread group, or of warp specialization's consumers. Named
/// barriers already there (a nested group's own) stay as they are.
pub(super) fn narrow_barriers(stmts: &mut [Stmt], id: u32, threads: u32) {
    walk_body_mut(&mut NarrowBarriers { id, threads }, stmts);
}

struct NarrowBarriers {
    id: u32,
    threads: u32,
}

impl VisitorMut for NarrowBarriers {
    fn visit_stmt(&mut self, stmt: &mut Stmt) {
        if let Stmt::Barrier = stmt {
            *stmt = Stmt::NamedBarrier {
                id: self.id,
                threads: self.threads,
            };
        }
        walk_stmt_mut(self, stmt);
    }
}
