//! The protocol side: tower-lsp-server's `LanguageServer` for tilec. Handlers translate requests
//! into host tasks (see [`crate::host`]) and await their answers; diagnostics are pushed by one
//! publisher task, in order, and only for the version a document still has.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tilec_ir::{Code, Target};
use tokio::sync::{mpsc as async_mpsc, oneshot};
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp_server::ls_types::*;
use tower_lsp_server::{Client, LanguageServer};

use crate::LspOptions;
use crate::handlers::{self, KernelParams, RunTarget};
use crate::host::{self, Analysis, Document, ReadFailure, Snapshot, Task, Versions, guarded, lock};
use crate::last_good::LastGoodHints;

/// Longest a `tilec/runKernel` may take before it is stopped.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// One batch of diagnostics for the publisher; `version: None` clears a closed document's.
type Publication = (Uri, Vec<Diagnostic>, Option<i32>);

pub struct Backend {
    tasks: std::sync::mpsc::Sender<Task>,
    options: LspOptions,
    /// For requests the server sends itself (`workspace/applyEdit`).
    client: Client,
    /// The inlay hints each open document showed last, which a kernel that cannot be analysed as
    /// it is now keeps (see `last_good`).
    last_good: LastGoodHints,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend").finish_non_exhaustive()
    }
}

impl Backend {
    pub(crate) fn new(client: Client, options: LspOptions) -> Backend {
        let versions: Versions = Versions::default();
        let versions_for_analysis = Arc::clone(&versions);
        let (publications, inbox) = async_mpsc::unbounded_channel::<Publication>();
        let publisher = client.clone();
        tokio::spawn(publish_in_order(publisher, Arc::clone(&versions), inbox));
        let on_change: host::OnChange = Arc::new(move |snapshot: Snapshot, uri: Uri| {
            let (publication, analysis) = analyse(&snapshot, uri, &versions_for_analysis);
            if let Some(publication) = publication {
                let _ = publications.send(publication);
            }
            analysis
        });
        let tasks = host::start(options.workers, versions, on_change);
        Backend {
            tasks,
            options,
            client,
            last_good: LastGoodHints::default(),
        }
    }

    fn send(&self, task: Task) {
        if self.tasks.send(task).is_err() {
            tracing::error!("the analysis thread is gone");
        }
    }

    /// Runs `read` on a snapshot of the document's current revision.
    async fn read<T: Send + 'static>(
        &self,
        uri: &Uri,
        read: impl FnOnce(&Snapshot, &Document) -> T + Send + 'static,
    ) -> Result<Option<T>> {
        let (reply, answer) = oneshot::channel();
        let uri = uri.clone();
        let delay = self.options.read_delay;
        self.send(Task::Read(Box::new(move |snapshot: Snapshot| {
            if let Some(delay) = delay {
                std::thread::sleep(delay);
            }
            let result = match snapshot.document(&uri) {
                None => Ok(None),
                Some(document) => guarded(|| read(&snapshot, document)).map(Some),
            };
            let _ = reply.send(result);
        })));
        match answer.await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(ReadFailure::Cancelled)) => Err(Error::content_modified()),
            Ok(Err(ReadFailure::Panicked(message))) => Err(internal_error(message)),
            Err(_) => Err(internal_error("the analysis thread stopped".to_owned())),
        }
    }

    /// A custom request's answer, or its failure as a JSON-RPC error with the reason.
    async fn kernel_request(
        &self,
        params: KernelParams,
        answer: fn(&Snapshot, &Document, &KernelParams) -> std::result::Result<Value, String>,
    ) -> Result<Value> {
        let uri = params.text_document.uri.clone();
        let result = self
            .read(&uri, move |snapshot, document| {
                answer(snapshot, document, &params)
            })
            .await?;
        match result {
            Some(Ok(value)) => Ok(value),
            Some(Err(message)) => Err(request_failed(message)),
            None => Err(request_failed(format!("{} is not open", uri.as_str()))),
        }
    }

    pub(crate) async fn cuda_source(&self, params: KernelParams) -> Result<Value> {
        self.kernel_request(params, handlers::cuda_source).await
    }

    pub(crate) async fn layout_svg(&self, params: KernelParams) -> Result<Value> {
        self.kernel_request(params, handlers::layout_svg).await
    }

    pub(crate) async fn explain(&self, params: ExplainParams) -> Result<Value> {
        let code = params.code.trim().trim_start_matches('/');
        match Code::from_name(code) {
            Some(code) => Ok(json!({"markdown": tilec_ide::explain_page(code)})),
            None => Err(request_failed(format!("unknown diagnostic code `{code}`"))),
        }
    }

    /// `tilec/runKernel`: runs the kernel at the cursor with `tilec run` in a child process (a
    /// kernel that faults or hangs cannot take the server down), on the file as saved.
    pub(crate) async fn run_kernel(&self, params: KernelParams) -> Result<Value> {
        let uri = params.text_document.uri.clone();
        let device = params.device.clone().unwrap_or_else(|| "auto".to_owned());
        if !matches!(device.as_str(), "auto" | "cpu" | "cuda") {
            return Err(request_failed(format!(
                "unknown device `{device}` (auto, cpu or cuda)"
            )));
        }
        let target = self
            .read(&uri, move |snapshot, document| {
                handlers::run_target(snapshot, document, &params)
            })
            .await?;
        let target = match target {
            Some(Ok(target)) => target,
            Some(Err(message)) => return Err(request_failed(message)),
            None => return Err(request_failed(format!("{} is not open", uri.as_str()))),
        };
        run_in_child(&self.options.tilec_exe, &target, &device).await
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct ExplainParams {
    pub code: String,
}

async fn run_in_child(exe: &std::path::Path, target: &RunTarget, device: &str) -> Result<Value> {
    let mut command = tokio::process::Command::new(exe);
    command
        .arg("run")
        .args(["--kernel", &target.kernel])
        .args(["--instance", &target.instance.to_string()])
        .args(["--device", device])
        .kill_on_drop(true)
        .stdin(std::process::Stdio::null());
    if device != "cpu" {
        command.arg("--check");
    }
    // The path comes last, after `--`: a document named `--help` or `--save=x.py` (an untitled
    // one is named by the user) must be read as a path, never as an option.
    command.arg("--").arg(&target.path);
    let output = match tokio::time::timeout(RUN_TIMEOUT, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => {
            return Err(request_failed(format!(
                "cannot start {}: {error}",
                exe.display()
            )));
        }
        Err(_) => {
            return Err(request_failed(format!(
                "the run took longer than {RUN_TIMEOUT:?} and was stopped"
            )));
        }
    };
    let mut text = String::new();
    if target.unsaved {
        text.push_str("note: the file has unsaved changes; this ran the saved file\n");
    }
    text.push_str(&String::from_utf8_lossy(&output.stdout));
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    Ok(json!({
        "kernel": target.kernel,
        "instance": target.instance,
        "ok": output.status.success(),
        "output": text,
    }))
}

/// The diagnostics of a changed document (none for a closed one), and whether its analysis must
/// run again: one cancelled by an edit of another document must, since only an edit of this one
/// would start another.
fn analyse(snapshot: &Snapshot, uri: Uri, versions: &Versions) -> (Option<Publication>, Analysis) {
    let Some(document) = snapshot.document(&uri) else {
        return (Some((uri, Vec::new(), None)), Analysis::Finished);
    };
    match guarded(|| handlers::diagnostics(snapshot, &uri, document)) {
        Ok(diagnostics) => (
            Some((uri, diagnostics, Some(document.version))),
            Analysis::Finished,
        ),
        Err(ReadFailure::Cancelled) => {
            let latest = lock(versions).get(&uri) == Some(&document.version);
            // An edit of this document brings its own analysis; only another's needs a rerun.
            let analysis = if latest {
                Analysis::Interrupted
            } else {
                Analysis::Finished
            };
            (None, analysis)
        }
        Err(ReadFailure::Panicked(message)) => {
            tracing::error!("diagnostics of {} failed: {message}", uri.as_str());
            (None, Analysis::Finished)
        }
    }
}

/// Sends diagnostics in the order they were computed, skipping any whose version is no longer
/// the document's (a newer edit arrived while they were computed).
async fn publish_in_order(
    client: Client,
    versions: Versions,
    mut inbox: async_mpsc::UnboundedReceiver<Publication>,
) {
    while let Some((uri, diagnostics, version)) = inbox.recv().await {
        if let Some(version) = version
            && lock(&versions).get(&uri) != Some(&version)
        {
            continue;
        }
        client.publish_diagnostics(uri, diagnostics, version).await;
    }
}

fn internal_error(message: String) -> Error {
    Error {
        code: ErrorCode::InternalError,
        message: message.into(),
        data: None,
    }
}

/// A request that cannot be answered for a reason the user can act on (`RequestFailed`, -32803).
fn request_failed(message: String) -> Error {
    Error {
        code: ErrorCode::ServerError(-32803),
        message: message.into(),
        data: None,
    }
}

/// The document's path: its file path, or for an unsaved (`untitled:`) document, its name.
fn document_path(uri: &Uri) -> PathBuf {
    uri.to_file_path().map_or_else(
        || PathBuf::from(uri.path().as_str()),
        |path| path.into_owned(),
    )
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let target = params
            .initialization_options
            .as_ref()
            .and_then(|options| options.get("target"))
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty());
        if let Some(name) = target {
            match Target::from_name(name) {
                Some(target) => self.send(Task::Target(target)),
                None => tracing::warn!("unknown target `{name}` in the initialization options"),
            }
        }
        Ok(InitializeResult {
            capabilities: ServerCapabilities {
                text_document_sync: Some(TextDocumentSyncCapability::Kind(
                    TextDocumentSyncKind::FULL,
                )),
                hover_provider: Some(HoverProviderCapability::Simple(true)),
                inlay_hint_provider: Some(OneOf::Left(true)),
                document_symbol_provider: Some(OneOf::Left(true)),
                definition_provider: Some(OneOf::Left(true)),
                code_lens_provider: Some(CodeLensOptions {
                    resolve_provider: Some(false),
                }),
                execute_command_provider: Some(ExecuteCommandOptions {
                    commands: vec![handlers::APPLY_TUNING.to_owned()],
                    ..ExecuteCommandOptions::default()
                }),
                code_action_provider: Some(CodeActionProviderCapability::Options(
                    CodeActionOptions {
                        code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
                        ..CodeActionOptions::default()
                    },
                )),
                ..ServerCapabilities::default()
            },
            server_info: Some(ServerInfo {
                name: "tilec".to_owned(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            }),
            ..InitializeResult::default()
        })
    }

    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let document = params.text_document;
        let path = document_path(&document.uri);
        let manifest = crate::workspace::manifest_instances(&path);
        self.send(Task::Open {
            uri: document.uri,
            path,
            version: document.version,
            text: document.text,
            manifest,
        });
    }

    async fn did_change(&self, mut params: DidChangeTextDocumentParams) {
        // Full sync: the last change holds the whole text.
        let Some(change) = params.content_changes.pop() else {
            return;
        };
        self.send(Task::Change {
            uri: params.text_document.uri,
            version: params.text_document.version,
            text: change.text,
        });
    }

    /// Nothing to do: edits arrive through `didChange`, and the analysis never reads the file from
    /// disk for an open document. Handled so that each save is not logged as an unknown notification.
    async fn did_save(&self, _params: DidSaveTextDocumentParams) {}

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        lock(&self.last_good).remove(&params.text_document.uri);
        self.send(Task::Close {
            uri: params.text_document.uri,
        });
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let at = params.text_document_position_params;
        let position = at.position;
        Ok(self
            .read(&at.text_document.uri, move |snapshot, document| {
                handlers::hover(snapshot, document, position)
            })
            .await?
            .flatten())
    }

    async fn inlay_hint(&self, params: InlayHintParams) -> Result<Option<Vec<InlayHint>>> {
        let range = params.range;
        let uri = params.text_document.uri.clone();
        let last_good = Arc::clone(&self.last_good);
        self.read(&params.text_document.uri, move |snapshot, document| {
            handlers::inlay_hints(snapshot, &uri, document, range, &last_good)
        })
        .await
    }

    async fn document_symbol(
        &self,
        params: DocumentSymbolParams,
    ) -> Result<Option<DocumentSymbolResponse>> {
        let symbols = self
            .read(&params.text_document.uri, handlers::document_symbols)
            .await?;
        Ok(symbols.map(DocumentSymbolResponse::Nested))
    }

    async fn goto_definition(
        &self,
        params: GotoDefinitionParams,
    ) -> Result<Option<GotoDefinitionResponse>> {
        let at = params.text_document_position_params;
        let uri = at.text_document.uri.clone();
        let position = at.position;
        let location = self
            .read(&at.text_document.uri, move |snapshot, document| {
                handlers::definition(snapshot, &uri, document, position)
            })
            .await?
            .flatten();
        Ok(location.map(GotoDefinitionResponse::Scalar))
    }

    async fn code_lens(&self, params: CodeLensParams) -> Result<Option<Vec<CodeLens>>> {
        let uri = params.text_document.uri.clone();
        let tuned = self.options.tuned.clone();
        self.read(&params.text_document.uri, move |snapshot, document| {
            handlers::tune_lenses(snapshot, &uri, document, tuned.as_deref())
        })
        .await
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<LSPAny>> {
        if params.command != handlers::APPLY_TUNING {
            return Err(Error::invalid_params(format!(
                "unknown command `{}`",
                params.command
            )));
        }
        let Some(edit) = handlers::tuning_edit(&params.arguments) else {
            return Err(Error::invalid_params(
                "tilec.applyTuning expects a document URI and a list of text edits",
            ));
        };
        if let Err(error) = self.client.apply_edit(edit).await {
            tracing::warn!("the client did not apply the tuning edit: {error}");
        }
        Ok(None)
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let uri = params.text_document.uri.clone();
        let range = params.range;
        self.read(&params.text_document.uri, move |snapshot, document| {
            handlers::code_actions(snapshot, &uri, document, range)
        })
        .await
    }
}
