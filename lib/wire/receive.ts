/**
 * Receive-side checks on a delivered message. The subject is the authority: the kind, the
 * sender and the routing field come from it, and a payload that disagrees is dropped.
 *
 * @module
 */

import type { MsgHdrs } from "nats";
import { UNDECODABLE } from "../nats/mod.ts";
import { isBrokerAnswer } from "./broker_answer.ts";
import { type CotalMessage, type EndpointRef, type Part, validatePart } from "./envelope.ts";
import { isPrincipalOwnerToken, type Principal } from "./names.ts";
import { type ParsedSubject, parseSubject } from "./subjects.ts";

/** Delivery kind, derived from the delivering subject only (never from `to`/`toService`). */
export type DeliveryKind = "channel" | "dm" | "anycast";

/**
 * Why a delivered message was dropped. The first three are permanent anomalies a JetStream
 * consumer must `term` (never redeliver); `echo` is the receiver's own message (ack it).
 */
export type DropReason =
  | "malformed-subject"
  | "malformed-json"
  | "sender-mismatch"
  | "not-principal-owner"
  | "unusable-id"
  | "broker-answer"
  | "malformed-headers"
  | "echo";

/** The result of {@linkcode decodeMessage}. */
export type Decoded =
  | { ok: true; kind: DeliveryKind; sender: Principal; message: CotalMessage }
  | { ok: false; reason: DropReason; detail: string };

const KINDS: Record<string, DeliveryKind> = { chat: "channel", inst: "dm", svc: "anycast" };
const decoder = new TextDecoder("utf-8", { fatal: true });

/** The latest time a `Date` holds (ms since the epoch). */
const MAX_TS = 8.64e15;

/**
 * Decode and check a message delivered on `subject`. On success the routing field is
 * rewritten from the subject (the channel, recipient or role) and the other two are removed,
 * so a forged payload label cannot redirect attention. Unknown fields are kept (ignored).
 */
export function decodeMessage(
  subject: string,
  data: Uint8Array,
  opts: { space?: string; self?: Principal; headers?: MsgHdrs | typeof UNDECODABLE } = {},
): Decoded {
  const drop = (reason: DropReason, detail: string): Decoded => ({ ok: false, reason, detail });
  // Pass headersOf(m), never m.headers: reading a block nats.js cannot decode throws, and any
  // member may store one (red team 19: one such DM stopped its recipient's consumer).
  if (opts.headers === UNDECODABLE) {
    return drop("malformed-headers", "a header block that cannot be read");
  }
  if (isBrokerAnswer(opts.headers)) {
    return drop("broker-answer", "a broker answer aimed at this subject, not a member's post");
  }
  const parsed = parseSubject(subject, { space: opts.space });
  if (!parsed.ok || !(parsed.kind in KINDS)) {
    return drop("malformed-subject", `subject is not a chat, inst or svc subject`);
  }
  const ps = parsed as ParsedSubject & { kind: "chat" | "inst" | "svc" };
  let body: unknown;
  try {
    body = JSON.parse(decoder.decode(data));
  } catch {
    return drop("malformed-json", "payload is not UTF-8 JSON");
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return drop("malformed-json", "payload is not a JSON object");
  }
  const msg = body as Record<string, unknown>;
  const from = msg.from as EndpointRef | undefined;
  const senderId = `${ps.sender.owner}.${ps.sender.actor}`;
  if (typeof from !== "object" || from === null || from.id !== senderId) {
    return drop("sender-mismatch", "from.id does not equal the subject's sender");
  }
  if (!isPrincipalOwnerToken(ps.sender.owner)) {
    return drop("not-principal-owner", "the subject's owner is not local or a derived u_ owner");
  }
  if (typeof msg.id !== "string" || msg.id === "") {
    return drop("unusable-id", "the message id is missing or empty");
  }
  if (opts.self && opts.self.owner === ps.sender.owner && opts.self.actor === ps.sender.actor) {
    return drop("echo", "the message is the receiver's own");
  }
  if (!Array.isArray(msg.parts)) return drop("malformed-json", "parts is not an array");
  // A part no reader can show broke them all, and a model's inbox for good (red team 28).
  try {
    msg.parts.forEach((p, i) => validatePart(p as Part, `parts[${i}]`));
  } catch {
    return drop("malformed-json", "a part is not one a reader can show");
  }
  // A time no Date can hold broke every reader that shows it (red team 27: tail, cotal mcp).
  if (!Number.isSafeInteger(msg.ts) || (msg.ts as number) < 0 || (msg.ts as number) > MAX_TS) {
    return drop("malformed-json", "ts is not epoch milliseconds");
  }
  const message = { ...msg, parts: msg.parts as Part[] } as unknown as CotalMessage;
  delete message.channel;
  delete message.to;
  delete message.toService;
  if (ps.kind === "chat") message.channel = ps.channel;
  if (ps.kind === "inst") message.to = `${ps.recipient.owner}.${ps.recipient.actor}`;
  if (ps.kind === "svc") message.toService = ps.role;
  return { ok: true, kind: KINDS[ps.kind], sender: ps.sender, message };
}
