//! Hopper's `wgmma.mma_async`, executed warpgroup by warpgroup with the register ownership and the
//! shared-memory addressing the hardware applies.
//!
//! Shared operands are read through their descriptor fields: each element's address is the
//! descriptor's start plus [`DescriptorLayout::element_offset`](tilec_ir::thread::DescriptorLayout),
//! swizzled as an absolute shared address ([`DescriptorSwizzle::apply`]), so a descriptor whose
//! offsets or swizzle do not match how the operand was stored reads the wrong elements here as it
//! would on the GPU. An operand that the descriptor places outside its buffer is an
//! out-of-bounds fault.
//!
//! The instruction is asynchronous here as on the GPU: issuing it records its operands' addresses
//! and registers, and it executes only when a `wgmma.wait_group` retires its group. Until then the
//! accumulator keeps its old values, and an operand overwritten in between is read in its new
//! state, so a missing or late wait computes a wrong answer instead of a lucky right one. A
//! warpgroup that ends the block with wgmmas never waited for is an error.
//!
//! The instruction's K is 32 bytes of its operands (k16 for 16-bit, k8 for tf32, k32 for fp8
//! and 8-bit integers), and it rounds as `mma.sync` does: tf32 inputs to tf32 first, integer sums
//! exactly with 32-bit wrapping.

use std::collections::VecDeque;

use tilec_ir::ExprId;
use tilec_ir::dtype::{DType, round_to_tf32};
use tilec_ir::thread::{
    DescriptorLayout, MatrixDescriptor, WgmmaA, mma_a_element, mma_a_registers, mma_k,
    wgmma_c_element,
};

use super::error::{ErrorKind, Fault};
use super::exec::Machine;
use super::memory::Place;
use super::{index_i64, small_usize, thread_u32};

/// [`WARPGROUP`] as the `u32` thread numbers are.
const WARPGROUP_U32: u32 = 128;

const WARPGROUP: usize = 128;
/// How a partial warpgroup names the instruction.
const WGMMA: &str = "wgmma (a warpgroup of 128 threads)";

/// A shared operand as issued: the buffer and its byte address, the absolute byte address of the
/// operand's start and its layout.
#[derive(Clone, Debug)]
struct IssuedShared {
    buffer: usize,
    base: i64,
    start: i64,
    layout: DescriptorLayout,
}

#[derive(Clone, Debug)]
enum IssuedA {
    Shared(IssuedShared),
    /// The register array and each thread's first register, by thread of the warpgroup.
    Registers {
        buffer: usize,
        at: Vec<i64>,
    },
}

/// One wgmma issued and not executed yet.
#[derive(Clone, Debug)]
struct IssuedWgmma {
    first: u32,
    n: usize,
    a: IssuedA,
    b: IssuedShared,
    c: usize,
    /// Each thread's first accumulator register, by thread of the warpgroup.
    c_at: Vec<i64>,
}

/// One warpgroup's wgmmas: the open group and the committed groups, oldest first.
#[derive(Clone, Debug, Default)]
pub(super) struct WgmmaQueue {
    open: Vec<IssuedWgmma>,
    committed: VecDeque<Vec<IssuedWgmma>>,
}

impl WgmmaQueue {
    fn pending(&self) -> usize {
        self.open.len() + self.committed.iter().map(Vec::len).sum::<usize>()
    }
}

impl<'p> Machine<'p, '_> {
    /// `wgmma.mma_async.m64n{n}k{16,8,32}`: see [`tilec_ir::thread::Stmt::Wgmma`]. Records the operands;
    /// [`Machine::exec_wgmma_wait`] executes it.
    pub(super) fn exec_wgmma(
        &mut self,
        n: u32,
        (a, b): (&'p WgmmaA, &'p MatrixDescriptor),
        (c, c_index): (usize, ExprId),
        active: &[u32],
    ) -> Result<(), Fault> {
        let groups = self.whole_warpgroups(active, WGMMA)?;
        let c_at = self.per_thread(c_index, active, c)?;
        let b_at = self.issued_shared(b, active)?;
        let a_at = match a {
            WgmmaA::Shared(descriptor) => Some(self.issued_shared(descriptor, active)?),
            WgmmaA::Registers(_) => None,
        };
        let a_registers = match a {
            WgmmaA::Registers(registers) => Some((
                registers.buffer.index(),
                self.per_thread(registers.index, active, registers.buffer.index())?,
            )),
            WgmmaA::Shared(_) => None,
        };
        for first in groups {
            let range = first as usize..first as usize + WARPGROUP;
            let uniform = |issued: &(IssuedShared, Vec<i64>)| {
                let starts = &issued.1[range.clone()];
                starts
                    .iter()
                    .all(|&s| s == starts[0])
                    .then(|| IssuedShared {
                        start: issued.0.start + starts[0],
                        ..issued.0.clone()
                    })
            };
            let differing = "wgmma: the threads of one warpgroup give different descriptors";
            let Some(b) = uniform(&b_at) else {
                return Err(self.malformed_fault(differing));
            };
            let a = match (&a_at, &a_registers) {
                (Some(issued), _) => match uniform(issued) {
                    Some(shared) => IssuedA::Shared(shared),
                    None => return Err(self.malformed_fault(differing)),
                },
                (None, Some((buffer, at))) => IssuedA::Registers {
                    buffer: *buffer,
                    at: at[range.clone()].to_vec(),
                },
                (None, None) => return Err(self.malformed_fault("wgmma without an A operand")),
            };
            let issued = IssuedWgmma {
                first,
                n: n as usize,
                a,
                b,
                c,
                c_at: c_at[range].to_vec(),
            };
            if let Some(queue) = self.wgmmas.get_mut(first as usize / WARPGROUP) {
                queue.open.push(issued);
            }
        }
        Ok(())
    }

    /// `wgmma.commit_group`: each warpgroup's open wgmmas become a group.
    pub(super) fn exec_wgmma_commit(&mut self, active: &[u32]) -> Result<(), Fault> {
        for first in self.whole_warpgroups(active, WGMMA)? {
            if let Some(queue) = self.wgmmas.get_mut(first as usize / WARPGROUP) {
                let group = std::mem::take(&mut queue.open);
                queue.committed.push_back(group);
            }
        }
        Ok(())
    }

    /// `wgmma.wait_group pending`: executes each warpgroup's oldest groups until `pending` are left.
    pub(super) fn exec_wgmma_wait(&mut self, pending: u32, active: &[u32]) -> Result<(), Fault> {
        for first in self.whole_warpgroups(active, WGMMA)? {
            let slot = first as usize / WARPGROUP;
            while let Some(queue) = self.wgmmas.get_mut(slot)
                && queue.committed.len() > pending as usize
                && let Some(group) = queue.committed.pop_front()
            {
                for issued in &group {
                    self.execute_wgmma(issued)?;
                }
            }
        }
        Ok(())
    }

    /// At the end of a block: every wgmma must have been waited for.
    pub(super) fn finish_wgmma(&mut self) -> Result<(), Fault> {
        for (slot, queue) in self.wgmmas.iter_mut().enumerate() {
            let count = queue.pending();
            *queue = WgmmaQueue::default();
            if count > 0 {
                let kind = ErrorKind::WgmmaNeverWaited { count };
                return Err(self.fault(kind, Some(thread_u32(slot * WARPGROUP))));
            }
        }
        Ok(())
    }

    /// A descriptor's buffer, base address and layout, with each thread's start offset.
    fn issued_shared(
        &mut self,
        descriptor: &MatrixDescriptor,
        active: &[u32],
    ) -> Result<(IssuedShared, Vec<i64>), Fault> {
        let buffer = descriptor.buffer.index();
        let Some(info) = self.buffers.get(buffer) else {
            return Err(self.malformed_fault("wgmma: buffer id out of range"));
        };
        let Place::Shared { offset, .. } = info.place else {
            let message = format!(
                "wgmma reads `{}` through a descriptor, which needs a shared buffer",
                info.name
            );
            return Err(self.malformed_fault(&message));
        };
        let operand = matches!(
            info.dtype,
            DType::Float16
                | DType::BFloat16
                | DType::Float32
                | DType::TFloat32
                | DType::Float8E4M3
                | DType::Float8E5M2
                | DType::Int8
                | DType::UInt8
        );
        if !operand {
            let message = format!(
                "wgmma on `{}`, which is not fp16, bf16, tf32, fp8 or an 8-bit integer",
                info.name
            );
            return Err(self.malformed_fault(&message));
        }
        let starts = self.per_thread(descriptor.start, active, buffer)?;
        let issued = IssuedShared {
            buffer,
            base: index_i64(offset),
            start: index_i64(offset),
            layout: descriptor.layout,
        };
        Ok((issued, starts))
    }

    /// `D = A × B + D` for one issued wgmma, reading its operands now.
    fn execute_wgmma(&mut self, issued: &IssuedWgmma) -> Result<(), Fault> {
        let n = issued.n;
        let info = |buffer: usize| self.buffers.get(buffer).map(|info| (info.dtype, info.size));
        let a_buffer = match &issued.a {
            IssuedA::Shared(shared) => shared.buffer,
            IssuedA::Registers { buffer, .. } => *buffer,
        };
        let (Some((a_dtype, a_size)), Some((b_dtype, b_size)), Some((c_dtype, _))) =
            (info(a_buffer), info(issued.b.buffer), info(issued.c))
        else {
            return Err(self.malformed_fault("wgmma: buffer id out of range"));
        };
        let integer = !a_dtype.is_float();
        let accumulator = if integer {
            DType::Int32
        } else {
            DType::Float32
        };
        if a_size != b_size || a_dtype.is_float() != b_dtype.is_float() || c_dtype != accumulator {
            let message = format!(
                "wgmma on {a_dtype} and {b_dtype} into {c_dtype}: A and B must have one width \
                 and kind, with an fp32 accumulator for floats and int32 for integers"
            );
            return Err(self.malformed_fault(&message));
        }
        let depth = small_usize(mma_k(index_i64(a_size)));
        let b_tile = self.descriptor_tile(&issued.b, (depth, n), issued.first, true)?;
        let a_tile = match &issued.a {
            IssuedA::Shared(shared) => {
                self.descriptor_tile(shared, (64, depth), issued.first, false)?
            }
            IssuedA::Registers { buffer, at } => {
                self.register_a_tile(*buffer, at, (issued.first, index_i64(a_size)))?
            }
        };
        // tf32 inputs are rounded as `cvt.rna` does; the others are exact in f64.
        let tf32 = matches!(a_dtype, DType::Float32 | DType::TFloat32);
        let input = |x: f64| if tf32 { round_to_tf32(x) } else { x };
        let mut c_threads = Vec::with_capacity(WARPGROUP * n / 2);
        let mut c_indices = Vec::with_capacity(WARPGROUP * n / 2);
        for (local, &first_register) in issued.c_at.iter().enumerate() {
            for r in 0..n / 2 {
                c_threads.push(issued.first + thread_u32(local));
                c_indices.push(first_register + index_i64(r));
            }
        }
        let mut d_values = self.gather(issued.c, &c_threads, &c_indices)?;
        for (slot, value) in d_values.iter_mut().enumerate() {
            let (thread, r) = (slot / (n / 2), slot % (n / 2));
            let (row, col) = wgmma_c_element(index_i64(thread), index_i64(r));
            let (row, col) = (small_usize(row), small_usize(col));
            let products: f64 = (0..depth)
                .map(|k| input(a_tile[row * depth + k]) * input(b_tile[k * n + col]))
                .sum();
            *value = if integer {
                super::warp::wrapping_s32_sum(*value, products)
            } else {
                *value + products
            };
        }
        self.scatter(issued.c, &c_threads, &c_indices, &d_values)
    }

    /// The first thread of each warpgroup of `active`; an error, naming `instruction`, when one is
    /// only partly active.
    pub(super) fn whole_warpgroups(
        &self,
        active: &[u32],
        instruction: &'static str,
    ) -> Result<Vec<u32>, Fault> {
        let mut groups: Vec<u32> = active.iter().map(|&t| t / WARPGROUP_U32).collect();
        groups.dedup();
        for &group in &groups {
            let members = active
                .iter()
                .filter(|&&t| t / WARPGROUP_U32 == group)
                .count();
            if members != WARPGROUP {
                let kind = ErrorKind::PartialWarp {
                    instruction,
                    warp: group * 4,
                };
                return Err(self.fault(kind, Some(group * WARPGROUP_U32)));
            }
        }
        Ok(groups.iter().map(|g| g * WARPGROUP_U32).collect())
    }

    /// A `rows × cols` operand tile read through a descriptor, row-major, as warpgroup `first`
    /// reads it. For B (`k_rows`) the tile is K × N and element `(k, n)` is the descriptor's
    /// `(mn = n, k)`; for A it is M × K.
    fn descriptor_tile(
        &mut self,
        shared: &IssuedShared,
        (rows, cols): (usize, usize),
        first: u32,
        k_rows: bool,
    ) -> Result<Vec<f64>, Fault> {
        let size = index_i64(self.buffers.get(shared.buffer).map_or(2, |info| info.size));
        let mut indices = Vec::with_capacity(rows * cols);
        for row in 0..rows {
            for col in 0..cols {
                let (mn, k) = if k_rows { (col, row) } else { (row, col) };
                let relative = shared
                    .layout
                    .element_offset(index_i64(mn), index_i64(k), size);
                let address = shared.layout.swizzle.apply(shared.start + relative);
                indices.push((address - shared.base).div_euclid(size));
            }
        }
        let readers = vec![first; indices.len()];
        self.gather(shared.buffer, &readers, &indices)
    }

    /// The 64 × k A tile from the warpgroup's registers (`bytes`-byte elements, k being 32 bytes
    /// of them): warp `w` holds rows `16 w..16 w + 16` as mma.sync's A fragment, from each
    /// thread's register `at[thread]` on.
    fn register_a_tile(
        &mut self,
        buffer: usize,
        at: &[i64],
        (first, bytes): (u32, i64),
    ) -> Result<Vec<f64>, Fault> {
        let (depth, count) = (
            small_usize(mma_k(bytes)),
            small_usize(mma_a_registers(bytes)),
        );
        let mut readers = Vec::with_capacity(WARPGROUP * count);
        let mut indices = Vec::with_capacity(WARPGROUP * count);
        for (local, &start) in at.iter().enumerate() {
            for r in 0..count {
                readers.push(first + thread_u32(local));
                indices.push(start + index_i64(r));
            }
        }
        let values = self.gather(buffer, &readers, &indices)?;
        let mut tile = vec![0.0; 64 * depth];
        for (slot, value) in values.into_iter().enumerate() {
            let (local, r) = (slot / count, slot % count);
            let (row, col) = mma_a_element(bytes, index_i64(local % 32), index_i64(r));
            let row = small_usize(row) + 16 * (local / 32);
            tile[row * depth + small_usize(col)] = value;
        }
        Ok(tile)
    }
}
