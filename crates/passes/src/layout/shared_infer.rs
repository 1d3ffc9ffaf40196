//! Shared-memory layouts of an instance: where each element of a shared tile is stored.
//!
//! A `T.annotate_layout` with `T.Layout(shape, fn)` fixes a buffer's layout, and one with
//! `make_swizzled_layout(buf)` gives it the swizzled layout of a gemm operand; a `T.gemm` operand in
//! shared memory gets TileLang's swizzled operand layout (two gemms that disagree merge to the
//! smaller swizzle, as `MergeSwizzleLayouts` does, or conflict); a buffer a `T.copy` moves to or
//! from a fragment gets its rows padded by 16 bytes when they are a whole number of 32-byte
//! sectors (XOR-swizzled instead where TMA stores are asked for), because a fragment's threads
//! touch eight rows at once and unpadded rows would put them all in the same banks; every other
//! shared buffer is row-major. Each layout is an [`IndexMap`] from the logical index
//! to one storage offset, checked injective by enumeration.

use std::collections::BTreeMap;

use tilec_ir::{Anchor, Code, Diagnostic, EntityId, ExprArena, ExprId, LayoutKind, TileOp, World};

use super::algebra::IndexMap;
use super::fragment::for_each_point;
use super::shared::{SharedLayout, gemm_operand_layout, merge_swizzles, widest_bank_swizzle};

/// How a shared buffer's layout was decided.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SharedOrigin {
    /// `T.annotate_layout` with `T.Layout`.
    Annotation,
    /// The operand layout of a `T.gemm` (bank-swizzled or padded).
    GemmOperand,
    /// Padded or swizzled because a `T.copy` moves it to or from a fragment.
    FragmentCopy,
    /// No op asks for anything else.
    RowMajor,
    /// The padded tile lowering adds to stage a gemm accumulator's store (`lower/epilogue.rs`);
    /// never in the layouts inference reports, only in the copy lowering makes of them.
    EpilogueStaging,
}

/// The layout of one shared buffer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedAssigned {
    /// Logical index → storage offset (one output).
    pub map: IndexMap,
    /// Elements of storage the layout addresses (the largest offset plus one; more than the
    /// tile's elements for padded layouts).
    pub storage_elements: i64,
    /// A short description (`row-major`, `full-bank swizzle`, the annotation's formula).
    pub description: String,
    pub origin: SharedOrigin,
    /// The op that decided it (the buffer itself for row-major).
    pub op: EntityId,
}

/// The layout of every shared buffer with a constant shape, and the diagnostics of the choice.
pub(super) fn infer_shared(
    world: &World,
    arena: &mut ExprArena,
    tma_store: bool,
) -> (BTreeMap<EntityId, SharedAssigned>, Vec<Diagnostic>) {
    let mut assigned: BTreeMap<EntityId, SharedAssigned> = BTreeMap::new();
    let mut diagnostics = Vec::new();
    let mut swizzled: BTreeMap<EntityId, (SharedLayout, EntityId)> = BTreeMap::new();
    for (entity, op) in world.ops.iter() {
        match op {
            TileOp::AnnotateLayout { buffer, layout }
                if layout.kind == LayoutKind::Layout && is_shared(world, *buffer) =>
            {
                match annotated(world, arena, *buffer, layout) {
                    Ok((map, storage_elements)) => {
                        assigned.insert(
                            *buffer,
                            finish(
                                map,
                                storage_elements,
                                "annotated",
                                SharedOrigin::Annotation,
                                entity,
                            ),
                        );
                    }
                    Err(message) => diagnostics.push(Diagnostic::error(
                        Code::InvalidLayout,
                        Anchor::Entity(entity),
                        message,
                    )),
                }
            }
            TileOp::AnnotateLayout { buffer, layout } if layout.kind == LayoutKind::Swizzled => {
                match swizzled_annotation(world, *buffer) {
                    Ok(layout) => assign_layout(
                        arena,
                        &mut assigned,
                        *buffer,
                        &layout,
                        SharedOrigin::Annotation,
                        entity,
                    ),
                    Err(message) => diagnostics.push(Diagnostic::error(
                        Code::InvalidLayout,
                        Anchor::Entity(entity),
                        message,
                    )),
                }
            }
            TileOp::Gemm { a, b, .. } => {
                for operand in [a.buffer, b.buffer] {
                    gemm_operand(world, entity, operand, &mut swizzled, &mut diagnostics);
                }
            }
            _ => {}
        }
    }
    let mut fragment_copies = BTreeMap::new();
    for (entity, op) in world.ops.iter() {
        if let Some(buffer) = fragment_copied(world, op) {
            fragment_copies.entry(buffer).or_insert(entity);
        }
    }
    for (buffer, (layout, op)) in swizzled {
        fragment_copies.remove(&buffer);
        assign_layout(
            arena,
            &mut assigned,
            buffer,
            &layout,
            SharedOrigin::GemmOperand,
            op,
        );
    }
    for (buffer, op) in fragment_copies {
        if let Some(layout) = fragment_copy_layout(world, buffer, tma_store) {
            assign_layout(
                arena,
                &mut assigned,
                buffer,
                &layout,
                SharedOrigin::FragmentCopy,
                op,
            );
        }
    }
    for buffer in world.shared_buffers() {
        if assigned.contains_key(&buffer) {
            continue;
        }
        if let Some(layout) = row_major(world, arena, buffer) {
            assigned.insert(buffer, layout);
        }
    }
    (assigned, diagnostics)
}

fn row_major(world: &World, arena: &mut ExprArena, buffer: EntityId) -> Option<SharedAssigned> {
    let shape = world.const_shape(buffer)?;
    let map = IndexMap::from_fn(arena, &shape, |arena, indices| {
        vec![super::fragment::flatten_exprs(arena, indices, &shape)]
    });
    let elements = shape.iter().product();
    Some(finish(
        map,
        elements,
        "row-major",
        SharedOrigin::RowMajor,
        buffer,
    ))
}

/// `assigned` with every buffer whose rows are padded only because a `T.copy` exchanges it with a
/// fragment stored row-major instead, or `None` when no buffer is. Padding saves bank conflicts
/// and costs bytes: a launch it pushes past a block's shared memory is lowered with this.
pub(crate) fn without_exchange_padding(
    world: &World,
    arena: &mut ExprArena,
    assigned: &BTreeMap<EntityId, SharedAssigned>,
) -> Option<BTreeMap<EntityId, SharedAssigned>> {
    let padded: Vec<EntityId> = assigned
        .iter()
        .filter(|&(&buffer, layout)| {
            layout.origin == SharedOrigin::FragmentCopy
                && world
                    .const_shape(buffer)
                    .is_some_and(|shape| layout.storage_elements > shape.iter().product())
        })
        .map(|(&buffer, _)| buffer)
        .collect();
    if padded.is_empty() {
        return None;
    }
    let mut unpadded = assigned.clone();
    for buffer in padded {
        let mut layout = row_major(world, arena, buffer)?;
        layout.description =
            "row-major (unpadded so that the launch fits shared memory)".to_owned();
        layout.origin = SharedOrigin::FragmentCopy;
        unpadded.insert(buffer, layout);
    }
    Some(unpadded)
}

/// Records `layout` for `buffer` unless an annotation or a gemm already fixed one.
fn assign_layout(
    arena: &mut ExprArena,
    assigned: &mut BTreeMap<EntityId, SharedAssigned>,
    buffer: EntityId,
    layout: &SharedLayout,
    origin: SharedOrigin,
    op: EntityId,
) {
    if assigned.contains_key(&buffer) {
        return;
    }
    let (Ok(map), Ok(storage)) = (
        IndexMap::of_shared_layout(arena, layout),
        layout.storage_size(),
    ) else {
        return;
    };
    let description = layout.describe();
    assigned.insert(buffer, finish(map, storage, &description, origin, op));
}

/// `make_swizzled_layout(buf)`: TileLang's layout for a gemm operand tile of the buffer's shape
/// (the widest bank swizzle its rows allow, else padded rows).
fn swizzled_annotation(world: &World, buffer: EntityId) -> Result<SharedLayout, String> {
    if !is_shared(world, buffer) {
        return Err(format!(
            "`make_swizzled_layout` lays out shared memory, but `{}` is not a shared buffer",
            world.name(buffer)
        ));
    }
    operand_layout(world, buffer)
}

/// TileLang's layout for a gemm operand tile of `buffer`'s shape and dtype, or why there is none.
fn operand_layout(world: &World, buffer: EntityId) -> Result<SharedLayout, String> {
    let (Some(shape), Some(dtype)) = (world.const_shape(buffer), world.dtypes.get(buffer)) else {
        return Err(format!(
            "`{}` needs a shape known at compile time to be swizzled",
            world.name(buffer)
        ));
    };
    let [leading @ .., rows, cols] = shape.as_slice() else {
        return Err(format!(
            "a swizzle rearranges the rows of a 2-D tile, but `{}` has one dimension",
            world.name(buffer)
        ));
    };
    let bits = u32::try_from(dtype.bytes() * 8).unwrap_or(16);
    gemm_operand_layout(*rows, *cols, bits, true).and_then(|layout| layout.expand(leading))
}

/// The shared buffer a `T.copy` moves to or from a fragment, if it is one.
fn fragment_copied(world: &World, op: &TileOp) -> Option<EntityId> {
    let TileOp::Copy { src, dst } = op else {
        return None;
    };
    let is_fragment = |buffer| super::infer::is_fragment(world, buffer);
    match (is_fragment(src.buffer), is_fragment(dst.buffer)) {
        (true, false) if is_shared(world, dst.buffer) => Some(dst.buffer),
        (false, true) if is_shared(world, src.buffer) => Some(src.buffer),
        _ => None,
    }
}

/// A layout for the buffer's last two dimensions in which a fragment's accesses do not
/// conflict: rows padded by one 16-byte chunk (TileLang's padded operand layout) when they are
/// a whole number of 32-byte sectors, or, where `tma_store` asks for TMA stores, the widest XOR
/// swizzle the rows allow, the only conflict-free layouts a TMA box reproduces.
///
/// A fragment's accumulator layout has each warp touch eight consecutive rows in one
/// instruction; with row-major rows of 128 bytes or more those eight accesses fall into the same
/// banks (an 8-way conflict). Padding starts each row four banks further on; a swizzle sends each
/// row's chunk to a different bank group, but its addresses are not affine in the thread index,
/// and on attention's output tile computing them was measured to cost more than the conflicts
/// (BENCHMARKS.md). A warp reading whole rows (the copy to global memory) covers every bank in
/// either layout, and rows stay 16-byte aligned for vector accesses.
fn fragment_copy_layout(world: &World, buffer: EntityId, tma_store: bool) -> Option<SharedLayout> {
    let (shape, dtype) = (world.const_shape(buffer)?, world.dtypes.get(buffer)?);
    let [leading @ .., rows, cols] = shape.as_slice() else {
        return None;
    };
    let bits = u32::try_from(dtype.bytes() * 8).ok()?;
    let layout = if tma_store {
        widest_bank_swizzle(*rows, *cols, bits)?
    } else {
        let padded = SharedLayout::padded(*rows, *cols, bits).ok()?;
        padded.row_pitch()?;
        padded
    };
    layout.expand(leading).ok()
}

fn is_shared(world: &World, buffer: EntityId) -> bool {
    world
        .scopes
        .get(buffer)
        .is_some_and(|scope| scope.is_shared())
}

fn finish(
    map: IndexMap,
    storage_elements: i64,
    description: &str,
    origin: SharedOrigin,
    op: EntityId,
) -> SharedAssigned {
    SharedAssigned {
        map,
        storage_elements,
        description: description.to_owned(),
        origin,
        op,
    }
}

/// The operand layout a gemm asks of a shared buffer, merged with what an earlier gemm asked.
fn gemm_operand(
    world: &World,
    gemm: EntityId,
    buffer: EntityId,
    swizzled: &mut BTreeMap<EntityId, (SharedLayout, EntityId)>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    if !is_shared(world, buffer) {
        return;
    }
    let Ok(layout) = operand_layout(world, buffer) else {
        return;
    };
    match swizzled.get(&buffer) {
        None => {
            swizzled.insert(buffer, (layout, gemm));
        }
        Some((earlier, first)) if earlier.equal(&layout).unwrap_or(false) => {
            let _ = first;
        }
        Some((earlier, first)) => match merge_swizzles(earlier, &layout) {
            Some(merged) => {
                let first = *first;
                swizzled.insert(buffer, (merged, first));
            }
            None => diagnostics.push(
                Diagnostic::error(
                    Code::LayoutConflict,
                    Anchor::Entity(gemm),
                    format!(
                        "`{}` is an operand of two gemms that need different shared layouts ({} and {})",
                        world.name(buffer),
                        earlier.describe(),
                        layout.describe()
                    ),
                )
                .with_related(Anchor::Entity(*first), "the first gemm using it"),
            ),
        },
    }
}

/// The user's `T.Layout(shape, fn)`, flattened to one storage offset and checked injective, with
/// the number of elements of storage it addresses.
fn annotated(
    world: &World,
    arena: &mut ExprArena,
    buffer: EntityId,
    layout: &tilec_ir::LayoutAnnotation,
) -> Result<(IndexMap, i64), String> {
    if world.const_shape(buffer).as_deref() != Some(layout.shape.as_slice()) {
        return Err(format!(
            "the layout's shape {:?} is not the shape of `{}`",
            layout.shape,
            world.name(buffer)
        ));
    }
    let map = IndexMap {
        shape: layout.shape.clone(),
        vars: layout.vars.clone(),
        outputs: layout.outputs.clone(),
    };
    // The storage shape: each output's largest value plus one; the offset is row-major in it.
    let mut extents = vec![0i64; map.outputs.len()];
    let mut out = Vec::new();
    let mut failed = false;
    for_each_point(&map.shape, |point| {
        if map.eval_into(arena, point, &mut out).is_none() || out.iter().any(|&v| v < 0) {
            failed = true;
            return false;
        }
        for (extent, &value) in extents.iter_mut().zip(&out) {
            *extent = (*extent).max(value + 1);
        }
        true
    });
    if failed {
        return Err("the layout gives a negative or undefined offset for some element".to_owned());
    }
    let flat: ExprId = super::fragment::flatten_exprs(arena, &map.outputs, &extents);
    let flattened = IndexMap {
        shape: map.shape.clone(),
        vars: map.vars.clone(),
        outputs: vec![flat],
    };
    if let Some((first, second)) = collision(arena, &flattened) {
        return Err(format!(
            "this layout stores `{}`{first:?} and `{}`{second:?} at the same offset",
            world.name(buffer),
            world.name(buffer)
        ));
    }
    Ok((flattened, extents.iter().product()))
}

/// Two points the map sends to the same offset, if any.
fn collision(arena: &ExprArena, map: &IndexMap) -> Option<(Vec<i64>, Vec<i64>)> {
    let mut seen: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    let mut found = None;
    let mut out = Vec::new();
    for_each_point(&map.shape, |point| {
        if map.eval_into(arena, point, &mut out).is_none() {
            return true;
        }
        let offset = out.first().copied().unwrap_or(0);
        if let Some(earlier) = seen.insert(offset, point.to_vec()) {
            found = Some((earlier, point.to_vec()));
            return false;
        }
        true
    });
    found
}
