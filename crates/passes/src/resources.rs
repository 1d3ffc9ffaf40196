//! Resource estimates from the inferred layouts: registers per thread for each fragment and for
//! the kernel (the fragments live at its peak), and the register-pressure warning.

use std::collections::BTreeMap;

use tilec_ir::{Anchor, Code, Diagnostic, EntityId, Scope, World};

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
    pub diagnostics: Vec<Diagnostic>,
}

/// Estimates registers from the layouts of `world`'s fragments.
pub fn estimate_resources(world: &World, layouts: &Layouts) -> Resources {
    let mut resources = Resources::default();
    for (&buffer, inferred) in &layouts.buffers {
        let bytes = world.dtypes.get(buffer).map_or(4, |dtype| dtype.bytes());
        let elements = u64::try_from(inferred.layout.local_size(&layouts.exprs)).unwrap_or(0);
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
        let Some((_, total, live)) = peak(order.len(), &ranges) else {
            continue;
        };
        resources.peak_registers.insert(launch, total);
        if total > MAX_REGISTERS_PER_THREAD {
            resources
                .diagnostics
                .push(pressure(world, layouts, total, &live));
        }
    }
    resources
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
    let mut diagnostic =
        Diagnostic::warning(Code::RegisterPressure, Anchor::Entity(largest), message).with_help(
            "use smaller tiles or more threads, or keep part of the tile in shared memory",
        );
    for &(buffer, registers) in live.iter().filter(|(buffer, _)| *buffer != largest) {
        diagnostic = diagnostic.with_related(
            Anchor::Entity(buffer),
            format!("`{}` adds {registers}", world.name(buffer)),
        );
    }
    diagnostic
}
