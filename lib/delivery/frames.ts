/**
 * The two Plane-3 payloads: the INBOX entry the fan-out writes (pre-authorization, never read
 * by agents) and the versioned frame the trusted reader publishes to a member's DLV subject
 * (the durable copy an agent consumes), plus the copy id that dedupes both.
 *
 * @module
 */

import { headers, type MsgHdrs } from "nats";
import type { CotalMessage } from "../wire/mod.ts";
import { DELIVERY_FRAME_HEADER, DELIVERY_FRAME_VERSION } from "./constants.ts";

/** Why a copy was written: a durable channel's member, or (reserved) a live-channel mention. */
export type EntryReason = "durable-channel" | "live-mention";

/** An INBOX entry: one message copied for one member lifecycle. */
export interface InboxEntry {
  /** The authenticated message, its channel rewritten from the CHAT subject. */
  msg: CotalMessage;
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

/**
 * The `Nats-Msg-Id` of one copy: `<msgId>:<owner.actor>:<uid>:<generation>`. The uid is inside
 * because JetStream dedup is stream-wide: without it a same-alias successor's copy would be
 * suppressed by its predecessor's.
 */
export function copyId(msgId: string, member: string, uid: string, generation: number): string {
  return `${msgId}:${member}:${uid}:${generation}`;
}

/** Encode an INBOX entry. */
export function encodeEntry(entry: InboxEntry): Uint8Array {
  return ENC.encode(JSON.stringify(entry));
}

/** Decode an INBOX entry, or undefined when it is not one. */
export function decodeEntry(data: Uint8Array): InboxEntry | undefined {
  try {
    const v = JSON.parse(DEC.decode(data));
    if (
      typeof v !== "object" || v === null || typeof v.channel !== "string" ||
      !Number.isSafeInteger(v.seq) || !Number.isSafeInteger(v.generation) ||
      (v.reason !== "durable-channel" && v.reason !== "live-mention") ||
      typeof v.msg !== "object" || v.msg === null || typeof v.msg.id !== "string"
    ) return undefined;
    return v as InboxEntry;
  } catch {
    return undefined;
  }
}

/** Encode a frame and its marker header. */
export function encodeFrame(
  channel: string,
  msg: CotalMessage,
): { data: Uint8Array; hdrs: MsgHdrs } {
  const hdrs = headers();
  hdrs.set(DELIVERY_FRAME_HEADER, String(DELIVERY_FRAME_VERSION));
  const frame: DeliveryFrame = {
    version: DELIVERY_FRAME_VERSION,
    channel,
    msg: { ...msg, channel },
  };
  return { data: ENC.encode(JSON.stringify(frame)), hdrs };
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
