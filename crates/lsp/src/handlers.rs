//! Answers, computed on a snapshot: diagnostics, hover, inlay hints, symbols, definitions, code
//! actions and the custom `tilec/*` requests. Each takes plain parameters and returns LSP types;
//! the analysis itself is `tilec-ide`'s, the conversions of positions are [`LineMap`]'s.

use std::collections::HashMap;
use std::str::FromStr;

use serde::Deserialize;
use serde_json::{Value, json};
use tilec_db::{Db, FileDiagnostic, SourceFile, outline};
use tilec_ide::{KernelAt, identifier_at, instance_label, kernel_at, kernels};
use tilec_ir::{Code, Severity};
use tower_lsp_server::ls_types::{
    CodeActionKind, CodeActionOrCommand, CodeDescription, CodeLens, Command, Diagnostic,
    DiagnosticRelatedInformation, DiagnosticSeverity, DocumentSymbol, Hover, HoverContents,
    InlayHint, InlayHintLabel, InlayHintTooltip, Location, MarkupContent, MarkupKind,
    NumberOrString, Position, Range, SymbolKind, TextEdit, Uri, WorkspaceEdit,
};

use crate::host::{Document, Snapshot};
use crate::last_good::{LastGoodHints, Now, Shown};
use crate::lines::LineMap;

/// The scheme of a diagnostic's link to its code's page where the pages of the source tree are
/// not on this machine; the editor extension serves it with `tilec/explain`, so the page is the
/// one this binary was built with.
pub(crate) const EXPLAIN_SCHEME: &str = "tilec-explain";

/// The diagnostics of a document, or none when it does not use TileLang.
pub(crate) fn diagnostics(snapshot: &Snapshot, uri: &Uri, document: &Document) -> Vec<Diagnostic> {
    let db = &snapshot.db;
    let file = document.file;
    if !outline(db, file).uses_tilelang {
        return Vec::new();
    }
    let lines = LineMap::new(file.text(db));
    tilec_db::file_diagnostics(db, file)
        .iter()
        .map(|diagnostic| to_lsp_diagnostic(&lines, uri, diagnostic))
        .collect()
}

fn to_lsp_diagnostic(lines: &LineMap<'_>, uri: &Uri, diagnostic: &FileDiagnostic) -> Diagnostic {
    let severity = match diagnostic.severity {
        Severity::Error => DiagnosticSeverity::ERROR,
        Severity::Warning => DiagnosticSeverity::WARNING,
        // What tilec cannot analyse is no error of the user's: information, as rust-analyzer shows
        // what it cannot resolve, told apart from other information by its `not-analysed` code.
        Severity::Info | Severity::NotAnalysed => DiagnosticSeverity::INFORMATION,
    };
    let mut message = diagnostic.message.clone();
    if let Some(note) = &diagnostic.instances_note {
        message = format!("{message} ({note})");
    }
    if let Some(help) = &diagnostic.help {
        message = format!("{message}\nhelp: {help}");
    }
    let related = diagnostic
        .related
        .iter()
        .map(|related| DiagnosticRelatedInformation {
            location: Location::new(uri.clone(), lines.range(related.span)),
            message: related.message.clone(),
        })
        .collect::<Vec<_>>();
    Diagnostic {
        range: lines.range(diagnostic.span),
        severity: Some(severity),
        code: Some(NumberOrString::String(diagnostic.code.name().to_owned())),
        code_description: explain_uri(diagnostic.code).map(|href| CodeDescription { href }),
        source: Some("tilec".to_owned()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        data: Some(json!({"kernel": diagnostic.kernel, "instance": diagnostic.instance})),
        ..Diagnostic::default()
    }
}

/// The link of a diagnostic's code: the `file:` URI of its page in the source tree this binary was
/// built from (`docs/codes/<code>.md`, the page `tilec explain` prints), which any editor or browser
/// opens; `tilec-explain:/<code>` where that tree is gone, which the VS Code extension serves.
fn explain_uri(code: Code) -> Option<Uri> {
    let link = match code_pages() {
        Some(folder) => file_uri(&folder.join(format!("{}.md", code.name()))),
        None => format!("{EXPLAIN_SCHEME}:/{}", code.name()),
    };
    Uri::from_str(&link).ok()
}

/// `docs/codes/` of the source tree this binary was built from, when this machine has it (looked
/// up once: a session's links all point to the same place).
fn code_pages() -> Option<&'static std::path::Path> {
    static PAGES: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    PAGES
        .get_or_init(|| {
            let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/codes");
            let folder = folder.canonicalize().ok()?;
            folder.join("README.md").is_file().then_some(folder)
        })
        .as_deref()
}

/// A `file:` URI for an absolute path, with the characters a URI cannot hold percent-encoded.
fn file_uri(path: &std::path::Path) -> String {
    let mut uri = String::from("file://");
    let text = path.to_string_lossy().replace('\\', "/");
    if !text.starts_with('/') {
        uri.push('/');
    }
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' | b':' => {
                uri.push(char::from(byte));
            }
            _ => uri.push_str(&format!("%{byte:02X}")),
        }
    }
    uri
}

pub(crate) fn hover(snapshot: &Snapshot, document: &Document, position: Position) -> Option<Hover> {
    let db = &snapshot.db;
    let lines = LineMap::new(document.file.text(db));
    let found = tilec_ide::hover(db, document.file, lines.offset(position))?;
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: found.markdown,
        }),
        range: Some(lines.range(found.span)),
    })
}

/// The inlay hints in `range`; a kernel that cannot be analysed as it is now (a syntax error, a
/// statement half typed) keeps the hints it showed last ([`crate::last_good`]).
pub(crate) fn inlay_hints(
    snapshot: &Snapshot,
    uri: &Uri,
    document: &Document,
    range: Range,
    last_good: &LastGoodHints,
) -> Vec<InlayHint> {
    let db = &snapshot.db;
    let text = document.file.text(db);
    let lines = LineMap::new(text);
    let wanted = lines.span(range);
    crate::last_good::hints_to_show(last_good, uri, hint_state(db, document.file, text))
        .into_iter()
        .filter(|shown| wanted.start <= shown.hint.offset && shown.hint.offset <= wanted.end)
        .map(|shown| to_lsp_hint(&lines, shown))
        .collect()
}

/// What keeping hints needs to know of a file now: whether it parses, its kernels, which of them
/// were evaluated to the end, and their hints.
fn hint_state<'a>(db: &dyn Db, file: SourceFile, text: &'a str) -> Now<'a> {
    let has_syntax_error = tilec_db::file_diagnostics(db, file)
        .iter()
        .any(|diagnostic| diagnostic.code == Code::ParseError);
    let found = kernels(db, file);
    let analysed = |kernel: &KernelAt<'_>| {
        kernel
            .shown
            .is_some_and(|instance| !tilec_db::kernel_world(db, instance).incomplete)
    };
    Now {
        text,
        has_syntax_error,
        kernels: found.iter().map(|k| k.def.name(db).to_string()).collect(),
        analysed: found
            .iter()
            .filter(|kernel| analysed(kernel))
            .map(|kernel| kernel.def.name(db).to_string())
            .collect(),
        hints: tilec_ide::inlay_hints(db, file),
    }
}

fn to_lsp_hint(lines: &LineMap<'_>, Shown { hint, stale }: Shown) -> InlayHint {
    let tooltip = if stale {
        format!(
            "{}\n(from the last analysis: this kernel cannot be analysed as it is now)",
            hint.tooltip
        )
    } else {
        hint.tooltip
    };
    InlayHint {
        position: lines.position(hint.offset),
        label: InlayHintLabel::String(hint.label),
        kind: None,
        text_edits: None,
        tooltip: Some(InlayHintTooltip::String(tooltip)),
        padding_left: Some(true),
        padding_right: None,
        data: None,
    }
}

pub(crate) fn document_symbols(snapshot: &Snapshot, document: &Document) -> Vec<DocumentSymbol> {
    let db = &snapshot.db;
    let lines = LineMap::new(document.file.text(db));
    tilec_ide::document_symbols(db, document.file)
        .iter()
        .map(|symbol| to_document_symbol(&lines, symbol))
        .collect()
}

#[allow(
    deprecated,
    reason = "DocumentSymbol's `deprecated` field must still be written"
)]
fn to_document_symbol(lines: &LineMap<'_>, symbol: &tilec_ide::Symbol) -> DocumentSymbol {
    let kind = match symbol.kind {
        tilec_ide::SymbolKind::Kernel => SymbolKind::FUNCTION,
        tilec_ide::SymbolKind::Parameter => SymbolKind::VARIABLE,
        tilec_ide::SymbolKind::Buffer => SymbolKind::ARRAY,
        tilec_ide::SymbolKind::Variable => SymbolKind::VARIABLE,
    };
    let children: Vec<DocumentSymbol> = symbol
        .children
        .iter()
        .map(|child| to_document_symbol(lines, child))
        .collect();
    DocumentSymbol {
        name: symbol.name.clone(),
        detail: Some(symbol.detail.clone()),
        kind,
        tags: None,
        deprecated: None,
        range: lines.range(symbol.span),
        selection_range: lines.range(symbol.name_span),
        children: (!children.is_empty()).then_some(children),
    }
}

pub(crate) fn definition(
    snapshot: &Snapshot,
    uri: &Uri,
    document: &Document,
    position: Position,
) -> Option<Location> {
    let db = &snapshot.db;
    let lines = LineMap::new(document.file.text(db));
    let span = tilec_ide::goto_definition(db, document.file, lines.offset(position))?;
    Some(Location::new(uri.clone(), lines.range(span)))
}

pub(crate) fn code_actions(
    snapshot: &Snapshot,
    uri: &Uri,
    document: &Document,
    range: Range,
) -> Vec<CodeActionOrCommand> {
    let db = &snapshot.db;
    let lines = LineMap::new(document.file.text(db));
    let published = diagnostics(snapshot, uri, document);
    let pins = pin_generic_instances(snapshot, document, &lines, range, &published);
    tilec_ide::code_actions(db, document.file, lines.span(range))
        .into_iter()
        .map(|action| {
            let edits: Vec<TextEdit> = action
                .edits
                .iter()
                .map(|edit| TextEdit::new(lines.range(edit.span), edit.new_text.clone()))
                .collect();
            let fixes: Vec<Diagnostic> = published
                .iter()
                .filter(|d| d.range == lines.range(action.diagnostic_span))
                .cloned()
                .collect();
            CodeActionOrCommand::CodeAction(tower_lsp_server::ls_types::CodeAction {
                title: action.title,
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(fixes),
                edit: Some(WorkspaceEdit {
                    changes: Some(HashMap::from([(uri.clone(), edits)])),
                    ..WorkspaceEdit::default()
                }),
                is_preferred: Some(true),
                ..Default::default()
            })
        })
        .chain(pins)
        .collect()
}

/// For each `generic-instance` info in `range`: a quick fix that writes the instance, with the
/// values it was analysed with, into the `tilec.toml` that applies to the file (made beside the
/// file when none does), so that the user can give their own.
fn pin_generic_instances(
    snapshot: &Snapshot,
    document: &Document,
    lines: &LineMap<'_>,
    range: Range,
    published: &[Diagnostic],
) -> Vec<CodeActionOrCommand> {
    let db = &snapshot.db;
    let span = lines.span(range);
    let mut actions = Vec::new();
    for diagnostic in tilec_db::file_diagnostics(db, document.file) {
        let overlaps = diagnostic.span.start <= span.end && span.start <= diagnostic.span.end;
        if !overlaps || diagnostic.code != Code::GenericInstance {
            continue;
        }
        let instance = tilec_db::instances(db, document.file)
            .iter()
            .copied()
            .find(|i| {
                Some(i.kernel(db).name(db).as_str()) == diagnostic.kernel.as_deref()
                    && Some(i.index(db)) == diagnostic.instance
            });
        let Some(instance) = instance else { continue };
        let Some(edit) = manifest_edit(db, document, instance) else {
            continue;
        };
        let fixes: Vec<Diagnostic> = published
            .iter()
            .filter(|d| d.range == lines.range(diagnostic.span))
            .cloned()
            .collect();
        actions.push(CodeActionOrCommand::CodeAction(
            tower_lsp_server::ls_types::CodeAction {
                title: format!(
                    "Pin this instance of `{}` in tilec.toml, to analyse it with your values",
                    instance.kernel(db).name(db)
                ),
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(fixes),
                edit: Some(edit),
                ..Default::default()
            },
        ));
    }
    actions
}

/// The edit that appends the instance to the applicable tilec.toml, or creates one beside the
/// file.
fn manifest_edit(
    db: &dyn Db,
    document: &Document,
    instance: tilec_db::Instance<'_>,
) -> Option<WorkspaceEdit> {
    use tower_lsp_server::ls_types::{
        CreateFile, CreateFileOptions, DocumentChangeOperation, DocumentChanges,
        OptionalVersionedTextDocumentIdentifier, ResourceOp, TextDocumentEdit,
    };
    let existing = crate::workspace::manifest_for(&document.path);
    let manifest = existing
        .clone()
        .or_else(|| Some(document.path.parent()?.join("tilec.toml")))?;
    let folder = manifest.parent()?;
    let relative = document
        .path
        .strip_prefix(folder)
        .unwrap_or(&document.path)
        .to_string_lossy()
        .replace('\\', "/");
    let entry = tilec_ide::manifest_instance(db, instance, &relative);
    let uri = Uri::from_file_path(&manifest)?;
    let (end, create) = match existing.and_then(|path| std::fs::read_to_string(path).ok()) {
        Some(text) => {
            let lines = LineMap::new(&text);
            let end = u32::try_from(text.len()).ok()?;
            (lines.range(tilec_ir::Span::new(end, end)).end, None)
        }
        None => (
            Position::new(0, 0),
            Some(DocumentChangeOperation::Op(ResourceOp::Create(
                CreateFile {
                    uri: uri.clone(),
                    options: Some(CreateFileOptions {
                        overwrite: Some(false),
                        ignore_if_exists: Some(true),
                    }),
                    annotation_id: None,
                },
            ))),
        ),
    };
    let insert = DocumentChangeOperation::Edit(TextDocumentEdit {
        text_document: OptionalVersionedTextDocumentIdentifier { uri, version: None },
        edits: vec![tower_lsp_server::ls_types::OneOf::Left(TextEdit::new(
            Range::new(end, end),
            entry,
        ))],
    });
    Some(WorkspaceEdit {
        document_changes: Some(DocumentChanges::Operations(
            create.into_iter().chain([insert]).collect(),
        )),
        ..WorkspaceEdit::default()
    })
}

/// The parameters of `tilec/cudaSource`, `tilec/layoutSvg` and `tilec/runKernel`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KernelParams {
    pub text_document: DocumentRef,
    /// The cursor: it picks the kernel (and, for `layoutSvg`, the fragment); without it, the
    /// file's first kernel.
    pub position: Option<Position>,
    /// `tilec/runKernel` only: `auto`, `cpu` or `cuda`.
    #[serde(default)]
    pub device: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct DocumentRef {
    pub uri: Uri,
}

/// The kernel at the cursor (or the first with an instance), and where the cursor is.
fn kernel_for<'db>(
    db: &'db dyn Db,
    file: SourceFile,
    position: Option<Position>,
) -> Result<(KernelAt<'db>, Option<u32>), String> {
    let lines = LineMap::new(file.text(db));
    let offset = position.map(|p| lines.offset(p));
    let kernel = match offset.and_then(|offset| kernel_at(db, file, offset)) {
        Some(kernel) => Some(kernel),
        None => kernels(db, file).into_iter().find(|k| k.shown.is_some()),
    };
    match kernel {
        Some(kernel) if kernel.shown.is_some() => Ok((kernel, offset)),
        Some(kernel) => Err(format!(
            "kernel `{}` has no instance to show (give its parameters values: call it in the file, or list an instance in tilec.toml)",
            kernel.def.name(db)
        )),
        None => Err("no TileLang kernel in this file".to_owned()),
    }
}

/// `tilec/cudaSource`: the CUDA C++ generated for the kernel at the cursor.
pub(crate) fn cuda_source(
    snapshot: &Snapshot,
    document: &Document,
    params: &KernelParams,
) -> Result<Value, String> {
    let db = &snapshot.db;
    let (kernel, _) = kernel_for(db, document.file, params.position)?;
    let Some(instance) = kernel.shown else {
        return Err("no instance".to_owned());
    };
    let cuda = tilec_ide::cuda_text(db, instance, snapshot.target)?;
    Ok(json!({
        "kernel": kernel.def.name(db),
        "instance": instance.index(db),
        "instances": kernel.instances.iter().map(|&i| instance_label(db, i)).collect::<Vec<_>>(),
        "cuda": cuda,
    }))
}

/// `tilec/layoutSvg`: the picture of the fragment under the cursor (or the kernel's first).
pub(crate) fn layout_svg(
    snapshot: &Snapshot,
    document: &Document,
    params: &KernelParams,
) -> Result<Value, String> {
    let db = &snapshot.db;
    let (kernel, offset) = kernel_for(db, document.file, params.position)?;
    let Some(instance) = kernel.shown else {
        return Err("no instance".to_owned());
    };
    let named = offset
        .and_then(|offset| identifier_at(document.file.text(db), offset))
        .map(|(_, name)| name);
    let mut pictures = tilec_ide::svg::Picture::of_instance(db, instance);
    let chosen = pictures
        .iter()
        .position(|picture| Some(picture.buffer) == named)
        .unwrap_or(0);
    if pictures.is_empty() {
        return Err(format!(
            "`{}` has no fragment buffer to draw",
            kernel.def.name(db)
        ));
    }
    let picture = pictures.swap_remove(chosen);
    Ok(json!({
        "kernel": kernel.def.name(db),
        "instance": instance.index(db),
        "buffer": picture.buffer,
        "svg": tilec_ide::svg::fragment_svg(&picture),
    }))
}

/// What `tilec/runKernel` runs: the file on disk, its kernel and instance.
#[derive(Debug)]
pub(crate) struct RunTarget {
    pub path: std::path::PathBuf,
    pub kernel: String,
    pub instance: u32,
    /// The editor's text differs from the file on disk, which is what runs.
    pub unsaved: bool,
}

pub(crate) fn run_target(
    snapshot: &Snapshot,
    document: &Document,
    params: &KernelParams,
) -> Result<RunTarget, String> {
    let db = &snapshot.db;
    let (kernel, _) = kernel_for(db, document.file, params.position)?;
    let Some(instance) = kernel.shown else {
        return Err("no instance".to_owned());
    };
    let on_disk = std::fs::read_to_string(&document.path).ok();
    Ok(RunTarget {
        path: document.path.clone(),
        kernel: kernel.def.name(db).clone(),
        instance: instance.index(db),
        unsaved: on_disk.as_deref() != Some(document.file.text(db).as_str()),
    })
}

/// The command a tuning lens runs: its arguments are the document's URI and the text edits.
pub(crate) const APPLY_TUNING: &str = "tilec.applyTuning";

/// The tuning lenses of a document: the hardware model's recommendation for the session's
/// target and, when `tilec tune` measured this instance on a GPU of that target, the winner
/// (which `tuned`, from the `tilec` binary, finds in the tuning store).
pub(crate) fn tune_lenses(
    snapshot: &Snapshot,
    uri: &Uri,
    document: &Document,
    tuned: Option<&dyn tilec_ide::tune::TunedResults>,
) -> Vec<CodeLens> {
    let db = &snapshot.db;
    let lines = LineMap::new(document.file.text(db));
    tilec_ide::tune::editor_tune_lenses(db, document.file, snapshot.target, tuned)
        .into_iter()
        .map(|lens| {
            let range = lines.range(lens.span);
            let edits: Vec<Value> = lens
                .edits
                .iter()
                .map(|edit| json!({"range": lines.range(edit.span), "newText": edit.new_text}))
                .collect();
            let command = if edits.is_empty() {
                String::new()
            } else {
                APPLY_TUNING.to_owned()
            };
            CodeLens {
                range: Range::new(range.start, range.start),
                command: Some(Command {
                    title: lens.title,
                    command,
                    arguments: (!edits.is_empty())
                        .then(|| vec![json!(uri.as_str()), Value::Array(edits)]),
                }),
                data: None,
            }
        })
        .collect()
}

/// The workspace edit a `tilec.applyTuning` command carries out.
pub(crate) fn tuning_edit(arguments: &[Value]) -> Option<WorkspaceEdit> {
    let uri = Uri::from_str(arguments.first()?.as_str()?).ok()?;
    let edits: Vec<TextEdit> = serde_json::from_value(arguments.get(1)?.clone()).ok()?;
    Some(WorkspaceEdit {
        changes: Some(HashMap::from([(uri, edits)])),
        ..WorkspaceEdit::default()
    })
}
