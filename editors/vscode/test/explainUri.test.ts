// Unit tests for src/explainUri.ts: parsing the `tilec-explain:/<code>` links the server puts
// into diagnostics, and normalising codes typed by users.

import { test } from "node:test";
import assert from "node:assert/strict";
import {
  codeFromDocsPath,
  codeFromExplainPath,
  explainUri,
  isValidCode,
  normalizeUserCode,
  parseExplainUri,
} from "../src/explainUri";

test("good links name their code", () => {
  assert.equal(parseExplainUri("tilec-explain:/layout-conflict"), "layout-conflict");
  assert.equal(parseExplainUri("tilec-explain:/shared-memory-capacity"), "shared-memory-capacity");
  assert.equal(parseExplainUri("tilec-explain:/layout-conflict.md"), "layout-conflict");
  assert.equal(parseExplainUri("tilec-explain:layout-conflict"), "layout-conflict");
  assert.equal(parseExplainUri("TILEC-EXPLAIN:/parse-error"), "parse-error");
});

test("bad links are rejected", () => {
  for (const uri of [
    "tilec-explain:/",
    "tilec-explain:",
    "tilec-explain:/../../etc/passwd",
    "tilec-explain:/a/b",
    "tilec-explain:/layout conflict",
    "tilec-explain:/layout%20conflict",
    "tilec-explain:/-leading-hyphen",
    "tilec-explain://host/layout-conflict",
    "tilec-explain:/layout-conflict?x=1",
    "tilec-explain:/layout-conflict#top",
    "tilec-explain:/%E0%A4%A",
    "file:///layout-conflict",
    "https://example.com/layout-conflict",
    `tilec-explain:/${"a".repeat(65)}`,
  ]) {
    assert.equal(parseExplainUri(uri), undefined, uri);
  }
});

test("paths from vscode.Uri are parsed the same way", () => {
  assert.equal(codeFromExplainPath("/layout-conflict"), "layout-conflict");
  assert.equal(codeFromExplainPath("/data-race.md"), "data-race");
  assert.equal(codeFromExplainPath("/a/b"), undefined);
  assert.equal(codeFromExplainPath("/"), undefined);
  assert.equal(codeFromExplainPath("/.md"), undefined);
});

test("URIs round-trip and refuse invalid codes", () => {
  assert.equal(explainUri("layout-conflict"), "tilec-explain:/layout-conflict");
  assert.equal(explainUri("layout-conflict", true), "tilec-explain:/layout-conflict.md");
  for (const code of ["layout-conflict", "undefined-name", "e0001"]) {
    assert.equal(parseExplainUri(explainUri(code)), code);
    assert.equal(parseExplainUri(explainUri(code, true)), code);
  }
  assert.throws(() => explainUri("../x"));
  assert.throws(() => explainUri(""));
});

test("code validity", () => {
  assert.ok(isValidCode("layout-conflict"));
  assert.ok(isValidCode("E001"));
  assert.ok(!isValidCode("layout.conflict"));
  assert.ok(!isValidCode(""));
});

test("typed codes are normalised to the server's spelling", () => {
  assert.equal(normalizeUserCode("  layout-conflict "), "layout-conflict");
  assert.equal(normalizeUserCode("Layout Conflict"), "layout-conflict");
  assert.equal(normalizeUserCode("shared_memory_capacity"), "shared-memory-capacity");
  assert.equal(normalizeUserCode("[data-race]"), "data-race");
  assert.equal(normalizeUserCode("(data-race)"), "data-race");
  assert.equal(normalizeUserCode("tilec-explain:/parse-error"), "parse-error");
  assert.equal(normalizeUserCode(""), undefined);
  assert.equal(normalizeUserCode("a/b"), undefined);
  assert.equal(normalizeUserCode("what?"), undefined);
});

test("the server's file links to docs/codes/<code>.md name their code", () => {
  assert.equal(codeFromDocsPath("/home/ada/tilec/docs/codes/layout-conflict.md"), "layout-conflict");
  assert.equal(codeFromDocsPath("/c:/src/tilec/docs/codes/data-race.md"), "data-race");
  assert.equal(codeFromDocsPath("/home/ada/tilec/docs/codes/README.md"), undefined);
  assert.equal(codeFromDocsPath("/home/ada/tilec/docs/language.md"), undefined);
  assert.equal(codeFromDocsPath("/home/ada/notes/layout-conflict.md"), undefined);
});
