//! Inlay hints: registers per thread after each `T.alloc_fragment`, bytes after each
//! `T.alloc_shared`, the vector width of laid-out `T.Parallel` loops and fragment copies that
//! vectorise, and a summary of the launch at each `T.Kernel` line. Each kernel is described through
//! the instance its hovers show. A hint that would say nothing (`vector 1`, no registers) is left
//! out: hints take room in the code.

use tilec_db::{Db, SourceFile, kernel_positions, kernel_world, layouts, resources};
use tilec_ir::{EntityId, EntityKind, LoopKind, Scope, World};
use tilec_passes::check::format_bytes;
use tilec_passes::layout::Layouts;
use tilec_passes::resources::Resources;

use crate::cursor::{first_line, instance_label, kernels};
use crate::describe::{launch_hint, launch_summary};

/// A label shown at the end of a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlayHint {
    /// Byte offset where the label goes (the end of the statement's first line).
    pub offset: u32,
    pub label: String,
    pub tooltip: String,
    /// The name of the kernel it describes, so that an editor can keep a kernel's hints while a
    /// syntax error hides its analysis.
    pub kernel: String,
}

/// The hints of every kernel of the file, in source order.
pub fn inlay_hints(db: &dyn Db, file: SourceFile) -> Vec<InlayHint> {
    let text = file.text(db);
    let mut hints = Vec::new();
    for kernel in kernels(db, file) {
        let Some(instance) = kernel.shown else {
            continue;
        };
        let world = kernel_world(db, instance);
        let layouts = layouts(db, instance);
        let resources = resources(db, instance);
        let spans = &kernel_positions(db, instance).spans;
        let name = kernel.def.name(db).to_string();
        let instance_words = format!("instance {} of `{name}`", instance_label(db, instance));
        for entity in world.entities() {
            let label = label_of(world, layouts, resources, entity);
            let (Some(label), Some(span)) = (label, spans.get(entity)) else {
                continue;
            };
            if span.start == span.end {
                continue;
            }
            // The launch's hint is short; its tooltip has the whole summary.
            let tooltip = match world.kind(entity) {
                Some(EntityKind::Kernel) => launch_summary(world, resources, entity)
                    .map_or(instance_words.clone(), |summary| {
                        format!("{summary}\n{instance_words}")
                    }),
                _ => instance_words.clone(),
            };
            hints.push(InlayHint {
                offset: first_line(text, span).end,
                label,
                tooltip,
                kernel: name.clone(),
            });
        }
    }
    hints.sort_by_key(|hint| hint.offset);
    hints
}

/// The label of an entity's hint, or `None` for an entity without one.
fn label_of(
    world: &World,
    layouts: &Layouts,
    resources: &Resources,
    entity: EntityId,
) -> Option<String> {
    match world.kind(entity) {
        Some(EntityKind::Kernel) => launch_hint(world, resources, entity),
        Some(EntityKind::Buffer) if !world.is_alias(entity) => {
            buffer_hint(world, resources, entity)
        }
        Some(EntityKind::Loop)
            if world
                .loops
                .get(entity)
                .is_some_and(|info| info.kind == LoopKind::Parallel) =>
        {
            vector_hint(layouts, entity)
        }
        Some(EntityKind::TileOp) => vector_hint(layouts, entity),
        _ => None,
    }
}

/// Registers per thread of a fragment (none when it takes none), bytes (and stages) of a shared
/// buffer.
fn buffer_hint(world: &World, resources: &Resources, buffer: EntityId) -> Option<String> {
    match world.scopes.get(buffer) {
        Some(Scope::Fragment) => resources
            .fragment_registers
            .get(&buffer)
            .filter(|&&count| count > 0)
            .map(|count| format!("{count} regs/thread")),
        Some(Scope::Shared | Scope::SharedDyn) => resources.shared.get(&buffer).map(|shared| {
            if shared.stages > 1 {
                format!("{} ({} stages)", format_bytes(shared.bytes), shared.stages)
            } else {
                format_bytes(shared.bytes)
            }
        }),
        // Global tensors, per-thread locals and mbarriers (8 bytes each) take no room a hint
        // would name.
        Some(Scope::Global | Scope::Local | Scope::LocalVar | Scope::Barrier) | None => None,
    }
}

/// The vector width of a laid-out loop or copy, when it is wider than one element: a scalar loop
/// is the default and not worth the room.
fn vector_hint(layouts: &Layouts, entity: EntityId) -> Option<String> {
    layouts
        .loops
        .get(&entity)
        .filter(|(_, vector)| *vector > 1)
        .map(|(_, vector)| format!("vector {vector}"))
}
