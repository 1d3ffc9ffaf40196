//! mbarriers: the phase counters that order TMA copies and warp roles on Hopper.
//!
//! Each mbarrier is a 64-bit shared element, named here by its buffer and element index. Its state
//! lives beside shared memory, per block: the arrivals each phase expects (from its
//! initialisation), the arrivals still pending in the current phase, the pending transaction bytes
//! and the number of completed phases, whose lowest bit is the current phase's parity. A phase
//! completes when its arrivals have all come and its transaction count is zero; the count may go
//! negative for a while, when a TMA copy completes its bytes before the `expect_tx` that announces
//! them, as PTX allows.
//!
//! A TMA copy reads global memory when it is issued but lands only when some thread's wait passes
//! the phase the copy completed on: until then its elements are in flight (see `memory.rs`), so a
//! read before the wait is reported rather than seeing data it might not see on the GPU.
//!
//! Inside warp roles an arrival also publishes its role's clock to the phase and a wait that passes
//! acquires it, which is how a TMA issue knows which accesses of the other role are ordered before
//! it (see `memory.rs`).
//!
//! Uses are checked: an mbarrier must be initialised once per block, before its first use, and
//! other threads may use it only after a barrier has followed the initialisation. At the end of a
//! block every copy must have landed and no transaction bytes may be pending.

use std::collections::BTreeMap;

use tilec_ir::thread::BufferId;
use tilec_ir::{DType, ExprId};

use super::error::{BlockedWait, EmulatorError, ErrorKind, Fault, MbarrierFault, WaitOn};
use super::exec::Machine;
use super::memory::{Place, ROLES, check_bounds};

/// One TMA copy waiting to land: its destination elements and their values, and the thread that
/// issued it.
#[derive(Clone, Debug)]
pub(super) struct TmaCopy {
    pub buffer: usize,
    pub indices: Vec<i64>,
    pub values: Vec<f64>,
    pub thread: u32,
}

/// The state of one mbarrier.
#[derive(Clone, Debug)]
struct Mbarrier {
    /// Arrivals per phase.
    count: u32,
    /// Arrivals the current phase still waits for.
    pending: u32,
    /// Transaction bytes the current phase still waits for.
    tx: i64,
    /// Phases completed so far.
    completed: u64,
    initializer: u32,
    init_epoch: u32,
    /// TMA copies not landed yet, each with the phase it completed on.
    copies: Vec<(u64, TmaCopy)>,
    /// The role times the arrivals of the current phase published.
    arrived: [u64; ROLES],
    /// The role times published by all completed phases, which a wait that passes acquires.
    released: [u64; ROLES],
}

/// The later of two role clocks' times, role by role.
fn join(a: [u64; ROLES], b: [u64; ROLES]) -> [u64; ROLES] {
    let mut joined = a;
    for (time, other) in joined.iter_mut().zip(b) {
        *time = (*time).max(other);
    }
    joined
}

impl Mbarrier {
    /// Completes the current phase when nothing is pending any more.
    fn settle(&mut self) {
        if self.pending == 0 && self.tx == 0 {
            self.completed += 1;
            self.pending = self.count;
            self.released = join(self.released, self.arrived);
        }
    }

    /// Whether the phase of parity `parity` has completed, that is whether the current phase has
    /// the other parity.
    fn passed(&self, parity: i64) -> bool {
        i64::from(self.completed & 1 == 1) != parity
    }
}

/// A block's mbarriers, by (buffer, element index).
#[derive(Debug, Default)]
pub(super) struct Mbarriers {
    barriers: BTreeMap<(usize, i64), Mbarrier>,
}

impl Mbarriers {
    /// Forgets every mbarrier, at the start of a block.
    pub(super) fn clear(&mut self) {
        self.barriers.clear();
    }
}

impl Machine<'_, '_> {
    /// The mbarrier element each of `active` names: `barrier[index]`, a 64-bit shared element.
    pub(super) fn mbarrier_keys(
        &mut self,
        barrier: BufferId,
        index: ExprId,
        active: &[u32],
    ) -> Result<Vec<(usize, i64)>, Fault> {
        let buffer = barrier.index();
        let indices = self.index(index, active, Some(buffer))?;
        let Some(info) = self.buffers.get(buffer) else {
            return Err(self.malformed_fault("mbarrier: buffer id out of range"));
        };
        if !matches!(info.place, Place::Shared { .. }) || info.dtype != DType::UInt64 {
            let message = format!("mbarrier `{}` is not a shared uint64 buffer", info.name);
            return Err(self.malformed_fault(&message));
        }
        for (&thread, &index) in active.iter().zip(&indices) {
            check_bounds(info, index).map_err(|kind| self.fault(kind, Some(thread)))?;
        }
        Ok(indices.into_iter().map(|index| (buffer, index)).collect())
    }

    /// The fault `fault` of mbarrier `key`, charged to `thread`.
    fn mbarrier_fault(&self, key: (usize, i64), fault: MbarrierFault, thread: u32) -> Fault {
        let kind = ErrorKind::Mbarrier {
            barrier: self.buffer_name(key.0),
            index: key.1,
            fault,
        };
        self.fault(kind, Some(thread))
    }

    pub(super) fn buffer_name(&self, buffer: usize) -> String {
        self.buffers
            .get(buffer)
            .map_or_else(|| format!("#{buffer}"), |info| info.name.to_owned())
    }

    /// The initialised and published mbarrier `key`, as `thread` uses it.
    fn mbarrier(&mut self, key: (usize, i64), thread: u32) -> Result<&mut Mbarrier, Fault> {
        let epoch = self.memory.epoch();
        let fault = match self.mbarriers.barriers.get(&key) {
            None => Some(MbarrierFault::Uninitialized),
            Some(state) if state.initializer != thread && state.init_epoch == epoch => {
                Some(MbarrierFault::Unpublished {
                    initializer: state.initializer,
                })
            }
            Some(_) => None,
        };
        if let Some(fault) = fault {
            return Err(self.mbarrier_fault(key, fault, thread));
        }
        self.mbarriers
            .barriers
            .get_mut(&key)
            .ok_or_else(|| EmulatorError::malformed("mbarrier state missing"))
    }

    /// `mbarrier.init`: each executing thread initialises the mbarrier it names.
    pub(super) fn exec_mbarrier_init(
        &mut self,
        barrier: BufferId,
        index: ExprId,
        count: u32,
        active: &[u32],
    ) -> Result<(), Fault> {
        if count == 0 || count >= 1 << 20 {
            let message = format!("mbarrier initialised with {count} arrivals (1..2^20 allowed)");
            return Err(self.malformed_fault(&message));
        }
        let keys = self.mbarrier_keys(barrier, index, active)?;
        let epoch = self.memory.epoch();
        for (&thread, &key) in active.iter().zip(&keys) {
            if self.mbarriers.barriers.contains_key(&key) {
                return Err(self.mbarrier_fault(key, MbarrierFault::Reinitialized, thread));
            }
            let state = Mbarrier {
                count,
                pending: count,
                tx: 0,
                completed: 0,
                initializer: thread,
                init_epoch: epoch,
                copies: Vec::new(),
                arrived: [0; ROLES],
                released: [0; ROLES],
            };
            self.mbarriers.barriers.insert(key, state);
        }
        Ok(())
    }

    /// `mbarrier.inval`: each executing thread invalidates the mbarrier it names, which must be
    /// initialised and quiescent: no arrival or transaction byte pending in its current phase and
    /// every copy it completed landed (a thread still waiting on it would wait forever).
    pub(super) fn exec_mbarrier_inval(
        &mut self,
        barrier: BufferId,
        index: ExprId,
        active: &[u32],
    ) -> Result<(), Fault> {
        let keys = self.mbarrier_keys(barrier, index, active)?;
        for (&thread, &key) in active.iter().zip(&keys) {
            let state = self.mbarrier(key, thread)?;
            let busy = state.pending != state.count || state.tx != 0 || !state.copies.is_empty();
            if busy {
                return Err(self.mbarrier_fault(key, MbarrierFault::InvalidatedInUse, thread));
            }
            self.mbarriers.barriers.remove(&key);
        }
        Ok(())
    }

    /// `mbarrier.arrive[.expect_tx]`: one arrival per executing thread, after raising the
    /// transaction count by `expect_bytes`.
    pub(super) fn exec_mbarrier_arrive(
        &mut self,
        barrier: BufferId,
        index: ExprId,
        expect_bytes: Option<u32>,
        active: &[u32],
    ) -> Result<(), Fault> {
        let keys = self.mbarrier_keys(barrier, index, active)?;
        let published = self.memory.release();
        for (&thread, &key) in active.iter().zip(&keys) {
            let state = self.mbarrier(key, thread)?;
            if let Some(view) = published {
                state.arrived = join(state.arrived, view);
            }
            state.tx += expect_bytes.map_or(0, i64::from);
            if state.pending == 0 {
                return Err(self.mbarrier_fault(key, MbarrierFault::TooManyArrivals, thread));
            }
            state.pending -= 1;
            state.settle();
        }
        Ok(())
    }

    /// `mbarrier.expect_tx` for all of `active`: each raises its barrier's pending transaction
    /// count by `bytes` without arriving.
    pub(super) fn exec_mbarrier_expect_tx(
        &mut self,
        barrier: BufferId,
        index: ExprId,
        bytes: u32,
        active: &[u32],
    ) -> Result<(), Fault> {
        let keys = self.mbarrier_keys(barrier, index, active)?;
        for (&thread, &key) in active.iter().zip(&keys) {
            let state = self.mbarrier(key, thread)?;
            state.tx += i64::from(bytes);
        }
        Ok(())
    }

    /// Completes `bytes` transaction bytes of a TMA copy on the current phase of mbarrier `key`;
    /// the copy lands when a wait passes that phase.
    pub(super) fn complete_tx(
        &mut self,
        key: (usize, i64),
        bytes: i64,
        copy: TmaCopy,
    ) -> Result<(), Fault> {
        let state = self.mbarrier(key, copy.thread)?;
        let phase = state.completed;
        state.copies.push((phase, copy));
        state.tx -= bytes;
        state.settle();
        Ok(())
    }

    /// `mbarrier.try_wait.parity` for all of `active`: `None` when every thread's phase has
    /// completed (the copies of completed phases then land), else the first wait that blocks, with
    /// its thread. Nothing changes when a wait blocks.
    pub(super) fn try_mbarrier_wait(
        &mut self,
        (barrier, index, parity): (BufferId, ExprId, ExprId),
        role: &'static str,
        active: &[u32],
    ) -> Result<Option<(BlockedWait, u32)>, Fault> {
        let keys = self.mbarrier_keys(barrier, index, active)?;
        let parities = self.index(parity, active, None)?;
        for ((&thread, &key), &parity) in active.iter().zip(&keys).zip(&parities) {
            if parity != 0 && parity != 1 {
                let message = format!("mbarrier wait with parity {parity}");
                return Err(self.malformed_fault(&message));
            }
            if !self.mbarrier(key, thread)?.passed(parity) {
                let wait = BlockedWait {
                    role,
                    on: WaitOn::Mbarrier {
                        barrier: self.buffer_name(key.0),
                        index: key.1,
                        parity,
                    },
                };
                return Ok(Some((wait, thread)));
            }
        }
        let mut distinct = keys;
        distinct.sort_unstable();
        distinct.dedup();
        for key in distinct {
            self.land_completed(key)?;
        }
        Ok(None)
    }

    /// A wait outside warp roles: nothing else can run while the block waits, so a wait that
    /// blocks is a deadlock.
    pub(super) fn exec_mbarrier_wait(
        &mut self,
        wait: (BufferId, ExprId, ExprId),
        active: &[u32],
    ) -> Result<(), Fault> {
        match self.try_mbarrier_wait(wait, "block", active)? {
            // Outside roles and concurrent branches the threads that reach a wait run together,
            // so a wait that passes follows, in the emulator's time, every arrival that completed
            // its phase: what the arriving threads did before arriving is ordered before
            // what the waiting ones do next. As at a named barrier, the race detector starts a new
            // epoch (which orders the other threads' accesses too: a race between threads that
            // take no part in the protocol goes unreported here, never a race that is not one).
            None => {
                self.memory.barrier();
                Ok(())
            }
            Some((wait, thread)) => {
                let kind = ErrorKind::MbarrierDeadlock { waits: vec![wait] };
                Err(self.fault(kind, Some(thread)))
            }
        }
    }

    /// Acquires what the completed phases of mbarrier `key` published and lands their copies.
    fn land_completed(&mut self, key: (usize, i64)) -> Result<(), Fault> {
        let Some(state) = self.mbarriers.barriers.get_mut(&key) else {
            return Ok(());
        };
        self.memory.acquire(state.released);
        let completed = state.completed;
        let (done, waiting) = std::mem::take(&mut state.copies)
            .into_iter()
            .partition(|(phase, _)| *phase < completed);
        state.copies = waiting;
        for (_, copy) in done {
            let Some(info) = self.buffers.get(copy.buffer) else {
                return Err(self.malformed_fault("TMA: buffer id out of range"));
            };
            let landed = self.memory.land_tma(info, &copy.indices, &copy.values);
            landed.map_err(|kind| self.fault(kind, Some(copy.thread)))?;
        }
        Ok(())
    }

    /// At the end of a block: every TMA copy must have landed and no transaction bytes may be
    /// pending. The mbarriers are forgotten either way.
    pub(super) fn finish_mbarriers(&mut self) -> Result<(), Fault> {
        let barriers = std::mem::take(&mut self.mbarriers.barriers);
        for (key, state) in barriers {
            if let Some((_, first)) = state.copies.first() {
                let kind = ErrorKind::TmaNeverWaited {
                    barrier: self.buffer_name(key.0),
                    index: key.1,
                    copies: state.copies.len(),
                };
                return Err(self.fault(kind, Some(first.thread)));
            }
            if state.tx != 0 {
                let fault = MbarrierFault::PendingBytes { bytes: state.tx };
                return Err(self.mbarrier_fault(key, fault, state.initializer));
            }
        }
        Ok(())
    }
}
