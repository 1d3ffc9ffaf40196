//! Named barriers: `bar.sync id, threads` and `bar.arrive id, threads`, the hardware barriers a
//! block has 16 of. A barrier completes once `threads` threads have reached it, waiting
//! (`bar.sync`) or not (`bar.arrive`), and the threads that wait there see what every arriving
//! thread did before arriving. The threads may belong to different warp roles: a block-wide
//! `__syncthreads()` written in each role of hand-written warp-specialized code is `bar.sync 0`
//! among all of the block's threads, and a ping-pong of two consumer warpgroups hands its turn
//! on with one warpgroup's `bar.arrive` and the other's `bar.sync`.
//!
//! Outside concurrent roles the threads that reach a barrier run together: a `bar.sync` must be
//! completed by them and by arrivals already made. Inside them (`roles.rs`) a task that reaches a
//! `bar.sync` the others have not completed blocks until they do; a round in which no task can
//! move is a deadlock naming every blocked wait.

use super::error::{ErrorKind, Fault};
use super::exec::Machine;
use super::memory::ROLES;

/// The hardware barriers of a block.
const NAMED_BARRIERS: u32 = 16;

/// The named barriers of the running block.
#[derive(Clone, Debug, Default)]
pub(super) struct NamedBarriers {
    states: Vec<NamedState>,
}

/// One named barrier: the threads that have reached its current phase, what they published,
/// and how many phases have completed (with what the last one published).
#[derive(Clone, Debug, Default)]
struct NamedState {
    arrived: u32,
    view: Option<[u64; ROLES]>,
    completed: u64,
    completed_view: Option<[u64; ROLES]>,
}

impl NamedBarriers {
    pub(super) fn clear(&mut self) {
        self.states.clear();
    }

    fn state(&mut self, id: u32) -> &mut NamedState {
        let index = id as usize;
        if self.states.len() <= index {
            self.states.resize_with(index + 1, NamedState::default);
        }
        &mut self.states[index]
    }
}

/// What an arrival on a named barrier did.
pub(super) enum Arrival {
    /// It was the last one: the phase completed, and waiting threads may go on.
    Completed,
    /// The phase waits for more threads; the number of phases completed before it.
    Waiting(u64),
}

/// Joins two role views: each role's latest time either has seen.
fn join(a: Option<[u64; ROLES]>, b: Option<[u64; ROLES]>) -> Option<[u64; ROLES]> {
    match (a, b) {
        (Some(mut a), Some(b)) => {
            for (time, other) in a.iter_mut().zip(b) {
                *time = (*time).max(other);
            }
            Some(a)
        }
        (a, b) => a.or(b),
    }
}

impl Machine<'_, '_> {
    /// `active` threads reach named barrier `id` of `threads` threads.
    pub(super) fn named_arrive(
        &mut self,
        id: u32,
        threads: u32,
        active: &[u32],
    ) -> Result<Arrival, Fault> {
        if id >= NAMED_BARRIERS || threads == 0 || !threads.is_multiple_of(32) {
            let message = format!(
                "named barrier {id} for {threads} threads (ids 0..16, a multiple of 32 threads)"
            );
            return Err(self.malformed_fault(&message));
        }
        let view = self.memory.release();
        let state = self.named.state(id);
        let count = u32::try_from(active.len()).unwrap_or(u32::MAX);
        let arrived = state.arrived.saturating_add(count);
        if arrived > threads {
            let kind = ErrorKind::DivergentNamedBarrier {
                id,
                active: arrived as usize,
                threads,
            };
            return Err(self.fault(kind, active.first().copied()));
        }
        state.arrived = arrived;
        state.view = join(state.view, view);
        if arrived < threads {
            return Ok(Arrival::Waiting(state.completed));
        }
        state.completed += 1;
        state.completed_view = state.view.take();
        state.arrived = 0;
        self.memory.barrier();
        self.report.barriers += 1;
        Ok(Arrival::Completed)
    }

    /// Whether the phase after `completed` phases of barrier `id` has completed; if so, the
    /// waiting thread acquires what its arrivals published.
    pub(super) fn named_passed(&mut self, id: u32, completed: u64) -> bool {
        let state = self.named.state(id);
        if state.completed <= completed {
            return false;
        }
        if let Some(view) = state.completed_view {
            self.memory.acquire(view);
        }
        true
    }

    /// How many threads have reached the current phase of barrier `id`.
    pub(super) fn named_arrived(&mut self, id: u32) -> u32 {
        self.named.state(id).arrived
    }

    /// `bar.sync id, threads` where the threads that reach it run together: they and earlier
    /// arrivals must complete it.
    pub(super) fn exec_named_barrier(
        &mut self,
        id: u32,
        threads: u32,
        active: &[u32],
    ) -> Result<(), Fault> {
        match self.named_arrive(id, threads, active)? {
            Arrival::Completed => {
                let completed = self.named.state(id).completed - 1;
                self.named_passed(id, completed);
                Ok(())
            }
            Arrival::Waiting(_) => {
                let arrived = self.named.state(id).arrived;
                let kind = ErrorKind::DivergentNamedBarrier {
                    id,
                    active: arrived as usize,
                    threads,
                };
                Err(self.fault(kind, active.first().copied()))
            }
        }
    }

    /// `bar.arrive id, threads`: the threads count towards the barrier and go on.
    pub(super) fn exec_named_barrier_arrive(
        &mut self,
        id: u32,
        threads: u32,
        active: &[u32],
    ) -> Result<(), Fault> {
        self.named_arrive(id, threads, active).map(|_| ())
    }
}
