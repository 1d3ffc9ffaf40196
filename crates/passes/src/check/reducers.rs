//! Checks of `T.alloc_reducer` buffers: a reducer is only ever combined into. Each thread holding
//! a copy of an element accumulates into it, so a store that does anything but combine with the
//! reducer's own operation, or a start that is not neutral, would be counted once per copy, a
//! number the layout chooses. TileLang rejects both as well.

use tilec_ir::data::BinaryOp;
use tilec_ir::{Anchor, Code, DataExpr, DataId, Diagnostic, EntityId, Intrinsic, Region, World};

/// A sum (or xor) reducer starts at zero: every copy of an element (one per thread holding it)
/// starts from the fill value, so any other value would be counted once per copy, a number the
/// layout chooses. TileLang rejects such a fill too; `max`, `min`, `bitand` and `bitor` combine a
/// value with itself to itself, so any start is fine for them.
pub(super) fn check_reducer_fill(
    world: &World,
    entity: EntityId,
    dst: &Region,
    value: DataId,
) -> Vec<Diagnostic> {
    let Some(&combiner) = world.reducers.get(dst.buffer) else {
        return Vec::new();
    };
    if !matches!(combiner, BinaryOp::Add | BinaryOp::BitXor) {
        return Vec::new();
    }
    let zero = match world.data.get(value) {
        DataExpr::Int { value, .. } => *value == 0,
        DataExpr::Float { bits, .. } => f64::from_bits(*bits) == 0.0,
        _ => false,
    };
    if zero {
        return Vec::new();
    }
    let name = world.name(dst.buffer);
    vec![Diagnostic::error(
        Code::InvalidCall,
        Anchor::Entity(entity),
        format!(
            "the reducer `{name}` combines with `{}`, so it starts at zero: each thread's copy of \
             an element would add this value once more (`T.clear({name})`)",
            combiner.symbol()
        ),
    )]
}

/// Every store to a reducer must be `acc[i] = op(acc[i], v)` (either order) with the reducer's
/// operation: `acc[i] += v` for a sum, `T.max(acc[i], v)` for a max.
pub(super) fn check_reducer_stores(world: &World) -> Vec<Diagnostic> {
    world
        .stores
        .iter()
        .filter_map(|(entity, store)| {
            let &combiner = world.reducers.get(store.buffer)?;
            if combines_into(world, store.value, store.buffer, &store.indices, combiner) {
                return None;
            }
            let name = world.name(store.buffer);
            let example = match combiner {
                BinaryOp::Max | BinaryOp::Min => {
                    format!("{name}[i] = T.{}({name}[i], v)", combiner.symbol())
                }
                op => format!("{name}[i] = {name}[i] {} v", op.symbol()),
            };
            Some(Diagnostic::error(
                Code::InvalidCall,
                Anchor::Entity(entity),
                format!(
                    "a store to the reducer `{name}` must combine into it with its operation: \
                     `{example}`"
                ),
            ))
        })
        .collect()
}

/// Whether `value` is `combiner(buffer[indices], v)` or `combiner(v, buffer[indices])`.
fn combines_into(
    world: &World,
    value: DataId,
    buffer: EntityId,
    indices: &[tilec_ir::ExprId],
    combiner: BinaryOp,
) -> bool {
    let is_target = |operand: DataId| {
        matches!(world.data.get(operand), DataExpr::Load { buffer: b, indices: i }
            if *b == buffer && i.as_slice() == indices)
    };
    match world.data.get(value) {
        DataExpr::Binary { op, lhs, rhs } => {
            *op == combiner && (is_target(*lhs) || is_target(*rhs))
        }
        DataExpr::Call { intrinsic, args } => {
            let op = match intrinsic {
                Intrinsic::Max => BinaryOp::Max,
                Intrinsic::Min => BinaryOp::Min,
                _ => return false,
            };
            op == combiner && args.iter().any(|&arg| is_target(arg))
        }
        // `acc[i] += v` on a narrower `v` may cast the sum back to the reducer's dtype.
        DataExpr::Cast { value, .. } => combines_into(world, *value, buffer, indices, combiner),
        _ => false,
    }
}
