// Image input from the UI, against the llama.cpp-verified tinygemma3v pair (a Gemma 3 text model
// and its vision projector): an image picked, dropped or pasted goes with the message, shows in
// the conversation, and gets a reply.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { assistantRequests, launchBrowser, screenshots, setSettings, startServer, until } from "./harness.mjs";

const vision = join(process.env.WGPU_LLAMA_SHARED ?? "", "models", "vision");

describe("image input", () => {
  let server, browser, page;

  before(async () => {
    server = await startServer(["-m", join(vision, "tinygemma3v-text-F32.gguf"), "--mmproj", join(vision, "tinygemma3v-mmproj-F32.gguf")]);
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
    await page.goto(server.url + "/");
    await page.getByRole("textbox", { name: "Message" }).waitFor();
    await setSettings(page, { "Max tokens": 8 });
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  const lastReply = () => page.getByRole("article", { name: "Assistant message" }).last();
  const sendAndWait = async (text) => {
    const replies = page.getByRole("article", { name: "Assistant message" });
    const before = await replies.count();
    await page.getByRole("textbox", { name: "Message" }).fill(text);
    await page.keyboard.press("Enter");
    await until(async () => (await replies.count()) > before, "the new reply");
    await until(async () => (await lastReply().getAttribute("data-state")) === "done", "the reply", 60000);
  };

  it("sends a picked image and gets a reply", async () => {
    await page.getByLabel("Files to attach").setInputFiles(join(vision, "img-sq64.png"));
    await page.getByText("image: img-sq64.png").waitFor();
    await sendAndWait("Describe");
    const user = page.getByRole("article", { name: "User message" }).last();
    assert.equal(await user.getByRole("img", { name: "img-sq64.png" }).count(), 1);
    assert.notEqual((await lastReply().innerText()).trim(), "");
    assert.doesNotMatch(await lastReply().innerText(), /Error/);
    // the request carried the image as an image_url part
    const sent = (await assistantRequests(page)).map((r) => r.messages.at(-1).content);
    assert.equal(sent[0][1].type, "image_url");
    assert.match(sent[0][1].image_url.url, /^data:image\/png;base64,/);
    await page.screenshot({ path: join(screenshots, "vision.png") });
  });

  it("takes an image dropped on the composer", async () => {
    const b64 = (await readFile(join(vision, "img-rect150x100.png"))).toString("base64");
    const drop = await page.evaluateHandle((data) => {
      const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
      const dt = new DataTransfer();
      dt.items.add(new File([bytes], "rect.png", { type: "image/png" }));
      return dt;
    }, b64);
    await page.dispatchEvent("form.composer", "drop", { dataTransfer: drop });
    await page.getByText("image: rect.png").waitFor();
    await sendAndWait("Describe");
    assert.equal(await page.getByRole("article", { name: "User message" }).last().getByRole("img", { name: "rect.png" }).count(), 1);
    assert.notEqual((await lastReply().innerText()).trim(), "");
  });
});
