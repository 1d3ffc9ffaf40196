//! Code actions: edits that carry out the fix a diagnostic names, for layout conflicts:
//! - a serial loop inside a `T.Parallel` loop is merged into it (`for i, j in T.Parallel(M, N)`),
//!   so each element is handled on the thread that holds it;
//! - a fragment whose `T.annotate_layout` disagrees with another fragment gets an annotation that
//!   works: the layout inference gives it when its annotation is left out.
//!
//! The second is offered only when the edited text, analysed again in a scratch database, has no
//! error left: the fix shown is known to work.

use tilec_db::{
    Db, FileDiagnostic, RootDatabase, Settings, SourceFile, file_diagnostics, kernel_positions,
    kernel_world, layouts,
};
use tilec_ir::{Code, EntityId, EntityKind, LoopKind, Severity, Span, World};

use crate::cursor::{kernel_at, kernels};

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
        let fixes = [
            parallelize_serial_loop(db, file, diagnostic.span.start),
            reannotate(db, file, diagnostic),
        ];
        for (title, edit) in fixes.into_iter().flatten() {
            if actions.iter().any(|a: &CodeAction| a.edits.contains(&edit)) {
                continue;
            }
            actions.push(CodeAction {
                title,
                edits: vec![edit],
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

/// The annotation of the fragment a conflict names, replaced by the layout inference gives it when
/// the annotation is left out: the title and the edit, if that layout leaves no error.
fn reannotate(
    db: &dyn Db,
    file: SourceFile,
    diagnostic: &FileDiagnostic,
) -> Option<(String, TextEdit)> {
    let fixed_here = diagnostic
        .related
        .iter()
        .find(|related| related.message.ends_with("'s layout is fixed here"))?;
    let name = fixed_here.message.strip_prefix('`')?.split('`').next()?;
    let text = file.text(db);
    let line = whole_lines(text, fixed_here.span);
    let statement = text.get(line.start as usize..line.end as usize)?;
    let indent = &statement[..statement.len() - statement.trim_start().len()];
    // Only an annotation of this fragment alone: removing it removes nothing else.
    let alone = format!("T.annotate_layout({{{name}: ");
    if !statement.trim_start().starts_with(&alone) || statement.matches(": T.").count() != 1 {
        return None;
    }
    let before = &text[..line.start as usize];
    let after = &text[line.end as usize..];
    let scratch = Scratch::new(db, file, format!("{before}{after}"));
    if scratch.has(|d| d.code == Code::LayoutConflict) {
        return None;
    }
    let annotation = scratch.inferred_annotation(name, line.start)?;
    let new_text = format!("{indent}{annotation}\n");
    if Scratch::new(db, file, format!("{before}{new_text}{after}"))
        .has(|d| d.severity == Severity::Error)
    {
        return None;
    }
    Some((
        format!("Annotate `{name}` with the layout the other accesses agree on"),
        TextEdit {
            span: line,
            new_text,
        },
    ))
}

/// The lines a span touches, from the start of the first to just after the last line break.
fn whole_lines(text: &str, span: Span) -> Span {
    let start = text[..(span.start as usize).min(text.len())]
        .rfind('\n')
        .map_or(0, |at| at + 1);
    let end = text[(span.end as usize).min(text.len())..]
        .find('\n')
        .map_or(text.len(), |at| span.end as usize + at + 1);
    Span::new(
        u32::try_from(start).unwrap_or(0),
        u32::try_from(end).unwrap_or(span.end),
    )
}

/// An edited copy of a file, analysed in a database of its own with the same settings.
struct Scratch {
    db: RootDatabase,
    file: SourceFile,
}

impl Scratch {
    fn new(db: &dyn Db, file: SourceFile, text: String) -> Scratch {
        let scratch = RootDatabase::default();
        let pass_configs = Settings::try_get(db)
            .map_or_else(Vec::new, |settings| settings.pass_configs(db).clone());
        let _settings = Settings::builder(tilec_db::target(db), pass_configs).new(&scratch);
        let path = file.path(db).clone();
        let copy = SourceFile::new(&scratch, path, text, file.manifest(db).clone());
        Scratch {
            db: scratch,
            file: copy,
        }
    }

    fn has(&self, wanted: impl Fn(&FileDiagnostic) -> bool) -> bool {
        file_diagnostics(&self.db, self.file).iter().any(wanted)
    }

    /// `T.annotate_layout({name: T.Fragment(shape, forward_fn=lambda i, j: (thread, index))})` for
    /// the layout inferred for fragment `name` of the kernel at `offset`.
    fn inferred_annotation(&self, name: &str, offset: u32) -> Option<String> {
        let kernel = kernel_at(&self.db, self.file, offset)
            .or_else(|| kernels(&self.db, self.file).into_iter().next())?;
        let instance = kernel.shown?;
        let world = kernel_world(&self.db, instance);
        let layouts = layouts(&self.db, instance);
        let (_, inferred) = layouts
            .buffers
            .iter()
            .find(|(buffer, _)| world.name(**buffer) == name)?;
        let layout = &inferred.layout;
        if layout.replicate != 1 {
            return None;
        }
        let params: Vec<String> = layout
            .vars
            .iter()
            .map(|&v| layouts.exprs.var_info(v).name.clone())
            .collect();
        let mut outputs = vec![layouts.exprs.display(layout.thread).to_string()];
        outputs.extend(
            layout
                .index
                .iter()
                .map(|&e| layouts.exprs.display(e).to_string()),
        );
        let shape: Vec<String> = layout.shape.iter().map(i64::to_string).collect();
        let shape = match shape.as_slice() {
            [only] => format!("({only},)"),
            _ => format!("({})", shape.join(", ")),
        };
        Some(format!(
            "T.annotate_layout({{{name}: T.Fragment({shape}, forward_fn=lambda {}: ({}))}})",
            params.join(", "),
            outputs.join(", ")
        ))
    }
}

/// The size written for a symbolic dimension in a `tilec.toml` instance: a placeholder the user
/// replaces with a size they run.
const SYMBOLIC_PLACEHOLDER: i64 = 1024;

/// A `[[instance]]` entry for `tilec.toml` that pins a generic instance of a kernel: every value
/// it was analysed with (assumed ones included), and a placeholder for each symbolic size, with a
/// comment saying which to edit. `file` is the kernel's file as the manifest names it (relative to
/// the manifest's folder).
pub fn manifest_instance(db: &dyn Db, instance: tilec_db::Instance<'_>, file: &str) -> String {
    let world = kernel_world(db, instance);
    let mut args: Vec<String> = Vec::new();
    for (name, value) in &world.args {
        if let Some(value) = toml_value(value) {
            args.push(format!("{} = {value}", toml_key(name)));
        }
    }
    for name in &world.symbolic_args {
        args.push(format!("{} = {SYMBOLIC_PLACEHOLDER}", toml_key(name)));
    }
    let mut entry = format!(
        "\n[[instance]]\nfile = {}\nkernel = {}\nargs = {{ {} }}\n",
        toml_string(file),
        toml_string(instance.kernel(db).name(db)),
        args.join(", ")
    );
    if !world.symbolic_args.is_empty() {
        entry = format!(
            "\n# {} only known at run time: replace {SYMBOLIC_PLACEHOLDER} with a size you run.{entry}",
            world.symbolic_args.join(", ")
        );
    }
    entry
}

fn toml_key(name: &str) -> String {
    if name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        name.to_owned()
    } else {
        toml_string(name)
    }
}

fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A compile-time value as TOML (dtypes as their names); `None` for what TOML cannot hold.
fn toml_value(value: &tilec_ir::ConstValue) -> Option<String> {
    use tilec_ir::ConstValue;
    Some(match value {
        ConstValue::Int(v) => v.to_string(),
        ConstValue::Float(_) => {
            let v = value.as_f64().filter(|v| v.is_finite())?;
            format!("{v:?}")
        }
        ConstValue::Bool(v) => v.to_string(),
        ConstValue::Str(text) => toml_string(text),
        ConstValue::DType(dtype) => toml_string(dtype.name()),
        ConstValue::List(items) | ConstValue::Tuple(items) => {
            let items: Option<Vec<String>> = items.iter().map(toml_value).collect();
            format!("[{}]", items?.join(", "))
        }
        _ => return None,
    })
}
