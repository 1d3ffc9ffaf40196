//! What is under the cursor: the kernel whose definition contains an offset, the instance shown
//! for it, the identifier at the offset, and the world entity it names.

use tilec_db::{Db, Instance, KernelDef, SourceFile, kernel_defs, kernel_world, outline};
use tilec_ir::{EntityId, EntityKind, Span, World};

/// A kernel of the file together with its instances; `shown` is the one hovers and hints describe.
#[derive(Clone, Debug)]
pub struct KernelAt<'db> {
    pub def: KernelDef<'db>,
    /// The whole definition, decorators included.
    pub span: Span,
    /// The name in its `def`.
    pub name_span: Span,
    pub instances: Vec<Instance<'db>>,
    pub shown: Option<Instance<'db>>,
}

/// Every TileLang kernel of the file, in source order.
pub fn kernels(db: &dyn Db, file: SourceFile) -> Vec<KernelAt<'_>> {
    let outline = outline(db, file);
    if !outline.uses_tilelang {
        return Vec::new();
    }
    let all = tilec_db::instances(db, file);
    kernel_defs(db, file)
        .iter()
        .zip(&outline.kernels)
        .map(|(&def, kernel)| {
            let instances: Vec<Instance<'_>> = all
                .iter()
                .copied()
                .filter(|instance| instance.kernel(db) == def)
                .collect();
            let shown = shown_instance(db, &instances);
            KernelAt {
                def,
                span: kernel.span,
                name_span: kernel.name_span,
                instances,
                shown,
            }
        })
        .collect()
}

/// The kernel whose definition contains `offset`.
pub fn kernel_at(db: &dyn Db, file: SourceFile, offset: u32) -> Option<KernelAt<'_>> {
    kernels(db, file)
        .into_iter()
        .find(|kernel| kernel.span.contains(offset) || kernel.span.end == offset)
}

/// The first instance whose world could be built completely, else the first instance.
fn shown_instance<'db>(db: &'db dyn Db, instances: &[Instance<'db>]) -> Option<Instance<'db>> {
    instances
        .iter()
        .copied()
        .find(|&instance| !kernel_world(db, instance).incomplete)
        .or_else(|| instances.first().copied())
}

/// `#0 (M=1024, N=1024)`: an instance by its index and arguments.
pub fn instance_label(db: &dyn Db, instance: Instance<'_>) -> String {
    let args: Vec<String> = instance
        .args(db)
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    if args.is_empty() {
        format!("#{}", instance.index(db))
    } else {
        format!("#{} ({})", instance.index(db), args.join(", "))
    }
}

/// The identifier (letters, digits, `_`) the offset touches, with its span.
pub fn identifier_at(text: &str, offset: u32) -> Option<(Span, &str)> {
    let offset = usize::try_from(offset).ok()?.min(text.len());
    let bytes = text.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut start = offset;
    while start > 0 && is_word(bytes[start - 1]) {
        start -= 1;
    }
    let mut end = offset;
    while end < bytes.len() && is_word(bytes[end]) {
        end += 1;
    }
    if start == end || bytes[start].is_ascii_digit() {
        return None;
    }
    let span = Span::new(u32::try_from(start).ok()?, u32::try_from(end).ok()?);
    Some((span, &text[start..end]))
}

/// The parameter or buffer of the world named `name` (the innermost definition wins when a name is
/// reused, as Python's last assignment would).
pub(crate) fn buffer_named(world: &World, name: &str) -> Option<EntityId> {
    world
        .entities()
        .filter(|&entity| {
            matches!(
                world.kind(entity),
                Some(EntityKind::Param | EntityKind::Buffer | EntityKind::Var)
            )
        })
        .filter(|&entity| world.name(entity) == name)
        .last()
}

/// The first line of a span: statements span their whole body, but a hint or a hover belongs to
/// the line that starts them.
pub fn first_line(text: &str, span: Span) -> Span {
    let start = (span.start as usize).min(text.len());
    let end = (span.end as usize).min(text.len()).max(start);
    let line_end = text[start..end].find('\n').map_or(end, |at| start + at);
    let trimmed = text[start..line_end].trim_end().len() + start;
    Span::new(span.start, u32::try_from(trimmed).unwrap_or(span.end))
}
