// Builds the HTML of the layout webview from the SVG the server draws. Pure string work (no
// `vscode` import) so the security-relevant parts — the Content-Security-Policy and the
// escaping — are covered by unit tests.
//
// The SVG is shown through <img src="data:image/svg+xml;base64,...">, not inlined: an SVG
// loaded as an image cannot run scripts or load anything, and base64 leaves no character in
// it that could close the attribute or the surrounding markup, whatever the SVG contains.
// The SVG's own <style> still applies inside the image, so the picture looks the same.

export interface LayoutHtmlInputs {
  /** Panel title, shown as the page heading too; plain text, escaped here. */
  title: string;
  /** The SVG document as the server sent it. */
  svg: string;
  /** Random per-render value allowing exactly our one <style> element. */
  nonce: string;
}

/** Escapes text for HTML element content and for quoted attribute values. */
export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

/** `data:` URI for an SVG. Base64 of the UTF-8 bytes, so non-ASCII labels survive. */
export function svgDataUri(svg: string): string {
  return `data:image/svg+xml;base64,${Buffer.from(svg, "utf8").toString("base64")}`;
}

/**
 * The policy: nothing is allowed by default, so no script, frame, font, fetch or remote
 * image can load; images only from data: URIs (our SVG); styles only from the element that
 * carries the nonce. The nonce must be a CSP nonce token; anything else is rejected rather
 * than spliced into the header.
 */
export function contentSecurityPolicy(nonce: string): string {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(nonce)) {
    throw new Error(`invalid CSP nonce: ${JSON.stringify(nonce)}`);
  }
  return [
    "default-src 'none'",
    "img-src data:",
    `style-src 'nonce-${nonce}'`,
    "script-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join("; ");
}

/**
 * The SVG with the editor's theme on its root element (`class="dark"` or `class="light"`). The
 * server's picture follows `prefers-color-scheme` on its own, but inside VS Code the theme is the
 * editor's, not the system's: the class settles it. A root that already has a class is left alone.
 */
export function themedSvg(svg: string, dark: boolean): string {
  const theme = dark ? "dark" : "light";
  return svg.replace(/<svg\b([^>]*)>/, (root: string, attributes: string) =>
    /\sclass\s*=/.test(attributes) ? root : `<svg class="${theme}"${attributes}>`,
  );
}

/** The full webview document. */
export function layoutHtml(inputs: LayoutHtmlInputs): string {
  const csp = contentSecurityPolicy(inputs.nonce);
  const title = escapeHtml(inputs.title);
  // The SVG carries explicit width/height, so it is shown at its natural size and the page
  // scrolls: shrinking a wide fragment to the panel would make the thread labels unreadable.
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${escapeHtml(csp)}">
<title>${title}</title>
<style nonce="${escapeHtml(inputs.nonce)}">
  body { margin: 0; padding: 12px; color: var(--vscode-foreground); background: var(--vscode-editor-background); font-family: var(--vscode-font-family); }
  h1 { font-size: 1.1em; font-weight: 600; margin: 0 0 10px 0; }
  .picture { overflow: auto; }
  .picture img { display: block; max-width: none; }
</style>
</head>
<body>
<h1>${title}</h1>
<div class="picture"><img src="${svgDataUri(inputs.svg)}" alt="${title}"></div>
</body>
</html>
`;
}
