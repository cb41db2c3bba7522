/**
 * An agent's line to ask its supervisor for agents of its own: a unix socket the supervisor
 * listens on, made only for an agent whose spawn request lists personas it may spawn, and bound
 * into its sandbox at `/run/cotal/spawn.sock`. Whoever dials it is that agent (the socket exists
 * in no other sandbox), so it needs no credential; everything written on it is hostile input.
 *
 * One request per connection, one JSON line of at most {@linkcode SPAWN_LINE_MAX} bytes read
 * within {@linkcode SPAWN_READ_DEADLINE_MS}, then one JSON line back and the connection ends:
 *
 * ```text
 * {"v":1,"op":"spawn","persona":"reviewer"}      -> {"ok":true,"data":{...the child's row}}
 * {"v":1,"op":"despawn","name":"reviewer_1"}     -> {"ok":true,"data":{"name":"reviewer_1"}}
 * {"v":1,"op":"list"}                            -> {"ok":true,"data":{"children":[...]}}
 *                                                 | {"ok":false,"code":"...","message":"..."}
 * ```
 *
 * One request is served at a time (another meanwhile is refused `spawn_busy`), at most
 * {@linkcode SPAWN_MAX_CONNECTIONS} connections are open, and new ones are accepted at most
 * {@linkcode SPAWN_ACCEPTS_PER_SECOND} a second, so an agent dialling in a loop costs the
 * supervisor's one thread a bounded share.
 *
 * @module
 */
import { codeFrom, CotalError, isCotalError } from "../../errors.ts";
import { closeAll } from "./close_all.ts";

/** The protocol version this build speaks. */
export const SPAWN_CHANNEL_VERSION = 1;
/** The longest request line read. */
export const SPAWN_LINE_MAX = 4096;
/** How long a connection may take to send its request line. */
export const SPAWN_READ_DEADLINE_MS = 5_000;
/** Connections one spawn socket holds open at once. */
export const SPAWN_MAX_CONNECTIONS = 2;
/** Connections accepted per second, at most. */
export const SPAWN_ACCEPTS_PER_SECOND = 10;

/** A request on the spawn channel, validated. */
export type SpawnChannelRequest =
  | { readonly op: "spawn"; readonly persona: string }
  | { readonly op: "despawn"; readonly name: string }
  | { readonly op: "list" };

/** The answer to one request: its data, or a typed refusal. */
export type SpawnChannelReply =
  | { readonly ok: true; readonly data: Record<string, unknown> }
  | { readonly ok: false; readonly code: string; readonly message: string };

/** What the supervisor does with a request from this agent. */
export type SpawnChannelHandler = (req: SpawnChannelRequest) => Promise<Record<string, unknown>>;

/**
 * A persona's (and a spawn channel's agent) name: letters and digits, then `_` and `-` too, at
 * most 64. Personas are files named so, and spawn requests and launch files carry such names.
 */
export const PERSONA_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

function refuse(message: string): never {
  throw new CotalError("spawn_request_invalid", message);
}

/** Checks one request line; one sentence naming what is wrong. */
export function parseSpawnChannelRequest(line: string): SpawnChannelRequest {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    refuse("The request is not JSON; send one JSON object on one line.");
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    refuse("The request must be a JSON object { v, op, ... }.");
  }
  const o = v as Record<string, unknown>;
  if (o.v !== SPAWN_CHANNEL_VERSION) {
    refuse(`The request's v must be ${SPAWN_CHANNEL_VERSION}.`);
  }
  const keys: Record<string, string[]> = {
    spawn: ["v", "op", "persona"],
    despawn: ["v", "op", "name"],
    list: ["v", "op"],
  };
  const op = typeof o.op === "string" && Object.hasOwn(keys, o.op) ? o.op : undefined;
  if (!op) refuse("The request's op must be spawn, despawn or list.");
  for (const k of Object.keys(o)) {
    if (!keys[op].includes(k)) refuse(`${JSON.stringify(k)} is not a field of ${op}.`);
  }
  const name = (field: string): string => {
    const s = o[field];
    if (typeof s !== "string" || !PERSONA_NAME.test(s)) {
      refuse(`${op} needs ${field}: a name of letters, digits, _ and - (at most 64).`);
    }
    return s;
  };
  if (op === "spawn") return { op, persona: name("persona") };
  if (op === "despawn") return { op, name: name("name") };
  return { op: "list" };
}

function replyOf(err: unknown): SpawnChannelReply {
  if (isCotalError(err)) return { ok: false, code: err.code, message: err.message };
  return { ok: false, code: "internal", message: "The supervisor could not serve the request." };
}

/** Reads one line (no newline), or throws when it is too long, never ends, or is late. */
async function readLine(conn: Deno.Conn, deadlineMs: number): Promise<string> {
  const buf = new Uint8Array(SPAWN_LINE_MAX + 1);
  let used = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((r) => (timer = setTimeout(() => r("late"), deadlineMs)));
  const unfinished = () =>
    new CotalError(
      "spawn_request_invalid",
      `The request did not end with a newline within ${deadlineMs / 1000} s.`,
    );
  try {
    while (used < buf.length) {
      // A read still pending at the deadline ends when the connection is closed after the reply.
      const read = conn.read(buf.subarray(used)).catch(() => null);
      const n = await Promise.race([read, late]);
      if (n === null || n === "late") throw unfinished();
      const nl = buf.subarray(used, used + n).indexOf(10);
      if (nl >= 0) return new TextDecoder().decode(buf.subarray(0, used + nl));
      used += n;
    }
    throw new CotalError(
      "spawn_request_invalid",
      `The request line is longer than ${SPAWN_LINE_MAX} bytes.`,
    );
  } finally {
    clearTimeout(timer);
  }
}

/** The supervisor's end of one agent's spawn socket. */
export class SpawnChannel {
  readonly path: string;
  readonly #listener: Deno.Listener;
  readonly #handler: SpawnChannelHandler;
  readonly #conns = new Set<Deno.Conn>();
  #busy = false;
  #closed = false;

  private constructor(path: string, listener: Deno.Listener, handler: SpawnChannelHandler) {
    this.path = path;
    this.#listener = listener;
    this.#handler = handler;
    this.#accept();
  }

  /** Listens on `path` (0600, owned by `owner` when given). */
  static async listen(
    path: string,
    handler: SpawnChannelHandler,
    owner?: { uid: number; gid: number },
  ): Promise<SpawnChannel> {
    await Deno.remove(path).catch(() => {});
    const listener = Deno.listen({ transport: "unix", path });
    await Deno.chmod(path, 0o600);
    if (owner) await Deno.chown(path, owner.uid, owner.gid);
    return new SpawnChannel(path, listener, handler);
  }

  async #accept(): Promise<void> {
    const pace = 1000 / SPAWN_ACCEPTS_PER_SECOND;
    try {
      for await (const conn of this.#listener) {
        if (this.#conns.size >= SPAWN_MAX_CONNECTIONS) {
          this.#end(conn);
        } else {
          this.#conns.add(conn);
          this.#serve(conn).finally(() => {
            this.#conns.delete(conn);
            this.#end(conn);
          });
        }
        await new Promise((r) => setTimeout(r, pace));
        if (this.#closed) return;
      }
    } catch {
      // Listener closed.
    }
  }

  async #serve(conn: Deno.Conn): Promise<void> {
    let reply: SpawnChannelReply;
    try {
      const req = parseSpawnChannelRequest(await readLine(conn, SPAWN_READ_DEADLINE_MS));
      if (this.#busy) {
        throw new CotalError(
          "spawn_busy",
          "The supervisor is serving another request of this agent; try again when it answers.",
        );
      }
      this.#busy = true;
      try {
        reply = { ok: true, data: await this.#handler(req) };
      } finally {
        this.#busy = false;
      }
    } catch (err) {
      reply = replyOf(err);
    }
    if (this.#closed) return;
    // The reply is one small line: the socket's buffer takes it whether or not the agent reads.
    await conn.write(new TextEncoder().encode(JSON.stringify(reply) + "\n")).catch(() => {});
  }

  #end(conn: Deno.Conn): void {
    closeAll([conn]);
  }

  /** Closes the socket and every connection. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    closeAll([this.#listener, ...this.#conns]);
    await Deno.remove(this.path).catch(() => {});
  }
}

/**
 * The agent's end: sends one request on the socket at `path` and returns the answer's data, or
 * throws its refusal as a `CotalError` (`spawn_unreachable` when the socket cannot be used or
 * nothing answers within `timeoutMs`).
 */
export async function askSpawnChannel(
  path: string,
  req: SpawnChannelRequest,
  timeoutMs: number,
): Promise<Record<string, unknown>> {
  const unreachable = (why: string) =>
    new CotalError(
      "spawn_unreachable",
      `The supervisor's spawn channel at ${path} ${why}; is this agent still managed by it?`,
    );
  let conn: Deno.Conn;
  try {
    conn = await Deno.connect({ transport: "unix", path });
  } catch {
    throw unreachable("cannot be dialled");
  }
  const timer = setTimeout(() => closeAll([conn]), timeoutMs);
  try {
    await conn.write(new TextEncoder().encode(JSON.stringify({ v: 1, ...req }) + "\n"));
    let text = "";
    const dec = new TextDecoder();
    for await (const chunk of conn.readable) {
      text += dec.decode(chunk, { stream: true });
      if (text.includes("\n") || text.length > 1 << 20) break;
    }
    const line = text.split("\n")[0];
    let reply: SpawnChannelReply;
    try {
      reply = JSON.parse(line);
    } catch {
      throw unreachable(`gave no answer within ${Math.round(timeoutMs / 1000)} s`);
    }
    if (!reply.ok) throw new CotalError(codeFrom(reply.code, "remote_failed"), reply.message);
    return reply.data;
  } catch (err) {
    if (isCotalError(err)) throw err;
    throw unreachable(`failed (${(err as Error).message})`);
  } finally {
    clearTimeout(timer);
    closeAll([conn]);
  }
}
