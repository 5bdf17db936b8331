import { describe, expect, it } from "vitest";

import { loadFor, renderMarkdown } from "../src/lib/markdown";

describe("renderMarkdown", () => {
  it("removes scripts and event handlers", () => {
    const html = renderMarkdown('Hi <script>alert(1)</script><img src="x" onerror="alert(2)"> <a href="javascript:alert(3)">x</a>');
    expect(html).not.toContain("<script");
    expect(html).not.toContain("onerror");
    expect(html).not.toContain("javascript:");
    expect(html).toContain("<img");
  });

  it("renders tables and code blocks with a copy button", () => {
    const html = renderMarkdown("| a | b |\n|---|---|\n| 1 | 2 |\n\n```go\nfunc main() {}\n```");
    expect(html).toContain("<table>");
    expect(html).toContain('aria-label="Copy code"');
    expect(html).toContain("func main() {}");
  });

  it("highlights code and renders math once loaded", async () => {
    const text = "```python\ndef f(): pass\n```\n\nInline $x^2$ and\n\n$$\\frac{a}{b}$$\n";
    expect(renderMarkdown(text)).toContain("$x^2$");
    expect(await loadFor(text)).toBe(true);
    const html = renderMarkdown(text);
    expect(html).toContain("hljs-keyword");
    expect(html).toContain("katex");
    expect(html).not.toContain("$x^2$");
  });
});
