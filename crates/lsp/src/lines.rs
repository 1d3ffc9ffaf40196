//! Byte offsets ↔ LSP positions. LSP counts characters in UTF-16 code units (the default
//! encoding, which every client supports); the analysis counts bytes of UTF-8. Lines end at
//! `\n`, `\r\n` or a lone `\r`, as the LSP specification and Python's parser both say.

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
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        starts.extend(
            bytes
                .iter()
                .enumerate()
                .filter(|&(at, &byte)| {
                    byte == b'\n' || (byte == b'\r' && bytes.get(at + 1) != Some(&b'\n'))
                })
                .map(|(at, _)| at + 1),
        );
        LineMap { text, starts }
    }

    /// Where the text of line `line` (which starts at `start`) ends, before its terminator.
    fn line_end(&self, line: usize, start: usize) -> usize {
        let Some(&next) = self.starts.get(line + 1) else {
            return self.text.len();
        };
        let terminated = &self.text[start..next];
        start + terminated.trim_end_matches(['\n', '\r']).len()
    }

    /// The byte offset of a position; positions past a line's end clamp to it, past the last
    /// line to the end of the text (clients may send them while a document shrinks).
    pub(crate) fn offset(&self, position: Position) -> u32 {
        let Some(&start) = self.starts.get(position.line as usize) else {
            return u32::try_from(self.text.len()).unwrap_or(u32::MAX);
        };
        let end = self.line_end(position.line as usize, start);
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
        let x = text.find('x').expect("x");
        let x = u32::try_from(x).expect("a short text");
        assert_eq!(map.position(x), Position::new(1, 5));
        assert_eq!(map.offset(Position::new(1, 5)), x);
        assert_eq!(
            map.offset(Position::new(0, 99)),
            2,
            "clamped to the line's end"
        );
        let len = u32::try_from(text.len()).expect("a short text");
        assert_eq!(map.offset(Position::new(9, 0)), len);
        assert_eq!(map.position(len), Position::new(2, 4));
    }

    #[test]
    fn a_lone_cr_and_a_crlf_end_lines_like_a_lf() {
        for newline in ["\n", "\r", "\r\n"] {
            let text = ["a = 1", "bc = 2", "", "d"].join(newline);
            let map = LineMap::new(&text);
            let d = u32::try_from(text.find('d').expect("d")).expect("a short text");
            assert_eq!(map.position(d), Position::new(3, 0), "{newline:?}");
            assert_eq!(map.offset(Position::new(3, 0)), d, "{newline:?}");
            let two = u32::try_from(text.find('2').expect("2")).expect("a short text");
            assert_eq!(map.position(two), Position::new(1, 5), "{newline:?}");
            assert_eq!(
                map.offset(Position::new(1, 99)),
                two + 1,
                "clamped before the line's terminator ({newline:?})"
            );
            assert_eq!(
                map.offset(Position::new(2, 5)),
                map.offset(Position::new(2, 0))
            );
        }
    }
}
