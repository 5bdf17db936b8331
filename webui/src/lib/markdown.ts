// Markdown to safe HTML. highlight.js and KaTeX are loaded on demand, the first time a code
// block or formula appears; until then code shows plain and formulas as their source, and
// `loadFor` says when rendering again would look better.
import DOMPurify from "dompurify";
import { Marked, type Tokens } from "marked";

interface Highlighter {
  highlight(code: string, lang: string): string | null;
}
interface MathRenderer {
  render(tex: string, display: boolean): string;
}

let highlighter: Highlighter | null = null;
let math: MathRenderer | null = null;

const marked = new Marked({
  gfm: true,
  breaks: false,
  extensions: [
    {
      name: "blockMath",
      level: "block",
      start: (src: string) => src.indexOf("$$"),
      tokenizer(src: string) {
        const m = /^\$\$([\s\S]+?)\$\$(?:\n|$)/.exec(src);
        if (m) return { type: "blockMath", raw: m[0], text: (m[1] ?? "").trim() };
        return undefined;
      },
      renderer: (t) => mathHtml(t.text as string, true),
    },
    {
      name: "inlineMath",
      level: "inline",
      start: (src: string) => src.indexOf("$"),
      tokenizer(src: string) {
        const m = /^\$\$([^$]+?)\$\$/.exec(src) ?? /^\$(?![\s$])([^$\n]+?)(?<!\s)\$(?!\d)/.exec(src);
        if (m) return { type: "inlineMath", raw: m[0], text: m[1] ?? "", display: m[0].startsWith("$$") };
        return undefined;
      },
      renderer: (t) => mathHtml(t.text as string, Boolean(t.display)),
    },
  ],
  renderer: {
    code({ text, lang }: Tokens.Code): string {
      const language = (lang ?? "").trim().split(/\s+/)[0] ?? "";
      const body = highlighter?.highlight(text, language) ?? escapeHtml(text);
      return (
        `<div class="code-block"><div class="code-head"><span>${escapeHtml(language || "text")}</span>` +
        `<button type="button" class="copy-code" aria-label="Copy code">Copy</button></div>` +
        `<pre><code class="hljs">${body}</code></pre></div>`
      );
    },
  },
});

function mathHtml(tex: string, display: boolean): string {
  if (math) return math.render(tex, display);
  const src = display ? `$$${tex}$$` : `$${tex}$`;
  return display ? `<div class="math-src">${escapeHtml(src)}</div>` : `<span class="math-src">${escapeHtml(src)}</span>`;
}

/** text as sanitised HTML. */
export function renderMarkdown(text: string): string {
  const html = marked.parse(text, { async: false });
  return DOMPurify.sanitize(html, { ADD_ATTR: ["aria-label"] });
}

const hasCode = (text: string) => /(^|\n)\s*(```|~~~)/.test(text);
const hasMath = (text: string) => /\$[^$\s][^$]*\$/.test(text);

/** Loads what text needs and is not loaded yet; resolves true when something new is loaded. */
export async function loadFor(text: string): Promise<boolean> {
  const jobs: Promise<void>[] = [];
  if (!highlighter && hasCode(text)) jobs.push(loadHighlighter());
  if (!math && hasMath(text)) jobs.push(loadMath());
  await Promise.all(jobs);
  return jobs.length > 0;
}

let highlighterLoad: Promise<void> | null = null;
function loadHighlighter(): Promise<void> {
  highlighterLoad ??= import("./highlight").then((m) => {
    highlighter = m.highlighter;
  });
  return highlighterLoad;
}

let mathLoad: Promise<void> | null = null;
function loadMath(): Promise<void> {
  mathLoad ??= import("./math").then((m) => {
    math = m.mathRenderer;
  });
  return mathLoad;
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
