// (f) With --api-key the UI asks for the key, then works.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, it } from "node:test";

import { launchBrowser, screenshots, setSettings, startServer, until } from "./harness.mjs";

let server, browser;
before(async () => {
  server = await startServer(["--api-key", "sekrit"]);
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

it("(f) asks for the API key and then works", async () => {
  const page = await browser.newPage();
  await page.goto(server.url + "/");
  const dialog = page.getByRole("dialog", { name: "API key required" });
  await dialog.waitFor();
  await page.screenshot({ path: join(screenshots, "api-key.png") });
  await dialog.getByLabel("API key").fill("wrong");
  await dialog.getByRole("button", { name: "Continue" }).click();
  await dialog.waitFor(); // asked again: the wrong key got 401 too
  await dialog.getByLabel("API key").fill("sekrit");
  await dialog.getByRole("button", { name: "Continue" }).click();
  await dialog.waitFor({ state: "detached" });
  // A short reply: unbounded, stories260K fills its 4096-token context (40 s on a slow machine).
  await setSettings(page, { "Max tokens": 40 });
  await page.getByRole("textbox", { name: "Message" }).fill("Hi");
  await page.keyboard.press("Enter");
  const reply = page.getByRole("article", { name: "Assistant message" }).last();
  await until(async () => (await reply.getAttribute("data-state")) === "done", "the reply", 30000);
  assert.doesNotMatch(await reply.innerText(), /Error/);
  assert.ok((await reply.locator(".markdown").innerText()).length > 0);
});
