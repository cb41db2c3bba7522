/**
 * Bounded reads of a stream through a short-lived, named, in-memory consumer (deleted before
 * and after use; reaped by the broker if the daemon dies mid-read): one channel's CHAT history
 * for a join's catch-up and for `readHistory`, and DM and TASK for the storage warden.
 *
 * @module
 */

import { AckPolicy, DeliverPolicy, type JsMsg, nanos } from "nats";
import { wrapJs } from "../wire/mod.ts";
import { SCAN_BATCH } from "./constants.ts";
import type { DeliveryContext } from "./context.ts";

/** Options of {@linkcode scanChat}. */
export interface ScanOptions {
  /** A consumer name unique to this scan. */
  name: string;
  /** The CHAT filter (`cotal.<s>.chat.*.*.<channel>`). */
  filter: string;
  /** First stream sequence to read (at least 1). */
  fromSeq: number;
  /** Stop after this sequence (inclusive); default: everything pending at the start. */
  toSeq?: number;
  /** Called in sequence order. */
  onMessage(m: JsMsg): void | Promise<void>;
}

/** Options of {@linkcode scanStream}: a scan of any stream, optionally cut short. */
export interface StreamScanOptions extends ScanOptions {
  /** Messages per fetch (default {@linkcode SCAN_BATCH}). */
  batch?: number;
  /** Epoch ms after which no further fetch starts. */
  until?: number;
  /** What the read is, for the error when its consumer cannot be made. */
  what?: string;
}

/** Reads `(fromSeq .. toSeq)` on `filter`; resolves the number of messages pending at start. */
export function scanChat(ctx: DeliveryContext, opts: ScanOptions): Promise<number> {
  return scanStream(ctx, ctx.streams.chat, opts);
}

/** {@linkcode scanChat} on any stream of the space. */
export async function scanStream(
  ctx: DeliveryContext,
  stream: string,
  opts: StreamScanOptions,
): Promise<number> {
  await ctx.jsm.consumers.delete(stream, opts.name).catch(() => {});
  let info;
  try {
    info = await ctx.jsm.consumers.add(stream, {
      name: opts.name,
      filter_subject: opts.filter,
      ack_policy: AckPolicy.None,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: Math.max(1, opts.fromSeq),
      mem_storage: true,
      // Reaped by the broker if this process dies mid-scan.
      inactive_threshold: nanos(30_000),
    });
  } catch (err) {
    throw wrapJs(`open ${opts.what ?? "a history read"} on ${stream}`, err);
  }
  let remaining = info.num_pending;
  const total = remaining;
  try {
    const consumer = await ctx.js.consumers.get(stream, opts.name);
    while (remaining > 0 && (opts.until === undefined || Date.now() < opts.until)) {
      // At most SCAN_BATCH posts (4 MiB of 64 KiB posts) pending on the daemon's connection per
      // scan; counted in messages, not bytes, so a fetch returns once what is there has come
      // (a byte-bounded fetch waited out its expiry on every short page: red team 9's S1).
      const batch = await consumer.fetch({
        max_messages: Math.min(opts.batch ?? SCAN_BATCH, remaining),
        expires: 2000,
      });
      let got = 0;
      for await (const m of batch) {
        got++;
        remaining = m.info.pending;
        if (opts.toSeq !== undefined && m.seq > opts.toSeq) return total;
        await opts.onMessage(m);
      }
      if (got === 0) break;
    }
  } finally {
    await ctx.jsm.consumers.delete(stream, opts.name).catch(() => {});
  }
  return total;
}

/** The number of messages on `filter` from `fromSeq` on, without reading them. */
export async function countChat(
  ctx: DeliveryContext,
  name: string,
  filter: string,
  fromSeq: number,
): Promise<number> {
  const stream = ctx.streams.chat;
  await ctx.jsm.consumers.delete(stream, name).catch(() => {});
  try {
    const info = await ctx.jsm.consumers.add(stream, {
      name,
      filter_subject: filter,
      ack_policy: AckPolicy.None,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: Math.max(1, fromSeq),
      mem_storage: true,
      inactive_threshold: nanos(30_000),
    });
    return info.num_pending;
  } catch (err) {
    throw wrapJs(`count history on ${stream}`, err);
  } finally {
    await ctx.jsm.consumers.delete(stream, name).catch(() => {});
  }
}
