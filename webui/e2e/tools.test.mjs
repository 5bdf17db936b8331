// Tools from the UI: the panel enables a server tool, the model's call of it (a canned chat
// stream: stories260K writes no calls of its own under its template) asks to run, and once
// allowed runs on the real server through POST /tools; its result goes back for the next reply.
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { launchBrowser, screenshots, startServer, until } from "./harness.mjs";

/** A chat stream of the given chunks' deltas, ending as a complete completion. */
function sse(deltas, finish) {
  const base = { id: "chatcmpl-test", object: "chat.completion.chunk", created: 1, model: "stories260K", system_fingerprint: "b1" };
  const events = [{ ...base, choices: [{ index: 0, finish_reason: null, delta: { role: "assistant", content: null } }] }];
  for (const delta of deltas) events.push({ ...base, choices: [{ index: 0, finish_reason: null, delta }] });
  events.push({ ...base, choices: [{ index: 0, finish_reason: finish, delta: {} }] });
  return events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join("") + "data: [DONE]\n\n";
}

describe("tools", () => {
  let server, browser, page, dir;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "wgpu-llama-tools-"));
    server = await startServer(["--tools", "read_file,write_file"]);
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("runs a write tool the model calls, after the user allows it, and continues with its result", async () => {
    page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
    const target = join(dir, "note.txt");
    const bodies = [];
    await page.route("**/v1/chat/completions", async (route) => {
      const body = route.request().postDataJSON();
      bodies.push(body);
      const stream =
        bodies.length === 1
          ? sse(
              [
                { tool_calls: [{ index: 0, id: "call-1", type: "function", function: { name: "write_file", arguments: "" } }] },
                { tool_calls: [{ index: 0, function: { arguments: JSON.stringify({ path: target, content: "hello from the UI\n" }) } }] },
              ],
              "tool_calls",
            )
          : sse([{ content: "The note is written." }], "stop");
      await route.fulfill({ status: 200, headers: { "Content-Type": "text/event-stream" }, body: stream });
    });
    await page.goto(server.url + "/");
    await page.getByRole("textbox", { name: "Message" }).waitFor();

    await page.getByRole("button", { name: "Tools" }).click();
    const panel = page.getByRole("dialog", { name: "Tools" });
    await panel.getByRole("checkbox", { name: /Write file/ }).check();
    await panel.getByRole("button", { name: "Done" }).click();
    assert.match(await page.getByRole("button", { name: "Tools" }).innerText(), /Tools \(1\)/);

    await page.getByRole("textbox", { name: "Message" }).fill("Write a note");
    await page.keyboard.press("Enter");
    const confirm = page.getByRole("dialog", { name: "Run tool?" });
    await confirm.waitFor();
    assert.match(await confirm.innerText(), /note\.txt/);
    await page.screenshot({ path: join(screenshots, "tool-confirm.png") });
    await confirm.getByRole("button", { name: "Run", exact: true }).click();

    await until(async () => /The note is written/.test(await page.getByRole("article", { name: "Assistant message" }).last().innerText()), "the reply after the tool", 30000);
    assert.equal(await readFile(target, "utf8"), "hello from the UI\n");
    assert.match(await page.getByRole("article", { name: "Tool result" }).innerText(), /file written successfully/);
    // The first request offered the tool; the second carried the call and its result.
    assert.deepEqual(bodies[0].tools.map((t) => t.function.name), ["write_file"]);
    const [call, result] = bodies[1].messages.slice(-2);
    assert.equal(call.role, "assistant");
    assert.equal(call.tool_calls[0].id, "call-1");
    assert.equal(result.role, "tool");
    assert.equal(result.tool_call_id, "call-1");
    assert.match(result.content, /file written successfully/);
    await page.screenshot({ path: join(screenshots, "tool-result.png") });
  });

  it("does not run a write tool the user refuses", async () => {
    const target = join(dir, "refused.txt");
    let n = 0;
    await page.unroute("**/v1/chat/completions");
    await page.route("**/v1/chat/completions", async (route) => {
      n++;
      const stream =
        n === 1
          ? sse([{ tool_calls: [{ index: 0, id: "call-2", type: "function", function: { name: "write_file", arguments: JSON.stringify({ path: target, content: "x" }) } }] }], "tool_calls")
          : sse([{ content: "Understood." }], "stop");
      await route.fulfill({ status: 200, headers: { "Content-Type": "text/event-stream" }, body: stream });
    });
    await page.getByRole("textbox", { name: "Message" }).fill("Write another");
    await page.keyboard.press("Enter");
    const confirm = page.getByRole("dialog", { name: "Run tool?" });
    await confirm.getByRole("button", { name: "Don't run" }).click();
    await until(async () => /Understood/.test(await page.getByRole("article", { name: "Assistant message" }).last().innerText()), "the reply after the refusal", 30000);
    assert.match(await page.getByRole("article", { name: "Tool result" }).last().innerText(), /the user did not allow write_file to run/);
    await assert.rejects(readFile(target, "utf8"));
  });
});
