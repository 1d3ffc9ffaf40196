//! The three memories of a running program, with the checks every access makes.
//!
//! - Global memory is the host tensors. A write-only parameter has a "written" bitmap: reading an
//!   element before the kernel wrote it is an error, and so is leaving one unwritten.
//! - Shared memory is one arena of `shared_bytes` bytes per block. Each shared buffer keeps its
//!   element values, and the state of each element, in its own vectors. Buffers may overlap in bytes
//!   (shared memory reused by buffers with disjoint lifetimes): for those, and only those, every byte
//!   also records which buffer last wrote it in which block, and a read through buffer `B` checks that
//!   every byte of the element was last written through `B`. Overlapping buffers thus behave exactly
//!   as on the GPU for every program that does not reinterpret bytes, and a program that does is
//!   reported.
//! - Local memory is one array per thread and buffer, with a per-element stamp of the block that
//!   last wrote it, so that reading a register before writing it is reported.
//!
//! Race detection: time within a block is cut into barrier epochs (a global counter, incremented at
//! every block start and every barrier, named ones included, so nothing needs clearing between
//! blocks). Each shared element remembers its last writer and the epoch of that write, and up to two
//! distinct readers of the current read epoch. A write conflicts with a write or read by another
//! thread in the same epoch, a read with a write by another thread in the same epoch. Two
//! remembered readers suffice: when a thread writes, at least one of two distinct readers is another
//! thread. A write through a buffer that overlaps others also checks the overlapped elements of
//! those others. Atomics are exempt: they update values and ownership but not the race state.
//!
//! Asynchronous copies mark their destination elements "in flight" from issue to landing, and any
//! access to an element in flight is reported, as is a second copy into it. A `cp.async` lands as a
//! write by its issuing thread, which the race detector checks like any other. A TMA copy lands as
//! a write by the async proxy ([`ASYNC_PROXY`]), which the race detector never reports: TMA data
//! is ordered by the mbarrier protocol, not by barriers, so its epochs say nothing. The in-flight
//! marks check that protocol instead: a read before the wait on the copy's mbarrier phase finds the
//! element in flight, and so does a TMA issued into a stage whose previous copy was never waited
//! for. A TMA issue is checked against earlier accesses of its elements in two ways. Outside warp
//! roles the issuing thread's copy conflicts, like a write, with accesses by other threads in the
//! same epoch (a block barrier must protect the reuse of a stage). Inside warp roles a consumer's
//! reads of a stage are ordered before the producer's next copy into it by an mbarrier, in the same
//! epoch, so epochs cannot tell; instead each role keeps a clock ([`RoleClock`]): an arrival
//! publishes the role's time to the mbarrier phase, a wait that passes acquires what the phase
//! published, every shared access inside a role stamps the element with its role's time, and a
//! copy into an element that another role accessed later than the issuing role has acquired is
//! reported ([`ErrorKind::UnorderedTma`]). That catches a consumer that releases a stage before it
//! has finished reading it, in whatever order the scheduler ran the roles.
//!
//! Accesses come in batches, one per statement and buffer ("lanes": the executing threads, each
//! with its index), so that the buffer's kind is looked at once per batch, not once per element.

use tilec_ir::DType;
use tilec_ir::thread::{AtomicOp, ParamAccess};

use super::arith::rounder;
use super::error::{ErrorKind, RaceKind};
use super::index_i64;
use crate::tensor::HostTensor;

/// No thread.
const NONE: u32 = u32::MAX;
/// The writer of TMA data: the async proxy, whose writes the race detector never reports.
pub(super) const ASYNC_PROXY: u32 = u32::MAX - 1;
/// The writer of an element that several threads stored the same value into since the last
/// barrier: whichever landed last, the element holds that value, so neither a later read nor a
/// later write is reported against them.
const AGREEING_WRITERS: u32 = u32::MAX - 2;

/// A fault of one access, with the thread that made it.
pub(super) type LaneFault = (ErrorKind, u32);

/// Where a buffer's elements are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    Global {
        param: usize,
    },
    /// `slot` is the buffer's entry among the shared ones.
    Shared {
        offset: usize,
        slot: usize,
    },
    Local {
        slot: usize,
    },
}

/// A buffer as the emulator uses it: its declaration evaluated for this run.
#[derive(Clone, Debug)]
pub(super) struct BufferInfo<'p> {
    pub name: &'p str,
    pub dtype: DType,
    pub place: Place,
    pub elements: usize,
    /// Bytes per element.
    pub size: usize,
}

/// The most warp roles that run at once: tilec's own producer and consumer, or the branches of a
/// hand-written warp-specialized `if` / `elif` chain (see `roles.rs`).
pub(super) const ROLES: usize = 4;

/// The time of a running warp role: its own time, which stamps its accesses, and the latest time
/// of each role that it has acquired through mbarriers (its own included). Times come from one
/// counter per run, so stamps from earlier blocks and earlier roles are all older than any role's
/// start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RoleClock {
    pub role: usize,
    pub own: u64,
    pub seen: [u64; ROLES],
}

/// The last access of a shared element by one role: its time and thread.
#[derive(Clone, Copy, Debug, Default)]
struct RoleAccess {
    time: u64,
    thread: u32,
}

/// The race and initialisation state of one shared element.
#[derive(Clone, Copy, Debug, Default)]
struct ElementState {
    /// The block serial of the last write (0: never written).
    stamp: u32,
    writer: u32,
    write_epoch: u32,
    /// The `__syncwarp` count of the writer's warp when it wrote (see [`Order`]).
    write_sync: u32,
    reader: u32,
    read_sync: u32,
    /// A second reader distinct from `reader`, or [`NONE`].
    other_reader: u32,
    other_sync: u32,
    read_epoch: u32,
    /// The asynchronous copy to the element that was issued and has not landed yet, if any.
    in_flight: Flight,
    /// The last access by each warp role.
    roles: [RoleAccess; ROLES],
}

/// Stamps an element with an access by `thread` of the running role, if one runs.
fn note_role(state: &mut ElementState, clock: Option<RoleClock>, thread: u32) {
    if let Some(clock) = clock
        && let Some(access) = state.roles.get_mut(clock.role)
    {
        *access = RoleAccess {
            time: clock.own,
            thread,
        };
    }
}

/// Which kind of asynchronous copy an element waits for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Flight {
    #[default]
    Landed,
    CpAsync,
    Tma,
}

/// The fault of an access to an element in flight, named after the copy it waits for.
fn in_flight_fault(flight: Flight, info: &BufferInfo<'_>, index: i64) -> Option<ErrorKind> {
    // The name is copied only for a fault: this runs for every shared access.
    let buffer = || info.name.to_owned();
    match flight {
        Flight::Landed => None,
        Flight::CpAsync => Some(ErrorKind::AsyncInFlight {
            buffer: buffer(),
            index,
        }),
        Flight::Tma => Some(ErrorKind::TmaInFlight {
            buffer: buffer(),
            index,
        }),
    }
}

/// One shared buffer's storage.
#[derive(Clone, Debug)]
struct SharedBuffer {
    buffer: usize,
    name: String,
    offset: usize,
    size: usize,
    values: Vec<f64>,
    states: Vec<ElementState>,
    /// The shared buffers (by slot) whose bytes overlap this one's.
    overlaps: Vec<usize>,
    /// Whether two elements share each byte (the 4-bit types).
    packed: bool,
}

impl SharedBuffer {
    /// The bytes of the arena that element `element` lives in.
    fn bytes_of(&self, element: usize) -> std::ops::Range<usize> {
        let start = if self.packed {
            self.offset + element / 2
        } else {
            self.offset + element * self.size
        };
        start..start + self.size
    }

    /// The end of the buffer's bytes in the arena.
    fn end(&self) -> usize {
        if self.packed {
            self.offset + self.values.len().div_ceil(2)
        } else {
            self.offset + self.values.len() * self.size
        }
    }

    /// The first and last element stored in the (non-empty) byte range `start..end`, which lies
    /// within the buffer's bytes.
    fn elements_in(&self, start: usize, end: usize) -> (usize, usize) {
        if self.packed {
            ((start - self.offset) * 2, (end - 1 - self.offset) * 2 + 1)
        } else {
            (
                (start - self.offset) / self.size,
                (end - 1 - self.offset) / self.size,
            )
        }
    }
}

/// The last write of one byte of an overlapped region: through which buffer, in which block.
#[derive(Clone, Copy, Debug, Default)]
struct ByteOwner {
    buffer: u32,
    stamp: u32,
}

/// Elements of one tensor that two blocks stored different values to, in the order found (an
/// element may repeat): on a GPU, where blocks run in no fixed order, their values are undefined.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlockOrder {
    pub elements: Vec<usize>,
    /// The first such element, with the earlier block's value and the later one's.
    pub first: Option<(usize, f64, f64)>,
}

/// No block has stored to the element yet (block serials start at 1).
const UNWRITTEN: u32 = 0;
/// An atomic has updated the element.
const ATOMIC: u32 = u32::MAX;

/// Access counts for the report.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counts {
    pub global_loads: u64,
    pub global_stores: u64,
    pub shared_loads: u64,
    pub shared_stores: u64,
    pub atomics: u64,
}

/// One block's shared memory and registers while another block runs (see
/// [`Memory::swap_block`]).
#[derive(Debug, Default)]
pub(super) struct BlockStorage {
    shared: Vec<SharedBuffer>,
    owners: Vec<ByteOwner>,
    local: Vec<Vec<f64>>,
    local_stamps: Vec<Vec<u32>>,
    block_serial: u32,
}

#[derive(Debug)]
pub(super) struct Memory<'t> {
    pub tensors: &'t mut [HostTensor],
    pub access: Vec<ParamAccess>,
    /// Per parameter, for write-only ones: which elements the kernel wrote.
    pub written: Vec<Option<Vec<bool>>>,
    /// Per written parameter, when blocks run one after the other: the serial of the block that
    /// last stored each element ([`UNWRITTEN`] before any, [`ATOMIC`] once an atomic updated it).
    /// Two blocks storing different values to one element race on the GPU, where no order
    /// between blocks exists; the emulator, running them in order, keeps the last, and records
    /// the element in `block_order`.
    writers: Vec<Option<Vec<u32>>>,
    /// Per parameter, the elements two blocks stored different values to (see `writers`).
    pub block_order: Vec<BlockOrder>,
    shared: Vec<SharedBuffer>,
    /// Byte owners of the shared arena, kept only when some buffers overlap.
    owners: Vec<ByteOwner>,
    local: Vec<Vec<f64>>,
    local_stamps: Vec<Vec<u32>>,
    block_serial: u32,
    /// The last block serial handed out: blocks that run interleaved (around grid barriers)
    /// each keep their own serial, so a new block takes the next one.
    serials: u32,
    epoch: u32,
    /// Per warp, how many `__syncwarp`s it has executed: accesses of two threads of one warp in one
    /// epoch are ordered when the warp synced between them.
    warp_syncs: Vec<u32>,
    /// The running warp role's clock, `None` outside warp roles.
    pub clock: Option<RoleClock>,
    /// The last role time handed out.
    now: u64,
    pub counts: Counts,
}

impl<'t> Memory<'t> {
    /// Memory for `buffers`, poisoning the write-only parameters' tensors when `poison_outputs`.
    /// With `block_order`, stores of different values to one element by two blocks are recorded
    /// ([`Memory::block_order`]); a kernel whose blocks meet at grid barriers orders them itself.
    pub(super) fn new(
        tensors: &'t mut [HostTensor],
        (access, poison_outputs, block_order): (Vec<ParamAccess>, bool, bool),
        buffers: &[BufferInfo<'_>],
        shared_bytes: usize,
        threads: usize,
    ) -> Memory<'t> {
        let written = poison(tensors, &access, poison_outputs);
        let writers = tensors
            .iter()
            .zip(&access)
            .map(|(tensor, access)| {
                (block_order && *access != ParamAccess::Read)
                    .then(|| vec![UNWRITTEN; tensor.values.len()])
            })
            .collect();
        let (mut shared, mut local, mut local_stamps) = (Vec::new(), Vec::new(), Vec::new());
        for (buffer, info) in buffers.iter().enumerate() {
            match info.place {
                Place::Shared { offset, .. } => shared.push(SharedBuffer {
                    buffer,
                    name: info.name.to_owned(),
                    offset,
                    size: info.size,
                    values: vec![0.0; info.elements],
                    states: vec![ElementState::default(); info.elements],
                    overlaps: Vec::new(),
                    packed: info.dtype.is_sub_byte(),
                }),
                Place::Local { .. } => {
                    local.push(vec![0.0; info.elements * threads]);
                    local_stamps.push(vec![0; info.elements * threads]);
                }
                Place::Global { .. } => {}
            }
        }
        let any_overlap = find_overlaps(&mut shared);
        let owners = if any_overlap {
            vec![ByteOwner::default(); shared_bytes]
        } else {
            Vec::new()
        };
        let block_order = vec![BlockOrder::default(); tensors.len()];
        Memory {
            tensors,
            access,
            written,
            writers,
            block_order,
            shared,
            owners,
            local,
            local_stamps,
            block_serial: 0,
            serials: 0,
            epoch: 0,
            warp_syncs: vec![0; threads.div_ceil(32)],
            clock: None,
            now: 0,
            counts: Counts::default(),
        }
    }

    /// Starts a block: its shared memory and registers start out unwritten.
    pub(super) fn begin_block(&mut self) {
        self.serials = self.serials.wrapping_add(1);
        self.block_serial = self.serials;
        self.epoch = self.epoch.wrapping_add(1);
    }

    /// The storage of the running block, for blocks that run interleaved around grid barriers
    /// (`grid.rs`): a copy of the current one, which a new block starts from (its serial makes
    /// everything in it read as unwritten once it has begun).
    pub(super) fn block_storage(&self) -> BlockStorage {
        BlockStorage {
            shared: self.shared.clone(),
            owners: self.owners.clone(),
            local: self.local.clone(),
            local_stamps: self.local_stamps.clone(),
            block_serial: self.block_serial,
        }
    }

    /// Exchanges the running block's storage with `storage`.
    pub(super) fn swap_block(&mut self, storage: &mut BlockStorage) {
        std::mem::swap(&mut self.shared, &mut storage.shared);
        std::mem::swap(&mut self.owners, &mut storage.owners);
        std::mem::swap(&mut self.local, &mut storage.local);
        std::mem::swap(&mut self.local_stamps, &mut storage.local_stamps);
        std::mem::swap(&mut self.block_serial, &mut storage.block_serial);
    }

    /// A barrier: accesses before it no longer race with accesses after it.
    pub(super) fn barrier(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
    }

    /// A `__syncwarp` of warp `warp`: its threads' accesses before it no longer race with its
    /// threads' accesses after it.
    pub(super) fn warp_sync(&mut self, warp: u32) {
        if let Some(count) = self.warp_syncs.get_mut(warp as usize) {
            *count = count.wrapping_add(1);
        }
    }

    /// The ordering state accesses are checked against.
    fn order(&self) -> Order<'_> {
        Order {
            epoch: self.epoch,
            syncs: &self.warp_syncs,
        }
    }

    /// Loads `buffer[indices[k]]` for `threads[k]` into `out[lanes[k]]`.
    pub(super) fn load_lanes(
        &mut self,
        info: &BufferInfo<'_>,
        threads: &[u32],
        indices: &[i64],
        lanes: &[u32],
        out: &mut [f64],
    ) -> Result<(), LaneFault> {
        let n = threads.len().min(indices.len()).min(lanes.len());
        let (threads, indices, lanes) = (&threads[..n], &indices[..n], &lanes[..n]);
        match info.place {
            Place::Global { param } => {
                for k in 0..n {
                    let thread = threads[k];
                    let element = check_bounds(info, indices[k]).map_err(|kind| (kind, thread))?;
                    let value = self.global_load(info, param, element);
                    out[lanes[k] as usize] = value.map_err(|kind| (kind, thread))?;
                }
            }
            Place::Shared { slot, .. } => {
                self.counts.shared_loads += n as u64;
                let (serial, clock) = (self.block_serial, self.clock);
                let order = Order {
                    epoch: self.epoch,
                    syncs: &self.warp_syncs,
                };
                let shared = self
                    .shared
                    .get_mut(slot)
                    .ok_or_else(|| (missing(info), 0))?;
                if shared.overlaps.is_empty() {
                    let access = Lanes {
                        threads,
                        indices,
                        lanes,
                    };
                    return shared_load_plain(shared, info, (serial, order, clock), access, out);
                }
                for k in 0..n {
                    let thread = threads[k];
                    let element = check_bounds(info, indices[k]).map_err(|kind| (kind, thread))?;
                    let value = self.shared_read(info, slot, element, thread);
                    out[lanes[k] as usize] = value.map_err(|kind| (kind, thread))?;
                }
            }
            Place::Local { slot } => {
                let serial = self.block_serial;
                let (values, stamps) = local_storage(&self.local, &self.local_stamps, slot)?;
                let mut k = 0;
                while k < n {
                    let (thread, index) = (threads[k], indices[k]);
                    let at = local_at(info, index, thread, values.len())
                        .map_err(|kind| (kind, thread))?;
                    if stamps[at] != serial {
                        let buffer = info.name.to_owned();
                        return Err((ErrorKind::UninitializedLocal { buffer, index }, thread));
                    }
                    out[lanes[k] as usize] = values[at];
                    k += 1;
                }
            }
        }
        Ok(())
    }

    /// Stores `values[k]`, converted to the buffer's dtype, at `buffer[indices[k]]` for `threads[k]`.
    pub(super) fn store_lanes(
        &mut self,
        info: &BufferInfo<'_>,
        threads: &[u32],
        indices: &[i64],
        values: &[f64],
    ) -> Result<(), LaneFault> {
        let round = rounder(info.dtype);
        let n = threads.len().min(indices.len()).min(values.len());
        match info.place {
            Place::Global { param } => {
                for k in 0..n {
                    let thread = threads[k];
                    let element = check_bounds(info, indices[k]).map_err(|kind| (kind, thread))?;
                    let stored = self.global_store(info, param, element, round(values[k]));
                    stored.map_err(|kind| (kind, thread))?;
                }
            }
            Place::Shared { slot, .. } => {
                for k in 0..n {
                    let thread = threads[k];
                    let element = check_bounds(info, indices[k]).map_err(|kind| (kind, thread))?;
                    let stored = self.shared_write(info, slot, element, thread, round(values[k]));
                    stored.map_err(|kind| (kind, thread))?;
                }
                self.counts.shared_stores += n as u64;
            }
            Place::Local { slot } => {
                let serial = self.block_serial;
                let (storage, stamps) =
                    local_storage_mut(&mut self.local, &mut self.local_stamps, slot)?;
                let mut k = 0;
                while k < n {
                    let thread = threads[k];
                    let at = local_at(info, indices[k], thread, storage.len())
                        .map_err(|kind| (kind, thread))?;
                    storage[at] = round(values[k]);
                    stamps[at] = serial;
                    k += 1;
                }
            }
        }
        Ok(())
    }

    /// Starts `cp.async` copies to shared elements: each element must be free of accesses by other
    /// threads in this epoch (the copy may land at any moment until its wait) and of another copy
    /// in flight, and is marked in flight until [`Memory::land_async`].
    pub(super) fn issue_async(
        &mut self,
        info: &BufferInfo<'_>,
        threads: &[u32],
        indices: &[i64],
    ) -> Result<(), LaneFault> {
        let Place::Shared { slot, .. } = info.place else {
            let message = format!("cp.async to `{}`, which is not shared memory", info.name);
            return Err((
                ErrorKind::Malformed(message),
                threads.first().copied().unwrap_or(0),
            ));
        };
        let order = Order {
            epoch: self.epoch,
            syncs: &self.warp_syncs,
        };
        let shared = self
            .shared
            .get_mut(slot)
            .ok_or_else(|| (missing(info), 0))?;
        for (&thread, &index) in threads.iter().zip(indices) {
            let element = check_bounds(info, index).map_err(|kind| (kind, thread))?;
            let state = shared
                .states
                .get_mut(element)
                .ok_or_else(|| (missing(info), thread))?;
            if let Some(kind) = in_flight_fault(state.in_flight, info, index) {
                return Err((kind, thread));
            }
            if let Some((kind, first)) = conflict_with_write(state, order, thread) {
                return Err((race(info, element, kind, first, thread), thread));
            }
            state.in_flight = Flight::CpAsync;
            note_role(state, self.clock, thread);
        }
        Ok(())
    }

    /// Lands async copies: the elements stop being in flight and take their values, written by the
    /// issuing thread in the current epoch.
    pub(super) fn land_async(
        &mut self,
        info: &BufferInfo<'_>,
        threads: &[u32],
        indices: &[i64],
        values: &[f64],
    ) -> Result<(), LaneFault> {
        if let Place::Shared { slot, .. } = info.place
            && let Some(shared) = self.shared.get_mut(slot)
        {
            for &index in indices {
                if let Some(state) = usize::try_from(index)
                    .ok()
                    .and_then(|element| shared.states.get_mut(element))
                {
                    state.in_flight = Flight::Landed;
                }
            }
        }
        self.store_lanes(info, threads, indices, values)
    }

    /// The current barrier epoch, which the mbarriers compare with the epoch of their
    /// initialisation.
    pub(super) fn epoch(&self) -> u32 {
        self.epoch
    }

    /// The clocks of a producer and a consumer role starting now: each has acquired everything
    /// before (the roles start together) and stamps its accesses with a time later than any stamp
    /// so far.
    pub(super) fn start_roles(&mut self) -> [RoleClock; ROLES] {
        self.now += 1;
        let start = self.now;
        let seen = [start - 1; ROLES];
        std::array::from_fn(|role| RoleClock {
            role,
            own: start,
            seen,
        })
    }

    /// An arrival of the running role: returns what it publishes (its view of every role's time,
    /// its own current time included) and moves its own time on, so that its later accesses are not
    /// covered by this arrival. `None` outside warp roles.
    pub(super) fn release(&mut self) -> Option<[u64; ROLES]> {
        let clock = self.clock.as_mut()?;
        let mut view = clock.seen;
        if let Some(own) = view.get_mut(clock.role) {
            *own = clock.own;
        }
        self.now += 1;
        clock.own = self.now;
        Some(view)
    }

    /// A wait of the running role that passed: it acquires what the phase published.
    pub(super) fn acquire(&mut self, view: [u64; ROLES]) {
        if let Some(clock) = self.clock.as_mut() {
            for (seen, time) in clock.seen.iter_mut().zip(view) {
                *seen = (*seen).max(time);
            }
        }
    }

    /// Starts a TMA copy by `thread` into shared elements: each is marked in flight until
    /// [`Memory::land_tma`], and one already in flight is an error. The copy must be ordered after
    /// earlier accesses of the elements: by a barrier outside warp roles, by an mbarrier inside
    /// them (see the module documentation).
    pub(super) fn issue_tma(
        &mut self,
        info: &BufferInfo<'_>,
        thread: u32,
        indices: &[i64],
    ) -> Result<(), LaneFault> {
        let Place::Shared { slot, .. } = info.place else {
            let message = format!("TMA into `{}`, which is not shared memory", info.name);
            return Err((ErrorKind::Malformed(message), thread));
        };
        let clock = self.clock;
        let order = Order {
            epoch: self.epoch,
            syncs: &self.warp_syncs,
        };
        let shared = self
            .shared
            .get_mut(slot)
            .ok_or_else(|| (missing(info), thread))?;
        for &index in indices {
            let element = check_bounds(info, index).map_err(|kind| (kind, thread))?;
            let state = shared
                .states
                .get_mut(element)
                .ok_or_else(|| (missing(info), thread))?;
            if let Some(kind) = in_flight_fault(state.in_flight, info, index) {
                return Err((kind, thread));
            }
            let unordered = match clock {
                None => conflict_with_write(state, order, thread)
                    .map(|(kind, first)| race(info, element, kind, first, thread)),
                Some(clock) => {
                    unordered_access(state, clock).map(|other| ErrorKind::UnorderedTma {
                        buffer: info.name.to_owned(),
                        index,
                        other: i64::from(other),
                    })
                }
            };
            if let Some(kind) = unordered {
                return Err((kind, thread));
            }
            state.in_flight = Flight::Tma;
        }
        Ok(())
    }

    /// Lands a TMA copy: the elements stop being in flight and take their values (already of the
    /// buffer's dtype), written by the async proxy in the current epoch. Overlapped bytes change
    /// owner without a race check, as the landing is ordered by the mbarrier, not by epochs.
    pub(super) fn land_tma(
        &mut self,
        info: &BufferInfo<'_>,
        indices: &[i64],
        values: &[f64],
    ) -> Result<(), ErrorKind> {
        let Place::Shared { slot, .. } = info.place else {
            return Err(missing(info));
        };
        let (serial, epoch) = (self.block_serial, self.epoch);
        let shared = self.shared.get_mut(slot).ok_or_else(|| missing(info))?;
        let buffer = u32::try_from(shared.buffer).unwrap_or(u32::MAX);
        let overlapped = !shared.overlaps.is_empty();
        for (&index, &value) in indices.iter().zip(values) {
            let element = check_bounds(info, index)?;
            let bytes = shared.bytes_of(element);
            let (Some(target), Some(state)) = (
                shared.values.get_mut(element),
                shared.states.get_mut(element),
            ) else {
                return Err(missing(info));
            };
            *target = value;
            state.in_flight = Flight::Landed;
            state.writer = ASYNC_PROXY;
            state.write_epoch = epoch;
            state.stamp = serial;
            if overlapped {
                let owner = ByteOwner {
                    buffer,
                    stamp: serial,
                };
                for byte in self.owners.get_mut(bytes).unwrap_or(&mut []) {
                    *byte = owner;
                }
            }
        }
        self.counts.shared_stores += indices.len() as u64;
        Ok(())
    }

    /// An atomic read-modify-write of a global or shared element (the old value is discarded, as
    /// the statement form has no result).
    pub(super) fn atomic(
        &mut self,
        info: &BufferInfo<'_>,
        index: i64,
        op: AtomicOp,
        operand: f64,
    ) -> Result<f64, ErrorKind> {
        let element = check_bounds(info, index)?;
        self.counts.atomics += 1;
        let combine = |old: f64| match op {
            AtomicOp::Add => old + operand,
            AtomicOp::Max => old.max(operand),
            AtomicOp::Min => old.min(operand),
        };
        let round = rounder(info.dtype);
        match info.place {
            Place::Global { param } => {
                let old = self.global_load(info, param, element)?;
                self.global_store(info, param, element, round(combine(old)))?;
                self.mark_atomic(param, element);
                Ok(old)
            }
            Place::Shared { slot, .. } => {
                self.shared_initialised(info, slot, element)?;
                let serial = self.block_serial;
                let shared = self.shared.get_mut(slot).ok_or_else(|| missing(info))?;
                let (Some(value), Some(state)) = (
                    shared.values.get_mut(element),
                    shared.states.get_mut(element),
                ) else {
                    return Err(missing(info));
                };
                let old = *value;
                *value = round(combine(old));
                state.stamp = serial;
                Ok(old)
            }
            Place::Local { .. } => Err(ErrorKind::Malformed(format!(
                "atomic on local buffer `{}`",
                info.name
            ))),
        }
    }

    fn global_load(
        &mut self,
        info: &BufferInfo<'_>,
        param: usize,
        element: usize,
    ) -> Result<f64, ErrorKind> {
        if let Some(Some(written)) = self.written.get(param)
            && !written.get(element).copied().unwrap_or(false)
        {
            return Err(ErrorKind::PoisonedRead {
                buffer: info.name.to_owned(),
                index: index_i64(element),
            });
        }
        self.counts.global_loads += 1;
        let tensor = self.tensors.get(param).ok_or_else(|| missing(info))?;
        tensor
            .values
            .get(element)
            .copied()
            .ok_or_else(|| missing(info))
    }

    fn global_store(
        &mut self,
        info: &BufferInfo<'_>,
        param: usize,
        element: usize,
        value: f64,
    ) -> Result<(), ErrorKind> {
        if self.access.get(param) == Some(&ParamAccess::Read) {
            return Err(ErrorKind::WriteToReadOnly {
                buffer: info.name.to_owned(),
                index: index_i64(element),
            });
        }
        if let Some(Some(written)) = self.written.get_mut(param)
            && let Some(flag) = written.get_mut(element)
        {
            *flag = true;
        }
        self.counts.global_stores += 1;
        let tensor = self.tensors.get_mut(param).ok_or_else(|| missing(info))?;
        let slot = tensor
            .values
            .get_mut(element)
            .ok_or_else(|| missing(info))?;
        if let Some(Some(writers)) = self.writers.get_mut(param)
            && let Some(writer) = writers.get_mut(element)
        {
            let agrees = *slot == value || (slot.is_nan() && value.is_nan());
            if *writer != UNWRITTEN && *writer != ATOMIC && *writer != self.block_serial && !agrees
            {
                let conflicts = &mut self.block_order[param];
                conflicts.first.get_or_insert((element, *slot, value));
                conflicts.elements.push(element);
            }
            if *writer != ATOMIC {
                *writer = self.block_serial;
            }
        }
        *slot = value;
        Ok(())
    }

    /// Records that an atomic updated `param[element]`: atomics combine in any block order, and
    /// the element is not checked for block order any more.
    fn mark_atomic(&mut self, param: usize, element: usize) {
        if let Some(Some(writers)) = self.writers.get_mut(param)
            && let Some(writer) = writers.get_mut(element)
        {
            *writer = ATOMIC;
        }
    }

    /// Checks that a shared element holds a value written through its own buffer in this block.
    fn shared_initialised(
        &self,
        info: &BufferInfo<'_>,
        slot: usize,
        element: usize,
    ) -> Result<(), ErrorKind> {
        let shared = self.shared.get(slot).ok_or_else(|| missing(info))?;
        let uninitialised = || ErrorKind::UninitializedShared {
            buffer: info.name.to_owned(),
            index: index_i64(element),
        };
        if !shared.overlaps.is_empty() {
            for owner in self.owners.get(shared.bytes_of(element)).unwrap_or(&[]) {
                if owner.stamp != self.block_serial {
                    return Err(uninitialised());
                }
                if owner.buffer as usize != shared.buffer {
                    let other = self.shared_name(owner.buffer as usize);
                    return Err(ErrorKind::SharedAlias {
                        buffer: info.name.to_owned(),
                        index: index_i64(element),
                        other,
                    });
                }
            }
        }
        match shared.states.get(element) {
            Some(state) if state.stamp == self.block_serial => Ok(()),
            _ => Err(uninitialised()),
        }
    }

    /// The name of the shared buffer with id `buffer`, for messages.
    fn shared_name(&self, buffer: usize) -> String {
        let shared = self.shared.iter().find(|shared| shared.buffer == buffer);
        shared.map_or_else(|| format!("#{buffer}"), |shared| shared.name.clone())
    }

    fn shared_read(
        &mut self,
        info: &BufferInfo<'_>,
        slot: usize,
        element: usize,
        thread: u32,
    ) -> Result<f64, ErrorKind> {
        self.shared_initialised(info, slot, element)?;
        let order = Order {
            epoch: self.epoch,
            syncs: &self.warp_syncs,
        };
        let shared = self.shared.get_mut(slot).ok_or_else(|| missing(info))?;
        let (Some(&value), Some(state)) =
            (shared.values.get(element), shared.states.get_mut(element))
        else {
            return Err(missing(info));
        };
        if let Some(kind) = in_flight_fault(state.in_flight, info, index_i64(element)) {
            return Err(kind);
        }
        if let Some(writer) = note_read(state, order, thread) {
            let kind = RaceKind::ReadAfterWrite;
            return Err(race(info, element, kind, writer, thread));
        }
        note_role(state, self.clock, thread);
        Ok(value)
    }

    fn shared_write(
        &mut self,
        info: &BufferInfo<'_>,
        slot: usize,
        element: usize,
        thread: u32,
        value: f64,
    ) -> Result<(), ErrorKind> {
        let serial = self.block_serial;
        let order = Order {
            epoch: self.epoch,
            syncs: &self.warp_syncs,
        };
        let shared = self.shared.get_mut(slot).ok_or_else(|| missing(info))?;
        let (Some(target), Some(state)) = (
            shared.values.get_mut(element),
            shared.states.get_mut(element),
        ) else {
            return Err(missing(info));
        };
        if let Some(kind) = in_flight_fault(state.in_flight, info, index_i64(element)) {
            return Err(kind);
        }
        // Several threads storing the same value (a flag computed by each of the 8 threads that
        // share a row, as DeepSeek's sparse MLA kernels do) leave the same bytes in either order.
        let same_value = target.to_bits() == value.to_bits();
        let mut agreeing = false;
        if let Some((kind, first)) = conflict_with_write(state, order, thread) {
            agreeing = same_value && kind == RaceKind::WriteAfterWrite;
            if !agreeing {
                return Err(race(info, element, kind, first, thread));
            }
        }
        *target = value;
        note_write(state, order, thread);
        if agreeing {
            state.writer = AGREEING_WRITERS;
        }
        state.stamp = serial;
        note_role(state, self.clock, thread);
        if !shared.overlaps.is_empty() {
            self.write_overlapped(info, slot, element, thread)?;
        }
        Ok(())
    }

    /// A write through a buffer that overlaps others: checks the overlapped elements of the others
    /// for conflicting accesses and takes ownership of the written bytes.
    fn write_overlapped(
        &mut self,
        info: &BufferInfo<'_>,
        slot: usize,
        element: usize,
        thread: u32,
    ) -> Result<(), ErrorKind> {
        let Some(shared) = self.shared.get(slot) else {
            return Err(missing(info));
        };
        let buffer = u32::try_from(shared.buffer).unwrap_or(u32::MAX);
        let std::ops::Range { start, end } = shared.bytes_of(element);
        let overlaps = shared.overlaps.clone();
        for other in overlaps {
            let Some(other) = self.shared.get(other) else {
                continue;
            };
            let other_end = other.end();
            if other_end <= start || end <= other.offset {
                continue;
            }
            let (first, last) = other.elements_in(start.max(other.offset), end.min(other_end));
            for state in other.states.get(first..=last).unwrap_or(&[]) {
                if let Some((kind, first_thread)) = conflict_with_write(state, self.order(), thread)
                {
                    return Err(race(info, element, kind, first_thread, thread));
                }
            }
        }
        let serial = self.block_serial;
        for owner in self.owners.get_mut(start..end).unwrap_or(&mut []) {
            *owner = ByteOwner {
                buffer,
                stamp: serial,
            };
        }
        Ok(())
    }
}

/// The threads, indices and output lanes of a batch of accesses, of equal lengths.
#[derive(Clone, Copy, Debug)]
struct Lanes<'a> {
    threads: &'a [u32],
    indices: &'a [i64],
    lanes: &'a [u32],
}

/// Loads from a shared buffer that no other overlaps, the common case, in one tight loop: the
/// element state alone tells whether the value was written in this block and by whom.
fn shared_load_plain(
    shared: &mut SharedBuffer,
    info: &BufferInfo<'_>,
    (serial, order, clock): (u32, Order<'_>, Option<RoleClock>),
    access: Lanes<'_>,
    out: &mut [f64],
) -> Result<(), LaneFault> {
    let values = &shared.values[..];
    let states = &mut shared.states[..];
    let n = access.threads.len();
    let mut k = 0;
    while k < n {
        let (thread, index) = (access.threads[k], access.indices[k]);
        let Some(element) = usize::try_from(index).ok().filter(|&e| e < values.len()) else {
            return Err((
                check_bounds(info, index)
                    .err()
                    .unwrap_or_else(|| missing(info)),
                thread,
            ));
        };
        let state = &mut states[element];
        if let Some(kind) = in_flight_fault(state.in_flight, info, index) {
            return Err((kind, thread));
        }
        if state.stamp != serial {
            let buffer = info.name.to_owned();
            return Err((ErrorKind::UninitializedShared { buffer, index }, thread));
        }
        if let Some(writer) = note_read(state, order, thread) {
            let kind = RaceKind::ReadAfterWrite;
            return Err((race(info, element, kind, writer, thread), thread));
        }
        note_role(state, clock, thread);
        out[access.lanes[k] as usize] = values[element];
        k += 1;
    }
    Ok(())
}

/// The position of `thread`'s element `index` in a local buffer's storage of `len` values.
fn local_at(
    info: &BufferInfo<'_>,
    index: i64,
    thread: u32,
    len: usize,
) -> Result<usize, ErrorKind> {
    let element = check_bounds(info, index)?;
    let at = element + thread as usize * info.elements;
    if at < len { Ok(at) } else { Err(missing(info)) }
}

/// Poisons the write-only tensors (NaN for floats) when `poison_outputs`, and returns their
/// "written" bitmaps.
fn poison(
    tensors: &mut [HostTensor],
    access: &[ParamAccess],
    poison_outputs: bool,
) -> Vec<Option<Vec<bool>>> {
    let mut written = Vec::with_capacity(tensors.len());
    for (tensor, access) in tensors.iter_mut().zip(access) {
        if *access != ParamAccess::Write {
            written.push(None);
            continue;
        }
        if poison_outputs && tensor.dtype.is_float() {
            tensor.values.fill(f64::NAN);
        }
        written.push(Some(vec![false; tensor.values.len()]));
    }
    written
}

/// Records in each shared buffer which others overlap its bytes; whether any do.
fn find_overlaps(shared: &mut [SharedBuffer]) -> bool {
    let ranges: Vec<(usize, usize)> = shared.iter().map(|s| (s.offset, s.end())).collect();
    let mut any = false;
    for (slot, buffer) in shared.iter_mut().enumerate() {
        let (start, end) = ranges[slot];
        for (other, &(other_start, other_end)) in ranges.iter().enumerate() {
            if other != slot && start < other_end && other_start < end {
                buffer.overlaps.push(other);
                any = true;
            }
        }
    }
    any
}

/// What orders two accesses of one shared element: a barrier between them (a later `epoch`), or,
/// for two threads of one warp, a `__syncwarp` of that warp between them (its count in `syncs`
/// grew since the earlier access).
#[derive(Clone, Copy, Debug)]
struct Order<'a> {
    epoch: u32,
    syncs: &'a [u32],
}

impl Order<'_> {
    /// The `__syncwarp` count of `thread`'s warp.
    fn syncs_of(&self, thread: u32) -> u32 {
        self.syncs.get(thread as usize / 32).copied().unwrap_or(0)
    }

    /// Whether the access of `earlier` (made when its warp had synced `earlier_sync` times) is
    /// ordered before one of `thread` in the same epoch by a `__syncwarp` of their common warp.
    fn warp_ordered(&self, earlier: u32, earlier_sync: u32, thread: u32) -> bool {
        earlier != NONE
            && earlier != ASYNC_PROXY
            && earlier != AGREEING_WRITERS
            && earlier / 32 == thread / 32
            && self.syncs_of(thread) != earlier_sync
    }
}

/// Records a read by `thread`; returns the other thread that wrote the element in the same epoch
/// without an order between them, if one did (then nothing is recorded: the run stops).
fn note_read(state: &mut ElementState, order: Order<'_>, thread: u32) -> Option<u32> {
    let epoch = order.epoch;
    if state.write_epoch == epoch
        && state.writer != thread
        && state.writer != ASYNC_PROXY
        && state.writer != AGREEING_WRITERS
        && !order.warp_ordered(state.writer, state.write_sync, thread)
    {
        return Some(state.writer);
    }
    let sync = order.syncs_of(thread);
    if state.read_epoch != epoch {
        state.read_epoch = epoch;
        state.reader = thread;
        state.read_sync = sync;
        state.other_reader = NONE;
    } else if state.reader != thread && state.other_reader == NONE {
        state.other_reader = thread;
        state.other_sync = sync;
    }
    None
}

/// Records a write by `thread` (after [`conflict_with_write`] found no conflict).
fn note_write(state: &mut ElementState, order: Order<'_>, thread: u32) {
    state.writer = thread;
    state.write_epoch = order.epoch;
    state.write_sync = order.syncs_of(thread);
}

/// The thread of another role whose access of the element the running role has not acquired
/// through an mbarrier, if there is one.
fn unordered_access(state: &ElementState, clock: RoleClock) -> Option<u32> {
    (0..ROLES)
        .filter(|&role| role != clock.role)
        .find_map(|role| {
            let access = state.roles.get(role)?;
            let seen = clock.seen.get(role).copied().unwrap_or(0);
            (access.time > seen).then_some(access.thread)
        })
}

/// The conflict a write by `thread` has with earlier accesses of the element in the same epoch
/// that nothing orders before it: the race kind and the other thread.
fn conflict_with_write(
    state: &ElementState,
    order: Order<'_>,
    thread: u32,
) -> Option<(RaceKind, u32)> {
    let epoch = order.epoch;
    // A state last written in an earlier block has an earlier epoch, so unwritten elements pass.
    // TMA data is ordered by its mbarrier, which the in-flight marks check instead.
    if state.write_epoch == epoch
        && state.writer != thread
        && state.writer != ASYNC_PROXY
        && state.writer != AGREEING_WRITERS
        && !order.warp_ordered(state.writer, state.write_sync, thread)
    {
        return Some((RaceKind::WriteAfterWrite, state.writer));
    }
    if state.read_epoch == epoch {
        for (reader, sync) in [
            (state.reader, state.read_sync),
            (state.other_reader, state.other_sync),
        ] {
            if reader != NONE && reader != thread && !order.warp_ordered(reader, sync, thread) {
                return Some((RaceKind::WriteAfterRead, reader));
            }
        }
    }
    None
}

fn race(
    info: &BufferInfo<'_>,
    element: usize,
    kind: RaceKind,
    first: u32,
    second: u32,
) -> ErrorKind {
    ErrorKind::Race {
        buffer: info.name.to_owned(),
        index: index_i64(element),
        kind,
        first: i64::from(first),
        second: i64::from(second),
    }
}

/// The element number of `index`, or the out-of-bounds fault.
pub(super) fn check_bounds(info: &BufferInfo<'_>, index: i64) -> Result<usize, ErrorKind> {
    match usize::try_from(index) {
        Ok(element) if element < info.elements => Ok(element),
        _ => Err(ErrorKind::OutOfBounds {
            buffer: info.name.to_owned(),
            index,
            elements: index_i64(info.elements),
        }),
    }
}

fn missing(info: &BufferInfo<'_>) -> ErrorKind {
    ErrorKind::Malformed(format!("buffer `{}` has no storage", info.name))
}

fn local_storage<'a>(
    local: &'a [Vec<f64>],
    stamps: &'a [Vec<u32>],
    slot: usize,
) -> Result<(&'a [f64], &'a [u32]), LaneFault> {
    match (local.get(slot), stamps.get(slot)) {
        (Some(values), Some(stamps)) => Ok((values, stamps)),
        _ => Err((
            ErrorKind::Malformed(format!("local storage slot {slot} missing")),
            0,
        )),
    }
}

fn local_storage_mut<'a>(
    local: &'a mut [Vec<f64>],
    stamps: &'a mut [Vec<u32>],
    slot: usize,
) -> Result<(&'a mut [f64], &'a mut [u32]), LaneFault> {
    match (local.get_mut(slot), stamps.get_mut(slot)) {
        (Some(values), Some(stamps)) => Ok((values, stamps)),
        _ => Err((
            ErrorKind::Malformed(format!("local storage slot {slot} missing")),
            0,
        )),
    }
}
