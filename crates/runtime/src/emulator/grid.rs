//! Grid barriers (`T.sync_grid`): the blocks of a grid run interleaved, each up to the next
//! barrier, so that no block passes a barrier before every block has reached it.
//!
//! Without a grid barrier the emulator runs blocks one after another. With one, each block is a
//! resumable task, as the warp roles are (`roles.rs`): statements that contain a grid barrier are
//! interpreted with an explicit stack of statement-list frames, every other statement runs through
//! the ordinary recursive `exec`. The scheduler runs every block, in block order, until it reaches
//! a grid barrier or finishes; when all blocks wait at a barrier, they all pass it, and the round
//! starts again. Global memory is shared by all blocks (the barrier orders it), everything else —
//! shared memory, registers, variable bindings, random generators, mbarriers, async queues — is
//! the block's own and is swapped into the machine while the block runs.
//!
//! A block that finishes while others wait at a barrier would leave them waiting forever on the
//! GPU: that is reported, as a barrier reached by only part of a block is. Barriers inside warp
//! roles are not supported (their tasks run to completion inside one statement).

use tilec_ir::thread::{Stmt, for_each_stmt};

use super::error::{ErrorKind, Fault};
use super::exec::Machine;
use super::index::{Binding, Env};
use super::mbarrier::Mbarriers;
use super::memory::BlockStorage;
use super::random::Philox;
use super::roles::{Exit, ListFrame};
use super::thread_u32;
use super::turns::Turns;
use super::warp::AsyncQueue;
use super::wgmma::WgmmaQueue;

/// Whether a statement is or contains a grid barrier, so that a block must be able to stop in it.
fn contains_grid_sync(stmt: &Stmt) -> bool {
    let mut found = false;
    for_each_stmt(std::slice::from_ref(stmt), &mut |s| {
        found |= matches!(s, Stmt::GridSync)
    });
    found
}

/// Everything of one block that is not global memory.
#[derive(Debug, Default)]
struct BlockState<'p> {
    env: Env,
    shadowed: Vec<(usize, Binding)>,
    sites: Vec<(Option<tilec_ir::EntityId>, &'p str)>,
    exited: Vec<bool>,
    exited_count: usize,
    generators: Vec<Option<Philox>>,
    asyncs: Vec<AsyncQueue>,
    wgmmas: Vec<WgmmaQueue>,
    mbarriers: Mbarriers,
    turns: Turns,
    named: super::named::NamedBarriers,
    storage: BlockStorage,
}

/// One block of the grid as a resumable program; it has finished when no frame is left.
#[derive(Debug)]
struct BlockTask<'p> {
    block: [u32; 3],
    frames: Vec<ListFrame<'p>>,
    state: BlockState<'p>,
    /// Set when every block has reached the barrier this one waits at: it passes it next.
    released: bool,
}

/// What running a block until it stops did.
enum Stop {
    AtBarrier,
    Finished,
}

impl<'p> Machine<'p, '_> {
    /// Runs the blocks `blocks` of a program with grid barriers (see the module documentation).
    pub(super) fn run_grid(&mut self, blocks: &[[u32; 3]]) -> Result<(), Fault> {
        let mut tasks = Vec::with_capacity(blocks.len());
        for &block in blocks {
            tasks.push(self.spawn_block(block));
        }
        loop {
            let mut finished = None;
            for task in tasks.iter_mut().filter(|task| !task.frames.is_empty()) {
                if let Stop::Finished = self.resume_block(task)? {
                    finished.get_or_insert(task.block);
                }
            }
            let waiting: Vec<[u32; 3]> = tasks
                .iter()
                .filter(|task| !task.frames.is_empty())
                .map(|task| task.block)
                .collect();
            let Some(&first_waiting) = waiting.first() else {
                return Ok(());
            };
            if waiting.len() < tasks.len() {
                let ended = tasks
                    .iter()
                    .find(|task| task.frames.is_empty())
                    .map_or(finished.unwrap_or([0; 3]), |task| task.block);
                let message = format!(
                    "block {ended:?} ended without reaching the grid barrier that block \
                     {first_waiting:?} waits at, so that block would wait forever"
                );
                self.block = first_waiting;
                return Err(self.fault(ErrorKind::GridSync(message), None));
            }
            tasks.iter_mut().for_each(|task| task.released = true);
        }
    }

    /// A block ready to start: fresh state, its indices bound, its body as the one frame.
    fn spawn_block(&mut self, block: [u32; 3]) -> BlockTask<'p> {
        let mut state = BlockState {
            env: self.env.clone(),
            exited: vec![false; self.threads],
            generators: vec![None; self.threads],
            asyncs: vec![AsyncQueue::default(); self.threads],
            wgmmas: vec![WgmmaQueue::default(); self.threads.div_ceil(128)],
            storage: self.memory.block_storage(),
            ..BlockState::default()
        };
        self.swap_block(&mut state);
        self.begin_block(block);
        let all: Vec<u32> = (0..thread_u32(self.threads)).collect();
        let program = self.program;
        let frames = vec![ListFrame::new(&program.body, all, 0, Exit::Done)];
        self.swap_block(&mut state);
        BlockTask {
            block,
            frames,
            state,
            released: false,
        }
    }

    fn swap_block(&mut self, state: &mut BlockState<'p>) {
        std::mem::swap(&mut self.env, &mut state.env);
        std::mem::swap(&mut self.shadowed, &mut state.shadowed);
        std::mem::swap(&mut self.sites, &mut state.sites);
        std::mem::swap(&mut self.exited, &mut state.exited);
        std::mem::swap(&mut self.exited_count, &mut state.exited_count);
        std::mem::swap(&mut self.generators, &mut state.generators);
        std::mem::swap(&mut self.asyncs, &mut state.asyncs);
        std::mem::swap(&mut self.wgmmas, &mut state.wgmmas);
        std::mem::swap(&mut self.mbarriers, &mut state.mbarriers);
        std::mem::swap(&mut self.turns, &mut state.turns);
        std::mem::swap(&mut self.named, &mut state.named);
        self.memory.swap_block(&mut state.storage);
    }

    /// Runs `task` until it waits at a grid barrier or finishes (then its end-of-block checks
    /// run).
    fn resume_block(&mut self, task: &mut BlockTask<'p>) -> Result<Stop, Fault> {
        self.swap_block(&mut task.state);
        self.block = task.block;
        let outcome = self.run_until_barrier(task);
        self.swap_block(&mut task.state);
        outcome
    }

    fn run_until_barrier(&mut self, task: &mut BlockTask<'p>) -> Result<Stop, Fault> {
        loop {
            if task.frames.is_empty() {
                self.finish_block()?;
                return Ok(Stop::Finished);
            }
            if self.grid_step(task)? {
                return Ok(Stop::AtBarrier);
            }
        }
    }

    /// Runs the next statement of the innermost frame, or ends the frame; true when the block
    /// stops at a grid barrier that not every block has reached yet.
    fn grid_step(&mut self, task: &mut BlockTask<'p>) -> Result<bool, Fault> {
        let frames = &mut task.frames;
        let Some(top) = frames.last_mut() else {
            return Ok(false);
        };
        if self.exited_count > 0 {
            top.active = self.still_running(&top.active);
        }
        let Some(stmt) = top.stmts.get(top.next).filter(|_| !top.active.is_empty()) else {
            if let Some(frame) = frames.pop() {
                self.end_list(frame, frames);
            }
            return Ok(false);
        };
        if !contains_grid_sync(stmt) {
            top.next += 1;
            let active = top.active.clone();
            self.exec(stmt, &active)?;
            return Ok(false);
        }
        match stmt {
            Stmt::GridSync if !task.released => {
                self.check_whole_block(&top.active)?;
                return Ok(true);
            }
            Stmt::GridSync => {
                task.released = false;
                let active = self.enter_statement(frames);
                self.exec_barrier(&active)?;
            }
            Stmt::For {
                var, extent, body, ..
            } => {
                self.enter_for((*var, *extent, body), frames)?;
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                self.enter_if(*cond, (then, otherwise), frames)?;
            }
            Stmt::Block {
                origin,
                label,
                body,
            } => {
                let active = self.enter_statement(frames);
                self.sites.push((*origin, label.as_str()));
                let shadowed = self.shadowed.len();
                frames.push(ListFrame::new(body, active, shadowed, Exit::Block));
            }
            Stmt::While { .. } => {
                let message = "the emulator cannot hold a block at a grid barrier inside a \
                               `while` loop";
                return Err(self.fault(ErrorKind::GridSync(message.to_owned()), None));
            }
            // Roles run to completion inside one statement; the leaves hold no grid barrier
            // (`contains_grid_sync` let only the barrier itself and statements with bodies
            // through), so reaching one here means a malformed program.
            Stmt::WarpRoles { .. }
            | Stmt::Let { .. }
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
            | Stmt::CallExtern { .. }
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
            | Stmt::RngInit { .. } => {
                let message = "the emulator cannot hold a block at a grid barrier inside warp \
                               roles";
                return Err(self.fault(ErrorKind::GridSync(message.to_owned()), None));
            }
        }
        Ok(false)
    }

    /// A grid barrier is a block barrier too: every thread of the block that has not returned
    /// must reach it.
    fn check_whole_block(&self, active: &[u32]) -> Result<(), Fault> {
        if active.len() + self.exited_count != self.threads {
            let kind = ErrorKind::DivergentBarrier {
                active: active.len(),
                threads: self.threads,
            };
            return Err(self.fault(kind, active.first().copied()));
        }
        Ok(())
    }
}
