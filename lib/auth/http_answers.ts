/**
 * What the auth service's HTTP routes share: a JSON answer with the service's headers, a body
 * read up to a cap, and a one-minute throttle window.
 *
 * @module
 */

import { concatBytes } from "../bytes.ts";

/** A JSON answer: no caching, no sniffing, and any extra headers. */
export function jsonAnswer(
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: {
      "content-type": "application/json",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      ...headers,
    },
  });
}

/** The body, or `undefined` once it passes `max` bytes (declared or actual). */
export async function readCapped(req: Request, max: number): Promise<Uint8Array | undefined> {
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (!req.body) return new Uint8Array();
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    // Read (and discard) an oversized body rather than drop the socket, so the client sees
    // the 413 instead of a connection reset.
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total <= max && declared <= max) chunks.push(value);
      if (total > 4 * max) break;
    }
  } finally {
    reader.releaseLock();
  }
  if (total > max || declared > max) return undefined;
  return concatBytes(chunks);
}

/** A fixed one-minute window: `take()` is false once `limit` events happened in it. */
export class MinuteWindow {
  #start = 0;
  #count = 0;
  constructor(readonly limit: number, readonly now: () => number = Date.now) {}
  take(): boolean {
    const t = this.now();
    if (t - this.#start >= 60_000) {
      this.#start = t;
      this.#count = 0;
    }
    return ++this.#count <= this.limit;
  }
}
