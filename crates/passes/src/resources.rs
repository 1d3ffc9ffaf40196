//! Resource estimates from the inferred layouts: registers per thread for each fragment and for
//! the kernel (the fragments live at its peak), shared memory per buffer (pipeline stages
//! included) and at its peak, the blocks one multiprocessor can hold, the register-pressure
//! warning, and grids too large for the grid barrier they wait at.

use std::collections::BTreeMap;

use tilec_ir::{Anchor, Code, ControlOp, Diagnostic, EntityId, Scope, Target, TileOp, World};

use crate::check::{pipeline_stages, staged_bytes};

use crate::hardware::GpuModel;
use crate::layout::Layouts;
use crate::liveness::{launch_of, linearize, live_range, peak};

/// Registers one thread can have.
pub const MAX_REGISTERS_PER_THREAD: u64 = 255;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// 32-bit registers per thread that each fragment's elements take.
    pub fragment_registers: BTreeMap<EntityId, u64>,
    /// Per launch: the registers of the fragments live at the peak.
    pub peak_registers: BTreeMap<EntityId, u64>,
    /// Per shared buffer: its bytes and its pipeline stages (the bytes count every stage).
    pub shared: BTreeMap<EntityId, SharedBuffer>,
    /// Per launch: the bytes of the shared buffers live at the peak.
    pub peak_shared: BTreeMap<EntityId, u64>,
    /// Per launch: how many of its blocks one multiprocessor holds at once.
    pub occupancy: BTreeMap<EntityId, Occupancy>,
    pub diagnostics: Vec<Diagnostic>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedBuffer {
    pub bytes: u64,
    pub stages: i64,
}

/// Blocks per multiprocessor and the resource that limits them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Occupancy {
    pub blocks_per_sm: u64,
    pub limited_by: OccupancyLimit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OccupancyLimit {
    Threads,
    SharedMemory,
    /// Registers, counting the fragments' estimate only (the compiler adds addresses and counters).
    Registers,
    Blocks,
}

impl OccupancyLimit {
    pub fn name(self) -> &'static str {
        match self {
            OccupancyLimit::Threads => "threads",
            OccupancyLimit::SharedMemory => "shared memory",
            OccupancyLimit::Registers => "registers",
            OccupancyLimit::Blocks => "the block limit",
        }
    }
}

/// A shared buffer's bytes with every pipeline stage counted: the storage its layout addresses,
/// which a padded layout makes larger than the tile itself.
fn stored_bytes(world: &World, layouts: &Layouts, buffer: EntityId) -> Option<u64> {
    let declared = staged_bytes(world, buffer)?;
    let stages = u64::try_from(pipeline_stages(world, buffer)).unwrap_or(1);
    let stored = layouts
        .shared_storage_bytes(world, buffer)
        .map(|bytes| bytes.saturating_mul(stages));
    Some(stored.map_or(declared, |stored| stored.max(declared)))
}

/// Estimates registers, shared memory and occupancy from the layouts of `world`'s fragments, for
/// `target`.
pub fn estimate_resources(world: &World, layouts: &Layouts, target: Target) -> Resources {
    let mut resources = Resources::default();
    // A view of another buffer's bytes takes none of its own.
    for buffer in world.shared_buffers().filter(|&b| !world.is_byte_view(b)) {
        if let Some(bytes) = stored_bytes(world, layouts, buffer) {
            let stages = pipeline_stages(world, buffer);
            resources
                .shared
                .insert(buffer, SharedBuffer { bytes, stages });
        }
    }
    // An alias's registers are its base's.
    for (&buffer, inferred) in layouts.buffers.iter().filter(|(b, _)| !world.is_alias(**b)) {
        let bytes = world.dtypes.get(buffer).map_or(4, |dtype| dtype.bytes());
        let elements = u64::try_from(inferred.layout.held_per_thread(&layouts.exprs)).unwrap_or(0);
        resources
            .fragment_registers
            .insert(buffer, elements.saturating_mul(bytes).div_ceil(4));
    }
    for (launch, _) in world.launches.iter() {
        let order = linearize(world, launch);
        let ranges: Vec<(EntityId, u64, usize, usize)> = resources
            .fragment_registers
            .iter()
            .filter(|(buffer, _)| launch_of(world, **buffer) == Some(launch))
            .filter(|(buffer, _)| world.scopes.get(**buffer) == Some(&Scope::Fragment))
            .filter_map(|(&buffer, &registers)| {
                let (first, last) = live_range(world, &order, buffer)?;
                Some((buffer, registers, first, last))
            })
            .collect();
        let shared_ranges: Vec<(EntityId, u64, usize, usize)> = resources
            .shared
            .iter()
            .filter(|(buffer, _)| launch_of(world, **buffer) == Some(launch))
            .filter_map(|(&buffer, shared)| {
                let (first, last) = live_range(world, &order, buffer)?;
                Some((buffer, shared.bytes, first, last))
            })
            .collect();
        let shared = peak(order.len(), &shared_ranges).map_or(0, |(_, total, _)| total);
        resources.peak_shared.insert(launch, shared);
        let (_, total, live) = peak(order.len(), &ranges).unwrap_or((0, 0, Vec::new()));
        resources.peak_registers.insert(launch, total);
        let threads = world
            .launches
            .get(launch)
            .map_or(0, |l| u64::try_from(l.thread_count()).unwrap_or(0));
        let demand = BlockDemand {
            threads,
            shared,
            registers_per_thread: total,
        };
        let occupancy = demand.occupancy(SmLimits::of(target));
        resources.occupancy.insert(launch, occupancy);
        resources
            .diagnostics
            .extend(grid_barrier_capacity(world, launch, occupancy, target));
        if total > MAX_REGISTERS_PER_THREAD {
            resources
                .diagnostics
                .push(pressure(world, layouts, total, &live));
        }
    }
    resources
}

/// A grid barrier (`T.sync_grid`) needs every block of the grid resident at once. A launch
/// whose grid is known and holds more blocks than the target's multiprocessors can at the
/// occupancy estimated here could never pass its barrier: the estimate is an upper bound (it
/// counts the fragments' registers only), so more blocks than it allows never fit.
fn grid_barrier_capacity(
    world: &World,
    launch: EntityId,
    occupancy: Occupancy,
    target: Target,
) -> Option<Diagnostic> {
    let (barrier, _) = world.ops.iter().find(|(entity, op)| {
        matches!(op, TileOp::Control(ControlOp::SyncGrid))
            && launch_of(world, *entity) == Some(launch)
    })?;
    let grid = &world.launches.get(launch)?.grid;
    let blocks = grid.iter().try_fold(1u64, |product, &extent| {
        let extent = u64::try_from(world.exprs.as_int(extent)?).ok()?;
        product.checked_mul(extent)
    })?;
    let gpu = GpuModel::default_for(target)?;
    let capacity = occupancy.blocks_per_sm.saturating_mul(gpu.sms);
    if blocks <= capacity {
        return None;
    }
    let message = format!(
        "`T.sync_grid` needs all {blocks} blocks of the grid resident at once, but {} ({target}) \
         holds at most {capacity}: {} per multiprocessor (limited by {}) on {} multiprocessors, \
         so the barrier would never be passed",
        gpu.name,
        occupancy.blocks_per_sm,
        occupancy.limited_by.name(),
        gpu.sms
    );
    Some(
        Diagnostic::error(Code::InvalidCall, Anchor::Entity(barrier), message).with_help(
            "launch at most one wave of blocks (`driver.get_num_sms()` times the blocks one \
             multiprocessor holds) and let each block walk several tiles",
        ),
    )
}

fn pressure(world: &World, layouts: &Layouts, total: u64, live: &[(EntityId, u64)]) -> Diagnostic {
    let Some(&(largest, registers)) = live.iter().max_by_key(|(_, registers)| *registers) else {
        return Diagnostic::warning(
            Code::RegisterPressure,
            Anchor::Entity(EntityId::from_index(0)),
            "",
        );
    };
    let shape = world.const_shape(largest).unwrap_or_default();
    let shape: Vec<String> = shape.iter().map(i64::to_string).collect();
    let dtype = world.dtypes.get(largest).map_or("?", |d| d.name());
    let threads = layouts
        .buffers
        .get(&largest)
        .map_or(0, |inferred| inferred.layout.thread_extent(&layouts.exprs));
    let message = format!(
        "the fragments live here need an estimated {total} registers per thread, more than the {MAX_REGISTERS_PER_THREAD} a thread can have: the compiler will spill to slow local memory (`{}`, {} {dtype} over {threads} threads, alone takes {registers})",
        world.name(largest),
        shape.join("×"),
    );
    // With sizes tilec assumed for a generic instance (128 for every tile of a kernel its callers
    // configure), the pressure is the assumption's, not the kernel's: said as information, as a
    // shared-memory excess is said as a warning there instead of an error.
    let mut diagnostic = if world.assumed_args.is_empty() {
        Diagnostic::warning(Code::RegisterPressure, Anchor::Entity(largest), message).with_help(
            "use smaller tiles or more threads, or keep part of the tile in shared memory",
        )
    } else {
        Diagnostic::info(
            Code::RegisterPressure,
            Anchor::Entity(largest),
            format!("{message}, with the values tilec assumed for this generic instance"),
        )
        .with_help(
            "the kernel may fit with the sizes it is called with: pass them at a call site, or \
             list the instance in tilec.toml",
        )
    };
    for &(buffer, registers) in live.iter().filter(|(buffer, _)| *buffer != largest) {
        diagnostic = diagnostic.with_related(
            Anchor::Entity(buffer),
            format!("`{}` adds {registers}", world.name(buffer)),
        );
    }
    diagnostic
}

/// What one block asks of a multiprocessor.
#[derive(Clone, Copy, Debug)]
pub struct BlockDemand {
    pub threads: u64,
    pub shared: u64,
    pub registers_per_thread: u64,
}

/// What one multiprocessor offers the blocks resident on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmLimits {
    pub threads: u64,
    pub blocks: u64,
    /// Bytes of shared memory blocks can use.
    pub shared_memory: u64,
    /// Bytes the driver keeps for each resident block.
    pub reserved_shared_per_block: u64,
    /// 32-bit registers.
    pub registers: u64,
}

impl SmLimits {
    /// The limits of `target`'s architecture.
    pub fn of(target: Target) -> SmLimits {
        SmLimits {
            threads: target.threads_per_sm(),
            blocks: target.blocks_per_sm(),
            shared_memory: target.shared_memory_per_sm(),
            reserved_shared_per_block: target.reserved_shared_memory_per_block(),
            registers: target.registers_per_sm(),
        }
    }
}

impl BlockDemand {
    /// How many such blocks fit on one multiprocessor with `sm`'s limits, and what runs out first.
    /// The register count is rounded up to a multiple of 8 per thread, as the hardware allocates.
    pub fn occupancy(self, sm: SmLimits) -> Occupancy {
        let by_threads = sm.threads / self.threads.max(1);
        let per_block_shared = self.shared.saturating_add(sm.reserved_shared_per_block);
        let by_shared = if self.shared == 0 {
            u64::MAX
        } else {
            sm.shared_memory / per_block_shared
        };
        let registers =
            (self.registers_per_thread.div_ceil(8).saturating_mul(8)).saturating_mul(self.threads);
        let by_registers = sm.registers.checked_div(registers).unwrap_or(u64::MAX);
        let limits = [
            (sm.blocks, OccupancyLimit::Blocks),
            (by_threads, OccupancyLimit::Threads),
            (by_shared, OccupancyLimit::SharedMemory),
            (by_registers, OccupancyLimit::Registers),
        ];
        let (blocks_per_sm, limited_by) = limits
            .into_iter()
            .min_by_key(|(blocks, _)| *blocks)
            .unwrap_or((0, OccupancyLimit::Blocks));
        Occupancy {
            blocks_per_sm,
            limited_by,
        }
    }
}
