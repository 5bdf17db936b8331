// Building the chat request for a branch of a conversation.
import type { ChatCompletionRequest, ChatMessage } from "@wgpu-llama/client";

import { changedSampling, loraField, type LoraAdapter, type Sampling, type Settings } from "./settings";
import type { Attachment, Message } from "./types";

/** Every generation asks for the 5 most likely tokens at each step, for the token view. */
export const N_PROBS = 5;

export function buildChatRequest(
  path: Message[],
  settings: Settings,
  defaults: Sampling | null,
  tools: ChatCompletionRequest["tools"] = [],
  adapters: LoraAdapter[] = [],
): ChatCompletionRequest {
  const messages: ChatMessage[] = [];
  if (settings.systemPrompt.trim()) messages.push({ role: "system", content: settings.systemPrompt });
  for (const m of path) messages.push(toChatMessage(m));
  const sampling = defaults ? changedSampling(settings.sampling, defaults) : settings.sampling;
  const lora = loraField(settings.lora ?? {}, adapters);
  return { messages, stream: true, n_probs: N_PROBS, ...sampling, ...(tools?.length ? { tools } : {}), ...(lora ? { lora } : {}) };
}

/**
 * A stored message as the API takes it. Text files become fenced blocks after the text; images
 * and audio become OpenAI content parts (offered only when /props lists the modality).
 */
export function toChatMessage(m: Message): ChatMessage {
  if (m.role === "tool") return { role: "tool", content: m.content, tool_call_id: m.toolCallId ?? null, name: m.toolName ?? null };
  if (m.role === "assistant" && m.toolCalls?.length) {
    return {
      role: "assistant",
      content: m.content || null,
      tool_calls: m.toolCalls.map((c) => ({ id: c.id ?? null, type: "function", function: { name: c.name, arguments: c.arguments } })),
    };
  }
  const files = m.attachments ?? [];
  const text = [m.content, ...files.filter((a) => a.kind === "text").map(fencedFile)].filter((s) => s !== "").join("\n\n");
  const media = files.filter((a) => a.kind !== "text");
  if (media.length === 0) return { role: m.role, content: text };
  const parts: unknown[] = [{ type: "text", text }, ...media.map(mediaPart)];
  // The schema lists only text parts; image_url and input_audio are OpenAI's shapes, which a
  // multimodal server accepts (see the report on API gaps).
  return { role: m.role, content: parts as ChatMessage["content"] };
}

/** A file's text in a fence longer than any run of backticks inside it, after its name. */
export function fencedFile(a: Attachment): string {
  const longest = Math.max(2, ...[...a.data.matchAll(/`+/g)].map((x) => x[0].length));
  const fence = "`".repeat(longest + 1);
  return `${a.name}:\n${fence}\n${a.data.replace(/\n$/, "")}\n${fence}`;
}

function mediaPart(a: Attachment): unknown {
  if (a.kind === "image") return { type: "image_url", image_url: { url: a.data } };
  // input_audio takes bare base64 and a format (wav, mp3) instead of a data: URL.
  const [, mime = "", b64 = ""] = /^data:([^;,]*)(?:;[^,]*)?,(.*)$/s.exec(a.data) ?? [];
  return { type: "input_audio", input_audio: { data: b64, format: mime.includes("mpeg") || mime.includes("mp3") ? "mp3" : "wav" } };
}
