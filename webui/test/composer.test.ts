import { flushSync, mount, unmount } from "svelte";
import { expect, test } from "vitest";

import Composer from "../src/components/Composer.svelte";
import type { ChatState } from "../src/lib/chat.svelte";

// A send that fails (the browser's storage refusing the message, say) gives the text back with
// the reason, instead of losing what was typed.
test("a failed send restores the message and says why", async () => {
  const chat = {
    busy: false,
    tools: [],
    enabledTools: [],
    send: () => Promise.reject(new Error("QuotaExceededError")),
    stopAll: () => {},
  } as unknown as ChatState;
  const target = document.createElement("div");
  document.body.append(target);
  const app = mount(Composer, { target, props: { chat, modalities: null } });
  const box = target.querySelector<HTMLTextAreaElement>('textarea[aria-label="Message"]')!;
  box.value = "Tell me a story";
  box.dispatchEvent(new Event("input", { bubbles: true }));
  flushSync();
  box.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
  flushSync();
  await new Promise((r) => setTimeout(r, 0));
  flushSync();
  expect(box.value).toBe("Tell me a story");
  expect(target.textContent).toContain("Could not send: QuotaExceededError");
  unmount(app);
});
