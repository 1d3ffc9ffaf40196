//! Copies on Hopper's Tensor Memory Accelerator: one thread issues `cp.async.bulk.tensor` for
//! whole boxes of a tensor map. Pipelined global → shared copies complete on an mbarrier; with
//! `tilec.tma_store`, a shared → global copy is stored the same way, the issuing thread waiting
//! until the boxes have been read.
//!
//! As for wgmma descriptors, nothing here trusts a formula. A TMA box lands as a dense array,
//! innermost dimension fastest, with the map's swizzle applied to the absolute shared address.
//! For each swizzle (128, 64 and 32 bytes, then none) the copy is cut into boxes along its
//! innermost dimension as wide as that swizzle allows, and the candidate is accepted only if, for
//! every element of the copy, the address TMA writes is where the destination's inferred layout
//! stores that element. Copies with no such form stay on `cp.async`, and the loop's label says
//! why.

use tilec_ir::thread::{BufferId, DescriptorSwizzle, Memory, Place, Stmt, TensorMap};
use tilec_ir::{EntityId, ExprId, ExprProgram, Region, Scope, TileOp, VarId};

use super::{Lowering, table_int};

/// The most dimensions a tensor map has.
const MAX_RANK: usize = 5;
/// The most elements along one dimension of a box.
const MAX_BOX: i64 = 256;
/// The alignment TMA needs of a box's shared destination, in bytes.
const BOX_ALIGNMENT: i64 = 128;

/// Which way a TMA copy moves its boxes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TmaDirection {
    /// Global → shared (`cp.async.bulk.tensor...shared::cluster.global`).
    Load,
    /// Shared → global (`cp.async.bulk.tensor...global.shared::cta`).
    Store,
}

/// One copy as TMA boxes.
#[derive(Clone, Debug)]
pub(super) struct TmaCopy {
    /// The `T.copy` it lowers.
    pub producer: EntityId,
    /// The shared side: a load's destination, a store's source.
    pub shared: EntityId,
    pub boxes: Vec<TmaBox>,
    /// Bytes one iteration's copy brings (what its mbarrier expects).
    pub bytes: i64,
}

/// One `cp.async.bulk.tensor` of a copy.
#[derive(Clone, Debug)]
pub(super) struct TmaBox {
    /// The index into the program's tensor maps.
    pub map: usize,
    /// Elements from the start of the shared side's stage to where the box lands (a load) or
    /// starts (a store).
    pub shared_offset: i64,
    /// The global coordinates of the box's first element, innermost first (over the loop
    /// variable of the pipeline).
    pub coords: Vec<ExprId>,
}

/// How the copy's loop variables and global dimensions correspond.
struct CopyGeometry {
    /// Per global dimension, innermost first: the box extent and the copy variable that walks it
    /// (`None` for a dimension of extent 1).
    dims: Vec<(i64, Option<usize>)>,
    /// Per global dimension, innermost first: the coordinate of the copy's first element.
    starts: Vec<ExprId>,
    /// The copy loop's shape (one extent per copy variable).
    shape: Vec<i64>,
    /// Per element of the copy (row-major over `shape`): its destination element offset within
    /// one stage.
    stored: Vec<i64>,
    global: BufferId,
    element_bytes: i64,
}

/// The box width and swizzle one candidate uses.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    width: i64,
    swizzle: Option<DescriptorSwizzle>,
}

impl Candidate {
    /// The alignment the candidate's boxes need of a stage: its swizzle's period, or what any box
    /// needs.
    fn period_bytes(self) -> i64 {
        self.swizzle
            .map_or(BOX_ALIGNMENT, DescriptorSwizzle::period_bytes)
    }
}

impl Lowering<'_> {
    /// The TMA form of every producer of a pipeline, or why one of them has none.
    pub(super) fn plan_tma(&mut self, producers: &[EntityId]) -> Result<Vec<TmaCopy>, String> {
        producers
            .iter()
            .map(|&producer| self.plan_tma_copy(producer))
            .collect()
    }

    fn plan_tma_copy(&mut self, producer: EntityId) -> Result<TmaCopy, String> {
        self.plan_tma_boxes(producer, TmaDirection::Load)
    }

    /// A shared → global `T.copy` as TMA stores (`tilec.tma_store`): thread 0 issues every box,
    /// then waits until they have read the tile, so that a later write of it (ordered after this
    /// copy by a barrier, as any write after a read is) cannot overtake them. Returns the block's
    /// label, or `None` where the option is off or no box form covers the shared side's layout:
    /// the copy is then lowered thread by thread.
    pub(super) fn tma_store(
        &mut self,
        entity: EntityId,
        (src, dst): (&Region, &Region),
        out: &mut Vec<Stmt>,
    ) -> Option<String> {
        let shared_to_global = self.scope_of(src.buffer) == Some(Scope::Shared)
            && self.world.params.contains(&dst.buffer);
        if !self.options.tma_store || !shared_to_global || !self.only_written(dst.buffer) {
            return None;
        }
        let plan = self.plan_tma_boxes(entity, TmaDirection::Store).ok()?;
        let shared = self.buffer_of(plan.shared).ok()?;
        let mut issue: Vec<Stmt> = plan
            .boxes
            .iter()
            .map(|tma_box| Stmt::TmaStore {
                map: tma_box.map,
                src: Place {
                    buffer: shared,
                    index: self.program.exprs.int(tma_box.shared_offset),
                },
                coords: tma_box.coords.clone(),
            })
            .collect();
        issue.push(Stmt::TmaStoreWait);
        let first = self.thread_is(0);
        out.push(Stmt::If {
            cond: first,
            then: issue,
            otherwise: Vec::new(),
        });
        Some(format!(
            "T.copy({} -> {}): {} TMA box(es) stored by thread 0",
            self.world.name(src.buffer),
            self.world.name(dst.buffer),
            plan.boxes.len()
        ))
    }

    /// Whether the kernel only writes the tensor parameter `tensor`: a TMA store's global writes
    /// are not ordered before the kernel's own later reads of them (`wait_group.read` waits for
    /// the shared reads only), so only such a tensor is stored by TMA.
    fn only_written(&self, tensor: EntityId) -> bool {
        self.buffer_of(tensor).is_ok_and(|buffer| {
            self.program.param_access(buffer) == Some(tilec_ir::thread::ParamAccess::Write)
        })
    }

    /// The boxes of `copy` in `direction`: the first candidate whose boxes cover the shared side
    /// exactly as its inferred layout stores it.
    fn plan_tma_boxes(
        &mut self,
        copy: EntityId,
        direction: TmaDirection,
    ) -> Result<TmaCopy, String> {
        let (geometry, shared) = self.copy_geometry(copy, direction)?;
        let dtype = self.element_dtype(shared);
        if dtype.is_sub_byte() {
            // The copy is lowered thread by thread, element by element.
            return Err(format!(
                "TMA boxes of {dtype} elements (two a byte) are not planned"
            ));
        }
        let alignment = self.tma_shared_alignment(shared)?;
        let candidate = candidates(&geometry)
            .into_iter()
            .filter(|candidate| candidate.period_bytes() <= alignment)
            .find(|&candidate| matches_layout(&geometry, candidate))
            .ok_or_else(|| {
                format!(
                    "no TMA box covers `{}` as its inferred layout stores it",
                    self.world.name(shared)
                )
            })?;
        Ok(self.tma_boxes((copy, shared), &geometry, candidate))
    }

    /// The copy's loop, read as boxes of the global tensor, and its shared side.
    fn copy_geometry(
        &mut self,
        copy_op: EntityId,
        direction: TmaDirection,
    ) -> Result<(CopyGeometry, EntityId), String> {
        let Some(TileOp::Copy { src, dst }) = self.world.ops.get(copy_op).cloned() else {
            return Err("a producer is not a copy".to_owned());
        };
        if self.world.is_alias(src.buffer) || self.world.is_alias(dst.buffer) {
            return Err("a copy reads or writes a view".to_owned());
        }
        let element = self.element_dtype(dst.buffer);
        if self.element_dtype(src.buffer) != element {
            return Err("a copy converts its elements".to_owned());
        }
        let mut scratch = self.scratch_world();
        let copy = crate::layout::infer::copy_loop(&mut scratch, &src, &dst);
        self.program.exprs = scratch.exprs;
        let copy = copy.ok_or("a copy's extents are not known at compile time")?;
        let (global, global_indices, shared, shared_indices) = match direction {
            TmaDirection::Load => (src.buffer, &copy.src_indices, dst.buffer, &copy.dst_indices),
            TmaDirection::Store => (dst.buffer, &copy.dst_indices, src.buffer, &copy.src_indices),
        };
        if global_indices.len() > MAX_RANK {
            return Err("a tensor has more than five dimensions".to_owned());
        }
        let global = self.buffer_of(global).map_err(|e| e.message)?;
        if !matches!(self.program.buffer(global).memory, Memory::Global { .. }) {
            return Err("the copy's global side is not a tensor parameter".to_owned());
        }
        // A tensor map describes a row-major tensor (see `TensorMap`); the byte strides of a
        // `T.StridedTensor` are run-time values TMA needs aligned to 16 bytes, which tilec
        // cannot prove.
        if self.program.buffer(global).strides.is_some() {
            return Err("the tensor is a `T.StridedTensor`".to_owned());
        }
        let (dims, starts) = self.box_dims(global_indices, &copy.vars, &copy.shape)?;
        let stored = self.stored_offsets(shared, shared_indices, &copy.vars, &copy.shape)?;
        let geometry = CopyGeometry {
            dims,
            starts,
            shape: copy.shape,
            stored,
            global,
            element_bytes: i64::try_from(element.bytes()).unwrap_or(i64::MAX),
        };
        Ok((geometry, shared))
    }

    /// Per global dimension (innermost first), the box extent, the copy variable walking it and
    /// the start coordinate. Every copy variable must walk exactly one dimension with step 1.
    #[allow(clippy::type_complexity)]
    fn box_dims(
        &mut self,
        src_indices: &[ExprId],
        vars: &[VarId],
        shape: &[i64],
    ) -> Result<(Vec<(i64, Option<usize>)>, Vec<ExprId>), String> {
        let exprs = &mut self.program.exprs;
        let (zero, one) = (exprs.int(0), exprs.int(1));
        let (mut dims, mut starts) = (Vec::new(), Vec::new());
        let mut walked = vec![false; vars.len()];
        for &index in src_indices.iter().rev() {
            let used = exprs.vars_of(index);
            let walking: Vec<usize> = (0..vars.len())
                .filter(|&j| used.contains(&vars[j]))
                .collect();
            let start = exprs.substitute(index, &|v| vars.contains(&v).then_some(zero));
            match walking.as_slice() {
                [] => dims.push((1, None)),
                &[j] => {
                    let next = exprs.substitute(index, &|v| {
                        if v == vars[j] {
                            Some(one)
                        } else {
                            vars.contains(&v).then_some(zero)
                        }
                    });
                    let step = exprs.sub(next, start);
                    if exprs.as_int(step) != Some(1) || walked[j] {
                        return Err("a copy does not walk its source densely".to_owned());
                    }
                    walked[j] = true;
                    dims.push((shape[j], Some(j)));
                }
                _ => return Err("a source index mixes copy dimensions".to_owned()),
            }
            starts.push(start);
        }
        if walked.iter().any(|&w| !w) {
            return Err("a copy dimension does not walk the source".to_owned());
        }
        Ok((dims, starts))
    }

    /// The destination element offset (within one stage) of every element of the copy,
    /// row-major over the copy's shape, read off the inferred shared layout.
    fn stored_offsets(
        &mut self,
        dst: EntityId,
        dst_indices: &[ExprId],
        vars: &[VarId],
        shape: &[i64],
    ) -> Result<Vec<i64>, String> {
        let offset = self
            .shared_layout_offset(dst, dst_indices)
            .ok_or("the destination has no shared layout")?;
        let mut formula = ExprProgram::compile(&self.program.exprs, vars, &[offset]);
        crate::layout::fragment::values_over(&mut formula, shape)
            .ok_or_else(|| "the destination layout does not place an element".to_owned())
    }

    /// TMA moves whole boxes at aligned shared addresses, and a swizzle is a function of the
    /// absolute address: a candidate fits only if the shared side and each of its stages start
    /// on a multiple of its swizzle's period (1024 bytes for the 128-byte swizzle, down to the
    /// 128 bytes every box needs). The largest such alignment, at most the widest period.
    fn tma_shared_alignment(&self, dst: EntityId) -> Result<i64, String> {
        let buffer = self.buffer_of(dst).map_err(|e| e.message)?;
        let Memory::Shared { offset } = self.program.buffer(buffer).memory else {
            return Err("the copy's other side is not in shared memory".to_owned());
        };
        let element = i64::try_from(self.element_dtype(dst).bytes()).unwrap_or(i64::MAX);
        let stage_bytes = self
            .layouts
            .shared
            .get(&dst)
            .map_or(0, |assigned| assigned.storage_elements * element);
        let widest = DescriptorSwizzle::Bytes128.period_bytes();
        let alignment = [offset, stage_bytes]
            .into_iter()
            .fold(widest, |alignment, bytes| {
                alignment.min(power_of_two_dividing(bytes))
            });
        if alignment < BOX_ALIGNMENT {
            return Err(format!(
                "a stage of `{}` does not start on a {BOX_ALIGNMENT}-byte boundary",
                self.world.name(dst)
            ));
        }
        Ok(alignment)
    }

    /// The copy as boxes of a (possibly shared) tensor map.
    fn tma_boxes(
        &mut self,
        (producer, dst): (EntityId, EntityId),
        geometry: &CopyGeometry,
        candidate: Candidate,
    ) -> TmaCopy {
        let mut box_dims: Vec<u32> = geometry
            .dims
            .iter()
            .map(|&(extent, _)| u32::try_from(extent).unwrap_or(1))
            .collect();
        box_dims[0] = u32::try_from(candidate.width).unwrap_or(1);
        let map = self.tensor_map(geometry.global, box_dims, candidate.swizzle);
        let chunks = geometry.dims[0].0 / candidate.width;
        let boxes = (0..chunks)
            .map(|q| {
                let first = box_origin_element(geometry, q * candidate.width);
                let exprs = &mut self.program.exprs;
                let shift = exprs.int(q * candidate.width);
                let mut coords = geometry.starts.clone();
                coords[0] = exprs.add(coords[0], shift);
                TmaBox {
                    map,
                    shared_offset: geometry.stored[first],
                    coords,
                }
            })
            .collect();
        let elements: i64 = geometry.shape.iter().product();
        TmaCopy {
            producer,
            shared: dst,
            boxes,
            bytes: elements * geometry.element_bytes,
        }
    }

    /// The index of the tensor map over `global` with this box and swizzle, added if new.
    fn tensor_map(
        &mut self,
        global: BufferId,
        box_dims: Vec<u32>,
        swizzle: Option<DescriptorSwizzle>,
    ) -> usize {
        let maps = &self.program.tensor_maps;
        if let Some(found) = maps
            .iter()
            .position(|m| m.buffer == global && m.box_dims == box_dims && m.swizzle == swizzle)
        {
            return found;
        }
        let base = format!("{}_tma", self.program.buffer(global).name);
        let taken = |name: &str| maps.iter().any(|m| m.name == name);
        let name = if taken(&base) {
            (1..)
                .map(|n| format!("{base}_{n}"))
                .find(|name| !taken(name))
                .unwrap_or(base)
        } else {
            base
        };
        self.program.tensor_maps.push(TensorMap {
            name,
            buffer: global,
            box_dims,
            swizzle,
        });
        self.program.tensor_maps.len() - 1
    }
}

/// The candidates to try, widest swizzle first: the innermost dimension cut into boxes as wide as
/// the swizzle's row (every box dimension at most 256 elements, rows a multiple of 16 bytes).
fn candidates(geometry: &CopyGeometry) -> Vec<Candidate> {
    let inner = geometry.dims[0].0;
    let eb = geometry.element_bytes;
    let outer_fits = geometry.dims[1..]
        .iter()
        .all(|&(extent, _)| extent <= MAX_BOX);
    let swizzles = [
        Some(DescriptorSwizzle::Bytes128),
        Some(DescriptorSwizzle::Bytes64),
        Some(DescriptorSwizzle::Bytes32),
        None,
    ];
    swizzles
        .into_iter()
        .filter_map(|swizzle| {
            let width = match swizzle {
                Some(swizzle) => inner.min(swizzle.row_bytes() / eb),
                None => inner,
            };
            let usable = outer_fits
                && (1..=MAX_BOX).contains(&width)
                && inner % width == 0
                && (width * eb) % 16 == 0;
            usable.then_some(Candidate { width, swizzle })
        })
        .collect()
}

/// The largest power of two that divides `bytes` (0 is divided by every one: `i64::MAX`).
fn power_of_two_dividing(bytes: i64) -> i64 {
    if bytes == 0 {
        i64::MAX
    } else {
        1 << bytes.trailing_zeros()
    }
}

/// Whether boxes of `candidate` land every element where the layout stores it.
fn matches_layout(geometry: &CopyGeometry, candidate: Candidate) -> bool {
    let eb = geometry.element_bytes;
    let chunks = geometry.dims[0].0 / candidate.width;
    let bases: Vec<i64> = (0..chunks)
        .map(|q| geometry.stored[box_origin_element(geometry, q * candidate.width)] * eb)
        .collect();
    if bases.iter().any(|base| base % BOX_ALIGNMENT != 0) {
        return false;
    }
    let swizzle = |address: i64| candidate.swizzle.map_or(address, |s| s.apply(address));
    let mut point = vec![0; geometry.shape.len()];
    geometry.stored.iter().enumerate().all(|(flat, &stored)| {
        unravel_into(table_int(flat), &geometry.shape, &mut point);
        let (chunk, linear) = box_position(geometry, candidate.width, &point);
        swizzle(bases[chunk] + linear * eb) == stored * eb
    })
}

/// The box (chunk along the innermost dimension) and linear position within it of the copy
/// element at `point`.
fn box_position(geometry: &CopyGeometry, width: i64, point: &[i64]) -> (usize, i64) {
    let coordinate = |dim: &(i64, Option<usize>)| dim.1.map_or(0, |j| point[j]);
    let inner = coordinate(&geometry.dims[0]);
    let mut linear = 0;
    for dim in geometry.dims[1..].iter().rev() {
        linear = linear * dim.0 + coordinate(dim);
    }
    linear = linear * width + inner % width;
    // `point` lies in the copy's box, whose coordinates are not negative, and the box number is
    // below the count of boxes the caller tabulated.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let chunk = (inner / width) as usize;
    (chunk, linear)
}

/// The flat copy element whose innermost coordinate is `inner` and whose others are 0.
fn box_origin_element(geometry: &CopyGeometry, inner: i64) -> usize {
    let mut flat = 0;
    for (j, &extent) in geometry.shape.iter().enumerate() {
        let walks_inner = geometry.dims[0].1 == Some(j);
        flat = flat * extent + if walks_inner { inner } else { 0 };
    }
    usize::try_from(flat).unwrap_or(0)
}

/// Writes the row-major multi-index of `flat` in `shape` into `point`.
fn unravel_into(mut flat: i64, shape: &[i64], point: &mut [i64]) {
    for (slot, &extent) in point.iter_mut().zip(shape).rev() {
        *slot = flat % extent;
        flat /= extent;
    }
}
