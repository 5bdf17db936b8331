// The one way the UI reaches the server: @wgpu-llama/client, with the API key as a Bearer header
// and a prompt for the key whenever the server answers 401.
import { ApiError, WgpuLlama } from "@wgpu-llama/client";

import type { Props } from "./types";

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
  props(): Promise<Props> {
    return this.call(async (c) => unwrap(await c.api.GET("/props")));
  }

  slots(): Promise<SlotInfo[]> {
    return this.call(async (c) => unwrap(await c.api.GET("/slots", { params: { query: {} } })));
  }
}

function unwrap<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (r.response.ok && r.data !== undefined) return r.data;
  const e = r.error as { error?: { code: number; message: string; type: string } } | undefined;
  throw new ApiError(r.response.status, e?.error ?? { code: r.response.status, message: r.response.statusText, type: "unknown_error" });
}
