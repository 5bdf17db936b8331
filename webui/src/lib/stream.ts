// Running an assistant message's stream: folding chunks in, keeping the byte offset with the
// text it produced (stored together, so a reload resumes exactly where the stored text ends),
// and following a dropped connection again from that offset.
import { ApiError, type ChatStream } from "@wgpu-llama/client";

import { applyChunk, snapshot } from "./reply";
import type { Message } from "./types";

export interface StreamHooks {
  /** Shows the message as it is now (called after each chunk). */
  update(m: Message): void;
  /** Stores a copy of the message. */
  persist(m: Message): Promise<void>;
  /** Reattaches from an offset, for a connection that ended before [DONE]. */
  resume(streamId: string, offset: number, signal: AbortSignal): Promise<ChatStream>;
}

/** How often the streaming message is stored, at most. */
export const PERSIST_INTERVAL_MS = 200;
const MAX_RESUMES = 3;

/**
 * Reads stream into m until the completion is whole, the signal aborts (m ends "stopped"), or
 * it fails (m ends "error"). Every state m passes through is stored, the last one always.
 */
export async function follow(first: Promise<ChatStream>, m: Message, signal: AbortSignal, hooks: StreamHooks): Promise<void> {
  let lastPersist = 0;
  let resumes = 0;
  try {
    let stream = await first;
    for (;;) {
      for await (const chunk of stream) {
        applyChunk(m, chunk);
        m.offset = stream.offset;
        hooks.update(m);
        const now = Date.now();
        if (now - lastPersist >= PERSIST_INTERVAL_MS) {
          lastPersist = now;
          void hooks.persist(snapshot(m));
        }
      }
      m.offset = stream.offset;
      if (stream.done) {
        m.state = "done";
        break;
      }
      if (signal.aborted) throw signal.reason;
      // The connection ended early: the generation goes on server-side, follow it again.
      if (!m.streamId || ++resumes > MAX_RESUMES) throw new Error("the connection ended before the reply was complete");
      stream = await hooks.resume(m.streamId, m.offset, signal);
    }
  } catch (e) {
    if (signal.aborted) {
      m.state = "stopped";
    } else {
      m.state = "error";
      m.error = errorText(e);
    }
  }
  hooks.update(m);
  await hooks.persist(snapshot(m));
}

export function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.body.message || e.message;
  if (e instanceof Error) return e.message;
  return String(e);
}
