//! `T.copy` of a region whose extents are known only when the kernel runs, bounded by the shared
//! tile on the other side: `T.copy(K[start : start + n, :], K_shared[:n, :])` where `n` is a
//! run-time length no larger than `K_shared`'s rows (the last, partial block of a sequence).
//!
//! The copy is lowered over the tile's whole static box, as a copy of constant extents is, and
//! each element is guarded by the run-time extent of its dimension: the elements past `n` are
//! neither read nor written, as TileLang's copy of a region with symbolic extents leaves them.
//! The guard is per element, so such a copy is never vectorized or moved by TMA.

use tilec_ir::data::CompareOp;
use tilec_ir::thread::{Stmt, ValueId};
use tilec_ir::{ExprId, Region, Scope};

use super::{Lowering, Unlowerable};

/// Which side of the copy a guard reads its index from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Src,
    Dst,
}

/// The copy boxed to constant extents, and the guards that keep it within the run-time ones:
/// `(side, dimension, run-time extent)`.
struct Boxed {
    src: Region,
    dst: Region,
    guards: Vec<(Side, usize, ExprId)>,
}

impl Lowering<'_> {
    /// Lowers `T.copy(src, dst)` with run-time extents bounded by a shared tile; `Ok(false)`
    /// when the copy is not of that form (a run-time extent that neither the other side's
    /// constant extent nor a shared tile's shape bounds).
    pub(super) fn bounded_copy(
        &mut self,
        src: &Region,
        dst: &Region,
        out: &mut Vec<Stmt>,
    ) -> Result<bool, Unlowerable> {
        let Some(boxed) = self.boxed_copy(src, dst) else {
            return Ok(false);
        };
        let mut scratch = self.scratch_world();
        let copy = crate::layout::infer::copy_loop(&mut scratch, &boxed.src, &boxed.dst);
        self.program.exprs = scratch.exprs;
        let Some(copy) = copy else {
            return Ok(false);
        };
        let limits: Vec<(ExprId, ExprId)> = boxed
            .guards
            .iter()
            .filter_map(|&(side, dim, extent)| {
                let (region, indices) = match side {
                    Side::Src => (src, &copy.src_indices),
                    Side::Dst => (dst, &copy.dst_indices),
                };
                let start = region.dims.get(dim)?.start;
                Some((*indices.get(dim)?, start, extent))
            })
            .map(|(index, start, extent)| (index, self.program.exprs.add(start, extent)))
            .collect();
        let extents: Vec<ExprId> = copy
            .shape
            .iter()
            .map(|&e| self.program.exprs.int(e))
            .collect();
        let layout = self.planned_layout(&copy.vars, &extents, 1)?;
        let (src_buffer, dst_buffer) = (src.buffer, dst.buffer);
        let stmts = self.run_laid_out(&layout, |lowering, stmts| {
            let mut element = Vec::new();
            lowering.copy_element(
                src_buffer,
                &copy.src_indices,
                dst_buffer,
                &copy.dst_indices,
                &mut element,
            )?;
            let mut guard: Option<ValueId> = None;
            for &(index, end) in &limits {
                let inside = lowering.compare_indices(CompareOp::Lt, index, end);
                guard = Some(lowering.and(guard, inside));
            }
            match guard {
                Some(cond) => stmts.push(Stmt::If {
                    cond,
                    then: element,
                    otherwise: Vec::new(),
                }),
                None => stmts.extend(element),
            }
            Ok(())
        })?;
        out.extend(stmts);
        Ok(true)
    }

    /// The copy with each run-time extent replaced by its bound: the other side's extent where
    /// that is constant (`T.copy(K[s : s + n, :], K_shared)`), else the shared tile's extent in
    /// that dimension past the slice's constant start (`K_shared[:n, :]`). The dimensions of
    /// the two sides are paired as the copy pairs them, without their unit extents. `None`
    /// when no extent is run-time or one has no bound.
    fn boxed_copy(&mut self, src: &Region, dst: &Region) -> Option<Boxed> {
        let spanned = |lowering: &Self, region: &Region| -> Vec<usize> {
            let exprs = &lowering.program.exprs;
            (0..region.dims.len())
                .filter(|&d| {
                    region.dims[d]
                        .extent
                        .is_some_and(|e| exprs.as_int(e) != Some(1))
                })
                .collect()
        };
        let (src_dims, dst_dims) = (spanned(self, src), spanned(self, dst));
        if src_dims.len() != dst_dims.len() {
            return None;
        }
        let mut boxed = Boxed {
            src: src.clone(),
            dst: dst.clone(),
            guards: Vec::new(),
        };
        for (&ds, &dd) in src_dims.iter().zip(&dst_dims) {
            let es = src.dims[ds].extent?;
            let ed = dst.dims[dd].extent?;
            let (cs, cd) = (self.program.exprs.as_int(es), self.program.exprs.as_int(ed));
            if cs.is_some() && cd.is_some() {
                continue;
            }
            let bound = cs
                .or(cd)
                .or_else(|| self.shared_bound(dst, dd))
                .or_else(|| self.shared_bound(src, ds))?;
            let bound = self.program.exprs.int(bound);
            boxed.src.dims[ds].extent = Some(bound);
            boxed.dst.dims[dd].extent = Some(bound);
            boxed.guards.push(match cd {
                None => (Side::Dst, dd, ed),
                Some(_) => (Side::Src, ds, es),
            });
        }
        (!boxed.guards.is_empty()).then_some(boxed)
    }

    /// The extent of shared tile `region.buffer` in dimension `dim` past the slice's constant
    /// start: the most a slice there can hold.
    fn shared_bound(&self, region: &Region, dim: usize) -> Option<i64> {
        if !self.scope_of(region.buffer).is_some_and(Scope::is_shared) {
            return None;
        }
        let size = *self.world.const_shape(region.buffer)?.get(dim)?;
        let start = self.program.exprs.as_int(region.dims.get(dim)?.start)?;
        Some(size - start).filter(|&bound| bound > 0)
    }
}
