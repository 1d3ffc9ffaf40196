//! TMA loads (`cp.async.bulk.tensor`): a box of a global tensor copied into shared memory by the
//! async proxy, completing on an mbarrier. TMA stores: a box of shared memory copied into a global
//! tensor, read from shared memory when the store is issued (the earliest moment the hardware may
//! read it; the lowering waits for the read before anything writes the box again, and the race
//! check still sees every write between the box's last writer and the issue).
//!
//! The box is read from global memory when the copy is issued, innermost dimension fastest, with
//! zeros for elements outside the tensor as the hardware fills them. Box element `L` goes to the
//! shared byte address `swizzle(dst + L × element size)`, the map's swizzle applied to the absolute
//! address as for wgmma descriptors, so a box stored with one swizzle and read with another reads
//! the wrong elements here as on the GPU. The copy's destination elements are in flight until a
//! wait passes the mbarrier phase the copy completed on (see `mbarrier.rs`).

use tilec_ir::ExprId;
use tilec_ir::thread::{BufferId, DescriptorSwizzle};

use super::error::{ErrorKind, Fault};
use super::exec::Machine;
use super::mbarrier::TmaCopy;
use super::memory::{Place, check_bounds};
use super::{index_i64, thread_u32};

/// The alignment PTX requires of a tensor copy's shared destination.
const DESTINATION_ALIGNMENT: i64 = 128;

/// A tensor map evaluated for this run.
#[derive(Clone, Debug)]
pub(super) struct MapInfo {
    /// The global buffer the map reads.
    pub buffer: usize,
    /// The tensor's dimensions, innermost first.
    pub dims: Vec<i64>,
    /// The element stride of each dimension, innermost first.
    pub strides: Vec<i64>,
    /// The box, innermost first.
    pub box_dims: Vec<i64>,
    pub swizzle: Option<DescriptorSwizzle>,
}

impl MapInfo {
    fn box_elements(&self) -> i64 {
        self.box_dims.iter().product()
    }

    /// The flat global index of the box element at box coordinates `position` for a box at
    /// `origin`, or `None` when it lies outside the tensor (or its coordinates overflow).
    fn global_index(&self, origin: &[i64], position: &[i64]) -> Option<i64> {
        let mut flat = 0i64;
        for (d, (&start, &offset)) in origin.iter().zip(position).enumerate() {
            let coordinate = start.checked_add(offset)?;
            if coordinate < 0 || coordinate >= *self.dims.get(d)? {
                return None;
            }
            flat = flat.checked_add(coordinate.checked_mul(*self.strides.get(d)?)?)?;
        }
        Some(flat)
    }
}

/// Steps `position` to the next box element, innermost dimension fastest.
fn advance(position: &mut [i64], box_dims: &[i64]) {
    for (coordinate, &extent) in position.iter_mut().zip(box_dims) {
        *coordinate += 1;
        if *coordinate < extent {
            return;
        }
        *coordinate = 0;
    }
}

/// [`Machine::box_operands`]: one TMA statement's operands, evaluated for the active threads.
struct BoxOperands {
    map: MapInfo,
    /// The shared side's byte offset and element size.
    offset: i64,
    size: i64,
    /// Per active thread, the shared index where its box starts.
    starts: Vec<i64>,
    /// Per active thread, the global coordinates of its box's first element, innermost first.
    origins: Vec<Vec<i64>>,
}

/// The operands of one `TmaLoad` statement.
pub(super) struct TmaOperands<'s> {
    pub map: usize,
    pub dst: BufferId,
    pub dst_index: ExprId,
    pub coords: &'s [ExprId],
    pub barrier: BufferId,
    pub barrier_index: ExprId,
}

impl Machine<'_, '_> {
    /// `cp.async.bulk.tensor`: each executing thread issues one copy (see the module docs).
    pub(super) fn exec_tma_load(
        &mut self,
        load: TmaOperands<'_>,
        active: &[u32],
    ) -> Result<(), Fault> {
        let dst = load.dst.index();
        let boxes = self.box_operands(load.map, (dst, load.dst_index), load.coords, active)?;
        let keys = self.mbarrier_keys(load.barrier, load.barrier_index, active)?;
        let bytes = boxes.map.box_elements() * boxes.size;
        for (k, &thread) in active.iter().enumerate() {
            let (Some(&start), Some(origin), Some(&key)) =
                (boxes.starts.get(k), boxes.origins.get(k), keys.get(k))
            else {
                return Err(self.malformed_fault("TMA: missing operands"));
            };
            let values = self.read_box(&boxes.map, origin, thread)?;
            let shared = (dst, boxes.offset, boxes.size);
            let indices = self.box_targets(&boxes.map, shared, start, thread)?;
            let Some(info) = self.buffers.get(dst) else {
                return Err(self.malformed_fault("TMA: buffer id out of range"));
            };
            let issued = self.memory.issue_tma(info, thread, &indices);
            issued.map_err(|(kind, thread)| self.fault(kind, Some(thread)))?;
            let copy = TmaCopy {
                buffer: dst,
                indices,
                values,
                thread,
            };
            self.complete_tx(key, bytes, copy)?;
        }
        Ok(())
    }

    /// `cp.async.bulk.tensor` from shared to global memory: each executing thread stores one box,
    /// read at the swizzled addresses a load of the same map would land it at, skipping the
    /// elements outside the tensor.
    pub(super) fn exec_tma_store(
        &mut self,
        map: usize,
        (src, src_index): (BufferId, ExprId),
        coords: &[ExprId],
        active: &[u32],
    ) -> Result<(), Fault> {
        let src = src.index();
        let boxes = self.box_operands(map, (src, src_index), coords, active)?;
        for (k, &thread) in active.iter().enumerate() {
            let (Some(&start), Some(origin)) = (boxes.starts.get(k), boxes.origins.get(k)) else {
                return Err(self.malformed_fault("TMA: missing operands"));
            };
            let shared = (src, boxes.offset, boxes.size);
            let sources = self.box_targets(&boxes.map, shared, start, thread)?;
            self.store_box(&boxes.map, (src, &sources), origin, thread)?;
        }
        Ok(())
    }

    /// What a TMA load and a TMA store both evaluate first: the map, where the shared side starts
    /// and its element size, and per active thread the shared start index and the box's global
    /// origin.
    fn box_operands(
        &mut self,
        map: usize,
        (shared, shared_index): (usize, ExprId),
        coords: &[ExprId],
        active: &[u32],
    ) -> Result<BoxOperands, Fault> {
        let Some(map) = self.maps.get(map).cloned() else {
            return Err(self.malformed_fault("TMA: tensor map index out of range"));
        };
        let (offset, size) = self.tma_shared_side(&map, shared)?;
        if coords.len() != map.dims.len() {
            return Err(self.malformed_fault("TMA: coordinates do not match the map's rank"));
        }
        let starts = self.index(shared_index, active, Some(shared))?;
        let mut origins = vec![Vec::with_capacity(map.dims.len()); active.len()];
        for &coordinate in coords {
            let values = self.index(coordinate, active, Some(map.buffer))?;
            for (origin, value) in origins.iter_mut().zip(values) {
                origin.push(value);
            }
        }
        Ok(BoxOperands {
            map,
            offset,
            size,
            starts,
            origins,
        })
    }

    /// Reads the shared elements `sources` (one per box element, innermost dimension fastest) and
    /// writes those inside the tensor to the box at `origin`.
    fn store_box(
        &mut self,
        map: &MapInfo,
        (src, sources): (usize, &[i64]),
        origin: &[i64],
        thread: u32,
    ) -> Result<(), Fault> {
        let (mut flats, mut reads) = (Vec::new(), Vec::new());
        let mut position = vec![0i64; map.box_dims.len()];
        for &source in sources {
            if let Some(flat) = map.global_index(origin, &position) {
                flats.push(flat);
                reads.push(source);
            }
            advance(&mut position, &map.box_dims);
        }
        let threads = vec![thread; reads.len()];
        let lanes: Vec<u32> = (0..thread_u32(reads.len())).collect();
        let mut values = vec![0.0; reads.len()];
        let (Some(shared), Some(global)) = (self.buffers.get(src), self.buffers.get(map.buffer))
        else {
            return Err(self.malformed_fault("TMA: buffer id out of range"));
        };
        let loaded = self
            .memory
            .load_lanes(shared, &threads, &reads, &lanes, &mut values);
        loaded.map_err(|(kind, thread)| self.fault(kind, Some(thread)))?;
        let stored = self.memory.store_lanes(global, &threads, &flats, &values);
        stored.map_err(|(kind, thread)| self.fault(kind, Some(thread)))
    }

    /// The byte offset and element size of a TMA copy's shared side, which must be a shared buffer
    /// of the tensor's dtype.
    fn tma_shared_side(&self, map: &MapInfo, dst: usize) -> Result<(i64, i64), Fault> {
        let (Some(info), Some(global)) = (self.buffers.get(dst), self.buffers.get(map.buffer))
        else {
            return Err(self.malformed_fault("TMA: buffer id out of range"));
        };
        match info.place {
            Place::Shared { offset, .. } if info.dtype == global.dtype => {
                Ok((index_i64(offset), index_i64(info.size)))
            }
            _ => {
                let message = format!(
                    "TMA between `{}` ({}) and `{}` ({}), which is not a shared buffer of that dtype",
                    global.name, global.dtype, info.name, info.dtype
                );
                Err(self.malformed_fault(&message))
            }
        }
    }

    /// The values of the box at `origin`, zeros outside the tensor, innermost dimension fastest.
    fn read_box(&mut self, map: &MapInfo, origin: &[i64], thread: u32) -> Result<Vec<f64>, Fault> {
        let total = usize::try_from(map.box_elements()).unwrap_or(0);
        let mut values = vec![0.0; total];
        let (mut flats, mut lanes) = (Vec::with_capacity(total), Vec::with_capacity(total));
        let mut position = vec![0i64; map.box_dims.len()];
        for lane in 0..total {
            if let Some(flat) = map.global_index(origin, &position) {
                flats.push(flat);
                lanes.push(thread_u32(lane));
            }
            advance(&mut position, &map.box_dims);
        }
        let threads = vec![thread; flats.len()];
        let Some(info) = self.buffers.get(map.buffer) else {
            return Err(self.malformed_fault("TMA: buffer id out of range"));
        };
        let loaded = self
            .memory
            .load_lanes(info, &threads, &flats, &lanes, &mut values);
        loaded.map_err(|(kind, thread)| self.fault(kind, Some(thread)))?;
        Ok(values)
    }

    /// The destination element of each box element: box element `L` lands at the swizzled
    /// address of byte `dst + L × size`. The destination must be 128-byte aligned.
    fn box_targets(
        &self,
        map: &MapInfo,
        (dst, offset, size): (usize, i64, i64),
        start: i64,
        thread: u32,
    ) -> Result<Vec<i64>, Fault> {
        let Some(info) = self.buffers.get(dst) else {
            return Err(self.malformed_fault("TMA: buffer id out of range"));
        };
        // A start inside the buffer keeps every address below small (the arena is bounded), and
        // the elements the box covers are bounds-checked when the copy is issued.
        check_bounds(info, start).map_err(|kind| self.fault(kind, Some(thread)))?;
        let base = offset + start * size;
        if base.rem_euclid(DESTINATION_ALIGNMENT) != 0 {
            let kind = ErrorKind::TmaMisaligned {
                buffer: self.buffer_name(dst),
                index: start,
                address: base,
            };
            return Err(self.fault(kind, Some(thread)));
        }
        let targets = (0..map.box_elements())
            .map(|lane| {
                let address = base + lane * size;
                let address = map
                    .swizzle
                    .map_or(address, |swizzle| swizzle.apply(address));
                (address - offset).div_euclid(size)
            })
            .collect();
        Ok(targets)
    }
}
