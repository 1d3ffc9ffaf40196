//! Staging a gemm's epilogue through shared memory: `T.copy(C_local, C[...])` of a tensor-core
//! accumulator becomes `T.copy(C_local, C_local_staged)` and `T.copy(C_local_staged, C[...])`.
//!
//! Stored straight from the accumulator layout, each thread writes two 16-bit elements at a time
//! to eight different rows per warp: 4-byte stores, eight 32-byte sectors per warp instruction.
//! Through a shared tile, the same bytes leave as 16-byte vectors that cover whole rows. On the
//! H200 the 8192³ gemm ran 1 % faster this way on both targets (sm_90 1.69–1.71 against
//! 1.71–1.72 ms; BENCHMARKS.md, fifth session). The shared tile's rows are padded by 16 bytes so
//! that the accumulator's eight rows per warp fall on different banks.
//!
//! The rewrite is a copy of the world and its layouts with one new shared buffer and the copy split
//! in two; the ordinary lowering then places the buffer (in space the finished pipeline no longer
//! uses), converts the dtype on the way in, vectorizes the way out and puts barriers between. The
//! world the user sees is never changed: [`super::lower_launch`] lowers the staged copy only when
//! it needs no more shared memory than the kernel as written, and falls back otherwise.

use tilec_ir::{Access, AccessKind, EntityId, EntityKind, Region, Scope, TileOp, World};

use crate::layout::shared::SharedLayout;
use crate::layout::{IndexMap, Layouts, SharedAssigned, SharedOrigin};

/// The row padding of a staging tile, in bytes: one bank group of 16 bytes moves each row's start
/// by four banks, so the accumulator layout's eight rows per warp land on all 32 banks.
const ROW_PADDING_BYTES: i64 = 16;

/// The world and layouts with every top-level gemm epilogue of `launch` staged, or `None` when the
/// launch has no epilogue to stage.
pub(super) fn stage_epilogues(
    world: &World,
    layouts: &Layouts,
    launch: EntityId,
) -> Option<(World, Layouts)> {
    let candidates: Vec<(EntityId, EpilogueCopy)> = world
        .body(launch)
        .iter()
        .filter_map(|&statement| Some((statement, epilogue_copy(world, layouts, statement)?)))
        .collect();
    if candidates.is_empty() {
        return None;
    }
    let mut staged_world = world.clone();
    staged_world.exprs = layouts.exprs.clone();
    let mut staged_layouts = layouts.clone();
    let mut body = world.body(launch).to_vec();
    for (statement, copy) in candidates {
        let replacement = stage_one(
            &mut staged_world,
            &mut staged_layouts,
            launch,
            statement,
            copy,
        )?;
        let position = body.iter().position(|&entity| entity == statement)?;
        body.splice(position..=position, replacement);
    }
    staged_world.bodies.set(launch, body);
    staged_layouts.exprs = staged_world.exprs.clone();
    Some((staged_world, staged_layouts))
}

/// A `T.copy` from a whole two-dimensional tensor-core accumulator to global memory.
#[derive(Clone, Debug)]
struct EpilogueCopy {
    src: Region,
    dst: Region,
    rows: i64,
    cols: i64,
}

fn epilogue_copy(world: &World, layouts: &Layouts, statement: EntityId) -> Option<EpilogueCopy> {
    let Some(TileOp::Copy { src, dst }) = world.ops.get(statement) else {
        return None;
    };
    let fragment = world.storage_of(src.buffer);
    let is_accumulator = world.ops.iter().any(|(op, tile_op)| {
        matches!(tile_op, TileOp::Gemm { c, .. } if world.storage_of(c.buffer) == fragment)
            && layouts.gemms.contains_key(&op)
    });
    let to_global = world.scopes.get(world.storage_of(dst.buffer)) == Some(&Scope::Global);
    if !is_accumulator || !to_global || world.is_alias(src.buffer) {
        return None;
    }
    let [rows, cols] = world.const_shape(fragment)?[..] else {
        return None;
    };
    let whole = src.dims.len() == 2
        && src.dims.iter().zip([rows, cols]).all(|(dim, extent)| {
            world.exprs.as_int(dim.start) == Some(0)
                && dim
                    .extent
                    .is_none_or(|e| world.exprs.as_int(e) == Some(extent))
        });
    whole.then(|| EpilogueCopy {
        src: src.clone(),
        dst: dst.clone(),
        rows,
        cols,
    })
}

/// Adds the staging buffer and the two copies that replace `statement`; returns them in order.
fn stage_one(
    world: &mut World,
    layouts: &mut Layouts,
    launch: EntityId,
    statement: EntityId,
    copy: EpilogueCopy,
) -> Option<Vec<EntityId>> {
    let dtype = *world.dtypes.get(world.storage_of(copy.dst.buffer))?;
    let element_bytes = i64::try_from(dtype.bytes()).ok()?;
    let pitch = copy.cols + ROW_PADDING_BYTES / element_bytes;
    let element_bits = u32::try_from(dtype.bytes() * 8).ok()?;
    let layout = SharedLayout::with_row_pitch(copy.rows, copy.cols, pitch, element_bits).ok()?;
    let map = IndexMap::of_shared_layout(&mut world.exprs, &layout).ok()?;
    let storage_elements = layout.storage_size().ok()?;

    let buffer = world.add_entity(EntityKind::Buffer, Some(launch));
    let name = format!("{}_staged", world.name(world.storage_of(copy.src.buffer)));
    world.names.set(buffer, name);
    world.scopes.set(buffer, Scope::SharedDyn);
    world.dtypes.set(buffer, dtype);
    let shape = vec![world.exprs.int(copy.rows), world.exprs.int(copy.cols)];
    world.shapes.set(buffer, shape);
    layouts.shared.insert(
        buffer,
        SharedAssigned {
            map,
            storage_elements,
            description: layout.describe(),
            origin: SharedOrigin::EpilogueStaging,
            op: statement,
        },
    );

    let staged = world.full_region(buffer);
    let into_shared = add_copy(world, launch, copy.src, staged.clone());
    let out_to_global = add_copy(world, launch, staged, copy.dst);
    // The copy in keeps the accumulator's loop layout: it walks the fragment exactly as the
    // original store did.
    if let Some(inferred) = layouts.loops.get(&statement).cloned() {
        layouts.loops.insert(into_shared, inferred);
    }
    Some(vec![buffer, into_shared, out_to_global])
}

/// A `T.copy` entity in `launch` with its accesses (the caller puts it in the body).
fn add_copy(world: &mut World, launch: EntityId, src: Region, dst: Region) -> EntityId {
    let entity = world.add_entity(EntityKind::TileOp, Some(launch));
    let accesses = vec![
        Access {
            kind: AccessKind::Read,
            region: src.clone(),
        },
        Access {
            kind: AccessKind::Write,
            region: dst.clone(),
        },
    ];
    world.accesses.set(entity, accesses);
    world.ops.set(entity, TileOp::Copy { src, dst });
    entity
}
