// Entry point of the tilec VS Code extension: starts `tilec lsp` as a language client for
// Python files, and wires the editor UI (commands, the layout webview, the run-kernel output
// channel, run-on-save, the `tilec-explain:` documents) to tilec's custom requests. All the
// decisions that can be made without VS Code live in the vscode-free modules next to this
// one, which `npm test` covers; this file is the glue.

import { randomBytes } from "node:crypto";
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
  buildServerEnv,
  initializationOptions,
  normalizeRunDevice,
  resolveServerCommand,
} from "./config";
import {
  EXPLAIN_SCHEME,
  codeFromExplainPath,
  explainUri,
  normalizeUserCode,
} from "./explainUri";
import { cudaDocument, layoutTitle, runOutputBlock, runSummary } from "./format";
import { layoutHtml } from "./layoutHtml";
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

/** The running client, replaced wholesale on restart (its launch command and
 * initializationOptions are fixed at construction). */
let client: LanguageClient | undefined;
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
    vscode.workspace.onDidOpenTextDocument(markExplainAsMarkdown),
    vscode.workspace.onDidSaveTextDocument(runOnSave),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (RESTART_KEYS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`))) {
        void restart(false);
      }
    }),
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

function createClient(): { client: LanguageClient; command: string } {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  const { command, args } = resolveServerCommand({
    configuredPath: cfg.get<string>("server.path"),
    platform: process.platform,
    homeDir: os.homedir(),
    workspaceRoot: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath,
  });
  // No `transport` field: with TransportKind.stdio the library appends `--stdio` to the
  // arguments, which `tilec lsp` does not accept. Omitted, it still talks over stdio.
  const executable: Executable = {
    command,
    args,
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
    client: new LanguageClient("tilec", "TileLang (tilec)", serverOptions, clientOptions),
    command,
  };
}

async function startClient(): Promise<void> {
  // Creation is inside the try too: a bad setting that makes the constructor throw must end
  // in a message, not in an unhandled rejection that leaves no client and no explanation.
  let command = "tilec";
  try {
    const created = createClient();
    command = created.command;
    client = created.client;
    await client.start();
  } catch (error) {
    const choice = await vscode.window.showErrorMessage(
      `TileLang: could not start the tilec language server (${command} lsp): ` +
        `${errorMessage(error)}. Install tilec or set "tilec.server.path".`,
      "Open Settings",
    );
    if (choice === "Open Settings") {
      void vscode.commands.executeCommand("workbench.action.openSettings", "tilec.server.path");
    }
  }
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
  let document: vscode.TextDocument;
  try {
    document = await vscode.workspace.openTextDocument({ language: "cuda-cpp", content });
  } catch {
    // cuda-cpp comes from the built-in C++ grammar, which users can disable.
    document = await vscode.workspace.openTextDocument({ language: "plaintext", content });
  }
  await vscode.window.showTextDocument(document, {
    viewColumn: vscode.ViewColumn.Beside,
    preview: false,
  });
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
    });
  }
  // A fresh nonce per render: it only has to be unguessable by the SVG's author.
  const nonce = randomBytes(16).toString("base64");
  panel.webview.html = layoutHtml({ title, svg: result.svg, nonce });
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
      if (diagnostic.code.target.scheme === EXPLAIN_SCHEME) {
        const code = codeFromExplainPath(diagnostic.code.target.path);
        if (code) return code;
      }
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
