// The server's tools (GET /tools, with --tools or MCP servers) as the chat uses them: offered to
// the model with a request, run through POST /tools when the model calls them, their results
// sent back for the next round. These routes are llama-server's and not in openapi/openapi.yaml:
// their types follow its tools/server/server-tools.cpp.
import type { ChatCompletionRequest } from "@wgpu-llama/client";

import type { ToolCall } from "./types";

/** One entry of GET /tools. */
export interface ToolInfo {
  tool: string;
  display_name: string;
  /** "builtin", or "mcp" for an MCP server's (named "<server>_<tool>"). */
  type: string;
  permissions: { write: boolean };
  uses_cwd?: boolean;
  definition: { type: "function"; function: { name: string; description?: string; parameters?: unknown } };
}

/** A POST /tools answer: plain_text_response, an MCP result's content, fields of the tool's own, or error. */
export type ToolResult = Record<string, unknown>;

/** The routes in openapi-typescript's shape, for the client's openapi-fetch instance. */
export interface ToolPaths {
  "/tools": {
    get: { responses: { 200: { content: { "application/json": ToolInfo[] } } } };
    post: {
      requestBody: { content: { "application/json": { tool: string; params: unknown } } };
      responses: { 200: { content: { "application/json": ToolResult } }; default: { content: { "application/json": unknown } } };
    };
  };
}

/** The default cap on rounds of tool calls one message runs. */
export const DEFAULT_TOOL_ROUNDS = 8;

/** The tools of GET /tools grouped for the panel: "Built-in" first, then each MCP server's. */
export function groupTools(tools: ToolInfo[]): { group: string; tools: ToolInfo[] }[] {
  const groups = new Map<string, ToolInfo[]>();
  for (const t of tools) {
    const group = t.type === "mcp" ? `MCP: ${t.tool.split("_")[0]}` : "Built-in";
    groups.set(group, [...(groups.get(group) ?? []), t]);
  }
  return [...groups].map(([group, list]) => ({ group, tools: list })).sort((a, b) => (a.group === "Built-in" ? -1 : b.group === "Built-in" ? 1 : a.group.localeCompare(b.group)));
}

/** The request's tools: the definitions of the enabled tools the server still offers. */
export function offeredTools(enabled: string[], tools: ToolInfo[]): NonNullable<ChatCompletionRequest["tools"]> {
  return tools.filter((t) => enabled.includes(t.tool)).map((t) => t.definition as NonNullable<ChatCompletionRequest["tools"]>[number]);
}

/** What the model reads of a result: the tool's text, an MCP result's text, an error, or the JSON. */
export function resultText(r: ToolResult): string {
  if (typeof r.plain_text_response === "string") return r.plain_text_response;
  if (typeof r.error === "string") return `error: ${r.error}`;
  const content = r.content;
  if (Array.isArray(content) && content.length && content.every((c) => c?.type === "text" && typeof c.text === "string")) {
    const text = content.map((c) => c.text as string).join("\n");
    return r.isError === true ? `error: ${text}` : text;
  }
  return JSON.stringify(r);
}

/** A call's arguments as POST /tools takes them; text that is not a JSON object is an error. */
export function callParams(call: ToolCall): Record<string, unknown> {
  const text = call.arguments.trim() || "{}";
  const v: unknown = JSON.parse(text);
  if (!v || typeof v !== "object" || Array.isArray(v)) throw new Error("the arguments are not a JSON object");
  return v as Record<string, unknown>;
}
