//! A file's diagnostics, resolved to byte ranges: syntax errors, each instance's front-end
//! diagnostics and checks, deduplicated so that one root cause yields one diagnostic.

use ruff_source_file::LineIndex;
use ruff_text_size::TextSize;
use tilec_frontend::InstanceOrigin;
use tilec_ir::{Anchor, Code, ConstValue, Diagnostic, Severity, Span, SpanTable};

use crate::Db;
use crate::queries::{
    Instance, SourceFile, instance_checks, instance_origin, instances, kernel_positions,
    kernel_world, layouts, outline, parse, resources, thread_programs,
};

/// A secondary location of a diagnostic.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RelatedLocation {
    pub span: Span,
    pub message: String,
}

/// A diagnostic of a file, with positions resolved to byte ranges of the file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FileDiagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub span: Span,
    pub related: Vec<RelatedLocation>,
    pub help: Option<String>,
    /// The kernel it belongs to, and the instance that first showed it.
    pub kernel: Option<String>,
    pub instance: Option<u32>,
    /// When the kernel has several instances and only some show this diagnostic: which, with
    /// their arguments (`instance 1 of `scale` (N=256, threads=4096)`).
    pub instances_note: Option<String>,
    /// The indexes of the kernel's instances that show it (empty for a parse error).
    pub shown_by: Vec<u32>,
}

/// One instance of a file with its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceReport {
    pub kernel: String,
    pub index: u32,
    pub args: Vec<(String, ConstValue)>,
    pub origin: InstanceOrigin,
    /// Parameters the instance is generic over (no call site gives them a compile-time value).
    pub symbolic: Vec<String>,
    /// Values assumed for parameters no call site gives, with where each came from.
    pub assumed: Vec<tilec_ir::AssumedArg>,
    /// True when the instance has an error-level diagnostic (or sits in code that does not parse).
    pub has_errors: bool,
}

#[salsa::tracked(returns(ref))]
fn line_index(db: &dyn Db, file: SourceFile) -> LineIndex {
    LineIndex::from_source_text(file.text(db))
}

/// The 1-based line and column (in characters) of a byte offset.
pub fn line_column(db: &dyn Db, file: SourceFile, offset: u32) -> (usize, usize) {
    let location = line_index(db, file).line_column(TextSize::new(offset), file.text(db));
    (location.line.get(), location.column.get())
}

fn resolve(anchor: Anchor, spans: &SpanTable) -> Option<Span> {
    match anchor {
        Anchor::Span(span) => Some(span),
        Anchor::Entity(entity) => spans.get(entity),
    }
}

fn to_file_diagnostic(
    diagnostic: &Diagnostic,
    spans: &SpanTable,
    kernel: &str,
    index: u32,
) -> Option<FileDiagnostic> {
    Some(FileDiagnostic {
        code: diagnostic.code,
        severity: diagnostic.severity,
        message: diagnostic.message.clone(),
        span: resolve(diagnostic.anchor, spans)?,
        related: diagnostic
            .related
            .iter()
            .filter_map(|related| {
                Some(RelatedLocation {
                    span: resolve(related.anchor, spans)?,
                    message: related.message.clone(),
                })
            })
            .collect(),
        help: diagnostic.help.clone(),
        kernel: Some(kernel.to_owned()),
        instance: Some(index),
        instances_note: None,
        shown_by: vec![index],
    })
}

/// Every diagnostic of the file, in order of position. A diagnostic that several instances share
/// (same code, range and message) is reported once, for the first instance.
#[salsa::tracked(returns(ref))]
pub fn file_diagnostics(db: &dyn Db, file: SourceFile) -> Vec<FileDiagnostic> {
    let outline = outline(db, file);
    let mut found: Vec<FileDiagnostic> = parse(db, file)
        .primary_errors()
        .into_iter()
        .map(|error| FileDiagnostic {
            code: Code::ParseError,
            severity: Severity::Error,
            message: error.message,
            span: error.span,
            related: Vec::new(),
            help: (error.follow_ups > 0).then(|| {
                format!("{} more syntax error(s) in this statement follow from this one and are not shown", error.follow_ups)
            }),
            kernel: outline.kernels.iter().find(|k| k.span.start <= error.span.start && error.span.start < k.span.end).map(|k| k.name().to_owned()),
            instance: None,
            instances_note: None,
            shown_by: Vec::new(),
        })
        .collect();
    // Which instances show each diagnostic, by its position in `found`.
    let mut shown_by: Vec<Vec<Instance<'_>>> = vec![Vec::new(); found.len()];
    for instance in instances(db, file) {
        let kernel = instance.kernel(db).name(db);
        let index = instance.index(db);
        let positions = kernel_positions(db, *instance);
        let all = positions
            .diagnostics
            .iter()
            .chain(instance_checks(db, *instance))
            .chain(&layouts(db, *instance).diagnostics)
            .chain(&resources(db, *instance).diagnostics);
        for diagnostic in &withheld_past_limits(all) {
            let Some(resolved) = to_file_diagnostic(diagnostic, &positions.spans, kernel, index)
            else {
                continue;
            };
            let duplicate = found.iter().position(|existing| {
                existing.code == resolved.code
                    && existing.span == resolved.span
                    && existing.message == resolved.message
            });
            match duplicate {
                Some(position) => shown_by[position].push(*instance),
                None => {
                    found.push(resolved);
                    shown_by.push(vec![*instance]);
                }
            }
        }
    }
    for (diagnostic, shown) in found.iter_mut().zip(&shown_by) {
        diagnostic.instances_note = instances_note(db, file, shown);
        diagnostic.shown_by = shown.iter().map(|instance| instance.index(db)).collect();
    }
    found.extend(uninstantiated_kernels(db, file));
    found.extend(unresolved_imports(db, file));
    found.sort_by_key(|diagnostic| (diagnostic.span.start, diagnostic.span.end));
    found
}

/// An instance's diagnostics as reported. Where tilec met a construct it cannot analyse
/// (`not-analysed`), only those are kept, one per cause: what the instance's other checks say after
/// a construct tilec could not follow is follow-on noise that would read as the kernel's errors
/// (one unevaluable dtype gave a `dtype-mismatch` at every buffer of it). A cause met at several
/// places (the same message) is one diagnostic, at the first, with the others as related places.
fn withheld_past_limits<'a>(all: impl Iterator<Item = &'a Diagnostic>) -> Vec<Diagnostic> {
    let all: Vec<&Diagnostic> = all.collect();
    if !all.iter().any(|d| d.severity == Severity::NotAnalysed) {
        return all.into_iter().cloned().collect();
    }
    let mut causes: Vec<Diagnostic> = Vec::new();
    for diagnostic in all
        .into_iter()
        .filter(|d| d.severity == Severity::NotAnalysed)
    {
        match causes
            .iter_mut()
            .find(|cause| cause.message == diagnostic.message)
        {
            Some(cause) if cause.anchor != diagnostic.anchor => {
                if !cause.related.iter().any(|r| r.anchor == diagnostic.anchor) {
                    cause.related.push(tilec_ir::Related {
                        anchor: diagnostic.anchor,
                        message: "the same here".to_owned(),
                    });
                }
            }
            Some(_) => {}
            None => causes.push(diagnostic.clone()),
        }
    }
    causes
}

/// Which instances of a kernel a diagnostic belongs to, when that is some but not all of them.
fn instances_note(db: &dyn Db, file: SourceFile, shown: &[Instance<'_>]) -> Option<String> {
    let first = shown.first()?;
    let kernel = first.kernel(db);
    let siblings = instances(db, file)
        .iter()
        .filter(|instance| instance.kernel(db) == kernel)
        .count();
    if shown.len() >= siblings {
        return None;
    }
    let described: Vec<String> = shown
        .iter()
        .map(|instance| {
            let args: Vec<String> = instance
                .args(db)
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect();
            format!("{} ({})", instance.index(db), args.join(", "))
        })
        .collect();
    let noun = if shown.len() == 1 {
        "instance"
    } else {
        "instances"
    };
    Some(format!(
        "in {noun} {} of `{}`",
        described.join(", "),
        kernel.name(db)
    ))
}

/// An info at each relative import that names no file of the workspace (what it imports is
/// unknown to tilec, which explains the errors where it is used), and at each import that closes
/// a cycle (the names taken from a module still being imported are unknown).
fn unresolved_imports(db: &dyn Db, file: SourceFile) -> Vec<FileDiagnostic> {
    if !outline(db, file).uses_tilelang {
        return Vec::new();
    }
    let resolved = crate::imports::resolved_imports(db, file);
    let mut found = Vec::new();
    for statement in tilec_frontend::import_statements(parse(db, file)) {
        let targets: Vec<SourceFile> = resolved
            .iter()
            .filter(|(written, _)| statement.names.contains(written))
            .map(|(_, module)| *module)
            .collect();
        let module = statement.names.last().cloned().unwrap_or_default();
        let message = if statement.relative && targets.is_empty() {
            format!(
                "`{module}` is not a file of this workspace that tilec could read, so what this imports is unknown to it"
            )
        } else if let Some(cycle) = targets
            .iter()
            .find(|&&target| crate::imports::imports_module(db, target, file))
        {
            format!(
                "this import closes a cycle: `{}` imports this file back; tilec runs each module once, so what one takes from the other while it is still being imported is unknown",
                cycle.path(db).display()
            )
        } else {
            continue;
        };
        found.push(FileDiagnostic {
            code: Code::UnresolvedImport,
            severity: Severity::Info,
            message,
            span: statement.span,
            related: Vec::new(),
            help: Some("tilec reads the `.py` files under the nearest folder with `pyproject.toml`, `setup.py`, `.git` or `tilec.toml`".to_owned()),
            kernel: None,
            instance: None,
            instances_note: None,
            shown_by: Vec::new(),
        });
    }
    found
}

/// An info diagnostic at each kernel that has no instance: it is parsed but cannot be evaluated,
/// and the user should learn which parameters need values.
fn uninstantiated_kernels(db: &dyn Db, file: SourceFile) -> Vec<FileDiagnostic> {
    let instantiated: Vec<&str> = instances(db, file)
        .iter()
        .map(|instance| instance.kernel(db).name(db).as_str())
        .collect();
    outline(db, file)
        .kernels
        .iter()
        .filter(|kernel| !instantiated.contains(&kernel.name()))
        .map(|kernel| {
            let required: Vec<String> =
                kernel.params.iter().filter(|param| !param.has_default).map(|param| format!("`{}`", param.name)).collect();
            FileDiagnostic {
                code: Code::MissingArgument,
                severity: Severity::Info,
                message: format!(
                    "`{}` is not instantiated in this file, so it is not analysed: it needs values for {}",
                    kernel.name(),
                    required.join(", ")
                ),
                span: kernel.name_span,
                related: Vec::new(),
                help: Some("call it (for example in `main()`), give its parameters defaults, or list an instance in tilec.toml".to_owned()),
                kernel: Some(kernel.name().to_owned()),
                instance: None,
                instances_note: None,
                shown_by: Vec::new(),
            }
        })
        .collect()
}

/// The instances of a file with their outcomes, for reports.
pub fn instance_reports(db: &dyn Db, file: SourceFile) -> Vec<InstanceReport> {
    let diagnostics = file_diagnostics(db, file);
    instances(db, file)
        .iter()
        .map(|instance| {
            let kernel = instance.kernel(db).name(db).clone();
            let index = instance.index(db);
            let positions = kernel_positions(db, *instance);
            let own_errors = positions
                .diagnostics
                .iter()
                .chain(instance_checks(db, *instance))
                .chain(&layouts(db, *instance).diagnostics)
                .any(|d| d.severity.stops_analysis());
            let file_errors = diagnostics.iter().any(|d| {
                d.severity.stops_analysis()
                    && d.kernel.as_deref() == Some(kernel.as_str())
                    && d.instance.is_none_or(|i| i == index)
            });
            let world = kernel_world(db, *instance);
            InstanceReport {
                kernel,
                index,
                args: instance.args(db).clone(),
                origin: instance_origin(db, *instance),
                symbolic: world.symbolic_args.clone(),
                assumed: world.assumed_args.clone(),
                has_errors: own_errors || file_errors || !positions.complete,
            }
        })
        .collect()
}

/// Why an instance cannot be lowered to thread programs, positioned in its file; empty when it
/// lowers. (`tilec run` and `tilec build` report these; `tilec check` does not.)
pub fn lowering_diagnostics(db: &dyn Db, instance: Instance<'_>) -> Vec<FileDiagnostic> {
    let Err(diagnostics) = thread_programs(db, instance).as_ref() else {
        return Vec::new();
    };
    let positions = kernel_positions(db, instance);
    let kernel = instance.kernel(db).name(db);
    diagnostics
        .iter()
        .filter_map(|d| to_file_diagnostic(d, &positions.spans, kernel, instance.index(db)))
        .collect()
}
