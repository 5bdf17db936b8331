import type { components } from "@wgpu-llama/client";

type Schemas = components["schemas"];
export type Timings = Schemas["Timings"];
export type TokenProbability = Schemas["TokenProbability"];
export type Props = Schemas["PropsResponse"];
export type SlotParams = Schemas["SlotParams"];

/** A file attached to a user message. Text files are inlined into the prompt. */
export interface Attachment {
  name: string;
  kind: "text" | "image" | "audio";
  /** The file's text (kind text) or its data: URL (image, audio). */
  data: string;
}

export interface ToolCall {
  /** The id the server gave the call, which its result names. */
  id?: string;
  name: string;
  arguments: string;
}

/** Where an assistant message's generation stands. */
export type MessageState = "streaming" | "done" | "stopped" | "error";

export interface Message {
  id: string;
  convId: string;
  /** The message this one answers or follows; null for the first of a conversation. */
  parent: string | null;
  /** "tool": the result of a call of the assistant message before it, run by the UI. */
  role: "user" | "assistant" | "tool";
  content: string;
  /** A tool message's call (ToolCall.id) and the tool's name. */
  toolCallId?: string;
  toolName?: string;
  createdAt: number;
  attachments?: Attachment[];
  reasoning?: string;
  toolCalls?: ToolCall[];
  state?: MessageState;
  error?: string;
  /** The X-Conversation-Id its generation was started with, and the stream bytes received. */
  streamId?: string;
  offset?: number;
  timings?: Timings;
  /** The context size the reply was generated in, for the "context used" figure. */
  nCtx?: number;
  tokens?: TokenProbability[];
  /** The request body that generated it, for the Request panel. */
  request?: unknown;
}

export interface Conversation {
  id: string;
  title: string;
  createdAt: number;
  updatedAt: number;
  /** The last message of the branch on show. */
  currentLeaf: string | null;
  /** The model the conversation talks to, when the server is a router (absent: the server's one model). */
  model?: string;
  /** The server tools (GET /tools names) offered to the model in this conversation. */
  tools?: string[];
}

// The router API below is not in openapi/openapi.yaml yet: these types follow llama-server's
// router mode (tools/server/server-models.cpp), which wgpu-llama's router answers alike.

/** A model's state: llama-server reports a failed load as "unloaded" with status.failed. */
export type ModelStatusValue = "unloaded" | "loading" | "loaded" | "sleeping" | "failed" | "downloading" | "downloaded";

/** One entry of GET /v1/models. In router mode every entry carries `status`. */
export interface RouterModelEntry {
  id: string;
  aliases?: string[];
  tags?: string[];
  object?: string;
  owned_by?: string;
  created?: number;
  status?: {
    value: ModelStatusValue | string;
    args?: string[];
    preset?: string;
    exit_code?: number;
    failed?: boolean;
    /** Load progress, a fraction (0 to 1) or, from some servers, an object of per-file counts. */
    progress?: unknown;
  };
  /** Router mode: what the model takes as input ("text", "image", "audio"). */
  architecture?: { input_modalities?: string[]; output_modalities?: string[] };
  source?: string;
  can_remove?: boolean;
}

export interface RouterModelList {
  object?: string;
  data: RouterModelEntry[];
}

/** One GET /models/sse event: status_change, model_status, download_progress, download_finished, download_failed, model_remove, models_reload. */
export interface ModelsEvent {
  model: string;
  event: string;
  data?: {
    status?: string;
    exit_code?: number;
    progress?: unknown;
    info?: unknown;
    [key: string]: unknown;
  };
}

/** GET /props of a router (no ?model=): the router's own settings. */
export interface RouterProps {
  role?: string;
  max_instances?: number;
  models_autoload?: boolean;
  build_info?: string;
  /** The router serves GET and POST /tools (started with --tools or MCP servers). */
  endpoint_tools?: boolean;
}

/** The router API's paths, in openapi-typescript's shape, for the client's openapi-fetch instance. */
export interface RouterPaths {
  "/v1/models": {
    get: { parameters: { query?: { reload?: number } }; responses: { 200: { content: { "application/json": RouterModelList } } } };
  };
  "/models/load": {
    post: {
      requestBody: { content: { "application/json": { model: string } } };
      responses: { 200: { content: { "application/json": { success: boolean } } }; default: { content: { "application/json": unknown } } };
    };
  };
  "/models/unload": {
    post: {
      requestBody: { content: { "application/json": { model: string } } };
      responses: { 200: { content: { "application/json": { success: boolean } } }; default: { content: { "application/json": unknown } } };
    };
  };
  "/models/sse": {
    get: { responses: { 200: { content: { "text/event-stream": string } } } };
  };
  "/props": {
    get: {
      parameters: { query?: { model?: string; autoload?: boolean } };
      responses: { 200: { content: { "application/json": Props & RouterProps } }; default: { content: { "application/json": unknown } } };
    };
  };
}
