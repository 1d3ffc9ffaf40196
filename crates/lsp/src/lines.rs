//! Byte offsets ↔ LSP positions. LSP counts characters in UTF-16 code units (the default
//! encoding, which every client supports); the analysis counts bytes of UTF-8.

use tilec_ir::Span;
use tower_lsp_server::ls_types::{Position, Range};

/// Where each line of a text starts, to convert positions both ways.
#[derive(Debug)]
pub(crate) struct LineMap<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineMap<'a> {
    pub(crate) fn new(text: &'a str) -> LineMap<'a> {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(at, _)| at + 1));
        LineMap { text, starts }
    }

    /// The byte offset of a position; positions past a line's end clamp to it, past the last
    /// line to the end of the text (clients may send them while a document shrinks).
    pub(crate) fn offset(&self, position: Position) -> u32 {
        let Some(&start) = self.starts.get(position.line as usize) else {
            return u32::try_from(self.text.len()).unwrap_or(u32::MAX);
        };
        let end = self
            .starts
            .get(position.line as usize + 1)
            .map_or(self.text.len(), |&next| next - 1);
        let mut units = 0;
        let mut offset = end;
        for (at, c) in self.text[start..end].char_indices() {
            if units >= position.character as usize {
                offset = start + at;
                break;
            }
            units += c.len_utf16();
        }
        u32::try_from(offset).unwrap_or(u32::MAX)
    }

    /// The position of a byte offset (clamped to the text, and to a character boundary).
    pub(crate) fn position(&self, offset: u32) -> Position {
        let mut offset = (offset as usize).min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&start| start <= offset) - 1;
        let start = self.starts[line];
        let character: usize = self.text[start..offset].chars().map(char::len_utf16).sum();
        Position::new(
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(character).unwrap_or(u32::MAX),
        )
    }

    pub(crate) fn range(&self, span: Span) -> Range {
        Range::new(self.position(span.start), self.position(span.end))
    }

    pub(crate) fn span(&self, range: Range) -> Span {
        Span::new(self.offset(range.start), self.offset(range.end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_utf16_units_and_round_trip() {
        let text = "ab\n# é𝄞x\nlast";
        let map = LineMap::new(text);
        // `x` is after `# `, `é` (1 unit, 2 bytes) and `𝄞` (2 units, 4 bytes).
        let x = text.find('x').expect("x") as u32;
        assert_eq!(map.position(x), Position::new(1, 5));
        assert_eq!(map.offset(Position::new(1, 5)), x);
        assert_eq!(
            map.offset(Position::new(0, 99)),
            2,
            "clamped to the line's end"
        );
        assert_eq!(map.offset(Position::new(9, 0)), text.len() as u32);
        assert_eq!(map.position(text.len() as u32), Position::new(2, 4));
    }
}
