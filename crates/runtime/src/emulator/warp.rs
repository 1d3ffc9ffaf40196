//! Warp-wide and asynchronous statements: `ldmatrix`, `mma.sync` and the `cp.async` family.
//!
//! `ldmatrix` and `mma.sync` exchange registers between the 32 lanes of a warp, so they are
//! executed warp by warp with the exact register ownership PTX prescribes: a lowering that puts an
//! element in the wrong lane or register computes a wrong answer here, as it would on the GPU.
//! `mma.sync` takes its form from the operands' element width (m16n8k16 for 16-bit, m16n8k8 for
//! tf32, m16n8k32 for fp8 and 8-bit integers) and rounds as the hardware does: tf32 inputs are
//! rounded to tf32 first, integer products accumulate exactly and wrap at 32 bits.
//!
//! An async copy reads its source when issued and lands in shared memory only when the issuing
//! thread waits for its group. Until then its elements are marked in flight: any access to them is
//! reported, so a missing `cp.async.wait_group` is an error, not a lucky read of stale data. The
//! landing is a write by the issuing thread at the wait, so a missing barrier between the wait and
//! another thread's read is reported as a race.

use std::collections::VecDeque;

use tilec_ir::ExprId;
use tilec_ir::dtype::{DType, round_to_tf32};
use tilec_ir::thread::{
    mma_a_element, mma_a_registers, mma_b_element, mma_b_registers, mma_c_element, mma_k,
};

use super::error::{ErrorKind, Fault};
use super::exec::Machine;
use super::{index_i64, small_usize, thread_u32};

const WARP: usize = 32;

/// One element of an async copy waiting to land.
#[derive(Clone, Copy, Debug)]
struct Landing {
    buffer: usize,
    index: i64,
    value: f64,
}

/// One thread's async copies: the open group and the committed groups, oldest first.
#[derive(Clone, Debug, Default)]
pub(super) struct AsyncQueue {
    open: Vec<Landing>,
    committed: VecDeque<Vec<Landing>>,
}

impl AsyncQueue {
    /// Elements issued and not landed yet.
    fn pending(&self) -> usize {
        self.open.len() + self.committed.iter().map(Vec::len).sum::<usize>()
    }
}

impl<'p> Machine<'p, '_> {
    /// `cp.async`: reads the source now, marks the destination in flight.
    pub(super) fn exec_async_copy(
        &mut self,
        [dst, src]: [usize; 2],
        [dst_index, src_index]: [ExprId; 2],
        lanes: u32,
        active: &[u32],
    ) -> Result<(), Fault> {
        let (threads, targets, values) =
            self.vector_read([dst, src], [dst_index, src_index], lanes, active)?;
        let Some(dst_info) = self.buffers.get(dst) else {
            return Err(self.malformed_fault("cp.async: buffer id out of range"));
        };
        let issued = self.memory.issue_async(dst_info, &threads, &targets);
        issued.map_err(|(kind, thread)| self.fault(kind, Some(thread)))?;
        for ((&thread, &index), &value) in threads.iter().zip(&targets).zip(&values) {
            if let Some(queue) = self.asyncs.get_mut(thread as usize) {
                queue.open.push(Landing {
                    buffer: dst,
                    index,
                    value,
                });
            }
        }
        Ok(())
    }

    /// `cp.async.commit_group`: each thread's open group joins its committed ones.
    pub(super) fn exec_async_commit(&mut self, active: &[u32]) {
        for &thread in active {
            if let Some(queue) = self.asyncs.get_mut(thread as usize) {
                let group = std::mem::take(&mut queue.open);
                queue.committed.push_back(group);
            }
        }
    }

    /// `cp.async.wait_group pending`: lands each thread's oldest groups until `pending` are left.
    pub(super) fn exec_async_wait(&mut self, pending: u32, active: &[u32]) -> Result<(), Fault> {
        for &thread in active {
            while let Some(queue) = self.asyncs.get_mut(thread as usize)
                && queue.committed.len() > pending as usize
                && let Some(group) = queue.committed.pop_front()
            {
                self.land(thread, &group)?;
            }
        }
        Ok(())
    }

    fn land(&mut self, thread: u32, group: &[Landing]) -> Result<(), Fault> {
        for landing in group {
            let Some(info) = self.buffers.get(landing.buffer) else {
                return Err(self.malformed_fault("cp.async: buffer id out of range"));
            };
            let landed =
                self.memory
                    .land_async(info, &[thread], &[landing.index], &[landing.value]);
            landed.map_err(|(kind, thread)| self.fault(kind, Some(thread)))?;
        }
        Ok(())
    }

    /// At the end of a block: every async copy must have been waited for.
    pub(super) fn finish_async(&mut self) -> Result<(), Fault> {
        for (thread, queue) in self.asyncs.iter_mut().enumerate() {
            let count = queue.pending();
            *queue = AsyncQueue::default();
            if count > 0 {
                let kind = ErrorKind::AsyncNeverWaited { count };
                return Err(self.fault(kind, Some(thread_u32(thread))));
            }
        }
        Ok(())
    }

    /// The warps `active` consists of, each as its 32 threads in lane order; an error when a warp
    /// is only partly active.
    fn whole_warps(&self, active: &[u32], instruction: &'static str) -> Result<Vec<u32>, Fault> {
        let warp_u32 = thread_u32(WARP);
        let mut warps: Vec<u32> = active.iter().map(|&t| t / warp_u32).collect();
        warps.dedup();
        for &warp in &warps {
            let lanes = active.iter().filter(|&&t| t / warp_u32 == warp).count();
            if lanes != WARP {
                let kind = ErrorKind::PartialWarp { instruction, warp };
                return Err(self.fault(kind, Some(warp * warp_u32)));
            }
        }
        Ok(warps)
    }

    /// Per active thread, the value of `e`, looked up by thread below.
    pub(super) fn per_thread(
        &mut self,
        e: ExprId,
        active: &[u32],
        buffer: usize,
    ) -> Result<Vec<i64>, Fault> {
        let values = self.index(e, active, Some(buffer))?;
        let mut by_thread = vec![0; self.threads];
        for (&thread, &v) in active.iter().zip(&values) {
            if let Some(slot) = by_thread.get_mut(thread as usize) {
                *slot = v;
            }
        }
        Ok(by_thread)
    }

    /// `ldmatrix`: see [`tilec_ir::thread::Stmt::LoadMatrix`] for who gives and gets what.
    pub(super) fn exec_load_matrix(
        &mut self,
        (matrices, transpose): (u32, bool),
        [dst, src]: [usize; 2],
        [dst_index, src_index]: [ExprId; 2],
        active: &[u32],
    ) -> Result<(), Fault> {
        let warps = self.whole_warps(active, "ldmatrix")?;
        let bytes = self.matrix_element_bytes([dst, src], transpose)?;
        // Each lane receives one 32-bit word per matrix: `per` elements of a 16-byte row.
        let per = 4 / bytes;
        let rows = self.per_thread(src_index, active, src)?;
        let targets = self.per_thread(dst_index, active, dst)?;
        let (mut readers, mut sources, mut stores) = (Vec::new(), Vec::new(), Vec::new());
        for warp in warps {
            let base = warp as usize * WARP;
            for provider in 0..(8 * matrices as usize) {
                let row = rows[base + provider];
                let vector = thread_u32(16 / bytes);
                self.check_vector_index(src, row, vector, thread_u32(base + provider))?;
            }
            for lane in 0..WARP {
                for q in 0..matrices as usize {
                    for e in 0..per {
                        let (row, col) = if transpose {
                            (2 * (lane % 4) + e, lane / 4)
                        } else {
                            (lane / 4, per * (lane % 4) + e)
                        };
                        readers.push(thread_u32(base + lane));
                        sources.push(rows[base + 8 * q + row] + index_i64(col));
                        stores.push(targets[base + lane] + index_i64(per * q + e));
                    }
                }
            }
        }
        let values = self.gather(src, &readers, &sources)?;
        self.scatter(dst, &readers, &stores, &values)
    }

    /// The element size of an `ldmatrix`'s buffers: equal, and 1, 2 or 4 bytes (2 only with
    /// `.trans`, which moves 16-bit elements).
    fn matrix_element_bytes(
        &self,
        [dst, src]: [usize; 2],
        transpose: bool,
    ) -> Result<usize, Fault> {
        let size = |buffer: usize| self.buffers.get(buffer).map_or(0, |info| info.size);
        let bytes = size(src);
        if size(dst) != bytes || !matches!(bytes, 1 | 2 | 4) || (transpose && bytes != 2) {
            let message = format!(
                "ldmatrix{} between elements of {} and {} bytes",
                if transpose { ".trans" } else { "" },
                size(src),
                size(dst)
            );
            return Err(self.malformed_fault(&message));
        }
        Ok(bytes)
    }

    /// `mma.sync` (m16n8k16, m16n8k8 or m16n8k32 by the operands' width): see
    /// [`tilec_ir::thread::Stmt::Mma`].
    pub(super) fn exec_mma(
        &mut self,
        [a, b, c]: [usize; 3],
        [a_index, b_index, c_index]: [ExprId; 3],
        active: &[u32],
    ) -> Result<(), Fault> {
        let warps = self.whole_warps(active, "mma.sync")?;
        let form = self.mma_form([a, b, c])?;
        let bytes = form.bytes();
        let a_at = self.per_thread(a_index, active, a)?;
        let b_at = self.per_thread(b_index, active, b)?;
        let c_at = self.per_thread(c_index, active, c)?;
        for warp in warps {
            let warp_u32 = thread_u32(WARP);
            let lanes: Vec<u32> = (0..warp_u32).map(|l| warp * warp_u32 + l).collect();
            let registers = |at: &[i64], count: usize| -> (Vec<u32>, Vec<i64>) {
                let mut threads = Vec::with_capacity(WARP * count);
                let mut indices = Vec::with_capacity(WARP * count);
                for &thread in &lanes {
                    for r in 0..count {
                        threads.push(thread);
                        indices.push(at[thread as usize] + index_i64(r));
                    }
                }
                (threads, indices)
            };
            let (a_threads, a_indices) = registers(&a_at, small_usize(mma_a_registers(bytes)));
            let (b_threads, b_indices) = registers(&b_at, small_usize(mma_b_registers(bytes)));
            let (c_threads, c_indices) = registers(&c_at, 4);
            let a_values = self.gather(a, &a_threads, &a_indices)?;
            let b_values = self.gather(b, &b_threads, &b_indices)?;
            let c_values = self.gather(c, &c_threads, &c_indices)?;
            let d_values = mma_m16n8(form, &a_values, &b_values, &c_values);
            self.scatter(c, &c_threads, &c_indices, &d_values)?;
        }
        Ok(())
    }

    /// The form of an `mma.sync` on these buffers: 16-bit floats, tf32 or fp8 with an fp32
    /// accumulator, or 8-bit integers with an int32 one; A and B of one width.
    fn mma_form(&self, [a, b, c]: [usize; 3]) -> Result<MmaForm, Fault> {
        let dtype = |buffer: usize| self.buffers.get(buffer).map(|info| info.dtype);
        let fp8 = |d: DType| matches!(d, DType::Float8E4M3 | DType::Float8E5M2);
        let byte_int = |d: DType| matches!(d, DType::Int8 | DType::UInt8);
        let tf32 = |d: DType| matches!(d, DType::Float32 | DType::TFloat32);
        let form = match (dtype(a), dtype(b), dtype(c)) {
            (Some(x), Some(y), Some(DType::Float32))
                if x == y && matches!(x, DType::Float16 | DType::BFloat16) =>
            {
                Some(MmaForm::Half)
            }
            (Some(x), Some(y), Some(DType::Float32)) if tf32(x) && tf32(y) => Some(MmaForm::Tf32),
            (Some(x), Some(y), Some(DType::Float32)) if fp8(x) && fp8(y) => Some(MmaForm::Fp8),
            (Some(x), Some(y), Some(DType::Int32)) if byte_int(x) && byte_int(y) => {
                Some(MmaForm::Int8)
            }
            _ => None,
        };
        form.ok_or_else(|| {
            let name = |buffer: usize| self.buffers.get(buffer).map_or("?", |info| info.name);
            let message = format!(
                "mma.sync on `{}`, `{}` and `{}`, which are not 16-bit, tf32 or fp8 operands with \
                 an fp32 accumulator nor 8-bit integers with an int32 one",
                name(a),
                name(b),
                name(c)
            );
            self.malformed_fault(&message)
        })
    }

    /// Loads `buffer[indices[k]]` for `threads[k]`.
    pub(super) fn gather(
        &mut self,
        buffer: usize,
        threads: &[u32],
        indices: &[i64],
    ) -> Result<Vec<f64>, Fault> {
        let Some(info) = self.buffers.get(buffer) else {
            return Err(self.malformed_fault("buffer id out of range"));
        };
        let positions: Vec<u32> = (0..thread_u32(threads.len())).collect();
        let mut values = vec![0.0; threads.len()];
        let loaded = self
            .memory
            .load_lanes(info, threads, indices, &positions, &mut values);
        loaded.map_err(|(kind, thread)| self.fault(kind, Some(thread)))?;
        Ok(values)
    }

    /// Stores `values[k]` at `buffer[indices[k]]` for `threads[k]`.
    pub(super) fn scatter(
        &mut self,
        buffer: usize,
        threads: &[u32],
        indices: &[i64],
        values: &[f64],
    ) -> Result<(), Fault> {
        let Some(info) = self.buffers.get(buffer) else {
            return Err(self.malformed_fault("buffer id out of range"));
        };
        let stored = self.memory.store_lanes(info, threads, indices, values);
        stored.map_err(|(kind, thread)| self.fault(kind, Some(thread)))
    }
}

/// The kinds of `mma.sync` by what their operands are and how their sums round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MmaForm {
    /// fp16 or bf16 A and B, fp32 C: m16n8k16.
    Half,
    /// float32 or tf32 A and B, each rounded to tf32 as `cvt.rna.tf32.f32` does, fp32 C: m16n8k8.
    Tf32,
    /// e4m3 or e5m2 A and B, fp32 C: m16n8k32.
    Fp8,
    /// s8 or u8 A and B, s32 C, wrapping: m16n8k32.
    Int8,
}

impl MmaForm {
    /// Bytes of one A or B element.
    fn bytes(self) -> i64 {
        match self {
            MmaForm::Half => 2,
            MmaForm::Tf32 => 4,
            MmaForm::Fp8 | MmaForm::Int8 => 1,
        }
    }
}

/// The tables of [`tilec_ir::thread::Stmt::Mma`] over `usize` lanes and registers.
fn a_element(bytes: i64, lane: usize, r: usize) -> (usize, usize) {
    let (i, j) = mma_a_element(bytes, index_i64(lane), index_i64(r));
    (small_usize(i), small_usize(j))
}

fn b_element(bytes: i64, lane: usize, r: usize) -> (usize, usize) {
    let (k, n) = mma_b_element(bytes, index_i64(lane), index_i64(r));
    (small_usize(k), small_usize(n))
}

fn c_element(lane: usize, r: usize) -> (usize, usize) {
    let (i, j) = mma_c_element(index_i64(lane), index_i64(r));
    (small_usize(i), small_usize(j))
}

/// One warp's `D = A × B + C` on registers in lane order. Products of 16-bit, tf32 and fp8 values
/// are exact in `f64`, and so are their sums over one instruction's K (at most 32 products of at
/// most 22 significant bits); a float sum is rounded to fp32 once, when stored. An integer sum is
/// exact and wraps to 32 bits as the hardware's s32 accumulation does.
fn mma_m16n8(form: MmaForm, a: &[f64], b: &[f64], c: &[f64]) -> Vec<f64> {
    let bytes = form.bytes();
    let (depth, a_count, b_count) = (
        small_usize(mma_k(bytes)),
        small_usize(mma_a_registers(bytes)),
        small_usize(mma_b_registers(bytes)),
    );
    let input = |value: f64| match form {
        MmaForm::Tf32 => round_to_tf32(value),
        MmaForm::Half | MmaForm::Fp8 | MmaForm::Int8 => value,
    };
    let mut a_tile = vec![[0.0; 32]; 16];
    let mut b_tile = vec![[0.0; 8]; 32];
    for lane in 0..WARP {
        for r in 0..a_count {
            let (row, col) = a_element(bytes, lane, r);
            a_tile[row][col] = input(a[lane * a_count + r]);
        }
        for r in 0..b_count {
            let (k, n) = b_element(bytes, lane, r);
            b_tile[k][n] = input(b[lane * b_count + r]);
        }
    }
    let mut d = vec![0.0; WARP * 4];
    for lane in 0..WARP {
        for r in 0..4 {
            let (row, col) = c_element(lane, r);
            let products: f64 = (0..depth).map(|k| a_tile[row][k] * b_tile[k][col]).sum();
            let accumulated = c[lane * 4 + r];
            d[lane * 4 + r] = match form {
                MmaForm::Int8 => wrapping_s32_sum(accumulated, products),
                MmaForm::Half | MmaForm::Tf32 | MmaForm::Fp8 => accumulated + products,
            };
        }
    }
    d
}

/// `accumulated + products` as the hardware's s32 accumulation computes it, wrapping. Both are
/// whole numbers (an s32 register and a sum of at most 32 products of 8-bit integers), exact in
/// i64; the sum wraps to 32 bits, on purpose.
#[allow(clippy::cast_possible_truncation)]
pub(super) fn wrapping_s32_sum(accumulated: f64, products: f64) -> f64 {
    f64::from((accumulated as i64).wrapping_add(products as i64) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element of each tile is held by exactly one (lane, register), for each width.
    #[test]
    fn fragment_tables_cover_their_tiles_once() {
        for bytes in [1, 2, 4] {
            let depth = small_usize(mma_k(bytes));
            let mut a = vec![[0u32; 32]; 16];
            let mut b = vec![[0u32; 8]; 32];
            let mut c = [[0u32; 8]; 16];
            for lane in 0..WARP {
                for r in 0..small_usize(mma_a_registers(bytes)) {
                    let (i, j) = a_element(bytes, lane, r);
                    a[i][j] += 1;
                }
                for r in 0..small_usize(mma_b_registers(bytes)) {
                    let (k, n) = b_element(bytes, lane, r);
                    b[k][n] += 1;
                }
                for r in 0..4 {
                    let (i, j) = c_element(lane, r);
                    c[i][j] += 1;
                }
            }
            assert!(a.iter().all(|row| row[..depth].iter().all(|&n| n == 1)));
            assert!(a.iter().all(|row| row[depth..].iter().all(|&n| n == 0)));
            assert!(b[..depth].iter().flatten().all(|&n| n == 1));
            assert!(b[depth..].iter().flatten().all(|&n| n == 0));
            assert!(c.iter().flatten().all(|&n| n == 1));
        }
        // Spot checks against the PTX ISA's figures for m16n8k16 (lane 5: groupID 1, threadID 1).
        assert_eq!(a_element(2, 5, 0), (1, 2));
        assert_eq!(a_element(2, 5, 3), (9, 3));
        assert_eq!(a_element(2, 5, 6), (9, 10));
        assert_eq!(b_element(2, 5, 2), (10, 1));
        assert_eq!(c_element(5, 2), (9, 2));
        // m16n8k8 with tf32: a0..a3 at (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4); b0, b1 at
        // (t, g), (t + 4, g).
        assert_eq!(a_element(4, 5, 1), (9, 1));
        assert_eq!(a_element(4, 5, 2), (1, 5));
        assert_eq!(b_element(4, 5, 1), (5, 1));
        // m16n8k32 with 8-bit elements: a0..a3 at row g, columns 4t..4t+4; a4..a7 at row g + 8;
        // a8..a15 at columns 16 on; b0..b3 at rows 4t.., b4..b7 at rows 4t + 16...
        assert_eq!(a_element(1, 5, 3), (1, 7));
        assert_eq!(a_element(1, 5, 4), (9, 4));
        assert_eq!(a_element(1, 5, 13), (9, 21));
        assert_eq!(b_element(1, 5, 6), (22, 1));
    }

    /// tf32 inputs are rounded to nearest (ties away) before the product; integer sums wrap.
    #[test]
    fn tf32_rounds_its_inputs_and_int8_wraps() {
        let mut a = vec![0.0; WARP * 4];
        let mut b = vec![0.0; WARP * 2];
        // Lane 0 holds A[0][0] in a0 and B[0][0] in b0.
        a[0] = 1.0 + 2f64.powi(-11) + 2f64.powi(-20);
        b[0] = 1.0;
        let d = mma_m16n8(MmaForm::Tf32, &a, &b, &[0.0; WARP * 4]);
        assert_eq!(d[0], 1.0 + 2f64.powi(-10));
        let a = vec![127.0; WARP * 16];
        let b = vec![127.0; WARP * 8];
        let c = vec![f64::from(i32::MAX); WARP * 4];
        let d = mma_m16n8(MmaForm::Int8, &a, &b, &c);
        let expected = i32::MAX.wrapping_add(32 * 127 * 127);
        assert_eq!(d[0], f64::from(expected));
    }
}
