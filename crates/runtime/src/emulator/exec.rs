//! Statements executed in lockstep: each statement runs for all threads executing it before the next
//! statement starts.
//!
//! A statement list runs with a fixed list of threads (ascending), the "active" threads: all threads
//! of the block at the top, the threads whose condition held (or failed) inside an `if`. Within a
//! statement every value is computed for all active threads first and memory is written afterwards,
//! thread by thread in ascending order, as a warp's single instruction would.
//!
//! The roles of a `WarpRoles` statement run concurrently as resumable tasks (see `roles.rs`), which
//! hand every statement that holds no mbarrier wait back to `exec` here.

use std::time::{Duration, Instant};

use tilec_ir::thread::{AtomicOp, Place, Stmt, ValueId};
use tilec_ir::{EntityId, ExprId, ThreadProgram, VarId};

use super::error::{EmulatorError, ErrorKind, Fault};
use super::eval::Frame;
use super::index::{BatchFault, Binding, Env, Indexer, UniformFault};
use super::mbarrier::Mbarriers;
use super::memory::{BufferInfo, Memory};
use super::tma::{MapInfo, TmaOperands};
use super::{EmulatorReport, index_i64, thread_u32};

/// What the read half of a vector copy produced, one entry per element: the thread, the
/// destination index and the value read.
pub(super) type VectorRead = (Vec<u32>, Vec<i64>, Vec<f64>);

/// Everything a running program touches.
#[derive(Debug)]
pub(super) struct Machine<'p, 't> {
    pub program: &'p ThreadProgram,
    pub buffers: Vec<BufferInfo<'p>>,
    pub threads: usize,
    pub memory: Memory<'t>,
    pub env: Env,
    pub indexer: Indexer<'p>,
    pub frame: Frame,
    /// The enclosing statement blocks, innermost last.
    pub sites: Vec<(Option<EntityId>, &'p str)>,
    /// The running block's index.
    pub block: [u32; 3],
    /// The blocks along x that the run launches (what `gridDim.x` reads).
    pub blocks: u32,
    /// The blocks the run launches in all.
    pub grid_blocks: u64,
    pub report: EmulatorReport,
    /// Bindings shadowed by `let`s, restored when their statement list ends.
    pub shadowed: Vec<(usize, Binding)>,
    /// Each thread's async copies not landed yet.
    pub asyncs: Vec<super::warp::AsyncQueue>,
    /// Each warpgroup's wgmmas not executed yet.
    pub wgmmas: Vec<super::wgmma::WgmmaQueue>,
    /// The running block's mbarriers.
    pub mbarriers: Mbarriers,
    /// The running block's warpgroup turn-taking.
    pub turns: super::turns::Turns,
    /// The running block's named barriers.
    pub named: super::named::NamedBarriers,
    /// The running block's threads that have returned (`Stmt::Return`): they execute nothing
    /// more and count as arrived at every later barrier.
    pub exited: Vec<bool>,
    pub exited_count: usize,
    /// The running block's threads' random generators, `None` until `T.rng_init` starts one.
    pub generators: Vec<Option<super::random::Philox>>,
    /// The TMA tensor maps, evaluated for this run.
    pub maps: Vec<MapInfo>,
    /// When the run must stop, and the budget that set it (see `run_program_within`).
    pub deadline: Option<(Instant, Duration)>,
}

/// How many statements run between two looks at the clock: a look costs about as much as a
/// simple statement, and a few thousand statements take well under a millisecond.
const STATEMENTS_PER_CLOCK_CHECK: u64 = 4096;

impl<'p> Machine<'p, '_> {
    /// An error at the current site, charged to `thread`.
    pub(super) fn fault(&self, kind: ErrorKind, thread: Option<u32>) -> Fault {
        let site = self.sites.last();
        Box::new(EmulatorError {
            kind,
            origin: site.and_then(|(origin, _)| *origin),
            label: site.map(|(_, label)| (*label).to_owned()),
            block: Some(self.block),
            thread,
        })
    }

    /// Runs one block of the grid.
    pub(super) fn run_block(&mut self, block: [u32; 3]) -> Result<(), Fault> {
        self.begin_block(block);
        let all: Vec<u32> = (0..thread_u32(self.threads)).collect();
        let program = self.program;
        self.exec_list(&program.body, &all)?;
        self.finish_block()
    }

    /// Starts block `block`: fresh shared memory, barriers and thread states, and its indices
    /// bound.
    pub(super) fn begin_block(&mut self, block: [u32; 3]) {
        self.block = block;
        self.memory.begin_block();
        self.mbarriers.clear();
        self.turns.clear();
        self.named.clear();
        self.exited.iter_mut().for_each(|exited| *exited = false);
        self.exited_count = 0;
        self.generators
            .iter_mut()
            .for_each(|generator| *generator = None);
        let mut bound: Vec<(VarId, u32)> =
            self.program.block_index.into_iter().zip(block).collect();
        // A persistent program reads which block it is and how many run; its `let`s bind the
        // block indices of each tile it walks.
        if let Some(persistent) = self.program.persistent {
            bound = vec![
                (persistent.block, block[0]),
                (persistent.blocks, self.blocks),
            ];
        }
        for (var, index) in bound {
            if let Some(binding) = self.env.vars.get_mut(var.index()) {
                *binding = Binding::Uniform(i64::from(index));
            }
        }
        self.report.blocks += 1;
    }

    /// The checks at the end of a block: async copies, wgmmas, turns and mbarriers left open.
    pub(super) fn finish_block(&mut self) -> Result<(), Fault> {
        self.finish_async()?;
        self.finish_wgmma()?;
        self.finish_turns()?;
        self.finish_mbarriers()
    }

    fn exec_list(&mut self, stmts: &'p [Stmt], active: &[u32]) -> Result<(), Fault> {
        let shadowed = self.shadowed.len();
        // Threads that return stop running the rest of every enclosing list.
        let mut running: Option<Vec<u32>> = None;
        let mut exited = self.exited_count;
        if exited > 0 {
            running = Some(self.still_running(active));
        }
        for stmt in stmts {
            let current = running.as_deref().unwrap_or(active);
            if current.is_empty() {
                break;
            }
            self.exec(stmt, current)?;
            if self.exited_count != exited {
                exited = self.exited_count;
                running = Some(self.still_running(current));
            }
        }
        self.restore_shadowed(shadowed);
        Ok(())
    }

    /// The threads of `active` that have not returned.
    pub(super) fn still_running(&self, active: &[u32]) -> Vec<u32> {
        active
            .iter()
            .copied()
            .filter(|&t| !self.exited.get(t as usize).copied().unwrap_or(false))
            .collect()
    }

    fn exec_return(&mut self, active: &[u32]) {
        for &thread in active {
            if let Some(exited) = self.exited.get_mut(thread as usize)
                && !*exited
            {
                *exited = true;
                self.exited_count += 1;
            }
        }
    }

    fn exec_assert(&mut self, cond: ValueId, message: &str, active: &[u32]) -> Result<(), Fault> {
        let (_, failed) = self.split(cond, active)?;
        match failed.first() {
            Some(&thread) => Err(self.fault(
                ErrorKind::AssertionFailed {
                    message: message.to_owned(),
                },
                Some(thread),
            )),
            None => Ok(()),
        }
    }

    /// `__syncwarp()`: every running lane of each warp present must take part, and the warp's
    /// shared-memory accesses before it are ordered before its accesses after it (accesses of
    /// other warps still need a block barrier).
    fn exec_sync_warp(&mut self, active: &[u32]) -> Result<(), Fault> {
        let mut start = 0;
        while start < active.len() {
            let warp = active[start] / 32;
            let end = active[start..]
                .iter()
                .position(|&t| t / 32 != warp)
                .map_or(active.len(), |offset| start + offset);
            let first = (warp * 32) as usize;
            let last = (first + 32).min(self.threads);
            let lanes = (first..last)
                .filter(|&t| !self.exited.get(t).copied().unwrap_or(false))
                .count();
            if end - start != lanes {
                let kind = ErrorKind::DivergentWarpSync {
                    warp,
                    active: end - start,
                    lanes,
                };
                return Err(self.fault(kind, Some(active[start])));
            }
            self.memory.warp_sync(warp);
            start = end;
        }
        Ok(())
    }

    /// Undoes the `let`s made since the shadowing stack had `depth` entries.
    pub(super) fn restore_shadowed(&mut self, depth: usize) {
        while self.shadowed.len() > depth {
            if let Some((var, binding)) = self.shadowed.pop()
                && let Some(slot) = self.env.vars.get_mut(var)
            {
                *slot = binding;
            }
        }
    }

    /// Stops the run once its deadline has passed.
    fn check_deadline(&self) -> Result<(), Fault> {
        match self.deadline {
            Some((deadline, budget)) if Instant::now() >= deadline => {
                Err(self.fault(ErrorKind::OutOfTime { budget }, None))
            }
            Some(_) | None => Ok(()),
        }
    }

    /// Counts a statement executed by `lanes` threads and starts evaluating its values.
    pub(super) fn begin_statement(&mut self, lanes: usize) {
        self.report.statements += 1;
        self.report.thread_statements += lanes as u64;
        self.frame.begin(lanes);
    }

    pub(super) fn exec(&mut self, stmt: &'p Stmt, active: &[u32]) -> Result<(), Fault> {
        self.begin_statement(active.len());
        if self
            .report
            .statements
            .is_multiple_of(STATEMENTS_PER_CLOCK_CHECK)
        {
            self.check_deadline()?;
        }
        match stmt {
            Stmt::For {
                var, extent, body, ..
            } => self.exec_for(*var, *extent, body, active),
            Stmt::Let { var, value } => self.exec_let(*var, *value, active),
            Stmt::Bind { var, value } => self.exec_bind(*var, *value, active),
            Stmt::If {
                cond,
                then,
                otherwise,
            } => self.exec_if(*cond, then, otherwise, active),
            Stmt::While { cond, body } => self.exec_while(*cond, body, active),
            Stmt::Store {
                place: Place { buffer, index },
                value,
            } => self.exec_store(buffer.index(), *index, *value, active),
            Stmt::VectorCopy { dst, src, lanes } => self.exec_vector_copy(
                [dst.buffer.index(), src.buffer.index()],
                [dst.index, src.index],
                *lanes,
                active,
            ),
            Stmt::Atomic {
                op,
                place: Place { buffer, index },
                value,
                old,
            } => {
                let old = old.map(|old| (old.buffer.index(), old.index));
                self.exec_atomic(*op, (buffer.index(), *index), *value, old, active)
            }
            Stmt::Barrier => self.exec_barrier(active),
            Stmt::SyncWarp => self.exec_sync_warp(active),
            Stmt::Return => {
                self.exec_return(active);
                Ok(())
            }
            Stmt::Assert { cond, message } => self.exec_assert(*cond, message, active),
            Stmt::CallExtern { name, .. } => Err(self.fault(
                ErrorKind::ExternCall { name: name.clone() },
                active.first().copied(),
            )),
            // Grids run one after another here: what a dependent launch waits for is done.
            Stmt::GridDependencyWait | Stmt::LaunchDependents => Ok(()),
            Stmt::RngInit {
                seed,
                subsequence,
                offset,
            } => self.exec_rng_init([*seed, *subsequence, *offset], active),
            Stmt::GridSync => self.exec_grid_sync(active),
            Stmt::AsyncCopy { dst, src, lanes } => self.exec_async_copy(
                [dst.buffer.index(), src.buffer.index()],
                [dst.index, src.index],
                *lanes,
                active,
            ),
            Stmt::AsyncCommit => {
                self.exec_async_commit(active);
                Ok(())
            }
            Stmt::AsyncWait { pending } => self.exec_async_wait(*pending, active),
            Stmt::LoadMatrix {
                matrices,
                transpose,
                dst,
                src,
            } => self.exec_load_matrix(
                (*matrices, *transpose),
                [dst.buffer.index(), src.buffer.index()],
                [dst.index, src.index],
                active,
            ),
            Stmt::Mma { a, b, c } => self.exec_mma(
                [a.buffer.index(), b.buffer.index(), c.buffer.index()],
                [a.index, b.index, c.index],
                active,
            ),
            Stmt::Wgmma { n, a, b, c } => {
                self.exec_wgmma(*n, (a, b), (c.buffer.index(), c.index), active)
            }
            Stmt::WgmmaCommit => self.exec_wgmma_commit(active),
            Stmt::WgmmaWait { pending } => self.exec_wgmma_wait(*pending, active),
            // Registers and shared memory have a single view here: the fences order nothing more.
            Stmt::WgmmaFence | Stmt::FenceProxyAsync => Ok(()),
            Stmt::MbarrierInit { barrier, count } => {
                self.exec_mbarrier_init(barrier.buffer, barrier.index, *count, active)
            }
            Stmt::MbarrierInval { barrier } => {
                self.exec_mbarrier_inval(barrier.buffer, barrier.index, active)
            }
            Stmt::MbarrierArrive {
                barrier,
                expect_bytes,
            } => self.exec_mbarrier_arrive(barrier.buffer, barrier.index, *expect_bytes, active),
            Stmt::MbarrierExpectTx { barrier, bytes } => {
                self.exec_mbarrier_expect_tx(barrier.buffer, barrier.index, *bytes, active)
            }
            // Inside warp roles a wait is run by the role's task (`roles.rs`); here it is a wait
            // of threads that run alone.
            Stmt::MbarrierWait { barrier, parity } => {
                self.exec_mbarrier_wait((barrier.buffer, barrier.index, *parity), active)
            }
            Stmt::TmaLoad {
                map,
                dst,
                coords,
                barrier,
            } => {
                let load = TmaOperands {
                    map: *map,
                    dst: dst.buffer,
                    dst_index: dst.index,
                    coords,
                    barrier: barrier.buffer,
                    barrier_index: barrier.index,
                };
                self.exec_tma_load(load, active)
            }
            Stmt::TmaStore { map, src, coords } => {
                self.exec_tma_store(*map, (src.buffer, src.index), coords, active)
            }
            // The box is read when the store is issued (see `tma.rs`), so the wait has nothing
            // left to wait for.
            Stmt::TmaStoreWait => Ok(()),
            Stmt::WarpRoles {
                consumers,
                consumer,
                producer,
            } => self.exec_warp_roles(*consumers, (consumer, producer), active),
            Stmt::SetMaxRegisters { count, .. } => self.exec_set_max_registers(*count, active),
            Stmt::NamedBarrier { id, threads } => self.exec_named_barrier(*id, *threads, active),
            Stmt::NamedBarrierArrive { id, threads } => {
                self.exec_named_barrier_arrive(*id, *threads, active)
            }
            Stmt::WarpgroupTurn {
                step,
                warpgroups,
                first_barrier,
            } => self.exec_warpgroup_turn(*step, (*warpgroups, *first_barrier), active),
            Stmt::Block {
                origin,
                label,
                body,
            } => {
                self.sites.push((*origin, label));
                self.exec_list(body, active)?;
                self.sites.pop();
                Ok(())
            }
        }
    }

    /// The index `e` in each of `threads`; `buffer` names what it indexes, for messages.
    pub(super) fn index(
        &mut self,
        e: ExprId,
        threads: &[u32],
        buffer: Option<usize>,
    ) -> Result<Vec<i64>, Fault> {
        self.indexer
            .eval(&self.env, e, threads)
            .map_err(|fault| match fault {
                BatchFault::Fault(fault, thread) => {
                    let buffer = buffer
                        .map(|b| self.buffers.get(b).map_or("?", |info| info.name).to_owned());
                    self.fault(ErrorKind::IndexFault { buffer, fault }, thread)
                }
                BatchFault::BadId => {
                    self.malformed(format!("expression id {} out of range", e.index()))
                }
            })
    }

    fn malformed(&self, message: String) -> Fault {
        self.fault(ErrorKind::Malformed(message), None)
    }

    pub(super) fn malformed_fault(&self, message: &str) -> Fault {
        self.malformed(message.to_owned())
    }

    pub(super) fn var_slot(&self, var: VarId) -> Result<usize, Fault> {
        let index = var.index();
        if index < self.env.vars.len() {
            Ok(index)
        } else {
            Err(self.malformed(format!("variable id {index} out of range")))
        }
    }

    /// A loop: its extent is evaluated each time the loop is reached (an inner loop's extent may
    /// depend on an outer loop variable) and must be the same in every thread, which is what lets
    /// all threads run the body in lockstep.
    fn exec_for(
        &mut self,
        var: VarId,
        extent: ExprId,
        body: &'p [Stmt],
        active: &[u32],
    ) -> Result<(), Fault> {
        let slot = self.var_slot(var)?;
        if self.indexer.depends_on_thread(&self.env, extent) {
            return self.exec_divergent_for(slot, extent, body, active);
        }
        let extent = self.loop_extent(extent)?;
        let outer = std::mem::replace(&mut self.env.vars[slot], Binding::Unbound);
        for i in 0..extent.max(0) {
            self.env.vars[slot] = Binding::Uniform(i);
            self.exec_list(body, active)?;
        }
        self.env.vars[slot] = outer;
        Ok(())
    }

    /// A loop whose extent differs between threads (a grid-stride loop): iteration `i` runs on
    /// the threads whose extent passes `i`, the others having left the loop. Lowering puts no
    /// barrier in such a loop; one there would be reached by part of the block, which the
    /// barrier reports.
    fn exec_divergent_for(
        &mut self,
        slot: usize,
        extent: ExprId,
        body: &'p [Stmt],
        active: &[u32],
    ) -> Result<(), Fault> {
        let extents = self.index(extent, active, None)?;
        let most = extents.iter().copied().max().unwrap_or(0);
        let outer = std::mem::replace(&mut self.env.vars[slot], Binding::Unbound);
        for i in 0..most.max(0) {
            let running: Vec<u32> = active
                .iter()
                .zip(&extents)
                .filter(|&(_, &extent)| extent > i)
                .map(|(&thread, _)| thread)
                .collect();
            self.env.vars[slot] = Binding::Uniform(i);
            self.exec_list(body, &running)?;
        }
        self.env.vars[slot] = outer;
        Ok(())
    }

    /// A loop's extent, which must not depend on the thread.
    pub(super) fn loop_extent(&mut self, extent: ExprId) -> Result<i64, Fault> {
        self.indexer
            .eval_uniform(&self.env, extent)
            .map_err(|fault| match fault {
                UniformFault::Fault(fault) => self.fault(
                    ErrorKind::IndexFault {
                        buffer: None,
                        fault,
                    },
                    None,
                ),
                UniformFault::ThreadDependent => self.fault(ErrorKind::ThreadDependentExtent, None),
                UniformFault::BadId => {
                    self.malformed(format!("expression id {} out of range", extent.index()))
                }
            })
    }

    fn exec_let(&mut self, var: VarId, value: ExprId, active: &[u32]) -> Result<(), Fault> {
        let slot = self.var_slot(var)?;
        let binding = if self.indexer.depends_on_thread(&self.env, value) {
            let values = self.index(value, active, None)?;
            let mut per_thread = vec![0; self.threads];
            for (&thread, &v) in active.iter().zip(&values) {
                if let Some(entry) = per_thread.get_mut(thread as usize) {
                    *entry = v;
                }
            }
            Binding::PerThread(per_thread)
        } else {
            let first = active.first().map_or(&[][..], std::slice::from_ref);
            match self.index(value, first, None)?.first() {
                Some(&v) => Binding::Uniform(v),
                None => Binding::Unbound,
            }
        };
        let outer = std::mem::replace(&mut self.env.vars[slot], binding);
        self.shadowed.push((slot, outer));
        Ok(())
    }

    /// Binds `var` to an integer computed at run time in each active thread (a value read from
    /// memory used as an index): uniform when every thread has the same one, as a block-wide
    /// scalar read usually does.
    fn exec_bind(&mut self, var: VarId, value: ValueId, active: &[u32]) -> Result<(), Fault> {
        let slot = self.var_slot(var)?;
        let column = self.eval_all(value, active)?;
        // Integer values are exact in the emulator's f64 columns; the conversion truncates as C's
        // cast to `long long` does, and a value out of range becomes an index the bounds check
        // reports.
        #[allow(clippy::cast_possible_truncation)]
        let values: Vec<i64> = self
            .frame
            .column(column)
            .iter()
            .map(|&v| v as i64)
            .collect();
        let binding = match values.first() {
            None => Binding::Unbound,
            Some(&first) if values.iter().all(|&v| v == first) => Binding::Uniform(first),
            Some(_) => {
                let mut per_thread = vec![0; self.threads];
                for (&thread, &v) in active.iter().zip(&values) {
                    if let Some(entry) = per_thread.get_mut(thread as usize) {
                        *entry = v;
                    }
                }
                Binding::PerThread(per_thread)
            }
        };
        let outer = std::mem::replace(&mut self.env.vars[slot], binding);
        self.shadowed.push((slot, outer));
        Ok(())
    }

    fn exec_if(
        &mut self,
        cond: ValueId,
        then: &'p [Stmt],
        otherwise: &'p [Stmt],
        active: &[u32],
    ) -> Result<(), Fault> {
        let (yes, no) = self.split(cond, active)?;
        let waits = super::roles::needs_other_threads;
        if !yes.is_empty()
            && !no.is_empty()
            && self.memory.clock.is_none()
            && (waits(then, yes.len()) || waits(otherwise, no.len()))
        {
            let mut branches = vec![(then, yes)];
            self.collect_branches(otherwise, no, &mut branches)?;
            if branches.len() <= super::memory::ROLES {
                return self.exec_concurrent_branches(branches);
            }
            return Err(self.malformed_fault(
                "a warp-specialized `if` chain with more branches than the emulator runs at once",
            ));
        }
        if !yes.is_empty() && !then.is_empty() {
            self.exec_list(then, &yes)?;
        }
        if !no.is_empty() && !otherwise.is_empty() {
            self.exec_list(otherwise, &no)?;
        }
        Ok(())
    }

    /// A `while`: the threads whose condition holds run the body, until none does. The deadline
    /// of the run bounds a loop that never ends.
    fn exec_while(&mut self, cond: ValueId, body: &'p [Stmt], active: &[u32]) -> Result<(), Fault> {
        let mut running = active.to_vec();
        loop {
            let (yes, _) = self.split(cond, &running)?;
            if yes.is_empty() {
                return Ok(());
            }
            self.check_deadline()?;
            self.exec_list(body, &yes)?;
            running = yes;
        }
    }

    /// The branches of an `if` chain after its first: an `else` that is a single `if` splitting
    /// its threads again (an `elif`) adds that `if`'s branches, anything else is one branch.
    fn collect_branches(
        &mut self,
        stmts: &'p [Stmt],
        threads: Vec<u32>,
        branches: &mut Vec<(&'p [Stmt], Vec<u32>)>,
    ) -> Result<(), Fault> {
        if stmts.is_empty() || threads.is_empty() {
            return Ok(());
        }
        if let [
            Stmt::If {
                cond,
                then,
                otherwise,
            },
        ] = stmts
        {
            let (yes, no) = self.split(*cond, &threads)?;
            if !yes.is_empty() && !no.is_empty() {
                branches.push((then, yes));
                return self.collect_branches(otherwise, no, branches);
            }
        }
        branches.push((stmts, threads));
        Ok(())
    }

    /// The threads of `active` for which `cond` holds, and the others.
    pub(super) fn split(
        &mut self,
        cond: ValueId,
        active: &[u32],
    ) -> Result<(Vec<u32>, Vec<u32>), Fault> {
        let column = self.eval_all(cond, active)?;
        let picks = self.frame.column(column);
        let (mut yes, mut no) = (Vec::new(), Vec::new());
        for (&thread, &pick) in active.iter().zip(picks) {
            if pick != 0.0 {
                yes.push(thread)
            } else {
                no.push(thread)
            }
        }
        Ok((yes, no))
    }

    fn exec_store(
        &mut self,
        buffer: usize,
        index: ExprId,
        value: ValueId,
        active: &[u32],
    ) -> Result<(), Fault> {
        let indices = self.index(index, active, Some(buffer))?;
        let column = self.eval_all(value, active)?;
        let Some(info) = self.buffers.get(buffer) else {
            return Err(self.malformed(format!("buffer id {buffer} out of range")));
        };
        let values = self.frame.column(column);
        let stored = self.memory.store_lanes(info, active, &indices, values);
        stored.map_err(|(kind, thread)| self.fault(kind, Some(thread)))
    }

    /// Applies the threads' atomics one after another, in thread order (any order is one the
    /// hardware may take), and stores each thread's old value to its register when asked.
    fn exec_atomic(
        &mut self,
        op: AtomicOp,
        (buffer, index): (usize, ExprId),
        value: ValueId,
        old: Option<(usize, ExprId)>,
        active: &[u32],
    ) -> Result<(), Fault> {
        let indices = self.index(index, active, Some(buffer))?;
        let column = self.eval_all(value, active)?;
        let Some(info) = self.buffers.get(buffer) else {
            return Err(self.malformed(format!("buffer id {buffer} out of range")));
        };
        let values = self.frame.column(column);
        let mut olds = Vec::with_capacity(active.len());
        for ((&thread, &index), &value) in active.iter().zip(&indices).zip(values) {
            let done = self.memory.atomic(info, index, op, value);
            olds.push(done.map_err(|kind| self.fault(kind, Some(thread)))?);
        }
        let Some((register, at)) = old else {
            return Ok(());
        };
        let targets = self.index(at, active, Some(register))?;
        let Some(info) = self.buffers.get(register) else {
            return Err(self.malformed(format!("buffer id {register} out of range")));
        };
        let stored = self.memory.store_lanes(info, active, &targets, &olds);
        stored.map_err(|(kind, thread)| self.fault(kind, Some(thread)))
    }

    /// Copies `lanes` elements per thread: all threads read, then all threads write.
    fn exec_vector_copy(
        &mut self,
        buffers: [usize; 2],
        indices: [ExprId; 2],
        lanes: u32,
        active: &[u32],
    ) -> Result<(), Fault> {
        let (threads, targets, values) = self.vector_read(buffers, indices, lanes, active)?;
        let Some(dst_info) = self.buffers.get(buffers[0]) else {
            return Err(self.malformed("vector copy: buffer id out of range".to_owned()));
        };
        let stored = self
            .memory
            .store_lanes(dst_info, &threads, &targets, &values);
        stored.map_err(|(kind, thread)| self.fault(kind, Some(thread)))
    }

    /// The read half of a vector copy (plain or async): checks the buffers and alignment, and
    /// reads every thread's `lanes` source elements. Returns, one entry per element, the thread,
    /// its destination index and the value read; thread `k`'s elements are `k * lanes ..`.
    pub(super) fn vector_read(
        &mut self,
        [dst, src]: [usize; 2],
        [dst_index, src_index]: [ExprId; 2],
        lanes: u32,
        active: &[u32],
    ) -> Result<VectorRead, Fault> {
        self.check_vector_buffers(dst, src, lanes)?;
        let sources = self.index(src_index, active, Some(src))?;
        let targets = self.index(dst_index, active, Some(dst))?;
        for (&thread, (&source, &target)) in active.iter().zip(sources.iter().zip(&targets)) {
            self.check_vector_index(src, source, lanes, thread)?;
            self.check_vector_index(dst, target, lanes, thread)?;
        }
        let width = lanes as usize;
        let threads: Vec<u32> = active
            .iter()
            .flat_map(|&t| std::iter::repeat_n(t, width))
            .collect();
        let spread = |starts: &[i64]| -> Vec<i64> {
            starts
                .iter()
                .flat_map(|&start| (0..i64::from(lanes)).map(move |l| start + l))
                .collect()
        };
        let (sources, targets) = (spread(&sources), spread(&targets));
        let positions: Vec<u32> = (0..thread_u32(threads.len())).collect();
        let mut values = vec![0.0; threads.len()];
        let Some(src_info) = self.buffers.get(src) else {
            return Err(self.malformed("vector copy: buffer id out of range".to_owned()));
        };
        let loaded = self
            .memory
            .load_lanes(src_info, &threads, &sources, &positions, &mut values);
        loaded.map_err(|(kind, thread)| self.fault(kind, Some(thread)))?;
        Ok((threads, targets, values))
    }

    pub(super) fn check_vector_buffers(
        &self,
        dst: usize,
        src: usize,
        lanes: u32,
    ) -> Result<(), Fault> {
        let (Some(d), Some(s)) = (self.buffers.get(dst), self.buffers.get(src)) else {
            return Err(self.malformed("vector copy: buffer id out of range".to_owned()));
        };
        if lanes == 0 || d.dtype != s.dtype {
            let message = format!(
                "vector copy of {lanes} lane(s) from `{}` ({}) to `{}` ({})",
                s.name, s.dtype, d.name, d.dtype
            );
            return Err(self.malformed(message));
        }
        Ok(())
    }

    /// A vector access must start at a multiple of its lane count, and in shared memory also at an
    /// address aligned to the whole vector (global tensors are allocated with ample alignment).
    pub(super) fn check_vector_index(
        &self,
        buffer: usize,
        index: i64,
        lanes: u32,
        thread: u32,
    ) -> Result<(), Fault> {
        let Some(info) = self.buffers.get(buffer) else {
            return Err(self.malformed("vector copy: buffer id out of range".to_owned()));
        };
        let width = i64::from(lanes);
        let vector_bytes = index_i64(info.size) * width;
        let address = match info.place {
            super::memory::Place::Shared { offset, .. } => {
                index_i64(offset) + index.wrapping_mul(index_i64(info.size))
            }
            _ => 0,
        };
        if index.rem_euclid(width) != 0 || address.rem_euclid(vector_bytes) != 0 {
            let kind = ErrorKind::Misaligned {
                buffer: info.name.to_owned(),
                index,
                lanes,
            };
            return Err(self.fault(kind, Some(thread)));
        }
        Ok(())
    }

    /// `T.sync_grid()` where blocks do not run as tasks (`grid.rs`): in a grid of one block it
    /// is a block barrier; in a larger grid it sits inside a statement that runs as a whole
    /// (warp roles), where the emulator cannot hold the block.
    fn exec_grid_sync(&mut self, active: &[u32]) -> Result<(), Fault> {
        self.exec_barrier(active)?;
        if self.grid_blocks > 1 {
            let message = "the emulator cannot hold a block at a grid barrier inside warp roles";
            return Err(self.fault(
                ErrorKind::GridSync(message.to_owned()),
                active.first().copied(),
            ));
        }
        Ok(())
    }

    pub(super) fn exec_barrier(&mut self, active: &[u32]) -> Result<(), Fault> {
        // A thread that has returned counts as arrived, as on the GPU.
        if active.len() + self.exited_count != self.threads {
            let kind = ErrorKind::DivergentBarrier {
                active: active.len(),
                threads: self.threads,
            };
            return Err(self.fault(kind, active.first().copied()));
        }
        self.memory.barrier();
        self.report.barriers += 1;
        Ok(())
    }
}
