// Unit tests for src/config.ts: how settings become the server command, its environment and
// the initializationOptions.

import { test } from "node:test";
import assert from "node:assert/strict";
import {
  buildServerEnv,
  initializationOptions,
  normalizeRunDevice,
  resolveServerCommand,
} from "../src/config";

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
