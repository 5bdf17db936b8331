// Turning picked files into attachments: text is inlined, and so is the text of a PDF (extracted
// in the browser); images and audio only where the server's model takes them (/props modalities).
import type { Attachment, Message, Props } from "./types";

type Modalities = Pick<Props["modalities"], "vision" | "audio">;

const TEXT_EXTENSIONS =
  /\.(txt|md|markdown|csv|tsv|json|jsonl|ya?ml|toml|ini|cfg|conf|xml|html?|css|scss|js|mjs|cjs|ts|tsx|jsx|svelte|vue|py|rb|go|rs|c|h|cc|cpp|hpp|java|kt|swift|cs|php|sh|bash|zsh|sql|r|lua|pl|tex|log|diff|patch)$/i;

export function acceptedTypes(modalities: Modalities | null | undefined): string {
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
export async function readAttachment(file: File, modalities: Modalities | null | undefined, model = "the model"): Promise<Attachment | string> {
  if (file.type.startsWith("image/")) {
    if (!modalities?.vision) return refusal(file.name, "images", modalities, model);
    return { name: file.name, kind: "image", data: await dataUrl(file) };
  }
  if (file.type.startsWith("audio/")) {
    if (!modalities?.audio) return refusal(file.name, "audio", modalities, model);
    return { name: file.name, kind: "audio", data: await dataUrl(file) };
  }
  if (isPdfFile(file)) return pdfAttachment(file);
  if (isTextFile(file)) return { name: file.name, kind: "text", data: await file.text() };
  return `${file.name}: only text files, PDFs${modalities?.vision ? ", images" : ""}${modalities?.audio ? ", audio" : ""} can be attached`;
}

/** Why each of files cannot go to a model with these modalities (a model picked after they were attached). */
export function refusedAttachments(files: Attachment[], modalities: Modalities | null | undefined, model = "the model"): string[] {
  const out: string[] = [];
  for (const f of files) {
    if (f.kind === "image" && !modalities?.vision) out.push(refusal(f.name, "images", modalities, model));
    if (f.kind === "audio" && !modalities?.audio) out.push(refusal(f.name, "audio", modalities, model));
  }
  return out;
}

/** Why a file is refused: the model does not take the kind, or (modalities unknown) it is not loaded yet. */
function refusal(name: string, kind: "images" | "audio", modalities: Modalities | null | undefined, model: string): string {
  if (!modalities) return `${name}: ${model} is not loaded, so whether it takes ${kind} is not known yet; load it first`;
  return `${name}: ${model} does not take ${kind}`;
}

/**
 * A warning when a conversation (the messages of its branch) holds images or audio the model
 * cannot take: the server would refuse the request. Null when there is nothing to warn about.
 */
export function conversationMediaWarning(path: Message[], modalities: Modalities | null | undefined, model = "This model"): string | null {
  const kinds = new Set(path.flatMap((m) => (m.attachments ?? []).map((a) => a.kind)));
  const missing: string[] = [];
  if (kinds.has("image") && !modalities?.vision) missing.push("see the images");
  if (kinds.has("audio") && !modalities?.audio) missing.push("hear the audio");
  if (missing.length === 0) return null;
  return `${model} cannot ${missing.join(" or ")} in this conversation: pick a model that can, or start a new chat.`;
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
