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
  role: "user" | "assistant";
  content: string;
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
}
