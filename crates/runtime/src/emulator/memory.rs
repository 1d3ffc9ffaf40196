//! The three memories of a running program, with the checks every access makes.
//!
//! - Global memory is the host tensors. A write-only parameter has a "written" bitmap: reading an
//!   element before the kernel wrote it is an error, and so is leaving one unwritten.
//! - Shared memory is one arena of `shared_bytes` bytes per block. Each shared buffer keeps its
//!   element values in its own vector, and every byte of the arena records which buffer last wrote
//!   it and in which block. A read through buffer `B` checks that every byte of the element was last
//!   written through `B` in this block, so buffers that overlap in bytes (shared memory reused by
//!   buffers with disjoint lifetimes) behave exactly as on the GPU for every program that does not
//!   reinterpret bytes, and a program that does is reported. The same per-byte record carries the
//!   race detector's state (below).
//! - Local memory is one array per thread and buffer, with a per-element stamp of the block that
//!   last wrote it, so that reading a register before writing it is reported.
//!
//! Race detection: time within a block is cut into barrier epochs (a global counter, incremented at
//! every block start and every barrier, so nothing needs clearing between blocks). Each shared byte
//! remembers its last writer and the epoch of that write, and up to two distinct readers of the
//! current read epoch. A write conflicts with a write or read by another thread in the same epoch, a
//! read with a write by another thread in the same epoch. Two remembered readers suffice: when a
//! thread writes, at least one of two distinct readers is another thread. Atomics are exempt: they
//! update values and ownership but not the race state.

use tilec_ir::DType;
use tilec_ir::thread::{AtomicOp, ParamAccess};

use super::error::{ErrorKind, RaceKind};
use crate::tensor::{HostTensor, round_to};

/// No thread.
const NONE: u32 = u32::MAX;

/// Where a buffer's elements are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    Global {
        param: usize,
    },
    /// `slot` is the buffer's value vector among the shared ones.
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

/// The per-byte record of the shared arena.
#[derive(Clone, Copy, Debug, Default)]
struct ByteState {
    /// The block serial of the last write (0: never written).
    stamp: u32,
    /// The buffer the last write went through.
    owner: u32,
    writer: u32,
    write_epoch: u32,
    reader: u32,
    /// A second reader distinct from `reader`, or [`NONE`].
    other_reader: u32,
    read_epoch: u32,
}

/// Access counts for the report.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counts {
    pub global_loads: u64,
    pub global_stores: u64,
    pub shared_loads: u64,
    pub shared_stores: u64,
    pub atomics: u64,
}

#[derive(Debug)]
pub(super) struct Memory<'t> {
    pub tensors: &'t mut [HostTensor],
    pub access: Vec<ParamAccess>,
    /// Per parameter, for write-only ones: which elements the kernel wrote.
    pub written: Vec<Option<Vec<bool>>>,
    shared: Vec<Vec<f64>>,
    bytes: Vec<ByteState>,
    local: Vec<Vec<f64>>,
    local_stamps: Vec<Vec<u32>>,
    block_serial: u32,
    epoch: u32,
    pub counts: Counts,
}

impl<'t> Memory<'t> {
    /// Memory for `buffers`, poisoning the write-only parameters' tensors.
    pub fn new(
        tensors: &'t mut [HostTensor],
        access: Vec<ParamAccess>,
        buffers: &[BufferInfo<'_>],
        shared_bytes: usize,
        threads: usize,
    ) -> Memory<'t> {
        let mut written = Vec::with_capacity(tensors.len());
        for (tensor, access) in tensors.iter_mut().zip(&access) {
            if *access != ParamAccess::Write {
                written.push(None);
                continue;
            }
            if tensor.dtype.is_float() {
                tensor.values.fill(f64::NAN);
            }
            written.push(Some(vec![false; tensor.values.len()]));
        }
        let (mut shared, mut local, mut local_stamps) = (Vec::new(), Vec::new(), Vec::new());
        for buffer in buffers {
            match buffer.place {
                Place::Shared { .. } => shared.push(vec![0.0; buffer.elements]),
                Place::Local { .. } => {
                    local.push(vec![0.0; buffer.elements * threads]);
                    local_stamps.push(vec![0; buffer.elements * threads]);
                }
                Place::Global { .. } => {}
            }
        }
        Memory {
            tensors,
            access,
            written,
            shared,
            bytes: vec![ByteState::default(); shared_bytes],
            local,
            local_stamps,
            block_serial: 0,
            epoch: 0,
            counts: Counts::default(),
        }
    }

    /// Starts a block: its shared memory and registers start out unwritten.
    pub fn begin_block(&mut self) {
        self.block_serial = self.block_serial.wrapping_add(1);
        self.epoch = self.epoch.wrapping_add(1);
    }

    /// A barrier: accesses before it no longer race with accesses after it.
    pub fn barrier(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
    }

    pub fn load(
        &mut self,
        buffers: &[BufferInfo<'_>],
        buffer: usize,
        index: i64,
        thread: u32,
    ) -> Result<f64, ErrorKind> {
        let info = buffer_info(buffers, buffer)?;
        let element = check_bounds(info, index)?;
        match info.place {
            Place::Global { param } => self.global_load(info, param, element),
            Place::Shared { offset, slot } => {
                self.shared_check(buffers, buffer, offset, element, thread, Access::Read)?;
                self.counts.shared_loads += 1;
                value_at(&self.shared, slot, element)
            }
            Place::Local { slot } => {
                let at = element + thread as usize * info.elements;
                let stamp = self
                    .local_stamps
                    .get(slot)
                    .and_then(|stamps| stamps.get(at));
                if stamp != Some(&self.block_serial) {
                    return Err(ErrorKind::UninitializedLocal {
                        buffer: info.name.to_owned(),
                        index,
                    });
                }
                value_at(&self.local, slot, at)
            }
        }
    }

    /// Stores `value`, converted to the buffer's dtype.
    pub fn store(
        &mut self,
        buffers: &[BufferInfo<'_>],
        buffer: usize,
        index: i64,
        thread: u32,
        value: f64,
    ) -> Result<(), ErrorKind> {
        let info = buffer_info(buffers, buffer)?;
        let element = check_bounds(info, index)?;
        let value = round_to(info.dtype, value);
        match info.place {
            Place::Global { param } => self.global_store(info, param, element, value),
            Place::Shared { offset, slot } => {
                self.shared_check(buffers, buffer, offset, element, thread, Access::Write)?;
                self.counts.shared_stores += 1;
                set_value(&mut self.shared, slot, element, value)
            }
            Place::Local { slot } => {
                let at = element + thread as usize * info.elements;
                if let Some(stamp) = self
                    .local_stamps
                    .get_mut(slot)
                    .and_then(|stamps| stamps.get_mut(at))
                {
                    *stamp = self.block_serial;
                }
                set_value(&mut self.local, slot, at, value)
            }
        }
    }

    /// An atomic read-modify-write of a global or shared element; returns nothing, as the
    /// statement form discards the old value.
    pub fn atomic(
        &mut self,
        buffers: &[BufferInfo<'_>],
        buffer: usize,
        index: i64,
        thread: u32,
        op: AtomicOp,
        operand: f64,
    ) -> Result<(), ErrorKind> {
        let info = buffer_info(buffers, buffer)?;
        let element = check_bounds(info, index)?;
        self.counts.atomics += 1;
        let old = match info.place {
            Place::Global { param } => self.global_load(info, param, element)?,
            Place::Shared { offset, slot } => {
                self.shared_check(buffers, buffer, offset, element, thread, Access::Atomic)?;
                value_at(&self.shared, slot, element)?
            }
            Place::Local { .. } => {
                return Err(ErrorKind::Malformed(format!(
                    "atomic on local buffer `{}`",
                    info.name
                )));
            }
        };
        let new = match op {
            AtomicOp::Add => old + operand,
            AtomicOp::Max => old.max(operand),
            AtomicOp::Min => old.min(operand),
        };
        let new = round_to(info.dtype, new);
        match info.place {
            Place::Global { param } => self.global_store(info, param, element, new),
            Place::Shared { slot, .. } => set_value(&mut self.shared, slot, element, new),
            Place::Local { .. } => Ok(()),
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
                index: element as i64,
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
                index: element as i64,
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
        *slot = value;
        Ok(())
    }

    /// Checks and records one access of a shared element, byte by byte.
    fn shared_check(
        &mut self,
        buffers: &[BufferInfo<'_>],
        buffer: usize,
        offset: usize,
        element: usize,
        thread: u32,
        access: Access,
    ) -> Result<(), ErrorKind> {
        let size = buffers.get(buffer).map_or(1, |info| info.size);
        let start = offset + element * size;
        let (serial, epoch, owner) = (self.block_serial, self.epoch, buffer as u32);
        let bytes = self.bytes.get_mut(start..start + size).ok_or_else(|| {
            ErrorKind::Malformed(format!(
                "shared buffer `{}` lies outside the shared arena",
                name(buffers, buffer)
            ))
        })?;
        for byte in bytes {
            let fault = match access {
                Access::Read => read_byte(byte, serial, epoch, owner, thread),
                Access::Write => write_byte(byte, serial, epoch, owner, thread),
                Access::Atomic => atomic_byte(byte, serial, owner),
            };
            if let Err(fault) = fault {
                return Err(fault.describe(buffers, buffer, element));
            }
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Read,
    Write,
    Atomic,
}

/// A fault found on one byte, before it is described with buffer names.
#[derive(Clone, Copy, Debug)]
enum ByteFault {
    Uninitialized,
    Alias {
        owner: u32,
    },
    Race {
        kind: RaceKind,
        first: u32,
        second: u32,
    },
}

impl ByteFault {
    fn describe(self, buffers: &[BufferInfo<'_>], buffer: usize, element: usize) -> ErrorKind {
        let (buffer_name, index) = (name(buffers, buffer).to_owned(), element as i64);
        match self {
            ByteFault::Uninitialized => ErrorKind::UninitializedShared {
                buffer: buffer_name,
                index,
            },
            ByteFault::Alias { owner } => ErrorKind::SharedAlias {
                buffer: buffer_name,
                index,
                other: name(buffers, owner as usize).to_owned(),
            },
            ByteFault::Race {
                kind,
                first,
                second,
            } => ErrorKind::Race {
                buffer: buffer_name,
                index,
                kind,
                first: i64::from(first),
                second: i64::from(second),
            },
        }
    }
}

fn read_byte(
    byte: &mut ByteState,
    serial: u32,
    epoch: u32,
    owner: u32,
    thread: u32,
) -> Result<(), ByteFault> {
    if byte.stamp != serial {
        return Err(ByteFault::Uninitialized);
    }
    if byte.owner != owner {
        return Err(ByteFault::Alias { owner: byte.owner });
    }
    if byte.write_epoch == epoch && byte.writer != thread {
        return Err(ByteFault::Race {
            kind: RaceKind::ReadAfterWrite,
            first: byte.writer,
            second: thread,
        });
    }
    if byte.read_epoch != epoch {
        byte.read_epoch = epoch;
        byte.reader = thread;
        byte.other_reader = NONE;
    } else if byte.reader != thread && byte.other_reader == NONE {
        byte.other_reader = thread;
    }
    Ok(())
}

fn write_byte(
    byte: &mut ByteState,
    serial: u32,
    epoch: u32,
    owner: u32,
    thread: u32,
) -> Result<(), ByteFault> {
    // The write epoch of a byte never written in this block belongs to an earlier block, whose
    // epochs all lie before this block's, so no stamp check is needed here.
    if byte.write_epoch == epoch && byte.writer != thread {
        return Err(ByteFault::Race {
            kind: RaceKind::WriteAfterWrite,
            first: byte.writer,
            second: thread,
        });
    }
    if byte.read_epoch == epoch {
        let other = if byte.reader != thread {
            byte.reader
        } else {
            byte.other_reader
        };
        if other != NONE {
            return Err(ByteFault::Race {
                kind: RaceKind::WriteAfterRead,
                first: other,
                second: thread,
            });
        }
    }
    byte.writer = thread;
    byte.write_epoch = epoch;
    byte.owner = owner;
    byte.stamp = serial;
    Ok(())
}

/// An atomic reads the old value, so the byte must hold one of this buffer; it then owns the byte.
fn atomic_byte(byte: &mut ByteState, serial: u32, owner: u32) -> Result<(), ByteFault> {
    if byte.stamp != serial {
        return Err(ByteFault::Uninitialized);
    }
    if byte.owner != owner {
        return Err(ByteFault::Alias { owner: byte.owner });
    }
    Ok(())
}

fn buffer_info<'a, 'p>(
    buffers: &'a [BufferInfo<'p>],
    buffer: usize,
) -> Result<&'a BufferInfo<'p>, ErrorKind> {
    buffers
        .get(buffer)
        .ok_or_else(|| ErrorKind::Malformed(format!("buffer id {buffer} out of range")))
}

fn name<'p>(buffers: &[BufferInfo<'p>], buffer: usize) -> &'p str {
    buffers.get(buffer).map_or("?", |info| info.name)
}

/// The element number of `index`, or the out-of-bounds fault.
pub(super) fn check_bounds(info: &BufferInfo<'_>, index: i64) -> Result<usize, ErrorKind> {
    match usize::try_from(index) {
        Ok(element) if element < info.elements => Ok(element),
        _ => Err(ErrorKind::OutOfBounds {
            buffer: info.name.to_owned(),
            index,
            elements: info.elements as i64,
        }),
    }
}

fn missing(info: &BufferInfo<'_>) -> ErrorKind {
    ErrorKind::Malformed(format!("buffer `{}` has no storage", info.name))
}

fn value_at(vectors: &[Vec<f64>], slot: usize, at: usize) -> Result<f64, ErrorKind> {
    vectors
        .get(slot)
        .and_then(|values| values.get(at))
        .copied()
        .ok_or_else(|| ErrorKind::Malformed(format!("storage slot {slot} has no element {at}")))
}

fn set_value(
    vectors: &mut [Vec<f64>],
    slot: usize,
    at: usize,
    value: f64,
) -> Result<(), ErrorKind> {
    let target = vectors.get_mut(slot).and_then(|values| values.get_mut(at));
    let target = target
        .ok_or_else(|| ErrorKind::Malformed(format!("storage slot {slot} has no element {at}")))?;
    *target = value;
    Ok(())
}
