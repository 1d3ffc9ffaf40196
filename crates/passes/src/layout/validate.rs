//! Containment of fragment accesses in loop layouts (seed 001's `ProveFragmentContains`), decided by
//! enumeration: every thread that runs an iteration reading a fragment element must hold that
//! element, and every thread holding an element a loop writes must be one that writes it (else its
//! copy goes stale).
//!
//! Inference derives most pairs of layouts from each other, where containment holds by
//! construction; this check covers the rest, such as a loop that reads two fragments whose layouts
//! were fixed independently (two gemm accumulators, one transposed).

use tilec_ir::{ExprArena, ExprId, ExprProgram, VarId};

use super::derive::substitute_vars;
use super::fragment::{FragmentLayout, Owners, for_each_chunk, unflatten};

/// Iterations × replicas × serial values beyond this are not checked (no real tile comes close).
const MAX_CHECKED: i64 = 1 << 22;

/// An access that runs on the wrong threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Misplaced {
    /// The loop iteration: the values of `variables` (loop variables, then serial variables).
    pub iteration: Vec<i64>,
    pub variables: Vec<VarId>,
    pub element: Vec<i64>,
    /// The thread that runs the iteration (for a read or a write on a non-owner) or the owner that
    /// no iteration writes.
    pub thread: i64,
    pub owners: Vec<i64>,
    /// True when an owner of a written element never writes it.
    pub stale_owner: bool,
}

/// A loop's layout with the serial loops inside it.
pub(super) struct LoopShape<'a> {
    pub layout: &'a FragmentLayout,
    pub serial: &'a [(VarId, i64)],
}

/// Whether `fragment` accessed at `indices` is, variable for variable, the loop's own layout: the
/// access indexes with the loop variables in order, and the formulas agree once the fragment's
/// variables are renamed to the loop's. Then every iteration runs exactly where its element lives,
/// which is the common case (a loop laid out from the fragment it accesses), and nothing needs
/// enumerating.
pub(super) fn same_layout(
    arena: &mut ExprArena,
    loop_layout: &FragmentLayout,
    fragment: &FragmentLayout,
    indices: &[ExprId],
) -> bool {
    let in_order = indices.len() == loop_layout.vars.len()
        && indices
            .iter()
            .zip(&loop_layout.vars)
            .all(|(&index, &var)| arena.var_expr(var) == index);
    in_order && same_function(arena, fragment, loop_layout)
}

/// Whether two layouts put every element on the same threads: the same shape and replication, and
/// thread formulas that agree once `first`'s variables are renamed to `second`'s.
pub(super) fn same_function(
    arena: &mut ExprArena,
    first: &FragmentLayout,
    second: &FragmentLayout,
) -> bool {
    if first.shape != second.shape || first.replicate != second.replicate {
        return false;
    }
    let mut renaming: Vec<(VarId, ExprId)> = first
        .vars
        .iter()
        .zip(&second.vars)
        .map(|(&own, &var)| (own, arena.var_expr(var)))
        .collect();
    renaming.push((first.rep, arena.var_expr(second.rep)));
    substitute_vars(arena, first.thread, &renaming) == second.thread
}

/// Whether a fragment reduced from `source` over dimension `dim` is accessed at `indices` by a loop
/// whose layout is `source`'s own, with the loop variable the access leaves out standing for the
/// reduced dimension. A reduction's layout holds each result on exactly the threads that held
/// some element of its row (inference checked that when it built it), so every iteration runs on
/// a holder, and together the iterations of a row reach all of them: contained for reads and for
/// writes, without enumerating. This is the pattern of every row statistic (`scores_max[i]` read
/// in the loop over `acc_s[i, j]`).
pub(super) fn reduced_in_source_layout(
    arena: &mut ExprArena,
    loop_layout: &FragmentLayout,
    indices: &[ExprId],
    source: &FragmentLayout,
    dim: usize,
) -> bool {
    if source.shape.len() != loop_layout.vars.len()
        || indices.len() + 1 != source.shape.len()
        || source.replicate != loop_layout.replicate
        || dim >= source.shape.len()
    {
        return false;
    }
    // The loop variable behind each kept dimension of the source, then the one left over.
    let mut used: Vec<VarId> = Vec::with_capacity(loop_layout.vars.len());
    for &index in indices {
        match loop_layout
            .vars
            .iter()
            .find(|&&v| arena.var_expr(v) == index)
        {
            Some(&var) if !used.contains(&var) => used.push(var),
            _ => return false,
        }
    }
    let Some(&reduced) = loop_layout.vars.iter().find(|v| !used.contains(v)) else {
        return false;
    };
    used.insert(dim, reduced);
    let extent_of = |var: VarId| {
        let position = loop_layout.vars.iter().position(|&v| v == var);
        position.map(|p| loop_layout.shape[p])
    };
    if used
        .iter()
        .zip(&source.shape)
        .any(|(&var, &extent)| extent_of(var) != Some(extent))
    {
        return false;
    }
    let mut renaming: Vec<(VarId, ExprId)> = source
        .vars
        .iter()
        .zip(&used)
        .map(|(&own, &var)| (own, arena.var_expr(var)))
        .collect();
    renaming.push((source.rep, arena.var_expr(loop_layout.rep)));
    substitute_vars(arena, source.thread, &renaming) == loop_layout.thread
}

/// The first access of `fragment` at `indices` by `loop_shape` that runs on a thread not holding
/// its element, or (for writes) leaves an owner of a written element without the value.
/// `owners` is `fragment.owners(arena)`, built once per fragment by the caller.
pub(super) fn misplaced_access(
    arena: &ExprArena,
    loop_shape: &LoopShape<'_>,
    fragment: &FragmentLayout,
    owners: &Owners,
    indices: &[ExprId],
    write: bool,
) -> Option<Misplaced> {
    let layout = loop_shape.layout;
    let mut inputs = layout.vars.clone();
    inputs.extend(loop_shape.serial.iter().map(|&(var, _)| var));
    inputs.push(layout.rep);
    let mut domain = layout.shape.clone();
    domain.extend(loop_shape.serial.iter().map(|&(_, extent)| extent));
    domain.push(layout.replicate);
    if domain.iter().try_fold(1i64, |acc, &e| acc.checked_mul(e))? > MAX_CHECKED {
        return None;
    }
    let mut outputs = vec![layout.thread];
    outputs.extend(indices);
    let mut program = ExprProgram::compile_zeroing(arena, &inputs, &outputs);
    let mut written = write.then(|| vec![false; owners.elements() * owners.replicate()]);
    let mut found = None;
    let mut ordinals: Vec<i64> = Vec::new();
    for_each_chunk(&domain, |_, columns, len| {
        let Some(batch) = program.run_batch(columns, len) else {
            return true;
        };
        // Row-major element numbers, -1 where an index is out of bounds (the bounds checks'
        // business, not a layout's), in one pass per dimension.
        ordinals.clear();
        ordinals.resize(len, 0);
        for (k, &extent) in owners.shape().iter().enumerate() {
            for (ordinal, &index) in ordinals.iter_mut().zip(batch.column(k + 1)) {
                let inside = *ordinal >= 0 && (0..extent).contains(&index);
                *ordinal = if inside {
                    *ordinal * extent + index
                } else {
                    -1
                };
            }
        }
        let threads = batch.column(0);
        for (p, (&ordinal, &thread)) in ordinals.iter().zip(threads).enumerate() {
            let Ok(ordinal) = usize::try_from(ordinal) else {
                continue;
            };
            let holders = owners.of(ordinal);
            // Holders are sorted: a fully replicated fragment has every thread here.
            if let Ok(slot) = holders.binary_search(&thread) {
                if let Some(written) = written.as_mut() {
                    written[ordinal * owners.replicate() + slot] = true;
                }
                continue;
            }
            found = Some(Misplaced {
                iteration: columns[..columns.len() - 1].iter().map(|c| c[p]).collect(),
                variables: inputs[..inputs.len() - 1].to_vec(),
                element: (1..=indices.len()).map(|k| batch.column(k)[p]).collect(),
                thread,
                owners: holders.to_vec(),
                stale_owner: false,
            });
            return false;
        }
        true
    });
    if found.is_some() {
        return found;
    }
    stale_owner(fragment, owners, written.as_deref()?)
}

/// An owner of an element some iteration writes, that no iteration on that owner writes.
fn stale_owner(fragment: &FragmentLayout, owners: &Owners, written: &[bool]) -> Option<Misplaced> {
    let replicate = owners.replicate().max(1);
    for (ordinal, slots) in written.chunks(replicate).enumerate() {
        if !slots.iter().any(|&w| w) {
            continue;
        }
        let Some(slot) = slots.iter().position(|&w| !w) else {
            continue;
        };
        let holders = owners.of(ordinal);
        return Some(Misplaced {
            iteration: Vec::new(),
            variables: Vec::new(),
            element: unflatten(ordinal as u64, &fragment.shape),
            thread: holders.get(slot).copied().unwrap_or(-1),
            owners: holders.to_vec(),
            stale_owner: true,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use tilec_ir::ExprArena;

    use super::{LoopShape, misplaced_access};
    use crate::layout::FragmentLayout;

    /// A 1-D fragment of 32 elements on threads `j` and `j + 32` (replicated twice).
    fn replicated_fragment(arena: &mut ExprArena) -> FragmentLayout {
        let plain = FragmentLayout::plan(arena, &[32], 64, 1);
        assert_eq!(plain.replicate, 2, "{}", plain.describe(arena));
        plain
    }

    #[test]
    fn reads_on_a_holding_thread_are_contained() {
        let mut arena = ExprArena::new();
        let fragment = replicated_fragment(&mut arena);
        let index = arena.var_expr(fragment.vars[0]);
        let shape = LoopShape {
            layout: &fragment,
            serial: &[],
        };
        // The fragment's own layout, read as a loop layout: every replica reads its own copy.
        assert_eq!(
            misplaced_access(
                &arena,
                &shape,
                &fragment,
                &fragment.owners(&arena),
                &[index],
                false
            ),
            None
        );
        // As a write, every copy is written too.
        assert_eq!(
            misplaced_access(
                &arena,
                &shape,
                &fragment,
                &fragment.owners(&arena),
                &[index],
                true
            ),
            None
        );
    }

    #[test]
    fn writes_from_one_replica_leave_the_other_copy_stale() {
        let mut arena = ExprArena::new();
        let fragment = replicated_fragment(&mut arena);
        // The loop runs each iteration once, on thread j: copies on threads 32..63 are never written.
        let loop_layout = FragmentLayout::plan(&mut arena, &[32], 32, 1);
        let index = arena.var_expr(loop_layout.vars[0]);
        let shape = LoopShape {
            layout: &loop_layout,
            serial: &[],
        };
        assert_eq!(
            misplaced_access(
                &arena,
                &shape,
                &fragment,
                &fragment.owners(&arena),
                &[index],
                false
            ),
            None,
            "reading from one replica is fine"
        );
        let stale = misplaced_access(
            &arena,
            &shape,
            &fragment,
            &fragment.owners(&arena),
            &[index],
            true,
        )
        .expect("the second copy is stale");
        assert!(stale.stale_owner);
        assert_eq!(
            (stale.element, stale.thread, stale.owners),
            (vec![0], 32, vec![0, 32])
        );
    }

    #[test]
    fn reads_on_another_thread_are_misplaced() {
        let mut arena = ExprArena::new();
        let fragment = FragmentLayout::plan(&mut arena, &[64], 64, 1);
        let loop_layout = FragmentLayout::plan(&mut arena, &[64], 64, 1);
        // Read the mirrored element: iteration k on thread k needs element 63 - k.
        let k = arena.var_expr(loop_layout.vars[0]);
        let last = arena.int(63);
        let mirrored = arena.sub(last, k);
        let shape = LoopShape {
            layout: &loop_layout,
            serial: &[],
        };
        let misplaced = misplaced_access(
            &arena,
            &shape,
            &fragment,
            &fragment.owners(&arena),
            &[mirrored],
            false,
        )
        .expect("thread 0 does not hold element 63");
        assert_eq!(
            (
                misplaced.iteration,
                misplaced.element,
                misplaced.thread,
                misplaced.owners
            ),
            (vec![0], vec![63], 0, vec![63])
        );
    }
}
