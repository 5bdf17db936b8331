// Reading wgpu-llama's event streams. The server frames every event as `data: PAYLOAD` and a
// blank line. Offsets count bytes, as resumable streams do (GET /v1/stream/{id}?from=N).

const LF = 0x0a;

/**
 * The payloads of an event stream's `data:` events, read from a response body. `offset` is the
 * absolute byte offset just past the last whole event read: resuming a stream from there gives
 * exactly the events not yet seen. A partial event at the end of the body is not yielded.
 */
export class EventReader implements AsyncIterable<string> {
  #offset: number;
  readonly #body: ReadableStream<Uint8Array>;

  /** Reads body, whose first byte is at absolute offset `offset` of its stream. */
  constructor(body: ReadableStream<Uint8Array>, offset = 0) {
    this.#body = body;
    this.#offset = offset;
  }

  /** The byte offset just past the last whole event read. */
  get offset(): number {
    return this.#offset;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<string> {
    const reader = this.#body.getReader();
    const decoder = new TextDecoder();
    let pending: Uint8Array = new Uint8Array(0);
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) {
          return;
        }
        pending = concat(pending, value);
        for (let end = blankLine(pending); end >= 0; end = blankLine(pending)) {
          const event = decoder.decode(pending.subarray(0, end));
          pending = pending.subarray(end + 2);
          this.#offset += end + 2;
          const data = dataOf(event);
          if (data !== undefined) {
            yield data;
          }
        }
      }
    } finally {
      // Stopping early (break, an error) closes the connection.
      await reader.cancel().catch(() => {});
    }
  }
}

/** The index of the first "\n\n" in b, or -1. */
function blankLine(b: Uint8Array): number {
  for (let i = 0; i + 1 < b.length; i++) {
    if (b[i] === LF && b[i + 1] === LF) {
      return i;
    }
  }
  return -1;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) {
    return b;
  }
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** The data of one event (its `data:` lines joined by newlines), undefined when it has none. */
function dataOf(event: string): string | undefined {
  const lines = event
    .split("\n")
    .filter((line) => line.startsWith("data:"))
    .map((line) => line.slice(line.startsWith("data: ") ? 6 : 5));
  return lines.length > 0 ? lines.join("\n") : undefined;
}
