/**
 * The consumer janitor: CHAT's consumer cap (1,024, frozen) belongs to the space's members.
 *
 * Observer and admin creds (what `cotal tail`, dashboards and the `nats` CLI use) may create
 * consumers on CHAT. They must be able to: the ordered consumers of third-party clients name
 * themselves at random, so these creds cannot be pinned to consumer names. Created with no
 * idle limit, such a consumer never goes away, and enough of them fill CHAT's cap until every
 * member's history read is refused (red team 20b). Every consumer Cotal itself creates on CHAT
 * expires after at most 30 idle seconds, except the fan-out's durable. So while it holds the
 * lease, the delivery daemon deletes every other consumer on CHAT that would outlive
 * {@linkcode STRAY_MAX_IDLE_NS} of idleness, once a minute. A client that still needs one sees
 * it deleted and creates it again (ordered consumers do).
 *
 * What this does not stop: a cred that keeps creating short-idle consumers, and keeps each one
 * busy, holds the cap for as long as it keeps at it (docs/SECURITY.md).
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
