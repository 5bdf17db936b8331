import { ChatStream, EventReader, type ChatCompletionChunk } from "@wgpu-llama/client";
import { describe, expect, it } from "vitest";

import { follow, type StreamHooks } from "../src/lib/stream";
import type { Message } from "../src/lib/types";

const encoder = new TextEncoder();

function chunk(delta: ChatCompletionChunk["choices"][number]["delta"], extra: Partial<ChatCompletionChunk> = {}): string {
  const c: ChatCompletionChunk = {
    id: "x",
    object: "chat.completion.chunk",
    created: 1,
    model: "m",
    system_fingerprint: "f",
    choices: [{ index: 0, finish_reason: null, delta }],
    ...extra,
  };
  return `data: ${JSON.stringify(c)}\n\n`;
}

const timings = { cache_n: 0, prompt_n: 5, prompt_ms: 1, prompt_per_token_ms: 1, prompt_per_second: 1, predicted_n: 3, predicted_ms: 1, predicted_per_token_ms: 1, predicted_per_second: 42 };
const events = [
  chunk({ role: "assistant", content: null }),
  chunk({ reasoning_content: "think" }),
  chunk({ content: "Once" }),
  chunk({ tool_calls: [{ index: 0, id: "t", type: "function", function: { name: "get", arguments: '{"a":' } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: "1}" } }] }),
  chunk({ content: " upon" }),
  chunk({}, { timings }),
  "data: [DONE]\n\n",
];
const whole = encoder.encode(events.join(""));

function streamOf(bytes: Uint8Array, offset = 0): ChatStream {
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (let i = 0; i < bytes.length; i += 7) c.enqueue(bytes.subarray(i, i + 7));
      c.close();
    },
  });
  return new ChatStream(new EventReader(body, offset));
}

function newReply(): Message {
  return { id: "r", convId: "c", parent: "u", role: "assistant", content: "", createdAt: 0, state: "streaming", streamId: "s1", offset: 0 };
}

function hooks(resumeFrom: (offset: number) => ChatStream) {
  const stored: Message[] = [];
  const resumed: number[] = [];
  const h: StreamHooks = {
    update: () => {},
    persist: async (m) => void stored.push(m),
    resume: async (_id, offset) => {
      resumed.push(offset);
      return resumeFrom(offset);
    },
  };
  return { h, stored, resumed };
}

describe("follow", () => {
  it("folds content, reasoning, tool calls and timings in, and ends done with the stream's byte count", async () => {
    const m = newReply();
    const { h, stored } = hooks(() => {
      throw new Error("no resume expected");
    });
    await follow(Promise.resolve(streamOf(whole)), m, new AbortController().signal, h);
    expect(m.content).toBe("Once upon");
    expect(m.reasoning).toBe("think");
    expect(m.toolCalls).toEqual([{ id: "t", name: "get", arguments: '{"a":1}' }]);
    expect(m.timings?.predicted_per_second).toBe(42);
    expect(m.state).toBe("done");
    expect(m.offset).toBe(whole.length);
    expect(stored.at(-1)).toEqual(m);
    expect(stored.at(-1)).not.toBe(m); // a copy, not the live object
  });

  it("stores text and offset together, so resuming from a stored state rebuilds the reply exactly", async () => {
    const m = newReply();
    const { h, stored } = hooks(() => streamOf(new Uint8Array()));
    await follow(Promise.resolve(streamOf(whole)), m, new AbortController().signal, h);
    const midway = stored.filter((s) => s.state === "streaming");
    expect(midway.length).toBeGreaterThan(0);
    for (const saved of midway) {
      const again: Message = { ...saved, state: "streaming" };
      await follow(Promise.resolve(streamOf(whole.subarray(saved.offset!), saved.offset)), again, new AbortController().signal, hooks(() => streamOf(new Uint8Array())).h);
      expect(again.content).toBe("Once upon");
      expect(again.offset).toBe(whole.length);
    }
  });

  it("follows a dropped connection again from the offset received", async () => {
    const cut = encoder.encode(events.slice(0, 3).join("")).length + 10; // inside the 4th event
    const m = newReply();
    const { h, resumed } = hooks((offset) => streamOf(whole.subarray(offset), offset));
    await follow(Promise.resolve(streamOf(whole.subarray(0, cut))), m, new AbortController().signal, h);
    expect(resumed).toEqual([encoder.encode(events.slice(0, 3).join("")).length]);
    expect(m.content).toBe("Once upon");
    expect(m.state).toBe("done");
  });

  it("ends stopped when aborted and error on an error event", async () => {
    const controller = new AbortController();
    const m = newReply();
    let pulls = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        if (pulls++ === 0) return c.enqueue(encoder.encode(events[2]!));
        controller.abort();
        c.error(new DOMException("aborted", "AbortError"));
      },
    });
    await follow(Promise.resolve(new ChatStream(new EventReader(body))), m, controller.signal, hooks(() => streamOf(new Uint8Array())).h);
    expect(m.state).toBe("stopped");
    expect(m.content).toBe("Once");

    const failed = newReply();
    const err = encoder.encode(events[2]! + `data: ${JSON.stringify({ error: { code: 500, message: "device lost", type: "server_error" } })}\n\n`);
    await follow(Promise.resolve(streamOf(err)), failed, new AbortController().signal, hooks(() => streamOf(new Uint8Array())).h);
    expect(failed.state).toBe("error");
    expect(failed.error).toBe("device lost");
  });
});
