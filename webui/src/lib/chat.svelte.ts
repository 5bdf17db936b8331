// The app's conversation state: the list, the open conversation's messages, and the
// generations running (which go on when another conversation is opened).
import * as store from "./conversations";
import type { ChatDatabase } from "./db";
import { newId } from "./ids";
import { buildChatRequest } from "./request";
import type { LoraAdapter, Sampling, Settings } from "./settings";
import type { Server } from "./server";
import { errorText, follow } from "./stream";
import { callParams, offeredTools, resultText, type ToolInfo } from "./tools";
import { newestLeafUnder, pathTo, switchBranch } from "./tree";
import type { Attachment, Conversation, Message, ToolCall } from "./types";

interface Running {
  controller: AbortController;
  streamId: string;
}

export class ChatState {
  conversations = $state.raw<Conversation[]>([]);
  query = $state("");
  current = $state.raw<Conversation | null>(null);
  messages = $state.raw<Record<string, Message>>({});
  /** The branch on show, root first. */
  path = $derived(pathTo(this.messages, this.current?.currentLeaf ?? null));
  /** Tool calls being run (or waiting for the user's permission) between two replies. */
  toolsRunning = $state(0);
  busy = $derived(this.path.some((m) => m.state === "streaming") || this.toolsRunning > 0);

  readonly #running = new Map<string, Running>();

  constructor(
    private readonly db: ChatDatabase,
    private readonly server: Server,
    private readonly settings: () => Settings,
    private readonly defaults: () => Sampling | null,
    private readonly nCtx: () => number | undefined,
    /** The model picked (router mode), sent as the request's `model`; undefined for a single-model server. */
    private readonly model: () => string | undefined = () => undefined,
    /** How the user answers whether a tool that writes may run (the UI's confirmation). */
    private readonly confirmTool: (call: ToolCall, tool: ToolInfo) => Promise<boolean> = async () => false,
  ) {}

  /** The server's tools (GET /tools); empty when it offers none. */
  tools = $state.raw<ToolInfo[]>([]);
  /** The server's LoRA adapters (GET /lora-adapters; none for a router), for settings.lora. */
  adapters = $state.raw<LoraAdapter[]>([]);
  /** The tools a new chat will offer, until it becomes a conversation. */
  pendingTools = $state.raw<string[]>([]);
  /** The tools the open conversation (or the new chat) offers the model. */
  enabledTools = $derived(this.current ? (this.current.tools ?? []) : this.pendingTools);

  /** Sets which tools the open conversation (or the new chat) offers the model. */
  async setTools(names: string[]): Promise<void> {
    const conv = this.current;
    if (!conv) {
      this.pendingTools = names;
      return;
    }
    await store.setConversationTools(this.db, conv.id, names);
    if (this.current?.id === conv.id) this.current = { ...this.current, tools: names };
  }

  async init(): Promise<void> {
    await this.refreshList();
    const newest = this.conversations[0];
    if (newest) await this.open(newest.id);
  }

  async refreshList(): Promise<void> {
    this.conversations = await store.listConversations(this.db, this.query);
  }

  async search(q: string): Promise<void> {
    this.query = q;
    await this.refreshList();
  }

  /** Opens a conversation and reattaches to any of its replies still streaming. */
  async open(id: string): Promise<void> {
    const c = await this.db.conversations.get(id);
    if (!c) return;
    this.current = c;
    this.messages = await store.messagesOf(this.db, id);
    for (const m of Object.values(this.messages)) {
      if (m.state === "streaming" && !this.#running.has(m.id)) this.#resume(m);
    }
  }

  newChat(): void {
    this.current = null;
    this.messages = {};
  }

  /** Sends a user message after the current leaf and generates the reply. */
  async send(text: string, attachments: Attachment[] = []): Promise<void> {
    let conv = this.current ?? (await store.createConversation(this.db, "New chat", this.model()));
    if (!this.current) {
      if (this.pendingTools.length) {
        await store.setConversationTools(this.db, conv.id, this.pendingTools);
        conv = { ...conv, tools: this.pendingTools };
      }
      this.current = conv;
      this.messages = {};
    }
    const user = await store.addMessage(this.db, conv.id, conv.currentLeaf, {
      role: "user",
      content: text,
      ...(attachments.length ? { attachments } : {}),
    });
    this.#show(user);
    // The first message may have named the conversation.
    this.current = (await this.db.conversations.get(conv.id)) ?? this.current;
    await this.#generate(user.id);
  }

  /** Edits a user message as a new sibling branch, and generates its reply. */
  async edit(id: string, text: string): Promise<void> {
    const old = this.messages[id];
    if (!old || !this.current) return;
    const user = await store.addMessage(this.db, this.current.id, old.parent, {
      role: "user",
      content: text,
      ...(old.attachments ? { attachments: old.attachments } : {}),
    });
    this.#show(user);
    await this.#generate(user.id);
  }

  /** A new reply beside an assistant message. */
  async regenerate(id: string): Promise<void> {
    const m = this.messages[id];
    if (m?.parent) await this.#generate(m.parent);
  }

  /** Replaces a failed reply with a new attempt. */
  async retry(id: string): Promise<void> {
    const m = this.messages[id];
    if (!m?.parent) return;
    await this.db.messages.delete(id);
    const { [id]: _, ...rest } = this.messages;
    this.messages = rest;
    await this.#generate(m.parent);
  }

  /** Stops a reply: closes the connection and cancels the server-side generation. */
  async stop(id: string): Promise<void> {
    const r = this.#running.get(id);
    if (!r) return;
    r.controller.abort();
    // A resumable stream goes on without its connection; DELETE ends it and frees the slot.
    await this.server.call((c) => c.deleteStream(r.streamId)).catch(() => {});
  }

  stopAll(): void {
    for (const m of this.path) if (m.state === "streaming") void this.stop(m.id);
  }

  async switchBranch(id: string, step: number): Promise<void> {
    if (!this.current) return;
    const leaf = switchBranch(this.messages, id, step);
    if (!leaf) return;
    await store.setCurrentLeaf(this.db, this.current.id, leaf);
    this.current = { ...this.current, currentLeaf: leaf };
  }

  /** Makes the open conversation use model from its next reply on. */
  async setModel(model: string): Promise<void> {
    const conv = this.current;
    if (!conv || conv.model === model) return;
    await store.setConversationModel(this.db, conv.id, model);
    if (this.current?.id === conv.id) this.current = { ...this.current, model };
  }

  async rename(id: string, title: string): Promise<void> {
    await store.renameConversation(this.db, id, title);
    if (this.current?.id === id) this.current = (await this.db.conversations.get(id)) ?? null;
    await this.refreshList();
  }

  async remove(id: string): Promise<void> {
    for (const [msgId, r] of this.#running) {
      if (this.messages[msgId]?.convId === id) r.controller.abort();
    }
    await store.deleteConversation(this.db, id);
    if (this.current?.id === id) this.newChat();
    await this.refreshList();
  }

  exportJson(ids?: string[]): Promise<store.ExportFile> {
    return store.exportConversations(this.db, ids);
  }

  async importJson(data: unknown): Promise<number> {
    const n = await store.importConversations(this.db, data);
    await this.refreshList();
    return n;
  }

  /** Starts a reply under parent, as a new child (a sibling of any reply there). */
  async #generate(parent: string): Promise<void> {
    const conv = this.current;
    if (!conv) return;
    const request = buildChatRequest(pathTo(this.messages, parent), this.settings(), this.defaults(), offeredTools(conv.tools ?? [], this.tools), this.adapters);
    const model = this.model();
    if (model) {
      request.model = model;
      await this.setModel(model);
    }
    const streamId = newId();
    const reply = await store.addMessage(this.db, conv.id, parent, {
      role: "assistant",
      content: "",
      state: "streaming",
      streamId,
      offset: 0,
      request,
      ...(this.nCtx() ? { nCtx: this.nCtx() } : {}),
    });
    this.#show(reply);
    await this.refreshList();
    const controller = new AbortController();
    const first = this.server.call((c) => c.chatStream(request, { conversationId: streamId, signal: controller.signal }));
    await this.#follow(reply, first, controller);
    await this.#runTools(reply);
  }

  /**
   * The client's tool loop: runs the calls a finished reply made of the conversation's tools
   * through POST /tools (asking first for a tool that writes), adds each result as a "tool"
   * message and generates the next reply from them, for at most settings.toolRounds rounds.
   */
  async #runTools(reply: Message): Promise<void> {
    const conv = this.current;
    const calls = reply.toolCalls ?? [];
    if (!conv || conv.id !== reply.convId || reply.state !== "done" || calls.length === 0) return;
    const enabled = conv.tools ?? [];
    const tools = calls.map((c) => this.tools.find((t) => t.tool === c.name && enabled.includes(t.tool)));
    if (tools.some((t) => !t)) return; // not one of ours: the turn ends with the call
    let rounds = 0;
    for (let m: Message | undefined = reply; m && m.role !== "user"; m = m.parent ? this.messages[m.parent] : undefined) {
      if (m.role === "assistant" && m.toolCalls?.length) rounds++;
    }
    if (rounds > this.settings().toolRounds) return;
    let parent = reply.id;
    this.toolsRunning++;
    try {
      for (const [i, call] of calls.entries()) {
        const text = await this.#runCall(call, tools[i]!);
        const result = await store.addMessage(this.db, conv.id, parent, { role: "tool", content: text, toolCallId: call.id, toolName: call.name });
        this.#show(result);
        parent = result.id;
      }
    } finally {
      this.toolsRunning--;
    }
    await this.#generate(parent);
  }

  /** Runs one call and returns what the model reads of its result. */
  async #runCall(call: ToolCall, tool: ToolInfo): Promise<string> {
    if (tool.permissions.write && !(await this.confirmTool(call, tool))) return `error: the user did not allow ${call.name} to run`;
    try {
      return resultText(await this.server.runTool(call.name, callParams(call)));
    } catch (e) {
      return `error: ${errorText(e)}`;
    }
  }

  /** Reattaches to a reply that was streaming when the page went away. */
  #resume(m: Message): void {
    if (!m.streamId) return;
    const controller = new AbortController();
    const live = { ...m };
    const first = this.server.call((c) => c.resumeChat(m.streamId!, m.offset ?? 0, { signal: controller.signal }));
    void this.#follow(live, first, controller).catch((e) => console.error(errorText(e)));
  }

  async #follow(m: Message, first: ReturnType<Server["client"]["chatStream"]>, controller: AbortController): Promise<void> {
    this.#running.set(m.id, { controller, streamId: m.streamId ?? "" });
    try {
      await follow(first, m, controller.signal, {
        update: (msg) => this.#show({ ...msg }),
        // update, not put: a reply whose conversation was deleted meanwhile stays deleted.
        persist: (msg) => this.db.messages.where("id").equals(msg.id).modify((stored) => void Object.assign(stored, msg)).then(() => {}),
        resume: (id, offset, signal) => this.server.call((c) => c.resumeChat(id, offset, { signal })),
      });
    } finally {
      this.#running.delete(m.id);
    }
  }

  /** Shows a message if its conversation is open, moving the branch to it when it is new. */
  #show(m: Message): void {
    if (this.current?.id !== m.convId) return;
    const isNew = !this.messages[m.id];
    this.messages = { ...this.messages, [m.id]: m };
    if (isNew) this.current = { ...this.current, currentLeaf: newestLeafUnder(this.messages, m.id), updatedAt: m.createdAt };
  }
}
