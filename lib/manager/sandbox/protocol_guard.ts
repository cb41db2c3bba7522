/**
 * What an agent may say to the broker through its relay: a checked subset of the NATS client
 * protocol, re-written in canonical form.
 *
 * nats-server never checks a request's reply subject. The JetStream API answers, with the
 * space account's rights, on whatever subject the requester names, and a push consumer
 * delivers to whatever `deliver_subject` its create names: an agent could aim answers at
 * another principal's history, DMs, tasks or bucket rows (they are stored and counted against
 * those limits) or at a subject every watcher receives. The broker cannot be told otherwise, so
 * the relay, which carries every byte a sandboxed agent sends, allows only:
 *
 * - the operations a client needs (`CONNECT`, `PING`, `PONG`, `SUB`, `UNSUB`, `PUB`, `HPUB`),
 *   each parsed and sent on re-serialized, so the broker never sees a line the guard read
 *   differently;
 * - a reply subject only under the agent's own inbox (`_INBOX_<id>.`), the one place its
 *   credentials may subscribe;
 * - a consumer create only without a `deliver_subject` outside that inbox (its fields in
 *   plain lowercase, the only spelling the guard and the broker read alike);
 * - a stream info request only without `subjects_filter` (whose answer lists every subject
 *   stored, up to the broker's payload limit: a ~70-byte request for a ~1 MB answer).
 *
 * Anything else ends the connection with `-ERR 'cotal relay: <why>'`.
 *
 * @module
 */

/** Longest control line (a CONNECT carries the agent's JWT): the broker's `max_control_line`. */
export const GUARD_MAX_LINE = 65_536;
/** Largest message: the broker's default `max_payload` (1 MiB). */
export const GUARD_MAX_PAYLOAD = 1_048_576;

/** What the guard checks a connection against. */
export interface GuardPolicy {
  /** The agent's inbox prefix without the dot (`_INBOX_<id>`). */
  readonly inboxPrefix: string;
}

/** The result of one chunk: bytes for the broker, or why the connection ends. */
export interface GuardStep {
  readonly out: Uint8Array[];
  readonly refused?: string;
}

const enc = new TextEncoder();
const dec = new TextDecoder();
const CRLF = enc.encode("\r\n");
const SIZE = /^[0-9]{1,10}$/;

/** A subject, queue or sid token: printable ASCII, no whitespace. */
function token(t: string): boolean {
  return t.length > 0 && t.length <= 4096 && /^[\x21-\x7e]+$/.test(t);
}

/** A PUB/HPUB line was read: its body comes next. */
const AWAIT_BODY = Symbol("await body");

interface Pending {
  readonly head: string;
  readonly subject: string;
  readonly headerBytes: number;
  readonly size: number;
}

/** Checks one connection's client-to-broker bytes, chunk by chunk. */
export class ProtocolGuard {
  readonly #policy: GuardPolicy;
  #buf: Uint8Array = new Uint8Array(0);
  #pending?: Pending;
  #refused?: string;

  constructor(policy: GuardPolicy) {
    this.#policy = policy;
  }

  /** Takes the next bytes the agent sent; returns what goes on to the broker. */
  push(chunk: Uint8Array): GuardStep {
    if (this.#refused) return { out: [], refused: this.#refused };
    this.#buf = concat(this.#buf, chunk);
    const out: Uint8Array[] = [];
    try {
      for (;;) {
        const piece = this.#next();
        if (piece === undefined) break;
        if (piece !== AWAIT_BODY) out.push(piece);
      }
    } catch (err) {
      if (!(err instanceof Refusal)) throw err;
      this.#refused = err.message;
      return { out, refused: err.message };
    }
    return { out };
  }

  /**
   * One complete operation in canonical form; {@linkcode AWAIT_BODY} after a PUB line (its
   * body is next); undefined until more bytes arrive.
   */
  #next(): Uint8Array | typeof AWAIT_BODY | undefined {
    if (this.#pending) return this.#payload(this.#pending);
    const nl = this.#buf.indexOf(0x0a);
    if (nl < 0) {
      if (this.#buf.length > GUARD_MAX_LINE) refuse("a protocol line is longer than 64 KiB");
      return undefined;
    }
    if (nl > GUARD_MAX_LINE) refuse("a protocol line is longer than 64 KiB");
    let line = dec.decode(this.#buf.subarray(0, nl));
    this.#buf = this.#buf.subarray(nl + 1);
    if (line.endsWith("\r")) line = line.slice(0, -1);
    return this.#line(line);
  }

  #line(line: string): Uint8Array | typeof AWAIT_BODY {
    const m = /^([A-Za-z]+)(?:[ \t]+(.*))?$/.exec(line);
    if (!m) refuse("a protocol line is not an operation");
    const op = m[1].toUpperCase();
    const rest = (m[2] ?? "").trim();
    if (op === "CONNECT") return enc.encode(`CONNECT ${connectJson(rest)}\r\n`);
    const args = rest === "" ? [] : rest.split(/[ \t]+/);
    if (!args.every(token)) refuse(`${op} has a malformed argument`);
    switch (op) {
      case "PING":
      case "PONG":
        if (args.length) refuse(`${op} takes no arguments`);
        return enc.encode(`${op}\r\n`);
      case "SUB":
        if (args.length !== 2 && args.length !== 3) {
          refuse("SUB takes a subject, a queue and an id");
        }
        return enc.encode(`SUB ${args.join(" ")}\r\n`);
      case "UNSUB":
        if (args.length !== 1 && !(args.length === 2 && SIZE.test(args[1]))) {
          refuse("UNSUB takes an id and a count");
        }
        return enc.encode(`UNSUB ${args.join(" ")}\r\n`);
      case "PUB":
        return this.#publish(op, args, false);
      case "HPUB":
        return this.#publish(op, args, true);
      default:
        refuse(`the operation ${JSON.stringify(op.slice(0, 16))} is not one a client sends`);
    }
  }

  #publish(op: string, args: string[], headers: boolean): typeof AWAIT_BODY {
    const sizes = headers ? 2 : 1;
    if (args.length !== 1 + sizes && args.length !== 2 + sizes) {
      refuse(`${op} has ${args.length} arguments`);
    }
    const subject = args[0];
    const reply = args.length === 2 + sizes ? args[1] : undefined;
    const nums = args.slice(args.length - sizes);
    if (!nums.every((n) => SIZE.test(n))) refuse(`${op} has a size that is not a number`);
    const size = Number(nums[nums.length - 1]);
    const headerBytes = headers ? Number(nums[0]) : 0;
    if (size > GUARD_MAX_PAYLOAD) refuse("a message is larger than the broker limit of 1 MiB");
    if (headerBytes > size) refuse(`${op} has headers larger than its message`);
    const inbox = `${this.#policy.inboxPrefix}.`;
    if (reply !== undefined && !(reply.startsWith(inbox) && reply.length > inbox.length)) {
      refuse(`a reply subject must be under the inbox of this agent, ${inbox}>`);
    }
    const head = headers
      ? `HPUB ${subject}${reply ? ` ${reply}` : ""} ${headerBytes} ${size}`
      : `PUB ${subject}${reply ? ` ${reply}` : ""} ${size}`;
    this.#pending = { head, subject, headerBytes, size };
    return AWAIT_BODY;
  }

  /** The message body of a PUB/HPUB once it is all here (with its CRLF). */
  #payload(p: Pending): Uint8Array | undefined {
    if (this.#buf.length < p.size + 2) return undefined;
    if (this.#buf[p.size] !== 0x0d || this.#buf[p.size + 1] !== 0x0a) {
      refuse("a message is not followed by CRLF where its size says it ends");
    }
    const body = this.#buf.slice(0, p.size);
    this.#buf = this.#buf.subarray(p.size + 2);
    this.#pending = undefined;
    this.#checkBody(p.subject, body.subarray(p.headerBytes));
    return concat(concat(enc.encode(`${p.head}\r\n`), body), CRLF);
  }

  /** JetStream API bodies that would aim the broker's deliveries or blow its answers up. */
  #checkBody(subject: string, body: Uint8Array): void {
    if (!subject.startsWith("$JS.API.")) return;
    const api = subject.slice("$JS.API.".length).toUpperCase();
    const create = api.startsWith("CONSUMER.CREATE.") || api.startsWith("CONSUMER.DURABLE.CREATE.");
    const info = api.startsWith("STREAM.INFO.");
    if (!create && !info) return;
    if (body.length === 0) return;
    let req: unknown;
    try {
      req = JSON.parse(dec.decode(body));
    } catch {
      refuse("a JetStream API request body is not JSON");
    }
    const r = plainKeys(req, "a JetStream API request");
    if (info && (r.subjects_filter !== undefined || r.deleted_details !== undefined)) {
      refuse("a stream info request may not list subjects or deleted messages");
    }
    if (create) {
      const cfg = r.config === undefined ? {} : plainKeys(r.config, "a consumer config");
      const to = cfg.deliver_subject;
      const inbox = `${this.#policy.inboxPrefix}.`;
      if (to !== undefined && !(typeof to === "string" && to.startsWith(inbox))) {
        refuse(`a consumer deliver subject must be under the inbox of this agent, ${inbox}>`);
      }
    }
  }
}

/**
 * `v` as an object whose keys are plain lowercase ASCII. The broker's JSON decoder matches
 * field names case-insensitively, with Unicode folding (`DELIVER_SUBJECT`, or a long s for
 * an `s`, would still set `deliver_subject`), so any other key is refused rather than checked.
 */
function plainKeys(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) refuse(`${what} is not an object`);
  for (const k of Object.keys(v)) {
    if (!/^[a-z0-9_]+$/.test(k)) refuse(`${what} has a field name that is not lowercase ASCII`);
  }
  return v as Record<string, unknown>;
}

class Refusal extends Error {}

function refuse(why: string): never {
  throw new Refusal(why);
}

/** The CONNECT options, re-serialized (an object, or the connection ends). */
function connectJson(text: string): string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    refuse("CONNECT is not followed by JSON");
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) refuse("CONNECT is not an object");
  return JSON.stringify(v);
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b.slice();
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
