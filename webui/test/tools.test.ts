import { describe, expect, it } from "vitest";

import { applyChunk } from "../src/lib/reply";
import { buildChatRequest, toChatMessage } from "../src/lib/request";
import { defaultSettings } from "../src/lib/settings";
import { callParams, groupTools, offeredTools, resultText, type ToolInfo } from "../src/lib/tools";
import type { Message } from "../src/lib/types";

function tool(name: string, type = "builtin", write = false): ToolInfo {
  return {
    tool: name,
    display_name: name,
    type,
    permissions: { write },
    definition: { type: "function", function: { name, description: `about ${name}`, parameters: { type: "object", properties: {} } } },
  };
}

const msg = (fields: Partial<Message>): Message => ({ id: "m", convId: "c", parent: null, role: "assistant", content: "", createdAt: 0, ...fields });

describe("tools", () => {
  it("groups built-in tools first, then each MCP server's", () => {
    const groups = groupTools([tool("zeta_echo", "mcp"), tool("read_file"), tool("alpha_add", "mcp"), tool("write_file", "builtin", true), tool("zeta_add", "mcp")]);
    expect(groups.map((g) => [g.group, g.tools.map((t) => t.tool)])).toEqual([
      ["Built-in", ["read_file", "write_file"]],
      ["MCP: alpha", ["alpha_add"]],
      ["MCP: zeta", ["zeta_echo", "zeta_add"]],
    ]);
  });

  it("offers the enabled tools the server has, in its order", () => {
    const all = [tool("read_file"), tool("write_file"), tool("get_info")];
    expect(offeredTools(["get_info", "gone", "read_file"], all).map((t) => t.function.name)).toEqual(["read_file", "get_info"]);
    const req = buildChatRequest([msg({ role: "user", content: "hi" })], defaultSettings(), null, offeredTools(["read_file"], all));
    expect(req.tools).toEqual([all[0]!.definition]);
    expect(buildChatRequest([msg({ role: "user", content: "hi" })], defaultSettings(), null).tools).toBeUndefined();
  });

  it("reads results as the model should", () => {
    expect(resultText({ plain_text_response: "a\nb" })).toBe("a\nb");
    expect(resultText({ error: "cannot stat file: x" })).toBe("error: cannot stat file: x");
    expect(resultText({ content: [{ type: "text", text: "echo: hi" }, { type: "text", text: "more" }], isError: false })).toBe("echo: hi\nmore");
    expect(resultText({ content: [{ type: "text", text: "bad" }], isError: true })).toBe("error: bad");
    expect(resultText({ result: "file written successfully", bytes: 3 })).toBe('{"result":"file written successfully","bytes":3}');
  });

  it("takes a call's arguments as a JSON object", () => {
    expect(callParams({ name: "t", arguments: ' {"path": "a"} ' })).toEqual({ path: "a" });
    expect(callParams({ name: "t", arguments: "" })).toEqual({});
    expect(() => callParams({ name: "t", arguments: "[1]" })).toThrow("not a JSON object");
    expect(() => callParams({ name: "t", arguments: "{" })).toThrow();
  });

  it("sends calls and results in OpenAI's shape", () => {
    const call = msg({ toolCalls: [{ id: "c1", name: "read_file", arguments: '{"path":"a"}' }] });
    expect(toChatMessage(call)).toEqual({
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c1", type: "function", function: { name: "read_file", arguments: '{"path":"a"}' } }],
    });
    expect(toChatMessage(msg({ role: "tool", content: "text", toolCallId: "c1", toolName: "read_file" }))).toEqual({
      role: "tool",
      content: "text",
      tool_call_id: "c1",
      name: "read_file",
    });
  });

  it("keeps a streamed call's id and makes new call objects as it grows", () => {
    const m = msg({});
    const chunk = (delta: object) => ({ id: "x", object: "chat.completion.chunk", created: 0, model: "m", system_fingerprint: "f", choices: [{ index: 0, finish_reason: null, delta }] });
    applyChunk(m, chunk({ tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "get", arguments: "" } }] }) as never);
    const first = m.toolCalls![0];
    applyChunk(m, chunk({ tool_calls: [{ index: 0, function: { arguments: '{"a":1}' } }] }) as never);
    expect(m.toolCalls).toEqual([{ id: "c1", name: "get", arguments: '{"a":1}' }]);
    expect(m.toolCalls![0]).not.toBe(first);
  });
});
