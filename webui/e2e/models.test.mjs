// Router mode: the model selector lists the models of a --models-dir, loads the one picked (with
// a progress bar), chats with two models, keeps each conversation's model, and unloads.
// Skipped, saying why, while the binary cannot run as a router.
import assert from "node:assert/strict";
import { mkdtemp, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { launchBrowser, screenshots, setSettings, startRouter, until } from "./harness.mjs";

const shared = process.env.WGPU_LLAMA_SHARED;
const FILES = ["stories260K.gguf", "llama-2-tiny-random.gguf"];

let dir, server, browser, skip;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "wgpu-llama-models-"));
  for (const f of FILES) await symlink(join(shared, "models", f), join(dir, f));
  server = await startRouter(dir);
  skip = server.skip;
  if (skip) console.log(`# skipped: ${skip}`);
  else browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await server?.stop?.();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("model selector (router mode)", () => {
  it("loads, switches and unloads models, one per conversation", async (t) => {
    if (skip) return t.skip(skip);
    const page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const bodies = [];
    page.on("request", (r) => {
      if (r.method() === "POST" && r.url().endsWith("/v1/chat/completions")) bodies.push(r.postDataJSON());
    });
    await page.goto(server.url + "/");
    await page.getByRole("textbox", { name: "Message" }).waitFor();
    await setSettings(page, { "Max tokens": 16 });

    const select = page.getByRole("combobox", { name: "Model" });
    const options = async () => select.locator("option").evaluateAll((os) => os.map((o) => ({ value: o.value, text: o.textContent })));
    await until(async () => (await options()).length === 2, "both models listed");
    const ids = (await options()).map((o) => o.value);
    const stories = ids.find((id) => /stories260K/.test(id));
    const tiny = ids.find((id) => /llama-2-tiny-random/.test(id));
    assert.ok(stories && tiny, `the models of the folder are listed (${ids})`);
    const statusOf = async (id) => (await options()).find((o) => o.value === id)?.text ?? "";
    const serverStatus = async (id) => {
      const list = await (await fetch(`${server.url}/v1/models`)).json();
      return list.data.find((m) => m.id === id)?.status?.value;
    };
    assert.match(await statusOf(stories), /unloaded/);

    // Whether the progress bar ever showed: a load can be over before a poll would see it.
    await page.evaluate(() => {
      window.__sawProgress = false;
      new MutationObserver(() => {
        if (document.querySelector('[role="progressbar"][aria-label="Loading model"], progress[aria-label="Loading model"]')) window.__sawProgress = true;
      }).observe(document.body, { childList: true, subtree: true });
    });

    const pick = async (id, shot) => {
      await select.selectOption(id);
      if (shot) await page.screenshot({ path: join(screenshots, shot) });
      await until(async () => /\(loaded\)/.test(await statusOf(id)), `${id} loaded`, 60000);
      await page.getByRole("button", { name: "Unload model" }).waitFor();
      assert.equal(await serverStatus(id), "loaded");
    };
    const send = async (text) => {
      const n = bodies.length;
      await page.getByRole("textbox", { name: "Message" }).fill(text);
      await page.keyboard.press("Enter");
      const reply = page.getByRole("article", { name: "Assistant message" }).last();
      await until(async () => bodies.length > n && (await reply.getAttribute("data-state")) === "done", `the reply to "${text}"`, 60000);
      assert.doesNotMatch(await reply.innerText(), /Error/);
      return bodies.at(-1);
    };

    await pick(stories, "models-loading.png");
    assert.ok(await page.evaluate(() => window.__sawProgress), "a progress bar named Loading model showed while loading");
    assert.equal((await send("Once upon a time")).model, stories);
    // stories260K takes no images: an image attached is refused, saying so.
    await page.getByLabel("Files to attach").setInputFiles({ name: "cat.png", mimeType: "image/png", buffer: Buffer.from([0x89, 0x50, 0x4e, 0x47]) });
    const refused = page.getByRole("alert").filter({ hasText: "cat.png" });
    await refused.waitFor();
    assert.match(await refused.innerText(), new RegExp(`cat\\.png: ${stories} does not take images`));
    const heading = () => page.getByRole("heading", { level: 1 }).innerText();
    const first = await heading();

    // A new chat with the other model: both stay loaded (--models-max defaults to 4).
    await page.keyboard.press("Control+Shift+O");
    await page.evaluate(() => (window.__sawProgress = false));
    await pick(tiny);
    assert.ok(await page.evaluate(() => window.__sawProgress), "the progress bar showed for the second model");
    assert.equal((await send("Hello there")).model, tiny);
    assert.equal(await serverStatus(stories), "loaded");
    await page.screenshot({ path: join(screenshots, "models.png") });

    // Each conversation keeps its model.
    await page.getByRole("navigation").getByRole("button", { name: first, exact: true }).click();
    await until(async () => (await heading()) === first, "the first conversation open");
    await until(async () => (await select.inputValue()) === stories, "its model shown again");
    assert.equal((await send("And then")).model, stories);

    // Unload the one shown.
    await page.getByRole("button", { name: "Unload model" }).click();
    await until(async () => /\(unloaded\)/.test(await statusOf(stories)), "stories260K unloaded", 30000);
    assert.equal(await serverStatus(stories), "unloaded");
    assert.equal(await serverStatus(tiny), "loaded");
    await page.getByRole("button", { name: "Unload model" }).waitFor({ state: "detached" });
    assert.deepEqual(errors, [], "no errors in the page");
  });
});
