import Dexie, { type EntityTable } from "dexie";

import type { Conversation, Message } from "./types";

/** The browser's store of conversations and their messages. */
export class ChatDatabase extends Dexie {
  conversations!: EntityTable<Conversation, "id">;
  messages!: EntityTable<Message, "id">;

  constructor(name = "wgpu-llama") {
    super(name);
    this.version(1).stores({
      conversations: "id, updatedAt",
      messages: "id, convId, parent",
    });
  }
}

export const db = new ChatDatabase();
