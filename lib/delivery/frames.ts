/**
 * The two Plane-3 payloads: the INBOX entry the fan-out writes (pre-authorization, never read
 * by agents) and the versioned frame the trusted reader publishes to a member's DLV subject
 * (the durable copy an agent consumes), plus the copy id that dedupes both. An entry's body is
 * already the frame; the reader only reads the entry's headers.
 *
 * @module
 */

import { headers, type MsgHdrs } from "nats";
import type { CotalMessage } from "../wire/mod.ts";
import { DELIVERY_FRAME_HEADER, DELIVERY_FRAME_VERSION } from "./constants.ts";

/** Why a copy was written: a durable channel's member, or (reserved) a live-channel mention. */
export type EntryReason = "durable-channel" | "live-mention";

/**
 * What an INBOX entry says about its copy, carried in headers. The body is the finished DLV
 * frame, rendered once per CHAT message and shared by every member's entry, so the reader
 * judges an entry on these few fields and forwards the body untouched.
 */
export interface InboxEntry {
  /** The message id (the copy id is derived from it). */
  msgId: string;
  channel: string;
  /** The CHAT stream sequence (membership windows are judged on it). */
  seq: number;
  reason: EntryReason;
  /** The membership row's generation the copy was written for. */
  generation: number;
}

/** The durable copy on `dlv.<owner>.<actor>.<uid>`. */
export interface DeliveryFrame {
  version: typeof DELIVERY_FRAME_VERSION;
  /** The channel the daemon authorized; receivers route on it, never on `msg.channel`. */
  channel: string;
  msg: CotalMessage;
}

const ENC = new TextEncoder();
const DEC = new TextDecoder("utf-8", { fatal: true });
const H_MSG_ID = "Cotal-Entry-Msg-Id";
const H_CHANNEL = "Cotal-Entry-Channel";
const H_SEQ = "Cotal-Entry-Seq";
const H_REASON = "Cotal-Entry-Reason";
const H_GENERATION = "Cotal-Entry-Generation";

/**
 * The `Nats-Msg-Id` of one copy: `<msgId>:<owner.actor>:<uid>:<generation>`. The uid is inside
 * because JetStream dedup is stream-wide: without it a same-alias successor's copy would be
 * suppressed by its predecessor's.
 */
export function copyId(msgId: string, member: string, uid: string, generation: number): string {
  return `${msgId}:${member}:${uid}:${generation}`;
}

/** The headers of an INBOX entry (its body is {@linkcode renderFrame}'s bytes). */
export function entryHeaders(entry: InboxEntry): MsgHdrs {
  const h = headers();
  h.set(H_MSG_ID, entry.msgId);
  h.set(H_CHANNEL, entry.channel);
  h.set(H_SEQ, String(entry.seq));
  h.set(H_REASON, entry.reason);
  h.set(H_GENERATION, String(entry.generation));
  return h;
}

/** Read an INBOX entry's fields back, or undefined when it is not a well-formed entry. */
export function decodeEntry(hdrs: MsgHdrs | undefined): InboxEntry | undefined {
  if (!hdrs) return undefined;
  const msgId = hdrs.get(H_MSG_ID);
  const channel = hdrs.get(H_CHANNEL);
  const seq = Number(hdrs.get(H_SEQ));
  const generation = Number(hdrs.get(H_GENERATION));
  const reason = hdrs.get(H_REASON);
  if (
    msgId === "" || channel === "" || !Number.isSafeInteger(seq) || seq < 1 ||
    !Number.isSafeInteger(generation) || (reason !== "durable-channel" && reason !== "live-mention")
  ) return undefined;
  return { msgId, channel, seq, reason, generation };
}

/** The DLV frame `{version: 1, channel, msg}` of an authenticated message, as bytes. */
export function renderFrame(channel: string, msg: CotalMessage): Uint8Array {
  const frame: DeliveryFrame = {
    version: DELIVERY_FRAME_VERSION,
    channel,
    msg: { ...msg, channel },
  };
  return ENC.encode(JSON.stringify(frame));
}

/** The headers of a DLV copy: the frame marker and its copy id. */
export function frameHeaders(): MsgHdrs {
  const h = headers();
  h.set(DELIVERY_FRAME_HEADER, String(DELIVERY_FRAME_VERSION));
  return h;
}

/** Why a DLV entry is not a usable frame. */
export type FrameRefusal = "unmarked" | "malformed";

/**
 * Decode a DLV entry. An entry without the marker header (anything the daemon did not frame)
 * is `unmarked`; a marked entry that is not a version-1 frame is `malformed`. Both are
 * terminated by the receiver, never redelivered.
 */
export function decodeFrame(
  hdrs: MsgHdrs | undefined,
  data: Uint8Array,
): { ok: true; frame: DeliveryFrame } | { ok: false; reason: FrameRefusal } {
  if (hdrs?.get(DELIVERY_FRAME_HEADER) !== String(DELIVERY_FRAME_VERSION)) {
    return { ok: false, reason: "unmarked" };
  }
  try {
    const v = JSON.parse(DEC.decode(data));
    if (
      typeof v === "object" && v !== null && v.version === DELIVERY_FRAME_VERSION &&
      typeof v.channel === "string" && typeof v.msg === "object" && v.msg !== null &&
      typeof v.msg.id === "string" && typeof v.msg.from?.id === "string" &&
      Array.isArray(v.msg.parts)
    ) {
      // The frame's channel is the authorized one; the payload's own label is overwritten.
      return {
        ok: true,
        frame: { version: 1, channel: v.channel, msg: { ...v.msg, channel: v.channel } },
      };
    }
  } catch {
    // Falls through to malformed.
  }
  return { ok: false, reason: "malformed" };
}
