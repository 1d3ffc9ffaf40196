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
    inner: Arc<ParsedParts>,
}

/// What the rest of the front end reads of a parse: the tree, the errors, and the ranges of comments
/// and of tokens that may span lines (strings).
#[derive(Debug)]
struct ParsedParts {
    syntax: ModModule,
    errors: Vec<(String, TextRange)>,
    comments: Vec<TextRange>,
    multiline_tokens: Vec<TextRange>,
}

impl ParsedParts {
    fn from_parsed(parsed: Parsed<ModModule>, keep: impl Fn(TextRange) -> bool) -> ParsedParts {
        let tokens_of = |wanted: &dyn Fn(TokenKind) -> bool| -> Vec<TextRange> {
            parsed
                .tokens()
                .iter()
                .filter(|token| wanted(token.kind()) && keep(token.range()))
                .map(Ranged::range)
                .collect()
        };
        let comments = tokens_of(&|kind| kind == TokenKind::Comment);
        let multiline_tokens = tokens_of(&|kind| {
            matches!(
                kind,
                TokenKind::String | TokenKind::FStringMiddle | TokenKind::TStringMiddle
            )
        });
        let errors = parsed
            .errors()
            .iter()
            .filter(|error| keep(error.location))
            .map(|error| (error.error.to_string(), error.location))
            .collect();
        let mut syntax = parsed.into_syntax();
        syntax.body.retain(|stmt| keep(stmt.range()));
        ParsedParts {
            syntax,
            errors,
            comments,
            multiline_tokens,
        }
    }
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
    /// Parses a file. When it has syntax errors, each top-level definition is parsed again on its
    /// own (see [`top_level_chunks`]): ruff's recovery cannot tell where an unclosed `(` ends, and
    /// would otherwise swallow every kernel after the one being typed into.
    pub fn parse(text: &str) -> ParsedModule {
        let whole = parse_unchecked_source(text, PySourceType::Python);
        if whole.errors().is_empty() {
            return ParsedModule {
                inner: Arc::new(ParsedParts::from_parsed(whole, |_| true)),
            };
        }
        let strings: Vec<TextRange> = whole
            .tokens()
            .iter()
            .filter(|token| token.kind() == TokenKind::String)
            .map(Ranged::range)
            .collect();
        let chunks = top_level_chunks(text, &strings);
        if chunks.len() < 2 {
            return ParsedModule {
                inner: Arc::new(ParsedParts::from_parsed(whole, |_| true)),
            };
        }
        let mut parts = chunks.iter().map(|&(start, end)| {
            // Stand in for what precedes the chunk with as many bytes of one comment line, so
            // that every offset in the chunk's tree is an offset of the file; a comment costs the
            // lexer one scan for its line break, where blanked-out lines would cost a token each.
            let mut padded = match start {
                0 => String::new(),
                1 => "\n".to_owned(),
                _ => format!("#{}\n", " ".repeat(start - 2)),
            };
            padded.push_str(&text[start..end]);
            let range = TextRange::new(
                ruff_text_size::TextSize::new(u32::try_from(start).unwrap_or(u32::MAX)),
                ruff_text_size::TextSize::new(u32::try_from(end).unwrap_or(u32::MAX)),
            );
            let inside = move |r: TextRange| {
                range.contains_range(r) || (r.is_empty() && r.start() == range.end())
            };
            let mut part = ParsedParts::from_parsed(
                parse_unchecked_source(&padded, PySourceType::Python),
                inside,
            );
            // An error at the chunk's end of file ("unexpected EOF" after an unclosed bracket)
            // sits where the next definition starts; it belongs to this chunk's statement, at its
            // last character, or it would count as an error of the next kernel and hide it.
            let content_end = ruff_text_size::TextSize::new(
                u32::try_from(start + text[start..end].trim_end().len()).unwrap_or(u32::MAX),
            );
            for (_, location) in &mut part.errors {
                if location.start() > content_end {
                    *location = TextRange::empty(content_end);
                }
            }
            part
        });
        let Some(mut merged) = parts.next() else {
            return ParsedModule {
                inner: Arc::new(ParsedParts::from_parsed(whole, |_| true)),
            };
        };
        for part in parts {
            merged.syntax.body.extend(part.syntax.body);
            merged.errors.extend(part.errors);
            merged.comments.extend(part.comments);
            merged.multiline_tokens.extend(part.multiline_tokens);
        }
        merged.syntax.range = TextRange::up_to(ruff_text_size::TextSize::new(
            u32::try_from(text.len()).unwrap_or(u32::MAX),
        ));
        ParsedModule {
            inner: Arc::new(merged),
        }
    }

    pub fn syntax(&self) -> &ModModule {
        &self.inner.syntax
    }

    /// Every syntax error the parser reported, in order.
    pub fn errors(&self) -> Vec<SyntaxError> {
        self.inner
            .errors
            .iter()
            .map(|(message, location)| SyntaxError {
                message: message.clone(),
                span: span_of(*location),
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
    pub(crate) fn comment_ranges(&self) -> &[TextRange] {
        &self.inner.comments
    }

    /// The byte ranges of tokens that may span lines and keep their blank lines (strings).
    pub(crate) fn multiline_token_ranges(&self) -> &[TextRange] {
        &self.inner.multiline_tokens
    }
}

/// The byte ranges of a file's top-level pieces, cut before each line at column 0 that starts a
/// statement: not blank, not a comment, not a closing bracket or a clause that continues the
/// statement above (`else:`, `except`, ...), not inside a string, and not right after a decorator.
fn top_level_chunks(text: &str, strings: &[TextRange]) -> Vec<(usize, usize)> {
    const CONTINUATIONS: [&str; 5] = ["else", "elif", "except", "finally", "case"];
    let mut starts = vec![0];
    let mut offset = 0;
    let mut previous_is_decorator = false;
    for line in text.split_inclusive('\n') {
        let at = offset;
        offset += line.len();
        let first = line.bytes().next().unwrap_or(b' ');
        if first.is_ascii_whitespace() || first == b'#' {
            continue;
        }
        let in_string = strings
            .iter()
            .any(|s| s.start().to_usize() < at && at < s.end().to_usize());
        let continues = matches!(first, b')' | b']' | b'}')
            || CONTINUATIONS.iter().any(|word| {
                line.strip_prefix(word)
                    .is_some_and(|rest| rest.starts_with([' ', ':', '\t']))
            });
        if at > 0 && !in_string && !continues && !previous_is_decorator {
            starts.push(at);
        }
        previous_is_decorator = !in_string && first == b'@';
    }
    let ends = starts.iter().skip(1).copied().chain([text.len()]);
    starts.iter().copied().zip(ends).collect()
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
    let column = start
        - text[..start.min(text.len())]
            .rfind('\n')
            .map_or(0, |at| at + 1);
    let mut out = String::with_capacity(end.saturating_sub(start));
    let mut line_start = start;
    while line_start < end {
        let line_end = text[line_start..end]
            .find('\n')
            .map_or(end, |at| line_start + at);
        // Both lists are sorted by position and do not overlap: the searches keep this linear
        // in the text, where scanning them for every line made a file of thousands of kernels
        // quadratic.
        let later = strings.partition_point(|string| string.end().to_usize() <= line_start);
        let inside_string = strings.get(later).is_some_and(|string| {
            string.start().to_usize() < line_start && line_start < string.end().to_usize()
        });
        let mut line = String::new();
        let mut cursor = line_start;
        let first = comments.partition_point(|c| c.start().to_usize() < line_start);
        for comment in comments[first..]
            .iter()
            .take_while(|c| c.start().to_usize() < line_end)
        {
            line.push_str(&text[cursor..comment.start().to_usize()]);
            cursor = comment.end().to_usize().min(line_end);
        }
        line.push_str(&text[cursor..line_end]);
        // A definition nested in a compound statement is dedented to column 0, so that its normal
        // form parses on its own; the lines of a multi-line string are kept as written.
        let dedented = if inside_string || line_start == start {
            line.as_str()
        } else {
            let indent = line.len() - line.trim_start_matches(' ').len();
            &line[indent.min(column)..]
        };
        let kept = if inside_string {
            dedented
        } else {
            dedented.trim_end()
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
    fn an_unclosed_bracket_is_one_error_of_its_own_definition() {
        let text = "def f(x):\n    y = g(x[\n    return y\n\n\ndef h(x):\n    return x\n";
        let parsed = ParsedModule::parse(text);
        let errors = parsed.primary_errors();
        assert_eq!(errors.len(), 1, "{errors:?}");
        let next = u32::try_from(text.find("def h").unwrap_or_default()).unwrap_or_default();
        assert!(errors[0].span.start < next, "{errors:?}");
        assert!(
            parsed.syntax().body.len() == 2,
            "both definitions are kept: {:?}",
            parsed.syntax().body
        );
    }

    #[test]
    fn syntax_errors_are_reported_with_spans() {
        let parsed = ParsedModule::parse("def f(:\n    pass\n");
        let errors = parsed.errors();
        assert!(!errors.is_empty());
        assert!(errors[0].span.start <= 6);
    }
}
