/**
 * The consumer janitor: CHAT's consumer cap (1,024, frozen) belongs to the space's members.
 *
 * Observer and admin creds once made any consumer on CHAT, and enough durables that never
 * expire filled the cap until every member's history read was refused (red team 20b). They now
 * reach one consumer each, named for themselves (red team 30), so this sweep is the second line:
 * while it holds the lease, the delivery daemon deletes every consumer on CHAT but the fan-out's
 * that would outlive {@linkcode STRAY_MAX_IDLE_NS} of idleness, once a minute. Every consumer
 * Cotal itself creates on CHAT expires after at most 30 idle seconds. A client that still needs
 * one sees it deleted and creates it again.
 *
 * @module
 */
import type { ConsumerInfo } from "nats";
import type { DeliveryContext } from "./context.ts";
import { FANOUT_DURABLE } from "./constants.ts";

/** How often the janitor looks (frozen). */
export const JANITOR_INTERVAL_MS = 60_000;

/**
 * The longest idle limit a consumer on CHAT may have and stay (frozen): nats.go's ordered
 * consumers (the `nats` CLI's) ask for five minutes.
 */
export const STRAY_MAX_IDLE_NS = 5 * 60 * 1e9;

/** True for a consumer on CHAT the janitor deletes: not the fan-out, and one that never expires. */
export function isStrayChatConsumer(ci: Pick<ConsumerInfo, "name" | "config">): boolean {
  if (ci.name === FANOUT_DURABLE) return false;
  const idle = ci.config.inactive_threshold;
  return !idle || idle > STRAY_MAX_IDLE_NS;
}

/** One sweep while `token` holds the fence; resolves with how many consumers it deleted. */
export async function sweepStrayConsumers(ctx: DeliveryContext, token: number): Promise<number> {
  const stray: string[] = [];
  for await (const ci of ctx.jsm.consumers.list(ctx.streams.chat)) {
    if (isStrayChatConsumer(ci)) stray.push(ci.name);
  }
  let deleted = 0;
  for (const name of stray) {
    if (!ctx.fence.mayAct(token)) break;
    // One already gone (its creator deleted it) is not a failure of the sweep.
    if (await ctx.jsm.consumers.delete(ctx.streams.chat, name).catch(() => false)) deleted++;
  }
  return deleted;
}

/** Sweeps now and every {@linkcode JANITOR_INTERVAL_MS} until stopped. */
export function startConsumerJanitor(ctx: DeliveryContext, token: number): { stop(): void } {
  let running = false;
  const run = () => {
    if (running) return;
    running = true;
    void sweepStrayConsumers(ctx, token).then((n) => {
      if (n > 0) {
        ctx.log.warn(
          `consumer janitor: deleted ${n} consumers on ${ctx.streams.chat} that never expire ` +
            `(CHAT's consumer cap is the members')`,
        );
      }
    }, (err) => ctx.log.warn(`consumer janitor failed (${(err as Error)?.message ?? err})`))
      .finally(() => running = false);
  };
  run();
  const timer = setInterval(run, JANITOR_INTERVAL_MS);
  return { stop: () => clearInterval(timer) };
}
