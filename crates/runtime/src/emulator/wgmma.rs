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
//! The instruction is modelled as completing when issued. Known limit: a read of its accumulator
//! before `wgmma.wait_group` is not reported (lowering always waits before the gemm ends).

use tilec_ir::ExprId;
use tilec_ir::dtype::DType;
use tilec_ir::thread::{MatrixDescriptor, WgmmaA, mma_a_element, wgmma_c_element};

use super::error::{ErrorKind, Fault};
use super::exec::Machine;
use super::memory::Place;

const WARPGROUP: usize = 128;

impl<'p> Machine<'p, '_> {
    /// `wgmma.mma_async.m64n{n}k16`: see [`tilec_ir::thread::Stmt::Wgmma`].
    pub(super) fn exec_wgmma(
        &mut self,
        n: u32,
        (a, b): (&'p WgmmaA, &'p MatrixDescriptor),
        (c, c_index): (usize, ExprId),
        active: &[u32],
    ) -> Result<(), Fault> {
        let groups = self.whole_warpgroups(active)?;
        let n = n as usize;
        let c_at = self.per_thread(c_index, active, c)?;
        for first in groups {
            let threads: Vec<u32> = (first..first + WARPGROUP as u32).collect();
            let b_tile = self.descriptor_tile(b, (16, n), &threads, active, true)?;
            let a_tile = match a {
                WgmmaA::Shared(descriptor) => {
                    self.descriptor_tile(descriptor, (64, 16), &threads, active, false)?
                }
                WgmmaA::Registers { buffer, index } => {
                    self.register_a_tile(buffer.index(), *index, &threads, active)?
                }
            };
            let mut c_threads = Vec::with_capacity(WARPGROUP * n / 2);
            let mut c_indices = Vec::with_capacity(WARPGROUP * n / 2);
            for &thread in &threads {
                for r in 0..n / 2 {
                    c_threads.push(thread);
                    c_indices.push(c_at[thread as usize] + r as i64);
                }
            }
            let c_values = self.gather(c, &c_threads, &c_indices)?;
            let mut d_values = c_values;
            for (slot, value) in d_values.iter_mut().enumerate() {
                let (thread, r) = (slot / (n / 2), slot % (n / 2));
                let (row, col) = wgmma_c_element(thread as i64, r as i64);
                let (row, col) = (row as usize, col as usize);
                let products: f64 = (0..16)
                    .map(|k| a_tile[row * 16 + k] * b_tile[k * n + col])
                    .sum();
                *value += products;
            }
            self.scatter(c, &c_threads, &c_indices, &d_values)?;
        }
        Ok(())
    }

    /// The first thread of each warpgroup of `active`; an error when one is only partly active.
    fn whole_warpgroups(&self, active: &[u32]) -> Result<Vec<u32>, Fault> {
        let mut groups: Vec<u32> = active.iter().map(|&t| t / WARPGROUP as u32).collect();
        groups.dedup();
        for &group in &groups {
            let members = active
                .iter()
                .filter(|&&t| t / WARPGROUP as u32 == group)
                .count();
            if members != WARPGROUP {
                let kind = ErrorKind::PartialWarp {
                    instruction: "wgmma (a warpgroup of 128 threads)",
                    warp: group * 4,
                };
                return Err(self.fault(kind, Some(group * WARPGROUP as u32)));
            }
        }
        Ok(groups.iter().map(|g| g * WARPGROUP as u32).collect())
    }

    /// A `rows × cols` operand tile read through a descriptor, row-major. For B (`k_rows`) the
    /// tile is K × N and element `(k, n)` is the descriptor's `(mn = n, k)`; for A it is M × K.
    fn descriptor_tile(
        &mut self,
        descriptor: &MatrixDescriptor,
        (rows, cols): (usize, usize),
        threads: &[u32],
        active: &[u32],
        k_rows: bool,
    ) -> Result<Vec<f64>, Fault> {
        let buffer = descriptor.buffer.index();
        let Some(info) = self.buffers.get(buffer) else {
            return Err(self.malformed_fault("wgmma: buffer id out of range"));
        };
        let (Place::Shared { offset, .. }, 2) = (info.place, info.size) else {
            let message = format!(
                "wgmma reads `{}` through a descriptor, which needs a 16-bit shared buffer",
                info.name
            );
            return Err(self.malformed_fault(&message));
        };
        if !matches!(info.dtype, DType::Float16 | DType::BFloat16) {
            return Err(self.malformed_fault("wgmma on an operand that is not fp16 or bf16"));
        }
        let starts = self.per_thread(descriptor.start, active, buffer)?;
        let first = threads[0] as usize;
        if threads.iter().any(|&t| starts[t as usize] != starts[first]) {
            return Err(self.malformed_fault(
                "wgmma: the threads of one warpgroup give different descriptors",
            ));
        }
        let base = offset as i64;
        let start = base + starts[first];
        let mut indices = Vec::with_capacity(rows * cols);
        for row in 0..rows {
            for col in 0..cols {
                let (mn, k) = if k_rows { (col, row) } else { (row, col) };
                let relative = descriptor.layout.element_offset(mn as i64, k as i64, 2);
                let address = descriptor.layout.swizzle.apply(start + relative);
                indices.push((address - base).div_euclid(2));
            }
        }
        let readers = vec![threads[0]; indices.len()];
        self.gather(buffer, &readers, &indices)
    }

    /// The 64 × 16 A tile from the warpgroup's registers: warp `w` holds rows `16 w..16 w + 16`
    /// as mma.sync's A fragment.
    fn register_a_tile(
        &mut self,
        buffer: usize,
        index: ExprId,
        threads: &[u32],
        active: &[u32],
    ) -> Result<Vec<f64>, Fault> {
        let at = self.per_thread(index, active, buffer)?;
        let mut readers = Vec::with_capacity(WARPGROUP * 8);
        let mut indices = Vec::with_capacity(WARPGROUP * 8);
        for &thread in threads {
            for r in 0..8 {
                readers.push(thread);
                indices.push(at[thread as usize] + r);
            }
        }
        let values = self.gather(buffer, &readers, &indices)?;
        let mut tile = vec![0.0; 64 * 16];
        for (slot, value) in values.into_iter().enumerate() {
            let (local, r) = (slot / 8 % WARPGROUP, slot % 8);
            let (row, col) = mma_a_element(local as i64 % 32, r as i64);
            let row = row as usize + 16 * (local / 32);
            tile[row * 16 + col as usize] = value;
        }
        Ok(tile)
    }
}
