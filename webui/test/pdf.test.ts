// @vitest-environment node
// (jsdom's File has no arrayBuffer(); Node 20's has, as browsers do.)
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { describe, expect, it } from "vitest";

import { readAttachment } from "../src/lib/attachments";
import { pdfText } from "../src/lib/pdf";
import { toChatMessage } from "../src/lib/request";
import type { Message } from "../src/lib/types";

// A one-page PDF written by hand (Helvetica, "Hello PDF"), also attached by the browser test.
const fixture = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "hello.pdf");

describe("PDF attachments", () => {
  it("extracts the text of a PDF", async () => {
    expect(await pdfText(new Uint8Array(readFileSync(fixture)))).toBe("Hello PDF");
  });

  it("attaches a PDF as text, inlined as a fenced block with its name", async () => {
    const file = new File([readFileSync(fixture)], "hello.pdf", { type: "application/pdf" });
    const a = await readAttachment(file, undefined);
    expect(a).toEqual({ name: "hello.pdf", kind: "text", data: "Hello PDF" });
    const m = { id: "m", convId: "c", parent: null, role: "user", content: "Read this", createdAt: 0, attachments: [a] } as Message;
    expect(toChatMessage(m).content).toBe("Read this\n\nhello.pdf:\n```\nHello PDF\n```");
  });

  it("says when a file named .pdf is not one", async () => {
    const file = new File(["not a pdf"], "broken.pdf", { type: "application/pdf" });
    expect(await readAttachment(file, undefined)).toMatch(/^broken\.pdf: could not read the PDF/);
  });
});
