//! A roofline estimate of a kernel instance's run time, for ranking tile configurations without
//! running anything (seed 000 §2: time is the slowest of memory traffic over bandwidth and work
//! over peak rate, plus fixed costs).
//!
//! The estimate has two halves. [`workload`] reads what the kernel asks for off the world and the
//! resource estimates: blocks, threads, shared memory, registers, the global bytes each block moves,
//! its tensor-core FLOPs and its CUDA-core element operations. It knows nothing of a GPU.
//! [`estimate`] prices a workload on one [`GpuModel`]: occupancy, waves, the bytes in flight that
//! hide memory latency, and the time of each roof. Every part is kept, so a ranking can say why.

use tilec_ir::{AccessKind, EntityId, EntityKind, ExprId, LoopKind, Scope, TileOp, VarId, World};

use crate::hardware::GpuModel;
use crate::layout::tensor_core::warp_partition;
use crate::resources::{BlockDemand, OccupancyLimit, Resources};

/// Registers a thread needs beyond its fragments: indices, addresses, loop counters. A fixed
/// figure; ptxas reports 16-40 for the corpus' kernels.
const BASE_REGISTERS: u64 = 24;

/// Warps per multiprocessor the tensor cores need to stay busy with mma.sync: two per scheduler.
const TENSOR_WARPS_PER_SM: f64 = 8.0;

/// What one instance asks of any GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub launches: Vec<LaunchWorkload>,
}

/// What one `T.Kernel` launch asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchWorkload {
    pub launch: EntityId,
    pub blocks: u64,
    pub threads: u64,
    pub shared_bytes: u64,
    /// Fragments at their peak plus operand fragments and a fixed base; an estimate.
    pub registers_per_thread: u64,
    /// Global-memory bytes one block reads and writes, all through L2.
    pub block_bytes: f64,
    /// Global bytes one block requests per step of its sequential loops, with pipeline stages:
    /// what it keeps in flight.
    pub block_bytes_in_flight: f64,
    /// Distinct bytes of the global tensors the launch touches: what device memory moves at least.
    pub unique_bytes: f64,
    /// Shared-memory bytes one block reads and writes (a gemm's operands once per warp that
    /// reads them).
    pub block_shared_bytes: f64,
    /// Iterations of the block's sequential loops that load from global memory, and how many
    /// iterations ahead a pipeline issues those loads (0 when they are synchronous).
    pub load_iterations: f64,
    pub load_ahead: f64,
    pub block_tensor_flops: f64,
    /// Element operations on the CUDA cores (one per element a parallel loop or reduction
    /// produces).
    pub block_simt_ops: f64,
}

/// Which roof bounds an estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    DeviceMemory,
    L2,
    SharedMemory,
    TensorCores,
    CudaCores,
}

impl Bound {
    pub fn name(self) -> &'static str {
        match self {
            Bound::DeviceMemory => "device memory",
            Bound::L2 => "L2",
            Bound::SharedMemory => "shared memory",
            Bound::TensorCores => "tensor cores",
            Bound::CudaCores => "CUDA cores",
        }
    }
}

/// One launch priced on one GPU; times in seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchEstimate {
    pub blocks_per_sm: u64,
    pub limited_by: OccupancyLimit,
    pub waves: u64,
    /// Busy block slots over all slots of all waves: the last wave's idle share is the loss.
    pub wave_efficiency: f64,
    pub warps_per_sm: u64,
    /// Bytes in flight over what hides device-memory latency, capped at 1.
    pub memory_parallelism: f64,
    /// Resident warps over what keeps the tensor cores busy, capped at 1.
    pub tensor_parallelism: f64,
    pub dram_seconds: f64,
    pub l2_seconds: f64,
    pub shared_seconds: f64,
    pub tensor_seconds: f64,
    pub simt_seconds: f64,
    /// Device-memory latency the pipeline does not hide, added to the slowest roof.
    pub latency_seconds: f64,
    pub bound: Bound,
    pub seconds: f64,
}

/// An instance priced on one GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub launches: Vec<LaunchEstimate>,
    pub seconds: f64,
}

/// What a kernel asks for, or why that cannot be known (a dynamic grid, say).
pub fn workload(world: &World, resources: &Resources) -> Result<Workload, String> {
    let mut launches = Vec::new();
    for (launch, info) in world.launches.iter() {
        let blocks = info
            .grid
            .iter()
            .map(|&extent| world.exprs.as_int(extent))
            .try_fold(1u64, |total, extent| {
                extent.and_then(|e| u64::try_from(e).ok().map(|e| total.saturating_mul(e)))
            })
            .ok_or("the grid depends on a dynamic dimension")?;
        let threads = u64::try_from(info.thread_count()).unwrap_or(0);
        let mut work = LaunchWorkload {
            launch,
            blocks,
            threads,
            shared_bytes: resources.peak_shared.get(&launch).copied().unwrap_or(0),
            registers_per_thread: 0,
            block_bytes: 0.0,
            block_bytes_in_flight: 0.0,
            block_shared_bytes: 0.0,
            load_iterations: 0.0,
            load_ahead: 0.0,
            unique_bytes: 0.0,
            block_tensor_flops: 0.0,
            block_simt_ops: 0.0,
        };
        let grid = GridAverage::new(world, &info.grid, &info.block_vars);
        let operand_registers = count_launch_work(world, launch, &grid, &mut work);
        let fragments = resources.peak_registers.get(&launch).copied().unwrap_or(0);
        work.registers_per_thread = fragments + operand_registers + BASE_REGISTERS;
        work.unique_bytes = unique_bytes(world, launch);
        launches.push(work);
    }
    if launches.is_empty() {
        return Err("the kernel has no `with T.Kernel(...)` launch".to_owned());
    }
    Ok(Workload { launches })
}

/// Adds every entity of `launch` to `work`; returns the largest register count a gemm's operand
/// fragments take (they live in registers only during the gemm, so the largest counts).
fn count_launch_work(
    world: &World,
    launch: EntityId,
    grid: &GridAverage,
    work: &mut LaunchWorkload,
) -> u64 {
    let mut operand_registers = 0;
    for entity in world.entities() {
        if launch_of(world, entity) != Some(launch) {
            continue;
        }
        let trips = enclosing_trips(world, entity, grid);
        count_accesses(world, entity, grid, &trips, work);
        match world.ops.get(entity) {
            Some(op @ TileOp::Gemm { .. }) => {
                let registers = count_gemm(world, op, &trips, work).unwrap_or(0);
                operand_registers = operand_registers.max(registers);
            }
            Some(TileOp::Reduce { src, .. }) => {
                work.block_simt_ops += region_elements(world, &src.dims, grid) * trips.all;
            }
            _ => {}
        }
        if world.stores.get(entity).is_some() {
            work.block_simt_ops += trips.all;
        }
    }
    operand_registers
}

/// Adds the global and shared-memory bytes of `entity`'s accesses (a gemm's shared operands are
/// counted by [`count_gemm`], per warp).
fn count_accesses(
    world: &World,
    entity: EntityId,
    grid: &GridAverage,
    trips: &Trips,
    work: &mut LaunchWorkload,
) {
    let accesses = world.accesses.get(entity).map_or(&[][..], Vec::as_slice);
    // A copy may name one side by its corner alone (`T.copy(A[by * 128, k * 32], A_shared)`):
    // both sides move as many elements as the larger region says.
    let op_elements = accesses
        .iter()
        .map(|access| region_elements(world, &access.region.dims, grid))
        .fold(1.0, f64::max);
    let op = world.ops.get(entity);
    let is_gemm = matches!(op, Some(TileOp::Gemm { .. }));
    for access in accesses {
        let storage = world.storage_of(access.region.buffer);
        let scope = world.scopes.get(storage).copied();
        let elements = if op.is_some() {
            op_elements
        } else {
            region_elements(world, &access.region.dims, grid)
        };
        let bytes = elements * element_bytes(world, storage);
        if scope.is_some_and(Scope::is_shared) && !is_gemm {
            work.block_shared_bytes += bytes * trips.all;
        }
        if scope != Some(Scope::Global) {
            continue;
        }
        let reads = access.kind != AccessKind::Write;
        if reads && trips.sequential > work.load_iterations {
            work.load_iterations = trips.sequential;
            work.load_ahead = trips.ahead;
        }
        let directions = if access.kind == AccessKind::ReadWrite {
            2.0
        } else {
            1.0
        };
        work.block_bytes += bytes * trips.all * directions;
        if reads {
            work.block_bytes_in_flight += bytes * trips.parallel * trips.ahead.max(1.0);
        }
    }
}

/// Adds a gemm's tensor FLOPs and the shared-memory bytes its warps read; returns the registers a
/// lane's operand fragments take, or `None` when its shape or warp split is not known.
fn count_gemm(world: &World, op: &TileOp, trips: &Trips, work: &mut LaunchWorkload) -> Option<u64> {
    let TileOp::Gemm {
        a,
        b,
        c,
        transpose_a,
        policy,
        ..
    } = op
    else {
        return None;
    };
    let extent = |dims: &[tilec_ir::RegionDim], from_end: usize| {
        let dim = dims.len().checked_sub(from_end)?;
        dims.get(dim)?
            .extent
            .map_or(Some(1), |e| world.exprs.as_int(e))
    };
    let (m, n) = (extent(&c.dims, 2)?, extent(&c.dims, 1)?);
    let k = extent(&a.dims, if *transpose_a { 2 } else { 1 })?;
    work.block_tensor_flops += 2.0 * (m * n * k) as f64 * trips.all;
    let warps = i64::try_from(work.threads / 32).unwrap_or(1);
    let (wm, wn) = warp_partition(m, n, warps, *policy).ok()?;
    let scope = |buffer| world.scopes.get(world.storage_of(buffer)).copied();
    let in_shared = |buffer| scope(buffer).is_some_and(Scope::is_shared);
    // Each of the wn warps of a warp row reads all of A's rows it multiplies, and each of the wm
    // warps of a column reads B's columns.
    let mut shared_reads = 0.0;
    if in_shared(a.buffer) {
        shared_reads += (m * k * wn) as f64 * element_bytes(world, world.storage_of(a.buffer));
    }
    if in_shared(b.buffer) {
        shared_reads += (n * k * wm) as f64 * element_bytes(world, world.storage_of(b.buffer));
    }
    work.block_shared_bytes += shared_reads * trips.all;
    // Per 16-deep k step a lane holds rows / 4 registers of A (unless A is a fragment, counted
    // with the fragments) and cols / 4 of B.
    let a_registers = if scope(a.buffer) == Some(Scope::Fragment) {
        0
    } else {
        m / wm / 4
    };
    u64::try_from(a_registers + n / wn / 4).ok()
}

fn element_bytes(world: &World, buffer: EntityId) -> f64 {
    world.dtypes.get(buffer).map_or(0.0, |d| d.bytes() as f64)
}

/// How often an entity runs per block: in all, across its parallel loops alone, and the
/// pipeline stages its innermost pipelined loop keeps in flight.
struct Trips {
    all: f64,
    parallel: f64,
    sequential: f64,
    /// Iterations a pipelined loop issues ahead (`num_stages - 1`), 0 outside one.
    ahead: f64,
}

fn enclosing_trips(world: &World, entity: EntityId, grid: &GridAverage) -> Trips {
    let mut trips = Trips {
        all: 1.0,
        parallel: 1.0,
        sequential: 1.0,
        ahead: 0.0,
    };
    let mut current = world.parents.get(entity).copied();
    while let Some(ancestor) = current {
        if let Some(info) = world.loops.get(ancestor) {
            let count: f64 = info.extents.iter().map(|&e| grid.value(world, e)).product();
            trips.all *= count;
            match info.kind {
                LoopKind::Parallel => trips.parallel *= count,
                LoopKind::Pipelined { num_stages } => {
                    trips.sequential *= count;
                    if trips.ahead == 0.0 {
                        // k stages keep k - 1 iterations' loads in flight ahead of the consumer.
                        trips.ahead = (num_stages - 1).max(0) as f64;
                    }
                }
                // A `while` has no extent (`count` is one): its trips are only known when it runs,
                // so the model counts one.
                LoopKind::Serial | LoopKind::Unroll | LoopKind::While => {
                    trips.sequential *= count;
                }
            }
        }
        current = world.parents.get(ancestor).copied();
    }
    trips
}

fn region_elements(world: &World, dims: &[tilec_ir::RegionDim], grid: &GridAverage) -> f64 {
    dims.iter()
        .map(|dim| dim.extent.map_or(1.0, |e| grid.value(world, e)))
        .product()
}

fn launch_of(world: &World, entity: EntityId) -> Option<EntityId> {
    let mut current = Some(entity);
    while let Some(e) = current {
        if world.kind(e) == Some(EntityKind::Kernel) {
            return Some(e);
        }
        current = world.parents.get(e).copied();
    }
    None
}

/// Bytes of every global tensor `launch` touches, once (twice when it both reads and writes it).
fn unique_bytes(world: &World, launch: EntityId) -> f64 {
    let mut directions: Vec<(EntityId, bool, bool)> = Vec::new();
    for entity in world.entities() {
        if launch_of(world, entity) != Some(launch) {
            continue;
        }
        for access in world.accesses.get(entity).map_or(&[][..], Vec::as_slice) {
            let storage = world.storage_of(access.region.buffer);
            if world.scopes.get(storage) != Some(&Scope::Global) {
                continue;
            }
            let read = access.kind != AccessKind::Write;
            let write = access.kind != AccessKind::Read;
            match directions.iter_mut().find(|(b, ..)| *b == storage) {
                Some(entry) => {
                    entry.1 |= read;
                    entry.2 |= write;
                }
                None => directions.push((storage, read, write)),
            }
        }
    }
    directions
        .iter()
        .map(|&(buffer, read, write)| {
            let elements: f64 = world
                .const_shape(buffer)
                .map_or(0.0, |shape| shape.iter().map(|&e| e as f64).product());
            elements
                * element_bytes(world, buffer)
                * (f64::from(u8::from(read)) + f64::from(u8::from(write)))
        })
        .sum()
}

/// Values of expressions that may depend on the block index (a causal loop's trip count), averaged
/// over the grid: exactly when the grid is small, over evenly spaced samples otherwise.
struct GridAverage {
    samples: Vec<Vec<(VarId, i64)>>,
}

impl GridAverage {
    const MAX_SAMPLES: usize = 4096;
    const PER_DIM: i64 = 16;

    fn new(world: &World, grid: &[ExprId], vars: &[VarId]) -> GridAverage {
        let extents: Vec<i64> = grid
            .iter()
            .map(|&e| world.exprs.as_int(e).unwrap_or(1).max(1))
            .collect();
        let total: i64 = extents.iter().product();
        let exact = usize::try_from(total).is_ok_and(|t| t <= Self::MAX_SAMPLES);
        let mut samples = vec![Vec::new()];
        for (&var, &extent) in vars.iter().zip(&extents) {
            let points: Vec<i64> = if exact || extent <= Self::PER_DIM {
                (0..extent).collect()
            } else {
                (0..Self::PER_DIM)
                    .map(|i| i * (extent - 1) / (Self::PER_DIM - 1))
                    .collect()
            };
            samples = samples
                .into_iter()
                .flat_map(|prefix| {
                    points.iter().map(move |&p| {
                        let mut next = prefix.clone();
                        next.push((var, p));
                        next
                    })
                })
                .collect();
        }
        GridAverage { samples }
    }

    /// The constant, or the average over the grid; 1 when it cannot be evaluated.
    fn value(&self, world: &World, e: ExprId) -> f64 {
        if let Some(value) = world.exprs.as_int(e) {
            return value as f64;
        }
        let values: Vec<i64> = self
            .samples
            .iter()
            .filter_map(|env| {
                world.exprs.eval(e, &|v| {
                    env.iter().find(|(var, _)| *var == v).map(|&(_, x)| x)
                })
            })
            .collect();
        if values.is_empty() {
            return 1.0;
        }
        values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64
    }
}

/// Prices `workload` on `gpu`, or says why it cannot run there at all.
pub fn estimate(workload: &Workload, gpu: &GpuModel) -> Result<Estimate, String> {
    let launches = workload
        .launches
        .iter()
        .map(|launch| estimate_launch(launch, gpu))
        .collect::<Result<Vec<_>, String>>()?;
    let seconds = launches.iter().map(|l| l.seconds).sum();
    Ok(Estimate { launches, seconds })
}

fn estimate_launch(work: &LaunchWorkload, gpu: &GpuModel) -> Result<LaunchEstimate, String> {
    if work.registers_per_thread > gpu.max_registers_per_thread {
        return Err(format!(
            "about {} registers per thread, over the {} a thread can have: it would spill",
            work.registers_per_thread, gpu.max_registers_per_thread
        ));
    }
    let occupancy = BlockDemand {
        threads: work.threads,
        shared: work.shared_bytes,
        registers_per_thread: work.registers_per_thread,
    }
    .occupancy(gpu.sm_limits());
    if occupancy.blocks_per_sm == 0 {
        return Err(format!(
            "one block does not fit on a multiprocessor of the {} ({} runs out)",
            gpu.name,
            occupancy.limited_by.name()
        ));
    }
    let slots = occupancy.blocks_per_sm * gpu.sms;
    let waves = work.blocks.div_ceil(slots).max(1);
    let wave_efficiency = work.blocks as f64 / (waves * slots) as f64;
    let resident_blocks = occupancy.blocks_per_sm.min(work.blocks.div_ceil(gpu.sms));
    let warps_per_sm = resident_blocks * work.threads.div_ceil(gpu.warp_size);
    // Little's law: device memory delivers full bandwidth only with bandwidth x latency bytes
    // requested and not yet returned, spread over the multiprocessors.
    let needed_in_flight = gpu.dram_gbs * 1e9 * gpu.latency_us * 1e-6 / gpu.sms as f64;
    let in_flight = resident_blocks as f64 * work.block_bytes_in_flight;
    let memory_parallelism = (in_flight / needed_in_flight).clamp(0.05, 1.0);
    let tensor_parallelism = (warps_per_sm as f64 / TENSOR_WARPS_PER_SM).clamp(0.05, 1.0);
    let blocks = work.blocks as f64;
    let dram_seconds = work.unique_bytes / (gpu.dram_gbs * 1e9) / memory_parallelism;
    let l2_seconds = blocks * work.block_bytes / (gpu.l2_gbs * 1e9) / memory_parallelism;
    let tensor_seconds =
        blocks * work.block_tensor_flops / (gpu.tensor_tflops * 1e12) / tensor_parallelism;
    // An FMA counts as two FLOPs in the peak; an element operation is taken as one instruction.
    let simt_seconds = blocks * work.block_simt_ops / (gpu.simt_tflops * 1e12 / 2.0);
    let shared_seconds = blocks * work.block_shared_bytes / (gpu.shared_gbs * 1e9);
    let roofs = [
        (dram_seconds, Bound::DeviceMemory),
        (l2_seconds, Bound::L2),
        (shared_seconds, Bound::SharedMemory),
        (tensor_seconds, Bound::TensorCores),
        (simt_seconds, Bound::CudaCores),
    ];
    let (slowest, bound) = roofs
        .into_iter()
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .unwrap_or((0.0, Bound::DeviceMemory));
    let latency_seconds = exposed_latency(work, gpu, slowest, waves, resident_blocks);
    Ok(LaunchEstimate {
        blocks_per_sm: occupancy.blocks_per_sm,
        limited_by: occupancy.limited_by,
        waves,
        wave_efficiency,
        warps_per_sm,
        memory_parallelism,
        tensor_parallelism,
        dram_seconds,
        l2_seconds,
        shared_seconds,
        tensor_seconds,
        simt_seconds,
        latency_seconds,
        bound,
        seconds: slowest / wave_efficiency + latency_seconds + gpu.launch_us * 1e-6,
    })
}

/// The device-memory latency a block waits out with nothing to do. Each iteration of its loading
/// loop waits for its loads unless the iterations a pipeline issued them ahead of take longer
/// than the latency; other resident blocks fill the wait, so it is divided among them.
fn exposed_latency(
    work: &LaunchWorkload,
    gpu: &GpuModel,
    slowest: f64,
    waves: u64,
    resident_blocks: u64,
) -> f64 {
    if work.load_iterations <= 0.0 || resident_blocks == 0 {
        return 0.0;
    }
    let latency = gpu.latency_us * 1e-6;
    // The busy time of one iteration of one block, from the slowest roof shared by the blocks
    // resident at once.
    let per_iteration = slowest / waves as f64 / work.load_iterations;
    let hidden = work.load_ahead * per_iteration;
    let exposed = (latency - hidden).max(0.0);
    waves as f64 * work.load_iterations * exposed / resident_blocks as f64
}
