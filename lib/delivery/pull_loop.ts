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
  /** Told when the broker says the consumer is gone (deleted, or not found on a check). */
  gone?(): void;
}

/** Starts consuming under the fence's current token. */
export async function startPullLoop(
  ctx: DeliveryContext,
  opts: PullLoopOptions,
): Promise<PullLoop> {
  const token = ctx.fence.token;
  const messages: ConsumerMessages = await opts.consumer.consume({ max_messages: opts.window });
  if (opts.gone) {
    const gone = opts.gone;
    // npm:nats keeps waiting for a deleted consumer to come back, silently: watch for it.
    (async () => {
      for await (const s of await messages.status()) {
        if (s.type === "consumer_deleted" || s.type === "consumer_not_found") gone();
      }
    })().catch(() => {});
  }
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

/** How long a loop whose durable was deleted waits between attempts to create it again. */
const RECREATE_RETRY_MS = 2_000;

/**
 * Starts a loop of `window` (64) on the daemon's durable `durable` of `stream`. A durable
 * deleted under it (by hand, with a daemon cred) is created again by `recreate`, from the
 * lowest stream sequence this loop has not finished (a message handled twice is written again
 * under the same copy id, which the duplicate window collapses), and the loop goes on.
 */
export async function startDurableLoop(
  ctx: DeliveryContext,
  name: string,
  stream: string,
  durable: string,
  handle: (ctx: DeliveryContext, m: JsMsg, token: number) => Promise<void>,
  recreate: (resumeAt: number) => Promise<unknown>,
): Promise<PullLoop> {
  const token = ctx.fence.token;
  const start = await ctx.jsm.consumers.info(stream, durable);
  // Every sequence below `done` is handled, except those in `failed` (nak'ed, not yet handled).
  let done = start.ack_floor.stream_seq;
  const failed = new Set<number>();
  let stopped = false;
  let healing: Promise<void> | undefined;
  let loop: PullLoop;
  const bind = async () =>
    loop = await startPullLoop(ctx, {
      name,
      consumer: await ctx.js.consumers.get(stream, durable),
      window: 64,
      handle: async (m, t) => {
        try {
          await handle(ctx, m, t);
          failed.delete(m.seq);
          done = Math.max(done, m.seq);
        } catch (err) {
          failed.add(m.seq);
          throw err;
        }
      },
      gone: () => healing ??= heal().finally(() => healing = undefined),
    });
  const heal = async () => {
    await loop.stop();
    while (!stopped && ctx.fence.mayAct(token)) {
      const resumeAt = Math.min(done + 1, ...failed);
      try {
        await recreate(resumeAt);
        await bind();
        ctx.log.warn(
          `${name}: its durable ${durable} on ${stream} was deleted; created again from stream sequence ${resumeAt}`,
        );
        return;
      } catch (err) {
        ctx.log.warn(
          `${name}: could not create its deleted durable ${durable} again (${
            (err as Error)?.message ?? err
          }); trying again in ${RECREATE_RETRY_MS / 1000} s`,
        );
        await new Promise((r) => setTimeout(r, RECREATE_RETRY_MS));
      }
    }
  };
  await bind();
  return {
    async stop() {
      stopped = true;
      await healing;
      await loop.stop();
    },
  };
}
