// Conversations and their message trees in IndexedDB. Every function takes the database so tests
// can use a fresh one.
import type { ChatDatabase } from "./db";
import { newId } from "./ids";
import type { Conversation, Message } from "./types";

const TITLE_LENGTH = 60;

export async function createConversation(db: ChatDatabase, title = "New chat", model?: string): Promise<Conversation> {
  const now = Date.now();
  const c: Conversation = { id: newId(), title, createdAt: now, updatedAt: now, currentLeaf: null, ...(model ? { model } : {}) };
  await db.conversations.add(c);
  return c;
}

/** Newest first; with a query, those whose title or any message's text contains it. */
export async function listConversations(db: ChatDatabase, query = ""): Promise<Conversation[]> {
  const all = await db.conversations.orderBy("updatedAt").reverse().toArray();
  const q = query.trim().toLowerCase();
  if (!q) return all;
  const inText = new Set(
    (await db.messages.filter((m) => m.content.toLowerCase().includes(q)).toArray()).map((m) => m.convId),
  );
  return all.filter((c) => c.title.toLowerCase().includes(q) || inText.has(c.id));
}

export async function messagesOf(db: ChatDatabase, convId: string): Promise<Record<string, Message>> {
  const list = await db.messages.where("convId").equals(convId).toArray();
  return Object.fromEntries(list.map((m) => [m.id, m]));
}

/**
 * Adds a message under parent and makes it the conversation's current leaf; the first user
 * message names an untitled conversation.
 */
export async function addMessage(
  db: ChatDatabase,
  convId: string,
  parent: string | null,
  fields: Pick<Message, "role" | "content"> & Partial<Message>,
): Promise<Message> {
  const m: Message = { ...fields, id: newId(), convId, parent, createdAt: nextTime() };
  await db.transaction("rw", db.conversations, db.messages, async () => {
    await db.messages.add(m);
    const c = await db.conversations.get(convId);
    if (!c) throw new Error(`no conversation ${convId}`);
    const title = c.title === "New chat" && m.role === "user" && m.content.trim() ? titleOf(m.content) : c.title;
    await db.conversations.update(convId, { currentLeaf: m.id, updatedAt: m.createdAt, title });
  });
  return m;
}

export async function updateMessage(db: ChatDatabase, id: string, changes: Partial<Message>): Promise<void> {
  await db.messages.update(id, changes);
}

export async function setCurrentLeaf(db: ChatDatabase, convId: string, leaf: string | null): Promise<void> {
  await db.conversations.update(convId, { currentLeaf: leaf });
}

/** Which model (router mode) the conversation talks to from now on. */
export async function setConversationModel(db: ChatDatabase, id: string, model: string): Promise<void> {
  await db.conversations.update(id, { model });
}

/** Which server tools the conversation offers the model from now on. */
export async function setConversationTools(db: ChatDatabase, id: string, tools: string[]): Promise<void> {
  await db.conversations.update(id, { tools });
}

export async function renameConversation(db: ChatDatabase, id: string, title: string): Promise<void> {
  await db.conversations.update(id, { title: title.trim() || "Untitled" });
}

export async function deleteConversation(db: ChatDatabase, id: string): Promise<void> {
  await db.transaction("rw", db.conversations, db.messages, async () => {
    await db.messages.where("convId").equals(id).delete();
    await db.conversations.delete(id);
  });
}

/** The export format: whole conversations with every branch. */
export interface ExportFile {
  format: "wgpu-llama-conversations";
  version: 1;
  conversations: { conversation: Conversation; messages: Message[] }[];
}

export async function exportConversations(db: ChatDatabase, ids?: string[]): Promise<ExportFile> {
  const convs = ids ? (await db.conversations.bulkGet(ids)).filter((c) => c !== undefined) : await db.conversations.toArray();
  const conversations = [];
  for (const conversation of convs) {
    const messages = await db.messages.where("convId").equals(conversation.id).toArray();
    conversations.push({ conversation, messages });
  }
  return { format: "wgpu-llama-conversations", version: 1, conversations };
}

/** Adds the conversations of an export, replacing those with the same ids; returns how many. */
export async function importConversations(db: ChatDatabase, file: unknown): Promise<number> {
  const f = file as Partial<ExportFile>;
  if (f?.format !== "wgpu-llama-conversations" || !Array.isArray(f.conversations)) {
    throw new Error("not a wgpu-llama conversations export");
  }
  await db.transaction("rw", db.conversations, db.messages, async () => {
    for (const { conversation, messages } of f.conversations!) {
      await db.messages.where("convId").equals(conversation.id).delete();
      // A stream that was running when exported cannot be followed from another browser.
      const settled = messages.map((m) => (m.state === "streaming" ? { ...m, state: "stopped" as const } : m));
      await db.conversations.put(conversation);
      await db.messages.bulkPut(settled);
    }
  });
  return f.conversations.length;
}

function titleOf(text: string): string {
  const line = text.trim().split("\n")[0] ?? "";
  return line.length > TITLE_LENGTH ? line.slice(0, TITLE_LENGTH - 1) + "…" : line;
}

// Creation times order siblings, so two messages made in the same millisecond must differ.
let lastTime = 0;
function nextTime(): number {
  lastTime = Math.max(Date.now(), lastTime + 1);
  return lastTime;
}
