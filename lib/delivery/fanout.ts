/**
 * The fan-out writer. Each CHAT message is authenticated against its subject, and on a durable
 * channel one copy is made per member whose window holds the message's sequence (the sender
 * excepted). A member whose read ACL row is known is judged here, as the trusted reader would
 * judge its entry: a copy its ACL allows goes straight to its DLV subject, framed, under the
 * copy id the reader would use; one its ACL refuses is dropped. A member with no ACL row yet
 * (unknown is not "no") gets an INBOX entry, which the reader judges once the row is there.
 * One broker write per copy instead of two (an INBOX entry, then its DLV copy): that was the
 * copy path's cost at scale (issue 17).
 *
 * @module
 */

import { headersOf } from "../nats/mod.ts";
import type { JsMsg } from "nats";
import {
  channelCovers,
  decodeMessage,
  dinboxSubject,
  dlvSubject,
  parseSubject,
} from "../wire/mod.ts";
import { FANOUT_DURABLE } from "./constants.ts";
import { deliveryClassOf, type DeliveryContext } from "./context.ts";
import { copyId, entryHeaders, frameHeaders, type InboxEntry, renderFrame } from "./frames.ts";
import { isBacklogFull, isTooLarge } from "./setaside.ts";
import { durableEligible } from "./members.ts";
import { type PullLoop, startDurableLoop } from "./pull_loop.ts";
import { ensureFanoutDurable } from "./durables.ts";

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
  await Promise.all([ctx.channels.sync(), ctx.members.sync(), ctx.acl.sync()]);
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
      const acl = ctx.acl.get(`${rec.owner}.${rec.lifecycleUid}`)?.value;
      if (acl && !acl.allowSubscribe.some((pattern) => channelCovers(pattern, channel))) {
        // Revoked or narrowed: never copied.
        ctx.counters.droppedAcl++;
        continue;
      }
      // Straight to DLV while the warden sees room (no warden: no daemon-side DLV guard at all).
      const direct = acl !== undefined && (ctx.warden?.admitsDirect(frame.length) ?? true);
      const member = { owner, actor };
      const subject = direct
        ? dlvSubject(ctx.space, member, rec.lifecycleUid)
        : dinboxSubject(ctx.space, member, rec.lifecycleUid);
      // DLV under pressure: a member with one of the largest unread backlogs waits, as if its
      // backlog were full (the storage warden, ./warden.ts).
      const publish = direct && ctx.warden?.yields(subject)
        ? Promise.reject(new Error("maximum messages per subject exceeded"))
        : ctx.gate.publish(subject, frame, {
          msgID: copyId(entry.msgId, rec.owner, rec.lifecycleUid, rec.generation),
          headers: direct ? frameHeaders() : entryHeaders(entry),
        });
      pubs.push(
        publish.then(() => {
          if (direct) ctx.counters.delivered++;
          else ctx.counters.entriesWritten++;
        }, async (err) => {
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
  if (!ctx.fence.mayAct(token)) return;
  m.ack();
  ctx.counters.fannedOut++;
}

/** Starts the fan-out loop on the `fanout` durable. */
export const startFanout = (ctx: DeliveryContext): Promise<PullLoop> =>
  startDurableLoop(
    ctx,
    "fan-out",
    ctx.streams.chat,
    FANOUT_DURABLE,
    fanoutOne,
    (at) => ensureFanoutDurable(ctx, at),
  );
