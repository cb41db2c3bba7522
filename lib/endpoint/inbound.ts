/**
 * Inbound copies: every path a message reaches the endpoint by (live channel subscription,
 * join backfill, reconnect gap fill, DM and role consumers, durable delivery frames) ends
 * here, is checked by the receive rules, coalesced by id, and surfaced as one `message` event.
 *
 * Receive rules: the subject is the authority. A malformed subject or JSON body, a `from.id`
 * that is not the subject's sender, or an owner that is not a principal owner is dropped; on
 * a consumer it is also terminated, since redelivering a permanent anomaly only repeats it.
 *
 * @module
 */

import type { JsMsg, MsgHdrs } from "nats";
import { CotalError } from "../errors.ts";
import type { CotalMessage } from "../wire/mod.ts";
import {
  decodeMessage,
  type DeliveryKind,
  GAP_MARKER_HEADER,
  isPrincipalOwnerToken,
  parseGapMarker,
  parsePrincipalId,
  type Principal,
  validateMessage,
} from "../wire/mod.ts";
import { type SeenIds, seenKey } from "./dedupe.ts";
import { CotalMessageEvent, type Delivery, GapEvent, type MessageSource } from "./events.ts";
import { headersOf, UNDECODABLE } from "../nats/mod.ts";

/** The header a trusted Plane-3 reader stamps on every delivery frame. */
export const DELIVERY_FRAME_HEADER = "Cotal-Delivery-Frame";
/** How long an unclaimed consumer copy waits before redelivery (no `message` listener). */
export const UNCLAIMED_NAK_MS = 5_000;

/** What the inbound paths need from the endpoint. */
export interface InboundHost {
  space: string;
  self(): Principal;
  seen: SeenIds;
  /** Whether a consumer copy of an id already surfaced is settled silently (`dedupeDurable`). */
  dedupeDurable: boolean;
  /** True when a persistent `message` listener is attached. */
  listening(): boolean;
  dispatch(ev: Event): boolean;
  /**
   * Keeps a core copy that came while no `message` listener was attached (a boot channel's
   * backfill before a module agent's first listener), for the first one to be added.
   */
  hold(ev: CotalMessageEvent, bytes: number): void;
  error(err: CotalError): void;
}

const NOOP: Delivery = Object.freeze({
  durable: false,
  settled: true,
  ack: () => Promise.resolve(),
  nak: () => {},
  term: () => {},
  working: () => {},
});

function dropped(reason: string, detail: string, where: string): CotalError {
  return new CotalError(
    "message_dropped",
    `A ${where} message was dropped (${reason}): ${detail}; the sender is misconfigured or forging.`,
  );
}

/** A live, backfilled or gap-filled copy (no settlement). */
export function surfaceCore(
  host: InboundHost,
  subject: string,
  data: Uint8Array,
  source: "live" | "backfill" | "gap",
  seq?: number,
  headers?: MsgHdrs,
): void {
  const d = decodeMessage(subject, data, { space: host.space, self: host.self(), headers });
  if (!d.ok) {
    if (d.reason !== "echo") host.error(dropped(d.reason, d.detail, "channel"));
    return;
  }
  if (host.seen.has(seenKey(d.message))) return;
  const ev = new CotalMessageEvent(d.message, NOOP, {
    kind: d.kind,
    historical: source === "backfill",
    source,
    seq,
  });
  // Not marked seen while nobody listens: it waits for the first listener, and a durable
  // copy of it must not be settled as already handled (it was dropped so before).
  if (!host.listening()) {
    host.hold(ev, data.length);
    return;
  }
  host.seen.check(seenKey(d.message));
  host.dispatch(ev);
}

/** A copy held by a DM or role consumer: settled after the listeners return. */
export function surfaceConsumed(host: InboundHost, m: JsMsg, source: "dm" | "anycast"): void {
  const d = decodeMessage(m.subject, m.data, {
    space: host.space,
    self: host.self(),
    headers: headersOf(m),
  });
  if (!d.ok) {
    if (d.reason === "echo") m.ack();
    else {
      m.term(d.reason);
      host.error(dropped(d.reason, d.detail, source === "dm" ? "DM" : "task"));
    }
    return;
  }
  settleAfterDispatch(host, m, d.message, d.kind, source);
}

/**
 * A durable-delivery frame from the `dlv_` consumer: `{version: 1, channel, msg}` under the
 * frame header, written by the trusted reader after re-authorizing the copy.
 */
export function surfaceDurable(host: InboundHost, m: JsMsg): void {
  const h = headersOf(m);
  if (h === UNDECODABLE) {
    m.term("malformed-frame");
    host.error(dropped("malformed-frame", "headers that cannot be read", "durable"));
    return;
  }
  if (h?.get(GAP_MARKER_HEADER) === "1") {
    // Written by the delivery daemon only (agents cannot publish on DLV): the count and
    // range of copies refused while this member's backlog was full.
    const marker = parseGapMarker(m.data);
    if (marker) host.dispatch(new GapEvent(marker));
    else host.error(dropped("malformed-gap", "not a version-1 gap marker", "durable"));
    m.ack();
    return;
  }
  const frame = h?.get(DELIVERY_FRAME_HEADER) === "1" ? parseFrame(m.data) : undefined;
  if (!frame) {
    m.term("malformed-frame");
    host.error(dropped("malformed-frame", "not a version-1 delivery frame", "durable"));
    return;
  }
  const { channel, msg } = frame;
  let sender: Principal;
  try {
    validateMessage({ ...msg, channel } as CotalMessage);
    sender = parsePrincipalId(msg.from.id, { anyOwner: true });
  } catch {
    m.term("malformed-json");
    host.error(dropped("malformed-json", "the framed message is not a valid envelope", "durable"));
    return;
  }
  if (!isPrincipalOwnerToken(sender.owner)) {
    m.term("not-principal-owner");
    host.error(dropped("not-principal-owner", "the sender's owner is not local or u_…", "durable"));
    return;
  }
  if (sender.owner === host.self().owner && sender.actor === host.self().actor) {
    m.ack();
    return;
  }
  const message = { ...msg, channel } as CotalMessage;
  delete message.to;
  delete message.toService;
  settleAfterDispatch(host, m, message, "channel", "durable");
}

function settleAfterDispatch(
  host: InboundHost,
  m: JsMsg,
  message: CotalMessage,
  kind: DeliveryKind,
  source: MessageSource,
): void {
  // An id already surfaced (the live copy came first, or a redelivery of a handled copy) is
  // settled silently: the host has seen it. Unless the host settles copies itself once it has
  // kept them (cotal mcp, `dedupeDurable: false`): its live copy or its history of a post is in
  // RAM only, and this copy is what the broker keeps until it is read (fault pass 9).
  if (host.dedupeDurable && host.seen.has(seenKey(message))) {
    m.ack();
    return;
  }
  if (!host.listening()) {
    m.nak(UNCLAIMED_NAK_MS);
    return;
  }
  const again = host.seen.check(seenKey(message));
  const delivery = consumerDelivery(m, () => {
    if (!again) host.seen.forget(seenKey(message));
  });
  const ev = new CotalMessageEvent(message, delivery, {
    kind,
    historical: false,
    source,
    seq: m.seq,
  });
  const keep = host.dispatch(ev);
  if (keep && !delivery.settled) void delivery.ack().catch(() => {});
}

function consumerDelivery(m: JsMsg, forget: () => void): Delivery {
  let settled = false;
  return {
    durable: true,
    get settled() {
      return settled;
    },
    async ack() {
      if (settled) return;
      settled = true;
      await m.ackAck();
    },
    nak(delayMs?: number) {
      if (settled) return;
      settled = true;
      // A nak'd copy must surface again when it is redelivered.
      forget();
      m.nak(delayMs);
    },
    term() {
      if (settled) return;
      settled = true;
      m.term();
    },
    working() {
      if (!settled) m.working();
    },
  };
}

function parseFrame(data: Uint8Array): { channel: string; msg: CotalMessage } | undefined {
  try {
    const f = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(data));
    if (f?.version !== 1 || typeof f.channel !== "string" || typeof f.msg !== "object") {
      return undefined;
    }
    if (f.msg === null || typeof f.msg.from !== "object" || f.msg.from === null) return undefined;
    return { channel: f.channel, msg: f.msg as CotalMessage };
  } catch {
    return undefined;
  }
}
