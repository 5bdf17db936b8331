// The models the server offers. A router (llama-server's router mode) lists many, each with a
// status, loads and unloads them on request and reports every change on GET /models/sse; a
// single-model server lists its one model, always loaded.
import type { Server } from "./server";
import { errorText } from "./stream";
import type { ModelsEvent, Props, RouterModelList } from "./types";

export type ModelStatus = "unloaded" | "loading" | "loaded" | "sleeping" | "failed" | "downloading";

export interface ModelInfo {
  id: string;
  status: ModelStatus;
  /** How far a load or download is, 0 to 1; null when unknown or idle. */
  progress: number | null;
  /** What the listing says the model takes besides text (router mode); /props has the last word. */
  input: { vision: boolean; audio: boolean } | null;
}

export interface Modalities {
  vision: boolean;
  audio: boolean;
}

/** Where the last picked model is kept, for new conversations. */
export const LAST_MODEL_KEY = "wgpu-llama.model";
/** How often the list is fetched again when /models/sse is not available. */
export const POLL_MS = 3000;

/** The models of a GET /v1/models answer, and whether the server is a router (its entries carry a status). */
export function parseModelList(list: RouterModelList): { router: boolean; models: ModelInfo[] } {
  const data = Array.isArray(list?.data) ? list.data : [];
  const router = data.some((e) => e.status && typeof e.status.value === "string");
  const models = data.map((e): ModelInfo => {
    const status = router ? normalizeStatus(e.status?.value, e.status?.failed === true) : "loaded";
    const input = e.architecture?.input_modalities;
    return {
      id: e.id,
      status,
      progress: status === "loading" || status === "downloading" ? progressFraction(e.status?.progress) : null,
      input: Array.isArray(input) ? { vision: input.includes("image"), audio: input.includes("audio") } : null,
    };
  });
  return { router, models };
}

/** A status as this UI shows it: llama-server marks a failed load as unloaded with failed set. */
export function normalizeStatus(value: string | undefined, failed = false, exitCode = 0): ModelStatus {
  switch (value) {
    case "loading":
    case "loaded":
    case "sleeping":
    case "failed":
    case "downloading":
      return value;
    case "unloaded":
      return failed || exitCode !== 0 ? "failed" : "unloaded";
    default:
      return "unloaded";
  }
}

/**
 * A progress report as a fraction: a number (a fraction, or a percentage above 1), or an
 * object of per-file {done, total} counts (llama-server's download progress), or {done, total}.
 */
export function progressFraction(p: unknown): number | null {
  if (typeof p === "number" && Number.isFinite(p)) return clamp(p > 1 ? p / 100 : p);
  if (!p || typeof p !== "object") return null;
  const o = p as Record<string, unknown>;
  if (typeof o.done === "number" && typeof o.total === "number") return o.total > 0 ? clamp(o.done / o.total) : null;
  if ("progress" in o) return progressFraction(o.progress);
  let done = 0;
  let total = 0;
  for (const v of Object.values(o)) {
    const f = v as { done?: unknown; total?: unknown } | null;
    if (f && typeof f.done === "number" && typeof f.total === "number") {
      done += f.done;
      total += f.total;
    }
  }
  return total > 0 ? clamp(done / total) : null;
}

function clamp(x: number): number {
  return Math.min(1, Math.max(0, x));
}

/**
 * The list after a /models/sse event, or "reload" when the event changes which models exist
 * (a download finished, a model was removed, the presets were read again, an unknown model).
 */
export function applyEvent(models: ModelInfo[], ev: ModelsEvent): ModelInfo[] | "reload" {
  const i = models.findIndex((m) => m.id === ev.model);
  const update = (patch: Partial<ModelInfo>) => models.map((m, j) => (j === i ? { ...m, ...patch } : m));
  switch (ev.event) {
    case "status_change":
    case "model_status": {
      if (i < 0) return "reload";
      const status = normalizeStatus(ev.data?.status, false, ev.data?.exit_code ?? 0);
      const busy = status === "loading" || status === "downloading";
      const was = models[i]!;
      const progress = busy ? (progressFraction(ev.data?.progress) ?? (was.status === status ? was.progress : null)) : null;
      return update({ status, progress });
    }
    case "download_progress":
      if (i < 0) return "reload";
      return update({ status: "downloading", progress: progressFraction(ev.data) });
    case "download_failed":
      if (i < 0) return "reload";
      return update({ status: "failed", progress: null });
    case "download_finished":
    case "model_remove":
    case "models_reload":
      return "reload";
    default:
      return models;
  }
}

/** The models, the one picked, and its /props, kept current from the server. */
export class ModelsState {
  router = $state(false);
  models = $state.raw<ModelInfo[]>([]);
  selected = $state("");
  error = $state("");
  /** Whether /models/sse is connected (otherwise the list is polled). */
  live = $state(false);
  /** /props per loaded model. */
  props = $state.raw<Record<string, Props>>({});

  current = $derived(this.models.find((m) => m.id === this.selected) ?? null);
  currentProps = $derived<Props | null>(this.props[this.selected] ?? null);

  #listeners = new Set<() => void>();
  #epoch = 0;

  constructor(
    private readonly server: Server,
    private readonly storage: Pick<Storage, "getItem" | "setItem"> = localStorage,
  ) {}

  /** Fetches the list; the first time, picks the last model picked or the first one loaded. */
  async refresh(): Promise<void> {
    const epoch = this.#epoch;
    const list = await this.server.listModels();
    // A list asked for before a load or unload started may not show it yet: the events will.
    if (epoch !== this.#epoch) return;
    const { router, models } = parseModelList(list);
    // A router with no models yet is still a router.
    this.router = router || (models.length === 0 && this.router);
    this.#set(models);
    if (!this.selected || !models.some((m) => m.id === this.selected)) {
      const last = this.storage.getItem(LAST_MODEL_KEY) ?? "";
      this.selected = models.find((m) => m.id === last)?.id ?? models.find((m) => m.status === "loaded")?.id ?? models[0]?.id ?? "";
    }
  }

  /** Shows the last model picked again (a new chat uses it), without loading it. */
  selectLast(): void {
    const last = this.storage.getItem(LAST_MODEL_KEY);
    if (last && this.models.some((m) => m.id === last)) this.selected = last;
  }

  /** In single-model mode, the server's /props is the model's. */
  setSingleProps(props: Props): void {
    if (!this.router && this.selected) this.props = { ...this.props, [this.selected]: props };
  }

  /**
   * Follows /models/sse, or polls the list every POLL_MS while it is unavailable, until the
   * returned function is called. A single-model server has nothing to follow.
   */
  follow(pollMs = POLL_MS): () => void {
    const controller = new AbortController();
    const { signal } = controller;
    const sleep = (ms: number) => new Promise<void>((r) => { const t = setTimeout(r, ms); signal.addEventListener("abort", () => { clearTimeout(t); r(); }, { once: true }); });
    void (async () => {
      while (!signal.aborted && this.router) {
        try {
          const events = this.server.modelEvents(signal);
          // Events from before the subscription are in the list fetched after it.
          const first = events.next();
          this.live = true;
          void this.refresh().catch(() => {});
          for (let r = await first; !r.done; r = await events.next()) this.#onEvent(r.value);
        } catch (e) {
          if (signal.aborted) return;
          // Not an error to show: the list is polled instead.
          console.warn(`/models/sse: ${errorText(e)}`);
        }
        this.live = false;
        // No stream (or it ended): poll a while, then try the stream again.
        for (let i = 0; i < 5 && !signal.aborted; i++) {
          await sleep(pollMs);
          if (signal.aborted) return;
          await this.refresh().catch((e) => console.warn(`/v1/models: ${errorText(e)}`));
        }
      }
    })();
    return () => controller.abort();
  }

  /** Picks a model (remembered for new conversations) and, in router mode, loads it if it is not. */
  async select(id: string, { load = true, remember = true } = {}): Promise<void> {
    if (!this.models.some((m) => m.id === id)) return;
    this.selected = id;
    if (remember) this.storage.setItem(LAST_MODEL_KEY, id);
    const m = this.current;
    if (this.router && load && m && (m.status === "unloaded" || m.status === "failed")) await this.load(id);
  }

  /** POST /models/load, then waits for the model to be loaded (or to fail); throws on failure. */
  async load(id: string): Promise<void> {
    this.error = "";
    this.#epoch++;
    this.#patch(id, { status: "loading", progress: null });
    try {
      await this.server.loadModel(id);
    } catch (e) {
      this.error = errorText(e);
      await this.refresh().catch(() => {});
      throw e;
    }
    const m = await this.#until(() => {
      const x = this.models.find((y) => y.id === id);
      return !x || (x.status !== "loading" && x.status !== "downloading") ? (x ?? null) : undefined;
    });
    if (m?.status !== "loaded" && m?.status !== "sleeping") {
      this.error = `${id} failed to load`;
      throw new Error(this.error);
    }
  }

  async unload(id: string): Promise<void> {
    this.error = "";
    this.#epoch++;
    try {
      await this.server.unloadModel(id);
    } catch (e) {
      this.error = errorText(e);
      throw e;
    }
    await this.#until(() => (this.models.find((m) => m.id === id)?.status ?? "unloaded") === "unloaded" || undefined);
  }

  /**
   * What a model takes besides text: its /props when loaded, else what the listing says;
   * null when neither is known.
   */
  modalities(id = this.selected): Modalities | null {
    const p = this.props[id]?.modalities;
    if (p) return { vision: p.vision, audio: p.audio };
    return this.models.find((m) => m.id === id)?.input ?? null;
  }

  #onEvent(ev: ModelsEvent): void {
    // A list asked for before this event may predate it.
    this.#epoch++;
    const next = applyEvent(this.models, ev);
    if (next === "reload") void this.refresh().catch((e) => (this.error = errorText(e)));
    else if (next !== this.models) this.#set(next);
  }

  #patch(id: string, patch: Partial<ModelInfo>): void {
    this.#set(this.models.map((m) => (m.id === id ? { ...m, ...patch } : m)));
  }

  /** Replaces the list; a model that became loaded has its /props fetched, one that left it has them dropped. */
  #set(models: ModelInfo[]): void {
    const before = new Map(this.models.map((m) => [m.id, m.status]));
    this.models = models;
    if (this.router) {
      const props = { ...this.props };
      let changed = false;
      for (const m of models) {
        const ready = m.status === "loaded" || m.status === "sleeping";
        if (!ready && props[m.id]) {
          delete props[m.id];
          changed = true;
        } else if (ready && (before.get(m.id) !== m.status || !props[m.id])) {
          void this.#fetchProps(m.id);
        }
      }
      if (changed) this.props = props;
    }
    for (const l of this.#listeners) l();
  }

  #fetching = new Set<string>();
  async #fetchProps(id: string): Promise<void> {
    if (this.#fetching.has(id)) return;
    this.#fetching.add(id);
    try {
      const p = await this.server.modelProps(id);
      if (this.models.find((m) => m.id === id)?.status === "loaded" || this.models.find((m) => m.id === id)?.status === "sleeping") {
        this.props = { ...this.props, [id]: p };
      }
    } catch {
      // Not ready after all: the next status change fetches them again.
    } finally {
      this.#fetching.delete(id);
    }
  }

  /** Resolves with fn's value once it is not undefined, checking after every change of the list. */
  #until<T>(fn: () => T | undefined): Promise<T> {
    return new Promise((resolve) => {
      const check = () => {
        const v = fn();
        if (v === undefined) return;
        this.#listeners.delete(check);
        resolve(v);
      };
      this.#listeners.add(check);
      check();
    });
  }
}
