// Links to the pages of diagnostic codes. The server links each diagnostic to the code's page
// in its source tree (`file:` .../docs/codes/<code>.md) and, where that tree is gone, to
// `tilec-explain:/<code>`, which the extension serves with the markdown from the
// `tilec/explain` request (the command "Explain diagnostic code" opens those too). This module converts between codes and URIs and
// validates codes; it has no `vscode` import so it is unit-tested.

export const EXPLAIN_SCHEME = "tilec-explain";

/** Codes are short kebab-case words like "layout-conflict". Anything else (slashes, dots,
 * spaces, empty) is rejected before it reaches the server or a document title. */
const CODE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export function isValidCode(code: string): boolean {
  return CODE_PATTERN.test(code);
}

/**
 * The code named by a `tilec-explain` URI path ("/layout-conflict"). A trailing ".md" is
 * allowed because the extension itself opens "/<code>.md" (so VS Code treats the page as
 * markdown). Returns undefined for anything that is not exactly one valid code.
 */
export function codeFromExplainPath(path: string): string | undefined {
  let rest = path.startsWith("/") ? path.slice(1) : path;
  if (rest.toLowerCase().endsWith(".md")) rest = rest.slice(0, -3);
  return isValidCode(rest) ? rest : undefined;
}

/** The code named by a whole URI string, e.g. "tilec-explain:/layout-conflict"; undefined
 * for another scheme, an authority, a query/fragment or an invalid code. */
export function parseExplainUri(uri: string): string | undefined {
  const prefix = `${EXPLAIN_SCHEME}:`;
  if (!uri.toLowerCase().startsWith(prefix)) return undefined;
  const rest = uri.slice(prefix.length);
  if (rest.startsWith("//") || /[?#]/.test(rest)) return undefined;
  let path: string;
  try {
    path = decodeURIComponent(rest);
  } catch {
    return undefined;
  }
  return codeFromExplainPath(path);
}

/** The code whose page a `file:` link of the server names (`.../docs/codes/<code>.md`, the
 * source tree's page, which is what diagnostics link to where that tree exists), or undefined
 * for any other path. The folder's README is not a code. */
export function codeFromDocsPath(path: string): string | undefined {
  const match = /\/docs\/codes\/([^/]+)\.md$/i.exec(path);
  if (!match || match[1].toLowerCase() === "readme") return undefined;
  return isValidCode(match[1]) ? match[1] : undefined;
}

/** The URI for a code. `markdown` adds ".md" so that VS Code gives the document the markdown
 * language (used when the extension opens the page itself). */
export function explainUri(code: string, markdown = false): string {
  if (!isValidCode(code)) throw new Error(`invalid diagnostic code: ${JSON.stringify(code)}`);
  return `${EXPLAIN_SCHEME}:/${code}${markdown ? ".md" : ""}`;
}

/**
 * Turns what a user typed into the "Explain diagnostic code" box into a code: surrounding
 * space, a pasted `tilec-explain:/` prefix or brackets (as diagnostics show codes) are
 * dropped, and inner spaces/underscores become hyphens, lower-cased, matching the server's
 * spelling. Returns undefined when nothing valid remains.
 */
export function normalizeUserCode(input: string): string | undefined {
  let text = input.trim();
  const fromUri = parseExplainUri(text);
  if (fromUri !== undefined) return fromUri;
  text = text.replace(/^[[(]\s*/, "").replace(/\s*[\])]$/, "");
  text = text.replace(/[\s_]+/g, "-").toLowerCase();
  return isValidCode(text) ? text : undefined;
}
