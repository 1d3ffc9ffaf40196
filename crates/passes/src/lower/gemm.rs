//! `T.gemm` on tensor cores: `mma.sync` fed by `ldmatrix` from shared memory.
//!
//! The block's warps form the `warps_m × warps_n` grid the accumulator layout was inferred with
//! (`layout::tensor_core`); each warp computes its `tile_m × tile_n` part of C as 16×8 atoms, one
//! `mma.sync` per atom and step of K. A step is 32 bytes of K whatever the operands are:
//! m16n8k16 for fp16 and bf16, m16n8k8 for float32 (as tf32), m16n8k32 for fp8 and 8-bit
//! integers (`mma_k`). Operands in shared memory are loaded with `ldmatrix` (four 8×8 matrices
//! of 16-byte rows at a time, `.trans` where the stored orientation of a 16-bit operand needs
//! it; 8-bit and 32-bit operands only where their 16-byte rows run along K, since `.trans` moves
//! 16-bit elements); an A operand in registers is copied register by register into the
//! instruction's operand array.
//!
//! Each warp keeps two sets of fragment registers and issues step `kk + 1`'s loads before step
//! `kk`'s mma, so their latency hides behind it. A `cp.async` pipeline whose only consumer is the
//! gemm also has it load the next iteration's first step before the last step's mma (see
//! `pipeline::FragmentPrefetch`).
//!
//! Nothing here trusts a formula: which register of which thread holds an element is read off the
//! inferred layouts by enumeration, and a layout that does not give every lane exactly the registers
//! the instruction expects (at indices that are the same in every thread, so they stay constants
//! after unrolling) is refused with a message instead of producing a wrong program. Likewise a shared
//! layout must keep each 16-byte row chunk contiguous and 16-byte aligned for `ldmatrix`; one that
//! does not is read element by element.

use tilec_ir::thread::{
    Memory, Place, Stmt, Value, mma_a_element, mma_a_registers, mma_b_registers, mma_c_element,
    mma_k,
};
use tilec_ir::{DType, EntityId, ExprId, ExprProgram, Region, Target, TileOp, WarpPolicy};

use super::{Lowering, Unlowerable, table_index, table_int};
use crate::layout::GemmInstruction;
use crate::layout::tensor_core::{warp_partition, wgmma_partition};

const WARP: i64 = 32;

/// One `T.gemm`, its operands resolved.
pub(super) struct GemmPlan {
    pub(super) a: EntityId,
    pub(super) b: EntityId,
    pub(super) c: EntityId,
    pub(super) transpose_a: bool,
    pub(super) transpose_b: bool,
    pub(super) m: i64,
    pub(super) n: i64,
    pub(super) k: i64,
    pub(super) warps_m: i64,
    pub(super) tile_m: i64,
    pub(super) tile_n: i64,
    /// Row `wm * warp_rows + mi * micro_rows` starts micro tile `mi` of warp row `wm`: `tile_m`
    /// and 16 when each warp owns consecutive rows, 16 and `16 * warps_m` in wgmma's interleaved
    /// arrangement.
    pub(super) warp_rows: i64,
    pub(super) micro_rows: i64,
    pub(super) dtype: DType,
    /// Bytes of one A (and B) element: 2, 4 (tf32) or 1 (fp8, 8-bit integers).
    pub(super) bytes: i64,
    pub(super) instruction: GemmInstruction,
    /// The windows of their buffers that A and B are.
    pub(super) a_view: OperandView,
    pub(super) b_view: OperandView,
}

/// The 2-D window of a buffer that a gemm operand is: `T.gemm(A_s[stage, :, :], ...)` takes
/// stage `stage` of a 3-D buffer, `Q_s[:, 32:64]` a column range. Every element address the
/// lowering computes goes through it.
#[derive(Clone, Debug)]
pub(super) struct OperandView {
    /// Where the window starts in each dimension of the buffer (a point index's value).
    pub(super) starts: Vec<ExprId>,
    /// The buffer dimensions that are the operand matrix's rows and columns.
    pub(super) dims: [usize; 2],
    /// The window's rows and columns.
    pub(super) shape: [i64; 2],
    /// Whether the window is the whole of a 2-D buffer.
    pub(super) whole: bool,
}

impl OperandView {
    /// The buffer indices of element `[row, col]` of the window.
    pub(super) fn indices(&self, e: &mut tilec_ir::ExprArena, at: &[ExprId]) -> Vec<ExprId> {
        let mut indices = self.starts.clone();
        for (&dim, &index) in self.dims.iter().zip(at) {
            indices[dim] = match e.as_int(self.starts[dim]) {
                Some(0) => index,
                _ => e.add(self.starts[dim], index),
            };
        }
        indices
    }
}

/// The register arrays a warp's A and B operands are loaded into, each holding `sets` sets of
/// `a_len` (`b_len`) elements.
struct Fragments {
    a: tilec_ir::thread::BufferId,
    b: tilec_ir::thread::BufferId,
    a_len: i64,
    b_len: i64,
}

/// Where a warp's operand registers come from.
enum OperandSource {
    /// `ldmatrix` from a shared buffer whose row chunks are contiguous.
    Matrix,
    /// Element by element from a shared buffer (a layout `ldmatrix` cannot read).
    SharedElements,
    /// Register copies from a fragment: the constant local index of each operand register, by
    /// `(micro tile, k step, register)`.
    Registers(Vec<i64>),
}

impl Lowering<'_> {
    /// Lowers a `T.gemm` into `out`; returns the label that says how it runs.
    pub(super) fn gemm(
        &mut self,
        entity: EntityId,
        op: &TileOp,
        out: &mut Vec<Stmt>,
    ) -> Result<String, Unlowerable> {
        let TileOp::Gemm {
            a,
            b,
            c,
            transpose_a,
            transpose_b,
            policy,
            clear_accum,
            ..
        } = op
        else {
            return Ok("T.gemm".to_owned());
        };
        let instruction = self
            .layouts
            .gemms
            .get(&entity)
            .copied()
            .unwrap_or(GemmInstruction::MmaSync);
        let plan = self.gemm_plan(
            [a, b, c],
            [*transpose_a, *transpose_b],
            *policy,
            instruction,
        )?;
        // A wgmma gemm whose operands no descriptor describes runs on mma.sync over the same
        // (interleaved) accumulator layout.
        let mut fallback = "";
        if plan.instruction == GemmInstruction::Wgmma {
            match self.wgmma_operands_of(&plan)? {
                Ok(operands) => return self.wgmma_gemm(&plan, &operands, *clear_accum, out),
                Err(why) => fallback = why,
            }
        }
        let accumulator = self.accumulator_registers(&plan)?;
        let a_source = self.a_source(&plan)?;
        // Without `.trans` for 8-bit and 32-bit elements, `ldmatrix` reads B only where its
        // 16-byte rows run along K: stored N×K.
        let b_source = match self.is_private(plan.b) {
            true => return Err(Unlowerable::new("`T.gemm` with B in registers")),
            false
                if (plan.bytes == 2 || plan.transpose_b)
                    && self.matrix_readable(plan.b, &plan.b_view, plan.bytes)? =>
            {
                OperandSource::Matrix
            }
            false => OperandSource::SharedElements,
        };
        if *clear_accum {
            self.clear_registers(plan.c, out)?;
        }
        self.issue_steps(&plan, (&a_source, &b_source), &accumulator, out)?;
        let note = if fallback.is_empty() {
            String::new()
        } else {
            format!(" (not wgmma: {fallback})")
        };
        Ok(format!(
            "T.gemm {}x{}x{} on mma.sync m16n8k{}, warps {}x{} of {}x{}{note}",
            plan.m,
            plan.n,
            plan.k,
            mma_k(plan.bytes),
            plan.warps_m,
            plan.n / plan.tile_n,
            plan.tile_m,
            plan.tile_n
        ))
    }

    /// The gemm's k steps on mma.sync: each step's fragment loads, then its mma per atom.
    fn issue_steps(
        &mut self,
        plan: &GemmPlan,
        sources: (&OperandSource, &OperandSource),
        accumulator: &[i64],
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let steps = plan.k / mma_k(plan.bytes);
        let (a_len, b_len) = (
            plan.tile_m / 16 * mma_a_registers(plan.bytes),
            plan.tile_n / 8 * mma_b_registers(plan.bytes),
        );
        // Two sets of fragment registers, so that step kk + 1's loads can be issued before step
        // kk's mma (which reads the other set) and their latency hides behind it.
        let sets = if steps > 1 { 2 } else { 1 };
        let regs = Fragments {
            a: self.scratch_registers("a_frag", plan.dtype, sets * a_len),
            // B's own dtype: fp8 and 8-bit integer forms may mix e4m3 with e5m2, s8 with u8.
            b: self.scratch_registers("b_frag", self.element_dtype(plan.b), sets * b_len),
            a_len,
            b_len,
        };
        let c_id = self.buffer_of(plan.c)?;
        // The next iteration's first fragments go to set 0 while the last step's mma reads set
        // `(steps - 1) % 2`, which must be the other one.
        let prefetch = steps > 0 && steps % 2 == 0 && self.fragment_prefetch_offered();
        let mut first = Vec::new();
        if steps > 0 {
            self.load_step(plan, sources, (0, 0), &regs, &mut first)?;
        }
        if prefetch {
            self.take_fragment_prefetch(&first);
        } else {
            out.append(&mut first);
        }
        for kk in 0..steps {
            if kk + 1 < steps {
                self.load_step(plan, sources, (kk + 1, (kk + 1) % 2), &regs, out)?;
            } else if prefetch {
                self.fragments_of_next_iteration(&first, out);
            }
            self.mma_step(plan, (kk % 2, &regs), (c_id, accumulator), out);
        }
        Ok(())
    }

    /// Step `kk`'s A and B operands into register set `set`.
    fn load_step(
        &mut self,
        plan: &GemmPlan,
        (a_source, b_source): (&OperandSource, &OperandSource),
        (kk, set): (i64, i64),
        regs: &Fragments,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        for mi in 0..plan.tile_m / 16 {
            self.load_a(plan, a_source, (mi, kk), (regs.a, set * regs.a_len), out)?;
        }
        self.load_b(plan, b_source, kk, (regs.b, set * regs.b_len), out)
    }

    /// One k step's mma per 16×8 atom of the warp's tile, on register set `set`.
    fn mma_step(
        &mut self,
        plan: &GemmPlan,
        (set, regs): (i64, &Fragments),
        (c, accumulator): (tilec_ir::thread::BufferId, &[i64]),
        out: &mut Vec<Stmt>,
    ) {
        let (a_count, b_count) = (mma_a_registers(plan.bytes), mma_b_registers(plan.bytes));
        for mi in 0..plan.tile_m / 16 {
            for ni in 0..plan.tile_n / 8 {
                // `mi` and `ni` count up from 0 within the plan's tile, so the atom's number is
                // not negative and below the accumulator's length.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let atom = (mi * (plan.tile_n / 8) + ni) as usize;
                let exprs = &mut self.program.exprs;
                out.push(Stmt::Mma {
                    a: Place {
                        buffer: regs.a,
                        index: exprs.int(set * regs.a_len + mi * a_count),
                    },
                    b: Place {
                        buffer: regs.b,
                        index: exprs.int(set * regs.b_len + ni * b_count),
                    },
                    c: Place {
                        buffer: c,
                        index: exprs.int(accumulator[atom]),
                    },
                });
            }
        }
    }

    /// Shapes, dtypes and the warp grid of a gemm, or why it cannot run on tensor cores.
    fn gemm_plan(
        &self,
        [a, b, c]: [&Region; 3],
        [transpose_a, transpose_b]: [bool; 2],
        policy: WarpPolicy,
        instruction: GemmInstruction,
    ) -> Result<GemmPlan, Unlowerable> {
        let a_view = self.operand_view(a, "A")?;
        let b_view = self.operand_view(b, "B")?;
        let c_shape = self.whole_buffer_2d(c, "C")?;
        let (a_shape, b_shape) = (a_view.shape, b_view.shape);
        let (m, k) = if transpose_a {
            (a_shape[1], a_shape[0])
        } else {
            (a_shape[0], a_shape[1])
        };
        let (k_b, n) = if transpose_b {
            (b_shape[1], b_shape[0])
        } else {
            (b_shape[0], b_shape[1])
        };
        if k != k_b || c_shape != [m, n] {
            return Err(Unlowerable::new(format!(
                "`T.gemm` shapes do not agree: A is {m}x{k}, B is {k_b}x{n}, C is {}x{}",
                c_shape[0], c_shape[1]
            )));
        }
        let dtype = self.element_dtype(a.buffer);
        let bytes = mma_operand_bytes(
            [
                dtype,
                self.element_dtype(b.buffer),
                self.element_dtype(c.buffer),
            ],
            self.options.target,
        )
        .map_err(Unlowerable::new)?;
        let depth = mma_k(bytes);
        if k % depth != 0 {
            return Err(Unlowerable::new(format!(
                "`T.gemm` reduces over {k}, which is not a multiple of the instruction's {depth} \
                 (32 bytes of {dtype})"
            )));
        }
        if !self.is_private(c.buffer) {
            return Err(Unlowerable::new(
                "`T.gemm` accumulates into a fragment only",
            ));
        }
        let warps = self.threads / WARP;
        let (warps_m, warps_n) = match instruction {
            GemmInstruction::MmaSync => warp_partition(m, n, warps, policy),
            GemmInstruction::Wgmma => wgmma_partition(m, n, warps, policy),
        }
        .map_err(Unlowerable::new)?;
        let (warp_rows, micro_rows) = match instruction {
            GemmInstruction::MmaSync => (m / warps_m, 16),
            GemmInstruction::Wgmma => (16, 16 * warps_m),
        };
        Ok(GemmPlan {
            a: a.buffer,
            b: b.buffer,
            c: c.buffer,
            transpose_a,
            transpose_b,
            m,
            n,
            k,
            warps_m,
            tile_m: m / warps_m,
            tile_n: n / warps_n,
            warp_rows,
            micro_rows,
            dtype,
            bytes,
            instruction,
            a_view,
            b_view,
        })
    }

    /// The 2-D window of a shared buffer (or the whole fragment) that an A or B operand is:
    /// point indices, run-time or not, then two dimensions with constant extents.
    fn operand_view(&self, region: &Region, operand: &str) -> Result<OperandView, Unlowerable> {
        let shape = self.world.const_shape(region.buffer).unwrap_or_default();
        let exprs = &self.world.exprs;
        let starts: Vec<ExprId> = region.dims.iter().map(|dim| dim.start).collect();
        if shape.len() == 2 && region.dims.len() == 2 {
            let whole = self.whole_buffer_2d(region, operand).is_ok();
            if whole {
                let dims = [0, 1];
                let shape = [shape[0], shape[1]];
                return Ok(OperandView {
                    starts,
                    dims,
                    shape,
                    whole,
                });
            }
        }
        let slice_error = |why: &str| {
            Unlowerable::new(format!(
                "`T.gemm` operand {operand} must be a whole buffer or a 2-D window of a shared \
                 buffer: {why}"
            ))
        };
        if shape.is_empty() || region.dims.len() != shape.len() {
            return Err(slice_error("its buffer has no constant shape"));
        }
        if self.is_private(region.buffer) {
            return Err(slice_error("a slice of a fragment"));
        }
        // A dimension with an extent is a range of the window, one without a point; ranges of one
        // element in front of two others are points too (`A_s[s:s+1, :, :]`).
        let mut ranges: Vec<(usize, i64)> = Vec::new();
        for (d, dim) in region.dims.iter().enumerate() {
            let Some(extent) = dim.extent else {
                continue;
            };
            let Some(extent) = exprs.as_int(extent) else {
                return Err(slice_error("a range whose extent is not a constant"));
            };
            let start = exprs.as_int(dim.start).unwrap_or(0);
            if start < 0 || start + extent > shape[d] {
                return Err(slice_error("a range outside its buffer"));
            }
            ranges.push((d, extent));
        }
        while ranges.len() > 2 && ranges[0].1 == 1 {
            ranges.remove(0);
        }
        let [(rows_dim, rows), (cols_dim, cols)] = ranges[..] else {
            return Err(slice_error("it does not range over exactly two dimensions"));
        };
        Ok(OperandView {
            starts,
            dims: [rows_dim, cols_dim],
            shape: [rows, cols],
            whole: false,
        })
    }

    /// The storage and index of element `at` (row, column) of an operand's window.
    fn view_address(
        &mut self,
        buffer: EntityId,
        view: &OperandView,
        at: &[ExprId],
    ) -> Result<(tilec_ir::thread::BufferId, ExprId), Unlowerable> {
        let indices = view.indices(&mut self.program.exprs, at);
        self.address(buffer, &indices)
    }

    /// The constant shape of a 2-D operand that the gemm takes whole.
    fn whole_buffer_2d(&self, region: &Region, operand: &str) -> Result<[i64; 2], Unlowerable> {
        let shape = self.world.const_shape(region.buffer).unwrap_or_default();
        let [rows, cols] = shape[..] else {
            return Err(Unlowerable::new(format!(
                "`T.gemm` operand {operand} must be a 2-D buffer with a constant shape"
            )));
        };
        let whole = region.dims.iter().zip(&shape).all(|(dim, &extent)| {
            self.world.exprs.as_int(dim.start) == Some(0)
                && dim
                    .extent
                    .is_none_or(|e| self.world.exprs.as_int(e) == Some(extent))
        });
        if !whole || region.dims.len() != 2 {
            return Err(Unlowerable::new(format!(
                "`T.gemm` operand {operand} must be a whole buffer, not a slice of one"
            )));
        }
        Ok([rows, cols])
    }

    /// The warp, and its row and column in the warp grid, of thread `t`.
    fn warp_position(plan: &GemmPlan, t: i64) -> (i64, i64) {
        let warp = t / WARP;
        (warp % plan.warps_m, warp / plan.warps_m)
    }

    /// For each 16×8 atom of a warp's tile (M-major), the first of the four consecutive registers
    /// of the accumulator fragment that hold the atom's `c0..c3` in every thread.
    fn accumulator_registers(&self, plan: &GemmPlan) -> Result<Vec<i64>, Unlowerable> {
        let atoms_n = plan.tile_n / 8;
        let slots = table_index(plan.tile_m / 16 * atoms_n * 4)?;
        let element = |t: i64, slot: usize| {
            let (wm, wn) = Self::warp_position(plan, t);
            let (atom, r) = (table_int(slot) / 4, table_int(slot) % 4);
            let (mi, ni) = (atom / atoms_n, atom % atoms_n);
            let (row, col) = mma_c_element(t % WARP, r);
            vec![
                wm * plan.warp_rows + mi * plan.micro_rows + row,
                wn * plan.tile_n + ni * 8 + col,
            ]
        };
        let registers = self.register_table(plan.c, slots, element).map_err(|why| {
            Unlowerable::new(format!(
                "the accumulator `{}` is not laid out as mma.sync's C fragment: {why}",
                self.world.name(plan.c)
            ))
        })?;
        let mut bases = Vec::with_capacity(slots / 4);
        for atom in registers.chunks(4) {
            if atom.windows(2).any(|pair| pair[1] != pair[0] + 1) {
                return Err(Unlowerable::new(format!(
                    "the accumulator `{}` does not keep an atom's four registers together",
                    self.world.name(plan.c)
                )));
            }
            bases.push(atom[0]);
        }
        Ok(bases)
    }

    /// How the A operand reaches the instruction.
    fn a_source(&self, plan: &GemmPlan) -> Result<OperandSource, Unlowerable> {
        if !self.is_private(plan.a) {
            // As for B: 8-bit and 32-bit A through `ldmatrix` only with its rows along K.
            let rows_along_k = plan.bytes == 2 || !plan.transpose_a;
            return Ok(
                if rows_along_k && self.matrix_readable(plan.a, &plan.a_view, plan.bytes)? {
                    OperandSource::Matrix
                } else {
                    OperandSource::SharedElements
                },
            );
        }
        let (depth, count) = (mma_k(plan.bytes), table_index(mma_a_registers(plan.bytes))?);
        let per_tile = table_index(plan.k / depth)? * count;
        let slots = table_index(plan.tile_m / 16)? * per_tile;
        let element = |t: i64, slot: usize| {
            let (wm, _) = Self::warp_position(plan, t);
            let (mi, rest) = (table_int(slot / per_tile), slot % per_tile);
            let (kk, r) = (table_int(rest / count), rest % count);
            let (row, col) = mma_a_element(plan.bytes, t % WARP, table_int(r));
            let (m, k) = (
                wm * plan.warp_rows + mi * plan.micro_rows + row,
                kk * depth + col,
            );
            if plan.transpose_a {
                vec![k, m]
            } else {
                vec![m, k]
            }
        };
        let table = self.register_table(plan.a, slots, element).map_err(|why| {
            Unlowerable::new(format!(
                "the A operand `{}` is not laid out as mma.sync's A fragment: {why}",
                self.world.name(plan.a)
            ))
        })?;
        Ok(OperandSource::Registers(table))
    }

    /// The local index of `element(t, slot)` in every thread `t`, which must hold that element
    /// and keep it at the same index as every other thread does.
    pub(super) fn register_table(
        &self,
        fragment: EntityId,
        slots: usize,
        element: impl Fn(i64, usize) -> Vec<i64>,
    ) -> Result<Vec<i64>, String> {
        let storage = self
            .fragments
            .get(&fragment)
            .ok_or_else(|| "it has no inferred layout".to_owned())?;
        // The formulas run compiled and batched over a thread's slots: this visits every register
        // of every thread. A slot that replica 0 does not place on the thread (a replicated
        // fragment) is looked up replica by replica.
        let layout = &storage.layout;
        let mut inputs = layout.vars.clone();
        inputs.push(layout.rep);
        let mut outputs = vec![layout.thread];
        outputs.extend(&layout.index);
        let mut formulas = ExprProgram::compile(&self.program.exprs, &inputs, &outputs);
        let flatten = |local: &mut dyn Iterator<Item = i64>| {
            local
                .zip(&storage.local_shape)
                .fold(0, |acc, (index, &extent)| acc * extent + index)
        };
        let mut table = vec![-1; slots];
        for t in 0..self.threads {
            let points: Vec<Vec<i64>> = (0..slots).map(|slot| element(t, slot)).collect();
            let mut columns: Vec<Vec<i64>> = (0..layout.vars.len())
                .map(|d| {
                    points
                        .iter()
                        .map(|p| p.get(d).copied().unwrap_or(0))
                        .collect()
                })
                .collect();
            columns.push(vec![0; slots]);
            let refs: Vec<&[i64]> = columns.iter().map(Vec::as_slice).collect();
            let on_replica_0: Vec<Option<i64>> = match formulas.run_batch(&refs, slots) {
                Some(batch) => (0..slots)
                    .map(|slot| {
                        (batch.column(0)[slot] == t).then(|| {
                            flatten(&mut (1..batch.outputs()).map(|k| batch.column(k)[slot]))
                        })
                    })
                    .collect(),
                None => vec![None; slots],
            };
            for (slot, entry) in table.iter_mut().enumerate() {
                let point = &points[slot];
                let flat = match on_replica_0[slot] {
                    Some(flat) => flat,
                    None => {
                        let local = replica_holding(&mut formulas, point, layout.replicate, t)?;
                        flatten(&mut local.into_iter())
                    }
                };
                if *entry >= 0 && *entry != flat {
                    return Err(format!(
                        "element {point:?} sits in register {flat} of thread {t} but in \
                         register {entry} of thread 0"
                    ));
                }
                *entry = flat;
            }
        }
        Ok(table)
    }

    /// Whether `ldmatrix` can read an operand's window of a shared buffer of `bytes`-byte
    /// elements: every aligned 16-byte chunk of a row is stored contiguously at a 16-byte
    /// boundary (also in every pipeline stage, and at every value of a run-time point index such
    /// as a stage).
    fn matrix_readable(
        &self,
        buffer: EntityId,
        view: &OperandView,
        bytes: i64,
    ) -> Result<bool, Unlowerable> {
        let chunk = 16 / bytes.clamp(1, 4);
        let Some(assigned) = self.layouts.shared.get(&buffer) else {
            return Ok(false);
        };
        let map = &assigned.map;
        let Some(&offset) = map.outputs.first() else {
            return Ok(false);
        };
        let [rows, cols] = view.shape;
        if cols % chunk != 0
            || assigned.storage_elements % chunk != 0
            || map.shape.len() != view.starts.len()
        {
            return Ok(false);
        }
        let exprs = &self.program.exprs;
        // The window's first row and column must be known; a point index that is not is tried at
        // every value it can take.
        let [row_dim, col_dim] = view.dims;
        let (Some(row0), Some(col0)) = (
            exprs.as_int(view.starts[row_dim]),
            exprs.as_int(view.starts[col_dim]),
        ) else {
            return Ok(false);
        };
        let points: Vec<Vec<i64>> = view
            .starts
            .iter()
            .enumerate()
            .map(|(d, &start)| match exprs.as_int(start) {
                _ if view.dims.contains(&d) => vec![0],
                Some(value) => vec![value],
                None => (0..map.shape[d]).collect(),
            })
            .collect();
        let mut offsets = ExprProgram::compile(exprs, &map.vars, &[offset]);
        for mut point in cartesian(&points) {
            let mut at = |row: i64, col: i64| {
                point[row_dim] = row0 + row;
                point[col_dim] = col0 + col;
                offsets.run_one(&point)
            };
            for row in 0..rows {
                for start in (0..cols).step_by(table_index(chunk)?) {
                    let Some(first) = at(row, start) else {
                        return Ok(false);
                    };
                    if first % chunk != 0
                        || (1..chunk).any(|j| at(row, start + j) != Some(first + j))
                    {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }

    /// A register array of lowering's own, for instruction operands.
    pub(super) fn scratch_registers(
        &mut self,
        name: &str,
        dtype: DType,
        elements: i64,
    ) -> tilec_ir::thread::BufferId {
        let name = self.program.unique_buffer_name(name);
        let count = self.program.exprs.int(elements);
        self.program.add_buffer(tilec_ir::thread::BufferDecl {
            name,
            dtype,
            memory: Memory::Local,
            shape: vec![count],
            elements: count,
            strides: None,
        })
    }

    /// `T.gemm(..., clear_accum=True)`: the accumulator's registers start at zero.
    pub(super) fn clear_registers(
        &mut self,
        c: EntityId,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let buffer = self.buffer_of(c)?;
        let size = self.fragments.get(&c).map_or(0, |s| s.local_size());
        let var = self.program.exprs.var("r", Some(size));
        let index = self.program.exprs.var_expr(var);
        let zero = self.zero(DType::Float32);
        let extent = self.program.exprs.int(size);
        out.push(Stmt::For {
            var,
            extent,
            unroll: true,
            body: vec![Stmt::Store {
                place: Place { buffer, index },
                value: zero,
            }],
        });
        Ok(())
    }

    /// Lane, warp row and warp column of the running thread, as index expressions.
    fn lane_exprs(&mut self, plan: &GemmPlan) -> [ExprId; 3] {
        let exprs = &mut self.program.exprs;
        let t = exprs.var_expr(self.program.thread);
        let warp_size = exprs.int(WARP);
        let lane = exprs.floormod(t, warp_size);
        let warp = exprs.floordiv(t, warp_size);
        let warps_m = exprs.int(plan.warps_m);
        let wm = exprs.floormod(warp, warps_m);
        let wn = exprs.floordiv(warp, warps_m);
        [lane, wm, wn]
    }

    /// The A registers of micro tile `mi` at k step `kk`, into `a_regs[base + mi * count..]`
    /// (`count` = [`mma_a_registers`]).
    fn load_a(
        &mut self,
        plan: &GemmPlan,
        source: &OperandSource,
        (mi, kk): (i64, i64),
        (a_regs, base): (tilec_ir::thread::BufferId, i64),
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let (depth, count) = (mma_k(plan.bytes), mma_a_registers(plan.bytes));
        match source {
            OperandSource::Registers(table) => {
                let fragment = self.buffer_of(plan.a)?;
                let per_tile = table_index(plan.k / depth * count)?;
                for r in 0..table_index(count)? {
                    let local = table[table_index(mi)? * per_tile + table_index(kk * count)? + r];
                    let exprs = &mut self.program.exprs;
                    let (src, dst) = (
                        exprs.int(local),
                        exprs.int(base + mi * count + table_int(r)),
                    );
                    let value = self.program.add_value(Value::Load {
                        buffer: fragment,
                        index: src,
                    });
                    out.push(Stmt::Store {
                        place: Place {
                            buffer: a_regs,
                            index: dst,
                        },
                        value,
                    });
                }
                Ok(())
            }
            OperandSource::Matrix => {
                let [lane, wm, _] = self.lane_exprs(plan);
                // Matrix q = lane / 8 covers rows (q % 2) * 8 and the 16 bytes of K from
                // (q / 2) * 16 bytes of the 16×32-byte tile, which puts its 32-bit registers in
                // the instruction's order (a0a1, a2a3, a4a5, a6a7 for 16-bit elements).
                let e = &mut self.program.exprs;
                let (eight, two) = (e.int(8), e.int(2));
                let q = e.floordiv(lane, eight);
                let r = e.floormod(lane, eight);
                let row_half = e.floormod(q, two);
                let col_half = e.floordiv(q, two);
                let m = warp_offset(e, wm, plan.warp_rows, mi * plan.micro_rows, row_half, r);
                let half_depth = e.int(depth / 2);
                let k_chunk = e.mul(col_half, half_depth);
                let k_base = e.int(kk * depth);
                let k = e.add(k_base, k_chunk);
                let zero = e.int(0);
                let indices = if plan.transpose_a {
                    // Stored K×M: row k of the stored tile, read transposed.
                    let k_row = warp_offset(e, zero, 0, kk * depth, col_half, r);
                    let m_col =
                        warp_offset(e, wm, plan.warp_rows, mi * plan.micro_rows, row_half, zero);
                    vec![k_row, m_col]
                } else {
                    vec![m, k]
                };
                let (src, src_index) = self.view_address(plan.a, &plan.a_view, &indices)?;
                let dst_index = self.program.exprs.int(base + mi * count);
                out.push(Stmt::LoadMatrix {
                    matrices: 4,
                    transpose: plan.transpose_a,
                    dst: Place {
                        buffer: a_regs,
                        index: dst_index,
                    },
                    src: Place {
                        buffer: src,
                        index: src_index,
                    },
                });
                Ok(())
            }
            OperandSource::SharedElements => {
                let [lane, wm, _] = self.lane_exprs(plan);
                for r in 0..count {
                    let (row, col) = a_element_exprs(&mut self.program.exprs, plan.bytes, lane, r);
                    let e = &mut self.program.exprs;
                    let base_m = e.int(mi * plan.micro_rows);
                    let tile = e.int(plan.warp_rows);
                    let warp_rows = e.mul(wm, tile);
                    let m = e.add(warp_rows, base_m);
                    let m = e.add(m, row);
                    let base_k = e.int(kk * depth);
                    let k = e.add(base_k, col);
                    let indices = if plan.transpose_a { [k, m] } else { [m, k] };
                    self.element_to_register(
                        (plan.a, &plan.a_view),
                        &indices,
                        a_regs,
                        base + mi * count + r,
                        out,
                    )?;
                }
                Ok(())
            }
        }
    }

    /// The B registers of every n8 atom of the warp's tile at k step `kk`, into `b_regs[base..]`.
    fn load_b(
        &mut self,
        plan: &GemmPlan,
        source: &OperandSource,
        kk: i64,
        (b_regs, base): (tilec_ir::thread::BufferId, i64),
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let [lane, _, wn] = self.lane_exprs(plan);
        let atoms = plan.tile_n / 8;
        let (depth, count) = (mma_k(plan.bytes), mma_b_registers(plan.bytes));
        if let OperandSource::SharedElements = source {
            for atom in 0..atoms {
                for r in 0..count {
                    let (k, n) = b_element_exprs(&mut self.program.exprs, plan.bytes, lane, r);
                    let e = &mut self.program.exprs;
                    let base_k = e.int(kk * depth);
                    let k = e.add(base_k, k);
                    let zero = e.int(0);
                    let n = warp_offset(e, wn, plan.tile_n, atom * 8, zero, n);
                    let indices = if plan.transpose_b { [n, k] } else { [k, n] };
                    self.element_to_register(
                        (plan.b, &plan.b_view),
                        &indices,
                        b_regs,
                        base + atom * count + r,
                        out,
                    )?;
                }
            }
            return Ok(());
        }
        // Two atoms per ldmatrix.x4 where the tile allows: matrix q covers the 16 bytes of K from
        // (q % 2) * 16 bytes of atom 2p + q / 2, which puts its registers at b0b1, b2b3 of one
        // atom, then the next (for 16-bit elements; one register per matrix whatever the width).
        let pair = atoms % 2 == 0;
        let step: usize = if pair { 2 } else { 1 };
        for first in (0..atoms).step_by(step) {
            let e = &mut self.program.exprs;
            let (eight, two) = (e.int(8), e.int(2));
            let q = e.floordiv(lane, eight);
            let q = if pair { q } else { e.floormod(q, two) };
            let r = e.floormod(lane, eight);
            let k_half = e.floormod(q, two);
            let atom_step = if pair { e.floordiv(q, two) } else { e.int(0) };
            let zero = e.int(0);
            let indices = if plan.transpose_b {
                // Stored N×K: row n of the stored tile, read as is, 16 bytes of K per row.
                let n = warp_offset(e, wn, plan.tile_n, first * 8, atom_step, r);
                let half_depth = e.int(depth / 2);
                let k_chunk = e.mul(k_half, half_depth);
                let k_base = e.int(kk * depth);
                let k = e.add(k_base, k_chunk);
                vec![n, k]
            } else {
                // Stored K×N (16-bit only): eight k rows per matrix, read transposed.
                let k = warp_offset(e, zero, 0, kk * depth, k_half, r);
                let n = warp_offset(e, wn, plan.tile_n, first * 8, atom_step, zero);
                vec![k, n]
            };
            let (src, src_index) = self.view_address(plan.b, &plan.b_view, &indices)?;
            let dst_index = self.program.exprs.int(base + first * count);
            out.push(Stmt::LoadMatrix {
                matrices: if pair { 4 } else { 2 },
                transpose: !plan.transpose_b,
                dst: Place {
                    buffer: b_regs,
                    index: dst_index,
                },
                src: Place {
                    buffer: src,
                    index: src_index,
                },
            });
        }
        Ok(())
    }

    /// `registers[slot] = buffer[indices]`, converted to the operand type.
    fn element_to_register(
        &mut self,
        (buffer, view): (EntityId, &OperandView),
        indices: &[ExprId],
        registers: tilec_ir::thread::BufferId,
        slot: i64,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let (src, index) = self.view_address(buffer, view, indices)?;
        let value = self.program.add_value(Value::Load { buffer: src, index });
        let dst = self.program.exprs.int(slot);
        out.push(Stmt::Store {
            place: Place {
                buffer: registers,
                index: dst,
            },
            value,
        });
        Ok(())
    }
}

/// Every combination of one value from each list, in order.
fn cartesian(lists: &[Vec<i64>]) -> Vec<Vec<i64>> {
    lists.iter().fold(vec![Vec::new()], |done, list| {
        done.iter()
            .flat_map(|prefix| {
                list.iter().map(move |&value| {
                    let mut next = prefix.clone();
                    next.push(value);
                    next
                })
            })
            .collect()
    })
}

/// `warp * tile + base + half * 8 + within`: a row or column inside a warp's part of a tile.
fn warp_offset(
    e: &mut tilec_ir::ExprArena,
    warp: ExprId,
    tile: i64,
    base: i64,
    half: ExprId,
    within: ExprId,
) -> ExprId {
    let tile = e.int(tile);
    let warp_part = e.mul(warp, tile);
    let base = e.int(base);
    let eight = e.int(8);
    let half = e.mul(half, eight);
    let sum = e.add(warp_part, base);
    let sum = e.add(sum, half);
    e.add(sum, within)
}

/// [`mma_a_element`] over the lane expression: the element's row and column are `g` and
/// `per * t` (`g = lane / 4`, `t = lane % 4`, `per` elements per 32-bit register) plus what
/// lane 0 adds for the same element.
fn a_element_exprs(
    e: &mut tilec_ir::ExprArena,
    bytes: i64,
    lane: ExprId,
    r: i64,
) -> (ExprId, ExprId) {
    let four = e.int(4);
    let g = e.floordiv(lane, four);
    let t = e.floormod(lane, four);
    let (row_add, col_add) = mma_a_element(bytes, 0, r);
    let row_add = e.int(row_add);
    let row = e.add(g, row_add);
    let per = e.int(4 / bytes);
    let t_cols = e.mul(t, per);
    let col_add = e.int(col_add);
    let col = e.add(t_cols, col_add);
    (row, col)
}

/// [`tilec_ir::thread::mma_b_element`] over the lane expression, as [`a_element_exprs`].
fn b_element_exprs(
    e: &mut tilec_ir::ExprArena,
    bytes: i64,
    lane: ExprId,
    r: i64,
) -> (ExprId, ExprId) {
    let four = e.int(4);
    let g = e.floordiv(lane, four);
    let t = e.floormod(lane, four);
    let (k_add, _) = tilec_ir::thread::mma_b_element(bytes, 0, r);
    let per = e.int(4 / bytes);
    let t_rows = e.mul(t, per);
    let k_add = e.int(k_add);
    (e.add(t_rows, k_add), g)
}

/// Bytes of one A and B element of a gemm on `mma.sync`, or why its operands have no form there:
/// fp16 or bf16 (m16n8k16), float32 or tf32 (m16n8k8, as tf32) and fp8 (m16n8k32, sm_89 and
/// newer) with a float32 accumulator, 8-bit integers (m16n8k32) with an int32 one.
pub(super) fn mma_operand_bytes([a, b, c]: [DType; 3], target: Target) -> Result<i64, String> {
    let fp8 = |d: DType| matches!(d, DType::Float8E4M3 | DType::Float8E5M2);
    let byte_int = |d: DType| matches!(d, DType::Int8 | DType::UInt8);
    let tf32 = |d: DType| matches!(d, DType::Float32 | DType::TFloat32);
    match c {
        DType::Float32 if a == b && matches!(a, DType::Float16 | DType::BFloat16) => Ok(2),
        DType::Float32 if tf32(a) && tf32(b) => Ok(4),
        DType::Float32 if fp8(a) && fp8(b) => match target {
            Target::Sm80 => Err(format!(
                "`T.gemm` on {a} and {b} needs fp8 tensor cores (mma.sync m16n8k32 with e4m3 \
                 or e5m2 operands, sm_89 and newer); the target is {}",
                target.name()
            )),
            Target::Sm90 => Ok(1),
        },
        DType::Int32 if byte_int(a) && byte_int(b) => Ok(1),
        _ => Err(format!(
            "`T.gemm` on tensor cores takes float16 or bfloat16 (m16n8k16), float32 or tfloat32 \
             (m16n8k8, as tf32) or float8 (m16n8k32) A and B with a float32 accumulator, or int8 \
             or uint8 A and B with an int32 accumulator (m16n8k32); here A is {a}, B is {b}, C \
             is {c}"
        )),
    }
}

/// The local index at which thread `t` holds `point` of a fragment, trying each replica; `formulas`
/// computes (thread, local indices...) from (point..., replica).
fn replica_holding(
    formulas: &mut ExprProgram,
    point: &[i64],
    replicate: i64,
    t: i64,
) -> Result<Vec<i64>, String> {
    let mut input = point.to_vec();
    input.push(0);
    for rep in 0..replicate {
        if let Some(last) = input.last_mut() {
            *last = rep;
        }
        match formulas.run(&input) {
            Some(out) if out[0] == t => return Ok(out[1..].to_vec()),
            Some(_) => {}
            None => return Err(format!("element {input:?} has no register")),
        }
    }
    Err(format!(
        "thread {t} needs element {point:?}, which it does not hold"
    ))
}
