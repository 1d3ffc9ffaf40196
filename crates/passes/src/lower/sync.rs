//! Barrier insertion: a `__syncthreads()` goes in front of every operation that reads a shared
//! buffer written since the last barrier, or writes one read or written since then, and at the end
//! of a loop body whose last accesses meet the next iteration's first ones.
//!
//! The analysis works on whole operations (a copy, a parallel loop, a reduction) and on buffers,
//! not elements: two operations that touch the same shared buffer are assumed to touch it from
//! different threads. It follows every path: the arms of an `if` start from what was pending
//! before it and what either leaves is pending after it, and a loop that may run no iteration (a
//! run-time extent, a `while`) leaves what was pending before it pending after it, whatever
//! barriers its body holds. The emulator checks the result element by element.

use std::collections::BTreeSet;

use tilec_ir::AccessKind;
use tilec_ir::thread::{BufferId, Stmt};

/// The shared buffers an operation reads, writes, and updates atomically.
#[derive(Clone, Debug, Default)]
pub(crate) struct Accesses {
    reads: BTreeSet<BufferId>,
    writes: BTreeSet<BufferId>,
    /// Read-modify-writes of `T.atomic_*`: atomic against each other, so two of them need no
    /// barrier between them (a histogram's counts, added to by every thread in any order), but
    /// not against plain reads and writes.
    atomics: BTreeSet<BufferId>,
}

impl Accesses {
    pub(crate) fn add(&mut self, buffer: BufferId, kind: AccessKind) {
        if matches!(kind, AccessKind::Read | AccessKind::ReadWrite) {
            self.reads.insert(buffer);
        }
        if matches!(kind, AccessKind::Write | AccessKind::ReadWrite) {
            self.writes.insert(buffer);
        }
    }

    /// An atomic update of `buffer`.
    pub(crate) fn add_atomic(&mut self, buffer: BufferId) {
        self.atomics.insert(buffer);
    }

    fn extend(&mut self, other: &Accesses) {
        self.reads.extend(other.reads.iter().copied());
        self.writes.extend(other.writes.iter().copied());
        self.atomics.extend(other.atomics.iter().copied());
    }

    /// Whether running `self` after `earlier` without a barrier could race: one writes bytes the
    /// other reads or writes, through the same buffer or one the shared-memory plan placed over
    /// the same bytes; atomic updates race with plain accesses only.
    fn conflicts_with(&self, earlier: &Accesses, shares: &Overlaps) -> bool {
        let meets = |mine: &BTreeSet<BufferId>, theirs: &BTreeSet<BufferId>| {
            mine.iter()
                .any(|&a| theirs.iter().any(|&b| a == b || shares.contains(&(a, b))))
        };
        meets(&self.reads, &earlier.writes)
            || meets(&self.writes, &earlier.writes)
            || meets(&self.writes, &earlier.reads)
            || meets(&self.reads, &earlier.atomics)
            || meets(&self.writes, &earlier.atomics)
            || meets(&self.atomics, &earlier.reads)
            || meets(&self.atomics, &earlier.writes)
    }

    fn clear(&mut self) {
        self.reads.clear();
        self.writes.clear();
        self.atomics.clear();
    }
}

/// Pairs of distinct shared buffers whose bytes overlap (both orders).
type Overlaps = BTreeSet<(BufferId, BufferId)>;

/// What lowering knows about shared-memory accesses not yet separated by a barrier.
#[derive(Debug, Default)]
pub(crate) struct SyncState {
    pending: Accesses,
    /// Buffers placed over the same bytes (live at different times).
    overlaps: Overlaps,
    /// For each loop body being lowered: its accesses before its first barrier, whether a
    /// barrier has been placed in it, and what was pending when it began.
    loops: Vec<(Accesses, bool, Accesses)>,
    /// The statements being lowered run on the threads a thread-dependent condition selects
    /// (`if tx == 0:`): no block barrier may be placed among them, since the other threads
    /// never reach it. The barrier before the whole statement orders it against the block.
    divergent: bool,
}

impl SyncState {
    /// Places a barrier in `out` if the operation with `accesses` must wait for earlier ones.
    pub(crate) fn before(&mut self, accesses: &Accesses, out: &mut Vec<Stmt>) {
        if !self.divergent && accesses.conflicts_with(&self.pending, &self.overlaps) {
            out.push(Stmt::Barrier);
            self.pending.clear();
            for frame in &mut self.loops {
                frame.1 = true;
            }
        }
        for frame in &mut self.loops {
            if !frame.1 {
                frame.0.extend(accesses);
            }
        }
    }

    /// Records what an operation did, once its statements are placed.
    pub(crate) fn after(&mut self, accesses: &Accesses) {
        self.pending.extend(accesses);
    }

    /// Declares the shared buffers as placed: `(buffer, first byte, bytes)`.
    pub(crate) fn set_placement(&mut self, placed: &[(BufferId, i64, i64)]) {
        for &(a, a_start, a_len) in placed {
            for &(b, b_start, b_len) in placed {
                if a != b && a_start < b_start + b_len && b_start < a_start + a_len {
                    self.overlaps.insert((a, b));
                }
            }
        }
    }

    /// The state for the statements of a thread group (`groups.rs`): the same placement of
    /// buffers, nothing pending yet (what the block left pending is the enclosing state's, which
    /// placed a block barrier before the group if the group meets it).
    pub(crate) fn for_group(&self) -> SyncState {
        SyncState {
            pending: Accesses::default(),
            overlaps: self.overlaps.clone(),
            loops: Vec::new(),
            divergent: false,
        }
    }

    /// The state for the branches of an `if` whose condition differs between threads and that
    /// gives no thread group its statements (`if tx == 0:`, `if mask[tx]:`): nothing pending,
    /// and no barrier placed inside (TVM's storage sync likewise orders such a statement as a
    /// whole, from outside it).
    pub(crate) fn for_divergent_branch(&self) -> SyncState {
        SyncState {
            divergent: true,
            ..self.for_group()
        }
    }

    /// Records a barrier placed by the caller (a software pipeline's own).
    pub(crate) fn barrier_placed(&mut self) {
        self.pending.clear();
        for frame in &mut self.loops {
            frame.1 = true;
        }
    }

    /// What is pending now: an `if` lowers its second arm from where its first began, and joins
    /// what both leave pending ([`SyncState::branch_from`], [`SyncState::join`]).
    pub(crate) fn pending(&self) -> Accesses {
        self.pending.clone()
    }

    /// Starts another arm of an `if` from what was pending before the `if`.
    pub(crate) fn branch_from(&mut self, before: &Accesses) {
        self.pending = before.clone();
    }

    /// After an `if`: what either arm left pending is pending, since either may have run.
    pub(crate) fn join(&mut self, other_arm: &Accesses) {
        self.pending.extend(other_arm);
    }

    pub(crate) fn begin_loop(&mut self) {
        self.loops
            .push((Accesses::default(), false, self.pending.clone()));
    }

    /// Closes a loop body: when what it left pending meets what its next iteration does first,
    /// the body ends with a barrier. A loop that `may_run_zero_times` (a run-time extent, a
    /// `while`) may leave what was pending before it pending after it, barriers inside it
    /// notwithstanding: a varlen kernel whose key loop is empty goes from writing `Q_shared`
    /// straight to writing `O_shared` over the same bytes.
    pub(crate) fn end_loop(&mut self, body: &mut Vec<Stmt>, may_run_zero_times: bool) {
        let Some((entry, _, before)) = self.loops.pop() else {
            return;
        };
        if !self.divergent && entry.conflicts_with(&self.pending, &self.overlaps) {
            body.push(Stmt::Barrier);
            self.pending.clear();
            for frame in &mut self.loops {
                frame.1 = true;
            }
        }
        if may_run_zero_times {
            self.pending.extend(&before);
        }
    }
}
