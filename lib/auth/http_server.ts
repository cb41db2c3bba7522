/**
 * The auth service's HTTP/1.1 listener: a small, strict server over `Deno.listen`, because the
 * daemon must hold its descriptors for the auth callout (every connect of the space reads the
 * ledger) whatever a local process does to its port. `Deno.serve` accepts every connection
 * it is given: red team 48 held ~20,000 idle ones from two unprivileged processes, the daemon
 * ran out of descriptors, its accept loop threw, and the process died, taking the callout (every
 * agent's and human's connect) with it.
 *
 * Here:
 * - at most {@linkcode HTTP_MAX_CONNECTIONS} connections are held; past it the oldest one that
 *   has not delivered a whole request is closed for the newest (a request that has arrived is
 *   answered, and an honest client sends its request the moment it connects);
 * - a connection must deliver its whole request within {@linkcode HTTP_REQUEST_DEADLINE_MS};
 * - a failed accept (out of descriptors) is retried after a pause, never thrown;
 * - one request per connection (`connection: close`); `Content-Length` bodies only, at most
 *   {@linkcode HTTP_MAX_BODY_BYTES}; a head of at most {@linkcode HTTP_MAX_HEAD_BYTES}.
 *
 * @module
 */

import { jsonAnswer } from "./http_answers.ts";

/** Connections held at once. */
export const HTTP_MAX_CONNECTIONS = 512;
/** How long a connection may take to deliver its whole request. */
export const HTTP_REQUEST_DEADLINE_MS = 5_000;
/** The largest request head (request line and headers). */
export const HTTP_MAX_HEAD_BYTES = 8 * 1024;
/** The largest request body read; a larger one is answered 413 unread. */
export const HTTP_MAX_BODY_BYTES = 64 * 1024;
/** How long the accept loop pauses after a failed accept (descriptors exhausted). */
const ACCEPT_RETRY_MS = 100;
/** How long writing one response may take. */
const WRITE_DEADLINE_MS = 5_000;

const enc = new TextEncoder();
const HEAD_END = new Uint8Array([13, 10, 13, 10]);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A running server. */
export interface HttpServer {
  readonly addr: Deno.NetAddr;
  /** Stops accepting, closes every connection. */
  shutdown(): Promise<void>;
}

interface Held {
  conn: Deno.Conn;
  /** Its whole request has arrived (it is being answered): never evicted. */
  complete: boolean;
}

/**
 * Listens on `hostname:port` and answers each request with `handler` (a WHATWG `Request` in,
 * a `Response` out). Throws what `Deno.listen` throws (the port is taken, not permitted).
 */
export function serveHttp(
  opts: { hostname: string; port: number },
  handler: (req: Request) => Promise<Response>,
): HttpServer {
  const listener = Deno.listen({ hostname: opts.hostname, port: opts.port, transport: "tcp" });
  const held = new Set<Held>();
  let closed = false;
  const host = opts.hostname.includes(":") ? `[${opts.hostname}]` : opts.hostname;
  const origin = `http://${host}:${(listener.addr as Deno.NetAddr).port}`;

  const accepting = (async () => {
    while (!closed) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch (err) {
        if (closed || err instanceof Deno.errors.BadResource) return;
        // Out of descriptors (or an aborted handshake): wait, and take the next one.
        await new Promise((r) => setTimeout(r, ACCEPT_RETRY_MS));
        continue;
      }
      if (held.size >= HTTP_MAX_CONNECTIONS) {
        let oldest: Held | undefined;
        for (const h of held) {
          if (!h.complete) {
            oldest = h;
            break;
          }
        }
        if (!oldest) {
          // Every held connection is being answered: the newcomer waits for none of them.
          close(conn);
          continue;
        }
        held.delete(oldest);
        close(oldest.conn);
      }
      const h: Held = { conn, complete: false };
      held.add(h);
      void serveOne(h, origin, handler).finally(() => {
        held.delete(h);
        close(conn);
      });
    }
  })();

  return {
    addr: listener.addr as Deno.NetAddr,
    async shutdown() {
      closed = true;
      try {
        listener.close();
      } catch {
        // Already closed.
      }
      for (const h of held) close(h.conn);
      held.clear();
      await accepting;
    },
  };
}

function close(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}

/** Reads one request from `h.conn`, answers it, and returns (the caller closes). */
async function serveOne(
  h: Held,
  origin: string,
  handler: (req: Request) => Promise<Response>,
): Promise<void> {
  const deadline = setTimeout(() => close(h.conn), HTTP_REQUEST_DEADLINE_MS);
  let parsed: Parsed | Refusal;
  try {
    parsed = await readRequest(h.conn);
  } catch {
    return; // Closed by its deadline, or by the peer.
  } finally {
    clearTimeout(deadline);
  }
  if ("status" in parsed) {
    await write(h.conn, jsonAnswer(parsed.status, { error: parsed.error, code: parsed.code }));
    return;
  }
  h.complete = true;
  let res: Response;
  try {
    const init: RequestInit = { method: parsed.method, headers: parsed.headers };
    if (parsed.body.byteLength > 0) init.body = parsed.body as Uint8Array<ArrayBuffer>;
    res = await handler(new Request(`${origin}${parsed.target}`, init));
  } catch {
    res = jsonAnswer(500, {
      error: "The request failed inside the auth service.",
      code: "internal",
    });
  }
  await write(h.conn, res);
}

interface Parsed {
  method: string;
  target: string;
  headers: Headers;
  body: Uint8Array;
}

interface Refusal {
  status: number;
  code: string;
  error: string;
}

function refusal(status: number, code: string, error: string): Refusal {
  return { status, code, error };
}

async function readRequest(conn: Deno.Conn): Promise<Parsed | Refusal> {
  let buf: Uint8Array = new Uint8Array(0);
  let headEnd = -1;
  const chunk = new Uint8Array(16 * 1024);
  while (headEnd < 0) {
    const n = await conn.read(chunk);
    if (n === null) throw new Error("closed");
    buf = concat(buf, chunk.subarray(0, n));
    headEnd = indexOf(buf, HEAD_END);
    if (headEnd < 0 && buf.byteLength > HTTP_MAX_HEAD_BYTES) {
      return refusal(
        431,
        "head_too_large",
        `The request head is over ${HTTP_MAX_HEAD_BYTES} bytes.`,
      );
    }
  }
  if (headEnd > HTTP_MAX_HEAD_BYTES) {
    return refusal(431, "head_too_large", `The request head is over ${HTTP_MAX_HEAD_BYTES} bytes.`);
  }
  let head: string;
  try {
    head = new TextDecoder("utf-8", { fatal: true }).decode(buf.subarray(0, headEnd));
  } catch {
    return refusal(400, "bad_request", "The request head is not UTF-8.");
  }
  const lines = head.split("\r\n");
  const m = /^([A-Z]{1,16}) (\/[\x21-\x7e]{0,2047}) HTTP\/1\.[01]$/.exec(lines[0]);
  if (!m) return refusal(400, "bad_request", "The request line is not METHOD /path HTTP/1.1.");
  const headers = new Headers();
  for (const line of lines.slice(1)) {
    const at = line.indexOf(":");
    const name = at > 0 ? line.slice(0, at) : "";
    const value = line.slice(at + 1).trim();
    if (!TOKEN.test(name) || hasControl(value)) {
      return refusal(400, "bad_request", "A request header is malformed.");
    }
    const lower = name.toLowerCase();
    if (lower === "content-length" && headers.has(lower)) {
      return refusal(400, "bad_request", "The request names its length twice.");
    }
    headers.append(name, value);
  }
  if (headers.has("transfer-encoding")) {
    return refusal(411, "length_required", "Send the body with a Content-Length.");
  }
  const lengthText = headers.get("content-length") ?? "0";
  if (!/^[0-9]{1,9}$/.test(lengthText)) {
    return refusal(400, "bad_request", "The Content-Length is not a number.");
  }
  const length = Number(lengthText);
  let body: Uint8Array = buf.subarray(headEnd + 4);
  if (length > HTTP_MAX_BODY_BYTES) {
    // Read (and drop) a body up to four times the cap first, so the client sees the 413 and
    // not a reset while it still writes; a larger one is cut off at once.
    for (let got = body.byteLength; got < length && length <= 4 * HTTP_MAX_BODY_BYTES;) {
      const n = await conn.read(chunk);
      if (n === null) break;
      got += n;
    }
    return refusal(413, "body_too_large", `The request body is over ${HTTP_MAX_BODY_BYTES} bytes.`);
  }
  while (body.byteLength < length) {
    const n = await conn.read(chunk);
    if (n === null) throw new Error("closed");
    body = concat(body, chunk.subarray(0, n));
  }
  return { method: m[1], target: m[2], headers, body: body.subarray(0, length) };
}

async function write(conn: Deno.Conn, res: Response): Promise<void> {
  const timer = setTimeout(() => close(conn), WRITE_DEADLINE_MS);
  try {
    const body = new Uint8Array(await res.arrayBuffer());
    const reason = res.statusText || "Status";
    let head = `HTTP/1.1 ${res.status} ${reason.replace(/[^\x20-\x7e]/g, "")}\r\n`;
    for (const [k, v] of res.headers) {
      if (k === "content-length" || k === "connection" || k === "transfer-encoding") continue;
      head += `${k}: ${v.replace(/[\r\n]/g, " ")}\r\n`;
    }
    head += `content-length: ${body.byteLength}\r\nconnection: close\r\n\r\n`;
    const out = concat(enc.encode(head), body);
    for (let at = 0; at < out.byteLength;) at += await conn.write(out.subarray(at));
  } catch {
    // The peer went away.
  } finally {
    clearTimeout(timer);
  }
}

/** A control character other than tab (a header value may not carry one). */
function hasControl(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f) return true;
  }
  return false;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a, 0);
  out.set(b, a.byteLength);
  return out;
}

function indexOf(hay: Uint8Array, needle: Uint8Array): number {
  outer: for (let i = 0; i + needle.byteLength <= hay.byteLength; i++) {
    for (let j = 0; j < needle.byteLength; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}
