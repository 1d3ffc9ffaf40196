//! The shared-memory plan: a byte offset for every shared buffer of a launch, 16-byte aligned, with
//! buffers whose live ranges do not overlap sharing space (first fit, largest first). Operands of
//! a `wgmma` are 1024-byte aligned: the hardware swizzles absolute shared addresses, in a pattern
//! that repeats every 1024 bytes, so the layout's own swizzle matches only from such a boundary.
//! A view of a buffer's bytes with another dtype (`T.view(..., dtype=...)`) is placed at its base's
//! offset, the base taking as many bytes as the larger of the two.

use tilec_ir::{EntityId, World};

use super::Unlowerable;

const ALIGNMENT: i64 = 16;
/// The alignment of `wgmma` operands: the period of the 128-byte swizzle.
pub(crate) const WGMMA_ALIGNMENT: i64 = 1024;

#[derive(Clone, Debug, Default)]
pub(crate) struct SharedPlacement {
    pub offsets: Vec<(EntityId, i64)>,
    pub bytes: i64,
}

/// Which buffers may share space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SpaceSharing {
    /// One block per tile: buffers whose live ranges do not overlap share space.
    ByLiveRange,
    /// A persistent launch runs its statements once per tile, so a buffer may carry a value
    /// from one tile into the next and be live while any other is. Only buffers whose first
    /// access overwrites them whole carry nothing, and unless a pipeline stages them (a
    /// producer fills those ahead of the consumers) they share space by their live ranges
    /// within the tile; the tile loop's own barriers order one tile's last accesses before the
    /// next tile's first.
    WithinTile,
    /// Every buffer in space of its own.
    None,
}

/// Places `buffers` (shared buffers of the launch whose statements are `order`), sharing space
/// as `sharing` allows.
pub(crate) fn plan(
    world: &World,
    layouts: &crate::layout::Layouts,
    order: &[EntityId],
    buffers: &[EntityId],
    staged: &std::collections::BTreeMap<EntityId, i64>,
    wgmma_operands: &[EntityId],
    sharing: SpaceSharing,
) -> Result<SharedPlacement, Unlowerable> {
    let mut items: Vec<(EntityId, i64, (usize, usize))> = Vec::new();
    let views: Vec<(EntityId, EntityId)> = buffers
        .iter()
        .filter_map(|&view| Some((view, *world.byte_views.get(view)?)))
        .collect();
    for &(view, base) in &views {
        if staged.contains_key(&view) || staged.contains_key(&base) {
            return Err(Unlowerable::new(format!(
                "`{}` views the bytes of `{}` with another dtype, and a pipeline stages one of \
                 them: tilec does not lower a view of a staged buffer yet",
                world.name(view),
                world.name(base)
            )));
        }
    }
    for &buffer in buffers.iter().filter(|&&b| !world.is_byte_view(b)) {
        let mut bytes = storage_bytes(world, layouts, buffer)?;
        for &(view, _) in views.iter().filter(|&&(_, base)| base == buffer) {
            bytes = bytes.max(storage_bytes(world, layouts, view)?);
        }
        let stages = staged.get(&buffer).copied().unwrap_or(1);
        let bytes = i64::try_from(bytes)
            .ok()
            .and_then(|bytes| bytes.checked_mul(stages))
            .ok_or_else(|| Unlowerable::new("a shared buffer too large"))?;
        let shares = match sharing {
            SpaceSharing::ByLiveRange => true,
            SpaceSharing::WithinTile => {
                stages == 1 && crate::liveness::first_access_overwrites(world, order, buffer)
            }
            SpaceSharing::None => false,
        };
        // A buffer nothing touches still gets space, live nowhere.
        let live = match shares {
            true => crate::liveness::live_range(world, order, buffer).unwrap_or((usize::MAX, 0)),
            false => (0, usize::MAX),
        };
        items.push((buffer, bytes, live));
    }
    items.sort_by_key(|&(buffer, bytes, _)| (std::cmp::Reverse(bytes), buffer));
    let mut placed: Vec<(EntityId, i64, i64, (usize, usize))> = Vec::new();
    for (buffer, bytes, live) in items {
        let aligned = |b: &EntityId| wgmma_operands.contains(b);
        let viewed_aligned = views
            .iter()
            .any(|(view, base)| *base == buffer && aligned(view));
        let alignment = if aligned(&buffer) || viewed_aligned {
            WGMMA_ALIGNMENT
        } else {
            ALIGNMENT
        };
        let overlapping = |other: &(usize, usize)| live.0 <= other.1 && other.0 <= live.1;
        let mut offset = 0;
        let mut blockers: Vec<(i64, i64)> = placed
            .iter()
            .filter(|(_, _, _, other)| overlapping(other))
            .map(|&(_, start, size, _)| (start, start + size))
            .collect();
        blockers.sort_unstable();
        for (start, end) in blockers {
            if offset + bytes <= start {
                break;
            }
            offset = offset.max(align(end, alignment));
        }
        placed.push((buffer, offset, bytes, live));
    }
    let bytes = placed
        .iter()
        .map(|&(_, offset, size, _)| align(offset + size, ALIGNMENT))
        .max()
        .unwrap_or(0);
    for &(view, base) in &views {
        if let Some(&(_, offset, size, live)) = placed.iter().find(|(b, ..)| *b == base) {
            placed.push((view, offset, size, live));
        }
    }
    placed.sort_by_key(|&(buffer, ..)| buffer);
    Ok(SharedPlacement {
        offsets: placed
            .iter()
            .map(|&(buffer, offset, ..)| (buffer, offset))
            .collect(),
        bytes,
    })
}

/// The bytes one stage of `buffer` takes as its layout stores it.
fn storage_bytes(
    world: &World,
    layouts: &crate::layout::Layouts,
    buffer: EntityId,
) -> Result<u64, Unlowerable> {
    layouts
        .shared_storage_bytes(world, buffer)
        .or_else(|| crate::check::buffer_bytes(world, buffer))
        .ok_or_else(|| {
            Unlowerable::new(format!(
                "shared buffer `{}` needs a shape known at compile time",
                world.name(buffer)
            ))
        })
}

fn align(bytes: i64, alignment: i64) -> i64 {
    (bytes + alignment - 1) / alignment * alignment
}
