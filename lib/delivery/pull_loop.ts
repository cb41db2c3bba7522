/**
 * A pull consumer driven with bounded concurrency: messages are handled as they arrive (so a
 * burst pipelines its publishes instead of awaiting each), and `stop()` waits for the handlers
 * in flight. A handler that throws has its message nak'ed, unless the fence has closed, in
 * which case the message is left for the next holder.
 *
 * @module
 */

import type { Consumer, ConsumerMessages, JsMsg } from "nats";
import type { DeliveryContext } from "./context.ts";

/** A running loop. */
export interface PullLoop {
  stop(): Promise<void>;
}

/** Options of {@linkcode startPullLoop}. */
export interface PullLoopOptions {
  name: string;
  consumer: Consumer;
  /** Messages the client buffers and handles at once. */
  window: number;
  handle(msg: JsMsg, token: number): Promise<void>;
}

/** Starts consuming under the fence's current token. */
export async function startPullLoop(
  ctx: DeliveryContext,
  opts: PullLoopOptions,
): Promise<PullLoop> {
  const token = ctx.fence.token;
  const messages: ConsumerMessages = await opts.consumer.consume({ max_messages: opts.window });
  const inflight = new Set<Promise<void>>();
  // Woken when a slot frees up (a Promise.race over the whole window per message would cost
  // a reaction per in-flight handler, every time).
  let slot: (() => void) | undefined;
  const run = (async () => {
    for await (const m of messages) {
      if (!ctx.fence.mayAct(token)) break;
      const p: Promise<void> = opts.handle(m, token).then(() => {
        ctx.counters.stalledSince = undefined;
      }, (err) => {
        ctx.counters.errors++;
        const what = `${opts.name}: ${(err as Error)?.message ?? err}`;
        ctx.counters.stalledSince ??= Date.now();
        ctx.counters.lastError = what;
        ctx.log.warn(`${what}; the message will be redelivered`);
        if (ctx.fence.mayAct(token)) m.nak(1000);
      }).finally(() => {
        inflight.delete(p);
        slot?.();
        slot = undefined;
      });
      inflight.add(p);
      if (inflight.size >= opts.window) await new Promise<void>((r) => slot = r);
    }
  })().catch((err) =>
    ctx.log.warn(`${opts.name}: the consumer stopped (${(err as Error)?.message ?? err})`)
  );
  return {
    async stop() {
      messages.stop();
      await run;
      await Promise.allSettled([...inflight]);
    },
  };
}

/** Starts a loop of `window` (64) on the daemon's durable `durable` of `stream`. */
export async function startDurableLoop(
  ctx: DeliveryContext,
  name: string,
  stream: string,
  durable: string,
  handle: (ctx: DeliveryContext, m: JsMsg, token: number) => Promise<void>,
): Promise<PullLoop> {
  const consumer = await ctx.js.consumers.get(stream, durable);
  return await startPullLoop(ctx, {
    name,
    consumer,
    window: 64,
    handle: (m, token) => handle(ctx, m, token),
  });
}
