// Folding a chat stream's chunks into the assistant message they build.
import type { ChatCompletionChunk } from "@wgpu-llama/client";

import type { Message } from "./types";

/** Adds one chunk's content, reasoning, tool call pieces, token probabilities and timings to m. */
export function applyChunk(m: Message, chunk: ChatCompletionChunk): void {
  if (chunk.timings) m.timings = chunk.timings;
  const choice = chunk.choices[0];
  if (!choice) return;
  const d = choice.delta;
  if (d.content) m.content += d.content;
  if (d.reasoning_content) m.reasoning = (m.reasoning ?? "") + d.reasoning_content;
  for (const t of d.tool_calls ?? []) {
    // New objects, not edits: the view compares a call with the one it showed.
    const calls = [...(m.toolCalls ?? [])];
    const call = { ...(calls[t.index] ?? { name: "", arguments: "" }) };
    if (t.id) call.id = t.id;
    if (t.function.name) call.name += t.function.name;
    call.arguments += t.function.arguments ?? "";
    calls[t.index] = call;
    m.toolCalls = calls;
  }
  if (choice.logprobs?.content.length) (m.tokens ??= []).push(...choice.logprobs.content);
}

/** A deep copy to store: the live message goes on changing while the write is queued. */
export function snapshot(m: Message): Message {
  return JSON.parse(JSON.stringify(m)) as Message;
}
