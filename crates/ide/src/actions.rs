//! Code actions: edits that carry out the fix a diagnostic names. Today: a layout conflict caused
//! by a serial loop inside a `T.Parallel` loop is fixed by iterating both axes in parallel
//! (`for i, j in T.Parallel(M, N)`), so each element is handled on the thread that holds it.

use tilec_db::{Db, SourceFile, file_diagnostics, kernel_positions, kernel_world};
use tilec_ir::{Code, EntityId, EntityKind, LoopKind, Span, World};

use crate::cursor::kernel_at;

/// Replace `span` of the file with `new_text`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextEdit {
    pub span: Span,
    pub new_text: String,
}

/// A fix for one diagnostic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeAction {
    pub title: String,
    pub edits: Vec<TextEdit>,
    /// The diagnostic it fixes: its code and range.
    pub code: Code,
    pub diagnostic_span: Span,
}

/// The fixes for diagnostics that overlap `range`.
pub fn code_actions(db: &dyn Db, file: SourceFile, range: Span) -> Vec<CodeAction> {
    let mut actions = Vec::new();
    for diagnostic in file_diagnostics(db, file) {
        let overlaps = diagnostic.span.start <= range.end && range.start <= diagnostic.span.end;
        if !overlaps || diagnostic.code != Code::LayoutConflict {
            continue;
        }
        if let Some(edit) = parallelize_serial_loop(db, file, diagnostic.span.start)
            && !actions
                .iter()
                .any(|a: &CodeAction| a.edits.contains(&edit.1))
        {
            actions.push(CodeAction {
                title: edit.0,
                edits: vec![edit.1],
                code: diagnostic.code,
                diagnostic_span: diagnostic.span,
            });
        }
    }
    actions
}

/// The innermost serial loop around `offset` that is the whole body of a `T.Parallel` loop, merged
/// into it: the title and the edit.
fn parallelize_serial_loop(
    db: &dyn Db,
    file: SourceFile,
    offset: u32,
) -> Option<(String, TextEdit)> {
    let kernel = kernel_at(db, file, offset)?;
    let instance = kernel.shown?;
    let world = kernel_world(db, instance);
    let spans = &kernel_positions(db, instance).spans;
    let mut entity = spans.entity_at(offset)?;
    let (parallel, serial) = loop {
        let parent = *world.parents.get(entity)?;
        if is_loop(world, entity, |kind| matches!(kind, LoopKind::Serial))
            && is_loop(world, parent, |kind| kind == LoopKind::Parallel)
            && world
                .bodies
                .get(parent)
                .is_some_and(|body| body == &[entity])
        {
            break (parent, entity);
        }
        entity = parent;
    };
    let text = file.text(db);
    let outer = spans.get(parallel)?;
    let merged = merge_loops(text, outer, spans.get(serial)?)?;
    let variable = serial_variable(text, spans.get(serial)?)?;
    Some((
        format!("Iterate `{variable}` with `T.Parallel` as well"),
        TextEdit {
            span: outer,
            new_text: merged,
        },
    ))
}

fn is_loop(world: &World, entity: EntityId, kind: impl Fn(LoopKind) -> bool) -> bool {
    world.kind(entity) == Some(EntityKind::Loop)
        && world.loops.get(entity).is_some_and(|info| kind(info.kind))
}

/// `for <targets> in <callee>(<args>):` split into its targets and argument text.
fn loop_header(line: &str, callees: &[&str]) -> Option<(String, String)> {
    let rest = line.trim_start().strip_prefix("for ")?;
    let (targets, iter) = rest.split_once(" in ")?;
    let iter = iter.trim_end().strip_suffix(':')?.trim_end();
    let args = callees.iter().find_map(|callee| {
        iter.strip_prefix(callee)?
            .strip_prefix('(')?
            .strip_suffix(')')
    })?;
    Some((targets.trim().to_owned(), args.trim().to_owned()))
}

fn serial_variable(text: &str, serial: Span) -> Option<String> {
    let line = text.get(serial.start as usize..)?.lines().next()?;
    loop_header(line, &["T.serial", "range"]).map(|(targets, _)| targets)
}

/// The parallel loop's text rewritten to iterate the serial loop's variable too, with the serial
/// loop's body moved out one level.
fn merge_loops(text: &str, outer: Span, inner: Span) -> Option<String> {
    let outer_text = text.get(outer.start as usize..outer.end as usize)?;
    let inner_text = text.get(inner.start as usize..inner.end as usize)?;
    let mut inner_lines = inner_text.lines();
    let (outer_targets, outer_args) = loop_header(outer_text.lines().next()?, &["T.Parallel"])?;
    let (inner_targets, inner_args) = loop_header(inner_lines.next()?, &["T.serial", "range"])?;
    // `range(a, b)` starts elsewhere than 0: `T.Parallel` extents cannot say that.
    if inner_args.contains(',') {
        return None;
    }
    let line_start = text[..inner.start as usize]
        .rfind('\n')
        .map_or(0, |at| at + 1);
    let inner_indent = inner.start as usize - line_start;
    let outer_line_start = text[..outer.start as usize]
        .rfind('\n')
        .map_or(0, |at| at + 1);
    let outer_indent = outer.start as usize - outer_line_start;
    let shift = inner_indent.checked_sub(outer_indent)?;
    let mut merged =
        format!("for {outer_targets}, {inner_targets} in T.Parallel({outer_args}, {inner_args}):");
    for line in inner_lines {
        merged.push('\n');
        let spaces = line.len() - line.trim_start_matches(' ').len();
        merged.push_str(&line[spaces.min(shift)..]);
    }
    Some(merged)
}
