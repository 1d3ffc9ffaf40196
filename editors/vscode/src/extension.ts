// Entry point of the tilec VS Code extension: starts `tilec lsp` as a language client for
// Python files, and wires the editor UI (commands, the layout webview, the run-kernel output
// channel, run-on-save, the read-only `tilec-cuda:` and `tilec-explain:` documents) to tilec's
// custom requests. All the decisions that can be made without VS Code live in the vscode-free
// modules next to this one, which `npm test` covers; this file is the glue.

import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as vscode from "vscode";
import {
  Executable,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
} from "vscode-languageclient/node";
import { Coalescer } from "./coalesce";
import {
  DOCUMENT_SELECTOR,
  RESTART_KEYS,
  SECTION,
  SERVER_PATH_QUERY,
  ServerLookup,
  buildServerEnv,
  initializationOptions,
  locateServer,
  normalizeRunDevice,
  serverStartMessage,
} from "./config";
import {
  CUDA_SCHEME,
  CudaSymbolKind,
  cudaDocumentPath,
  cudaSymbols,
  kernelLine,
  preludeRange,
} from "./cudaView";
import {
  EXPLAIN_SCHEME,
  codeFromDocsPath,
  codeFromExplainPath,
  explainUri,
  normalizeUserCode,
} from "./explainUri";
import { cudaDocument, layoutTitle, runOutputBlock, runSummary } from "./format";
import { layoutHtml, themedSvg } from "./layoutHtml";
import {
  CudaSourceResult,
  ExplainResult,
  LayoutSvgResult,
  METHOD_CUDA_SOURCE,
  METHOD_EXPLAIN,
  METHOD_LAYOUT_SVG,
  METHOD_RUN_KERNEL,
  Position,
  RunKernelResult,
  errorMessage,
  kernelParams,
  looksLikeTileLang,
  runKernelParams,
} from "./protocol";

/**
 * The language client, with the library's own error notifications held back while it starts:
 * a failed start would otherwise show the library's "couldn't create connection" toast beside
 * ours, and only ours says how to fix it. Once started, errors notify as usual.
 */
class TilecClient extends LanguageClient {
  starting = false;

  override error(message: string, data?: unknown, showNotification: boolean | "force" = true): void {
    super.error(message, data, this.starting ? false : showNotification);
  }
}

/** The running client, replaced wholesale on restart (its launch command and
 * initializationOptions are fixed at construction). */
let client: TilecClient | undefined;
/** Serialises start/stop/restart so a request never sees a half-replaced client and two quick
 * settings changes do not start two servers. */
let lifecycle: Promise<void> = Promise.resolve();
/** Server log and LSP trace. Created once and handed to every client: otherwise each restart
 * would add another channel with the same name. */
let serverChannel: vscode.OutputChannel | undefined;
/** Run-kernel results, separate from the server log so they are easy to read. */
let runChannel: vscode.OutputChannel | undefined;

/** Documents whose save was made by "Run kernel" itself: run-on-save skips those, or the
 * command would run the kernel twice. */
const commandSaves = new Set<string>();
const runOnSaveQueue = new Coalescer<string>();
/** Open layout panels by title, so asking for the same buffer again refreshes its panel
 * instead of piling up copies, while different buffers can be compared side by side. */
const layoutPanels = new Map<string, vscode.WebviewPanel>();
/** The SVG each layout panel shows, so that a change of colour theme can draw it again. */
const layoutSvgs = new Map<vscode.WebviewPanel, string>();

export function activate(context: vscode.ExtensionContext): void {
  serverChannel = vscode.window.createOutputChannel("TileLang (tilec)");
  runChannel = vscode.window.createOutputChannel("TileLang");
  context.subscriptions.push(serverChannel, runChannel);

  context.subscriptions.push(
    vscode.commands.registerCommand("tilec.showCuda", showCuda),
    vscode.commands.registerCommand("tilec.showLayout", showLayout),
    vscode.commands.registerCommand("tilec.runKernel", runKernelCommand),
    vscode.commands.registerCommand("tilec.restartServer", () => restart(true)),
    vscode.commands.registerCommand("tilec.explain", explainCommand),
    vscode.workspace.registerTextDocumentContentProvider(EXPLAIN_SCHEME, new ExplainProvider()),
    vscode.workspace.registerTextDocumentContentProvider(CUDA_SCHEME, cudaDocuments),
    vscode.languages.registerDocumentSymbolProvider({ scheme: CUDA_SCHEME }, new CudaSymbolProvider()),
    vscode.languages.registerFoldingRangeProvider({ scheme: CUDA_SCHEME }, new CudaFoldingProvider()),
    vscode.workspace.onDidOpenTextDocument(markExplainAsMarkdown),
    vscode.workspace.onDidSaveTextDocument(runOnSave),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (RESTART_KEYS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`))) {
        void restart(false);
      }
    }),
    vscode.window.onDidChangeActiveColorTheme(() => layoutSvgs.forEach((svg, panel) => renderLayout(panel, svg))),
    { dispose: () => layoutPanels.forEach((panel) => panel.dispose()) },
  );

  // Activation must not wait for the server: a missing binary would otherwise fail activation
  // and take the commands (including "Restart server") down with it.
  void queue(startClient);
}

export function deactivate(): Promise<void> {
  return queue(stopClient);
}

// ---------------------------------------------------------------------------------------
// Client lifecycle

function queue(step: () => Promise<void>): Promise<void> {
  lifecycle = lifecycle.then(step, step);
  return lifecycle;
}

function createClient(): { client: TilecClient; lookup: ServerLookup } {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  const lookup = locateServer({
    configuredPath: cfg.get<string>("server.path"),
    platform: process.platform,
    homeDir: os.homedir(),
    workspaceRoot: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath,
    pathEnv: process.env.PATH,
    cargoHome: process.env.CARGO_HOME,
    isFile,
  });
  // No `transport` field: with TransportKind.stdio the library appends `--stdio` to the
  // arguments, which `tilec lsp` does not accept. Omitted, it still talks over stdio.
  const executable: Executable = {
    command: lookup.command,
    args: lookup.args,
    options: { env: buildServerEnv(process.env, cfg.get<string>("server.logLevel")) },
  };
  const serverOptions: ServerOptions = { run: executable, debug: executable };
  const clientOptions: LanguageClientOptions = {
    documentSelector: DOCUMENT_SELECTOR,
    initializationOptions: initializationOptions(cfg.get<string>("target")),
    outputChannel: serverChannel,
    // The server logs to stderr; popping the channel open for that would be noise.
    revealOutputChannelOn: RevealOutputChannelOn.Never,
  };
  // The id "tilec" makes the library honour the `tilec.trace.server` setting by itself.
  return {
    client: new TilecClient("tilec", "TileLang (tilec)", serverOptions, clientOptions),
    lookup,
  };
}

function isFile(candidate: string): boolean {
  try {
    return fs.statSync(candidate).isFile();
  } catch {
    return false;
  }
}

async function startClient(): Promise<void> {
  // Creation is inside the try too: a bad setting that makes the constructor throw must end
  // in a message, not in an unhandled rejection that leaves no client and no explanation.
  let lookup: ServerLookup | undefined;
  try {
    const created = createClient();
    lookup = created.lookup;
    if (!lookup.found) {
      offerServerSettings(serverStartMessage(lookup));
      return;
    }
    client = created.client;
    client.starting = true;
    try {
      await client.start();
    } finally {
      client.starting = false;
    }
  } catch (error) {
    const failed = lookup ?? { command: "tilec", args: ["lsp"], found: false, searched: [] };
    offerServerSettings(serverStartMessage(failed, errorMessage(error)));
  }
}

/** The one notification of a server that does not start, with a button that opens the settings
 * page on `tilec.server.path`. It is not waited for: the lifecycle queue must not stay blocked on
 * a notification nobody has answered, or fixing the setting would restart nothing until the
 * notification is dismissed. */
function offerServerSettings(message: string): void {
  void vscode.window.showErrorMessage(message, "Open Settings").then((choice) => {
    if (choice === "Open Settings") {
      void vscode.commands.executeCommand("workbench.action.openSettings", SERVER_PATH_QUERY);
    }
  });
}

async function stopClient(): Promise<void> {
  const old = client;
  client = undefined;
  if (!old) return;
  try {
    // dispose() stops the server; our output channel survives because we supplied it.
    await old.dispose();
  } catch {
    // A server that already died cannot be stopped cleanly; it is gone either way.
  }
}

function restart(announce: boolean): Promise<void> {
  return queue(async () => {
    await stopClient();
    await startClient();
    if (announce && client?.isRunning()) {
      void vscode.window.setStatusBarMessage("TileLang: tilec server restarted", 3000);
    }
  });
}

/** The client once it is running, or undefined after telling the user why not. `quiet`
 * sends the explanation to the run channel instead of a popup (for run-on-save, which
 * would otherwise pop up on every save). */
async function readyClient(quiet = false): Promise<LanguageClient | undefined> {
  await lifecycle;
  if (client?.isRunning()) return client;
  const message =
    'TileLang: the tilec language server is not running (see the "TileLang (tilec)" output, ' +
    'or use "TileLang: Restart server").';
  if (quiet) runChannel?.appendLine(message);
  else void vscode.window.showErrorMessage(message);
  return undefined;
}

// ---------------------------------------------------------------------------------------
// Commands on the active editor

/** The editor the kernel commands act on: the active one, if it holds Python. */
function activePythonEditor(): vscode.TextEditor | undefined {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.languageId !== "python") {
    void vscode.window.showErrorMessage(
      "TileLang: open a TileLang Python file and put the cursor inside a kernel first.",
    );
    return undefined;
  }
  return editor;
}

/** Sends a request with a status-bar spinner; on a JSON-RPC error shows its message and
 * returns undefined. */
async function request<R>(
  c: LanguageClient,
  method: string,
  params: object,
  busyTitle: string,
): Promise<R | undefined> {
  try {
    return await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Window, title: busyTitle },
      () => c.sendRequest<R>(method, params),
    );
  } catch (error) {
    void vscode.window.showErrorMessage(`TileLang: ${errorMessage(error)}`);
    return undefined;
  }
}

function protocolUri(c: LanguageClient, document: vscode.TextDocument): string {
  // The same conversion the client used in didOpen, so the server recognises the document.
  return c.code2ProtocolConverter.asUri(document.uri);
}

async function showCuda(): Promise<void> {
  const editor = activePythonEditor();
  if (!editor) return;
  const c = await readyClient();
  if (!c) return;
  const params = kernelParams(protocolUri(c, editor.document), editor.selection.active);
  const result = await request<CudaSourceResult>(c, METHOD_CUDA_SOURCE, params, "tilec: generating CUDA");
  if (!result) return;
  const content = cudaDocument(result);
  const uri = vscode.Uri.from({
    scheme: CUDA_SCHEME,
    path: cudaDocumentPath(result.kernel, result.instance),
  });
  cudaDocuments.set(uri, content);
  let document = await vscode.workspace.openTextDocument(uri);
  if (document.languageId !== "cuda-cpp") {
    try {
      document = await vscode.languages.setTextDocumentLanguage(document, "cuda-cpp");
    } catch {
      // cuda-cpp comes from the built-in C++ grammar, which users can disable; plain text is
      // still readable.
    }
  }
  const line = kernelLine(content, result.kernel);
  const at = new vscode.Position(line, 0);
  const shown = await vscode.window.showTextDocument(document, {
    viewColumn: vscode.ViewColumn.Beside,
    preview: false,
    selection: new vscode.Range(at, at),
  });
  shown.revealRange(new vscode.Range(at, at), vscode.TextEditorRevealType.AtTop);
  // The prelude is hundreds of lines of helpers every kernel shares: folded, the kernel is what
  // the document shows.
  const prelude = preludeRange(content);
  if (prelude) {
    await vscode.commands.executeCommand("editor.fold", { selectionLines: [prelude.start], levels: 1 });
    shown.revealRange(new vscode.Range(at, at), vscode.TextEditorRevealType.AtTop);
  }
}

/** The texts of the `tilec-cuda:` documents, by URI. Showing an instance again replaces its
 * text and tells VS Code, so an open tab shows the new code instead of a second tab opening. */
class CudaDocuments implements vscode.TextDocumentContentProvider {
  private readonly texts = new Map<string, string>();
  private readonly changes = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changes.event;

  set(uri: vscode.Uri, text: string): void {
    const key = uri.toString();
    const changed = this.texts.has(key) && this.texts.get(key) !== text;
    this.texts.set(key, text);
    if (changed) this.changes.fire(uri);
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return (
      this.texts.get(uri.toString()) ??
      "// This generated CUDA is gone (the window was reloaded): run \"TileLang: Show generated CUDA\" again.\n"
    );
  }
}

const cudaDocuments = new CudaDocuments();

const CUDA_SYMBOL_KINDS: Record<CudaSymbolKind, vscode.SymbolKind> = {
  kernel: vscode.SymbolKind.Function,
  function: vscode.SymbolKind.Function,
  struct: vscode.SymbolKind.Struct,
  section: vscode.SymbolKind.Namespace,
};

/** The outline of a generated CUDA document: kernels, prelude sections, functions, structs. */
class CudaSymbolProvider implements vscode.DocumentSymbolProvider {
  provideDocumentSymbols(document: vscode.TextDocument): vscode.DocumentSymbol[] {
    const lastLine = Math.max(document.lineCount - 1, 0);
    return cudaSymbols(document.getText()).map((symbol) => {
      const end = Math.min(symbol.end, lastLine);
      const range = new vscode.Range(symbol.start, 0, end, document.lineAt(end).text.length);
      const nameLine = document.lineAt(Math.min(symbol.nameLine, lastLine));
      const selection = new vscode.Range(nameLine.range.start, nameLine.range.end);
      const detail = symbol.kind === "kernel" ? "__global__" : symbol.kind === "section" ? "prelude" : "";
      return new vscode.DocumentSymbol(symbol.name, detail, CUDA_SYMBOL_KINDS[symbol.kind], range, selection);
    });
  }
}

/** Folds tilec's prelude as one region, so that it can be folded away when the document opens. */
class CudaFoldingProvider implements vscode.FoldingRangeProvider {
  provideFoldingRanges(document: vscode.TextDocument): vscode.FoldingRange[] {
    const prelude = preludeRange(document.getText());
    return prelude ? [new vscode.FoldingRange(prelude.start, prelude.end, vscode.FoldingRangeKind.Region)] : [];
  }
}

async function showLayout(): Promise<void> {
  const editor = activePythonEditor();
  if (!editor) return;
  const c = await readyClient();
  if (!c) return;
  const params = kernelParams(protocolUri(c, editor.document), editor.selection.active);
  const result = await request<LayoutSvgResult>(c, METHOD_LAYOUT_SVG, params, "tilec: drawing layout");
  if (!result) return;

  const title = layoutTitle(result);
  let panel = layoutPanels.get(title);
  if (panel) {
    // Bring it forward where the user put it, without taking focus from the code.
    panel.reveal(panel.viewColumn, true);
  } else {
    panel = vscode.window.createWebviewPanel(
      "tilec.layout",
      title,
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
      // No scripts, no local files, no command links: the page is a static picture.
      { enableScripts: false, enableCommandUris: false, localResourceRoots: [] },
    );
    const created = panel;
    layoutPanels.set(title, created);
    created.onDidDispose(() => {
      if (layoutPanels.get(title) === created) layoutPanels.delete(title);
      layoutSvgs.delete(created);
    });
  }
  renderLayout(panel, result.svg);
}

/** Shows `svg` in a layout panel, in the colours of the current theme. */
function renderLayout(panel: vscode.WebviewPanel, svg: string): void {
  layoutSvgs.set(panel, svg);
  // A fresh nonce per render: it only has to be unguessable by the SVG's author.
  const nonce = randomBytes(16).toString("base64");
  const kind = vscode.window.activeColorTheme.kind;
  const dark = kind !== vscode.ColorThemeKind.Light && kind !== vscode.ColorThemeKind.HighContrastLight;
  panel.webview.html = layoutHtml({ title: panel.title, svg: themedSvg(svg, dark), nonce });
}

async function runKernelCommand(): Promise<void> {
  const editor = activePythonEditor();
  if (!editor) return;
  const document = editor.document;
  const key = document.uri.toString();
  commandSaves.add(key);
  try {
    // The server runs the file as it is on disk, so unsaved edits would be silently ignored.
    // Untitled documents have no file; the server gets their text over LSP instead.
    if (document.isDirty && !document.isUntitled && !(await document.save())) {
      void vscode.window.showErrorMessage("TileLang: the file could not be saved, so the kernel was not run.");
      return;
    }
    const c = await readyClient();
    if (!c) return;
    await runKernel(c, document, editor.selection.active, true);
  } finally {
    commandSaves.delete(key);
  }
}

/** Sends `tilec/runKernel` and reports to the "TileLang" channel. `fromCommand` decides the
 * notification: an explicit run always says how it went; run-on-save only speaks up on
 * failure (a popup per save would be noise) and otherwise flashes the status bar. */
async function runKernel(
  c: LanguageClient,
  document: vscode.TextDocument,
  position: Position | null,
  fromCommand: boolean,
): Promise<void> {
  const device = normalizeRunDevice(
    vscode.workspace.getConfiguration(SECTION, document.uri).get<string>("runDevice"),
  );
  const fileLabel = vscode.workspace.asRelativePath(document.uri);
  const params = runKernelParams(protocolUri(c, document), position, device);
  const channel = runChannel!;
  channel.show(true);
  try {
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Window, title: "tilec: running kernel" },
      () => c.sendRequest<RunKernelResult>(METHOD_RUN_KERNEL, params),
    );
    channel.appendLine(runOutputBlock(result, fileLabel, device, new Date()));
    const summary = runSummary(result);
    if (!result.ok) void vscode.window.showErrorMessage(summary);
    else if (fromCommand) void vscode.window.showInformationMessage(summary);
    else void vscode.window.setStatusBarMessage(summary, 5000);
  } catch (error) {
    const message = errorMessage(error);
    channel.appendLine(`[${new Date().toTimeString().slice(0, 8)}] ${fileLabel}: ${message}`);
    void vscode.window.showErrorMessage(`TileLang: ${message}`);
  }
}

function runOnSave(document: vscode.TextDocument): void {
  if (document.languageId !== "python") return;
  if (!vscode.workspace.getConfiguration(SECTION, document.uri).get<boolean>("runOnSave")) return;
  const key = document.uri.toString();
  if (commandSaves.has(key)) return;
  // Skip plain Python files: the server would answer with an error for each save.
  if (!looksLikeTileLang(document.getText())) return;
  void runOnSaveQueue.schedule(key, async () => {
    const c = await readyClient(true);
    if (!c) return;
    // The cursor is read when the run starts, so a coalesced run uses the latest position.
    const active = vscode.window.activeTextEditor;
    const editor =
      active?.document === document
        ? active
        : vscode.window.visibleTextEditors.find((e) => e.document === document);
    await runKernel(c, document, editor ? editor.selection.active : null, false);
  });
}

// ---------------------------------------------------------------------------------------
// Diagnostic code explanations

/** Serves `tilec-explain:/<code>` documents with the server's markdown. Failures become the
 * document text (and a notification), because an empty page would explain nothing. */
class ExplainProvider implements vscode.TextDocumentContentProvider {
  async provideTextDocumentContent(
    uri: vscode.Uri,
    token: vscode.CancellationToken,
  ): Promise<string> {
    const code = codeFromExplainPath(uri.path);
    if (code === undefined) {
      return `# Unknown diagnostic code\n\n\`${uri.path}\` does not name a tilec diagnostic code.\n`;
    }
    const c = await readyClient();
    if (!c) return `# ${code}\n\nThe tilec language server is not running.\n`;
    try {
      const result = await c.sendRequest<ExplainResult>(METHOD_EXPLAIN, { code }, token);
      return result.markdown;
    } catch (error) {
      const message = errorMessage(error);
      void vscode.window.showErrorMessage(`TileLang: ${message}`);
      return `# ${code}\n\nNo explanation available: ${message}\n`;
    }
  }
}

/** Diagnostic links open `tilec-explain:/<code>` without an extension, which VS Code would
 * show as plain text; give it the markdown language instead. */
function markExplainAsMarkdown(document: vscode.TextDocument): void {
  if (document.uri.scheme === EXPLAIN_SCHEME && document.languageId !== "markdown") {
    void vscode.languages.setTextDocumentLanguage(document, "markdown");
  }
}

/** The code of a tilec diagnostic under the cursor, to pre-fill the input box. Other
 * extensions' diagnostics (Pylance and the like) have codes too; those are skipped. */
function codeAtCursor(): string | undefined {
  const editor = vscode.window.activeTextEditor;
  if (!editor) return undefined;
  const cursor = editor.selection.active;
  for (const diagnostic of vscode.languages.getDiagnostics(editor.document.uri)) {
    if (!diagnostic.range.contains(cursor) || diagnostic.code === undefined) continue;
    if (typeof diagnostic.code === "object") {
      const target = diagnostic.code.target;
      const code =
        target.scheme === EXPLAIN_SCHEME
          ? codeFromExplainPath(target.path)
          : target.scheme === "file"
            ? codeFromDocsPath(target.path)
            : undefined;
      if (code) return code;
    } else if (diagnostic.source?.toLowerCase().startsWith("tilec")) {
      const code = normalizeUserCode(String(diagnostic.code));
      if (code) return code;
    }
  }
  return undefined;
}

async function explainCommand(): Promise<void> {
  const input = await vscode.window.showInputBox({
    title: "TileLang: Explain diagnostic code",
    prompt: "Diagnostic code, e.g. layout-conflict",
    placeHolder: "layout-conflict",
    value: codeAtCursor(),
    validateInput: (text) =>
      text.trim() === "" || normalizeUserCode(text) !== undefined
        ? undefined
        : "A code is a word such as layout-conflict (letters, digits and hyphens).",
  });
  if (input === undefined) return;
  const code = normalizeUserCode(input);
  if (code === undefined) return;
  // ".md" so the document is markdown from the start, which the preview needs.
  const uri = vscode.Uri.parse(explainUri(code, true));
  try {
    await vscode.commands.executeCommand("markdown.showPreview", uri);
  } catch {
    // The built-in markdown extension can be disabled; the source is still readable.
    const document = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(document, { preview: true });
  }
}
