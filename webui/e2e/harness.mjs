// Starting wgpu-llama with stories260K and the built UI, and a headless Chromium on it.
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";

import { chromium } from "playwright-core";

const bin = process.env.WGPU_LLAMA_BIN;
const shared = process.env.WGPU_LLAMA_SHARED;
if (!bin || !shared) throw new Error("set WGPU_LLAMA_BIN (the server binary) and WGPU_LLAMA_SHARED (the shared data directory)");

const webui = new URL("..", import.meta.url).pathname;
export const screenshots = join(webui, "e2e", "screenshots");
mkdirSync(screenshots, { recursive: true });

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

/**
 * Starts the server on a free port, serving the UI it has built in (what users get), or with
 * WGPU_LLAMA_UI_DIST set (while working on the UI) webui/dist through --path, so that a rebuild
 * of the UI needs no rebuild of the binary.
 */
export async function startServer(extraArgs = []) {
  const port = await freePort();
  const args = ["--port", String(port), "-m", join(shared, "models", "stories260K.gguf"), ...extraArgs];
  if (process.env.WGPU_LLAMA_UI_DIST) args.push("--path", join(webui, "dist"));
  const proc = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  proc.stderr.on("data", (d) => (log += d));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    if (proc.exitCode !== null) throw new Error(`server exited: ${log}`);
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    stop: () => new Promise((resolve) => (proc.exitCode !== null ? resolve() : (proc.once("exit", resolve), proc.kill()))),
  };
}

export async function launchBrowser() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

/** Polls fn until it returns a truthy value. */
export async function until(fn, what, timeout = 15000) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Caps how fast the page reads from the network (-1: no cap), so a test that watches a reply
 * stream sees it arrive over seconds however fast the server generates it.
 */
export async function throttle(page, bytesPerSecond) {
  // One DevTools session a page, kept attached: detaching it lifts the cap.
  throttleSessions.set(page, throttleSessions.get(page) ?? (await page.context().newCDPSession(page)));
  await throttleSessions.get(page).send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: bytesPerSecond, uploadThroughput: -1 });
}
const throttleSessions = new WeakMap();

/** Sets values in the settings dialog (by label) and saves. */
export async function setSettings(page, values) {
  await page.getByRole("button", { name: "Settings" }).click();
  const dialog = page.getByRole("dialog", { name: "Settings" });
  for (const [label, value] of Object.entries(values)) {
    if (label === "Theme") await dialog.getByLabel("Theme").selectOption(value);
    else await dialog.getByLabel(label, { exact: true }).fill(String(value));
  }
  await dialog.getByRole("button", { name: "Save" }).click();
  await dialog.waitFor({ state: "detached" });
}

/**
 * Starts the server as a router (no -m) over --models-dir dir. When the binary is not a router
 * (it exits, or /v1/models has no status per model), it is stopped and `skip` says why.
 */
export async function startRouter(dir, extraArgs = []) {
  const port = await freePort();
  const args = ["--port", String(port), "--models-dir", dir, ...extraArgs];
  if (process.env.WGPU_LLAMA_UI_DIST) args.push("--path", join(webui, "dist"));
  const proc = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  proc.stderr.on("data", (d) => (log += d));
  const url = `http://127.0.0.1:${port}`;
  const stop = () => new Promise((resolve) => (proc.exitCode !== null ? resolve() : (proc.once("exit", resolve), proc.kill())));
  let up = false;
  for (let i = 0; i < 200 && proc.exitCode === null; i++) {
    try {
      if ((await fetch(`${url}/health`)).ok) {
        up = true;
        break;
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const tail = () => log.trim().split("\n").slice(-3).join(" | ");
  if (!up) {
    await stop();
    return { skip: `the server binary does not run as a router yet (started without -m, it ${proc.exitCode !== null ? "exited" : "never answered /health"}: ${tail()})` };
  }
  const list = await (await fetch(`${url}/v1/models`)).json().catch(() => ({}));
  if (!Array.isArray(list.data) || list.data.length === 0 || !list.data.every((m) => typeof m.status?.value === "string")) {
    await stop();
    return { skip: "the server binary does not run as a router yet (its /v1/models has no status per model)" };
  }
  return { url, stop, log: () => log };
}

/** The requests the stored assistant messages were made with, oldest first (from IndexedDB). */
export async function assistantRequests(page) {
  return page.evaluate(async () => {
    const db = await new Promise((resolve, reject) => {
      const r = indexedDB.open("wgpu-llama");
      r.onsuccess = () => resolve(r.result);
      r.onerror = () => reject(r.error);
    });
    const all = await new Promise((resolve) => {
      const q = db.transaction("messages").objectStore("messages").getAll();
      q.onsuccess = () => resolve(q.result);
    });
    return all.filter((m) => m.role === "assistant").map((m) => m.request);
  });
}
