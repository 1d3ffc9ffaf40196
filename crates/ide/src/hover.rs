//! Hovers: what tilec knows about the buffer, loop, tile op or kernel under the cursor, as
//! markdown. A kernel with several instances is described through one of them, and the hover says
//! which and lists the others.

use std::fmt::Write as _;

use tilec_db::{
    Db, Instance, SourceFile, kernel_positions, kernel_world, layouts, line_column, loop_plans,
    resources,
};
use tilec_ir::{EntityId, EntityKind, LoopKind, Scope, Span, World};
use tilec_passes::check::format_bytes;
use tilec_passes::layout::Layouts;
use tilec_passes::resources::Resources;

use crate::cursor::{KernelAt, buffer_named, first_line, identifier_at, instance_label, kernel_at};
use crate::describe::{
    formulas, grid_is_clipped, launch_summary, origin_words, ownership_grid, plan_words,
    register_words, shared_layout_words,
};

/// The ownership grid in a hover shows at most this corner of a fragment.
const HOVER_GRID: i64 = 8;

/// A hover: the range it describes and its markdown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hover {
    pub span: Span,
    pub markdown: String,
}

/// What the analyses of one instance say, borrowed from the database.
struct Facts<'a> {
    db: &'a dyn Db,
    file: SourceFile,
    world: &'a World,
    layouts: &'a Layouts,
    resources: &'a Resources,
    instance: Instance<'a>,
}

impl Facts<'_> {
    fn line_of(&self, entity: EntityId) -> Option<usize> {
        let span = kernel_positions(self.db, self.instance).spans.get(entity)?;
        Some(line_column(self.db, self.file, span.start).0)
    }
}

/// The hover at byte `offset` of `file`, if the offset is inside a kernel and names something.
pub fn hover(db: &dyn Db, file: SourceFile, offset: u32) -> Option<Hover> {
    let kernel = kernel_at(db, file, offset)?;
    let instance = kernel.shown?;
    let facts = Facts {
        db,
        file,
        world: kernel_world(db, instance),
        layouts: layouts(db, instance),
        resources: resources(db, instance),
        instance,
    };
    let text = file.text(db);
    // `Class.method` and `name#2` are written `method` and `name` in the file.
    let kernel_name = kernel.def.name(db);
    let written = kernel_name.split('#').next().unwrap_or(kernel_name);
    let written = written.rsplit('.').next().unwrap_or(written);
    let (span, body) = match identifier_at(text, offset) {
        Some((span, name)) if name == written => (span, kernel_markdown(&facts)),
        Some((span, name)) => match buffer_named(facts.world, name) {
            Some(buffer) => (span, buffer_markdown(&facts, buffer)),
            None => statement_hover(&facts, text, offset)?,
        },
        None => statement_hover(&facts, text, offset)?,
    };
    let mut markdown = format!("{body}\n\n{}", instance_footer(db, &kernel, instance));
    if let Some(generic) = generic_words(facts.world) {
        let _ = write!(markdown, "\n\n{generic}");
    }
    Some(Hover { span, markdown })
}

/// For a generic instance: what it was analysed with in place of call-site values
/// (`_Analysed with `M` symbolic; `block_M` = 128 (the first config of `get_configs()`)._`).
fn generic_words(world: &World) -> Option<String> {
    if world.symbolic_args.is_empty() && world.assumed_args.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !world.symbolic_args.is_empty() {
        let names: Vec<String> = world
            .symbolic_args
            .iter()
            .map(|name| format!("`{name}`"))
            .collect();
        parts.push(format!("{} symbolic", names.join(", ")));
    }
    for assumed in &world.assumed_args {
        parts.push(format!(
            "`{}` = {} ({})",
            assumed.name, assumed.value, assumed.source
        ));
    }
    Some(format!(
        "_Analysed with {}: no call gives these values at compile time._",
        parts.join("; ")
    ))
}

/// The loop, tile op or launch whose statement contains the offset.
fn statement_hover(facts: &Facts<'_>, text: &str, offset: u32) -> Option<(Span, String)> {
    let spans = &kernel_positions(facts.db, facts.instance).spans;
    let mut entity = spans.entity_at(offset)?;
    loop {
        let markdown = match facts.world.kind(entity) {
            Some(EntityKind::Loop) => Some(loop_markdown(facts, entity)),
            Some(EntityKind::TileOp) => Some(op_markdown(facts, entity)),
            Some(EntityKind::Kernel) => Some(kernel_markdown(facts)),
            _ => None,
        };
        if let Some(markdown) = markdown {
            return Some((first_line(text, spans.get(entity)?), markdown));
        }
        entity = *facts.world.parents.get(entity)?;
    }
}

/// `_Instance #0 (M=1024) of `softmax`; also #1 (M=4096)._`
fn instance_footer(db: &dyn Db, kernel: &KernelAt<'_>, shown: Instance<'_>) -> String {
    let others: Vec<String> = kernel
        .instances
        .iter()
        .filter(|&&other| other != shown)
        .map(|&other| instance_label(db, other))
        .collect();
    let also = if others.is_empty() {
        String::new()
    } else {
        format!("; other instances: {}", others.join(", "))
    };
    format!(
        "_Shown for instance {} of `{}`{also}._",
        instance_label(db, shown),
        kernel.def.name(db)
    )
}

fn shape_words(world: &World, buffer: EntityId) -> String {
    let dims: Vec<String> = world
        .shapes
        .get(buffer)
        .map(|shape| {
            shape
                .iter()
                .map(|&e| world.exprs.display(e).to_string())
                .collect()
        })
        .unwrap_or_default();
    format!("[{}]", dims.join(", "))
}

fn buffer_markdown(facts: &Facts<'_>, buffer: EntityId) -> String {
    let world = facts.world;
    let scope = world.scopes.get(buffer).copied();
    let dtype = world
        .dtypes
        .get(buffer)
        .map_or("?".to_owned(), ToString::to_string);
    let what = match (world.kind(buffer), scope) {
        (Some(EntityKind::Param), _) => "tensor parameter (global memory)".to_owned(),
        (Some(EntityKind::Var), _) => "scalar variable".to_owned(),
        (_, Some(scope)) => format!("{} buffer", scope.name()),
        _ => "buffer".to_owned(),
    };
    let mut out = format!(
        "**`{}`**: {what}, `{dtype}{}`",
        world.name(buffer),
        shape_words(world, buffer)
    );
    if let Some(&base) = world.aliases.get(buffer) {
        let _ = write!(out, ", a view of `{}`", world.name(base));
    }
    out.push_str("\n\n");
    match scope {
        Some(Scope::Shared | Scope::SharedDyn) => out.push_str(&shared_words(facts, buffer)),
        Some(Scope::Fragment) => out.push_str(&fragment_words(facts, buffer)),
        _ => {}
    }
    out
}

fn shared_words(facts: &Facts<'_>, buffer: EntityId) -> String {
    let storage = facts.world.storage_of(buffer);
    let Some(shared) = facts.resources.shared.get(&storage) else {
        return String::new();
    };
    let stages = if shared.stages > 1 {
        format!(" ({} stages)", shared.stages)
    } else {
        String::new()
    };
    let layout = facts
        .layouts
        .shared
        .get(&storage)
        .map(|assigned| shared_layout_words(facts.world, assigned))
        .unwrap_or_default();
    format!("{}{stages}{layout}", format_bytes(shared.bytes))
}

fn fragment_words(facts: &Facts<'_>, buffer: EntityId) -> String {
    let Some(inferred) = facts.layouts.buffers.get(&buffer) else {
        return "No layout: inference did not reach this fragment (see the diagnostics)."
            .to_owned();
    };
    let (thread, index) = formulas(facts.layouts, &inferred.layout);
    let origin_line = facts
        .line_of(inferred.op)
        .map_or(String::new(), |line| format!(" at line {line}"));
    let mut out = format!(
        "```text\nthread    = {thread}\nindex     = ({})\nreplicate = {}\n```\n\n{}, layout from {}{origin_line}",
        index.join(", "),
        inferred.layout.replicate,
        register_words(facts.world, facts.resources, buffer),
        origin_words(facts.world, inferred),
    );
    let grid = ownership_grid(facts.layouts, &inferred.layout, HOVER_GRID, HOVER_GRID);
    if !grid.is_empty() {
        let corner = if grid_is_clipped(&inferred.layout, HOVER_GRID, HOVER_GRID) {
            " (top-left corner)"
        } else {
            ""
        };
        let _ = write!(
            out,
            "\n\nThread of each element{corner}:\n```text\n{}\n```",
            grid.join("\n")
        );
    }
    out
}

fn loop_markdown(facts: &Facts<'_>, entity: EntityId) -> String {
    let world = facts.world;
    let Some(info) = world.loops.get(entity) else {
        return "loop".to_owned();
    };
    let extents: Vec<String> = info
        .extents
        .iter()
        .map(|&e| world.exprs.display(e).to_string())
        .collect();
    let kind = match info.kind {
        LoopKind::Parallel => "`T.Parallel`".to_owned(),
        LoopKind::Pipelined { num_stages } => format!("`T.Pipelined` ({num_stages} stages)"),
        LoopKind::Serial => "serial loop".to_owned(),
        LoopKind::Unroll => "unrolled loop".to_owned(),
        LoopKind::While => "`while` loop on a run-time condition".to_owned(),
    };
    let mut out = format!("**{kind}** over `[{}]`", extents.join(", "));
    out.push_str(&loop_layout_words(facts, entity));
    out
}

/// The layout and vector width of a laid-out loop (or fragment copy), and how it runs.
fn loop_layout_words(facts: &Facts<'_>, entity: EntityId) -> String {
    let Some((inferred, vector)) = facts.layouts.loops.get(&entity) else {
        return String::new();
    };
    let (thread, _) = formulas(facts.layouts, &inferred.layout);
    let mut out = format!(
        "\n\n```text\nthread = {thread}\n```\n\nvector width {vector}, layout from {}",
        origin_words(facts.world, inferred)
    );
    if let Some(plan) = loop_plans(facts.db, facts.instance).get(&entity) {
        let _ = write!(out, "\n\n{}", plan_words(plan));
    }
    out
}

fn op_markdown(facts: &Facts<'_>, entity: EntityId) -> String {
    let name = facts.world.ops.get(entity).map_or("op", |op| op.name());
    let mut out = format!("**`T.{name}`**");
    if let Some(accesses) = facts.world.accesses.get(entity) {
        let buffers: Vec<String> = accesses
            .iter()
            .map(|access| {
                let buffer = access.region.buffer;
                format!(
                    "`{}` ({})",
                    facts.world.name(buffer),
                    facts
                        .world
                        .scopes
                        .get(buffer)
                        .map_or("?", |scope| scope.name())
                )
            })
            .collect();
        if !buffers.is_empty() {
            let _ = write!(out, " on {}", buffers.join(", "));
        }
    }
    out.push_str(&loop_layout_words(facts, entity));
    out
}

fn kernel_markdown(facts: &Facts<'_>) -> String {
    let world = facts.world;
    let mut out = format!("**kernel `{}`**", world.kernel_name);
    for (launch, info) in world.launches.iter() {
        let grid: Vec<String> = info
            .grid
            .iter()
            .map(|&e| world.exprs.display(e).to_string())
            .collect();
        let block: Vec<String> = info.threads.iter().map(i64::to_string).collect();
        let _ = write!(
            out,
            "\n\nlaunch: grid ({}) × block ({})",
            grid.join(", "),
            block.join(", ")
        );
        if let Some(summary) = launch_summary(world, facts.resources, launch) {
            let _ = write!(out, "\n\n{summary}");
        }
    }
    out
}
