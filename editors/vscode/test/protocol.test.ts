// Unit tests for src/protocol.ts: the exact shape of the custom request parameters the
// server expects, and error-message extraction.

import { test } from "node:test";
import assert from "node:assert/strict";
import {
  errorMessage,
  kernelParams,
  looksLikeTileLang,
  runKernelParams,
} from "../src/protocol";

/** Mimics vscode.Position: extra members that must not leak into the JSON. */
class FakePosition {
  constructor(readonly line: number, readonly character: number) {}
  translate(): FakePosition {
    return this;
  }
  get isFake(): boolean {
    return true;
  }
}

test("kernel params carry the uri and a plain position", () => {
  const params = kernelParams("file:///k/softmax.py", new FakePosition(12, 4));
  assert.deepEqual(params, {
    textDocument: { uri: "file:///k/softmax.py" },
    position: { line: 12, character: 4 },
  });
  assert.equal(
    JSON.stringify(params),
    '{"textDocument":{"uri":"file:///k/softmax.py"},"position":{"line":12,"character":4}}',
  );
});

test("missing position is sent as null, not omitted", () => {
  for (const position of [null, undefined]) {
    const params = kernelParams("untitled:Untitled-1", position);
    assert.equal(params.position, null);
    assert.equal(JSON.stringify(params), '{"textDocument":{"uri":"untitled:Untitled-1"},"position":null}');
  }
});

test("run params add the device", () => {
  assert.deepEqual(runKernelParams("file:///a.py", { line: 0, character: 0 }, "cuda"), {
    textDocument: { uri: "file:///a.py" },
    position: { line: 0, character: 0 },
    device: "cuda",
  });
  assert.deepEqual(runKernelParams("file:///a.py", null, "auto"), {
    textDocument: { uri: "file:///a.py" },
    position: null,
    device: "auto",
  });
});

test("error messages come from JSON-RPC errors, Errors and strings", () => {
  // Shape of vscode-jsonrpc's ResponseError.
  const rpcError = Object.assign(new Error("no kernel at this position"), { code: -32602, data: undefined });
  assert.equal(errorMessage(rpcError), "no kernel at this position");
  assert.equal(errorMessage({ code: -32603, message: "CUDA is not available" }), "CUDA is not available");
  assert.equal(errorMessage("plain text"), "plain text");
  assert.equal(errorMessage(undefined), "undefined");
  assert.equal(errorMessage({ message: 42 }), "[object Object]");
});

test("TileLang pre-filter recognises tilelang imports only", () => {
  assert.ok(looksLikeTileLang("import tilelang\nimport tilelang.language as T\n"));
  assert.ok(looksLikeTileLang("import torch\nimport tilelang.language as T\n"));
  assert.ok(looksLikeTileLang("from tilelang import language as T\n"));
  assert.ok(looksLikeTileLang("    import tilelang.language as T  # inside a function\n"));
  assert.ok(!looksLikeTileLang("import torch\nprint('tilelang')\n"));
  assert.ok(!looksLikeTileLang("import tilelangx\n"));
  assert.ok(!looksLikeTileLang("# import tilelang\n"));
});
