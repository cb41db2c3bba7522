/**
 * Wiring a manager to its control rail: the subscriptions (the class queue and its own
 * instance subject) and, per request, the proof check and the dispatch to its operations.
 *
 * @module
 */
import type { Msg, NatsConnection, Subscription } from "nats";
import { CotalError } from "../errors.ts";
import type { ControlVerifier } from "./control_auth.ts";
import { serveFilters } from "./control_rail.ts";
import {
  type ControlOps,
  dispatchControl,
  handleControlMessage,
  ReplyCache,
} from "./control_server.ts";
import { headersOf, UNDECODABLE } from "../nats/mod.ts";

/** Headers that can be read, else none (the request then carries no proof). */
function knownHeaders(m: Msg) {
  const h = headersOf(m);
  return h === UNDECODABLE ? undefined : h;
}

/** What serving the rail needs from its manager. */
export interface ControlServeContext {
  space: string;
  instanceId: string;
  epoch: string;
  verifier: ControlVerifier;
  /** False while the manager starts or stops: requests are refused as unavailable. */
  running(): boolean;
  ops: ControlOps;
  /** Tracks each request's handling so a stop waits for it. */
  track(p: Promise<void>): void;
  log(line: string): void;
}

/** Subscribes the rail; resolves once the broker has the subscriptions. */
export async function serveControl(
  nc: NatsConnection,
  ctx: ControlServeContext,
): Promise<Subscription[]> {
  const replies = new ReplyCache();
  const handle = (m: Msg) =>
    handleControlMessage(m, {
      space: ctx.space,
      instanceId: ctx.instanceId,
      epoch: ctx.epoch,
      verify: async (m, caller) =>
        void await ctx.verifier.verify(m.subject, m.data, knownHeaders(m), caller, "", false),
      remember: (caller, nonce) => ctx.verifier.remember(caller, nonce),
      replies,
      publish: (to, data) => nc.publish(to, data),
      log: ctx.log,
      dispatch: (command, args, caller, nonce) => {
        if (!ctx.running()) {
          throw new CotalError(
            "unavailable",
            "The manager is stopping; try again when it is back.",
          );
        }
        return dispatchControl(command, args, caller, ctx.ops, nonce);
      },
    });
  const f = serveFilters(ctx.space, ctx.instanceId);
  const cb = (_err: unknown, m: Msg) => ctx.track(handle(m));
  const subs = [
    nc.subscribe(f.one, { queue: "manager", callback: cb }),
    nc.subscribe(f.inst, { callback: cb }),
  ];
  // The broker has the subscriptions before start() resolves: a request sent right after
  // start() on another connection is not dropped for want of a subscriber.
  await nc.flush();
  return subs;
}
