// Tests of the wrapper against a fake fetch that answers as the server does.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ApiError, EventReader, WgpuLlama, type ChatCompletionChunk } from "../src/client.js";

const encoder = new TextEncoder();

/** A body that delivers bytes in the pieces given. */
function body(...pieces: (string | Uint8Array)[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      for (const p of pieces) {
        c.enqueue(typeof p === "string" ? encoder.encode(p) : p);
      }
      c.close();
    },
  });
}

/** Splits s's bytes into pieces of n bytes (cutting through characters). */
function pieces(s: string, n: number): Uint8Array[] {
  const b = encoder.encode(s);
  const out: Uint8Array[] = [];
  for (let i = 0; i < b.length; i += n) {
    out.push(b.subarray(i, i + n));
  }
  return out;
}

function chunk(content: string | null, role?: string): ChatCompletionChunk {
  return {
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    created: 1,
    model: "stories260K",
    system_fingerprint: "wgpu-llama",
    choices: [{ index: 0, finish_reason: null, delta: role ? { role, content } : { content } }],
  };
}

const events = [chunk(null, "assistant"), chunk(", there"), chunk(" was a ✨")].map((c) => `data: ${JSON.stringify(c)}\n\n`);
const stream = events.join("") + "data: [DONE]\n\n";
const byteLength = (s: string) => encoder.encode(s).length;

/** A fake fetch: records each request and answers with respond's Response. */
function fakeServer(respond: (req: Request) => Response | Promise<Response>) {
  const requests: Request[] = [];
  const client = new WgpuLlama({
    baseUrl: "http://llama.test",
    fetch: async (req) => {
      requests.push(req.clone());
      return respond(req);
    },
  });
  return { client, requests };
}

const sse = (b: ReadableStream<Uint8Array>) => new Response(b, { headers: { "Content-Type": "text/event-stream" } });
const json = (v: unknown, status = 200) =>
  new Response(JSON.stringify(v), { status, headers: { "Content-Type": "application/json; charset=utf-8" } });

async function contentOf(s: AsyncIterable<ChatCompletionChunk>): Promise<string> {
  let text = "";
  for await (const c of s) {
    text += c.choices[0]?.delta.content ?? "";
  }
  return text;
}

describe("EventReader", () => {
  it("splits events delivered in small pieces and counts their bytes", async () => {
    for (const n of [1, 2, 3, 7, 1000]) {
      const r = new EventReader(body(...pieces(stream, n)), 5);
      const got: string[] = [];
      for await (const e of r) {
        got.push(e);
      }
      assert.equal(got.length, 4, `pieces of ${n}`);
      assert.equal(got[3], "[DONE]");
      assert.deepEqual(JSON.parse(got[2] ?? ""), chunk(" was a ✨"));
      assert.equal(r.offset, 5 + byteLength(stream));
    }
  });

  it("leaves a partial last event out of the offset", async () => {
    const cut = events[0] + (events[1] ?? "").slice(0, 20);
    const r = new EventReader(body(cut));
    const got: string[] = [];
    for await (const e of r) {
      got.push(e);
    }
    assert.equal(got.length, 1);
    assert.equal(r.offset, byteLength(events[0] ?? ""));
  });
});

describe("WgpuLlama", () => {
  it("starts a resumable chat stream", async () => {
    const { client, requests } = fakeServer(() => sse(body(...pieces(stream, 9))));
    const s = await client.chatStream({ messages: [{ role: "user", content: "Hi" }] }, { conversationId: "conv-1" });
    assert.equal(await contentOf(s), ", there was a ✨");
    assert.equal(s.done, true);
    assert.equal(s.offset, byteLength(stream));

    const req = requests[0];
    assert.ok(req);
    assert.equal(req.method, "POST");
    assert.equal(req.url, "http://llama.test/v1/chat/completions");
    assert.equal(req.headers.get("X-Conversation-Id"), "conv-1");
    assert.deepEqual(await req.json(), { messages: [{ role: "user", content: "Hi" }], stream: true });
  });

  it("resumes a dropped stream from its offset without losing or repeating a chunk", async () => {
    const whole = encoder.encode(stream);
    const cutAt = byteLength(events[0] ?? "") + 30; // in the middle of the second event
    const { client, requests } = fakeServer((req) => {
      if (req.method === "POST") {
        return sse(body(whole.subarray(0, cutAt))); // the connection drops here
      }
      const from = Number(new URL(req.url).searchParams.get("from"));
      return sse(body(whole.subarray(from)));
    });
    const first = await client.chatStream({ messages: [{ role: "user", content: "Hi" }] }, { conversationId: "conv-2" });
    const before = await contentOf(first);
    assert.equal(first.done, false);
    assert.equal(first.offset, byteLength(events[0] ?? ""));

    const rest = await client.resumeChat("conv-2", first.offset);
    assert.equal(before + (await contentOf(rest)), ", there was a ✨");
    assert.equal(rest.done, true);
    assert.equal(rest.offset, whole.length);
    assert.equal(requests[1]?.url, `http://llama.test/v1/stream/conv-2?from=${first.offset}`);
    assert.equal(requests[1]?.method, "GET");
  });

  it("throws ApiError for error answers and error events", async () => {
    const conflict = { error: { code: 409, message: 'the stream "c" is still running', type: "conflict_error" } };
    let { client } = fakeServer(() => json(conflict, 409));
    await assert.rejects(client.chatStream({ messages: [] }, { conversationId: "c" }), (e: unknown) => {
      assert.ok(e instanceof ApiError);
      assert.equal(e.status, 409);
      assert.deepEqual(e.body, conflict.error);
      return true;
    });

    const failure = { error: { code: 500, message: "device lost", type: "server_error" } };
    ({ client } = fakeServer(() => sse(body(events[0] ?? "", `data: ${JSON.stringify(failure)}\n\n`))));
    const s = await client.chatStream({ messages: [] });
    await assert.rejects(contentOf(s), (e: unknown) => e instanceof ApiError && e.body.message === "device lost");

    ({ client } = fakeServer(() => new Response("Bad Gateway", { status: 502 })));
    await assert.rejects(client.health(), (e: unknown) => e instanceof ApiError && e.status === 502 && e.body.message === "Bad Gateway");
  });

  it("calls the JSON routes with typed bodies", async () => {
    const status = { id: "conv-1", status: "cancelled", bytes: 120, retained_from: 0 } as const;
    const { client, requests } = fakeServer(async (req) => {
      const path = new URL(req.url).pathname;
      switch (`${req.method} ${path}`) {
        case "POST /v1/streams/lookup":
          return json({ streams: [status] });
        case "DELETE /v1/stream/conv-1":
          return json(status);
        case "POST /detokenize":
          return json({ content: "<s> Once upon a time" });
        case "POST /v1/chat/completions":
          return json({ choices: [{ index: 0, finish_reason: "length", message: { role: "assistant", content: "Once" } }] });
      }
      return json({ error: { code: 404, message: "File Not Found", type: "not_found_error" } }, 404);
    });
    assert.deepEqual(await client.lookupStreams(["conv-1", "unknown"]), [status]);
    assert.deepEqual(await requests[0]?.json(), { ids: ["conv-1", "unknown"] });
    assert.deepEqual(await client.deleteStream("conv-1"), status);
    assert.equal(await client.detokenize([1, 403, 407, 261, 378]), "<s> Once upon a time");
    const chat = await client.chat({ messages: [{ role: "user", content: "Hi" }], max_tokens: 1 });
    assert.equal(chat.choices[0]?.message.content, "Once");
    assert.deepEqual(await requests[3]?.json(), { messages: [{ role: "user", content: "Hi" }], max_tokens: 1, stream: false });
    await assert.rejects(client.models(), (e: unknown) => e instanceof ApiError && e.body.type === "not_found_error");
  });
});
