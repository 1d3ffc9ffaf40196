// Unit tests for src/config.ts: how settings become the server command, its environment and
// the initializationOptions.

import { test } from "node:test";
import assert from "node:assert/strict";
import {
  SERVER_PATH_QUERY,
  buildServerEnv,
  initializationOptions,
  locateServer,
  normalizeRunDevice,
  resolveServerCommand,
  serverStartMessage,
} from "../src/config";

/** A file system holding exactly `files`. */
function filesystem(...files: string[]): (candidate: string) => boolean {
  return (candidate) => files.includes(candidate);
}

test("blank path looks tilec up on PATH", () => {
  for (const configuredPath of [undefined, "", "   "]) {
    assert.deepEqual(resolveServerCommand({ configuredPath, platform: "linux" }), {
      command: "tilec",
      args: ["lsp"],
    });
  }
});

test("blank path on Windows names tilec.exe, since spawn does not try PATHEXT", () => {
  assert.deepEqual(resolveServerCommand({ configuredPath: "", platform: "win32" }), {
    command: "tilec.exe",
    args: ["lsp"],
  });
});

test("configured absolute path is used as given (trimmed), always with the lsp argument", () => {
  assert.deepEqual(
    resolveServerCommand({ configuredPath: "  /opt/tilec/bin/tilec ", platform: "linux", workspaceRoot: "/ws" }),
    { command: "/opt/tilec/bin/tilec", args: ["lsp"] },
  );
  assert.equal(
    resolveServerCommand({ configuredPath: "C:\\tools\\tilec.exe", platform: "win32", workspaceRoot: "D:\\ws" }).command,
    "C:\\tools\\tilec.exe",
  );
});

test("leading ~/ expands to the home folder", () => {
  assert.equal(
    resolveServerCommand({ configuredPath: "~/.cargo/bin/tilec", platform: "linux", homeDir: "/home/ada" }).command,
    "/home/ada/.cargo/bin/tilec",
  );
});

test("relative path with a folder part is anchored at the workspace; a bare name is not", () => {
  assert.equal(
    resolveServerCommand({ configuredPath: "target/debug/tilec", platform: "linux", workspaceRoot: "/ws" }).command,
    "/ws/target/debug/tilec",
  );
  assert.equal(
    resolveServerCommand({ configuredPath: "tilec-dev", platform: "linux", workspaceRoot: "/ws" }).command,
    "tilec-dev",
  );
  // Without a workspace there is nothing to anchor to.
  assert.equal(
    resolveServerCommand({ configuredPath: "target/debug/tilec", platform: "linux" }).command,
    "target/debug/tilec",
  );
});

test("TILEC_LOG is set from a non-blank log level", () => {
  const env = buildServerEnv({ PATH: "/usr/bin", HOME: "/home/ada" }, " debug ");
  assert.deepEqual(env, { PATH: "/usr/bin", HOME: "/home/ada", TILEC_LOG: "debug" });
});

test("blank log level leaves the environment (and an inherited TILEC_LOG) alone", () => {
  assert.deepEqual(buildServerEnv({ PATH: "/usr/bin" }, ""), { PATH: "/usr/bin" });
  assert.deepEqual(buildServerEnv({ TILEC_LOG: "trace" }, undefined), { TILEC_LOG: "trace" });
});

test("the setting overrides an inherited TILEC_LOG and the input is not modified", () => {
  const base = { TILEC_LOG: "warn", UNSET: undefined };
  const env = buildServerEnv(base, "info");
  assert.deepEqual(env, { TILEC_LOG: "info" });
  assert.equal(base.TILEC_LOG, "warn");
  assert.ok(!("UNSET" in env), "undefined entries are dropped, spawn wants strings");
});

test("empty target becomes an explicit null", () => {
  assert.deepEqual(initializationOptions(""), { target: null });
  assert.deepEqual(initializationOptions(undefined), { target: null });
  assert.deepEqual(initializationOptions(null), { target: null });
  assert.deepEqual(initializationOptions("  "), { target: null });
  // Explicit null must survive JSON, unlike undefined.
  assert.equal(JSON.stringify(initializationOptions("")), '{"target":null}');
});

test("a chosen target is passed through", () => {
  assert.deepEqual(initializationOptions("sm_90"), { target: "sm_90" });
  assert.deepEqual(initializationOptions("sm_80"), { target: "sm_80" });
});

test("run device falls back to auto for unknown values", () => {
  assert.equal(normalizeRunDevice("cuda"), "cuda");
  assert.equal(normalizeRunDevice("cpu"), "cpu");
  assert.equal(normalizeRunDevice("auto"), "auto");
  assert.equal(normalizeRunDevice("gpu"), "auto");
  assert.equal(normalizeRunDevice(undefined), "auto");
  assert.equal(normalizeRunDevice(3), "auto");
});

test("the server is looked up on PATH first, then in ~/.cargo/bin where cargo install puts it", () => {
  const base = { configuredPath: "", platform: "linux", homeDir: "/home/ada", pathEnv: "/usr/local/bin:/usr/bin" };
  const onPath = locateServer({ ...base, isFile: filesystem("/usr/bin/tilec", "/home/ada/.cargo/bin/tilec") });
  assert.deepEqual(onPath, {
    command: "/usr/bin/tilec",
    args: ["lsp"],
    found: true,
    searched: ["/usr/local/bin/tilec", "/usr/bin/tilec", "/home/ada/.cargo/bin/tilec"],
  });
  // An editor started from the desktop or over SSH often has a PATH without ~/.cargo/bin.
  const cargoOnly = locateServer({ ...base, isFile: filesystem("/home/ada/.cargo/bin/tilec") });
  assert.equal(cargoOnly.command, "/home/ada/.cargo/bin/tilec");
  assert.ok(cargoOnly.found);
  const cargoHome = locateServer({ ...base, cargoHome: "/opt/cargo", isFile: filesystem("/opt/cargo/bin/tilec") });
  assert.equal(cargoHome.command, "/opt/cargo/bin/tilec");
  const nowhere = locateServer({ ...base, isFile: filesystem() });
  assert.equal(nowhere.found, false);
  assert.equal(nowhere.command, "tilec");
});

test("a bare configured name is looked up like the default; a path is checked as it is", () => {
  const base = { platform: "linux", homeDir: "/home/ada", pathEnv: "/usr/bin", workspaceRoot: "/ws" };
  const named = locateServer({ ...base, configuredPath: "tilec-dev", isFile: filesystem("/home/ada/.cargo/bin/tilec-dev") });
  assert.equal(named.command, "/home/ada/.cargo/bin/tilec-dev");
  const relative = locateServer({ ...base, configuredPath: "target/debug/tilec", isFile: filesystem() });
  assert.deepEqual(relative, {
    command: "/ws/target/debug/tilec",
    args: ["lsp"],
    found: false,
    searched: ["/ws/target/debug/tilec"],
  });
  const windows = locateServer({
    configuredPath: "",
    platform: "win32",
    homeDir: "C:\\Users\\ada",
    pathEnv: "C:\\bin;",
    isFile: filesystem("C:\\Users\\ada\\.cargo\\bin\\tilec.exe"),
  });
  assert.equal(windows.command, "C:\\Users\\ada\\.cargo\\bin\\tilec.exe");
});

test("one message says what was tried and where to set the path; the button opens that setting", () => {
  const base = { configuredPath: "", platform: "linux", homeDir: "/home/ada", pathEnv: "/usr/bin" };
  const missing = serverStartMessage(locateServer({ ...base, isFile: filesystem() }));
  assert.match(missing, /tilec was not found \(no tilec on PATH, and no \/home\/ada\/\.cargo\/bin\/tilec\)/);
  assert.match(missing, /cargo install --path crates\/daemon/);
  assert.match(missing, /"tilec\.server\.path" in your User settings/);
  const configured = serverStartMessage(
    locateServer({ ...base, configuredPath: "/opt/tilec", isFile: filesystem() }),
  );
  assert.match(configured, /\/opt\/tilec does not exist/);
  const crashed = serverStartMessage(
    locateServer({ ...base, isFile: filesystem("/usr/bin/tilec") }),
    "spawn EACCES",
  );
  assert.match(crashed, /could not start the tilec language server \(\/usr\/bin\/tilec lsp\): spawn EACCES\./);
  assert.equal(SERVER_PATH_QUERY, "tilec.server.path");
});
