//! Barrier insertion: a `__syncthreads()` goes in front of every operation that reads a shared
//! buffer written since the last barrier, or writes one read or written since then, and at the end
//! of a loop body whose last accesses meet the next iteration's first ones.
//!
//! The analysis works on whole operations (a copy, a parallel loop, a reduction) and on buffers,
//! not elements: two operations that touch the same shared buffer are assumed to touch it from
//! different threads. The emulator checks the result element by element.

use std::collections::BTreeSet;

use tilec_ir::AccessKind;
use tilec_ir::thread::{BufferId, Stmt};

/// The shared buffers an operation reads and writes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Accesses {
    reads: BTreeSet<BufferId>,
    writes: BTreeSet<BufferId>,
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

    fn extend(&mut self, other: &Accesses) {
        self.reads.extend(other.reads.iter().copied());
        self.writes.extend(other.writes.iter().copied());
    }

    /// Whether running `self` after `earlier` without a barrier could race.
    fn conflicts_with(&self, earlier: &Accesses) -> bool {
        self.reads.iter().any(|b| earlier.writes.contains(b))
            || self
                .writes
                .iter()
                .any(|b| earlier.writes.contains(b) || earlier.reads.contains(b))
    }

    fn clear(&mut self) {
        self.reads.clear();
        self.writes.clear();
    }
}

/// What lowering knows about shared-memory accesses not yet separated by a barrier.
#[derive(Debug, Default)]
pub(crate) struct SyncState {
    pending: Accesses,
    /// For each loop body being lowered: its accesses before its first barrier, and whether a
    /// barrier has been placed in it.
    loops: Vec<(Accesses, bool)>,
}

impl SyncState {
    /// Places a barrier in `out` if the operation with `accesses` must wait for earlier ones.
    pub(crate) fn before(&mut self, accesses: &Accesses, out: &mut Vec<Stmt>) {
        if accesses.conflicts_with(&self.pending) {
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

    pub(crate) fn begin_loop(&mut self) {
        self.loops.push((Accesses::default(), false));
    }

    /// Closes a loop body: when what it left pending meets what its next iteration does first,
    /// the body ends with a barrier.
    pub(crate) fn end_loop(&mut self, body: &mut Vec<Stmt>) {
        let Some((entry, _)) = self.loops.pop() else {
            return;
        };
        if entry.conflicts_with(&self.pending) {
            body.push(Stmt::Barrier);
            self.pending.clear();
            for frame in &mut self.loops {
                frame.1 = true;
            }
        }
    }
}
