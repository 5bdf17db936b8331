// The sidebar: search, rename, delete, export and import, the shortcuts; and a PDF attachment.
import assert from "node:assert/strict";
import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { launchBrowser, screenshots, setSettings, startServer, until } from "./harness.mjs";

const fixtures = new URL("../test/fixtures/", import.meta.url).pathname;

describe("conversations", () => {
  let server, browser, page;
  const errors = [];

  before(async () => {
    server = await startServer();
    browser = await launchBrowser();
    // One page (one browser context, so one IndexedDB) for the tests that build on each other.
    page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    await page.goto(server.url + "/");
    await page.getByRole("textbox", { name: "Message" }).waitFor();
    await setSettings(page, { "Max tokens": 5 });
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  const list = () => page.getByRole("navigation", { name: "Conversations" });
  const titles = async () => (await list().getByRole("listitem").allInnerTexts()).map((t) => t.split("\n")[0].trim());
  const heading = () => page.getByRole("heading", { level: 1 }).innerText();
  const lastReply = () => page.getByRole("article", { name: "Assistant message" }).last();
  const send = async (text) => {
    await page.getByRole("textbox", { name: "Message" }).fill(text);
    await page.keyboard.press("Enter");
    await lastReply().waitFor();
    await until(async () => (await lastReply().getAttribute("data-state")) === "done", "the reply", 30000);
  };
  /** The row of the conversation titled title, its actions shown (they show on hover). */
  const row = async (title) => {
    const li = list().getByRole("listitem").filter({ has: page.getByRole("button", { name: title, exact: true }) });
    await li.hover();
    return li;
  };

  it("(a) lists two conversations and narrows them by search (Ctrl+K)", async () => {
    await send("Apples are red");
    await page.getByRole("button", { name: "New chat" }).click();
    await send("Bananas are yellow");
    assert.deepEqual(await titles(), ["Bananas are yellow", "Apples are red"]);

    await page.getByRole("textbox", { name: "Message" }).focus();
    await page.keyboard.press("Control+k");
    const search = page.getByRole("searchbox", { name: "Search conversations" });
    await until(() => search.evaluate((el) => el === document.activeElement), "the search box focused");
    await page.keyboard.type("apple");
    await until(async () => (await titles()).join() === "Apples are red", "the list narrowed to one");
    await page.screenshot({ path: join(screenshots, "sidebar-search.png") });
    // Searching finds message text too, not only titles.
    await search.fill("yellow");
    await until(async () => (await titles()).join() === "Bananas are yellow", "a match in the text");
    await search.fill("no such thing");
    await until(async () => /No matches/.test(await list().innerText()), "no matches");
    await search.fill("");
    await until(async () => (await titles()).length === 2, "both again");
  });

  it("(b) renames a conversation in the list and the header", async () => {
    await list().getByRole("button", { name: "Apples are red", exact: true }).click();
    await until(async () => (await heading()) === "Apples are red", "the conversation open");
    await (await row("Apples are red")).getByRole("button", { name: "Rename Apples are red" }).click();
    const field = page.getByRole("textbox", { name: "Conversation title" });
    await until(() => field.evaluate((el) => el === document.activeElement), "the title field focused");
    await field.fill("Fruit facts");
    await page.keyboard.press("Enter");
    await until(async () => (await titles()).includes("Fruit facts"), "the new title in the list");
    assert.equal(await heading(), "Fruit facts");
    assert.ok(!(await titles()).includes("Apples are red"));
    // Esc leaves a rename without changing the title.
    await (await row("Fruit facts")).getByRole("button", { name: "Rename Fruit facts" }).click();
    await field.fill("Something else");
    await page.keyboard.press("Escape");
    await field.waitFor({ state: "detached" });
    assert.ok((await titles()).includes("Fruit facts"));
    await page.screenshot({ path: join(screenshots, "sidebar-renamed.png") });
  });

  it("(c) exports a conversation to JSON, deletes it, and imports it back", async () => {
    const download = page.waitForEvent("download");
    await (await row("Bananas are yellow")).getByRole("button", { name: "Export Bananas are yellow" }).click();
    const file = await download;
    const saved = join(tmpdir(), `wgpu-llama-export-${process.pid}.json`);
    await file.saveAs(saved);
    const data = JSON.parse(await readFile(saved, "utf8"));
    assert.equal(data.format, "wgpu-llama-conversations");
    assert.equal(data.conversations.length, 1);
    const [{ conversation, messages }] = data.conversations;
    assert.equal(conversation.title, "Bananas are yellow");
    assert.deepEqual(messages.map((m) => m.role).sort(), ["assistant", "user"]);
    assert.equal(messages.find((m) => m.role === "user").content, "Bananas are yellow");
    assert.ok(messages.find((m) => m.role === "assistant").content.length > 0, "the reply's text is exported");

    page.once("dialog", (d) => d.accept());
    await (await row("Bananas are yellow")).getByRole("button", { name: "Delete Bananas are yellow" }).click();
    await until(async () => (await titles()).join() === "Fruit facts", "the deleted one gone");
    await page.reload();
    await list().waitFor();
    await until(async () => (await titles()).join() === "Fruit facts", "still gone after a reload");

    await page.getByLabel("Import conversations file").setInputFiles(saved);
    await until(async () => (await titles()).includes("Bananas are yellow"), "the imported conversation in the list");
    assert.match(await page.getByRole("status").innerText(), /Imported 1 conversation\./);
    await list().getByRole("button", { name: "Bananas are yellow", exact: true }).click();
    await until(async () => (await heading()) === "Bananas are yellow", "the imported conversation open");
    const user = page.getByRole("article", { name: "User message" });
    assert.equal(await user.count(), 1);
    assert.match(await user.innerText(), /Bananas are yellow/);
    const reply = messages.find((m) => m.role === "assistant").content.trim();
    assert.ok((await lastReply().innerText()).includes(reply.split("\n")[0].trim()), "the reply imported");
    await page.screenshot({ path: join(screenshots, "sidebar-imported.png") });
    // The same file again, once more deleted: the file input was cleared, so it imports again.
    page.once("dialog", (d) => d.accept());
    await (await row("Bananas are yellow")).getByRole("button", { name: "Delete Bananas are yellow" }).click();
    await until(async () => (await titles()).join() === "Fruit facts", "deleted again");
    await page.getByLabel("Import conversations file").setInputFiles(saved);
    await until(async () => (await titles()).includes("Bananas are yellow"), "imported again");
    await list().getByRole("button", { name: "Bananas are yellow", exact: true }).click();
    await until(async () => (await heading()) === "Bananas are yellow", "the imported conversation open again");
    assert.deepEqual(errors, [], "no errors in the page");
    await rm(saved, { force: true });
  });

  it("(d) starts a new chat with Ctrl+Shift+O", async () => {
    assert.equal(await heading(), "Bananas are yellow");
    await page.getByRole("article").first().click();
    await page.keyboard.press("Control+Shift+O");
    await until(async () => (await heading()) === "New chat", "a new chat");
    assert.equal(await page.getByRole("article").count(), 0);
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("aria-label")), "Message");
    assert.equal(await list().locator('[aria-current="page"]').count(), 0, "no conversation marked current");
  });

  it("(e) sends the text of an attached PDF", async () => {
    const bodies = [];
    const workers = [];
    page.on("worker", (w) => workers.push(w.url()));
    page.on("request", (r) => {
      if (r.url().endsWith("/v1/chat/completions")) bodies.push(JSON.parse(r.postData() ?? "{}"));
    });
    await page.getByLabel("Files to attach").setInputFiles([
      { name: "hello.pdf", mimeType: "application/pdf", buffer: await readFile(join(fixtures, "hello.pdf")) },
      { name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("plain notes\n") },
    ]);
    await page.getByText("text: hello.pdf").waitFor();
    await page.getByText("text: notes.txt").waitFor();
    await page.getByRole("textbox", { name: "Message" }).fill("What does it say?");
    await page.keyboard.press("Enter");
    await until(() => bodies.length > 0, "the chat request");
    const content = bodies[0].messages.at(-1).content;
    assert.match(content, /What does it say\?/);
    assert.match(content, /hello\.pdf:\n```\nHello PDF\n```/);
    assert.ok(workers.some((u) => /\/assets\/pdf\.worker[^/]*\.mjs$/.test(u)), `pdf.js ran in its own worker (workers: ${workers})`);
    assert.match(content, /notes\.txt:\n```\nplain notes\n```/);
    await until(async () => (await lastReply().getAttribute("data-state")) === "done", "the reply", 30000);
    // The attachments are kept with the message: after a reload it still lists them.
    await page.reload();
    await until(async () => /hello\.pdf/.test(await page.getByRole("article", { name: "User message" }).innerText()), "the attachment after a reload");
    await page.screenshot({ path: join(screenshots, "pdf-attached.png") });
    assert.deepEqual(errors, [], "no errors in the page");
  });
});
