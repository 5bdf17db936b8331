// The messages of a conversation form a tree: each has a parent, edits and regenerations add
// siblings. These functions work on any set of messages, in memory.
import type { Message } from "./types";

type Messages = Record<string, Message>;

/** The messages from the root to leaf, in order. */
export function pathTo(messages: Messages, leaf: string | null): Message[] {
  const path: Message[] = [];
  const seen = new Set<string>();
  for (let m = leaf ? messages[leaf] : undefined; m && !seen.has(m.id); m = m.parent ? messages[m.parent] : undefined) {
    seen.add(m.id);
    path.push(m);
  }
  return path.reverse();
}

/** The children of parent (null: the roots), oldest first. */
export function childrenOf(messages: Messages, parent: string | null): Message[] {
  return Object.values(messages)
    .filter((m) => m.parent === parent)
    .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
}

/** The message and its siblings (itself included), oldest first. */
export function siblingsOf(messages: Messages, id: string): Message[] {
  const m = messages[id];
  return m ? childrenOf(messages, m.parent) : [];
}

/** The leaf reached from id by always following the newest child. */
export function newestLeafUnder(messages: Messages, id: string): string {
  let leaf = id;
  for (;;) {
    const kids = childrenOf(messages, leaf);
    const last = kids[kids.length - 1];
    if (!last) return leaf;
    leaf = last.id;
  }
}

/** The leaf to show after moving from message id to its sibling `step` places away (±1). */
export function switchBranch(messages: Messages, id: string, step: number): string | null {
  const sibs = siblingsOf(messages, id);
  const i = sibs.findIndex((m) => m.id === id);
  const next = sibs[i + step];
  return next ? newestLeafUnder(messages, next.id) : null;
}
