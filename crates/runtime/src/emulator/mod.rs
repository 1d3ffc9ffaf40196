//! The CPU emulator of the thread program: runs a [`ThreadProgram`] on host tensors and reports
//! every fault that would make the generated CUDA wrong or undefined.
//!
//! Execution follows the two rules of [`tilec_ir::thread`]. Blocks run one after another (x fastest,
//! then y, then z), except in a program with grid barriers (`T.sync_grid`), whose blocks run
//! interleaved, each up to the next barrier, until all have reached it (see `grid.rs`). Within a block all threads run in lockstep: each statement executes for all
//! threads that reach it before the next statement starts (see `exec.rs`), values are computed
//! column-wise over those threads (see `eval.rs`), and an `if` splits the threads into the two
//! branches, which run one after the other.
//!
//! Warp specialization is the exception to lockstep: the two roles of a `WarpRoles` statement run
//! concurrently, as two resumable tasks under a deterministic scheduler (see `roles.rs`): the
//! producer runs until it blocks on an mbarrier wait whose phase has not completed, then the
//! consumer, and so on, until both have finished. Within a role, threads run in lockstep.
//!
//! Asynchronous work is modelled as deferred: a `cp.async` lands at its `wait_group`, a `wgmma`
//! executes at its `wait_group` (see `wgmma.rs`), and a TMA copy reads global memory when issued but
//! lands in shared memory only when a wait passes the mbarrier phase it completes on (see
//! `mbarrier.rs` and `tma.rs`). Until then its elements are in flight, so reading them early is
//! reported instead of reading data the GPU might not have delivered yet.
//!
//! Values are carried as `f64` and rounded to their node's dtype after every operation (see
//! `arith.rs`), so fp16, bf16 and fp32 arithmetic is reproduced bit for bit; transcendental
//! intrinsics are computed in `f64` and only match the GPU up to a tolerance. Integers are carried in
//! the same `f64`s, exact up to 2^53 (so `int64`/`uint64` values beyond that lose bits).
//!
//! What is checked (see `memory.rs` for the memory model and the race detector):
//! - out-of-bounds indices in every memory, and index arithmetic that divides by zero or overflows;
//! - reads of shared elements no thread of the block wrote, of registers the thread did not write,
//!   and of output elements the kernel did not write yet; output elements left unwritten at the end;
//! - unsynchronised shared-memory accesses: two threads touching one element between two barriers,
//!   at least one writing (atomics exempt);
//! - barriers reached by only part of the block, shuffles that read a thread not executing the
//!   statement, loop extents that depend on the thread, misaligned vector copies;
//! - the mbarrier protocol: uninitialised, twice-initialised or unpublished mbarriers (used by
//!   another thread with no barrier after the initialisation), arrivals beyond a phase's count,
//!   reads of TMA data before a wait on its phase, TMA copies into elements still in flight,
//!   copies that no wait ever landed and transaction bytes left pending at the end of a block,
//!   and deadlocks (every unfinished role, or the block outside roles, waiting for a phase nothing
//!   left to run can complete), named by mbarrier, parity and role;
//! - the reuse of TMA stages: outside roles a copy conflicts, like a write by its issuing thread,
//!   with other threads' accesses in the same barrier epoch; inside roles a copy into an element
//!   that the other role accessed after the last arrival the issuing role has acquired (a stage
//!   released before its last use) is reported, whatever order the scheduler ran the roles in;
//! - TMA tensor maps that the host could not encode (box dimensions, inner row bytes, swizzle
//!   span, global strides) and destinations that are not 128-byte aligned; named barriers reached
//!   by another number of threads than they name; `setmaxnreg` and `wgmma` by partial
//!   warpgroups; consumer warpgroups' turn-taking that could deadlock or leave a barrier phase
//!   half complete (see `turns.rs`).
//!
//! Shared buffers may overlap in bytes (the shared-memory plan reuses bytes across disjoint
//! lifetimes); reading bytes through another buffer than the one that last wrote them is reported.
//!
//! Known limits: global memory has no race detection (two threads or blocks writing one element go
//! unnoticed); an atomic and a plain access of one shared element in one epoch are not reported;
//! 64-bit integers are exact only up to 2^53; one error stops the run (the first in block order,
//! then statement order, then thread order).
//!
//! Known limits of the TMA and warp-role model:
//! - the scheduler explores one interleaving of the roles, the producer running as far ahead as it
//!   can; mistakes that only another interleaving exposes are found only where the role clocks
//!   or the in-flight marks make them independent of the order (stage reuse, early reads);
//! - generic shared-memory accesses across roles are checked by the epoch race detector only, and
//!   epochs are block-wide: a named barrier of one role also separates the other role's accesses,
//!   and a producer's generic write read by a consumer after an mbarrier wait in the same epoch
//!   would be reported as a race (the lowering's producers only issue TMA copies);
//! - TMA data landed by one thread's wait is visible to every thread, so a thread that reads it
//!   without waiting itself (or a barrier after another's wait) is not reported;
//! - within one role the branches of an `if` run one after the other, so a branch that waits for
//!   an arrival the other branch makes is reported as a deadlock; a named barrier shared by both
//!   roles is reported as reached by too few threads;
//! - a wait for a parity passes on the latest completed phase of that parity and acquires what all
//!   completed phases published, so a wait that aliases an older phase synchronises too much;
//! - byte ownership of TMA landings into shared bytes overlapped by other buffers is taken without
//!   a race check, and accesses through an overlapping buffer do not see the in-flight marks.

mod arith;
mod error;
mod eval;
mod exec;
mod grid;
mod index;
mod mbarrier;
mod memory;
mod named;
pub use memory::BlockOrder;
mod random;
mod roles;
mod setup;
#[cfg(test)]
mod tests;
mod tma;
mod turns;
mod warp;
mod wgmma;

use std::fmt;
use std::time::{Duration, Instant};

use tilec_ir::ThreadProgram;
use tilec_ir::thread::ParamAccess;

pub use error::{
    BlockedWait, EmulatorError, ErrorKind, IndexFault, MbarrierFault, RaceKind, WaitOn,
};

use crate::tensor::HostTensor;
use exec::Machine;

/// A thread's number within its block, or a position among one statement's accesses (a few per
/// thread, or one per element of a TMA box), as the `u32` the emulator numbers them by. Blocks
/// have at most 1024 threads (`setup::MAX_THREADS`, checked before a launch runs) and a box fits
/// in shared memory, so every such number is far below `u32::MAX`; the conversion saturates
/// rather than panics.
fn thread_u32(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}

/// A position in an in-memory table (an element, a register, a lane) as an index of the IR.
/// Memory holds at most `isize::MAX` bytes, so every such position fits an i64; the conversion
/// saturates rather than panics.
fn index_i64(index: usize) -> i64 {
    i64::try_from(index).unwrap_or(i64::MAX)
}

/// A small non-negative number of the instruction tables of `tilec_ir::thread` (a row or column
/// of one tile, a register count, an instruction's K) as a `usize`: the tables give values in
/// `0..256`.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn small_usize(value: i64) -> usize {
    value as usize
}

/// What a run executed, for a "what ran" line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EmulatorReport {
    /// Per parameter, the elements two blocks stored different values to: undefined on a GPU
    /// (see [`BlockOrder`]).
    pub block_order: Vec<BlockOrder>,
    pub blocks: u64,
    pub threads_per_block: u64,
    /// Statements executed, each counted once per block and loop iteration however many threads
    /// executed it.
    pub statements: u64,
    /// Statements executed summed over the threads that executed them.
    pub thread_statements: u64,
    /// Barriers passed, summed over blocks.
    pub barriers: u64,
    pub global_loads: u64,
    pub global_stores: u64,
    pub shared_loads: u64,
    pub shared_stores: u64,
    pub atomics: u64,
}

impl fmt::Display for EmulatorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} block(s) × {} thread(s): {} statements ({} thread-statements), {} barriers, \
             global {} loads / {} stores, shared {} loads / {} stores, {} atomics",
            self.blocks,
            self.threads_per_block,
            self.statements,
            self.thread_statements,
            self.barriers,
            self.global_loads,
            self.global_stores,
            self.shared_loads,
            self.shared_stores,
            self.atomics
        )
    }
}

/// Runs every block of `program` on `tensors` (`tensors[k]` is the tensor of `program.params[k]`)
/// with the scalar parameters `scalars` (`scalars[j]` binds `program.scalars[j]`).
///
/// Write-only parameters are poisoned first (NaN for floats) and every element left unwritten is an
/// error, except in a kernel that reads a tensor of indices, whose outputs keep what the caller
/// gave where it does not write. On success the tensors hold the kernel's results; on an error their contents are whatever
/// the run had written up to the fault.
pub fn run_program(
    program: &ThreadProgram,
    tensors: &mut [HostTensor],
    scalars: &[i64],
) -> Result<EmulatorReport, EmulatorError> {
    run_program_within(program, tensors, scalars, None)
}

/// [`run_program`] with a time budget: a run still going after `budget` stops with
/// [`ErrorKind::OutOfTime`], so that a caller that must stay responsive (`tilec watch`) is never
/// held for minutes by a large launch or a long loop. The clock is read every few thousand
/// statements, so the run stops within a millisecond or so of its budget.
pub fn run_program_within(
    program: &ThreadProgram,
    tensors: &mut [HostTensor],
    scalars: &[i64],
    budget: Option<Duration>,
) -> Result<EmulatorReport, EmulatorError> {
    run_program_observed(program, tensors, scalars, budget, &mut |_, _| {})
}

/// [`run_program_within`], calling `progress(blocks done, blocks in all)` after each block, so that
/// a run of minutes can show how far it is (`tilec run` on a terminal). Blocks that meet at grid
/// barriers run interleaved and report once, when all are done.
pub fn run_program_observed(
    program: &ThreadProgram,
    tensors: &mut [HostTensor],
    scalars: &[i64],
    budget: Option<Duration>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<EmulatorReport, EmulatorError> {
    let deadline = budget.map(|budget| (Instant::now() + budget, budget));
    let mut indexer = index::Indexer::new(&program.exprs);
    let setup = setup::prepare(program, tensors, scalars, &mut indexer).map_err(|fault| *fault)?;
    // The gaps of a strided tensor's storage keep what the caller gave, as on the GPU: it is
    // not poisoned, and so not checked for unwritten elements, as an output the kernel also
    // reads is not.
    let access: Vec<ParamAccess> = program
        .params
        .iter()
        .map(|param| match program.buffer(param.buffer).strides {
            Some(_) if param.access == ParamAccess::Write => ParamAccess::ReadWrite,
            _ => param.access,
        })
        .collect();
    // A kernel that reads indices may leave parts of its outputs unwritten (see
    // `check_unwritten`): those keep the values the caller gave, as on the GPU, so that a
    // comparison of the two sees the same there.
    let poison_outputs = !reads_indices(program);
    let block_order = !tilec_ir::thread::uses_grid_sync(&program.body);
    let memory = memory::Memory::new(
        tensors,
        (access, poison_outputs, block_order),
        &setup.buffers,
        setup.shared_bytes,
        setup.threads,
    );
    let mut machine = Machine {
        program,
        buffers: setup.buffers,
        threads: setup.threads,
        memory,
        env: setup.env,
        indexer,
        frame: eval::Frame::new(program.values.len()),
        sites: Vec::new(),
        block: [0; 3],
        blocks: setup.grid[0],
        grid_blocks: setup.grid.iter().map(|&g| u64::from(g)).product(),
        report: EmulatorReport {
            threads_per_block: setup.threads as u64,
            ..EmulatorReport::default()
        },
        shadowed: Vec::new(),
        asyncs: vec![warp::AsyncQueue::default(); setup.threads],
        wgmmas: vec![wgmma::WgmmaQueue::default(); setup.threads.div_ceil(128)],
        mbarriers: mbarrier::Mbarriers::default(),
        turns: turns::Turns::default(),
        named: named::NamedBarriers::default(),
        exited: vec![false; setup.threads],
        exited_count: 0,
        generators: vec![None; setup.threads],
        maps: setup.maps,
        deadline,
    };
    let [gx, gy, gz] = setup.grid;
    if tilec_ir::thread::uses_grid_sync(&program.body) && machine.grid_blocks > 1 {
        // Blocks meet at grid barriers: they run interleaved, each up to the next one.
        let blocks: Vec<[u32; 3]> = (0..gz)
            .flat_map(|z| (0..gy).flat_map(move |y| (0..gx).map(move |x| [x, y, z])))
            .collect();
        machine.run_grid(&blocks).map_err(|fault| *fault)?;
        progress(machine.grid_blocks, machine.grid_blocks);
    } else {
        let mut done = 0;
        for z in 0..gz {
            for y in 0..gy {
                for x in 0..gx {
                    machine.run_block([x, y, z]).map_err(|fault| *fault)?;
                    done += 1;
                    progress(done, machine.grid_blocks);
                }
            }
        }
    }
    check_unwritten(program, &machine.memory, &setup.shapes)?;
    let counts = machine.memory.counts;
    let block_order = std::mem::take(&mut machine.memory.block_order)
        .into_iter()
        .map(|mut conflicts| {
            conflicts.elements.sort_unstable();
            conflicts.elements.dedup();
            conflicts
        })
        .collect();
    Ok(EmulatorReport {
        block_order,
        global_loads: counts.global_loads,
        global_stores: counts.global_stores,
        shared_loads: counts.shared_loads,
        shared_stores: counts.shared_stores,
        atomics: counts.atomics,
        ..machine.report
    })
}

/// Reports the first write-only parameter with elements the kernel never wrote, unless the
/// kernel reads a tensor of indices ([`reads_indices`]): where such a kernel writes depends on the
/// values it reads (a varlen kernel's sequence lengths, a router's expert ids), and seeded random
/// inputs leave parts of its outputs unwritten as correct code would.
fn check_unwritten(
    program: &ThreadProgram,
    memory: &memory::Memory<'_>,
    shapes: &[Vec<i64>],
) -> Result<(), EmulatorError> {
    if reads_indices(program) {
        return Ok(());
    }
    for ((param, written), shape) in program.params.iter().zip(&memory.written).zip(shapes) {
        let Some(written) = written else { continue };
        let count = written.iter().filter(|&&done| !done).count();
        let Some(first) = written.iter().position(|&done| !done) else {
            continue;
        };
        let kind = ErrorKind::Unwritten {
            param: param.name.clone(),
            first: unravel(index_i64(first), shape),
            count,
        };
        return Err(EmulatorError::new(kind));
    }
    Ok(())
}

/// Whether the kernel reads a 32- or 64-bit integer tensor: offsets, lengths, block tables and
/// indices are kept in those (quantized data is 8-bit, and does not decide where a kernel writes).
fn reads_indices(program: &ThreadProgram) -> bool {
    program.params.iter().any(|param| {
        param.access != ParamAccess::Write
            && matches!(
                program.buffer(param.buffer).dtype,
                tilec_ir::DType::Int32
                    | tilec_ir::DType::Int64
                    | tilec_ir::DType::UInt32
                    | tilec_ir::DType::UInt64
            )
    })
}

/// The row-major multi-index of flat element `flat` in `shape`.
fn unravel(mut flat: i64, shape: &[i64]) -> Vec<i64> {
    let mut index = vec![0; shape.len()];
    for (slot, &extent) in index.iter_mut().zip(shape).rev() {
        if extent > 0 {
            *slot = flat % extent;
            flat /= extent;
        }
    }
    index
}
