//! Live ranges of buffers within a launch, and the peak of what is live at once: shared memory
//! and registers are both sized by it.

use tilec_ir::{AccessKind, EntityId, EntityKind, World};

/// The launch an entity belongs to (its outermost `T.Kernel` ancestor).
pub fn launch_of(world: &World, mut entity: EntityId) -> Option<EntityId> {
    loop {
        if world.kind(entity) == Some(EntityKind::Kernel) {
            return Some(entity);
        }
        entity = *world.parents.get(entity)?;
    }
}

/// The statements of a launch in execution order (loop bodies inline).
pub fn linearize(world: &World, launch: EntityId) -> Vec<EntityId> {
    let mut out = Vec::new();
    linearize_into(world, launch, &mut out);
    out
}

fn linearize_into(world: &World, entity: EntityId, out: &mut Vec<EntityId>) {
    for &child in world.body(entity) {
        linearize_statement(world, child, out);
    }
}

/// `statement`, what it nests, then its `else` body: each statement of which is linearized the
/// same way, so that the `else` of an `elif` (an `if` in an `else` body) is reached too.
fn linearize_statement(world: &World, statement: EntityId, out: &mut Vec<EntityId>) {
    out.push(statement);
    linearize_into(world, statement, out);
    for &other in world
        .else_bodies
        .get(statement)
        .map_or(&[][..], Vec::as_slice)
    {
        linearize_statement(world, other, out);
    }
}

/// The positions in `order` over which an access at `position` keeps a buffer live: the whole of
/// its outermost enclosing loop (all iterations of a `T.Parallel` run at once, and no allocator
/// frees a buffer between the iterations of a serial loop), or just that statement.
fn live_span(world: &World, order: &[EntityId], position: usize) -> (usize, usize) {
    let mut outermost_loop = None;
    let mut entity = order[position];
    let thread = launch_of(world, entity)
        .and_then(|launch| world.launches.get(launch))
        .and_then(|launch| launch.thread_var);
    while let Some(&parent) = world.parents.get(entity) {
        // The branches of an `if` on the thread index run at the same time, on different
        // threads (warp roles): what one branch touches is live through the other as well.
        let divergent_if = world.kind(entity) == Some(EntityKind::If)
            && thread.is_some_and(|thread| {
                world
                    .conditions
                    .get(entity)
                    .is_some_and(|&cond| reads_thread(world, cond, thread))
            });
        if world.kind(entity) == Some(EntityKind::Loop) || divergent_if {
            outermost_loop = Some(entity);
        }
        entity = parent;
    }
    let Some(outer) = outermost_loop else {
        return (position, position);
    };
    let start = order.iter().position(|&e| e == outer).unwrap_or(position);
    let end = (start..order.len())
        .take_while(|&p| p == start || is_inside(world, order[p], outer))
        .last()
        .unwrap_or(position);
    (start, end)
}

/// Whether the condition reads the thread index, directly or in the indices of a load.
fn reads_thread(world: &World, value: tilec_ir::DataId, thread: tilec_ir::VarId) -> bool {
    let mut stack = vec![value];
    let mut seen = 0usize;
    while let Some(id) = stack.pop() {
        seen += 1;
        if seen > 10_000 || id.index() >= world.data.len() {
            return false;
        }
        let node = world.data.get(id);
        let found = match node {
            tilec_ir::DataExpr::Index(e) => world.exprs.vars_of(*e).contains(&thread),
            tilec_ir::DataExpr::Load { indices, .. } => indices
                .iter()
                .any(|&e| world.exprs.vars_of(e).contains(&thread)),
            _ => false,
        };
        if found {
            return true;
        }
        stack.extend(node.operands());
    }
    false
}

fn is_inside(world: &World, mut entity: EntityId, ancestor: EntityId) -> bool {
    while let Some(&parent) = world.parents.get(entity) {
        if parent == ancestor {
            return true;
        }
        entity = parent;
    }
    false
}

/// The range of positions in `order` over which `buffer` is live, if it is ever accessed (through
/// itself, through a `T.reshape` / `T.view` alias of it, or through a view of its bytes with
/// another dtype).
pub fn live_range(world: &World, order: &[EntityId], buffer: EntityId) -> Option<(usize, usize)> {
    let stored_in = |accessed: EntityId| {
        let storage = world.storage_of(accessed);
        storage == buffer || world.byte_views.get(storage) == Some(&buffer)
    };
    let touching: Vec<usize> = (0..order.len())
        .filter(|&p| {
            world.accesses.get(order[p]).is_some_and(|accesses| {
                accesses
                    .iter()
                    .any(|access| stored_in(access.region.buffer))
            })
        })
        .collect();
    let first = live_span(world, order, *touching.first()?).0;
    let last = live_span(world, order, *touching.last()?).1;
    Some((first, last))
}

/// Whether `buffer`'s first access in `order` overwrites all of it without reading it, so that
/// nothing it held before that statement is ever read. A persistent launch runs `order` once per
/// tile: such a buffer carries nothing from one tile to the next, and its live range within the
/// tile is all there is of it.
pub fn first_access_overwrites(world: &World, order: &[EntityId], buffer: EntityId) -> bool {
    let first = order.iter().find_map(|&statement| {
        let accesses = world.accesses.get(statement)?;
        let touching: Vec<_> = accesses
            .iter()
            .filter(|access| world.storage_of(access.region.buffer) == buffer)
            .collect();
        (!touching.is_empty()).then_some(touching)
    });
    let Some(accesses) = first else {
        return false;
    };
    accesses.iter().all(|access| {
        access.kind == AccessKind::Write
            && access.region.buffer == buffer
            && covers_whole_buffer(world, &access.region)
    })
}

/// Whether `region` is every element of its buffer: each dimension starts at zero and spans
/// the buffer's (constant) extent.
fn covers_whole_buffer(world: &World, region: &tilec_ir::Region) -> bool {
    let Some(shape) = world.const_shape(region.buffer) else {
        return false;
    };
    region.dims.len() == shape.len()
        && region.dims.iter().zip(&shape).all(|(dim, &extent)| {
            world.exprs.as_int(dim.start) == Some(0)
                && dim.extent.and_then(|e| world.exprs.as_int(e)) == Some(extent)
        })
}

/// Where the most weight is live: the position, the total weight there, and the live items.
pub type Peak<T> = (usize, u64, Vec<(T, u64)>);

/// The position where the most weight is live, that weight (saturating) and the items live there,
/// given `(item, weight, first, last)` live ranges.
pub fn peak<T: Copy>(positions: usize, ranges: &[(T, u64, usize, usize)]) -> Option<Peak<T>> {
    (0..positions)
        .map(|point| {
            let live: Vec<(T, u64)> = ranges
                .iter()
                .filter(|(_, _, first, last)| *first <= point && point <= *last)
                .map(|(item, weight, _, _)| (*item, *weight))
                .collect();
            let total = live
                .iter()
                .fold(0u64, |sum, (_, weight)| sum.saturating_add(*weight));
            (point, total, live)
        })
        .max_by_key(|(point, total, _)| (*total, std::cmp::Reverse(*point)))
}
