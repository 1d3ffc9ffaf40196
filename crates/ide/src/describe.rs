//! Words and small pictures for layouts, loop plans, shared buffers and launches: what `tilec
//! layout` prints and what the editor's hovers show, written once.

use tilec_ir::{EntityId, EntityKind, World};
use tilec_passes::check::format_bytes;

use tilec_passes::layout::{FragmentLayout, Inferred, Layouts, LoopPlan, Origin, SharedAssigned};
use tilec_passes::liveness::launch_of;
use tilec_passes::resources::{Resources, SharedBuffer};

/// Why a fragment has its layout: `T.gemm (tensor-core accumulator)`, `the T.Parallel loop`, ...
pub fn origin_words(world: &World, inferred: &Inferred) -> String {
    match &inferred.origin {
        Origin::Annotation => "T.annotate_layout".to_owned(),
        Origin::Gemm => "T.gemm (tensor-core accumulator)".to_owned(),
        Origin::GemmOperand => "T.gemm (tensor-core A operand)".to_owned(),
        Origin::Broadcast => "read at a constant index (replicated to every thread)".to_owned(),
        Origin::ReadByEveryThread => {
            "read outside parallel loops (replicated to every thread)".to_owned()
        }
        Origin::Plan { vector } => format!("planned ({vector}-wide vectors)"),
        Origin::Propagated { from } => match world.kind(*from) {
            Some(EntityKind::Loop) => "the `T.Parallel` loop".to_owned(),
            Some(EntityKind::TileOp) => "the `T.copy`".to_owned(),
            _ if world.is_alias(*from) || world.aliases.iter().any(|(_, &b)| b == *from) => {
                format!("a view of `{}` (reshaped)", world.name(*from))
            }
            _ => format!("the layout of `{}`", world.name(*from)),
        },
        Origin::Reduce { from } => format!("reduction of `{}`", world.name(*from)),
    }
}

/// The thread formula and the local index formulas of a layout, as a person reads them.
pub fn formulas(layouts: &Layouts, layout: &FragmentLayout) -> (String, Vec<String>) {
    let thread = layouts.exprs.display(layout.thread).to_string();
    let index = layout
        .index
        .iter()
        .map(|&e| layouts.exprs.display(e).to_string())
        .collect();
    (thread, index)
}

/// How lowering runs a loop on the threads, in a sentence.
pub fn plan_words(plan: &LoopPlan) -> String {
    match plan {
        LoopPlan::Dense {
            threads,
            per_thread,
        } => format!("dense: each of {threads} threads runs {per_thread} iteration(s)"),
        LoopPlan::Guarded { active, per_thread } => {
            let shown: Vec<String> = active.iter().take(8).map(i64::to_string).collect();
            let more = if active.len() > 8 { ", ..." } else { "" };
            format!(
                "guarded (sparse thread map, no closed-form inverse): threads {}{more} ({} of them) run up to {per_thread} iteration(s), each checking the thread formula",
                shown.join(", "),
                active.len(),
            )
        }
    }
}

/// `, full-bank swizzle (operand of the `T.gemm`)`: how a shared buffer is stored and why.
pub fn shared_layout_words(world: &World, assigned: &SharedAssigned) -> String {
    use tilec_passes::layout::SharedOrigin;
    let why = match assigned.origin {
        SharedOrigin::Annotation => " (from `T.annotate_layout`)".to_owned(),
        SharedOrigin::GemmOperand => format!(
            " (operand of the `T.{}`)",
            world.ops.get(assigned.op).map_or("gemm", |op| op.name())
        ),
        SharedOrigin::FragmentCopy => format!(
            " (exchanged with a fragment by the `T.{}`, so that its rows start in different banks)",
            world.ops.get(assigned.op).map_or("copy", |op| op.name())
        ),
        SharedOrigin::RowMajor => String::new(),
        SharedOrigin::EpilogueStaging => " (staging a gemm accumulator's store)".to_owned(),
    };
    format!(", {}{why}", assigned.description)
}

/// The shared buffers of one launch (a file's kernel may launch more than once).
pub fn shared_of<'a>(
    world: &'a World,
    resources: &'a Resources,
    launch: EntityId,
) -> impl Iterator<Item = (&'a EntityId, &'a SharedBuffer)> + 'a {
    resources
        .shared
        .iter()
        .filter(move |(buffer, _)| launch_of(world, **buffer) == Some(launch))
}

/// Registers per thread of a fragment, naming the base buffer of a view.
pub fn register_words(world: &World, resources: &Resources, buffer: EntityId) -> String {
    let count = resources
        .fragment_registers
        .get(&world.storage_of(buffer))
        .copied()
        .unwrap_or(0);
    match world.aliases.get(buffer) {
        Some(&base) => format!(
            "{count} registers per thread (those of `{}`)",
            world.name(base)
        ),
        None => format!("{count} registers per thread"),
    }
}

/// A launch in one line: threads, shared memory and registers at the peak, blocks per SM.
pub fn launch_summary(world: &World, resources: &Resources, launch: EntityId) -> Option<String> {
    let info = world.launches.get(launch)?;
    let shared = resources.peak_shared.get(&launch).copied().unwrap_or(0);
    let registers = resources.peak_registers.get(&launch).copied().unwrap_or(0);
    let occupancy = resources.occupancy.get(&launch).map_or(String::new(), |o| {
        format!(
            ", {} block(s) per SM (limited by {})",
            o.blocks_per_sm,
            o.limited_by.name()
        )
    });
    Some(format!(
        "{} threads, {} shared, ~{registers} fragment registers per thread{occupancy}",
        info.thread_count(),
        format_bytes(shared),
    ))
}

/// The thread owning each element (its first replica) of a 2-D fragment's top-left corner, as
/// right-aligned text rows.
pub fn ownership_grid(
    layouts: &Layouts,
    layout: &FragmentLayout,
    max_rows: i64,
    max_columns: i64,
) -> Vec<String> {
    let (rows, columns) = match layout.shape.as_slice() {
        [rows, columns] => ((*rows).min(max_rows), (*columns).min(max_columns)),
        [length] => (1, (*length).min(max_columns)),
        _ => return Vec::new(),
    };
    let point = |i: i64, j: i64| -> Vec<i64> {
        if layout.shape.len() == 1 {
            vec![j]
        } else {
            vec![i, j]
        }
    };
    let cells: Vec<Vec<String>> = (0..rows)
        .map(|i| {
            (0..columns)
                .map(|j| {
                    layout
                        .thread_of(&layouts.exprs, &point(i, j), 0)
                        .map_or("?".to_owned(), |t| t.to_string())
                })
                .collect()
        })
        .collect();
    let width = cells
        .iter()
        .flatten()
        .map(String::len)
        .max()
        .unwrap_or(1)
        .max(2);
    cells
        .iter()
        .map(|row| {
            let row: Vec<String> = row.iter().map(|cell| format!("{cell:>width$}")).collect();
            row.join(" ")
        })
        .collect()
}

/// Whether [`ownership_grid`] leaves part of the fragment out.
pub fn grid_is_clipped(layout: &FragmentLayout, max_rows: i64, max_columns: i64) -> bool {
    match layout.shape.as_slice() {
        [rows, columns] => *rows > max_rows || *columns > max_columns,
        [length] => *length > max_columns,
        _ => false,
    }
}

/// The most characters of an inlay hint VS Code shows before cutting it off with `…`.
pub const INLAY_HINT_WIDTH: usize = 43;

/// A launch in a few words, for an inlay hint: `256 threads · 16 KiB shared · ~34 regs`, with
/// the parts that say nothing (no shared memory, no fragment registers) left out and the rest
/// dropped from the end where it would not fit in [`INLAY_HINT_WIDTH`]. Blocks per SM and the
/// rest are in [`launch_summary`], the hint's tooltip.
pub fn launch_hint(world: &World, resources: &Resources, launch: EntityId) -> Option<String> {
    let info = world.launches.get(launch)?;
    let shared = resources.peak_shared.get(&launch).copied().unwrap_or(0);
    let registers = resources.peak_registers.get(&launch).copied().unwrap_or(0);
    let mut hint = format!("{} threads", info.thread_count());
    let optional = [
        (shared > 0).then(|| format!("{} shared", format_bytes(shared))),
        (registers > 0).then(|| format!("~{registers} regs")),
    ];
    for part in optional.into_iter().flatten() {
        let longer = format!("{hint} · {part}");
        if longer.chars().count() <= INLAY_HINT_WIDTH {
            hint = longer;
        }
    }
    Some(hint)
}
