//! Resolving the extents of tile-op regions: `T.copy(A[y, x], A_shared)` takes the extents of the
//! point side from the other operand, as TileLang does.

use tilec_ir::{ExprId, Region, World};

/// The extents of `region`, where a region written only with point indices (`A[y, x]`) takes its
/// extents from `other` (aligned at the trailing dimensions), and a point index next to a slice has
/// extent 1. Returns `None` when `region` is all points and there is nothing to take extents from.
pub fn resolve_extents(
    world: &mut World,
    region: &Region,
    other: Option<&Region>,
) -> Option<Vec<ExprId>> {
    let all_points = region.dims.iter().all(|dim| dim.extent.is_none());
    if !all_points || region.dims.is_empty() {
        let one = world.exprs.int(1);
        return Some(
            region
                .dims
                .iter()
                .map(|dim| dim.extent.unwrap_or(one))
                .collect(),
        );
    }
    let other = other?;
    if other.dims.iter().all(|dim| dim.extent.is_none()) {
        return None;
    }
    let one = world.exprs.int(1);
    let mut source: Vec<ExprId> = other
        .dims
        .iter()
        .map(|dim| dim.extent.unwrap_or(one))
        .collect();
    let rank = region.dims.len();
    // Drop leading unit extents of the other side until the ranks fit, then pad with ones.
    while source.len() > rank && world.exprs.as_int(source[0]) == Some(1) {
        source.remove(0);
    }
    if source.len() > rank {
        return Some(source);
    }
    let mut extents = vec![one; rank - source.len()];
    extents.extend(source);
    Some(extents)
}

/// The extents with unit dimensions removed: what must agree between two sides of a copy.
pub fn squeeze(world: &World, extents: &[ExprId]) -> Vec<ExprId> {
    extents
        .iter()
        .copied()
        .filter(|&extent| world.exprs.as_int(extent) != Some(1))
        .collect()
}

/// Whether two extent lists certainly differ: some pair of extents are different constants, or the
/// ranks differ. Symbolic extents that are not provably different are taken as equal.
pub fn certainly_differ(world: &World, a: &[ExprId], b: &[ExprId]) -> bool {
    a.len() != b.len()
        || a.iter().zip(b).any(|(&x, &y)| {
            x != y && matches!((world.exprs.as_int(x), world.exprs.as_int(y)), (Some(p), Some(q)) if p != q)
        })
}

/// `128×32` for messages.
pub fn format_extents(world: &World, extents: &[ExprId]) -> String {
    if extents.is_empty() {
        return "1".to_owned();
    }
    extents
        .iter()
        .map(|&e| world.exprs.display(e).to_string())
        .collect::<Vec<_>>()
        .join("×")
}
