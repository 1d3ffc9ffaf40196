//! Source positions, kept out of the world: a byte range type and the entity → range table.

use crate::world::EntityId;

/// A byte range `[start, end)` in a source file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: u32, end: u32) -> Span {
        Span { start, end }
    }

    pub fn contains(self, offset: u32) -> bool {
        self.start <= offset && offset < self.end
    }
}

/// Where each entity of a world was written: the statement (or allocation, or call) that created it.
///
/// Entity ids are the same as in the world built from the same kernel, so the LSP can find the entity
/// under the cursor here and read its components from the world.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpanTable {
    spans: Vec<Span>,
}

impl SpanTable {
    /// Records the span of the next entity; entities are pushed in id order.
    pub fn push(&mut self, entity: EntityId, span: Span) {
        let index = entity.index();
        if self.spans.len() <= index {
            self.spans.resize(index + 1, Span::default());
        }
        self.spans[index] = span;
    }

    pub fn get(&self, entity: EntityId) -> Option<Span> {
        self.spans.get(entity.index()).copied()
    }

    /// The innermost entity whose span contains `offset` (the smallest such span).
    pub fn entity_at(&self, offset: u32) -> Option<EntityId> {
        self.spans
            .iter()
            .enumerate()
            .filter(|(_, span)| span.contains(offset))
            .min_by_key(|(_, span)| span.end - span.start)
            .map(|(index, _)| EntityId::from_index(index))
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}
