// User settings, kept in localStorage. Sampling parameters start from the server's defaults
// (GET /props) and only those the user changed are sent, so the server's own defaults apply
// to everything else.
import { DEFAULT_TOOL_ROUNDS } from "./tools";
import type { SlotParams } from "./types";

export type Theme = "light" | "dark" | "system";

/** The sampling parameters the settings dialog edits, as named in a chat request. */
export const SAMPLING_KEYS = [
  "temperature",
  "top_k",
  "top_p",
  "min_p",
  "repeat_penalty",
  "presence_penalty",
  "frequency_penalty",
  "dry_multiplier",
  "dry_base",
  "dry_allowed_length",
  "xtc_probability",
  "xtc_threshold",
  "n_predict",
  "samplers",
] as const;
export type SamplingKey = (typeof SAMPLING_KEYS)[number];
export type Sampling = { [K in SamplingKey]: K extends "samplers" ? string[] : number };

export interface Settings {
  systemPrompt: string;
  apiKey: string;
  theme: Theme;
  /** The values the user set; a key absent follows the server's default. */
  sampling: Partial<Sampling>;
  /** Rounds of tool calls a reply may run before the UI stops running them. */
  toolRounds: number;
  /**
   * LoRA adapter scales by adapter id (GET /lora-adapters), sent as every request's `lora`;
   * empty follows the server's global scales.
   */
  lora: Record<string, number>;
}

/** A loaded LoRA adapter, as GET /lora-adapters lists it. */
export interface LoraAdapter {
  id: number;
  path: string;
  scale: number;
}

const STORAGE_KEY = "wgpu-llama.settings";

export function defaultSettings(): Settings {
  return { systemPrompt: "", apiKey: "", theme: "system", sampling: {}, toolRounds: DEFAULT_TOOL_ROUNDS, lora: {} };
}

export function loadSettings(storage: Storage = localStorage): Settings {
  try {
    const raw = storage.getItem(STORAGE_KEY);
    if (!raw) return defaultSettings();
    const saved = JSON.parse(raw) as Partial<Settings>;
    return { ...defaultSettings(), ...saved, sampling: { ...saved.sampling }, lora: { ...saved.lora } };
  } catch {
    return defaultSettings();
  }
}

export function saveSettings(s: Settings, storage: Storage = localStorage): void {
  storage.setItem(STORAGE_KEY, JSON.stringify(s));
}

/** The server's defaults for the editable parameters, from /props default_generation_settings.params. */
export function samplingDefaults(params: SlotParams): Sampling {
  const d = {} as Record<SamplingKey, unknown>;
  for (const k of SAMPLING_KEYS) {
    // /props reports f32 values (0.800000011920929); round them to what a person would type.
    const v = params[k];
    d[k] = typeof v === "number" ? Number(v.toPrecision(6)) : [...(v as string[])];
  }
  return d as Sampling;
}

/** The user's values that differ from the defaults: what a request should carry. */
export function changedSampling(values: Partial<Sampling>, defaults: Sampling): Partial<Sampling> {
  const out: Record<string, unknown> = {};
  for (const k of SAMPLING_KEYS) {
    const v = values[k];
    if (v === undefined) continue;
    if (JSON.stringify(v) !== JSON.stringify(defaults[k])) out[k] = v;
  }
  return out as Partial<Sampling>;
}

/** Applies the theme to the document: an explicit one sets data-theme, "system" follows the OS. */
export function applyTheme(theme: Theme, root: HTMLElement = document.documentElement): void {
  if (theme === "system") root.removeAttribute("data-theme");
  else root.setAttribute("data-theme", theme);
}

/**
 * The lora field a request carries: the user's scales when any differs from the adapter's
 * global one (then every adapter's, so none falls to 0), else none.
 */
export function loraField(scales: Record<string, number>, adapters: LoraAdapter[]): { id: number; scale: number }[] | undefined {
  const changed = adapters.some((a) => (scales[a.id] ?? a.scale) !== a.scale);
  if (!changed) return undefined;
  return adapters.map((a) => ({ id: a.id, scale: scales[a.id] ?? a.scale }));
}
