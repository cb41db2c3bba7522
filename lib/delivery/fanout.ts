/**
 * The fan-out writer: routing only, never the authorization gate. Each CHAT message is
 * authenticated against its subject, and on a durable channel one INBOX entry is written per
 * member whose window holds the message's sequence (the sender excepted). The trusted reader
 * re-authorizes every entry before anything reaches a member.
 *
 * @module
 */

import { headersOf } from "../nats/headers.ts";
import type { JsMsg } from "nats";
import { decodeMessage, dinboxSubject, parseSubject } from "../wire/mod.ts";
import { FANOUT_DURABLE } from "./constants.ts";
import { deliveryClassOf, type DeliveryContext } from "./context.ts";
import { copyId, entryHeaders, type InboxEntry, renderFrame } from "./frames.ts";
import { isBacklogFull, isTooLarge } from "./setaside.ts";
import { durableEligible } from "./members.ts";
import { type PullLoop, startPullLoop } from "./pull_loop.ts";

/** Handle one CHAT message under fence token `token`. */
export async function fanoutOne(ctx: DeliveryContext, m: JsMsg, token: number): Promise<void> {
  const parsed = parseSubject(m.subject, { space: ctx.space });
  const decoded = decodeMessage(m.subject, m.data, { space: ctx.space, headers: headersOf(m) });
  if (!parsed.ok || parsed.kind !== "chat" || !decoded.ok) {
    // Unauthenticated or malformed: never copied, never redelivered.
    ctx.counters.droppedMalformed++;
    if (ctx.fence.mayAct(token)) m.ack();
    return;
  }
  // The delivery class and member rows as of now, not as of some earlier watch delivery.
  await Promise.all([ctx.channels.sync(), ctx.members.sync()]);
  const channel = parsed.channel;
  const pubs: Promise<unknown>[] = [];
  let refusal: unknown;
  if (deliveryClassOf(ctx, channel) === "durable") {
    const sender = `${decoded.sender.owner}.${decoded.sender.actor}`;
    const seq = m.seq;
    // One rendering of the frame serves every member's entry.
    let frame: Uint8Array | undefined;
    for (const rec of ctx.byChannel.get(channel)?.values() ?? []) {
      if (rec.owner === sender || !durableEligible(rec, seq)) continue;
      const [owner, actor] = rec.owner.split(".");
      frame ??= renderFrame(channel, decoded.message);
      const entry: InboxEntry = {
        msgId: decoded.message.id,
        channel,
        seq,
        reason: "durable-channel",
        generation: rec.generation,
      };
      if (!ctx.fence.mayAct(token)) break;
      pubs.push(
        ctx.gate.publish(dinboxSubject(ctx.space, { owner, actor }, rec.lifecycleUid), frame, {
          msgID: copyId(entry.msgId, rec.owner, rec.lifecycleUid, rec.generation),
          headers: entryHeaders(entry),
        }).catch(async (err) => {
          // A member's full queue or a copy too large: that copy is set aside, the rest flow.
          if (isBacklogFull(err)) {
            await ctx.setaside?.missed(rec.owner, rec.lifecycleUid, {
              msgId: entry.msgId,
              channel,
              seq,
              at: Date.now(),
            });
          } else if (isTooLarge(err)) {
            await ctx.setaside?.deadLetter({
              at: Date.now(),
              stage: "fanout",
              stream: ctx.streams.chat,
              seq,
              subject: m.subject,
              msgId: entry.msgId,
              member: rec.owner,
              bytes: frame!.length,
              reason: "too large once framed for the broker",
            });
          } else refusal ??= err;
        }),
      );
    }
  }
  // Every publish settles before anything is decided: none is left to reject unheard.
  await Promise.all(pubs);
  if (refusal) throw refusal;
  ctx.counters.entriesWritten += pubs.length;
  if (!ctx.fence.mayAct(token)) return;
  m.ack();
  ctx.counters.fannedOut++;
}

/** Starts the fan-out loop on the `fanout` durable. */
export async function startFanout(ctx: DeliveryContext): Promise<PullLoop> {
  const consumer = await ctx.js.consumers.get(ctx.streams.chat, FANOUT_DURABLE);
  return await startPullLoop(ctx, {
    name: "fan-out",
    consumer,
    window: 64,
    handle: (m, token) => fanoutOne(ctx, m, token),
  });
}
