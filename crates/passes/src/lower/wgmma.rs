//! `T.gemm` on Hopper's `wgmma.mma_async.m64nNk16` (and `k8` for tf32, `k32` for fp8 and 8-bit
//! integers: 32 bytes of K each): each warpgroup multiplies 64-row slabs of A by its columns of
//! B, reading the operands from shared memory through matrix descriptors (or 16-bit A from
//! registers) into the accumulator layout `layout::tensor_core` inferred for wgmma.
//!
//! As for mma.sync, nothing here trusts a formula. A descriptor's swizzle mode and byte offsets
//! are derived from the operand's inferred shared layout and then checked element by element:
//! for every warpgroup, every k step and every element of the instruction's tile, the address the
//! hardware computes from the descriptor ([`MatrixDescriptor::element_offset`], then the swizzle)
//! must be where the layout stores that element. The accumulator's registers are read off its
//! layout by enumeration. When a check fails, the gemm runs on mma.sync instead, over the same
//! accumulator layout, and its label says why.

use tilec_ir::thread::{
    DescriptorLayout, DescriptorSwizzle, Major, MatrixDescriptor, Place, Stmt, WgmmaA,
    mma_a_element, mma_a_registers, mma_k, wgmma_c_element,
};
use tilec_ir::{EntityId, ExprId, ExprProgram, TileOp};

use super::gemm::{GemmPlan, OperandView};
use super::shared_plan::WGMMA_ALIGNMENT;
use super::{Lowering, Unlowerable, table_index, table_int};
use crate::layout::GemmInstruction;

const WARP: i64 = 32;
const WARPGROUP_THREADS: i64 = 128;
/// The widest `n` one wgmma takes.
const MAX_N: i64 = 256;

/// How a wgmma gemm reads its operands and where its accumulator registers are.
pub(super) struct WgmmaOperands {
    a: ASource,
    b: Described,
    /// Columns per instruction: `tile_n` split into equal parts of at most 256.
    chunk_n: i64,
    /// The first accumulator register of each (slab, chunk), slab-major.
    accumulator: Vec<i64>,
}

enum ASource {
    Shared(Described),
    /// The first register of each (slab, k step), slab-major: eight consecutive registers each.
    Registers(Vec<i64>),
}

/// A shared operand whose tiles a descriptor describes: the fixed fields, and per tile the byte
/// offset of its origin in warpgroup 0 with what each further warpgroup adds.
struct Described {
    buffer: EntityId,
    layout: DescriptorLayout,
    /// Warpgroups along M (`warps_m / 4`).
    groups_m: i64,
    /// Per tile (in the order the caller enumerated them), the origin's byte offset in warpgroup 0.
    origins: Vec<i64>,
    /// Bytes added per warpgroup step along M (`(g % groups_m)`) and along N (`g / groups_m`).
    per_group: [i64; 2],
    /// A run-time point index of the operand's window (a stage of a 3-D buffer) and the bytes
    /// one step of it moves every element by: a multiple of the swizzle period.
    point: Option<(ExprId, i64)>,
}

/// A run-time point index of an operand's window: its buffer dimension and that dimension's
/// extent (the values it can take).
type RuntimePoint = (usize, i64);

/// The constant starts of an operand's window, with the run-time point index (if there is one) as
/// its dimension and extent; the window's own rows and columns must start at constants.
fn window_starts(
    exprs: &tilec_ir::ExprArena,
    view: &OperandView,
    shape: &[i64],
) -> Result<(Vec<i64>, Option<RuntimePoint>), &'static str> {
    if shape.len() != view.starts.len() {
        return Err("an operand's shared layout does not have its buffer's dimensions");
    }
    let mut point = None;
    let mut starts = Vec::with_capacity(shape.len());
    for (d, &start) in view.starts.iter().enumerate() {
        match exprs.as_int(start) {
            Some(value) => starts.push(value),
            None if view.dims.contains(&d) => {
                return Err("an operand window's rows or columns start at a run-time index");
            }
            None if point.is_some() => {
                return Err("an operand window has more than one run-time index");
            }
            None => {
                point = Some((d, shape[d]));
                starts.push(0);
            }
        }
    }
    Ok((starts, point))
}

/// Where warpgroup `g` sits: its first warp row and its warp column.
fn warpgroup_position(plan: &GemmPlan, g: i64) -> (i64, i64) {
    let groups_m = plan.warps_m / 4;
    (4 * (g % groups_m), g / groups_m)
}

impl Lowering<'_> {
    /// The shared buffers that wgmma reads through descriptors, for the shared-memory plan.
    pub(super) fn wgmma_operands(&self) -> Vec<EntityId> {
        let mut operands = Vec::new();
        for (entity, instruction) in &self.layouts.gemms {
            let Some(TileOp::Gemm { a, b, .. }) = self.world.ops.get(*entity) else {
                continue;
            };
            if *instruction == GemmInstruction::Wgmma {
                operands.extend(
                    [a.buffer, b.buffer]
                        .into_iter()
                        .filter(|&buffer| !self.is_private(buffer)),
                );
            }
        }
        operands
    }

    /// The operands of a wgmma gemm, or (inner `Err`) why no descriptor describes them.
    pub(super) fn wgmma_operands_of(
        &mut self,
        plan: &GemmPlan,
    ) -> Result<Result<WgmmaOperands, &'static str>, Unlowerable> {
        if self.threads % WARPGROUP_THREADS != 0 || plan.warps_m % 4 != 0 {
            return Ok(Err("the block is not made of whole warpgroups"));
        }
        let chunks = (1..=plan.tile_n / 8).find(|c| {
            plan.tile_n % c == 0 && plan.tile_n / c <= MAX_N && (plan.tile_n / c) % 8 == 0
        });
        let Some(chunks) = chunks else {
            return Ok(Err("the warp's columns do not split into wgmma widths"));
        };
        let chunk_n = plan.tile_n / chunks;
        let accumulator = match self.wgmma_accumulator(plan, chunk_n)? {
            Ok(bases) => bases,
            Err(why) => return Ok(Err(why)),
        };
        let b = match self.describe_b(plan, chunk_n) {
            Ok(described) => described,
            Err(why) => return Ok(Err(why)),
        };
        let a = if self.is_private(plan.a) {
            match self.a_registers(plan)? {
                Ok(bases) => ASource::Registers(bases),
                Err(why) => return Ok(Err(why)),
            }
        } else {
            match self.describe_a(plan) {
                Ok(described) => ASource::Shared(described),
                Err(why) => return Ok(Err(why)),
            }
        };
        Ok(Ok(WgmmaOperands {
            a,
            b,
            chunk_n,
            accumulator,
        }))
    }

    /// Emits the gemm: one fence, the wgmmas of every k step, slab and chunk, then one group that
    /// is waited for before anything reads the accumulator.
    pub(super) fn wgmma_gemm(
        &mut self,
        plan: &GemmPlan,
        operands: &WgmmaOperands,
        clear_accum: bool,
        out: &mut Vec<Stmt>,
    ) -> Result<String, Unlowerable> {
        if clear_accum {
            self.clear_registers(plan.c, out)?;
        }
        let c = self.buffer_of(plan.c)?;
        let a_registers = match operands.a {
            ASource::Registers(_) => Some(self.buffer_of(plan.a)?),
            ASource::Shared(_) => None,
        };
        let slabs = plan.tile_m / 16;
        let steps = plan.k / mma_k(plan.bytes);
        let chunks = plan.tile_n / operands.chunk_n;
        out.push(Stmt::WgmmaFence);
        for kk in 0..steps {
            for mi in 0..slabs {
                let a = match (&operands.a, a_registers) {
                    (ASource::Registers(bases), Some(buffer)) => WgmmaA::Registers(Place {
                        buffer,
                        index: self.program.exprs.int(bases[table_index(mi * steps + kk)?]),
                    }),
                    (ASource::Shared(described), _) => {
                        WgmmaA::Shared(self.descriptor(described, table_index(mi * steps + kk)?)?)
                    }
                    (ASource::Registers(_), None) => {
                        return Err(Unlowerable::new("wgmma: A registers without a buffer"));
                    }
                };
                for chunk in 0..chunks {
                    let b = self.descriptor(&operands.b, table_index(chunk * steps + kk)?)?;
                    let base = operands.accumulator[table_index(mi * chunks + chunk)?];
                    out.push(Stmt::Wgmma {
                        n: u32::try_from(operands.chunk_n).map_err(|_| {
                            Unlowerable::new(format!("wgmma: an N of {}", operands.chunk_n))
                        })?,
                        a: a.clone(),
                        b,
                        c: Place {
                            buffer: c,
                            index: self.program.exprs.int(base),
                        },
                    });
                }
            }
        }
        out.push(Stmt::WgmmaCommit);
        out.push(Stmt::WgmmaWait { pending: 0 });
        let a_from = match &operands.a {
            ASource::Shared(described) => describe_operand(described),
            ASource::Registers(_) => "registers".to_owned(),
        };
        Ok(format!(
            "T.gemm {}x{}x{} on wgmma m64n{}k{}, warpgroups {}x{}, A from {a_from}, B from {}",
            plan.m,
            plan.n,
            plan.k,
            operands.chunk_n,
            mma_k(plan.bytes),
            plan.warps_m / 4,
            plan.n / plan.tile_n,
            describe_operand(&operands.b)
        ))
    }

    /// The descriptor of tile `tile` of an operand, its start an expression over the warpgroup
    /// and the pipeline stage.
    fn descriptor(
        &mut self,
        described: &Described,
        tile: usize,
    ) -> Result<MatrixDescriptor, Unlowerable> {
        let buffer = self.buffer_of(described.buffer)?;
        let groups_m = described.groups_m.max(1);
        let stage = self.current_stage.get(&described.buffer).copied();
        let stage_bytes = self.stage_bytes(described.buffer);
        let e = &mut self.program.exprs;
        let t = e.var_expr(self.program.thread);
        let group_size = e.int(WARPGROUP_THREADS);
        let g = e.floordiv(t, group_size);
        let groups_m_expr = e.int(groups_m);
        let along_m = e.floormod(g, groups_m_expr);
        let along_n = e.floordiv(g, groups_m_expr);
        let [per_m, per_n] = described.per_group.map(|bytes| e.int(bytes));
        let m_part = e.mul(along_m, per_m);
        let n_part = e.mul(along_n, per_n);
        let origin = e.int(described.origins[tile]);
        let mut start = e.add(origin, m_part);
        start = e.add(start, n_part);
        if let Some((index, bytes)) = described.point {
            let bytes = e.int(bytes);
            let offset = e.mul(index, bytes);
            start = e.add(start, offset);
        }
        if let Some(stage) = stage {
            let size = e.int(stage_bytes);
            let offset = e.mul(stage, size);
            start = e.add(start, offset);
        }
        Ok(MatrixDescriptor {
            buffer,
            start,
            layout: described.layout,
        })
    }

    /// Bytes of one pipeline stage of a shared buffer.
    fn stage_bytes(&self, buffer: EntityId) -> i64 {
        let element = i64::try_from(self.element_dtype(buffer).bytes()).unwrap_or(i64::MAX);
        self.layouts
            .shared
            .get(&buffer)
            .map_or(0, |assigned| assigned.storage_elements * element)
    }

    /// A's tiles (slab-major, then k step): 64 rows of the warpgroup's slab by one step of K.
    fn describe_a(&mut self, plan: &GemmPlan) -> Result<Described, &'static str> {
        let (slabs, steps) = (plan.tile_m / 16, plan.k / mma_k(plan.bytes));
        let major = if plan.transpose_a {
            Major::MN
        } else {
            Major::K
        };
        let stored = |g: i64, tile: usize, mn: i64, k: i64| {
            let (mi, kk) = (table_int(tile) / steps, table_int(tile) % steps);
            let (wm0, _) = warpgroup_position(plan, g);
            let row = mi * plan.micro_rows + wm0 * 16 + mn;
            let col = kk * mma_k(plan.bytes) + k;
            if plan.transpose_a {
                [col, row]
            } else {
                [row, col]
            }
        };
        let tiles = usize::try_from(slabs * steps).map_err(|_| "a negative number of A tiles")?;
        self.describe(plan, (plan.a, &plan.a_view), major, (64, tiles), &stored)
    }

    /// B's tiles (chunk-major, then k step): one step of K by the chunk's columns.
    fn describe_b(&mut self, plan: &GemmPlan, chunk_n: i64) -> Result<Described, &'static str> {
        let steps = plan.k / mma_k(plan.bytes);
        let major = if plan.transpose_b {
            Major::K
        } else {
            Major::MN
        };
        let stored = |g: i64, tile: usize, mn: i64, k: i64| {
            let (chunk, kk) = (table_int(tile) / steps, table_int(tile) % steps);
            let (_, wn) = warpgroup_position(plan, g);
            let col = wn * plan.tile_n + chunk * chunk_n + mn;
            let row = kk * mma_k(plan.bytes) + k;
            if plan.transpose_b {
                [col, row]
            } else {
                [row, col]
            }
        };
        let tiles = usize::try_from((plan.tile_n / chunk_n) * steps)
            .map_err(|_| "a negative number of B tiles")?;
        self.describe(
            plan,
            (plan.b, &plan.b_view),
            major,
            (chunk_n, tiles),
            &stored,
        )
    }

    /// Finds the descriptor fields that describe every tile of an operand in every warpgroup, by
    /// trying the three swizzles and checking every element.
    fn describe(
        &mut self,
        plan: &GemmPlan,
        (buffer, view): (EntityId, &OperandView),
        major: Major,
        (extent_mn, tiles): (i64, usize),
        stored: &dyn Fn(i64, usize, i64, i64) -> [i64; 2],
    ) -> Result<Described, &'static str> {
        let element = i64::try_from(self.element_dtype(buffer).bytes()).unwrap_or(i64::MAX);
        // Each instruction reads 32 bytes of K. Only 16-bit operands may be M/N-major (the
        // instruction's transpose immediates exist for them alone).
        let depth = mma_k(element);
        if element != 2 && major != Major::K {
            return Err("wgmma reads tf32, fp8 and 8-bit integer operands K-major only");
        }
        if self.current_stage.contains_key(&buffer)
            && self.stage_bytes(buffer) % WGMMA_ALIGNMENT != 0
        {
            return Err("a pipeline stage of an operand is not a multiple of 1024 bytes");
        }
        let Some(assigned) = self.layouts.shared.get(&buffer) else {
            return Err("an operand has no shared layout");
        };
        let map = &assigned.map;
        let Some(&offset) = map.outputs.first() else {
            return Err("an operand has no shared layout");
        };
        let (starts, point) = window_starts(&self.program.exprs, view, &map.shape)?;
        let mut formula = ExprProgram::compile(&self.program.exprs, &map.vars, &[offset]);
        // Every element of every tile is checked against each candidate swizzle: the offsets of a
        // whole 2-D buffer are tabulated once, in batches, rather than evaluated point by point.
        let table = match map.shape[..] {
            [_, columns] if view.whole => {
                crate::layout::fragment::values_over(&mut formula, &map.shape)
                    .map(|offsets| (offsets, columns))
            }
            _ => None,
        };
        let [row_dim, col_dim] = view.dims;
        // Bytes of window element `[row, column]` with the run-time point index (if any) at `at`.
        let mut bytes_in = |at: i64, [row, column]: [i64; 2]| {
            let tabulated = table.as_ref().and_then(|(offsets, columns)| {
                let inside = (0..*columns).contains(&column) && row >= 0;
                let flat = usize::try_from(row * columns + column).ok()?;
                inside.then(|| offsets.get(flat).copied()).flatten()
            });
            // A window is probed inside itself only: beyond it lie other elements of the buffer.
            let inside = view.whole
                || (0..view.shape[0]).contains(&row) && (0..view.shape[1]).contains(&column);
            let mut index = starts.clone();
            index[row_dim] += row;
            index[col_dim] += column;
            if let Some((dim, _)) = point {
                index[dim] = at;
            }
            tabulated
                .or_else(|| inside.then(|| formula.run_one(&index)).flatten())
                .map(|o| o * element)
        };
        let groups = usize::try_from(self.threads / WARPGROUP_THREADS)
            .map_err(|_| "a negative number of warpgroups")?;
        let mut origins = vec![vec![0; groups]; tiles];
        for (tile, row) in origins.iter_mut().enumerate() {
            for (g, slot) in row.iter_mut().enumerate() {
                *slot = bytes_in(0, stored(table_int(g), tile, 0, 0))
                    .ok_or("an operand element has no storage")?;
            }
        }
        let groups_m = plan.warps_m / 4;
        let per_group = fit_groups(&origins, groups_m)
            .ok_or("operand origins are not affine in the warpgroup")?;
        let mut found = None;
        for swizzle in [
            DescriptorSwizzle::Bytes128,
            DescriptorSwizzle::Bytes64,
            DescriptorSwizzle::Bytes32,
        ] {
            let mut bytes_at = |at: [i64; 2]| bytes_in(0, at);
            let Some((leading_bytes, stride_bytes)) = probe_offsets(
                &mut bytes_at,
                stored,
                major,
                swizzle,
                extent_mn,
                origins[0][0],
            ) else {
                continue;
            };
            let layout = DescriptorLayout {
                leading_bytes,
                stride_bytes,
                swizzle,
                major,
            };
            let matches = (0..tiles).all(|tile| {
                (0..groups).all(|g| {
                    let origin = origins[tile][g];
                    (0..extent_mn).all(|mn| {
                        (0..depth).all(|k| {
                            let address =
                                swizzle.apply(origin + layout.element_offset(mn, k, element));
                            bytes_at(stored(table_int(g), tile, mn, k)) == Some(address)
                        })
                    })
                })
            });
            if matches {
                found = Some(layout);
                break;
            }
        }
        let layout = found.ok_or("no wgmma descriptor describes an operand's shared layout")?;
        // Every other value of a run-time point index must move every element by the same
        // multiple of the swizzle period, so that one descriptor plus a run-time offset is right.
        let point = match point {
            None => None,
            Some((dim, extent)) => {
                let one = (extent > 1)
                    .then(|| bytes_in(1, stored(0, 0, 0, 0)))
                    .flatten();
                let stride = one.map_or(0, |one| one - origins[0][0]);
                if stride % WGMMA_ALIGNMENT != 0 {
                    return Err("a run-time stage of an operand is not a multiple of 1024 bytes");
                }
                let shifted = (1..extent).all(|at| {
                    (0..tiles).all(|tile| {
                        (0..groups).all(|g| {
                            (0..extent_mn).all(|mn| {
                                (0..depth).all(|k| {
                                    let here = stored(table_int(g), tile, mn, k);
                                    bytes_in(at, here) == bytes_in(0, here).map(|b| b + at * stride)
                                })
                            })
                        })
                    })
                });
                if !shifted {
                    return Err("the stages of an operand are not laid out alike");
                }
                Some((view.starts[dim], stride))
            }
        };
        Ok(Described {
            buffer,
            layout,
            groups_m,
            origins: origins.iter().map(|row| row[0]).collect(),
            per_group,
            point,
        })
    }

    /// The first accumulator register of every (slab, chunk), checked to hold the chunk's
    /// `chunk_n / 2` registers consecutively in wgmma's order in every thread.
    fn wgmma_accumulator(
        &self,
        plan: &GemmPlan,
        chunk_n: i64,
    ) -> Result<Result<Vec<i64>, &'static str>, Unlowerable> {
        let per_slab = plan.tile_n / 2;
        let slots = table_index((plan.tile_m / 16) * per_slab)?;
        let element = |t: i64, slot: usize| {
            let (mi, r) = (table_int(slot) / per_slab, table_int(slot) % per_slab);
            let (chunk, rr) = (r / (chunk_n / 2), r % (chunk_n / 2));
            let (wm0, wn) = warpgroup_position(plan, t / WARPGROUP_THREADS);
            let (row, col) = wgmma_c_element(t % WARPGROUP_THREADS, rr);
            vec![
                mi * plan.micro_rows + wm0 * 16 + row,
                wn * plan.tile_n + chunk * chunk_n + col,
            ]
        };
        let Ok(table) = self.register_table(plan.c, slots, element) else {
            return Ok(Err("the accumulator is not laid out as wgmma's"));
        };
        Ok(consecutive_runs(&table, table_index(chunk_n / 2)?)
            .ok_or("the accumulator does not keep a wgmma's registers together"))
    }

    /// The first register of A for every (slab, k step), checked to hold the instruction's A
    /// registers (four 32-bit words' worth) consecutively in every thread.
    fn a_registers(&self, plan: &GemmPlan) -> Result<Result<Vec<i64>, &'static str>, Unlowerable> {
        if plan.transpose_a {
            return Ok(Err("A in registers is read transposed"));
        }
        // Four 32-bit registers per thread and instruction, whatever the width: eight 16-bit
        // elements, four tf32 ones or sixteen 8-bit ones.
        let (depth, count) = (mma_k(plan.bytes), mma_a_registers(plan.bytes));
        let steps = plan.k / depth;
        let slots = table_index((plan.tile_m / 16) * steps * count)?;
        let element = |t: i64, slot: usize| {
            let (tile, r) = (table_int(slot) / count, table_int(slot) % count);
            let (mi, kk) = (tile / steps, tile % steps);
            let wm = (t / WARP) % plan.warps_m;
            let (row, col) = mma_a_element(plan.bytes, t % WARP, r);
            vec![mi * plan.micro_rows + wm * 16 + row, kk * depth + col]
        };
        let Ok(table) = self.register_table(plan.a, slots, element) else {
            return Ok(Err("A's fragment is not laid out as wgmma's A operand"));
        };
        // The registers are passed as 32-bit words, so each run starts at a word.
        Ok(consecutive_runs(&table, table_index(count)?)
            .filter(|bases| bases.iter().all(|base| (base * plan.bytes) % 4 == 0))
            .ok_or("A's fragment does not keep a wgmma's four words of registers together"))
    }
}

/// The first entry of each run of `run` entries, when every run counts up by one.
fn consecutive_runs(table: &[i64], run: usize) -> Option<Vec<i64>> {
    if run == 0 || !table.len().is_multiple_of(run) {
        return None;
    }
    table
        .chunks(run)
        .map(|chunk| {
            chunk
                .windows(2)
                .all(|pair| pair[1] == pair[0] + 1)
                .then_some(chunk[0])
        })
        .collect()
}

/// What warpgroup steps along M and N add to every tile's origin, when that is the same for all
/// tiles and groups.
fn fit_groups(origins: &[Vec<i64>], groups_m: i64) -> Option<[i64; 2]> {
    let first = origins.first()?;
    let groups = table_int(first.len());
    let at = |row: &[i64], g: i64| usize::try_from(g).ok().and_then(|g| row.get(g)).copied();
    let per_m = if groups_m > 1 {
        at(first, 1)? - first[0]
    } else {
        0
    };
    let per_n = if groups > groups_m {
        at(first, groups_m)? - first[0]
    } else {
        0
    };
    let fits = origins.iter().all(|row| {
        (0..groups)
            .all(|g| at(row, g) == Some(row[0] + (g % groups_m) * per_m + (g / groups_m) * per_n))
    });
    fits.then_some([per_m, per_n])
}

/// The leading and stride byte offsets a descriptor with `swizzle` would need, read off the
/// layout at the first tile: the distance to the element eight rows on (the stride) and, for
/// M/N-major operands wider than one swizzled row, to the next row's worth along M/N.
fn probe_offsets(
    bytes_at: &mut dyn FnMut([i64; 2]) -> Option<i64>,
    stored: &dyn Fn(i64, usize, i64, i64) -> [i64; 2],
    major: Major,
    swizzle: DescriptorSwizzle,
    extent_mn: i64,
    origin: i64,
) -> Option<(i64, i64)> {
    let unused = 16;
    let (leading, stride) = match major {
        Major::K => {
            let stride = if extent_mn > 8 {
                bytes_at(stored(0, 0, 8, 0))? - origin
            } else {
                unused
            };
            (unused, stride)
        }
        Major::MN => {
            let per_row = swizzle.row_bytes() / 2;
            let stride = bytes_at(stored(0, 0, 0, 8))? - origin;
            let leading = if extent_mn > per_row {
                bytes_at(stored(0, 0, per_row, 0))? - origin
            } else {
                unused
            };
            (leading, stride)
        }
    };
    let encodable = |bytes: i64| bytes > 0 && bytes % 16 == 0 && bytes < (1 << 18);
    (encodable(leading) && encodable(stride)).then_some((leading, stride))
}

/// "shared (128-byte swizzle, K-major)" for a label.
fn describe_operand(described: &Described) -> String {
    let major = match described.layout.major {
        Major::K => "K-major",
        Major::MN => "MN-major",
    };
    format!(
        "shared ({}-byte swizzle, {major})",
        described.layout.swizzle.row_bytes()
    )
}
