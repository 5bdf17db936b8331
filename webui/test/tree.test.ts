import { beforeEach, describe, expect, it } from "vitest";

import { addMessage, createConversation, deleteConversation, listConversations, messagesOf, exportConversations, importConversations } from "../src/lib/conversations";
import { ChatDatabase } from "../src/lib/db";
import { pathTo, siblingsOf, switchBranch } from "../src/lib/tree";

let db: ChatDatabase;
let n = 0;
beforeEach(() => {
  db = new ChatDatabase(`test-${n++}`);
});

describe("conversation tree", () => {
  it("adds messages along a branch and follows the path to the leaf", async () => {
    const c = await createConversation(db);
    const u1 = await addMessage(db, c.id, null, { role: "user", content: "Hello there" });
    const a1 = await addMessage(db, c.id, u1.id, { role: "assistant", content: "Hi" });
    const u2 = await addMessage(db, c.id, a1.id, { role: "user", content: "More" });
    const conv = await db.conversations.get(c.id);
    expect(conv?.currentLeaf).toBe(u2.id);
    expect(conv?.title).toBe("Hello there");
    const msgs = await messagesOf(db, c.id);
    expect(pathTo(msgs, u2.id).map((m) => m.content)).toEqual(["Hello there", "Hi", "More"]);
  });

  it("branches on edit and regenerate, and switches between branches without losing any", async () => {
    const c = await createConversation(db);
    const u1 = await addMessage(db, c.id, null, { role: "user", content: "first" });
    const a1 = await addMessage(db, c.id, u1.id, { role: "assistant", content: "reply 1" });
    // Regenerate: a sibling reply under the same user message.
    const a2 = await addMessage(db, c.id, u1.id, { role: "assistant", content: "reply 2" });
    // Edit: a sibling user message, with its own reply.
    const e1 = await addMessage(db, c.id, null, { role: "user", content: "edited" });
    const ea = await addMessage(db, c.id, e1.id, { role: "assistant", content: "edited reply" });
    const msgs = await messagesOf(db, c.id);

    expect(siblingsOf(msgs, a1.id).map((m) => m.id)).toEqual([a1.id, a2.id]);
    expect(siblingsOf(msgs, u1.id).map((m) => m.id)).toEqual([u1.id, e1.id]);

    // Back to the first user message: its newest reply is shown.
    const leaf = switchBranch(msgs, e1.id, -1);
    expect(leaf).toBe(a2.id);
    expect(pathTo(msgs, leaf).map((m) => m.content)).toEqual(["first", "reply 2"]);
    expect(switchBranch(msgs, a2.id, -1)).toBe(a1.id);
    expect(switchBranch(msgs, a1.id, -1)).toBeNull();
    expect(switchBranch(msgs, u1.id, 1)).toBe(ea.id);
    expect(Object.keys(msgs)).toHaveLength(5);
  });

  it("searches titles and message text, newest first", async () => {
    const a = await createConversation(db);
    await addMessage(db, a.id, null, { role: "user", content: "about zebras" });
    const b = await createConversation(db);
    const bu = await addMessage(db, b.id, null, { role: "user", content: "cats" });
    await addMessage(db, b.id, bu.id, { role: "assistant", content: "Zebra stripes too" });
    expect((await listConversations(db)).map((c) => c.id)).toEqual([b.id, a.id]);
    expect((await listConversations(db, "ZEBRA")).map((c) => c.id)).toEqual([b.id, a.id]);
    expect((await listConversations(db, "cats")).map((c) => c.id)).toEqual([b.id]);
    await deleteConversation(db, b.id);
    expect(await messagesOf(db, b.id)).toEqual({});
  });

  it("exports and imports conversations whole", async () => {
    const a = await createConversation(db);
    const u = await addMessage(db, a.id, null, { role: "user", content: "q" });
    await addMessage(db, a.id, u.id, { role: "assistant", content: "half", state: "streaming" });
    const file = JSON.parse(JSON.stringify(await exportConversations(db)));
    const other = new ChatDatabase(`test-${n++}`);
    expect(await importConversations(other, file)).toBe(1);
    const msgs = Object.values(await messagesOf(other, a.id));
    expect(msgs).toHaveLength(2);
    expect(msgs.find((m) => m.role === "assistant")?.state).toBe("stopped");
    await expect(importConversations(other, { nope: 1 })).rejects.toThrow();
  });
});
