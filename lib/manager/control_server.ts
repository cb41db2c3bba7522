/**
 * The Manager's side of the control rail: one request in, one reply out on the subject the
 * request names (never one from the payload), and the dispatch of each command to the
 * Manager's operations with its argument checks and typed errors.
 *
 * @module
 */
import type { Msg } from "nats";
import { CotalError, isCotalError } from "../errors.ts";
import { errorText, isBrokerAnswer } from "../wire/mod.ts";
import {
  CONTROL_VERSION,
  type ControlCaller,
  type ControlReply,
  decodeRequest,
  encodeEnvelope,
  type JsonObject,
  parseRequestSubject,
  replySubject,
} from "./control_rail.ts";
import type { AgentRow, ManagedAgent } from "./managed_agent.ts";
import { headersOf, UNDECODABLE } from "../nats/mod.ts";
import { REQUEST_PROOF_WINDOW_MS } from "../trust/mod.ts";

/** What handling one request needs from its manager. */
export interface ControlServerContext {
  space: string;
  instanceId: string;
  epoch: string;
  publish(subject: string, data: Uint8Array): void;
  log(line: string): void;
  dispatch(command: string, args: JsonObject, caller: ControlCaller, nonce: string): unknown;
  /** Throws unless the request proves its caller (lib/manager/control_auth.ts). */
  verify(m: Msg, caller: ControlCaller): Promise<void>;
  /** Throws when the caller is past its cap of requests with effects, remembers the nonce otherwise. */
  remember(caller: ControlCaller, nonce: string): void;
  /** Replies to commands with effects, by caller and nonce, for their re-sends. */
  replies: ReplyCache;
}

/** Commands without effects: a caller re-sends them (same nonce) on silence. */
export const READ_ONLY_COMMANDS: ReadonlySet<string> = new Set(["status", "ps"]);

/**
 * How long the reply to a command with effects is kept for its re-sends: as long as its nonce
 * is remembered (twice the proof window), so a re-send is never taken for a new command.
 */
export const REPLY_KEEP_MS = 2 * REQUEST_PROOF_WINDOW_MS;
/** The most replies kept (the oldest finished one goes first). */
export const REPLY_CACHE_CAP = 4_096;

/**
 * The replies to commands with effects, while their callers may re-send them. A caller that
 * hears nothing (a supervisor frozen, restarting, or its connection down) sends the same
 * request again; the command runs once and every copy is answered with its one reply.
 */
export class ReplyCache {
  readonly #entries = new Map<
    string,
    { reply: Promise<ControlReply>; until: number; settled: boolean }
  >();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** The reply to `key`'s earlier copy (in flight or done), if one is kept. */
  get(key: string): Promise<ControlReply> | undefined {
    this.#expire();
    return this.#entries.get(key)?.reply;
  }

  /**
   * Keeps `reply` for `key`'s re-sends. At the cap the oldest finished reply goes, never one
   * still running (red team 25 flushed a slow spawn's entry with cheap failing commands, and its
   * caller's re-send was then refused as a replay); with every entry running, the oldest goes.
   */
  set(key: string, reply: Promise<ControlReply>): void {
    this.#expire();
    if (this.#entries.size >= REPLY_CACHE_CAP) {
      let victim: string | undefined;
      for (const [k, e] of this.#entries) {
        if (e.settled) {
          victim = k;
          break;
        }
      }
      victim ??= this.#entries.keys().next().value;
      if (victim !== undefined) this.#entries.delete(victim);
    }
    const entry = { reply, until: this.#now() + REPLY_KEEP_MS, settled: false };
    reply.finally(() => entry.settled = true).catch(() => {});
    this.#entries.set(key, entry);
  }

  get size(): number {
    return this.#entries.size;
  }

  #expire(): void {
    const now = this.#now();
    // Insertion order is arrival order, and so expiry order.
    for (const [k, e] of this.#entries) {
      if (e.until >= now) break;
      this.#entries.delete(k);
    }
  }
}

/**
 * Answers one control request; malformed subjects and broker answers aimed at the rail are
 * dropped without a reply, a request without a valid caller proof is refused.
 */
export async function handleControlMessage(m: Msg, ctx: ControlServerContext): Promise<void> {
  const parsed = parseRequestSubject(ctx.space, m.subject);
  const h = headersOf(m);
  if (!parsed || h === UNDECODABLE || isBrokerAnswer(h)) return;
  const failed = (err: unknown): ControlReply => {
    const error = isCotalError(err)
      ? { code: err.code, message: err.message }
      : { code: "internal", message: "The manager failed unexpectedly; see its log." };
    if (!isCotalError(err)) ctx.log(`manager: ${parsed.command} failed: ${errorText(err)}`);
    return { v: CONTROL_VERSION, id: parsed.nonce, ok: false, error };
  };
  const run = async (): Promise<ControlReply> => {
    try {
      const req = decodeRequest(m.data, parsed);
      const data = await ctx.dispatch(req.command, req.args, parsed.caller, parsed.nonce);
      return { v: CONTROL_VERSION, id: parsed.nonce, ok: true, data };
    } catch (err) {
      return failed(err);
    }
  };
  let reply: ControlReply;
  try {
    await ctx.verify(m, parsed.caller);
    if (READ_ONLY_COMMANDS.has(parsed.command)) {
      reply = await run();
    } else {
      // A command with effects runs once per nonce: a re-send (same caller, same nonce, its
      // proof fresh) gets the first copy's reply, waiting for it while it runs. A replay by
      // anyone else cannot carry the caller's proof; by the caller it only repeats the answer.
      const key = `${parsed.caller.owner}.${parsed.caller.actor}.${parsed.nonce}`;
      let once = ctx.replies.get(key);
      if (!once) {
        ctx.remember(parsed.caller, parsed.nonce);
        once = run();
        ctx.replies.set(key, once);
      }
      reply = await once;
    }
  } catch (err) {
    reply = failed(err);
  }
  const to = replySubject(ctx.space, ctx.instanceId, ctx.epoch, parsed.caller, parsed.nonce);
  try {
    ctx.publish(to, encodeEnvelope(reply));
  } catch (err) {
    ctx.log(`manager: could not reply to ${parsed.command} (${errorText(err)})`);
  }
}

/** The manager operations the rail exposes. */
export interface ControlOps {
  status(): unknown;
  ps(): AgentRow[];
  /** `requestId` names the request (its nonce): a spawn asked again gets the agent it made. */
  spawn(args: JsonObject, requestId?: string): Promise<AgentRow>;
  despawn(name: string): Promise<unknown>;
  agent(name: string): ManagedAgent;
  attach(agent: ManagedAgent, size?: { cols: number; rows: number }): unknown;
  log(line: string): void;
}

/** The `name` argument of a command, refused with a sentence when absent or malformed. */
export function nameArg(args: JsonObject): string {
  if (typeof args.name !== "string" || args.name === "" || args.name.length > 64) {
    throw new CotalError("bad_request", "This command needs name: the agent's name.");
  }
  return args.name;
}

/** Runs one command; unknown commands get a typed refusal listing the ones served. */
export function dispatchControl(
  command: string,
  args: JsonObject,
  caller: ControlCaller,
  ops: ControlOps,
  nonce?: string,
): unknown {
  switch (command) {
    case "status":
      return ops.status();
    case "ps":
      return { agents: ops.ps() };
    case "spawn": {
      const who = `${caller.owner}.${caller.actor}`;
      ops.log(`manager: spawn requested by ${who}`);
      // Its outcome too: a refused spawn was a request line and nothing after (newcomer pass 11).
      return Promise.resolve().then(() => ops.spawn(args, nonce)).catch((err) => {
        const code = err instanceof CotalError ? ` [${err.code}]` : "";
        ops.log(`manager: spawn requested by ${who} refused: ${errorText(err)}${code}`);
        throw err;
      });
    }
    case "despawn":
      return ops.despawn(nameArg(args));
    case "input": {
      const a = ops.agent(nameArg(args));
      const text = args.text;
      if (typeof text !== "string" || text.length > 65_536) {
        throw new CotalError(
          "bad_request",
          "input needs text: a string of at most 65536 characters.",
        );
      }
      if (!a.handle || a.status === "retired") {
        throw new CotalError("not_running", `Agent ${a.plan.name} has no running terminal.`);
      }
      const data = text + (args.enter === false ? "" : "\r");
      a.handle.write(data);
      return { name: a.plan.name, bytes: new TextEncoder().encode(data).length };
    }
    case "attach": {
      const a = ops.agent(nameArg(args));
      const size = Number.isInteger(args.cols) && Number.isInteger(args.rows)
        ? { cols: args.cols as number, rows: args.rows as number }
        : undefined;
      return ops.attach(a, size);
    }
    default:
      throw new CotalError(
        "unknown_command",
        `The manager has no command ${
          JSON.stringify(command)
        }; it serves status, ps, spawn, despawn, input and attach.`,
      );
  }
}
