/**
 * The Manager's side of the control rail: one request in, one reply out on the subject the
 * request names (never one from the payload), and the dispatch of each command to the
 * Manager's operations with its argument checks and typed errors.
 *
 * @module
 */
import type { Msg } from "nats";
import { CotalError, isCotalError } from "../errors.ts";
import { errorText } from "../wire/connect.ts";
import { isBrokerAnswer } from "../wire/broker_answer.ts";
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
import { headersOf, UNDECODABLE } from "../nats/headers.ts";

/** What handling one request needs from its manager. */
export interface ControlServerContext {
  space: string;
  instanceId: string;
  epoch: string;
  publish(subject: string, data: Uint8Array): void;
  log(line: string): void;
  dispatch(command: string, args: JsonObject, caller: ControlCaller): unknown;
  /**
   * Throws unless the request proves its caller (lib/manager/control_auth.ts); `once` for
   * commands with effects, whose nonce may not come again.
   */
  verify(m: Msg, caller: ControlCaller, nonce: string, once: boolean): Promise<void>;
}

/** Commands without effects: a caller re-sends them (same nonce) on silence. */
export const READ_ONLY_COMMANDS: ReadonlySet<string> = new Set(["status", "ps"]);

/**
 * Answers one control request; malformed subjects and broker answers aimed at the rail are
 * dropped without a reply, a request without a valid caller proof is refused.
 */
export async function handleControlMessage(m: Msg, ctx: ControlServerContext): Promise<void> {
  const parsed = parseRequestSubject(ctx.space, m.subject);
  const h = headersOf(m);
  if (!parsed || h === UNDECODABLE || isBrokerAnswer(h)) return;
  let reply: ControlReply;
  try {
    await ctx.verify(m, parsed.caller, parsed.nonce, !READ_ONLY_COMMANDS.has(parsed.command));
    const req = decodeRequest(m.data, parsed);
    const data = await ctx.dispatch(req.command, req.args, parsed.caller);
    reply = { v: CONTROL_VERSION, id: parsed.nonce, ok: true, data };
  } catch (err) {
    const error = isCotalError(err)
      ? { code: err.code, message: err.message }
      : { code: "internal", message: "The manager failed unexpectedly; see its log." };
    if (!isCotalError(err)) ctx.log(`manager: ${parsed.command} failed: ${errorText(err)}`);
    reply = { v: CONTROL_VERSION, id: parsed.nonce, ok: false, error };
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
  spawn(args: JsonObject): Promise<AgentRow>;
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
): unknown {
  switch (command) {
    case "status":
      return ops.status();
    case "ps":
      return { agents: ops.ps() };
    case "spawn":
      ops.log(`manager: spawn requested by ${caller.owner}.${caller.actor}`);
      return ops.spawn(args);
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
