/**
 * `readHistory {channel, limit}`: a mediated read of a channel's newest messages, authorized
 * fresh on every call against both the live read ACL and the ceiling baked into the caller's
 * credential, and trimmed (newest kept) to fit one reply.
 *
 * @module
 */

import { headersOf } from "../nats/mod.ts";
import { CotalError } from "../errors.ts";
import {
  channelCovers,
  chatReadFilter,
  type CotalMessage,
  decodeMessage,
  type Principal,
} from "../wire/mod.ts";
import { countChat, scanChat } from "./chat_scan.ts";
import { READ_HISTORY_DEFAULT_LIMIT, READ_HISTORY_MAX_LIMIT } from "./constants.ts";
import type { DeliveryContext } from "./context.ts";
import { isConcrete, resolveLifecycle } from "./membership_ops.ts";

/** What `readHistory` answers: oldest first. `complete` is true when nothing older exists. */
export interface HistoryPage {
  messages: CotalMessage[];
  complete: boolean;
}

const ENC = new TextEncoder();

/** `readHistory` for `caller`. */
export async function readHistory(
  ctx: DeliveryContext,
  caller: Principal,
  body: { channel?: unknown; limit?: unknown },
): Promise<HistoryPage> {
  const { channel } = body;
  if (!isConcrete(channel)) {
    throw new CotalError("invalid_channel", "readHistory needs one concrete channel name.");
  }
  let limit = READ_HISTORY_DEFAULT_LIMIT;
  if (body.limit !== undefined) {
    if (typeof body.limit !== "number" || !Number.isSafeInteger(body.limit) || body.limit < 1) {
      throw new CotalError("invalid_limit", "readHistory's limit must be a positive integer.");
    }
    // Clamped, not refused: asking for more than a page is not an error.
    limit = Math.min(body.limit, READ_HISTORY_MAX_LIMIT);
  }
  await ctx.acl.sync();
  const life = resolveLifecycle(ctx, caller);
  const allowed = (list: string[]) => list.some((p) => channelCovers(p, channel));
  if (!allowed(life.allowSubscribe) || !allowed(life.issuedAllowSubscribe)) {
    throw new CotalError(
      "not_allowed",
      `${caller.owner}.${caller.actor} may not read the history of ${JSON.stringify(channel)}.`,
    );
  }
  const info = await ctx.jsm.streams.info(ctx.streams.chat);
  const { first_seq: first, last_seq: last } = info.state;
  const filter = chatReadFilter(ctx.space, channel);
  const name = `rh_${caller.owner}-${caller.actor}-${crypto.randomUUID().slice(0, 8)}`;
  // Widen a window back from the frontier until it holds limit+1 messages (or reaches the start).
  let span = (limit + 1) * 4;
  let start = Math.max(first, last - span + 1);
  while (start > first && await countChat(ctx, name, filter, start) < limit + 1) {
    span *= 4;
    start = Math.max(first, last - span + 1);
  }
  const ring: CotalMessage[] = [];
  let older = false;
  await scanChat(ctx, {
    name,
    filter,
    fromSeq: start,
    toSeq: last,
    onMessage: (m) => {
      const d = decodeMessage(m.subject, m.data, { space: ctx.space, headers: headersOf(m) });
      if (!d.ok) return;
      ring.push(d.message);
      if (ring.length > limit) {
        ring.shift();
        older = true;
      }
    },
  });
  const budget = Math.floor((ctx.nc.info?.max_payload ?? 1024 * 1024) * 0.9);
  const page: CotalMessage[] = [];
  let size = 64;
  for (let i = ring.length - 1; i >= 0; i--) {
    const n = ENC.encode(JSON.stringify(ring[i])).length + 1;
    if (size + n > budget) {
      if (page.length === 0) {
        throw new CotalError(
          "history_too_large",
          "The newest message of this channel does not fit in one reply; read it from the stream.",
        );
      }
      older = true;
      break;
    }
    size += n;
    page.unshift(ring[i]);
  }
  return { messages: page, complete: !older && start <= first };
}
