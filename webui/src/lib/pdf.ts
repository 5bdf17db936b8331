// A PDF's text, extracted in the browser with pdf.js. Both pdf.js and its worker are large, so
// they load only when a PDF is attached (this module is itself imported on demand). The legacy
// build carries its own polyfills: it runs in older browsers and on Node 20 (the unit tests).
import type { TextItem } from "pdfjs-dist/types/src/display/api";
// Vite emits the worker as an asset of its own and gives its URL.
import workerUrl from "pdfjs-dist/legacy/build/pdf.worker.min.mjs?url";

type PdfJs = typeof import("pdfjs-dist");

let loading: Promise<PdfJs> | null = null;

function loadPdfJs(): Promise<PdfJs> {
  loading ??= (async () => {
    const pdfjs: PdfJs = await import("pdfjs-dist/legacy/build/pdf.mjs");
    // In a browser the worker is a file Vite bundles; on Node pdf.js runs it in-process.
    if (typeof Worker !== "undefined") pdfjs.GlobalWorkerOptions.workerSrc = workerUrl;
    return pdfjs;
  })();
  loading.catch(() => (loading = null));
  return loading;
}

/** The text of every page, pages apart by a blank line. */
export async function pdfText(data: ArrayBuffer | Uint8Array): Promise<string> {
  const pdfjs = await loadPdfJs();
  const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
  const doc = await pdfjs.getDocument({ data: bytes, isEvalSupported: false, disableFontFace: true, verbosity: 0 }).promise;
  try {
    const pages: string[] = [];
    for (let i = 1; i <= doc.numPages; i++) {
      const page = await doc.getPage(i);
      const content = await page.getTextContent();
      let text = "";
      for (const item of content.items) {
        if (!("str" in item)) continue;
        const t = item as TextItem;
        text += t.str + (t.hasEOL ? "\n" : "");
      }
      pages.push(text.replace(/[ \t]+\n/g, "\n").trim());
      page.cleanup();
    }
    return pages.filter((p) => p !== "").join("\n\n");
  } finally {
    await doc.destroy();
  }
}
