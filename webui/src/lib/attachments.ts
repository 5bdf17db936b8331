// Turning picked files into attachments: text is inlined, and so is the text of a PDF (extracted
// in the browser); images and audio only where the server's model takes them (/props modalities).
import type { Attachment, Props } from "./types";

const TEXT_EXTENSIONS =
  /\.(txt|md|markdown|csv|tsv|json|jsonl|ya?ml|toml|ini|cfg|conf|xml|html?|css|scss|js|mjs|cjs|ts|tsx|jsx|svelte|vue|py|rb|go|rs|c|h|cc|cpp|hpp|java|kt|swift|cs|php|sh|bash|zsh|sql|r|lua|pl|tex|log|diff|patch)$/i;

export function acceptedTypes(modalities: Props["modalities"] | undefined): string {
  const types = ["text/*", ".md,.json,.yaml,.yml,.toml,.ts,.tsx,.js,.py,.go,.rs,.c,.h,.cpp,.java,.sh,.sql,.svelte,.csv", "application/pdf,.pdf"];
  if (modalities?.vision) types.push("image/*");
  if (modalities?.audio) types.push("audio/wav,audio/mpeg,audio/mp3");
  return types.join(",");
}

export function isTextFile(f: { name: string; type: string }): boolean {
  return f.type.startsWith("text/") || f.type === "application/json" || TEXT_EXTENSIONS.test(f.name);
}

export function isPdfFile(f: { name: string; type: string }): boolean {
  return f.type === "application/pdf" || /\.pdf$/i.test(f.name);
}

/** The attachment for file, or an error message saying why it cannot be attached. */
export async function readAttachment(file: File, modalities: Props["modalities"] | undefined): Promise<Attachment | string> {
  if (file.type.startsWith("image/")) {
    if (!modalities?.vision) return `${file.name}: the model does not take images`;
    return { name: file.name, kind: "image", data: await dataUrl(file) };
  }
  if (file.type.startsWith("audio/")) {
    if (!modalities?.audio) return `${file.name}: the model does not take audio`;
    return { name: file.name, kind: "audio", data: await dataUrl(file) };
  }
  if (isPdfFile(file)) return pdfAttachment(file);
  if (isTextFile(file)) return { name: file.name, kind: "text", data: await file.text() };
  return `${file.name}: only text files, PDFs${modalities?.vision ? ", images" : ""}${modalities?.audio ? ", audio" : ""} can be attached`;
}

/** A PDF as a text attachment; pdf.js loads only now, on the first PDF. */
async function pdfAttachment(file: File): Promise<Attachment | string> {
  let text: string;
  try {
    const { pdfText } = await import("./pdf");
    text = await pdfText(await file.arrayBuffer());
  } catch (e) {
    return `${file.name}: could not read the PDF (${e instanceof Error ? e.message : String(e)})`;
  }
  if (!text.trim()) return `${file.name}: the PDF has no text (a scan?)`;
  return { name: file.name, kind: "text", data: text };
}

function dataUrl(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result as string);
    r.onerror = () => reject(r.error);
    r.readAsDataURL(file);
  });
}
