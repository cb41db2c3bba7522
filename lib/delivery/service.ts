/**
 * The daemon's request rails: `ctl.delivery` (agents: durableJoin, durableLeave,
 * listMemberships, readHistory, recipientKnown), `ctl.delivery-admin` (the supervisor and the operator's
 * control caller: evictPrincipal, reloadCreds, setAside, health) and the `live.delivery`
 * liveness probe.
 *
 * The caller is the subject's `<owner>.<actor>`, which the broker forge-locks through the
 * caller's publish grant; a payload naming anyone else is never consulted. A reply is sent only
 * inside the request subject's own `.reply.` subtree, so the daemon cannot be made to publish
 * on a subject of the caller's choosing (a confused deputy).
 *
 * @module
 */

import {
  isBrokerAnswer,
  isPrincipalOwnerToken,
  isPrincipalToken,
  type Principal,
} from "../wire/mod.ts";
import type { Msg, Subscription } from "nats";
import { CotalError, isCotalError } from "../errors.ts";
import type { DeliveryContext } from "./context.ts";
import {
  HISTORY_READ_RATE,
  HISTORY_READS_IN_FLIGHT,
  MEMBERSHIP_CHANGE_RATE,
  RAIL_IN_FLIGHT,
} from "./constants.ts";
import { TokenBuckets } from "../rate.ts";
import { readHistory } from "./history.ts";
import { recipientKnown } from "./recipients.ts";
import { durableJoin, durableLeave, listMemberships } from "./membership_ops.ts";
import { headersOf, UNDECODABLE } from "../nats/mod.ts";

/** Admin operations the composition root supplies (absent hooks refuse loudly). */
export interface AdminHooks {
  evictPrincipal?: (principal: string) => Promise<unknown>;
  reloadCreds?: () => Promise<unknown>;
  /** Answered on the liveness rail: is this daemon's lease row ready and its own. */
  ready: () => boolean;
  incarnation: string;
}

const ENC = new TextEncoder();
const DEC = new TextDecoder();

/** The caller of a rail request, or undefined when the subject does not name a principal. */
function callerOf(subject: string): Principal | undefined {
  const t = subject.split(".");
  const owner = t[4];
  const actor = t[5];
  if (t.length !== 6 || !isPrincipalToken(owner) || !isPrincipalToken(actor)) return undefined;
  if (!isPrincipalOwnerToken(owner)) return undefined;
  return { owner, actor };
}

/** True when `reply` lies inside `<request subject>.reply.`. */
export function boundReply(subject: string, reply: string | undefined): reply is string {
  return typeof reply === "string" && reply.startsWith(`${subject}.reply.`) &&
    reply.length > subject.length + 7 && !/[*> ]/.test(reply);
}

/** A request: `{op, args}`. Any other field (a claimed `from`, say) is never consulted. */
interface Request {
  op: unknown;
  args: Record<string, unknown>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function parseRequest(m: Msg): Request {
  let v: unknown;
  try {
    v = JSON.parse(DEC.decode(m.data));
  } catch {
    v = undefined;
  }
  if (!isObject(v) || (v.args !== undefined && !isObject(v.args))) {
    throw new CotalError("bad_request", "The request body is not a JSON {op, args} object.");
  }
  return { op: v.op, args: (v.args as Record<string, unknown> | undefined) ?? {} };
}

function errorBody(err: unknown): Record<string, unknown> {
  if (isCotalError(err)) return { ok: false, code: err.code, error: err.message };
  return { ok: false, code: "internal", error: "The request failed inside the delivery daemon." };
}

type Handler = (caller: Principal, req: Request, token: number) => Promise<unknown>;

/** Counts work in progress per caller and in all, against frozen limits. */
class InFlight {
  readonly #limits: { perCaller: number; total: number };
  readonly #byCaller = new Map<string, number>();
  #total = 0;

  constructor(limits: { perCaller: number; total: number }) {
    this.#limits = limits;
  }

  /** Why `who` may not start one more now (its own share, or everyone's), or undefined. */
  refusal(who: string): "caller" | "total" | undefined {
    if ((this.#byCaller.get(who) ?? 0) >= this.#limits.perCaller) return "caller";
    if (this.#total >= this.#limits.total) return "total";
    return undefined;
  }

  take(who: string): void {
    this.#byCaller.set(who, (this.#byCaller.get(who) ?? 0) + 1);
    this.#total++;
  }

  give(who: string): void {
    this.#total--;
    const left = (this.#byCaller.get(who) ?? 1) - 1;
    if (left > 0) this.#byCaller.set(who, left);
    else this.#byCaller.delete(who);
  }
}

/** Runs `fn` as one of `limits`' work, or refuses at once with `delivery_busy`. */
async function bounded<T>(
  work: InFlight,
  who: string,
  what: string,
  limit: number,
  fn: () => Promise<T>,
): Promise<T> {
  const why = work.refusal(who);
  if (why) {
    throw new CotalError(
      "delivery_busy",
      why === "caller"
        ? `${limit} of your ${what} ${limit === 1 ? "is" : "are"} in progress; send the next when ${
          limit === 1 ? "it" : "one"
        } is answered.`
        : "The delivery daemon is busy with other members' requests; retry shortly.",
    );
  }
  work.take(who);
  try {
    return await fn();
  } finally {
    work.give(who);
  }
}

function serve(
  ctx: DeliveryContext,
  subject: string,
  queue: string,
  what: string,
  handle: Handler,
): Subscription {
  // Requests in progress, per caller and in all (RAIL_IN_FLIGHT).
  const work = new InFlight(RAIL_IN_FLIGHT);
  return ctx.nc.subscribe(subject, {
    queue,
    callback: (err, m) => {
      // A broker answer a member aimed at the rail is not a request: dropped without a word.
      const h = headersOf(m);
      if (err || h === UNDECODABLE || isBrokerAnswer(h)) return;
      const token = ctx.fence.token;
      if (!boundReply(m.subject, m.reply)) {
        ctx.log.warn(
          `${what}: dropped a request from ${m.subject} whose reply is not in its own subtree`,
        );
        return;
      }
      const caller = callerOf(m.subject);
      const who = caller ? `${caller.owner}.${caller.actor}` : "";
      (async () => {
        let out: unknown;
        try {
          out = {
            ok: true,
            data: await bounded(work, who, "requests", RAIL_IN_FLIGHT.perCaller, () => {
              if (!caller) {
                throw new CotalError("bad_caller", "The request subject names no principal.");
              }
              return handle(caller, parseRequest(m), token);
            }),
          };
        } catch (e) {
          if (!isCotalError(e)) ctx.log.warn(`${what}: ${(e as Error)?.message ?? e}`);
          out = errorBody(e);
        }
        // Every effect re-checks the fence, the reply included.
        if (!ctx.fence.mayAct(token)) return;
        ctx.nc.publish(m.reply!, ENC.encode(JSON.stringify(out)));
      })();
    },
  });
}

/** Binds the three rails; returns their subscriptions. */
export function bindRails(ctx: DeliveryContext, hooks: AdminHooks): Subscription[] {
  const P = ctx.root;
  const reads = new InFlight(HISTORY_READS_IN_FLIGHT);
  const changes = new TokenBuckets(MEMBERSHIP_CHANGE_RATE);
  const readRate = new TokenBuckets(HISTORY_READ_RATE);
  const rated = (caller: Principal): void => {
    if (readRate.take(`${caller.owner}.${caller.actor}`)) return;
    throw new CotalError(
      "delivery_busy",
      `You read history faster than ${HISTORY_READ_RATE.perSecond} pages a second (after ` +
        `${HISTORY_READ_RATE.burst} at once); ask again in a second.`,
    );
  };
  const change = (caller: Principal): void => {
    if (changes.take(`${caller.owner}.${caller.actor}`)) return;
    throw new CotalError(
      "delivery_busy",
      `You joined and left durable channels faster than ${MEMBERSHIP_CHANGE_RATE.perSecond} a ` +
        `second (after ${MEMBERSHIP_CHANGE_RATE.burst} at once); ask again in a second.`,
    );
  };
  const ctl = serve(
    ctx,
    `${P}.ctl.delivery.*.*`,
    "ctl.delivery",
    "ctl.delivery",
    (caller, { op, args: body }, token) => {
      switch (op) {
        case "durableJoin":
          change(caller);
          return durableJoin(ctx, caller, body.channel, token);
        case "durableLeave":
          change(caller);
          return durableLeave(ctx, caller, body, token);
        case "listMemberships":
          return listMemberships(ctx, caller, body.lifecycleUid);
        case "recipientKnown":
          return recipientKnown(ctx, body);
        case "readHistory":
          return bounded(
            reads,
            `${caller.owner}.${caller.actor}`,
            "history reads",
            HISTORY_READS_IN_FLIGHT.perCaller,
            () => {
              // Only a read that would start spends the caller's rate.
              rated(caller);
              return readHistory(ctx, caller, body) as Promise<unknown>;
            },
          );
        default:
          throw new CotalError(
            "unknown_op",
            `Unknown ctl.delivery op ${JSON.stringify(op)}; use durableJoin, durableLeave, ` +
              `listMemberships, readHistory or recipientKnown.`,
          );
      }
    },
  );
  const admin = serve(
    ctx,
    `${P}.ctl.delivery-admin.*.*`,
    "ctl.delivery-admin",
    "ctl.delivery-admin",
    async (_caller, { op, args: body }) => {
      if (op === "health") {
        // What `cotal status` asks: serving, and whether a loop has only failed since when.
        const c = ctx.counters;
        return {
          ready: hooks.ready(),
          ...(c.stalledSince !== undefined
            ? { stalledSince: c.stalledSince, lastError: c.lastError }
            : {}),
          counters: { ...c },
        };
      }
      if (op === "setAside") {
        // What could not be delivered: dead letters (no bodies) and members' pending gaps.
        if (!ctx.setaside) throw new CotalError("unavailable", "Nothing is set aside yet.");
        return await ctx.setaside.list();
      }
      const hook = op === "evictPrincipal"
        ? hooks.evictPrincipal && (() => hooks.evictPrincipal!(String(body.principal ?? "")))
        : op === "reloadCreds"
        ? hooks.reloadCreds
        : undefined;
      if (op !== "evictPrincipal" && op !== "reloadCreds") {
        throw new CotalError(
          "unknown_op",
          `Unknown ctl.delivery-admin op ${
            JSON.stringify(op)
          }; use evictPrincipal, reloadCreds, setAside or health.`,
        );
      }
      if (!hook) {
        throw new CotalError("unavailable", `This delivery daemon does not serve ${op}.`);
      }
      return await hook();
    },
  );
  const live = ctx.nc.subscribe(`${P}.live.delivery.*.*`, {
    queue: "live.delivery",
    callback: (err, m) => {
      if (err || !boundReply(m.subject, m.reply)) return;
      const answer = {
        plane: "delivery",
        responder: hooks.ready() ? "bound" : "unbound",
        instance: hooks.incarnation,
      };
      ctx.nc.publish(m.reply!, ENC.encode(JSON.stringify(answer)));
    },
  });
  return [ctl, admin, live];
}
