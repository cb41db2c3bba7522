/**
 * The trusted reader: the authorization gate of the durable backstop. INBOX is a mixed,
 * pre-authorization store no agent can read; for every entry the reader re-checks the
 * member's *current* read ACL and, for durable-channel copies, the membership window, before
 * publishing the framed copy to the member's DLV subject.
 *
 * @module
 */

import type { JsMsg } from "nats";
import { channelCovers, dlvSubject, parseSubject } from "../wire/mod.ts";
import { READER_DURABLE, READER_MAX_DELIVERIES, READER_NAK_DELAY_MS } from "./constants.ts";
import type { DeliveryContext } from "./context.ts";
import { copyId, decodeEntry, frameHeaders } from "./frames.ts";
import { durableEligible } from "./members.ts";
import { isBacklogFull, isTooLarge } from "./setaside.ts";
import { type PullLoop, startDurableLoop } from "./pull_loop.ts";
import { ensureReaderDurable } from "./durables.ts";
import { headersOf, UNDECODABLE } from "../nats/mod.ts";

function deferOrTerm(ctx: DeliveryContext, m: JsMsg, token: number, why: string): void {
  if (!ctx.fence.mayAct(token)) return;
  if (m.info.redeliveryCount >= READER_MAX_DELIVERIES) {
    ctx.counters.terminated++;
    ctx.log.warn(`reader: terminated ${m.subject} after ${m.info.redeliveryCount} tries (${why})`);
    m.term(why);
  } else {
    ctx.counters.deferred++;
    m.nak(READER_NAK_DELAY_MS);
  }
}

/** Judge and transfer one INBOX entry under fence token `token`. */
export async function readOne(ctx: DeliveryContext, m: JsMsg, token: number): Promise<void> {
  const parsed = parseSubject(m.subject, { space: ctx.space });
  const h = headersOf(m);
  const entry = h === UNDECODABLE ? undefined : decodeEntry(h);
  if (!parsed.ok || parsed.kind !== "dinbox" || !entry) {
    ctx.counters.droppedMalformed++;
    if (ctx.fence.mayAct(token)) m.term("not a Plane-3 entry");
    return;
  }
  const member = `${parsed.member.owner}.${parsed.member.actor}`;
  const uid = parsed.lifecycleUid;
  await Promise.all([ctx.acl.sync(), ctx.members.sync()]);
  const acl = ctx.acl.get(`${member}.${uid}`)?.value;
  if (!acl) {
    // Unknown is not "no": defer (a row may still be on its way), bounded so one stuck owner
    // cannot hold the head of the shared reader; a retired lifecycle's entries end terminated.
    deferOrTerm(ctx, m, token, `no ACL row for ${member}.${uid}`);
    return;
  }
  if (!acl.allowSubscribe.some((pattern) => channelCovers(pattern, entry.channel))) {
    // Revoked or narrowed: the copy is dropped for good.
    ctx.counters.droppedAcl++;
    if (ctx.fence.mayAct(token)) m.ack();
    return;
  }
  if (entry.reason === "durable-channel") {
    const row = ctx.members.get(`${entry.channel}/${member}.${uid}`)?.value;
    if (!row || !durableEligible(row, entry.seq)) {
      // A leave is a hard read cut for everything after its cursor.
      ctx.counters.droppedWindow++;
      if (ctx.fence.mayAct(token)) m.ack();
      return;
    }
  }
  if (!ctx.fence.mayAct(token)) return;
  const subject = dlvSubject(ctx.space, parsed.member, uid);
  try {
    // DLV under pressure: a member with one of the largest unread backlogs waits, as if its
    // backlog were full (the storage warden, ./warden.ts).
    if (ctx.warden?.yields(subject)) throw new Error("maximum messages per subject exceeded");
    // The body is the frame the fan-out rendered from the authenticated message: forwarded as is.
    await ctx.gate.publish(subject, m.data, {
      msgID: copyId(entry.msgId, member, uid, entry.generation),
      headers: frameHeaders(),
    });
  } catch (err) {
    if (isBacklogFull(err) || isTooLarge(err)) {
      // The member's unread backlog is full (a gap it will be told of), or the copy can never
      // fit: either way it is set aside and the entry is settled, so the queue flows on.
      if (isBacklogFull(err)) {
        await ctx.setaside?.missed(member, uid, {
          msgId: entry.msgId,
          channel: entry.channel,
          seq: entry.seq,
          at: Date.now(),
        });
      } else {
        await ctx.setaside?.deadLetter({
          at: Date.now(),
          stage: "reader",
          stream: ctx.streams.inbox,
          seq: m.seq,
          subject: m.subject,
          msgId: entry.msgId,
          member,
          bytes: m.data.length,
          reason: "too large for the broker",
        });
      }
      if (ctx.fence.mayAct(token)) m.ack();
      return;
    }
    deferOrTerm(ctx, m, token, `DLV publish failed: ${(err as Error)?.message ?? err}`);
    return;
  }
  // The entry's durability now lives in DLV; a crash before this ack re-transfers under the
  // same copy id, which DLV's duplicate window collapses.
  ctx.warden?.wrote(m.data.length);
  if (!ctx.fence.mayAct(token)) return;
  m.ack();
  ctx.counters.delivered++;
}

/** Starts the reader loop on the `reader` durable. */
export const startReader = (ctx: DeliveryContext): Promise<PullLoop> =>
  startDurableLoop(
    ctx,
    "reader",
    ctx.streams.inbox,
    READER_DURABLE,
    readOne,
    (at) => ensureReaderDurable(ctx, at),
  );
