//! Parsing with ruff's recovering parser, and the position-free normal form of a piece of source.
//!
//! The parser is wrapped here so that the rest of tilec depends on one small surface; ruff's crates are
//! pinned at 0.0.10 (newer ones need a newer rustc) and their API is not stable.

use std::sync::Arc;

use ruff_python_ast::token::TokenKind;
use ruff_python_ast::{ModModule, PySourceType};
use ruff_python_parser::{Parsed, parse_unchecked_source};
use ruff_text_size::{Ranged, TextRange};
use tilec_ir::Span;

/// A parsed file: the recovered syntax tree and its syntax errors. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ParsedModule {
    inner: Arc<Parsed<ModModule>>,
}

/// One syntax error, with the parser's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub message: String,
    pub span: Span,
    /// How many further syntax errors in the same top-level statement were folded into this one:
    /// after the first error the parser's recovery often reports consequences of it.
    pub follow_ups: usize,
}

impl ParsedModule {
    pub fn parse(text: &str) -> ParsedModule {
        ParsedModule {
            inner: Arc::new(parse_unchecked_source(text, PySourceType::Python)),
        }
    }

    pub fn syntax(&self) -> &ModModule {
        self.inner.syntax()
    }

    /// Every syntax error the parser reported, in order.
    pub fn errors(&self) -> Vec<SyntaxError> {
        self.inner
            .errors()
            .iter()
            .map(|error| SyntaxError {
                message: error.error.to_string(),
                span: span_of(error.location),
                follow_ups: 0,
            })
            .collect()
    }

    /// The first syntax error of each top-level statement, with the count of the others in it: one
    /// root cause, one diagnostic.
    pub fn primary_errors(&self) -> Vec<SyntaxError> {
        let statements: Vec<Span> = self
            .syntax()
            .body
            .iter()
            .map(|stmt| span_of(stmt.range()))
            .collect();
        let statement_of = |offset: u32| {
            statements
                .iter()
                .position(|span| span.start <= offset && offset < span.end.max(span.start + 1))
        };
        let mut primary: Vec<(Option<usize>, SyntaxError)> = Vec::new();
        let mut errors = self.errors();
        errors.sort_by_key(|error| (error.span.start, error.span.end));
        for error in errors {
            let statement = statement_of(error.span.start);
            match primary
                .iter_mut()
                .find(|(seen, _)| statement.is_some() && *seen == statement)
            {
                Some((_, first)) => first.follow_ups += 1,
                None => primary.push((statement, error)),
            }
        }
        primary.into_iter().map(|(_, error)| error).collect()
    }

    /// The byte ranges of every comment, in order.
    pub(crate) fn comment_ranges(&self) -> Vec<TextRange> {
        self.inner
            .tokens()
            .iter()
            .filter(|token| token.kind() == TokenKind::Comment)
            .map(Ranged::range)
            .collect()
    }

    /// The byte ranges of tokens that may span lines and keep their blank lines (strings).
    pub(crate) fn multiline_token_ranges(&self) -> Vec<TextRange> {
        self.inner
            .tokens()
            .iter()
            .filter(|token| {
                matches!(
                    token.kind(),
                    TokenKind::String | TokenKind::FStringMiddle | TokenKind::TStringMiddle
                )
            })
            .map(Ranged::range)
            .collect()
    }
}

pub(crate) fn span_of(range: TextRange) -> Span {
    Span::new(range.start().to_u32(), range.end().to_u32())
}

/// The text of `range` in `parsed`'s source with comments, trailing white space and blank lines
/// removed: the form a kernel's world is built from, so that a comment-only edit leaves it unchanged.
///
/// Removing these never changes what Python would execute: comments and blank lines outside strings
/// carry no meaning, and the line structure of everything else is kept.
pub(crate) fn normalized_text(parsed: &ParsedModule, text: &str, range: TextRange) -> String {
    let comments = parsed.comment_ranges();
    let strings = parsed.multiline_token_ranges();
    let start = range.start().to_usize();
    let end = range.end().to_usize().min(text.len());
    let mut out = String::with_capacity(end.saturating_sub(start));
    let mut line_start = start;
    while line_start < end {
        let line_end = text[line_start..end]
            .find('\n')
            .map_or(end, |at| line_start + at);
        let inside_string = strings.iter().any(|string| {
            string.start().to_usize() < line_start && line_start < string.end().to_usize()
        });
        let mut line = String::new();
        let mut cursor = line_start;
        for comment in comments
            .iter()
            .filter(|c| c.start().to_usize() >= line_start && c.start().to_usize() < line_end)
        {
            line.push_str(&text[cursor..comment.start().to_usize()]);
            cursor = comment.end().to_usize().min(line_end);
        }
        line.push_str(&text[cursor..line_end]);
        let kept = if inside_string {
            line.as_str()
        } else {
            line.trim_end()
        };
        if inside_string || !kept.trim().is_empty() {
            out.push_str(kept);
            out.push('\n');
        }
        line_start = line_end + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use ruff_text_size::{TextRange, TextSize};

    use super::{ParsedModule, normalized_text};

    fn normalize(text: &str) -> String {
        let parsed = ParsedModule::parse(text);
        let end = TextSize::try_from(text.len()).unwrap_or_default();
        normalized_text(&parsed, text, TextRange::new(TextSize::default(), end))
    }

    #[test]
    fn comments_and_blank_lines_do_not_matter() {
        let plain = "def f(x):\n    y = x + 1\n    return y\n";
        let commented =
            "def f(x):  # the factory\n\n    # a comment line\n    y = x + 1   \n\n    return y\n";
        assert_eq!(normalize(plain), normalize(commented));
    }

    #[test]
    fn strings_keep_their_lines_and_hashes() {
        let text = "s = \"\"\"a\n\n# not a comment\n\"\"\"\nt = '#'\n";
        assert_eq!(normalize(text), text);
    }

    #[test]
    fn syntax_errors_are_reported_with_spans() {
        let parsed = ParsedModule::parse("def f(:\n    pass\n");
        let errors = parsed.errors();
        assert!(!errors.is_empty());
        assert!(errors[0].span.start <= 6);
    }
}
