// LoRA adapters from the UI: a server started with two adapters lists them in the settings at
// the server's scales; a scale changed there goes with every message as the request's lora
// (every adapter's scale), and the reply comes.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { assistantRequests, launchBrowser, setSettings, startServer, until } from "./harness.mjs";

const shared = process.env.WGPU_LLAMA_SHARED ?? "";
const lora = join(shared, "models", "lora");

describe("LoRA adapters", () => {
  let server, browser, page;

  before(async () => {
    server = await startServer([
      "-m", join(shared, "models", "stories260K.gguf"),
      "--lora", join(lora, "stories260K-lora-A-F32.gguf"),
      "--lora-scaled", join(lora, "stories260K-lora-B-F32.gguf") + ":0.5",
    ]);
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
    await page.goto(server.url + "/");
    await page.getByRole("textbox", { name: "Message" }).waitFor();
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  it("sends the scales set in the settings", async () => {
    await page.getByRole("button", { name: "Settings" }).click();
    const dialog = page.getByRole("dialog", { name: "Settings" });
    assert.equal(await dialog.getByLabel("LoRA 0 scale", { exact: true }).inputValue(), "1");
    assert.equal(await dialog.getByLabel("LoRA 1 scale", { exact: true }).inputValue(), "0.5");
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await setSettings(page, { "Max tokens": 8, "LoRA 0 scale": 0.25 });

    const replies = page.getByRole("article", { name: "Assistant message" });
    await page.getByRole("textbox", { name: "Message" }).fill("Once upon a time");
    await page.keyboard.press("Enter");
    await until(async () => (await replies.count()) > 0, "the reply");
    await until(async () => (await replies.last().getAttribute("data-state")) === "done", "the reply", 60000);
    assert.doesNotMatch(await replies.last().innerText(), /Error/);
    const sent = (await assistantRequests(page)).map((r) => r.lora);
    assert.deepEqual(sent, [[{ id: 0, scale: 0.25 }, { id: 1, scale: 0.5 }]]);
  });
});
