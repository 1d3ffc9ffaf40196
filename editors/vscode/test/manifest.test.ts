// Consistency tests between package.json and the sources: every contributed command is
// registered and vice versa, the settings the code relies on exist with the expected choices,
// and the modules the unit tests load never import `vscode` (which only exists inside the
// editor, so such an import would also break `npm test`).

import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { RESTART_KEYS, RUN_DEVICES, SECTION, TARGETS } from "../src/config";

// Compiled tests live in out-test/test/, two levels below the extension folder.
const ROOT = path.resolve(__dirname, "..", "..");
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
const extensionSource = fs.readFileSync(path.join(ROOT, "src", "extension.ts"), "utf8");
const properties: Record<string, { enum?: unknown[]; default?: unknown; type?: string; scope?: string }> =
  manifest.contributes.configuration.properties;

test("manifest basics", () => {
  assert.equal(manifest.name, "tilec");
  assert.equal(manifest.publisher, "tilec");
  assert.equal(manifest.license, "MIT OR Apache-2.0");
  assert.equal(manifest.main, "./out/extension.js");
  assert.deepEqual(manifest.activationEvents, ["onLanguage:python"]);
  assert.equal(manifest.engines.vscode, "^1.91.0");
  // No public repository yet: packaging passes --allow-missing-repository instead of naming one.
  assert.match(manifest.scripts.package, /--allow-missing-repository/);
  assert.ok(fs.existsSync(path.join(ROOT, "LICENSE")), "vsce prompts without a LICENSE file");
});

test("contributed commands and registered commands are the same set", () => {
  const contributed = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
  const registered = [...extensionSource.matchAll(/registerCommand\(\s*"([^"]+)"/g)].map((m) => m[1]).sort();
  assert.deepEqual(registered, contributed);
  assert.deepEqual(contributed, [
    "tilec.explain",
    "tilec.restartServer",
    "tilec.runKernel",
    "tilec.showCuda",
    "tilec.showLayout",
  ]);
});

test("settings exist with the choices the code expects", () => {
  for (const key of RESTART_KEYS) assert.ok(`${SECTION}.${key}` in properties, key);
  assert.deepEqual(properties["tilec.target"].enum, [...TARGETS]);
  assert.equal(properties["tilec.target"].default, "");
  assert.deepEqual(properties["tilec.runDevice"].enum, [...RUN_DEVICES]);
  assert.equal(properties["tilec.runDevice"].default, "auto");
  assert.equal(properties["tilec.runOnSave"].default, false);
  assert.equal(properties["tilec.server.path"].default, "");
  assert.equal(properties["tilec.server.logLevel"].default, "");
  assert.deepEqual(properties["tilec.trace.server"].enum, ["off", "messages", "verbose"]);
});

test("only extension.ts imports vscode", () => {
  const srcDir = path.join(ROOT, "src");
  for (const file of fs.readdirSync(srcDir).filter((f) => f.endsWith(".ts"))) {
    const text = fs.readFileSync(path.join(srcDir, file), "utf8");
    const importsVscode = /from\s+["']vscode["']|require\(\s*["']vscode["']\s*\)/.test(text);
    assert.equal(importsVscode, file === "extension.ts", file);
  }
});

test("every source file opens with a comment saying what it is for", () => {
  for (const dir of ["src", "test"]) {
    for (const file of fs.readdirSync(path.join(ROOT, dir)).filter((f) => f.endsWith(".ts"))) {
      const text = fs.readFileSync(path.join(ROOT, dir, file), "utf8");
      assert.match(text, /^\/\/ \S/, `${dir}/${file}`);
    }
  }
});

test("tilec.server.path set in User settings applies in remote windows, but not from untrusted workspaces", () => {
  // machine and machine-overridable settings of the local User settings are ignored in a remote
  // window (SSH, WSL, containers, code-server), which is where most GPUs are reached from.
  assert.equal(properties["tilec.server.path"].scope, "window");
  assert.deepEqual(manifest.capabilities.untrustedWorkspaces.restrictedConfigurations, ["tilec.server.path"]);
  assert.equal(manifest.capabilities.untrustedWorkspaces.supported, "limited");
});
