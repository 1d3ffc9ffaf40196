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

/** What the settings page is opened on when the server cannot start: the one setting to fix. */
export const SERVER_PATH_QUERY = `${SECTION}.server.path`;

export interface ServerLookupInputs extends ServerCommandInputs {
  /** `PATH` of the extension host (on the remote machine in a remote window). */
  pathEnv: string | undefined;
  /** `CARGO_HOME`, where `cargo install` puts binaries (its `bin/`); `~/.cargo` when unset. */
  cargoHome?: string;
  /** Whether a path names an existing file: the file system is passed in so tests need none. */
  isFile: (candidate: string) => boolean;
}

/** Where the server executable was looked for, and what was found. */
export interface ServerLookup extends ServerCommand {
  /** Whether `command` names an existing file (it is then an absolute path for a looked-up name). */
  found: boolean;
  /** The paths tried, in order, for the message when nothing was found. */
  searched: string[];
}

/**
 * Finds the server executable before starting it. A configured path with a folder part is
 * checked as it is; a bare name (the default `tilec` included) is looked up in every folder of
 * `PATH` and then in cargo's `bin/` folder, because `cargo install` puts it there and an editor
 * started from a desktop or through a remote connection often has a `PATH` without it.
 */
export function locateServer(inputs: ServerLookupInputs): ServerLookup {
  const resolved = resolveServerCommand(inputs);
  const win = inputs.platform === "win32";
  const pathApi = win ? path.win32 : path.posix;
  const hasFolder = resolved.command.includes("/") || (win && resolved.command.includes("\\"));
  if (hasFolder) {
    return { ...resolved, found: inputs.isFile(resolved.command), searched: [resolved.command] };
  }
  const folders = (inputs.pathEnv ?? "").split(win ? ";" : ":").filter((folder) => folder !== "");
  const cargoHome = inputs.cargoHome?.trim()
    ? inputs.cargoHome.trim()
    : inputs.homeDir
      ? pathApi.join(inputs.homeDir, ".cargo")
      : undefined;
  if (cargoHome) folders.push(pathApi.join(cargoHome, "bin"));
  const searched = [...new Set(folders.map((folder) => pathApi.join(folder, resolved.command)))];
  const hit = searched.find((candidate) => inputs.isFile(candidate));
  return hit
    ? { command: hit, args: resolved.args, found: true, searched }
    : { ...resolved, found: false, searched };
}

/**
 * The one message shown when the server does not start: what was tried and how to fix it.
 * `reason` is the error of a start that failed; undefined when no executable was found at all.
 */
export function serverStartMessage(lookup: ServerLookup, reason?: string): string {
  const fix =
    'Install tilec (`cargo install --path crates/daemon` in a tilec checkout) or set "tilec.server.path" ' +
    "in your User settings (or, in a remote window, in the Remote settings).";
  if (reason !== undefined) {
    return `TileLang: could not start the tilec language server (${lookup.command} lsp): ${reason}. ${fix}`;
  }
  const last = lookup.searched[lookup.searched.length - 1];
  const where =
    lookup.searched.length === 1
      ? `${lookup.searched[0]} does not exist`
      : `no ${lookup.command} on PATH, and no ${last}`;
  return `TileLang: tilec was not found (${where}). ${fix}`;
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
