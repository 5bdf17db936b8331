// KaTeX and its stylesheet, loaded on demand (see markdown.ts).
import katex from "katex";
import "katex/dist/katex.min.css";

export const mathRenderer = {
  render(tex: string, display: boolean): string {
    return katex.renderToString(tex, { displayMode: display, throwOnError: false, output: "htmlAndMathml" });
  },
};
