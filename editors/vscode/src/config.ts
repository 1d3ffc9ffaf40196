// How the extension turns its settings into a server launch: which executable, which
// arguments, which environment and which initializationOptions. Kept free of any `vscode`
// import so the rules can be unit-tested with plain `node --test`; extension.ts reads the
// settings and passes the raw values in.

import * as path from "node:path";

/** The settings section every key below lives in. */
export const SECTION = "tilec";

/** Settings (relative to SECTION) whose change needs a fresh server process: they are baked
 * into the spawn command, its environment or the `initialize` request, none of which can be
 * changed on a running server. */
export const RESTART_KEYS: readonly string[] = ["server.path", "server.logLevel", "target"];

/** The targets the `tilec.target` setting offers; "" means "server default". */
export const TARGETS = ["", "sm_80", "sm_90"] as const;

export type RunDevice = "auto" | "cpu" | "cuda";
export const RUN_DEVICES: readonly RunDevice[] = ["auto", "cpu", "cuda"];

export interface ServerCommand {
  command: string;
  args: string[];
}

export interface ServerCommandInputs {
  /** Raw `tilec.server.path`; undefined or blank means "look it up on PATH". */
  configuredPath: string | undefined;
  /** `process.platform`; only "win32" changes anything (the `.exe` suffix). */
  platform: string;
  /** Home folder, for a leading `~/`. */
  homeDir?: string;
  /** First workspace folder, for relative paths such as `target/debug/tilec`. */
  workspaceRoot?: string;
}

/**
 * The command that starts the language server. A blank path falls back to the bare program
 * name so that the OS does the PATH search (with `.exe` on Windows, because Node's spawn
 * without a shell does not try PATHEXT). A configured path is used as given, except that
 * `~/` is expanded (spawn has no shell to do it) and a relative path containing a folder
 * part is anchored at the workspace: the server's cwd is not something users can predict.
 */
export function resolveServerCommand(inputs: ServerCommandInputs): ServerCommand {
  const args = ["lsp"];
  const configured = (inputs.configuredPath ?? "").trim();
  if (configured === "") {
    return { command: inputs.platform === "win32" ? "tilec.exe" : "tilec", args };
  }
  const pathApi = inputs.platform === "win32" ? path.win32 : path.posix;
  let command = configured;
  if (inputs.homeDir && (command === "~" || command.startsWith("~/") || command.startsWith("~\\"))) {
    command = pathApi.join(inputs.homeDir, command.slice(1));
  } else if (
    inputs.workspaceRoot &&
    !pathApi.isAbsolute(command) &&
    // A bare name ("tilec-dev") is still meant as a PATH lookup; only paths with a separator
    // are relative to somewhere.
    (command.includes("/") || (inputs.platform === "win32" && command.includes("\\")))
  ) {
    command = pathApi.resolve(inputs.workspaceRoot, command);
  }
  return { command, args };
}

/**
 * The server's environment: the editor's own environment plus `TILEC_LOG` when the setting
 * is non-blank. A blank setting leaves the inherited environment untouched, so a `TILEC_LOG`
 * exported in the shell that launched VS Code keeps working. Returns a copy; the input is
 * never modified (it is usually `process.env`).
 */
export function buildServerEnv(
  base: Readonly<Record<string, string | undefined>>,
  logLevel: string | undefined,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(base)) {
    if (value !== undefined) env[key] = value;
  }
  const level = (logLevel ?? "").trim();
  if (level !== "") env.TILEC_LOG = level;
  return env;
}

export interface InitializationOptions {
  /** GPU architecture such as "sm_90"; null lets the server choose. */
  target: string | null;
}

/** `initializationOptions` for the `initialize` request. The server expects an explicit null
 * (not a missing key, not "") when no target is chosen. */
export function initializationOptions(target: string | undefined | null): InitializationOptions {
  const trimmed = (target ?? "").trim();
  return { target: trimmed === "" ? null : trimmed };
}

/** `tilec.runDevice`, defaulting anything unexpected (hand-edited settings.json) to "auto"
 * rather than sending the server a device it would reject. */
export function normalizeRunDevice(value: unknown): RunDevice {
  return typeof value === "string" && (RUN_DEVICES as readonly string[]).includes(value)
    ? (value as RunDevice)
    : "auto";
}

/** Python documents in files and in unsaved editors. The server decides per document whether
 * it is TileLang, so the selector does not try to. */
export const DOCUMENT_SELECTOR = [
  { scheme: "file", language: "python" },
  { scheme: "untitled", language: "python" },
];
