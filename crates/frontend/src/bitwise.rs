//! Bitwise operators on index expressions, as the arithmetic the index arena has.
//!
//! Swizzled layouts are written with XOR (`T.Layout(shape, lambda i, j: [i, (j // 8 ^ i % 8) * 8 +
//! j % 8])`, TileLang's `get_swizzle_layout`), and index arithmetic has no bitwise node. A shift
//! by a constant is a product or a floor division, a mask of low bits a floor modulo; XOR, AND and
//! OR of two values known to lie in `0..2^n` (from the variables' extents) are written bit by bit:
//! bit `k` of `x` is `x // 2^k % 2`, and XOR of two bits is their sum modulo 2. These are exact on
//! every value in range, so layouts built from them are decided by enumeration as any other.

use ruff_python_ast::Operator;
use tilec_ir::{ExprArena, ExprId};

/// The most bits an XOR, AND or OR is expanded over: a swizzle mixes three.
const MAX_BITS: u32 = 8;

/// `a op b` on index expressions, or `None` where the arena cannot say it exactly (a shift by a
/// run-time amount, a bitwise operation on values of unknown or negative range).
pub(crate) fn index_bitwise(
    arena: &mut ExprArena,
    op: Operator,
    a: ExprId,
    b: ExprId,
) -> Option<ExprId> {
    let constant = arena.as_int(b);
    match (op, constant) {
        (Operator::LShift, Some(k)) if (0..62).contains(&k) => {
            let factor = arena.int(1 << k);
            Some(arena.mul(a, factor))
        }
        (Operator::RShift, Some(k)) if (0..62).contains(&k) => {
            let divisor = arena.int(1 << k);
            Some(arena.floordiv(a, divisor))
        }
        (Operator::BitAnd, Some(mask)) if mask > 0 && (mask + 1).count_ones() == 1 => {
            let modulus = arena.int(mask + 1);
            Some(arena.floormod(a, modulus))
        }
        (Operator::BitXor | Operator::BitAnd | Operator::BitOr, _) => {
            let bits = bits_of(arena, a)?.max(bits_of(arena, b)?);
            Some(bit_by_bit(arena, op, (a, b), bits))
        }
        _ => None,
    }
}

/// The bits that hold every value of `e`, if it is never negative and fits [`MAX_BITS`].
fn bits_of(arena: &ExprArena, e: ExprId) -> Option<u32> {
    let (low, high) = arena.bounds(e)?;
    if low < 0 || high >= 1 << MAX_BITS {
        return None;
    }
    Some(64 - u64::try_from(high).ok()?.leading_zeros())
}

fn bit_by_bit(arena: &mut ExprArena, op: Operator, (a, b): (ExprId, ExprId), bits: u32) -> ExprId {
    let two = arena.int(2);
    let mut result = arena.int(0);
    for k in 0..bits {
        let weight = arena.int(1 << k);
        let bit_a = bit(arena, a, weight, two);
        let bit_b = bit(arena, b, weight, two);
        let combined = match op {
            Operator::BitAnd => arena.mul(bit_a, bit_b),
            Operator::BitOr => {
                let both = arena.mul(bit_a, bit_b);
                let sum = arena.add(bit_a, bit_b);
                arena.sub(sum, both)
            }
            _ => {
                let sum = arena.add(bit_a, bit_b);
                arena.floormod(sum, two)
            }
        };
        let placed = arena.mul(combined, weight);
        result = arena.add(result, placed);
    }
    result
}

/// `x // weight % 2`: the bit of `x` of value `weight`.
fn bit(arena: &mut ExprArena, x: ExprId, weight: ExprId, two: ExprId) -> ExprId {
    let shifted = arena.floordiv(x, weight);
    arena.floormod(shifted, two)
}
