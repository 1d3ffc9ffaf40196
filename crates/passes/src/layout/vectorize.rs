//! The vector width of a planned loop: how many consecutive elements one thread handles per access,
//! as TileLang's VectorizePlanner chooses it (16-byte accesses where every access is contiguous
//! and aligned, halving until it divides).

use tilec_ir::{ExprArena, ExprId, VarId, World};

use super::infer::LoopAccess;

const VECTOR_BYTES: i64 = 16;

pub(crate) fn vector_width(
    world: &World,
    accesses: &[LoopAccess],
    vars: &[VarId],
    shape: &[i64],
    threads: i64,
) -> i64 {
    let (Some(&inner), Some(&inner_extent)) = (vars.last(), shape.last()) else {
        return 1;
    };
    let mut width = accesses
        .iter()
        .filter_map(|a| world.dtypes.get(a.buffer))
        .map(|dtype| VECTOR_BYTES / i64::try_from(dtype.bytes()).unwrap_or(i64::MAX))
        .min()
        .unwrap_or(1)
        .max(1);
    while width > 1 && inner_extent % width != 0 {
        width /= 2;
    }
    for access in accesses {
        width = width.min(access_width(&world.exprs, access, inner, width));
        width = width.min(row_alignment(world, access, width));
    }
    let touches_fragment = accesses
        .iter()
        .any(|a| world.scopes.get(a.buffer) == Some(&tilec_ir::Scope::Fragment));
    let total: i64 = shape.iter().product();
    while touches_fragment && width > 1 && total % (threads * width) != 0 {
        width /= 2;
    }
    width
}

/// The widest vector (at most `width`) one access allows: its last index must advance by one with
/// the innermost loop variable, its other indices must not move with it, and its start must be
/// aligned to the width. A store that does not move with the innermost variable allows none.
fn access_width(arena: &ExprArena, access: &LoopAccess, inner: VarId, mut width: i64) -> i64 {
    let Some((&last, leading)) = access.indices.split_last() else {
        return width;
    };
    let at = |e: ExprId, value: i64| arena.eval(e, &|v| Some(if v == inner { value } else { 0 }));
    let moves = |e: ExprId| at(e, 1) != at(e, 0);
    if leading.iter().any(|&e| moves(e)) {
        return 1;
    }
    if !moves(last) {
        return if access.write { 1 } else { width };
    }
    if at(last, 1).zip(at(last, 0)).map(|(a, b)| a - b) != Some(1) {
        return 1;
    }
    // The start must be a multiple of the width for every value of the other variables; the
    // indices are affine, so trying each variable at 0 and 1 decides it.
    let others: Vec<VarId> = arena
        .vars_of(last)
        .into_iter()
        .filter(|&v| v != inner)
        .collect();
    while width > 1 {
        let aligned = (0..=others.len()).all(|k| {
            let value = arena.eval(last, &|v| {
                Some(if v == inner {
                    0
                } else if others.get(k) == Some(&v) {
                    1
                } else {
                    0
                })
            });
            value.is_some_and(|value| value % width == 0)
        });
        if aligned {
            break;
        }
        width /= 2;
    }
    width
}

/// The widest vector (at most `width`) whose accesses stay aligned from one row of `access`'s
/// buffer to the next. A row's stride is the product of the extents after it; a factor known only
/// at run time is some integer, so the constant factors must carry the alignment (`O[b, h, s, d]`
/// with a symbolic `dim` may start a row anywhere, and TileLang's vectorizer, which must prove
/// every vector aligned, takes one element at a time there; with `dim = 128` and a symbolic
/// `seq_len` every row starts aligned).
fn row_alignment(world: &World, access: &LoopAccess, mut width: i64) -> i64 {
    let Some(shape) = world.shapes.get(access.buffer) else {
        return width;
    };
    let [leading @ .., _] = access.indices.as_slice() else {
        return width;
    };
    for (dim, &index) in leading.iter().enumerate() {
        if world.exprs.as_int(index) == Some(0) {
            continue;
        }
        let known_factors = shape[dim + 1..]
            .iter()
            .filter_map(|&extent| world.exprs.as_int(extent))
            .try_fold(1i64, |product, extent| product.checked_mul(extent));
        let Some(known) = known_factors else {
            return width;
        };
        while width > 1 && known % width != 0 {
            width /= 2;
        }
    }
    width
}
