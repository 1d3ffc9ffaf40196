//! Source edits that set a kernel call's meta arguments (`matmul(1024, 1024, 1024, 128, 128, 32)`
//! with `block_M` set to 64 becomes `matmul(1024, 1024, 1024, 64, 128, 32)`), for the editor's
//! "apply the recommended configuration" action. The call is re-parsed on its own, so the edits
//! touch only the argument values and keep the user's formatting everywhere else.

use ruff_python_ast::Expr;
use ruff_text_size::Ranged;
use tilec_ir::Span;

/// One replacement of the file's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgumentEdit {
    pub span: Span,
    pub new_text: String,
}

/// The edits that give the call at `call` (a span of `text`) the argument values `values`, by
/// parameter name; `params` are the factory's parameter names in order, which name positional
/// arguments. A parameter the call does not pass is appended as a keyword. `None` when the span
/// is not a call or passes `*args` / `**kwargs`.
pub fn set_call_arguments(
    text: &str,
    call: Span,
    params: &[String],
    values: &[(String, i64)],
) -> Option<Vec<ArgumentEdit>> {
    let source = text.get(call.start as usize..call.end as usize)?;
    let parsed = ruff_python_parser::parse_expression(source).ok()?;
    let Expr::Call(call_expr) = parsed.expr() else {
        return None;
    };
    let arguments = &call_expr.arguments;
    if arguments.args.iter().any(Expr::is_starred_expr)
        || arguments.keywords.iter().any(|k| k.arg.is_none())
    {
        return None;
    }
    let absolute = |range: ruff_text_size::TextRange| {
        Span::new(
            call.start + u32::from(range.start()),
            call.start + u32::from(range.end()),
        )
    };
    let mut edits = Vec::new();
    let mut appended = Vec::new();
    for (name, value) in values {
        let position = params.iter().position(|p| p == name);
        let positional = position.and_then(|i| arguments.args.get(i));
        let keyword = arguments
            .keywords
            .iter()
            .find(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == name));
        let target = positional
            .map(Ranged::range)
            .or_else(|| keyword.map(|k| k.value.range()));
        match target {
            Some(range) => {
                let span = absolute(range);
                let current = text.get(span.start as usize..span.end as usize);
                if current != Some(value.to_string().as_str()) {
                    edits.push(ArgumentEdit {
                        span,
                        new_text: value.to_string(),
                    });
                }
            }
            None => appended.push(format!("{name}={value}")),
        }
    }
    if !appended.is_empty() {
        // Before the closing parenthesis, after a separator when there are arguments already.
        let close = call.end - 1;
        let has_arguments = !arguments.args.is_empty() || !arguments.keywords.is_empty();
        let separator = if has_arguments { ", " } else { "" };
        edits.push(ArgumentEdit {
            span: Span::new(close, close),
            new_text: format!("{separator}{}", appended.join(", ")),
        });
    }
    Some(edits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(text: &str, edits: &[ArgumentEdit]) -> String {
        let mut out = text.to_owned();
        let mut sorted = edits.to_vec();
        sorted.sort_by_key(|e| std::cmp::Reverse(e.span.start));
        for edit in sorted {
            out.replace_range(
                edit.span.start as usize..edit.span.end as usize,
                &edit.new_text,
            );
        }
        out
    }

    #[test]
    fn positional_keyword_and_missing_arguments_are_set_in_place() {
        let text = "x = 1\nsmall = matmul(1024, 1024, 1024, 128, 128, 32, num_stages=3)\n";
        let start = u32::try_from(text.find("matmul").unwrap_or(0)).expect("a short text");
        let end = u32::try_from(text.rfind(')').unwrap_or(0)).expect("a short text") + 1;
        let params: Vec<String> = [
            "M",
            "N",
            "K",
            "block_M",
            "block_N",
            "block_K",
            "num_stages",
            "threads",
        ]
        .map(str::to_owned)
        .to_vec();
        let values = [
            ("block_M".to_owned(), 64),
            ("block_N".to_owned(), 128),
            ("num_stages".to_owned(), 4),
            ("threads".to_owned(), 256),
        ];
        let edits = set_call_arguments(text, Span::new(start, end), &params, &values);
        let edited = apply(text, &edits.unwrap_or_default());
        assert_eq!(
            edited,
            "x = 1\nsmall = matmul(1024, 1024, 1024, 64, 128, 32, num_stages=4, threads=256)\n"
        );
    }

    #[test]
    fn a_span_that_is_no_call_gives_no_edits() {
        assert_eq!(set_call_arguments("a + b", Span::new(0, 5), &[], &[]), None);
    }
}
