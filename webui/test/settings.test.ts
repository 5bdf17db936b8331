import { describe, expect, it } from "vitest";

import { buildChatRequest, toChatMessage } from "../src/lib/request";
import { changedSampling, defaultSettings, loadSettings, loraField, samplingDefaults, saveSettings } from "../src/lib/settings";
import type { Message, SlotParams } from "../src/lib/types";

const params = {
  temperature: 0.800000011920929,
  top_k: 40,
  top_p: 0.949999988079071,
  min_p: 0.05000000074505806,
  repeat_penalty: 1,
  presence_penalty: 0,
  frequency_penalty: 0,
  dry_multiplier: 0,
  dry_base: 1.75,
  dry_allowed_length: 2,
  xtc_probability: 0,
  xtc_threshold: 0.10000000149011612,
  n_predict: -1,
  samplers: ["penalties", "dry", "top_k", "temperature"],
} as unknown as SlotParams;

const msg = (role: "user" | "assistant", content: string, extra: Partial<Message> = {}): Message => ({
  id: content,
  convId: "c",
  parent: null,
  role,
  content,
  createdAt: 0,
  ...extra,
});

describe("settings", () => {
  it("takes defaults from /props, rounded", () => {
    const d = samplingDefaults(params);
    expect(d.temperature).toBe(0.8);
    expect(d.top_p).toBe(0.95);
    expect(d.samplers).toEqual(["penalties", "dry", "top_k", "temperature"]);
  });

  it("sends only the parameters changed from the defaults", () => {
    const d = samplingDefaults(params);
    expect(changedSampling({ temperature: 0.8, top_k: 40 }, d)).toEqual({});
    const s = { ...defaultSettings(), systemPrompt: "Be brief", sampling: { temperature: 0.2, top_k: 40, samplers: ["temperature"] } };
    const req = buildChatRequest([msg("user", "hi")], s, d);
    expect(req).toEqual({
      messages: [
        { role: "system", content: "Be brief" },
        { role: "user", content: "hi" },
      ],
      stream: true,
      n_probs: 5,
      temperature: 0.2,
      samplers: ["temperature"],
    });
  });

  it("sends LoRA scales only when they differ from the server's, and then every adapter's", () => {
    const adapters = [
      { id: 0, path: "a.gguf", scale: 1 },
      { id: 1, path: "b.gguf", scale: 0.5 },
    ];
    expect(loraField({}, adapters)).toBeUndefined();
    expect(loraField({ 0: 1, 1: 0.5 }, adapters)).toBeUndefined();
    expect(loraField({ 1: 0 }, adapters)).toEqual([
      { id: 0, scale: 1 },
      { id: 1, scale: 0 },
    ]);
    const s = { ...defaultSettings(), lora: { 0: 0.25 } };
    expect(buildChatRequest([msg("user", "hi")], s, null, [], adapters).lora).toEqual([
      { id: 0, scale: 0.25 },
      { id: 1, scale: 0.5 },
    ]);
    expect(buildChatRequest([msg("user", "hi")], s, null).lora).toBeUndefined(); // no adapters: no field
  });

  it("persists in localStorage", () => {
    const s = { ...defaultSettings(), apiKey: "k", theme: "dark" as const, sampling: { n_predict: 400 } };
    saveSettings(s);
    expect(loadSettings()).toEqual(s);
    localStorage.setItem("wgpu-llama.settings", "{broken");
    expect(loadSettings()).toEqual(defaultSettings());
  });

  it("inlines text files in a fence and sends images as image_url parts", () => {
    const m = msg("user", "look", {
      attachments: [
        { name: "a.md", kind: "text", data: "x ``` y\n" },
        { name: "p.png", kind: "image", data: "data:image/png;base64,AAA" },
      ],
    });
    expect(toChatMessage(m)).toEqual({
      role: "user",
      content: [
        { type: "text", text: "look\n\na.md:\n````\nx ``` y\n````" },
        { type: "image_url", image_url: { url: "data:image/png;base64,AAA" } },
      ],
    });
  });
});
