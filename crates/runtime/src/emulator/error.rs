//! What the emulator reports when a program misbehaves: the kind of fault plus where it happened.
//!
//! Every fault found while a block runs names the innermost enclosing [`tilec_ir::thread::Stmt::Block`]
//! (its `origin` entity, which the caller maps to a source range, and its `label`), the block index
//! and, where one thread is to blame, that thread. Faults found before the run (a malformed program or
//! arguments that do not match the declarations) and after it (unwritten outputs) carry no site.

use std::fmt;

use tilec_ir::EntityId;

/// A fault of a program run, with the place it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmulatorError {
    pub kind: ErrorKind,
    /// The `origin` of the innermost enclosing statement block, when it has one.
    pub origin: Option<EntityId>,
    /// The `label` of the innermost enclosing statement block.
    pub label: Option<String>,
    /// The block index `(x, y, z)` that was running.
    pub block: Option<[u32; 3]>,
    /// The flat thread index the fault is charged to.
    pub thread: Option<u32>,
}

impl EmulatorError {
    /// A fault without a site: found before or after the blocks ran.
    pub fn new(kind: ErrorKind) -> EmulatorError {
        EmulatorError {
            kind,
            origin: None,
            label: None,
            block: None,
            thread: None,
        }
    }

    pub(super) fn malformed(message: impl Into<String>) -> Fault {
        Box::new(EmulatorError::new(ErrorKind::Malformed(message.into())))
    }

    pub(super) fn argument(name: &str, message: impl Into<String>) -> Fault {
        Box::new(EmulatorError::new(ErrorKind::BadArgument {
            name: name.to_owned(),
            message: message.into(),
        }))
    }
}

/// An error as the emulator passes it around internally: boxed, so that results stay small.
pub(super) type Fault = Box<EmulatorError>;

/// Why an index expression has no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexFault {
    DivisionByZero,
    Overflow,
    /// The expression reads a variable that is not bound where it is evaluated (by name).
    Unbound(String),
}

/// Which two accesses of a shared element conflict. The first named thread made the earlier access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaceKind {
    /// A write, then a read by another thread.
    ReadAfterWrite,
    /// A read, then a write by another thread.
    WriteAfterRead,
    /// Two writes by different threads.
    WriteAfterWrite,
}

/// What is wrong with the use of one mbarrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MbarrierFault {
    /// Used before any thread of the block initialised it.
    Uninitialized,
    /// Initialised a second time in one block.
    Reinitialized,
    /// Invalidated while a phase was still open or a copy it completed had not landed.
    InvalidatedInUse,
    /// Used by another thread than its `initializer` with no barrier since the initialisation,
    /// which is what publishes it.
    Unpublished { initializer: u32 },
    /// An arrival on a phase whose arrivals had all come (it waited only for transaction bytes).
    TooManyArrivals,
    /// The block ended with `bytes` transaction bytes expected and not completed by a TMA copy
    /// (negative: bytes completed that no `expect_tx` announced).
    PendingBytes { bytes: i64 },
}

/// One wait that can never pass: a role (or the whole block) waits on a barrier nothing left to
/// run can complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedWait {
    /// `producer` or `consumer` inside warp roles, the branch of a warp-specialized `if` chain,
    /// `block` outside them.
    pub role: &'static str,
    pub on: WaitOn,
}

/// What a blocked wait waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitOn {
    /// The phase of parity `parity` of mbarrier `barrier[index]`.
    Mbarrier {
        barrier: String,
        index: i64,
        parity: i64,
    },
    /// Named barrier `id`, which `threads` threads complete and `arrived` have reached.
    NamedBarrier { id: u32, arrived: u32, threads: u32 },
}

impl fmt::Display for BlockedWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.on {
            WaitOn::Mbarrier {
                barrier,
                index,
                parity,
            } => write!(
                f,
                "the {} waits for parity {parity} of `{barrier}[{index}]`",
                self.role
            ),
            WaitOn::NamedBarrier {
                id,
                arrived,
                threads,
            } => write!(
                f,
                "the {} waits at named barrier {id}, which {arrived} of its {threads} threads \
                 have reached",
                self.role
            ),
        }
    }
}

/// The kinds of fault the emulator detects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The program breaks an invariant of [`tilec_ir::ThreadProgram`] (a bad id, a value that refers to
    /// a later value, a shared buffer outside the shared arena, ...).
    Malformed(String),
    /// A tensor or scalar argument does not match the program's declaration of it.
    BadArgument { name: String, message: String },
    /// An index (of `buffer`, or of a loop extent or `let` when `None`) could not be evaluated.
    IndexFault {
        buffer: Option<String>,
        fault: IndexFault,
    },
    OutOfBounds {
        buffer: String,
        index: i64,
        elements: i64,
    },
    /// A shared element read before any thread of the block wrote it.
    UninitializedShared { buffer: String, index: i64 },
    /// A register (local) element read before the thread wrote it.
    UninitializedLocal { buffer: String, index: i64 },
    /// A shared element read through `buffer` while its bytes were last written through `other`, a
    /// different buffer placed over the same bytes.
    SharedAlias {
        buffer: String,
        index: i64,
        other: String,
    },
    /// Two threads accessed one shared element between two barriers, at least one of them writing.
    Race {
        buffer: String,
        index: i64,
        kind: RaceKind,
        first: i64,
        second: i64,
    },
    /// A write-only parameter's element read before the kernel wrote it.
    PoisonedRead { buffer: String, index: i64 },
    /// A write to a parameter declared read-only.
    WriteToReadOnly { buffer: String, index: i64 },
    /// Elements of a write-only parameter that no thread wrote: `first` is the multi-index of the
    /// first of them and `count` how many there are.
    Unwritten {
        param: String,
        first: Vec<i64>,
        count: usize,
    },
    /// `__syncthreads()` reached by only `active` of the block's `threads` threads.
    DivergentBarrier { active: usize, threads: usize },
    /// A shuffle read the value of a thread that was not executing the statement.
    ShuffleInactiveLane { partner: i64, mask: u32 },
    /// A shuffle the user wrote (`T.shfl_*`) whose lane `mask` names thread `missing`, which does
    /// not execute it (divergent control): CUDA leaves the result undefined.
    ShuffleDivergent {
        intrinsic: &'static str,
        mask: u32,
        missing: i64,
    },
    /// A user shuffle that reads thread `source`, which is not executing it (or not in the mask).
    ShuffleSource {
        intrinsic: &'static str,
        source: i64,
    },
    /// A shuffle executed by a thread that its own lane mask leaves out, or whose segment width
    /// is not a power of two from 1 to 32.
    ShuffleOperands {
        intrinsic: &'static str,
        message: String,
    },
    /// A random number drawn (`draw`) by a thread whose generator `T.rng_init` never started.
    RandomUninitialised { draw: &'static str },
    /// A grid-wide barrier (`T.sync_grid`) the emulator cannot complete: `message` says why.
    GridSync(String),
    /// A loop extent depends on the thread index (the program would not run in lockstep).
    ThreadDependentExtent,
    /// `T.device_assert` found its condition false in a thread.
    AssertionFailed { message: String },
    /// `__syncwarp()` reached by only `active` of the `lanes` running lanes of warp `warp`.
    DivergentWarpSync {
        warp: u32,
        active: usize,
        lanes: usize,
    },
    /// A vector access whose index is not a multiple of its lane count, or whose address is not aligned
    /// to the vector's size.
    Misaligned {
        buffer: String,
        index: i64,
        lanes: u32,
    },
    /// Element arithmetic without a defined result: integer division by zero, a shift by more than the
    /// width, a bit operation on floats.
    Arithmetic(String),
    /// A shared element accessed while a `cp.async` to it was still in flight: the issuing thread
    /// had not waited for its group (`cp.async.wait_group`) yet.
    AsyncInFlight { buffer: String, index: i64 },
    /// A thread ended the block with `count` async copies it never waited for.
    AsyncNeverWaited { count: usize },
    /// A warpgroup ended the block with `count` wgmmas it never waited for.
    WgmmaNeverWaited { count: usize },
    /// A warp-wide instruction (`ldmatrix`, `mma.sync`) executed by only part of a warp.
    PartialWarp {
        instruction: &'static str,
        warp: u32,
    },
    /// The mbarrier `barrier[index]` was misused.
    Mbarrier {
        barrier: String,
        index: i64,
        fault: MbarrierFault,
    },
    /// Every role that has not finished waits for an mbarrier phase that nothing left to run can
    /// complete.
    MbarrierDeadlock { waits: Vec<BlockedWait> },
    /// A shared element accessed while a TMA copy into it was in flight: nobody had waited for the
    /// mbarrier phase the copy completes on.
    TmaInFlight { buffer: String, index: i64 },
    /// The block ended with `copies` TMA copies that complete on `barrier[index]` never landed: no
    /// thread waited for their phase.
    TmaNeverWaited {
        barrier: String,
        index: i64,
        copies: usize,
    },
    /// A TMA copy into `buffer[index]` that may overwrite it while thread `other`, of the other
    /// warp role, still uses it: no mbarrier orders that access before the copy.
    UnorderedTma {
        buffer: String,
        index: i64,
        other: i64,
    },
    /// A TMA copy into `buffer[index]`, whose shared address is not a multiple of 128 bytes.
    TmaMisaligned {
        buffer: String,
        index: i64,
        address: i64,
    },
    /// `bar.sync id, threads` executed by `active` threads instead of `threads`.
    DivergentNamedBarrier {
        id: u32,
        active: usize,
        threads: u32,
    },
    /// The consumer warpgroups' turn-taking breaks the protocol that keeps it free of deadlocks.
    WarpgroupTurn(String),
    /// A call of a device function from the user's own CUDA source (`T.call_extern`), which the
    /// emulator cannot run: only the GPU can.
    ExternCall { name: String },
    /// The run took longer than the time budget its caller gave it and was stopped: the program
    /// may be correct, it was just not finished.
    OutOfTime { budget: std::time::Duration },
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Malformed(message) => write!(f, "malformed thread program: {message}"),
            ErrorKind::ExternCall { name } => write!(
                f,
                "the emulator cannot run `{name}`, a function of the kernel's own CUDA source \
                 (`T.call_extern`, `T.import_source`): only a GPU can"
            ),
            ErrorKind::BadArgument { name, message } => write!(f, "argument `{name}`: {message}"),
            ErrorKind::IndexFault { buffer, fault } => {
                match buffer {
                    Some(buffer) => write!(f, "index of `{buffer}`: ")?,
                    None => f.write_str("index: ")?,
                }
                match fault {
                    IndexFault::DivisionByZero => f.write_str("division by zero"),
                    IndexFault::Overflow => f.write_str("integer overflow"),
                    IndexFault::Unbound(name) => write!(f, "variable `{name}` is not bound"),
                }
            }
            ErrorKind::OutOfBounds {
                buffer,
                index,
                elements,
            } => {
                write!(
                    f,
                    "out-of-bounds access `{buffer}[{index}]` (it has {elements} elements)"
                )
            }
            ErrorKind::UninitializedShared { buffer, index } => {
                write!(
                    f,
                    "read of shared `{buffer}[{index}]`, which no thread of the block wrote"
                )
            }
            ErrorKind::UninitializedLocal { buffer, index } => {
                write!(
                    f,
                    "read of local `{buffer}[{index}]` before the thread wrote it"
                )
            }
            ErrorKind::SharedAlias {
                buffer,
                index,
                other,
            } => write!(
                f,
                "read of shared `{buffer}[{index}]` whose bytes were last written through `{other}`"
            ),
            ErrorKind::Race {
                buffer,
                index,
                kind,
                first,
                second,
            } => {
                let (earlier, later) = match kind {
                    RaceKind::ReadAfterWrite => ("written", "read"),
                    RaceKind::WriteAfterRead => ("read", "written"),
                    RaceKind::WriteAfterWrite => ("written", "written"),
                };
                write!(
                    f,
                    "shared-memory race on `{buffer}[{index}]`: {earlier} by thread {first}, then \
                     {later} by thread {second}, with no barrier between"
                )
            }
            ErrorKind::PoisonedRead { buffer, index } => {
                write!(
                    f,
                    "read of output `{buffer}[{index}]` before the kernel wrote it"
                )
            }
            ErrorKind::WriteToReadOnly { buffer, index } => {
                write!(
                    f,
                    "write to `{buffer}[{index}]`, a parameter declared read-only"
                )
            }
            ErrorKind::Unwritten {
                param,
                first,
                count,
            } => {
                let first: Vec<String> = first.iter().map(i64::to_string).collect();
                write!(
                    f,
                    "output `{param}` has {count} element(s) the kernel never wrote, the first at [{}]",
                    first.join(", ")
                )
            }
            ErrorKind::DivergentBarrier { active, threads } => write!(
                f,
                "barrier in divergent code: reached by {active} of the block's {threads} threads"
            ),
            ErrorKind::ShuffleInactiveLane { partner, mask } => write!(
                f,
                "shuffle (xor {mask}) reads thread {partner}, which is not executing the statement"
            ),
            ErrorKind::ShuffleDivergent {
                intrinsic,
                mask,
                missing,
            } => write!(
                f,
                "{intrinsic} with mask {mask:#010x} in divergent code: thread {missing} is in the \
                 mask but does not execute the shuffle, so the result is undefined"
            ),
            ErrorKind::ShuffleSource { intrinsic, source } => write!(
                f,
                "{intrinsic} reads thread {source}, which does not execute the shuffle or is not \
                 in its mask, so the result is undefined"
            ),
            ErrorKind::ShuffleOperands { intrinsic, message } => {
                write!(f, "{intrinsic}: {message}")
            }
            ErrorKind::RandomUninitialised { draw } => write!(
                f,
                "{draw} in a thread whose random generator no `T.rng_init` has started"
            ),
            ErrorKind::GridSync(message) => write!(f, "T.sync_grid: {message}"),
            ErrorKind::ThreadDependentExtent => {
                f.write_str("a loop extent depends on the thread index")
            }
            ErrorKind::AssertionFailed { message } if message.is_empty() => {
                f.write_str("device_assert failed")
            }
            ErrorKind::AssertionFailed { message } => {
                write!(f, "device_assert failed: {message}")
            }
            ErrorKind::DivergentWarpSync {
                warp,
                active,
                lanes,
            } => write!(
                f,
                "__syncwarp in divergent code: reached by {active} of the {lanes} running lanes \
                 of warp {warp}"
            ),
            ErrorKind::Misaligned {
                buffer,
                index,
                lanes,
            } => {
                write!(
                    f,
                    "misaligned {lanes}-lane vector access `{buffer}[{index}]`"
                )
            }
            ErrorKind::Arithmetic(message) => f.write_str(message),
            ErrorKind::AsyncInFlight { buffer, index } => write!(
                f,
                "shared `{buffer}[{index}]` accessed while a cp.async to it is in flight (its \
                 group was not waited for with cp.async.wait_group)"
            ),
            ErrorKind::AsyncNeverWaited { count } => write!(
                f,
                "{count} cp.async copies were never waited for before the block ended"
            ),
            ErrorKind::WgmmaNeverWaited { count } => write!(
                f,
                "{count} wgmma instructions were never waited for (wgmma.wait_group) before the \
                 block ended"
            ),
            ErrorKind::PartialWarp { instruction, warp } => write!(
                f,
                "`{instruction}` executed by only part of warp {warp} (it needs all 32 lanes)"
            ),
            ErrorKind::Mbarrier {
                barrier,
                index,
                fault,
            } => {
                write!(f, "mbarrier `{barrier}[{index}]` ")?;
                match fault {
                    MbarrierFault::Uninitialized => f.write_str("used before it was initialised"),
                    MbarrierFault::Reinitialized => f.write_str("initialised twice in one block"),
                    MbarrierFault::InvalidatedInUse => f.write_str(
                        "invalidated while a phase was open or a copy it completed had not landed",
                    ),
                    MbarrierFault::Unpublished { initializer } => write!(
                        f,
                        "used without a barrier after thread {initializer} initialised it"
                    ),
                    MbarrierFault::TooManyArrivals => {
                        f.write_str("received more arrivals than its count in one phase")
                    }
                    MbarrierFault::PendingBytes { bytes } => write!(
                        f,
                        "ended the block with {bytes} transaction byte(s) not completed by a TMA copy"
                    ),
                }
            }
            ErrorKind::MbarrierDeadlock { waits } => {
                f.write_str("deadlock: ")?;
                for (k, wait) in waits.iter().enumerate() {
                    if k > 0 {
                        f.write_str(" and ")?;
                    }
                    write!(f, "{wait}")?;
                }
                f.write_str(", a phase nothing left to run can complete")
            }
            ErrorKind::TmaInFlight { buffer, index } => write!(
                f,
                "shared `{buffer}[{index}]` accessed while a TMA copy to it is in flight (no \
                 thread waited for the mbarrier phase it completes on)"
            ),
            ErrorKind::TmaNeverWaited {
                barrier,
                index,
                copies,
            } => write!(
                f,
                "{copies} TMA copies completing on mbarrier `{barrier}[{index}]` never landed: no \
                 thread waited for their phase before the block ended"
            ),
            ErrorKind::UnorderedTma {
                buffer,
                index,
                other,
            } => write!(
                f,
                "TMA copy into shared `{buffer}[{index}]` while thread {other} of the other role \
                 may still access it: no mbarrier wait orders that access before the copy (was \
                 the stage released before its last use?)"
            ),
            ErrorKind::TmaMisaligned {
                buffer,
                index,
                address,
            } => write!(
                f,
                "TMA copy into `{buffer}[{index}]` at shared address {address}, which is not a \
                 multiple of 128 bytes"
            ),
            ErrorKind::DivergentNamedBarrier {
                id,
                active,
                threads,
            } => write!(
                f,
                "named barrier {id} for {threads} threads reached by {active} threads"
            ),
            ErrorKind::WarpgroupTurn(message) => write!(f, "warpgroup turn-taking: {message}"),
            ErrorKind::OutOfTime { budget } => write!(
                f,
                "stopped after its time budget of {:.1} s (not finished, not necessarily wrong)",
                budget.as_secs_f64()
            ),
        }
    }
}

impl fmt::Display for EmulatorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        if let Some([x, y, z]) = self.block {
            write!(f, " in block ({x}, {y}, {z})")?;
        }
        if let Some(thread) = self.thread {
            write!(f, " thread {thread}")?;
        }
        if let Some(label) = &self.label {
            write!(f, ", in `{label}`")?;
        }
        if let Some(origin) = self.origin {
            write!(f, " (entity {})", origin.index())?;
        }
        Ok(())
    }
}

impl std::error::Error for EmulatorError {}
