//! Document symbols (kernels and their buffers) and go to definition (a buffer's allocation or
//! parameter, a kernel's `def`).

use tilec_db::{Db, SourceFile, kernel_positions, kernel_world};
use tilec_ir::{EntityKind, Scope, Span};

use crate::cursor::{buffer_named, identifier_at, kernel_at, kernels};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind {
    Kernel,
    Parameter,
    Buffer,
    Variable,
}

/// One entry of the outline: a kernel with its buffers as children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub kind: SymbolKind,
    /// `fragment float32[64, 64]`.
    pub detail: String,
    pub span: Span,
    pub name_span: Span,
    pub children: Vec<Symbol>,
}

/// The kernels of the file, each with its parameters and buffers.
pub fn document_symbols(db: &dyn Db, file: SourceFile) -> Vec<Symbol> {
    let text = file.text(db);
    kernels(db, file)
        .into_iter()
        .map(|kernel| {
            let mut children = Vec::new();
            if let Some(instance) = kernel.shown {
                let world = kernel_world(db, instance);
                let spans = &kernel_positions(db, instance).spans;
                for entity in world.entities() {
                    let kind = match world.kind(entity) {
                        Some(EntityKind::Param) => SymbolKind::Parameter,
                        Some(EntityKind::Buffer) => SymbolKind::Buffer,
                        Some(EntityKind::Var) => SymbolKind::Variable,
                        _ => continue,
                    };
                    let Some(span) = spans.get(entity).filter(|s| s.end > s.start) else {
                        continue;
                    };
                    let name = world.name(entity).to_owned();
                    let name_span = find_name(text, span, &name).unwrap_or(span);
                    let scope = world.scopes.get(entity).map_or("", |s| scope_word(*s));
                    let dtype = world
                        .dtypes
                        .get(entity)
                        .map_or(String::new(), ToString::to_string);
                    children.push(Symbol {
                        name,
                        kind,
                        detail: format!("{scope} {dtype}").trim().to_owned(),
                        span,
                        name_span,
                        children: Vec::new(),
                    });
                }
            }
            Symbol {
                name: kernel.def.name(db).clone(),
                kind: SymbolKind::Kernel,
                detail: format!("{} instance(s)", kernel.instances.len()),
                span: kernel.span,
                name_span: kernel.name_span,
                children,
            }
        })
        .collect()
}

fn scope_word(scope: Scope) -> &'static str {
    match scope {
        Scope::Global => "global",
        Scope::Shared | Scope::SharedDyn => "shared",
        Scope::Fragment => "fragment",
        Scope::Local | Scope::LocalVar => "local",
        Scope::Barrier => "barrier",
    }
}

/// The first whole-word occurrence of `name` inside `span`.
fn find_name(text: &str, span: Span, name: &str) -> Option<Span> {
    let start = span.start as usize;
    let within = text.get(start..(span.end as usize).min(text.len()))?;
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(at) = within[from..].find(name) {
        let begin = from + at;
        let end = begin + name.len();
        let before = within[..begin]
            .chars()
            .next_back()
            .is_none_or(|c| !is_word(c));
        let after = within[end..].chars().next().is_none_or(|c| !is_word(c));
        if before && after {
            return Some(Span::new(
                u32::try_from(start + begin).ok()?,
                u32::try_from(start + end).ok()?,
            ));
        }
        from = end;
    }
    None
}

/// Where the name under the cursor is defined: a buffer's allocation, a tensor parameter, or a
/// kernel's `def` (also from a call that instantiates it).
pub fn goto_definition(db: &dyn Db, file: SourceFile, offset: u32) -> Option<Span> {
    let text = file.text(db);
    let (_, name) = identifier_at(text, offset)?;
    let all = kernels(db, file);
    if let Some(kernel) = all.iter().find(|kernel| kernel.def.name(db) == name) {
        return Some(kernel.name_span);
    }
    let kernel = kernel_at(db, file, offset)?;
    let instance = kernel.shown?;
    let world = kernel_world(db, instance);
    let entity = buffer_named(world, name)?;
    let span = kernel_positions(db, instance).spans.get(entity)?;
    Some(find_name(text, span, name).unwrap_or(span))
}
