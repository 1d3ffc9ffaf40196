// Unit tests for src/layoutHtml.ts: the layout webview must not be able to run anything,
// whatever the SVG or the title contain.

import { test } from "node:test";
import assert from "node:assert/strict";
import { contentSecurityPolicy, escapeHtml, layoutHtml, svgDataUri, themedSvg } from "../src/layoutHtml";

const NONCE = "AbC123+/xyz0==";
const SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><title>acc_s</title></svg>';

/** The `content` of the CSP meta tag, unescaped. */
function cspOf(html: string): string {
  const match = /<meta http-equiv="Content-Security-Policy" content="([^"]*)">/.exec(html);
  assert.ok(match, "the page has a CSP meta tag");
  return match[1].replace(/&#39;/g, "'").replace(/&quot;/g, '"').replace(/&amp;/g, "&");
}

test("page carries a strict CSP: nothing by default, no scripts, images only from data:", () => {
  const csp = cspOf(layoutHtml({ title: "layout: acc_s (softmax#0)", svg: SVG, nonce: NONCE }));
  const directives = csp.split(";").map((d) => d.trim());
  assert.ok(directives.includes("default-src 'none'"));
  assert.ok(directives.includes("script-src 'none'"));
  assert.ok(directives.includes("img-src data:"));
  assert.ok(directives.includes(`style-src 'nonce-${NONCE}'`));
  assert.ok(!/unsafe-inline|unsafe-eval|https?:|\*/.test(csp), csp);
});

test("CSP comes before any content and the style element carries the nonce", () => {
  const html = layoutHtml({ title: "t", svg: SVG, nonce: NONCE });
  assert.ok(html.indexOf("Content-Security-Policy") < html.indexOf("<style"));
  assert.ok(html.includes(`<style nonce="${NONCE}">`));
});

test("a nonce that could break the header is refused", () => {
  assert.throws(() => contentSecurityPolicy("abc'; script-src *"));
  assert.throws(() => contentSecurityPolicy(""));
  assert.doesNotThrow(() => contentSecurityPolicy("Zm9vYmFy"));
});

test("the SVG is embedded as a base64 data URI that decodes to the original", () => {
  const svg = SVG.replace("acc_s", "acc_s · ∑ 线程");
  const html = layoutHtml({ title: "t", svg, nonce: NONCE });
  const match = /<img src="data:image\/svg\+xml;base64,([A-Za-z0-9+/=]+)"/.exec(html);
  assert.ok(match, "an img with a base64 data URI");
  assert.equal(Buffer.from(match[1], "base64").toString("utf8"), svg);
  assert.equal(svgDataUri(svg), `data:image/svg+xml;base64,${match[1]}`);
});

test("hostile SVG content cannot reach the page markup", () => {
  const evil = '<svg><script>alert(1)</script></svg>"><script>alert(2)</script><img src=x onerror=alert(3)>';
  const html = layoutHtml({ title: "t", svg: evil, nonce: NONCE });
  assert.ok(!/<script/i.test(html), "no script element anywhere");
  assert.ok(!html.includes("</script>"));
  assert.ok(!html.includes("onerror"));
  assert.ok(!html.includes("alert("));
});

test("title is escaped in both the heading and the alt attribute", () => {
  const title = `layout: a"b'<c> & </script><script>alert(1)</script> (k#0)`;
  const html = layoutHtml({ title, svg: SVG, nonce: NONCE });
  assert.ok(!/<script/i.test(html));
  assert.ok(!html.includes("</script>"));
  const escaped = "layout: a&quot;b&#39;&lt;c&gt; &amp; &lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; (k#0)";
  assert.ok(html.includes(`<h1>${escaped}</h1>`));
  assert.ok(html.includes(`alt="${escaped}"`));
  assert.ok(html.includes(`<title>${escaped}</title>`));
});

test("escapeHtml handles each special character, ampersand first", () => {
  assert.equal(escapeHtml(`&<>"'`), "&amp;&lt;&gt;&quot;&#39;");
  assert.equal(escapeHtml("&lt;"), "&amp;lt;");
  assert.equal(escapeHtml("plain acc_s"), "plain acc_s");
});

test("the picture gets the editor's theme on its root element, once", () => {
  assert.equal(
    themedSvg(SVG, true),
    '<svg class="dark" xmlns="http://www.w3.org/2000/svg" width="10" height="10"><title>acc_s</title></svg>',
  );
  assert.match(themedSvg(SVG, false), /^<svg class="light" /);
  // Only the root: a nested <svg> keeps its attributes, and a root with a class keeps it.
  const nested = '<svg width="1"><svg width="2"></svg></svg>';
  assert.equal(themedSvg(nested, true), '<svg class="dark" width="1"><svg width="2"></svg></svg>');
  const classed = '<svg class="x" width="1"></svg>';
  assert.equal(themedSvg(classed, true), classed);
});
