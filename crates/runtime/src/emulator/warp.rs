//! Warp-wide and asynchronous statements: `ldmatrix`, `mma.sync` and the `cp.async` family.
//!
//! `ldmatrix` and `mma.sync` exchange registers between the 32 lanes of a warp, so they are
//! executed warp by warp with the exact register ownership PTX prescribes: a lowering that puts an
//! element in the wrong lane or register computes a wrong answer here, as it would on the GPU.
//!
//! An async copy reads its source when issued and lands in shared memory only when the issuing
//! thread waits for its group. Until then its elements are marked in flight: any access to them is
//! reported, so a missing `cp.async.wait_group` is an error, not a lucky read of stale data. The
//! landing is a write by the issuing thread at the wait, so a missing barrier between the wait and
//! another thread's read is reported as a race.

use std::collections::VecDeque;

use tilec_ir::ExprId;
use tilec_ir::dtype::DType;
use tilec_ir::thread::{mma_a_element, mma_b_element, mma_c_element};

use super::error::{ErrorKind, Fault};
use super::exec::Machine;

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
                return Err(self.fault(kind, Some(thread as u32)));
            }
        }
        Ok(())
    }

    /// The warps `active` consists of, each as its 32 threads in lane order; an error when a warp
    /// is only partly active.
    fn whole_warps(&self, active: &[u32], instruction: &'static str) -> Result<Vec<u32>, Fault> {
        let mut warps: Vec<u32> = active.iter().map(|&t| t / WARP as u32).collect();
        warps.dedup();
        for &warp in &warps {
            let lanes = active.iter().filter(|&&t| t / WARP as u32 == warp).count();
            if lanes != WARP {
                let kind = ErrorKind::PartialWarp { instruction, warp };
                return Err(self.fault(kind, Some(warp * WARP as u32)));
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
        self.check_16_bit(&[dst, src], "ldmatrix")?;
        let rows = self.per_thread(src_index, active, src)?;
        let targets = self.per_thread(dst_index, active, dst)?;
        let (mut readers, mut sources, mut stores) = (Vec::new(), Vec::new(), Vec::new());
        for warp in warps {
            let base = warp as usize * WARP;
            for provider in 0..(8 * matrices as usize) {
                self.check_vector_index(src, rows[base + provider], 8, (base + provider) as u32)?;
            }
            for lane in 0..WARP {
                for q in 0..matrices as usize {
                    for e in 0..2 {
                        let (row, col) = if transpose {
                            (2 * (lane % 4) + e, lane / 4)
                        } else {
                            (lane / 4, 2 * (lane % 4) + e)
                        };
                        readers.push((base + lane) as u32);
                        sources.push(rows[base + 8 * q + row] + col as i64);
                        stores.push(targets[base + lane] + (2 * q + e) as i64);
                    }
                }
            }
        }
        let values = self.gather(src, &readers, &sources)?;
        self.scatter(dst, &readers, &stores, &values)
    }

    /// `mma.sync.m16n8k16` with fp32 accumulation: see [`tilec_ir::thread::Stmt::Mma`].
    pub(super) fn exec_mma(
        &mut self,
        [a, b, c]: [usize; 3],
        [a_index, b_index, c_index]: [ExprId; 3],
        active: &[u32],
    ) -> Result<(), Fault> {
        let warps = self.whole_warps(active, "mma.sync")?;
        self.check_16_bit(&[a, b], "mma.sync")?;
        let a_at = self.per_thread(a_index, active, a)?;
        let b_at = self.per_thread(b_index, active, b)?;
        let c_at = self.per_thread(c_index, active, c)?;
        for warp in warps {
            let lanes: Vec<u32> = (0..WARP as u32).map(|l| warp * WARP as u32 + l).collect();
            let registers = |at: &[i64], count: usize| -> (Vec<u32>, Vec<i64>) {
                let mut threads = Vec::with_capacity(WARP * count);
                let mut indices = Vec::with_capacity(WARP * count);
                for &thread in &lanes {
                    for r in 0..count {
                        threads.push(thread);
                        indices.push(at[thread as usize] + r as i64);
                    }
                }
                (threads, indices)
            };
            let (a_threads, a_indices) = registers(&a_at, 8);
            let (b_threads, b_indices) = registers(&b_at, 4);
            let (c_threads, c_indices) = registers(&c_at, 4);
            let a_values = self.gather(a, &a_threads, &a_indices)?;
            let b_values = self.gather(b, &b_threads, &b_indices)?;
            let c_values = self.gather(c, &c_threads, &c_indices)?;
            let d_values = mma_m16n8k16(&a_values, &b_values, &c_values);
            self.scatter(c, &c_threads, &c_indices, &d_values)?;
        }
        Ok(())
    }

    fn check_16_bit(&self, buffers: &[usize], instruction: &str) -> Result<(), Fault> {
        for &buffer in buffers {
            let dtype = self.buffers.get(buffer).map(|info| info.dtype);
            if !matches!(dtype, Some(DType::Float16 | DType::BFloat16)) {
                let name = self.buffers.get(buffer).map_or("?", |info| info.name);
                let message = format!("{instruction} on `{name}`, which is not fp16 or bf16");
                return Err(self.malformed_fault(&message));
            }
        }
        Ok(())
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
        let positions: Vec<u32> = (0..threads.len() as u32).collect();
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

/// The tables of [`tilec_ir::thread::Stmt::Mma`] over `usize` lanes and registers.
fn a_element(lane: usize, r: usize) -> (usize, usize) {
    let (i, j) = mma_a_element(lane as i64, r as i64);
    (i as usize, j as usize)
}

fn b_element(lane: usize, r: usize) -> (usize, usize) {
    let (k, n) = mma_b_element(lane as i64, r as i64);
    (k as usize, n as usize)
}

fn c_element(lane: usize, r: usize) -> (usize, usize) {
    let (i, j) = mma_c_element(lane as i64, r as i64);
    (i as usize, j as usize)
}

/// One warp's `D = A × B + C` on registers in lane order (8, 4 and 4 per lane). Products of 16-bit
/// values are exact in `f64`; the sum is rounded to fp32 once, when stored.
fn mma_m16n8k16(a: &[f64], b: &[f64], c: &[f64]) -> Vec<f64> {
    let mut a_tile = [[0.0; 16]; 16];
    let mut b_tile = [[0.0; 8]; 16];
    for lane in 0..WARP {
        for r in 0..8 {
            let (row, col) = a_element(lane, r);
            a_tile[row][col] = a[lane * 8 + r];
        }
        for r in 0..4 {
            let (k, n) = b_element(lane, r);
            b_tile[k][n] = b[lane * 4 + r];
        }
    }
    let mut d = vec![0.0; WARP * 4];
    for lane in 0..WARP {
        for r in 0..4 {
            let (row, col) = c_element(lane, r);
            let products: f64 = (0..16).map(|k| a_tile[row][k] * b_tile[k][col]).sum();
            d[lane * 4 + r] = c[lane * 4 + r] + products;
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element of each tile is held by exactly one (lane, register).
    #[test]
    fn fragment_tables_cover_their_tiles_once() {
        let mut a = [[0u32; 16]; 16];
        let mut b = [[0u32; 8]; 16];
        let mut c = [[0u32; 8]; 16];
        for lane in 0..WARP {
            for r in 0..8 {
                let (i, j) = a_element(lane, r);
                a[i][j] += 1;
            }
            for r in 0..4 {
                let (k, n) = b_element(lane, r);
                b[k][n] += 1;
                let (i, j) = c_element(lane, r);
                c[i][j] += 1;
            }
        }
        assert!(a.iter().flatten().all(|&n| n == 1));
        assert!(b.iter().flatten().all(|&n| n == 1));
        assert!(c.iter().flatten().all(|&n| n == 1));
        // Spot checks against the PTX ISA's figures for m16n8k16 (lane 5: groupID 1, threadID 1).
        assert_eq!(a_element(5, 0), (1, 2));
        assert_eq!(a_element(5, 3), (9, 3));
        assert_eq!(a_element(5, 6), (9, 10));
        assert_eq!(b_element(5, 2), (10, 1));
        assert_eq!(c_element(5, 2), (9, 2));
    }
}
