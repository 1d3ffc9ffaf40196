//! Tile operations as per-thread statements: `T.copy`, `T.fill`/`T.clear`, `T.reduce_*`,
//! `T.cumsum` and `T.atomic_add`.

use tilec_ir::data::{BinaryOp, CompareOp};
use tilec_ir::thread::{AtomicOp, BufferDecl, Memory, Place, Stmt, Value, ValueId};
use tilec_ir::{
    AtomicSource, ControlOp, DType, DataId, EntityId, ExprId, ReduceKind, Region, ScanOp, TileOp,
    VarId, World,
};

use super::{Lowering, Unlowerable, guarded, rename_vars, step_loop, table_int};

/// A tile region seen as a loop: variables over its non-unit extents and the indices they give.
struct RegionLoop {
    vars: Vec<VarId>,
    shape: Vec<i64>,
    indices: Vec<ExprId>,
}

impl Lowering<'_> {
    pub(super) fn tile_op(
        &mut self,
        entity: EntityId,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let Some(op) = self.world.ops.get(entity).cloned() else {
            return Ok(());
        };
        let accesses = self.entity_shared_accesses(entity);
        let mut stmts = Vec::new();
        let mut label = None;
        match &op {
            TileOp::Copy { src, dst } => {
                self.sync.before(&accesses, out);
                if let Some(barrier) = self.world.copy_barriers.get(entity).copied() {
                    label = self.barrier_copy(entity, &barrier, &mut stmts)?;
                }
                if label.is_none() {
                    label = self.tma_store(entity, (src, dst), &mut stmts);
                }
                if label.is_none() {
                    self.copy(entity, src, dst, &mut stmts)?;
                    label = self.staging_label(src, dst);
                }
            }
            TileOp::Fill { dst, value, .. } => {
                self.sync.before(&accesses, out);
                self.fill(dst, *value, &mut stmts)?;
            }
            TileOp::Reduce {
                kind,
                src,
                dst,
                dim,
                clear,
            } => {
                self.sync.before(&accesses, out);
                self.reduce(*kind, src, dst, *dim, *clear, &mut stmts)?;
            }
            TileOp::Scan {
                op: scan,
                src,
                dst,
                dim,
                reverse,
            } => {
                self.sync.before(&accesses, out);
                self.scan(*scan, (src, dst), *dim, *reverse, &mut stmts)?;
            }
            TileOp::Atomic { op, dst, src, prev } => {
                self.sync.before(&accesses, out);
                self.tile_atomic(entity, (*op, dst), (src, *prev), &mut stmts)?;
            }
            TileOp::Gemm { .. } => {
                self.sync.before(&accesses, out);
                label = Some(self.gemm(entity, &op, &mut stmts)?);
            }
            // Rasterization rebinds the block indices for the whole launch, before its first
            // statement (`Lowering::rasterization`); an annotation only informed inference.
            TileOp::UseSwizzle { .. } | TileOp::AnnotateLayout { .. } => return Ok(()),
            TileOp::Control(control) => self.control(control, &mut stmts)?,
            TileOp::ThreadAllReduce {
                combiner,
                source,
                result,
                dims,
            } => {
                self.sync.before(&accesses, out);
                self.thread_all_reduce(*combiner, *source, result, dims, &mut stmts)?;
            }
            TileOp::ExternCall(call) => {
                self.sync.before(&accesses, out);
                self.extern_call(entity, call, &mut stmts)?;
            }
            TileOp::ImportSource { source } => return self.import_source(entity, source),
            TileOp::FinalizeReducer {
                buffer,
                combiner,
                init,
            } => {
                self.sync.before(&accesses, out);
                self.finalize_reducer(*buffer, *combiner, *init, &mut stmts)?;
            }
        }
        let label = label.unwrap_or_else(|| format!("T.{}", op.name()));
        out.push(Stmt::Block {
            origin: Some(entity),
            label,
            body: stmts,
        });
        self.sync.after(&accesses);
        Ok(())
    }

    /// `T.sync_threads()`, `T.sync_warp()`, `T.pdl_sync()`, `T.pdl_trigger()`,
    /// `T.thread_return()` and `T.device_assert(...)`, executed by every thread that reaches them.
    pub(super) fn control(
        &mut self,
        control: &ControlOp,
        stmts: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        match control {
            ControlOp::SyncThreads { named: None } => {
                // Written in two or more warp roles, TileLang's `__syncthreads()` is one barrier
                // the roles reach at different places: `bar.sync 0` with every thread of the
                // block, which narrowing a group's barriers leaves as it is.
                if self.group.is_some() && self.block_barrier_across_roles() {
                    let threads = self.block_threads()?;
                    stmts.push(Stmt::NamedBarrier { id: 0, threads });
                } else {
                    stmts.push(Stmt::Barrier);
                }
                self.sync.barrier_placed();
            }
            ControlOp::SyncThreads { named: Some(named) } => {
                stmts.push(Stmt::NamedBarrier {
                    id: named.id,
                    threads: named.threads,
                });
                self.sync.barrier_placed();
            }
            ControlOp::NamedBarrierArrive(named) => stmts.push(Stmt::NamedBarrierArrive {
                id: named.id,
                threads: named.threads,
            }),
            ControlOp::SyncWarp => stmts.push(Stmt::SyncWarp),
            // Programmatic dependent launch exists from sm_90 on; before it a grid starts only
            // once the one before it has finished, so there is nothing to wait for or to trigger.
            ControlOp::PdlSync | ControlOp::PdlTrigger
                if self.options.target != tilec_ir::Target::Sm90 => {}
            ControlOp::PdlSync => stmts.push(Stmt::GridDependencyWait),
            ControlOp::PdlTrigger => stmts.push(Stmt::LaunchDependents),
            ControlOp::ThreadReturn => stmts.push(Stmt::Return),
            ControlOp::RngInit {
                seed,
                subsequence,
                offset,
            } => {
                let seed = self.value_as(*seed, DType::UInt64)?;
                let subsequence = self.value_as(*subsequence, DType::UInt64)?;
                let offset = self.value_as(*offset, DType::UInt64)?;
                stmts.push(Stmt::RngInit {
                    seed,
                    subsequence,
                    offset,
                });
            }
            // The grid barrier is a block barrier too: it orders shared memory as one does.
            ControlOp::SyncGrid => {
                stmts.push(Stmt::GridSync);
                self.sync.barrier_placed();
            }
            ControlOp::DeviceAssert { cond, message } => {
                let cond = self.value_as(*cond, DType::Bool)?;
                stmts.push(Stmt::Assert {
                    cond,
                    message: message.clone(),
                });
            }
            ControlOp::BarrierArrive { .. }
            | ControlOp::BarrierWait { .. }
            | ControlOp::BarrierExpectTx { .. }
            | ControlOp::FenceProxyAsync => self.barrier_control(control, stmts)?,
        }
        Ok(())
    }

    /// Whether user `T.sync_threads()` calls stand in two or more thread groups of the launch
    /// (`if tx < 128: ... T.sync_threads() ... elif tx < 256: ... T.sync_threads()`): the
    /// roles then meet at one block-wide barrier, which lowering a group's barrier among its own
    /// threads would split in two.
    pub(super) fn block_barrier_across_roles(&self) -> bool {
        let mut groups: Vec<crate::thread_groups::ThreadGroup> = Vec::new();
        for entity in crate::liveness::linearize(self.world, self.launch) {
            if matches!(
                self.world.ops.get(entity),
                Some(TileOp::Control(ControlOp::SyncThreads { named: None }))
            ) && let Some(group) = self.groups.narrowed(entity)
                && !groups.contains(&group)
            {
                groups.push(group);
            }
        }
        groups.len() >= 2
    }

    /// The threads of the whole block, as a barrier among all of them counts them.
    fn block_threads(&self) -> Result<u32, Unlowerable> {
        let [x, y, z] = self.program.block;
        x.checked_mul(y)
            .and_then(|xy| xy.checked_mul(z))
            .and_then(|threads| u32::try_from(threads).ok())
            .ok_or_else(|| Unlowerable::new("a block too large for a barrier among its threads"))
    }

    /// The label of a copy into or out of a staging tile (`epilogue.rs`), which the user did not
    /// write: it says why the CUDA has two copies where the source has one.
    fn staging_label(&self, src: &Region, dst: &Region) -> Option<String> {
        let is_staging = |buffer: EntityId| {
            self.layouts.shared.get(&buffer).is_some_and(|assigned| {
                assigned.origin == crate::layout::SharedOrigin::EpilogueStaging
            })
        };
        let (src_name, dst_name) = (self.world.name(src.buffer), self.world.name(dst.buffer));
        if is_staging(dst.buffer) {
            Some(format!(
                "T.copy({src_name} -> {dst_name}): the gemm's store, staged through shared memory"
            ))
        } else if is_staging(src.buffer) {
            Some(format!(
                "T.copy({src_name} -> {dst_name}): the staged store, in whole rows"
            ))
        } else {
            None
        }
    }

    /// `T.copy(src, dst)`: a parallel loop over the tile (laid out by inference when a fragment is
    /// involved, planned otherwise), converting dtypes, skipping out-of-range destination
    /// elements and reading zero for out-of-range source elements.
    pub(super) fn copy(
        &mut self,
        entity: EntityId,
        src: &Region,
        dst: &Region,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        if self.is_thread_local(src.buffer) || self.is_thread_local(dst.buffer) {
            return self.per_thread_copy(src, dst, out);
        }
        let (copy, layout) = match self.copy_schedule(entity, src, dst, true) {
            Ok(schedule) => schedule,
            Err(unlowerable) => {
                return match self.bounded_copy(src, dst, out)? {
                    true => Ok(()),
                    false => Err(unlowerable),
                };
            }
        };
        let (src_buffer, dst_buffer) = (src.buffer, dst.buffer);
        let stmts = self.run_laid_out(&layout, |lowering, stmts| {
            lowering.copy_element(
                src_buffer,
                &copy.src_indices,
                dst_buffer,
                &copy.dst_indices,
                stmts,
            )
        })?;
        out.extend(stmts);
        Ok(())
    }

    /// Whether `buffer` is a `T.alloc_local` array or a `T.alloc_var`: each thread's own, in full
    /// (a fragment is private too, but spread over the threads by its layout).
    fn is_thread_local(&self, buffer: EntityId) -> bool {
        self.is_private(buffer) && !self.fragments.contains_key(&buffer)
    }

    /// A `T.copy` to or from a thread's own local array: every thread copies the whole region
    /// itself, in a loop of its own, as TileLang lowers a copy that involves a `local` buffer
    /// (`T.copy(ngram_token_ids[token_idx, :], x_local)` gives each thread its token's row).
    /// Spreading it over the threads, as a copy between shared buffers is, would leave every
    /// other thread's array unwritten.
    fn per_thread_copy(
        &mut self,
        src: &Region,
        dst: &Region,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let copy = self.copy_loop(src, dst)?;
        let mut body = Vec::new();
        self.copy_element(
            src.buffer,
            &copy.src_indices,
            dst.buffer,
            &copy.dst_indices,
            &mut body,
        )?;
        out.extend(self.nested_loops(&copy.vars, &copy.shape, body));
        Ok(())
    }

    /// `body` inside one loop per variable (the first outermost), run whole by every thread.
    fn nested_loops(&mut self, vars: &[VarId], shape: &[i64], mut body: Vec<Stmt>) -> Vec<Stmt> {
        for (&var, &extent) in vars.iter().zip(shape).rev() {
            body = step_loop(&mut self.program.exprs, var, extent, body);
        }
        body
    }

    /// The loop of a copy-shaped operation over the region it moves.
    fn copy_loop(
        &mut self,
        src: &Region,
        dst: &Region,
    ) -> Result<crate::layout::infer::CopyLoop, Unlowerable> {
        let mut scratch = self.scratch_world();
        let copy = crate::layout::infer::copy_loop(&mut scratch, src, dst);
        self.program.exprs = scratch.exprs;
        copy.ok_or_else(|| {
            Unlowerable::new("the extents of this operation are not known at compile time")
        })
    }

    /// A copy-shaped operation (`T.copy`, the tile form of `T.atomic_add`) as a loop and the
    /// layout it runs with: inference's when a fragment is involved, planned otherwise (with
    /// TileLang's vector width when `vectorize`).
    fn copy_schedule(
        &mut self,
        entity: EntityId,
        src: &Region,
        dst: &Region,
        vectorize: bool,
    ) -> Result<
        (
            crate::layout::infer::CopyLoop,
            crate::layout::FragmentLayout,
        ),
        Unlowerable,
    > {
        let copy = self.copy_loop(src, dst)?;
        if let Some((inferred, _)) = self.layouts.loops.get(&entity) {
            let mut layout = inferred.layout.clone();
            rename_vars(&mut self.program.exprs, &mut layout, &copy.vars);
            return Ok((copy, layout));
        }
        let vector = if vectorize {
            let accesses = [
                crate::layout::infer::LoopAccess {
                    buffer: src.buffer,
                    indices: copy.src_indices.clone(),
                    write: false,
                    statement: entity,
                },
                crate::layout::infer::LoopAccess {
                    buffer: dst.buffer,
                    indices: copy.dst_indices.clone(),
                    write: true,
                    statement: entity,
                },
            ];
            let world = self.scratch_world();
            let vector = crate::layout::vectorize::vector_width(
                &world,
                &accesses,
                &copy.vars,
                &copy.shape,
                self.threads,
            );
            self.program.exprs = world.exprs;
            vector
        } else {
            1
        };
        let extents: Vec<ExprId> = copy
            .shape
            .iter()
            .map(|&e| self.program.exprs.int(e))
            .collect();
        let layout = self.planned_layout(&copy.vars, &extents, vector)?;
        Ok((copy, layout))
    }

    /// The world with the program's arena, for helpers that build index expressions in a world.
    pub(super) fn scratch_world(&mut self) -> World {
        let mut world = self.world.clone();
        world.exprs = std::mem::take(&mut self.program.exprs);
        world
    }

    pub(super) fn copy_element(
        &mut self,
        src: EntityId,
        src_indices: &[ExprId],
        dst: EntityId,
        dst_indices: &[ExprId],
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let dtype = self.element_dtype(dst);
        let (src_id, src_index) = self.address(src, src_indices)?;
        let loaded = self.program.add_value(Value::Load {
            buffer: src_id,
            index: src_index,
        });
        let value = self.cast(loaded, dtype);
        let src_guard = self.bounds_guard(src, src_indices, None);
        let mut stmts = self.store_value(dst, dst_indices, value)?;
        if let Some(cond) = src_guard {
            let zero = self.zero(dtype);
            let padding = self.store_value(dst, dst_indices, zero)?;
            stmts = vec![Stmt::If {
                cond,
                then: stmts,
                otherwise: padding,
            }];
        }
        out.extend(stmts);
        Ok(())
    }

    pub(super) fn zero(&mut self, dtype: DType) -> ValueId {
        self.constant(0.0, dtype)
    }

    pub(super) fn constant(&mut self, value: f64, dtype: DType) -> ValueId {
        self.program.add_value(if dtype.is_float() {
            Value::Float {
                bits: value.to_bits(),
                dtype,
            }
        } else {
            Value::Int {
                value: int_constant(value, dtype),
                dtype,
            }
        })
    }

    /// `buffer[indices] = value` with the destination's bounds guard and the replica guard.
    pub(super) fn store_value(
        &mut self,
        buffer: EntityId,
        indices: &[ExprId],
        value: ValueId,
    ) -> Result<Vec<Stmt>, Unlowerable> {
        let (id, index) = self.address(buffer, indices)?;
        let mut guard = self.bounds_guard(buffer, indices, None);
        guard = self.replica_guard(buffer, guard);
        let stmt = Stmt::Store {
            place: Place { buffer: id, index },
            value,
        };
        Ok(vec![guarded(guard, stmt)])
    }

    /// Adds "replica 0" to `guard` for a store to shared or global memory in a replicated loop.
    pub(super) fn replica_guard(
        &mut self,
        buffer: EntityId,
        guard: Option<ValueId>,
    ) -> Option<ValueId> {
        // A reducer's copies are combined when it is finalized: a contribution that every
        // replica of the loop made would be counted once per replica.
        let reducer = self.world.reducers.get(buffer).is_some();
        match self.replica {
            Some(rep) if !self.is_private(buffer) || reducer => {
                let r = self.program.exprs.var_expr(rep);
                let zero = self.program.exprs.int(0);
                let first = self.compare_indices(CompareOp::Eq, r, zero);
                Some(self.and(guard, first))
            }
            _ => guard,
        }
    }

    /// The loop over a region's non-unit extents. A region of points alone (`T.fill(buf[0], 0)`)
    /// is that one element, as TileLang reads a single element given to a tile op.
    fn region_loop(&mut self, region: &Region) -> Result<RegionLoop, Unlowerable> {
        let mut world = self.scratch_world();
        let one = world.exprs.int(1);
        let extents = crate::regions::resolve_extents(&mut world, region, None)
            .or_else(|| Some(vec![one; region.dims.len()]));
        let result = extents.and_then(|extents| {
            let shape: Vec<i64> = extents
                .iter()
                .map(|&e| world.exprs.as_int(e))
                .collect::<Option<Vec<_>>>()?
                .into_iter()
                .filter(|&e| e != 1)
                .collect();
            let vars = crate::layout::fresh_vars(&mut world.exprs, &shape);
            let indices = crate::layout::infer::region_indices(&mut world, region, &extents, &vars);
            Some(RegionLoop {
                vars,
                shape,
                indices,
            })
        });
        self.program.exprs = world.exprs;
        result.ok_or_else(|| {
            Unlowerable::new("the extents of this region are not known at compile time")
        })
    }

    /// `T.fill(dst, value)` / `T.clear(dst)`: a whole fragment is filled register by register, a
    /// thread's local array by each thread whole; shared and global regions through a planned
    /// loop.
    fn fill(
        &mut self,
        dst: &Region,
        value: DataId,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let dtype = self.element_dtype(dst.buffer);
        let value = self.value_as(value, dtype)?;
        if let Some(storage) = self.fragments.get(&dst.buffer).cloned() {
            let id = self.buffer_of(dst.buffer)?;
            let region = self.region_loop(dst)?;
            let whole = self.world.const_shape(dst.buffer).is_some_and(|shape| {
                shape
                    .iter()
                    .filter(|&&e| e != 1)
                    .copied()
                    .collect::<Vec<_>>()
                    == region.shape
            });
            if !whole {
                return Err(Unlowerable::new("filling part of a fragment"));
            }
            let var = self.program.exprs.var("r", Some(storage.local_size()));
            let index = self.program.exprs.var_expr(var);
            let extent = self.program.exprs.int(storage.local_size());
            out.push(Stmt::For {
                var,
                extent,
                unroll: storage.local_size() <= 64,
                body: vec![Stmt::Store {
                    place: Place { buffer: id, index },
                    value,
                }],
            });
            return Ok(());
        }
        let region = self.region_loop(dst)?;
        if self.is_thread_local(dst.buffer) {
            // A thread's own array: every thread fills the whole region of its own copy.
            let body = self.store_value(dst.buffer, &region.indices, value)?;
            out.extend(self.nested_loops(&region.vars, &region.shape, body));
            return Ok(());
        }
        let extents: Vec<ExprId> = region
            .shape
            .iter()
            .map(|&e| self.program.exprs.int(e))
            .collect();
        let layout = self.planned_layout(&region.vars, &extents, 1)?;
        let buffer = dst.buffer;
        let stmts = self.run_laid_out(&layout, |lowering, stmts| {
            let placed = lowering.store_value(buffer, &region.indices, value)?;
            stmts.extend(placed);
            Ok(())
        })?;
        out.extend(stmts);
        Ok(())
    }

    /// The element form of `T.atomic_add(dst[i], value)` (or `_max`, `_min`) inside a parallel
    /// loop.
    pub(super) fn element_atomic(
        &mut self,
        (op, dst): (AtomicOp, Region),
        (src, prev): (AtomicSource, Option<EntityId>),
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let AtomicSource::Value(value) = src else {
            return Err(Unlowerable::new(
                "the tile form of an atomic operation inside a parallel loop",
            ));
        };
        let indices: Vec<ExprId> = dst.dims.iter().map(|d| d.start).collect();
        let dtype = self.element_dtype(dst.buffer);
        let source_guard = self.loads_guard(value);
        let value = self.value_as(value, dtype)?;
        self.atomic_store(op, (dst.buffer, &indices), (value, source_guard), prev, out)
    }

    /// The bounds conditions of every global load in `value`. An atomic operation is skipped
    /// where one of them fails, as TileLang's safe-memory pass guards a side-effecting call on
    /// all of its operands: reading zero there would still add, or compare, a value.
    fn loads_guard(&mut self, value: DataId) -> Option<ValueId> {
        let mut loads = Vec::new();
        self.world.data.loads(value, &mut loads);
        loads.into_iter().fold(None, |guard, (buffer, indices)| {
            self.bounds_guard(buffer, &indices, guard)
        })
    }

    fn atomic_store(
        &mut self,
        op: AtomicOp,
        (buffer, indices): (EntityId, &[ExprId]),
        (value, source_guard): (ValueId, Option<ValueId>),
        prev: Option<EntityId>,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let (id, index) = self.address(buffer, indices)?;
        let old = match prev {
            Some(register) => {
                let (buffer, index) = self.address(register, &[])?;
                Some(Place { buffer, index })
            }
            None => None,
        };
        let guard = self.bounds_guard(buffer, indices, source_guard);
        let guard = self.replica_guard(buffer, guard);
        let stmt = Stmt::Atomic {
            op,
            place: Place { buffer: id, index },
            value,
            old,
        };
        out.push(guarded(guard, stmt));
        Ok(())
    }

    /// The tile form of `T.atomic_add(dst, src)` (or `_max`, `_min`): a copy whose stores are
    /// atomic updates.
    fn tile_atomic(
        &mut self,
        entity: EntityId,
        (op, dst): (AtomicOp, &Region),
        (src, prev): (&AtomicSource, Option<EntityId>),
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let src = match src {
            AtomicSource::Region(src) => src,
            AtomicSource::Value(value) => {
                return self.scalar_atomic(entity, (op, dst, prev), *value, out);
            }
        };
        // Atomics stay one element at a time: no vector width.
        let (copy, layout) = self.copy_schedule(entity, src, dst, false)?;
        let (src_buffer, dst_buffer) = (src.buffer, dst.buffer);
        let stmts = self.run_laid_out(&layout, |lowering, stmts| {
            let dtype = lowering.element_dtype(dst_buffer);
            let (id, index) = lowering.address(src_buffer, &copy.src_indices)?;
            let loaded = lowering
                .program
                .add_value(Value::Load { buffer: id, index });
            let value = lowering.cast(loaded, dtype);
            let source_guard = lowering.bounds_guard(src_buffer, &copy.src_indices, None);
            lowering.atomic_store(
                op,
                (dst_buffer, &copy.dst_indices),
                (value, source_guard),
                None,
                stmts,
            )
        })?;
        out.extend(stmts);
        Ok(())
    }

    /// `T.atomic_add(dst[i], value)` outside a parallel loop: thread 0 adds once per block, or,
    /// where the element, the value or a condition around it differs between threads
    /// (`T.atomic_add(dst[tx], ...)`), every thread adds its own.
    fn scalar_atomic(
        &mut self,
        entity: EntityId,
        (op, dst, prev): (AtomicOp, &Region, Option<EntityId>),
        value: DataId,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let dtype = self.element_dtype(dst.buffer);
        let source_guard = self.loads_guard(value);
        let value = self.value_as(value, dtype)?;
        let indices: Vec<ExprId> = dst.dims.iter().map(|d| d.start).collect();
        let mut stmts = Vec::new();
        self.atomic_store(
            op,
            (dst.buffer, &indices),
            (value, source_guard),
            prev,
            &mut stmts,
        )?;
        if self.thread_dependence.statement(self.world, entity) {
            out.extend(stmts);
            return Ok(());
        }
        let first = self.thread_is(0);
        out.push(Stmt::If {
            cond: first,
            then: stmts,
            otherwise: Vec::new(),
        });
        Ok(())
    }

    /// `T.cumsum(src, dst, dim, reverse)` on shared memory: one thread per line scans it serially.
    fn scan(
        &mut self,
        scan: ScanOp,
        (src, dst): (&Region, &Region),
        dim: i64,
        reverse: bool,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let name = scan.name();
        if self.fragments.contains_key(&src.buffer) || self.fragments.contains_key(&dst.buffer) {
            return Err(Unlowerable::new(format!(
                "`T.{name}` of a fragment (stage it through shared memory)"
            )));
        }
        let shape = self.world.const_shape(src.buffer).ok_or_else(|| {
            Unlowerable::new(format!("`T.{name}` needs a shape known at compile time"))
        })?;
        let dim = usize::try_from(dim).map_err(|_| {
            Unlowerable::new(format!(
                "`T.{name}` over a dimension the buffer does not have"
            ))
        })?;
        let length = *shape.get(dim).ok_or_else(|| {
            Unlowerable::new(format!(
                "`T.{name}` over a dimension the buffer does not have"
            ))
        })?;
        let lines: i64 = shape
            .iter()
            .enumerate()
            .filter(|&(k, _)| k != dim)
            .map(|(_, &e)| e)
            .product();
        let dtype = self.element_dtype(dst.buffer);
        let accumulator = self.temporary("acc", dtype, 1);
        let rounds = (lines + self.threads - 1) / self.threads;
        let round = self.program.exprs.var("line_round", Some(rounds));
        let position = self.program.exprs.var("k", Some(length));
        let t = self.program.exprs.var_expr(self.program.thread);
        let r = self.program.exprs.var_expr(round);
        let threads = self.program.exprs.int(self.threads);
        let scaled = self.program.exprs.mul(r, threads);
        let line = self.program.exprs.add(scaled, t);
        let k = self.program.exprs.var_expr(position);
        let along = if reverse {
            let last = self.program.exprs.int(length - 1);
            self.program.exprs.sub(last, k)
        } else {
            k
        };
        // The line number spread over the other dimensions, row-major.
        let others: Vec<i64> = shape
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != dim)
            .map(|(_, &e)| e)
            .collect();
        let mut coords =
            super::iteration::unflatten_expr(&mut self.program.exprs, line, &others).into_iter();
        let indices: Vec<ExprId> = (0..shape.len())
            .map(|j| {
                if j == dim {
                    along
                } else {
                    coords.next().unwrap_or(along)
                }
            })
            .collect();
        let src_indices = offset_indices(&mut self.program.exprs, src, &indices);
        let dst_indices = offset_indices(&mut self.program.exprs, dst, &indices);
        let zero_index = self.program.exprs.int(0);
        // The running value starts at the combination's identity: 0 for a sum, the lowest
        // value of the type for a maximum.
        let start = match scan {
            ScanOp::Sum => self.zero(dtype),
            ScanOp::Max => self.constant(f64::NEG_INFINITY, dtype),
        };
        let running = self.program.add_value(Value::Load {
            buffer: accumulator,
            index: zero_index,
        });
        let (src_id, src_index) = self.address(src.buffer, &src_indices)?;
        let element = self.program.add_value(Value::Load {
            buffer: src_id,
            index: src_index,
        });
        let element = self.cast(element, dtype);
        let sum = self.program.add_value(Value::Binary {
            op: match scan {
                ScanOp::Sum => BinaryOp::Add,
                ScanOp::Max => BinaryOp::Max,
            },
            lhs: running,
            rhs: element,
            dtype,
        });
        let (dst_id, dst_index) = self.address(dst.buffer, &dst_indices)?;
        let extent = self.program.exprs.int(length);
        let scan = vec![
            Stmt::Store {
                place: Place {
                    buffer: accumulator,
                    index: zero_index,
                },
                value: start,
            },
            Stmt::For {
                var: position,
                extent,
                unroll: false,
                body: vec![
                    Stmt::Store {
                        place: Place {
                            buffer: accumulator,
                            index: zero_index,
                        },
                        value: sum,
                    },
                    Stmt::Store {
                        place: Place {
                            buffer: dst_id,
                            index: dst_index,
                        },
                        value: running,
                    },
                ],
            },
        ];
        let limit = self.program.exprs.int(lines);
        let cond = self.compare_indices(CompareOp::Lt, line, limit);
        let extent = self.program.exprs.int(rounds);
        out.push(Stmt::For {
            var: round,
            extent,
            unroll: false,
            body: vec![Stmt::If {
                cond,
                then: scan,
                otherwise: Vec::new(),
            }],
        });
        Ok(())
    }

    /// A per-thread scratch register array of lowering.
    pub(super) fn temporary(
        &mut self,
        name: &str,
        dtype: DType,
        elements: i64,
    ) -> tilec_ir::thread::BufferId {
        let name = self.unique_name(name);
        let count = self.program.exprs.int(elements);
        self.program.add_buffer(BufferDecl {
            name,
            dtype,
            memory: Memory::Local,
            shape: vec![count],
            elements: count,
            strides: None,
        })
    }

    /// `T.reduce_*(src, dst, dim)`: each thread folds the elements it holds, then the threads that
    /// hold parts of the same line combine them with XOR shuffles within a warp and through a
    /// shared-memory workspace across warps.
    fn reduce(
        &mut self,
        kind: ReduceKind,
        src: &Region,
        dst: &Region,
        dim: i64,
        clear: bool,
        out: &mut Vec<Stmt>,
    ) -> Result<(), Unlowerable> {
        let (Some(source), Some(result)) = (
            self.fragments.get(&src.buffer).cloned(),
            self.fragments.get(&dst.buffer).cloned(),
        ) else {
            return Err(Unlowerable::new(
                "`T.reduce_*` between buffers that are not both fragments",
            ));
        };
        // The front end made a negative `dim` count from the end already.
        let dim = usize::try_from(dim).map_err(|_| {
            Unlowerable::new("a reduction over a dimension the buffer does not have")
        })?;
        let plan = super::reduce::plan(
            &mut self.program.exprs,
            &source.layout,
            &result,
            dim,
            self.threads,
            self.program.thread,
        )?;
        let dtype = self.element_dtype(dst.buffer);
        let src_id = self.buffer_of(src.buffer)?;
        let dst_id = self.buffer_of(dst.buffer)?;
        let partial = self.temporary("partial", dtype, table_int(plan.slots.len()));
        let held = self.holds_elements(&source.layout);
        self.fold_own_elements(kind, (src_id, &plan.slots, held), (partial, dtype), out);
        let combiner = reduce_combiner(kind);
        self.all_reduce_shuffles(
            combiner,
            partial,
            table_int(plan.slots.len()),
            &plan.warp_masks,
            dtype,
            out,
        );
        if !plan.block_masks.is_empty() {
            self.all_reduce_shared(
                combiner,
                partial,
                table_int(plan.slots.len()),
                &plan.block_masks,
                dtype,
                out,
            );
        }
        for slot in 0..plan.slots.len() {
            let slot_index = self.program.exprs.int(table_int(slot));
            let reduced = self.program.add_value(Value::Load {
                buffer: partial,
                index: slot_index,
            });
            let value = if clear {
                reduced
            } else {
                let old = self.program.add_value(Value::Load {
                    buffer: dst_id,
                    index: plan.dst_slots[slot],
                });
                self.combine(kind, old, reduced, dtype)
            };
            out.push(Stmt::Store {
                place: Place {
                    buffer: dst_id,
                    index: plan.dst_slots[slot],
                },
                value,
            });
        }
        Ok(())
    }

    /// `thread < n` when `layout` puts its elements on the first `n` threads of a block that has
    /// more; `None` when every thread of the block holds some.
    fn holds_elements(&mut self, layout: &crate::layout::FragmentLayout) -> Option<ValueId> {
        let extent = layout.thread_extent(&self.program.exprs);
        if extent >= self.threads {
            return None;
        }
        let thread = self.program.exprs.var_expr(self.program.thread);
        let extent = self.program.exprs.int(extent);
        Some(self.compare_indices(CompareOp::Lt, thread, extent))
    }

    /// Folds each thread's own elements of every slot into `partial[slot]`, as a balanced tree of
    /// pairs rather than a chain: the chain's 32 dependent steps were the longest latency of
    /// attention's softmax, the tree has five. Every level is stored into a temporary, so that no
    /// value tree grows with the number of elements; the tree's root is combined with the
    /// reduction's initial value, as the first step of the chain was.
    ///
    /// Where `held` is given (a source laid out on fewer threads than the block has), a thread for
    /// which it is false holds no element and folds the initial value instead of reading registers
    /// it never wrote; it still takes part in the shuffles and barriers of the all-reduce.
    fn fold_own_elements(
        &mut self,
        kind: ReduceKind,
        (src, slots, held): (tilec_ir::thread::BufferId, &[Vec<ExprId>], Option<ValueId>),
        (partial, dtype): (tilec_ir::thread::BufferId, DType),
        out: &mut Vec<Stmt>,
    ) {
        let widest = slots.iter().map(Vec::len).max().unwrap_or(0);
        let pairs =
            (widest > 1).then(|| self.temporary("pairs", dtype, table_int(widest.div_ceil(2))));
        for (slot, sources) in slots.iter().enumerate() {
            let elements: Vec<ValueId> = sources
                .iter()
                .map(|&index| {
                    let loaded = self.program.add_value(Value::Load { buffer: src, index });
                    let element = self.cast(loaded, dtype);
                    let operand = self.reduce_operand(kind, element, dtype);
                    match held {
                        Some(cond) => {
                            let init = self.constant(reduce_init(kind), dtype);
                            self.program.add_value(Value::Select {
                                cond,
                                then: operand,
                                otherwise: init,
                                dtype,
                            })
                        }
                        None => operand,
                    }
                })
                .collect();
            let root = match pairs {
                Some(pairs) => self.fold_pairs(kind, elements, (pairs, dtype), out),
                None => elements.first().copied(),
            };
            let init = self.constant(reduce_init(kind), dtype);
            let folded = match root {
                Some(root) => self.combine(kind, init, root, dtype),
                None => init,
            };
            let index = self.program.exprs.int(table_int(slot));
            out.push(Stmt::Store {
                place: Place {
                    buffer: partial,
                    index,
                },
                value: folded,
            });
        }
    }

    /// Combines `level` pairwise, level by level, in `pairs`; returns the root (`None` when there
    /// is no element).
    fn fold_pairs(
        &mut self,
        kind: ReduceKind,
        mut level: Vec<ValueId>,
        (pairs, dtype): (tilec_ir::thread::BufferId, DType),
        out: &mut Vec<Stmt>,
    ) -> Option<ValueId> {
        while level.len() > 1 {
            let mut next = Vec::with_capacity(level.len().div_ceil(2));
            for (i, pair) in level.chunks(2).enumerate() {
                let value = match *pair {
                    [a, b] => self.combine(kind, a, b, dtype),
                    // The odd one out is copied, so that the next level reads it from a slot
                    // this level's stores do not reach.
                    _ => pair[0],
                };
                let index = self.program.exprs.int(table_int(i));
                out.push(Stmt::Store {
                    place: Place {
                        buffer: pairs,
                        index,
                    },
                    value,
                });
                next.push(self.program.add_value(Value::Load {
                    buffer: pairs,
                    index,
                }));
            }
            level = next;
        }
        level.first().copied()
    }

    fn combine(&mut self, kind: ReduceKind, lhs: ValueId, rhs: ValueId, dtype: DType) -> ValueId {
        self.combine_op(reduce_combiner(kind), lhs, rhs, dtype)
    }

    fn reduce_operand(&mut self, kind: ReduceKind, value: ValueId, dtype: DType) -> ValueId {
        if matches!(kind, ReduceKind::AbsSum | ReduceKind::AbsMax) {
            self.program.add_value(Value::Unary {
                op: tilec_ir::thread::UnaryOp::Intrinsic(tilec_ir::Intrinsic::Abs),
                arg: value,
                dtype,
            })
        } else {
            value
        }
    }
}

/// The binary operation that combines two partial results of a reduction of `kind` (the absolute
/// value of `abs*` kinds is taken of each element before, not of partials).
fn reduce_combiner(kind: ReduceKind) -> BinaryOp {
    match kind {
        ReduceKind::Sum | ReduceKind::AbsSum => BinaryOp::Add,
        ReduceKind::Max | ReduceKind::AbsMax => BinaryOp::Max,
        ReduceKind::Min => BinaryOp::Min,
    }
}

/// `value`, a constant of lowering (zero, or the starting value of a reduction), as an integer of
/// `dtype`. An infinite starting value of a max or min reduction is the type's smallest or largest
/// value: a saturating cast to i64 gave `i64::MIN`, which wraps to 0 in an int32, so the maximum
/// of negative values came out 0.
fn int_constant(value: f64, dtype: DType) -> i64 {
    if value.is_infinite() {
        let (smallest, largest) = match dtype {
            DType::Bool => (0, 1),
            DType::Int8 => (i64::from(i8::MIN), i64::from(i8::MAX)),
            DType::Int16 => (i64::from(i16::MIN), i64::from(i16::MAX)),
            DType::Int32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
            DType::UInt8 => (0, i64::from(u8::MAX)),
            DType::UInt16 => (0, i64::from(u16::MAX)),
            DType::UInt32 => (0, i64::from(u32::MAX)),
            // uint64's largest value is beyond the i64 a constant holds; i64's largest stands in.
            DType::UInt64 => (0, i64::MAX),
            _ => (i64::MIN, i64::MAX),
        };
        return if value < 0.0 { smallest } else { largest };
    }
    // The finite constants of lowering are small whole numbers, exact in an i64.
    #[allow(clippy::cast_possible_truncation)]
    let whole = value as i64;
    whole
}

fn reduce_init(kind: ReduceKind) -> f64 {
    match kind {
        ReduceKind::Sum | ReduceKind::AbsSum | ReduceKind::AbsMax => 0.0,
        ReduceKind::Max => f64::NEG_INFINITY,
        ReduceKind::Min => f64::INFINITY,
    }
}

/// `region`'s start plus `indices` in each dimension.
fn offset_indices(
    arena: &mut tilec_ir::ExprArena,
    region: &Region,
    indices: &[ExprId],
) -> Vec<ExprId> {
    region
        .dims
        .iter()
        .zip(indices)
        .map(|(dim, &index)| arena.add(dim.start, index))
        .collect()
}
