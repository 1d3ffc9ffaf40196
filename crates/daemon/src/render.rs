//! Printing diagnostics: source snippets for people (annotate-snippets, the renderer rustc uses) and
//! JSON Lines for tools.

use std::path::Path;

use annotate_snippets::{Level, Renderer, Snippet};
use serde_json::{Map, Value, json};
use tilec_db::{Db, FileDiagnostic, InstanceReport, SourceFile, line_column};
use tilec_ir::{ConstValue, Severity, Span};

fn level(severity: Severity) -> Level {
    match severity {
        Severity::Error => Level::Error,
        Severity::Warning => Level::Warning,
        Severity::Info => Level::Info,
        Severity::NotAnalysed => Level::Note,
    }
}

/// Said under every `not-analysed` diagnostic: whose problem it is, and what was withheld.
const NOT_ANALYSED_NOTE: &str = "this is a limit of tilec, not an error in the kernel: the \
     instance's other checks are withheld, and `tilec check` exits 0 on it unless --strict";

/// The longest underline printed: a diagnostic over a machine-generated expression thousands of
/// characters long underlines its start rather than flooding the terminal.
const MAX_UNDERLINE: usize = 160;

/// Clamps a span to the text and to character boundaries, so rendering never panics.
fn clamp(text: &str, span: Span) -> std::ops::Range<usize> {
    let mut start = (span.start as usize).min(text.len());
    let mut end = (span.end as usize)
        .clamp(start, text.len())
        .min(start + MAX_UNDERLINE);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    while !text.is_char_boundary(end) {
        end += 1;
    }
    start..end
}

/// A diagnostic as rustc prints them: the message, the code, the snippet with the primary range and
/// every related location labelled, and the help.
pub(crate) fn human(path: &Path, text: &str, diagnostic: &FileDiagnostic, styled: bool) -> String {
    let origin = path.display().to_string();
    let mut snippet = Snippet::source(text)
        .origin(&origin)
        .fold(true)
        .annotation(level(diagnostic.severity).span(clamp(text, diagnostic.span)));
    for related in &diagnostic.related {
        snippet = snippet.annotation(
            Level::Info
                .span(clamp(text, related.span))
                .label(&related.message),
        );
    }
    let code = diagnostic.code.name();
    let mut message = level(diagnostic.severity)
        .title(&diagnostic.message)
        .id(code)
        .snippet(snippet);
    let help = diagnostic
        .help
        .as_deref()
        .map(|help| Level::Help.title(help));
    if let Some(help) = help {
        message = message.footer(help);
    }
    if let Some(note) = &diagnostic.instances_note {
        message = message.footer(Level::Note.title(note));
    }
    if diagnostic.severity == Severity::NotAnalysed {
        message = message.footer(Level::Note.title(NOT_ANALYSED_NOTE));
    }
    let explain = format!("for more about this error, run `tilec explain {code}`");
    if diagnostic.severity == Severity::Error {
        message = message.footer(Level::Note.title(&explain));
    }
    let renderer = if styled {
        Renderer::styled()
    } else {
        Renderer::plain()
    };
    renderer.render(message).to_string()
}

/// A problem in a file that is not Python (tilec.toml), rendered the same way.
pub(crate) fn human_plain(
    path: &Path,
    text: &str,
    code: &str,
    message: &str,
    span: Option<Span>,
    styled: bool,
) -> String {
    let origin = path.display().to_string();
    let mut report = Level::Error.title(message).id(code);
    if let Some(span) = span.filter(|_| !text.is_empty()) {
        report = report.snippet(
            Snippet::source(text)
                .origin(&origin)
                .fold(true)
                .annotation(Level::Error.span(clamp(text, span))),
        );
    }
    let renderer = if styled {
        Renderer::styled()
    } else {
        Renderer::plain()
    };
    let rendered = renderer.render(report).to_string();
    if span.is_none() {
        format!("{rendered}\n  --> {origin}")
    } else {
        rendered
    }
}

/// A compile-time constant as JSON (dtypes as their names, tuples as arrays).
pub(crate) fn const_json(value: &ConstValue) -> Value {
    match value {
        ConstValue::None => Value::Null,
        ConstValue::Bool(value) => json!(value),
        ConstValue::Int(value) => json!(value),
        ConstValue::Float(bits) => json!(f64::from_bits(*bits)),
        ConstValue::Str(text) => json!(text),
        ConstValue::DType(dtype) => json!(dtype.name()),
        ConstValue::Tuple(items) | ConstValue::List(items) => {
            Value::Array(items.iter().map(const_json).collect())
        }
        ConstValue::Dict(entries) => {
            let mut object = Map::new();
            for (key, value) in entries {
                let key = match key {
                    ConstValue::Str(text) => text.clone(),
                    other => other.to_string(),
                };
                object.insert(key, const_json(value));
            }
            Value::Object(object)
        }
        ConstValue::RunTime => json!("<run time>"),
        ConstValue::Callable(path) => json!(path),
    }
}

pub(crate) fn instance_json(path: &Path, report: &InstanceReport) -> Value {
    let mut args = Map::new();
    for (name, value) in &report.args {
        args.insert(name.clone(), const_json(value));
    }
    let mut assumed = Map::new();
    for arg in &report.assumed {
        let entry = json!({"value": const_json(&arg.value), "source": arg.source});
        assumed.insert(arg.name.clone(), entry);
    }
    json!({
        "kind": "instance",
        "file": path.display().to_string(),
        "kernel": report.kernel,
        "instance": report.index,
        "args": args,
        "symbolic": report.symbolic,
        "assumed": assumed,
        "status": if report.has_errors { "error" } else { "ok" },
    })
}

pub(crate) fn diagnostic_json(db: &dyn Db, file: SourceFile, diagnostic: &FileDiagnostic) -> Value {
    let path = file.path(db).display().to_string();
    let (line, column) = line_column(db, file, diagnostic.span.start);
    let (end_line, end_column) = line_column(db, file, diagnostic.span.end);
    let related: Vec<Value> = diagnostic
        .related
        .iter()
        .map(|related| {
            let (line, column) = line_column(db, file, related.span.start);
            json!({"file": path, "line": line, "column": column, "message": related.message})
        })
        .collect();
    json!({
        "kind": "diagnostic",
        "file": path,
        "line": line,
        "column": column,
        "end_line": end_line,
        "end_column": end_column,
        "severity": diagnostic.severity.name(),
        "code": diagnostic.code.name(),
        "message": diagnostic.message,
        "help": diagnostic.help,
        "instances_note": diagnostic.instances_note,
        "kernel": diagnostic.kernel,
        "instance": diagnostic.instance,
        "related": related,
    })
}
