// The generated-CUDA view: the `tilec-cuda:` documents "Show generated CUDA" opens (read-only,
// named after the kernel instance), where the kernel starts in them, the range of tilec's prelude
// (folded when the document opens) and the outline of kernels, functions and types. Plain text
// work with no `vscode` import, so it is unit-tested; extension.ts turns it into a content
// provider, a symbol provider and a folding provider.

/** The scheme of the generated-CUDA documents. Their text comes from the extension, never
 * from a file, so VS Code shows them read-only and never asks to save them. */
export const CUDA_SCHEME = "tilec-cuda";

/** The path of an instance's CUDA document, e.g. "/softmax#0.cu": the tab's title is its last
 * part, and `.cu` gives the document the CUDA language. Characters that would split or end a
 * path are replaced, so the title stays one name. */
export function cudaDocumentPath(kernel: string, instance: number): string {
  const name = kernel.replace(/[\\/?#%\s]+/g, "_") || "kernel";
  return `/${name}#${instance}.cu`;
}

/** The first line (0-based) of the kernel's `__global__` definition, or of the first kernel when
 * none is named `kernel`; the line after the prelude when there is no kernel; else 0. */
export function kernelLine(text: string, kernel: string): number {
  const lines = text.split("\n");
  const globals = lines
    .map((line, index) => ({ line, index }))
    .filter(({ line }) => /\b__global__\b/.test(line));
  const named = globals.find(({ line }) => new RegExp(`\\b${escapeRegExp(kernel)}\\s*\\(`).test(line));
  const found = named ?? globals[0];
  if (found) return found.index;
  const prelude = preludeRange(text);
  return prelude ? Math.min(prelude.end + 1, lines.length - 1) : 0;
}

/** The lines (0-based, inclusive) from tilec's `// ---- tilec prelude` banner to its `end of the
 * tilec prelude` banner, or undefined when the text has no prelude. */
export function preludeRange(text: string): { start: number; end: number } | undefined {
  const lines = text.split("\n");
  const start = lines.findIndex((line) => /^\/\/ -+ tilec prelude\b/.test(line));
  if (start < 0) return undefined;
  const end = lines.findIndex((line, index) => index > start && /^\/\/ -+ end of the tilec prelude\b/.test(line));
  return end < 0 ? undefined : { start, end };
}

export type CudaSymbolKind = "kernel" | "function" | "struct" | "section";

/** One entry of the document's outline: lines are 0-based and inclusive. */
export interface CudaSymbol {
  name: string;
  kind: CudaSymbolKind;
  start: number;
  end: number;
  /** Where the name is, for the outline's selection. */
  nameLine: number;
}

/**
 * The outline of a generated CUDA document: the prelude's sections (`// ---- title ----`
 * banners), the structs and the `__device__` functions defined at the start of a line, and the
 * `__global__` kernels. The generated code always starts a top-level definition at column 0 and
 * ends a multi-line one with a `}` at column 0, which is what this relies on.
 */
export function cudaSymbols(text: string): CudaSymbol[] {
  const lines = text.split("\n");
  const symbols: CudaSymbol[] = [];
  lines.forEach((line, index) => {
    const banner = /^\/\/ -+ (.*?) -*$/.exec(line);
    if (banner && !/^end of /.test(banner[1])) {
      symbols.push({ name: banner[1], kind: "section", start: index, end: index, nameLine: index });
      return;
    }
    const struct = /^struct\s+([A-Za-z_]\w*)/.exec(line);
    if (struct) {
      symbols.push({ name: struct[1], kind: "struct", start: index, end: definitionEnd(lines, index), nameLine: index });
      return;
    }
    if (/^(extern "C" )?(template\s*<[^>]*>\s*)?(static\s+)?(__global__|__device__)/.test(line)) {
      const kind: CudaSymbolKind = /\b__global__\b/.test(line) ? "kernel" : "function";
      const called = functionName(lines, index);
      if (called) {
        symbols.push({ name: called.name, kind, start: index, end: definitionEnd(lines, index), nameLine: called.line });
      }
    }
  });
  // A section runs up to the next section (or the end of the prelude).
  const sections = symbols.filter((symbol) => symbol.kind === "section");
  const prelude = preludeRange(text);
  sections.forEach((section, at) => {
    const next = sections[at + 1];
    section.end = next ? next.start - 1 : (prelude?.end ?? section.start);
  });
  return symbols;
}

/** The name of the function whose definition starts at `start`: the word before the first `(`
 * that is not an attribute's (`__launch_bounds__(256)`), on that line or the next few. */
function functionName(lines: string[], start: number): { name: string; line: number } | undefined {
  for (let index = start; index < Math.min(lines.length, start + 4); index++) {
    for (const match of lines[index].matchAll(/([A-Za-z_]\w*)\s*\(/g)) {
      if (!/^__\w+__$/.test(match[1])) return { name: match[1], line: index };
    }
  }
  return undefined;
}

/** The last line of the definition starting at `start`: the line itself when it ends it (a
 * one-line function, a `;`), else the next line that starts with `}`. */
function definitionEnd(lines: string[], start: number): number {
  const first = lines[start].trimEnd();
  if (first.endsWith("}") || first.endsWith("};") || first.endsWith(";")) return start;
  for (let index = start + 1; index < lines.length; index++) {
    if (lines[index].startsWith("}")) return index;
  }
  return start;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
