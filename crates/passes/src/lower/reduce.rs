//! The plan of a fragment reduction: which of a thread's source registers fold into which of its
//! result registers, and which thread-index bits separate the threads holding parts of one line
//! (the XOR masks of the all-reduce). Everything is derived from the two layouts and checked by
//! enumerating the threads; a layout pair that does not fit the scheme is reported, not guessed.

use std::collections::BTreeMap;

use tilec_ir::{ExprArena, ExprId, ExprProgram, VarId};

use super::iteration::{Iteration, schedule};
use super::{FragmentStorage, Unlowerable, table_index, table_int};
use crate::layout::FragmentLayout;

#[derive(Clone, Debug)]
pub(crate) struct ReducePlan {
    /// For each result register: the source register indices (expressions in the thread index)
    /// whose elements fold into it.
    pub slots: Vec<Vec<ExprId>>,
    /// The result register index of each slot.
    pub dst_slots: Vec<ExprId>,
    /// Thread-index bits below 32 whose partners hold other parts of the same line.
    pub warp_masks: Vec<u32>,
    /// Such bits at 32 and above (partners in other warps).
    pub block_masks: Vec<u32>,
}

/// The result element a source element at `point` folds into: `point` without the reduced
/// dimension, or with it at 0 when the result keeps it (`[X, 1, Y]`); a whole reduction of a 1-D
/// source lands in element 0 of its one-element result.
fn result_line(arena: &mut ExprArena, point: &[ExprId], dim: usize, rank: usize) -> Vec<ExprId> {
    let zero = arena.int(0);
    if rank == point.len() {
        let mut line = point.to_vec();
        line[dim] = zero;
        return line;
    }
    let line: Vec<ExprId> = point
        .iter()
        .enumerate()
        .filter(|&(k, _)| k != dim)
        .map(|(_, &e)| e)
        .collect();
    if line.is_empty() { vec![zero] } else { line }
}

pub(crate) fn plan(
    arena: &mut ExprArena,
    source: &FragmentLayout,
    result: &FragmentStorage,
    dim: usize,
    block_threads: i64,
    thread: VarId,
) -> Result<ReducePlan, Unlowerable> {
    let Iteration::Closed {
        step,
        threads,
        steps,
        coords,
        rep,
        bound: None,
    } = schedule(arena, source, block_threads, thread)
    else {
        return Err(Unlowerable::new(
            "a reduction whose source layout has no closed-form inverse",
        ));
    };
    if dim >= coords.len() {
        return Err(Unlowerable::new(
            "a reduction over a dimension the buffer does not have",
        ));
    }
    let source_storage = FragmentStorage {
        layout: source.clone(),
        local_shape: source.local_shape(arena),
    };
    let mut src_index = Vec::new();
    let mut dst_index = Vec::new();
    let mut line_of = Vec::new();
    for s in 0..steps {
        let at_step = |arena: &mut ExprArena, e: ExprId| {
            let value = arena.int(s);
            arena.substitute(e, &|v| (v == step).then_some(value))
        };
        let point: Vec<ExprId> = coords.iter().map(|&c| at_step(arena, c)).collect();
        let line = result_line(arena, &point, dim, result.layout.shape.len());
        src_index.push(source_storage.local_index(arena, &point));
        dst_index.push(result.local_index(arena, &line));
        let replica = at_step(arena, rep);
        let mut key = line.clone();
        key.push(replica);
        line_of.push(key);
    }
    let slot_of = constant_over_threads(arena, &dst_index, thread, threads).ok_or_else(|| {
        Unlowerable::new("a reduction whose result registers differ between threads")
    })?;
    let size = result.local_size();
    let mut slots = vec![Vec::new(); usize::try_from(size).unwrap_or(0)];
    for (s, &slot) in slot_of.iter().enumerate() {
        let entry = usize::try_from(slot)
            .ok()
            .and_then(|slot| slots.get_mut(slot));
        let Some(entry) = entry else {
            return Err(Unlowerable::new(
                "a reduction result register outside the fragment",
            ));
        };
        entry.push(src_index[s]);
    }
    let masks = line_masks(arena, &line_of, &slot_of, thread, threads)?;
    let dst_slots = (0..size).map(|j| arena.int(j)).collect();
    Ok(ReducePlan {
        slots,
        dst_slots,
        warp_masks: masks.iter().copied().filter(|&m| m < 32).rev().collect(),
        block_masks: masks.into_iter().filter(|&m| m >= 32).collect(),
    })
}

/// The value of each expression when it is the same on every thread, or `None`.
fn constant_over_threads(
    arena: &ExprArena,
    exprs: &[ExprId],
    thread: VarId,
    threads: i64,
) -> Option<Vec<i64>> {
    let mut program = ExprProgram::compile(arena, &[thread], exprs);
    let first = program.run(&[0])?.to_vec();
    for t in 1..threads {
        if program.run(&[t])? != first.as_slice() {
            return None;
        }
    }
    Some(first)
}

/// The single-bit XOR masks that connect the threads holding parts of one line (and replica):
/// each line's holders must be one coset of the subspace the masks span, and a thread and its
/// partner must keep the same line in the same result register.
fn line_masks(
    arena: &ExprArena,
    lines: &[Vec<ExprId>],
    slot_of: &[i64],
    thread: VarId,
    threads: i64,
) -> Result<Vec<u32>, Unlowerable> {
    let flat: Vec<ExprId> = lines.iter().flatten().copied().collect();
    let width = lines.first().map_or(0, Vec::len);
    let mut program = ExprProgram::compile(arena, &[thread], &flat);
    let mut holders: BTreeMap<Vec<i64>, Vec<i64>> = BTreeMap::new();
    // Per thread, the distinct lines each result register holds (one, unless the layout is
    // inconsistent), so that comparing partners costs one lookup per register.
    let mut keys_at: Vec<BTreeMap<i64, Vec<Vec<i64>>>> = Vec::new();
    for t in 0..threads {
        let values = program
            .run(&[t])
            .ok_or_else(|| Unlowerable::new("a reduction layout that fails to evaluate"))?
            .to_vec();
        let mut mine: BTreeMap<i64, Vec<Vec<i64>>> = BTreeMap::new();
        for (s, key) in values.chunks(width.max(1)).enumerate() {
            let entry = holders.entry(key.to_vec()).or_default();
            if entry.last() != Some(&t) {
                entry.push(t);
            }
            let lines = mine.entry(slot_of[s]).or_default();
            if !lines.iter().any(|line| line.as_slice() == key) {
                lines.push(key.to_vec());
            }
        }
        keys_at.push(mine);
    }
    let Some(group) = holders.values().next() else {
        return Ok(Vec::new());
    };
    let union = group.iter().fold(0i64, |acc, &t| acc | (t ^ group[0]));
    let masks: Vec<u32> = (0..31)
        .map(|b| 1u32 << b)
        .filter(|&m| union & i64::from(m) != 0)
        .collect();
    if group.len() != 1usize << masks.len() {
        return Err(Unlowerable::new(
            "the threads holding one line of the reduction are not a group of XOR partners",
        ));
    }
    for members in holders.values() {
        let base = members[0] & !union;
        let expected: Vec<i64> = (0..table_int(members.len()))
            .map(|k| base | spread(k, &masks))
            .collect();
        let mut sorted = members.clone();
        sorted.sort_unstable();
        if sorted != expected {
            return Err(Unlowerable::new(
                "the threads holding one line of the reduction are not a group of XOR partners",
            ));
        }
    }
    // Partners keep the same line in the same register, so shuffling register j combines parts
    // of one line.
    for t in 0..threads {
        for &mask in &masks {
            let partner = t ^ i64::from(mask);
            if partner >= threads {
                continue;
            }
            let (mine, theirs) = (&keys_at[table_index(t)?], &keys_at[table_index(partner)?]);
            for (slot, lines) in mine {
                let Some(other_lines) = theirs.get(slot) else {
                    continue;
                };
                if lines
                    .iter()
                    .any(|line| other_lines.iter().any(|other| other != line))
                {
                    return Err(Unlowerable::new(
                        "partner threads keep different lines in one register",
                    ));
                }
            }
        }
    }
    Ok(masks)
}

/// The bits of `k` placed on the bit positions of `masks`, lowest first.
fn spread(k: i64, masks: &[u32]) -> i64 {
    masks
        .iter()
        .enumerate()
        .filter(|(bit, _)| k & (1 << bit) != 0)
        .fold(0, |acc, (_, &m)| acc | i64::from(m))
}
