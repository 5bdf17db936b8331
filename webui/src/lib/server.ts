// The one way the UI reaches the server: @wgpu-llama/client, with the API key as a Bearer header
// and a prompt for the key whenever the server answers 401.
import { ApiError, EventReader, WgpuLlama } from "@wgpu-llama/client";
import type { Client } from "openapi-fetch";

import type { LoraAdapter } from "./settings";
import type { ToolInfo, ToolPaths, ToolResult } from "./tools";
import type { ModelsEvent, Props, RouterModelList, RouterPaths, RouterProps } from "./types";

type SlotInfo = import("@wgpu-llama/client").components["schemas"]["SlotInfo"];

export class Server {
  client: WgpuLlama;
  #key: string;

  /**
   * askKey is called when the server refuses the key (401); it resolves with a new key, which
   * is used and handed to saveKey, and the call is tried again.
   */
  constructor(
    key: string,
    private readonly askKey: () => Promise<string>,
    private readonly saveKey: (key: string) => void,
    private readonly baseUrl = location.origin,
  ) {
    this.#key = key;
    this.client = this.#build();
  }

  setKey(key: string): void {
    this.#key = key;
    this.client = this.#build();
  }

  #build(): WgpuLlama {
    return new WgpuLlama({ baseUrl: this.baseUrl, headers: this.#key ? { Authorization: `Bearer ${this.#key}` } : {} });
  }

  /** Runs fn with the client, asking for the API key and trying again while it answers 401. */
  async call<T>(fn: (c: WgpuLlama) => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await fn(this.client);
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 401) throw e;
        const key = await this.askKey();
        this.setKey(key);
        this.saveKey(key);
      }
    }
  }

  /** Whether the model is loaded: GET /health answers 503 until it is. */
  async ready(): Promise<boolean> {
    try {
      await this.client.health();
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.status === 503) return false;
      throw e;
    }
  }

  // The client has no methods for /props and /slots; its typed openapi-fetch client covers them.
  props(): Promise<Props & RouterProps> {
    return this.call(async (c) => unwrap(await c.api.GET("/props")));
  }

  /** GET /props?model=id: a router's answer for one of its models (it must be loaded). */
  modelProps(model: string): Promise<Props> {
    return this.call(async (c) => unwrap(await router(c).GET("/props", { params: { query: { model, autoload: false } } })));
  }

  /** GET /v1/models with llama-server's router fields (status, architecture) where the server has them. */
  listModels(): Promise<RouterModelList> {
    return this.call(async (c) => unwrap(await router(c).GET("/v1/models")));
  }

  /** POST /models/load: answers once the load has started; /models/sse tells when it is done. */
  async loadModel(model: string): Promise<void> {
    await this.call(async (c) => unwrap(await router(c).POST("/models/load", { body: { model } })));
  }

  async unloadModel(model: string): Promise<void> {
    await this.call(async (c) => unwrap(await router(c).POST("/models/unload", { body: { model } })));
  }

  /** GET /models/sse: the router's model events, until signal aborts or the server closes the stream. */
  async *modelEvents(signal: AbortSignal): AsyncGenerator<ModelsEvent> {
    const body = await this.call(async (c) =>
      unwrap(await router(c).GET("/models/sse", { parseAs: "stream", signal })),
    );
    for await (const payload of new EventReader(body as ReadableStream<Uint8Array>)) {
      let event: unknown;
      try {
        event = JSON.parse(payload);
      } catch {
        continue; // not an event this UI knows
      }
      if (event && typeof event === "object" && "model" in event && "event" in event) yield event as ModelsEvent;
    }
  }

  /** GET /tools: the server's tools, or null when it offers none (403: started without --tools or MCP servers). */
  async listTools(): Promise<ToolInfo[] | null> {
    try {
      return await this.call(async (c) => unwrap(await tools(c).GET("/tools")));
    } catch (e) {
      if (e instanceof ApiError && (e.status === 403 || e.status === 404)) return null;
      throw e;
    }
  }

  /** POST /tools: runs one tool; a result with "error" is the tool's own failure. */
  runTool(tool: string, params: Record<string, unknown>): Promise<ToolResult> {
    return this.call(async (c) => unwrap(await tools(c).POST("/tools", { body: { tool, params } })));
  }

  /** GET /lora-adapters: the LoRA adapters the model was started with, and their global scales. */
  loraAdapters(): Promise<LoraAdapter[]> {
    return this.call(async (c) => unwrap(await c.api.GET("/lora-adapters")));
  }

  slots(): Promise<SlotInfo[]> {
    return this.call(async (c) => unwrap(await c.api.GET("/slots", { params: { query: {} } })));
  }
}

/** The client's openapi-fetch instance, typed for the tool routes the spec does not cover. */
function tools(c: WgpuLlama): Client<ToolPaths, "application/json"> {
  return c.api as unknown as Client<ToolPaths, "application/json">;
}

/** The client's openapi-fetch instance, typed for the router routes the spec does not cover yet. */
function router(c: WgpuLlama): Client<RouterPaths, "application/json"> {
  return c.api as unknown as Client<RouterPaths, "application/json">;
}

function unwrap<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (r.response.ok && r.data !== undefined) return r.data;
  const e = r.error as { error?: { code: number; message: string; type: string } } | undefined;
  throw new ApiError(r.response.status, e?.error ?? { code: r.response.status, message: r.response.statusText, type: "unknown_error" });
}
