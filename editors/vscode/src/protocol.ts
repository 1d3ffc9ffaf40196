// The custom requests tilec's language server understands beyond standard LSP: their method
// names, parameter and result shapes, and the builders that produce parameters. This is the
// one place that has to agree with the server (crates/lsp), so it is spelled out exactly and
// kept free of `vscode` imports for unit testing.

import type { RunDevice } from "./config";

export const METHOD_CUDA_SOURCE = "tilec/cudaSource";
export const METHOD_LAYOUT_SVG = "tilec/layoutSvg";
export const METHOD_RUN_KERNEL = "tilec/runKernel";
export const METHOD_EXPLAIN = "tilec/explain";

/** LSP position: zero-based line, UTF-16 code-unit character (what VS Code uses too). */
export interface Position {
  line: number;
  character: number;
}

/** Parameters shared by the kernel requests. A null position asks the server to pick a
 * kernel on its own (used when saving a file that has no visible editor). */
export interface KernelParams {
  textDocument: { uri: string };
  position: Position | null;
}

export interface RunKernelParams extends KernelParams {
  device: RunDevice;
}

export interface CudaSourceResult {
  kernel: string;
  instance: number;
  /** One label per instance of the kernel, e.g. "#0 M=1024, N=1024". */
  instances: string[];
  cuda: string;
}

export interface LayoutSvgResult {
  kernel: string;
  instance: number;
  buffer: string;
  svg: string;
}

export interface RunKernelResult {
  kernel: string;
  instance: number;
  ok: boolean;
  output: string;
}

export interface ExplainParams {
  code: string;
}

export interface ExplainResult {
  markdown: string;
}

/** Params for `tilec/cudaSource` and `tilec/layoutSvg`. The position is copied field by field
 * so that a vscode.Position (which carries methods and getters) serialises to exactly
 * `{ line, character }`. */
export function kernelParams(uri: string, position: Position | null | undefined): KernelParams {
  return {
    textDocument: { uri },
    position: position ? { line: position.line, character: position.character } : null,
  };
}

/** Params for `tilec/runKernel`: the kernel params plus the device. */
export function runKernelParams(
  uri: string,
  position: Position | null | undefined,
  device: RunDevice,
): RunKernelParams {
  return { ...kernelParams(uri, position), device };
}

/** The text to show for a failed request. JSON-RPC errors (vscode-jsonrpc's ResponseError)
 * and ordinary Errors both carry `message`; anything else is stringified rather than lost. */
export function errorMessage(error: unknown): string {
  if (typeof error === "object" && error !== null && "message" in error) {
    const message = (error as { message: unknown }).message;
    if (typeof message === "string" && message.trim() !== "") return message;
  }
  if (typeof error === "string" && error.trim() !== "") return error;
  return String(error);
}

/**
 * Whether a Python source looks like a TileLang program. Run-on-save uses this so that saving
 * an unrelated Python file does not send a run request that can only fail with an error
 * popup. The server makes the real decision; this is only a cheap pre-filter, so it errs on
 * the side of "yes" (any `import tilelang...` / `from tilelang...` line).
 */
export function looksLikeTileLang(text: string): boolean {
  return /^[ \t]*(?:import|from)[ \t]+tilelang\b/m.test(text);
}
