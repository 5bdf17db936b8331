// A typed client for wgpu-llama's HTTP API. The types come from schema.d.ts, which
// openapi-typescript generates from openapi/openapi.yaml (`just ts-client`); requests go through
// openapi-fetch, so every path, parameter and body is checked against the specification.

import createClient, { type Client } from "openapi-fetch";

import { EventReader } from "./events.js";
import type { components, paths } from "./schema.js";

export type { components, paths } from "./schema.js";
export { EventReader } from "./events.js";

type Schemas = components["schemas"];
export type HealthResponse = Schemas["HealthResponse"];
export type ModelsResponse = Schemas["ModelsResponse"];
export type TokenizeRequest = Schemas["TokenizeRequest"];
export type TokenizeResponse = Schemas["TokenizeResponse"];
export type DetokenizeRequest = Schemas["DetokenizeRequest"];
export type ApplyTemplateRequest = Schemas["ApplyTemplateRequest"];
export type CompletionRequest = Schemas["CompletionRequest"];
export type CompletionResponse = Schemas["CompletionResponse"];
export type ChatMessage = Schemas["ChatMessage"];
export type ChatCompletionRequest = Schemas["ChatCompletionRequest"];
export type ChatCompletionResponse = Schemas["ChatCompletionResponse"];
export type ChatCompletionChunk = Schemas["ChatCompletionChunk"];
export type StreamStatus = Schemas["StreamStatus"];
export type ErrorBody = Schemas["ErrorBody"];

/** An error the server answered, in llama-server's {"error":{"code","message","type"}} shape. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
  ) {
    super(`${status} ${body.type}: ${body.message}`);
    this.name = "ApiError";
  }
}

/** Where the server is, and optionally how to reach it. */
export interface ClientOptions {
  /** The server's root URL, e.g. "http://127.0.0.1:8080". */
  baseUrl: string;
  /** Replaces globalThis.fetch (tests, proxies). */
  fetch?: (input: Request) => Promise<Response>;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
}

/** What starting or resuming a stream may take. */
export interface StreamOptions {
  /** Aborting closes the connection; a resumable stream goes on generating on the server. */
  signal?: AbortSignal;
}

/**
 * The chunks of a chat completion stream. `offset` counts the bytes of the whole events read;
 * a stream started with a conversation id resumes from it (WgpuLlama.resumeChat) with no chunk
 * lost or repeated. An error event ends the iteration with an ApiError.
 */
export class ChatStream implements AsyncIterable<ChatCompletionChunk> {
  readonly #events: EventReader;
  #done = false;

  constructor(events: EventReader) {
    this.#events = events;
  }

  /** The byte offset to resume from. */
  get offset(): number {
    return this.#events.offset;
  }

  /** Whether `data: [DONE]` arrived: the completion is whole. */
  get done(): boolean {
    return this.#done;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ChatCompletionChunk> {
    for await (const payload of this.#events) {
      if (payload === "[DONE]") {
        this.#done = true;
        return;
      }
      const event = JSON.parse(payload) as ChatCompletionChunk | Schemas["ErrorResponse"];
      if ("error" in event) {
        throw new ApiError(event.error.code, event.error);
      }
      yield event;
    }
  }
}

/** Calls one wgpu-llama server. */
export class WgpuLlama {
  /** The generated client underneath, for what the methods here do not cover. */
  readonly api: Client<paths, "application/json">;

  constructor(options: ClientOptions) {
    this.api = createClient<paths, "application/json">({
      baseUrl: options.baseUrl,
      headers: options.headers,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
  }

  /** GET /health. */
  async health(): Promise<HealthResponse> {
    return unwrap(await this.api.GET("/health"));
  }

  /** GET /v1/models. */
  async models(): Promise<ModelsResponse> {
    return unwrap(await this.api.GET("/v1/models"));
  }

  /** POST /tokenize. */
  async tokenize(body: TokenizeRequest): Promise<TokenizeResponse> {
    return unwrap(await this.api.POST("/tokenize", { body }));
  }

  /** POST /detokenize: the text of token ids. */
  async detokenize(tokens: number[]): Promise<string> {
    return unwrap(await this.api.POST("/detokenize", { body: { tokens } })).content;
  }

  /** POST /apply-template: the prompt a chat request would generate from. */
  async applyTemplate(body: ApplyTemplateRequest): Promise<string> {
    return unwrap(await this.api.POST("/apply-template", { body })).prompt;
  }

  /** POST /completion, answered whole. */
  async complete(body: CompletionRequest): Promise<CompletionResponse> {
    return unwrap(await this.api.POST("/completion", { body: { ...body, stream: false } }));
  }

  /** POST /v1/chat/completions, answered whole. */
  async chat(body: ChatCompletionRequest): Promise<ChatCompletionResponse> {
    return unwrap(await this.api.POST("/v1/chat/completions", { body: { ...body, stream: false } }));
  }

  /**
   * POST /v1/chat/completions as a stream. With a conversation id the stream is resumable: the
   * server keeps generating if the connection drops, and resumeChat picks it up again.
   */
  async chatStream(body: ChatCompletionRequest, options: StreamOptions & { conversationId?: string } = {}): Promise<ChatStream> {
    const header = options.conversationId === undefined ? undefined : { "X-Conversation-Id": options.conversationId };
    const r = await this.api.POST("/v1/chat/completions", {
      body: { ...body, stream: true },
      params: { header },
      parseAs: "stream",
      signal: options.signal,
    });
    return new ChatStream(new EventReader(unwrap(r)));
  }

  /** GET /v1/stream/{id}?from=offset: a resumable chat stream from a byte offset on, then live. */
  async resumeChat(id: string, offset: number, options: StreamOptions = {}): Promise<ChatStream> {
    const r = await this.api.GET("/v1/stream/{id}", {
      params: { path: { id }, query: { from: offset } },
      parseAs: "stream",
      signal: options.signal,
    });
    return new ChatStream(new EventReader(unwrap(r), offset));
  }

  /** POST /v1/streams/lookup: the status of those of the named streams that exist. */
  async lookupStreams(ids: string[]): Promise<StreamStatus[]> {
    const res = unwrap(await this.api.POST("/v1/streams/lookup", { body: { ids } }));
    // Asked with `ids`, the server answers {streams}; the array form answers llama-server's
    // `conversation_ids`.
    if (Array.isArray(res)) throw new Error("lookupStreams: the server answered llama-server's array form");
    return res.streams;
  }

  /** DELETE /v1/stream/{id}: stops a resumable stream's generation. */
  async deleteStream(id: string): Promise<StreamStatus> {
    return unwrap(await this.api.DELETE("/v1/stream/{id}", { params: { path: { id } } }));
  }
}

/** The data of a successful answer; a failure throws ApiError. */
function unwrap<T>(r: { data?: T | null; error?: unknown; response: Response }): T {
  if (r.response.ok && r.data !== undefined && r.data !== null) {
    return r.data;
  }
  const e = r.error as Schemas["ErrorResponse"] | string | undefined;
  if (typeof e === "object" && e !== null && "error" in e) {
    throw new ApiError(r.response.status, e.error);
  }
  throw new ApiError(r.response.status, {
    code: r.response.status,
    message: typeof e === "string" && e !== "" ? e : r.response.statusText,
    type: "unknown_error",
  });
}
