// The model selector's logic against a fake router: listing, /models/sse updates, loading,
// per-conversation models and the attachment checks.
import { afterEach, describe, expect, it, vi } from "vitest";

import { conversationMediaWarning, readAttachment, refusedAttachments } from "../src/lib/attachments";
import { ChatState } from "../src/lib/chat.svelte";
import { ChatDatabase } from "../src/lib/db";
import { applyEvent, LAST_MODEL_KEY, ModelsState, parseModelList, progressFraction, type ModelInfo } from "../src/lib/models.svelte";
import { Server } from "../src/lib/server";
import { defaultSettings } from "../src/lib/settings";
import type { Message, ModelsEvent, RouterModelEntry } from "../src/lib/types";

const BASE = "http://router.test";
const encoder = new TextEncoder();

/** A fake llama-server router: its models, the requests it got, and a /models/sse stream to push events into. */
class FakeRouter {
  requests: { method: string; path: string; query: URLSearchParams; body: unknown }[] = [];
  sse: ReadableStreamDefaultController<Uint8Array> | null = null;
  sseStatus = 200;
  modalities: Record<string, { vision: boolean; audio: boolean }> = {};
  chatReplies = 0;

  constructor(public models: RouterModelEntry[]) {}

  push(ev: ModelsEvent): void {
    this.sse?.enqueue(encoder.encode(`data: ${JSON.stringify(ev)}\n\n`));
  }

  setStatus(id: string, value: string): void {
    this.models = this.models.map((m) => (m.id === id ? { ...m, status: { ...m.status, value } } : m));
  }

  fetch = async (input: Request): Promise<Response> => {
    const url = new URL(input.url);
    const text = input.method === "GET" ? "" : await input.text();
    const body = text ? JSON.parse(text) : undefined;
    this.requests.push({ method: input.method, path: url.pathname, query: url.searchParams, body });
    const json = (v: unknown, status = 200) => new Response(JSON.stringify(v), { status, headers: { "Content-Type": "application/json" } });
    switch (`${input.method} ${url.pathname}`) {
      case "GET /v1/models":
        return json({ object: "list", data: this.models });
      case "POST /models/load":
        this.setStatus(body.model, "loading");
        return json({ success: true });
      case "POST /models/unload":
        return json({ success: true });
      case "GET /models/sse": {
        if (this.sseStatus !== 200) return json({ error: { code: this.sseStatus, message: "File Not Found", type: "not_found_error" } }, this.sseStatus);
        const stream = new ReadableStream<Uint8Array>({ start: (c) => void (this.sse = c) });
        return new Response(stream, { headers: { "Content-Type": "text/event-stream" } });
      }
      case "GET /props": {
        const model = url.searchParams.get("model");
        if (!model) return json({ role: "router", max_instances: 4, models_autoload: true, build_info: "b1" });
        return json({ model_alias: model, model_path: `/m/${model}.gguf`, modalities: { vision: false, audio: false, video: false, ...this.modalities[model] }, default_generation_settings: { n_ctx: 256, params: {} } });
      }
      case "POST /v1/chat/completions": {
        this.chatReplies++;
        const chunk = { id: "x", object: "chat.completion.chunk", created: 1, model: body.model ?? "m", system_fingerprint: "f", choices: [{ index: 0, finish_reason: null, delta: { content: "Hi" } }] };
        return new Response(`data: ${JSON.stringify(chunk)}\n\ndata: [DONE]\n\n`, { headers: { "Content-Type": "text/event-stream" } });
      }
    }
    return json({ error: { code: 404, message: "File Not Found", type: "not_found_error" } }, 404);
  };
}

function entry(id: string, value: string, extra: Partial<RouterModelEntry> = {}): RouterModelEntry {
  return { id, object: "model", owned_by: "llamacpp", created: 1, status: { value, args: [] }, ...extra };
}

function memoryStorage(init: Record<string, string> = {}) {
  const m = new Map(Object.entries(init));
  return { getItem: (k: string) => m.get(k) ?? null, setItem: (k: string, v: string) => void m.set(k, v) };
}

function setup(models: RouterModelEntry[], storage = memoryStorage()) {
  const fake = new FakeRouter(models);
  vi.stubGlobal("fetch", fake.fetch);
  const server = new Server("", () => Promise.reject(new Error("no key")), () => {}, BASE);
  return { fake, server, state: new ModelsState(server, storage), storage };
}

/** Waits until fn holds, letting the fake server's promises run. */
async function until(fn: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (fn()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

afterEach(() => vi.unstubAllGlobals());

describe("the model list", () => {
  it("parses a router's list: statuses, a failed load, input modalities", () => {
    const { router, models } = parseModelList({
      object: "list",
      data: [
        entry("stories260K", "loaded"),
        entry("tiny", "unloaded", { status: { value: "unloaded", exit_code: 1, failed: true } }),
        entry("vision", "loading", { status: { value: "loading", progress: 0.25 }, architecture: { input_modalities: ["text", "image"] } }),
        entry("asleep", "sleeping"),
      ],
    });
    expect(router).toBe(true);
    expect(models).toEqual<ModelInfo[]>([
      { id: "stories260K", status: "loaded", progress: null, input: null },
      { id: "tiny", status: "failed", progress: null, input: null },
      { id: "vision", status: "loading", progress: 0.25, input: { vision: true, audio: false } },
      { id: "asleep", status: "sleeping", progress: null, input: null },
    ]);
  });

  it("takes a single-model server's list (no status) as one loaded model", () => {
    const { router, models } = parseModelList({ object: "list", data: [{ id: "stories260K.gguf", object: "model" }] });
    expect(router).toBe(false);
    expect(models).toEqual([{ id: "stories260K.gguf", status: "loaded", progress: null, input: null }]);
  });

  it("reads progress as a fraction, a percentage, {done,total} or per-file counts", () => {
    expect(progressFraction(0.5)).toBe(0.5);
    expect(progressFraction(40)).toBe(0.4);
    expect(progressFraction({ done: 1, total: 4 })).toBe(0.25);
    expect(progressFraction({ progress: { "https://a/x.gguf": { done: 30, total: 100 }, "https://a/y.gguf": { done: 10, total: 100 } } })).toBe(0.2);
    expect(progressFraction(undefined)).toBeNull();
    expect(progressFraction({ done: 0, total: 0 })).toBeNull();
  });
});

describe("/models/sse events", () => {
  const base: ModelInfo[] = [
    { id: "a", status: "unloaded", progress: null, input: null },
    { id: "b", status: "loaded", progress: null, input: null },
  ];

  it("update a model's status and progress", () => {
    let m = applyEvent(base, { model: "a", event: "status_change", data: { status: "loading", progress: 0.3 } });
    expect(m).not.toBe("reload");
    m = m as ModelInfo[];
    expect(m[0]).toMatchObject({ status: "loading", progress: 0.3 });
    // A later loading event without progress keeps the last figure.
    m = applyEvent(m, { model: "a", event: "status_change", data: { status: "loading" } }) as ModelInfo[];
    expect(m[0]!.progress).toBe(0.3);
    m = applyEvent(m, { model: "a", event: "status_change", data: { status: "loaded" } }) as ModelInfo[];
    expect(m[0]).toMatchObject({ status: "loaded", progress: null });
    m = applyEvent(m, { model: "b", event: "status_change", data: { status: "unloaded", exit_code: 137 } }) as ModelInfo[];
    expect(m[1]).toMatchObject({ status: "failed" });
    m = applyEvent(m, { model: "b", event: "status_change", data: { status: "unloaded", exit_code: 0 } }) as ModelInfo[];
    expect(m[1]).toMatchObject({ status: "unloaded" });
  });

  it("show download progress and ask for the list again when models come or go", () => {
    const m = applyEvent(base, { model: "a", event: "download_progress", data: { progress: { "u": { done: 5, total: 10 } } } }) as ModelInfo[];
    expect(m[0]).toMatchObject({ status: "downloading", progress: 0.5 });
    expect(applyEvent(base, { model: "new/model:Q8_0", event: "download_finished" })).toBe("reload");
    expect(applyEvent(base, { model: "*", event: "models_reload" })).toBe("reload");
    expect(applyEvent(base, { model: "a", event: "model_remove" })).toBe("reload");
    expect(applyEvent(base, { model: "unknown", event: "status_change", data: { status: "loaded" } })).toBe("reload");
    expect(applyEvent(base, { model: "a", event: "something_else" })).toBe(base);
  });

  it("keep the state live while followed", async () => {
    const { fake, state } = setup([entry("a", "unloaded"), entry("b", "loaded")]);
    await state.refresh();
    const stop = state.follow();
    await until(() => fake.sse !== null && state.live, "the SSE connection");
    fake.push({ model: "a", event: "status_change", data: { status: "loading", progress: 0.6 } });
    await until(() => state.models[0]!.status === "loading", "a loading");
    expect(state.models[0]!.progress).toBe(0.6);
    fake.push({ model: "b", event: "status_change", data: { status: "sleeping" } });
    await until(() => state.models[1]!.status === "sleeping", "b asleep");
    stop();
  });

  it("fall back to polling /v1/models when /models/sse is not there", async () => {
    const { fake, state } = setup([entry("a", "unloaded")]);
    fake.sseStatus = 404;
    await state.refresh();
    const stop = state.follow(10);
    fake.setStatus("a", "loaded");
    await until(() => state.models[0]!.status === "loaded", "the poll to see a loaded");
    expect(state.live).toBe(false);
    expect(state.error).toBe(""); // no stream is no error to show
    stop();
  });
});

describe("loading and unloading", () => {
  it("picking an unloaded model loads it, shows progress, then fetches its /props", async () => {
    const { fake, state, storage } = setup([entry("a", "loaded"), entry("b", "unloaded")]);
    await state.refresh();
    expect(state.router).toBe(true);
    expect(state.selected).toBe("a"); // nothing remembered: the first loaded one
    const stop = state.follow();
    await until(() => fake.sse !== null, "the SSE connection");
    fake.modalities.b = { vision: true, audio: false };

    let done = false;
    const picking = state.select("b").then(() => (done = true));
    await until(() => fake.requests.some((r) => r.path === "/models/load"), "POST /models/load");
    expect(fake.requests.find((r) => r.path === "/models/load")!.body).toEqual({ model: "b" });
    expect(state.selected).toBe("b");
    expect(storage.getItem(LAST_MODEL_KEY)).toBe("b");
    expect(state.current!.status).toBe("loading");

    fake.push({ model: "b", event: "status_change", data: { status: "loading", progress: 0.5 } });
    await until(() => state.current!.progress === 0.5, "progress 0.5");
    expect(done).toBe(false);

    fake.setStatus("b", "loaded");
    fake.push({ model: "b", event: "status_change", data: { status: "loaded" } });
    await picking;
    expect(state.current).toMatchObject({ status: "loaded", progress: null });
    await until(() => state.currentProps !== null, "b's /props");
    const props = fake.requests.find((r) => r.path === "/props" && r.query.get("model") === "b");
    expect(props).toBeDefined();
    expect(state.modalities()).toEqual({ vision: true, audio: false });
    stop();
  });

  it("a load that fails rejects and says so", async () => {
    const { fake, state } = setup([entry("a", "unloaded")]);
    await state.refresh();
    const stop = state.follow();
    await until(() => fake.sse !== null, "the SSE connection");
    const loading = state.load("a");
    await until(() => fake.requests.some((r) => r.path === "/models/load"), "POST /models/load");
    fake.push({ model: "a", event: "status_change", data: { status: "unloaded", exit_code: 1 } });
    await expect(loading).rejects.toThrow("a failed to load");
    expect(state.current!.status).toBe("failed");
    expect(state.error).toBe("a failed to load");
    stop();
  });

  it("unloads a model and drops its /props", async () => {
    const { fake, state } = setup([entry("a", "loaded")]);
    await state.refresh();
    await until(() => state.currentProps !== null, "a's /props");
    const stop = state.follow();
    await until(() => fake.sse !== null, "the SSE connection");
    const unloading = state.unload("a");
    await until(() => fake.requests.some((r) => r.path === "/models/unload"), "POST /models/unload");
    expect(fake.requests.find((r) => r.path === "/models/unload")!.body).toEqual({ model: "a" });
    fake.push({ model: "a", event: "status_change", data: { status: "unloaded", exit_code: 0 } });
    await unloading;
    expect(state.current!.status).toBe("unloaded");
    expect(state.currentProps).toBeNull();
    stop();
  });

  it("picks the last model picked, and a single-model server's one model read-only", async () => {
    let s = setup([entry("a", "loaded"), entry("b", "unloaded")], memoryStorage({ [LAST_MODEL_KEY]: "b" }));
    await s.state.refresh();
    expect(s.state.selected).toBe("b");

    s = setup([]);
    s.fake.models = [{ id: "stories260K.gguf", object: "model" }];
    await s.state.refresh();
    expect(s.state.router).toBe(false);
    expect(s.state.selected).toBe("stories260K.gguf");
    // Picking does not load anything, and there is no stream to follow.
    await s.state.select("stories260K.gguf");
    s.state.follow()();
    expect(s.fake.requests.map((r) => r.path)).toEqual(["/v1/models"]);
  });
});

describe("per-conversation models", () => {
  it("sends the picked model, stores it with the conversation, and follows a change", async () => {
    const { fake, server, state } = setup([entry("a", "loaded"), entry("b", "loaded")]);
    await state.refresh();
    const db = new ChatDatabase(`models-test-${Math.random()}`);
    const chat = new ChatState(db, server, () => defaultSettings(), () => null, () => undefined, () => state.selected || undefined);

    await state.select("a");
    await chat.send("Hello");
    await until(() => chat.path.at(-1)?.state === "done", "the first reply");
    const chats = () => fake.requests.filter((r) => r.path === "/v1/chat/completions");
    expect((chats()[0]!.body as { model: string }).model).toBe("a");
    const convId = chat.current!.id;
    expect((await db.conversations.get(convId))!.model).toBe("a");

    // Another model picked for this conversation: stored, and the next request names it.
    await state.select("b");
    await chat.setModel("b");
    expect((await db.conversations.get(convId))!.model).toBe("b");
    await chat.send("Again");
    await until(() => chats().length === 2 && chat.path.at(-1)?.state === "done", "the second reply");
    expect((chats()[1]!.body as { model: string }).model).toBe("b");

    // A new chat takes the model picked last.
    chat.newChat();
    await state.select("a");
    await chat.send("New");
    await until(() => chats().length === 3, "the third request");
    expect(chat.current!.id).not.toBe(convId);
    expect(chat.current!.model).toBe("a");
    expect((chats()[2]!.body as { model: string }).model).toBe("a");
    db.close();
  });

  it("a single-model server's requests name no model", async () => {
    const { fake, server } = setup([]);
    fake.models = [{ id: "stories260K.gguf", object: "model" }];
    const db = new ChatDatabase(`models-test-${Math.random()}`);
    const chat = new ChatState(db, server, () => defaultSettings(), () => null, () => undefined);
    await chat.send("Hello");
    await until(() => chat.path.at(-1)?.state === "done", "the reply");
    const req = fake.requests.find((r) => r.path === "/v1/chat/completions")!;
    expect(req.body).not.toHaveProperty("model");
    expect((await db.conversations.get(chat.current!.id))!.model).toBeUndefined();
    db.close();
  });
});

describe("attachments and the model", () => {
  const image = { name: "cat.png", kind: "image" as const, data: "data:image/png;base64,AAAA" };
  const audio = { name: "hi.wav", kind: "audio" as const, data: "data:audio/wav;base64,AAAA" };
  const text = { name: "a.txt", kind: "text" as const, data: "hello" };
  const msg = (attachments: Message["attachments"]): Message => ({ id: "m", convId: "c", parent: null, role: "user", content: "look", createdAt: 0, attachments });

  it("refuses images and audio the picked model cannot take", async () => {
    expect(refusedAttachments([text, image, audio], { vision: false, audio: false }, "stories260K")).toEqual([
      "cat.png: stories260K does not take images",
      "hi.wav: stories260K does not take audio",
    ]);
    expect(refusedAttachments([text, image], { vision: true, audio: false })).toEqual([]);
    expect(refusedAttachments([image], null, "tiny")).toEqual(["cat.png: tiny is not loaded, so whether it takes images is not known yet; load it first"]);
    const file = new File([new Uint8Array([1, 2, 3])], "cat.png", { type: "image/png" });
    expect(await readAttachment(file, { vision: false, audio: false }, "tiny")).toBe("cat.png: tiny does not take images");
    expect(await readAttachment(file, { vision: true, audio: false }, "tiny")).toMatchObject({ kind: "image", name: "cat.png" });
  });

  it("warns when a conversation holds images the model cannot see", () => {
    const path = [msg([image]), msg(undefined)];
    expect(conversationMediaWarning(path, { vision: false, audio: false }, "tiny")).toBe(
      "tiny cannot see the images in this conversation: pick a model that can, or start a new chat.",
    );
    expect(conversationMediaWarning(path, { vision: true, audio: false }, "tiny")).toBeNull();
    expect(conversationMediaWarning([msg([image, audio])], null, "tiny")).toBe(
      "tiny cannot see the images or hear the audio in this conversation: pick a model that can, or start a new chat.",
    );
    expect(conversationMediaWarning([msg([text])], { vision: false, audio: false })).toBeNull();
  });

  it("uses the listing's input modalities until the model's /props are known", async () => {
    const { state } = setup([entry("v", "unloaded", { architecture: { input_modalities: ["text", "image"] } }), entry("t", "unloaded")]);
    await state.refresh();
    expect(state.modalities("v")).toEqual({ vision: true, audio: false });
    expect(state.modalities("t")).toBeNull();
  });
});
