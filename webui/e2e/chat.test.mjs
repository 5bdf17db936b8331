// The UI as the binary serves it, against stories260K.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { launchBrowser, screenshots, setSettings, startServer, throttle, until } from "./harness.mjs";

describe("web UI", () => {
  let server, browser, page;

  before(async () => {
    server = await startServer();
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  async function freshPage(viewport = { width: 1100, height: 800 }) {
    await page?.close();
    page = await browser.newPage({ viewport });
    await page.goto(server.url + "/");
    await page.getByRole("textbox", { name: "Message" }).waitFor();
    return page;
  }

  const lastReply = () => page.getByRole("article", { name: "Assistant message" }).last();
  const send = async (text) => {
    await page.getByRole("textbox", { name: "Message" }).fill(text);
    await page.keyboard.press("Enter");
  };

  it("(a) streams a reply token by token", async () => {
    await freshPage();
    await setSettings(page, { "Max tokens": 120 });
    await throttle(page, 20000); // some 30 tokens a second, so the polls below see it grow
    await send("Tell me a story");
    const reply = lastReply();
    await until(async () => (await reply.getAttribute("data-state")) === "streaming", "streaming state");
    const lengths = new Set();
    await until(async () => {
      if ((await reply.getAttribute("data-state")) === "streaming") lengths.add((await reply.innerText()).length);
      return (await reply.getAttribute("data-state")) === "done";
    }, "the reply to finish", 30000);
    assert.ok(lengths.size >= 3, `the text grew while streaming (lengths seen: ${[...lengths]})`);
    assert.match(await reply.innerText(), /tokens\/s/);
    await page.screenshot({ path: join(screenshots, "chat.png") });
  });

  it("(b) continues a reply after a reload", async () => {
    await freshPage();
    await setSettings(page, { "Max tokens": 400 });
    let streamId = "";
    page.on("request", (r) => {
      if (r.url().endsWith("/v1/chat/completions")) streamId = r.headers()["x-conversation-id"] ?? "";
    });
    // The browser reads the stream at 2 KB/s (about 3 tokens a second), so the reply is
    // still arriving at the reload however fast the server generates it; the server, done long
    // before, keeps the stream for the resumed page to replay.
    await throttle(page, 2000);
    await send("Once upon a time");
    const text = () => lastReply().locator(".markdown").innerText().catch(() => "");
    await until(async () => (await text()).length > 5, "some text");
    const beforeReload = (await text()).length;
    assert.equal(await lastReply().getAttribute("data-state"), "streaming", "still streaming at the reload");
    await throttle(page, -1);
    await page.reload();
    await lastReply().waitFor();
    await until(async () => (await lastReply().getAttribute("data-state")) === "done", "the resumed reply to finish", 60000);
    const final = await text();
    assert.ok(final.length > beforeReload, `the reply went on after the reload (${beforeReload} -> ${final.length})`);
    // The whole reply, as the server streamed it: nothing lost or repeated across the reload.
    assert.ok(streamId, "the request carried X-Conversation-Id");
    const replay = await (await fetch(`${server.url}/v1/stream/${streamId}?from=0`)).text();
    const content = replay
      .split("\n\n")
      .filter((e) => e.startsWith("data: {"))
      .map((e) => JSON.parse(e.slice(6)).choices[0]?.delta?.content ?? "")
      .join("");
    const squash = (s) => s.replace(/\s+/g, " ").trim();
    assert.equal(squash(final), squash(content));
    await page.screenshot({ path: join(screenshots, "resumed.png") });
  });

  it("(c) edits a message and moves between the branches", async () => {
    await freshPage();
    await setSettings(page, { "Max tokens": 20 });
    await page.getByRole("button", { name: "New chat" }).click();
    await send("First question");
    await until(async () => (await lastReply().getAttribute("data-state")) === "done", "first reply", 30000);
    const user = page.getByRole("article", { name: "User message" }).last();
    await user.getByRole("button", { name: "Edit" }).click();
    await user.getByRole("textbox").fill("Second question");
    await user.getByRole("button", { name: "Save" }).click();
    await until(async () => /Second question/.test(await page.getByRole("article", { name: "User message" }).last().innerText()), "the edited branch");
    await until(async () => (await lastReply().getAttribute("data-state")) === "done", "edited reply", 30000);
    const edited = page.getByRole("article", { name: "User message" }).last();
    assert.match(await edited.innerText(), /Second question/);
    assert.match(await edited.innerText(), /2\/2/);
    await edited.getByRole("button", { name: "Previous branch" }).click();
    const first = page.getByRole("article", { name: "User message" }).last();
    await until(async () => /First question/.test(await first.innerText()), "the first branch");
    assert.match(await first.innerText(), /1\/2/);
    await page.screenshot({ path: join(screenshots, "branches.png") });
    await first.getByRole("button", { name: "Next branch" }).click();
    await until(async () => /Second question/.test(await page.getByRole("article", { name: "User message" }).last().innerText()), "the second branch");
  });

  it("(d) sends a changed temperature in the request", async () => {
    await freshPage();
    await setSettings(page, { Temperature: 0.3, "Max tokens": 10 });
    const bodies = [];
    page.on("request", (r) => {
      if (r.url().endsWith("/v1/chat/completions")) bodies.push(JSON.parse(r.postData() ?? "{}"));
    });
    await send("Hi");
    await until(() => bodies.length > 0, "the chat request");
    assert.equal(bodies[0].temperature, 0.3);
    assert.equal(bodies[0].n_predict, 10);
    assert.equal(bodies[0].n_probs, 5);
    assert.equal(bodies[0].top_k, undefined, "unchanged parameters are not sent");
    await until(async () => (await lastReply().getAttribute("data-state")) === "done", "the reply", 30000);
    // The token view and the request panel of that reply.
    await lastReply().getByRole("button", { name: "Tokens" }).click();
    await lastReply().locator(".token").first().focus();
    await page.screenshot({ path: join(screenshots, "tokens.png") });
    await lastReply().getByRole("button", { name: "Request" }).click();
    await until(async () => /im_start/.test(await lastReply().innerText()), "the rendered prompt");
    await page.screenshot({ path: join(screenshots, "request.png") });
    await setSettings(page, { Temperature: 0.8 });
  });

  it("(e) stops a long reply and frees the slot", async () => {
    await freshPage();
    await setSettings(page, { "Max tokens": 2000 });
    await send("A long story please");
    const reply = lastReply();
    await until(async () => (await reply.getAttribute("data-state")) === "streaming", "streaming");
    await page.waitForTimeout(300);
    await page.getByRole("button", { name: "Stop" }).first().click();
    await until(async () => (await reply.getAttribute("data-state")) === "done", "stopped");
    await until(async () => {
      const slots = await (await fetch(`${server.url}/slots`)).json();
      return slots.every((s) => !s.is_processing);
    }, "every slot idle", 5000);
  });

  it("(g) applies dark mode", async () => {
    await freshPage();
    await setSettings(page, { Theme: "light" });
    const bg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    const light = await bg();
    await setSettings(page, { Theme: "dark" });
    const dark = await bg();
    assert.notEqual(light, dark);
    await page.screenshot({ path: join(screenshots, "dark.png") });
    await page.setViewportSize({ width: 375, height: 740 });
    await page.screenshot({ path: join(screenshots, "narrow.png") });
    await page.getByRole("button", { name: "Conversations" }).click();
    await page.screenshot({ path: join(screenshots, "narrow-sidebar.png") });
    await page.keyboard.press("Control+k");
    await until(() => page.evaluate(() => document.activeElement?.getAttribute("aria-label") === "Search conversations"), "search focus");
    await setSettings(page, { Theme: "system" });
  });
});
