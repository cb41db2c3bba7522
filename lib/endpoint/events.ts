/**
 * The endpoint's typed events. They are plain `Event` subclasses dispatched on an
 * `EventTarget`, so a `warning` or `error` nobody listens to is a no-op, never a crash.
 *
 * @module
 */

import type { CotalError } from "../errors.ts";
import type { CotalMessage } from "../wire/envelope.ts";
import type { DeliveryKind } from "../wire/receive.ts";
import type { GapEnd, GapMarker } from "../wire/gap_marker.ts";
import type { Presence } from "./types.ts";

/** Where an inbound copy came from. */
export type MessageSource = "live" | "backfill" | "gap" | "dm" | "anycast" | "durable";

/** How a message reached this endpoint. */
export interface MessageMeta {
  /** Derived from the delivering subject only. */
  kind: DeliveryKind;
  /** True for retained messages surfaced by a join's backfill (published before the join). */
  historical: boolean;
  source: MessageSource;
  /** The JetStream stream sequence, when the copy came through a stream. */
  seq?: number;
}

/**
 * The settlement handle of one inbound copy. JetStream copies (DM, anycast, durable) stay
 * pending until acked; a live or historical copy has `durable: false` and no-op settlement.
 */
export interface Delivery {
  /** True when this copy is held by a consumer and must be settled. */
  readonly durable: boolean;
  /** True once acked, naked or terminated. */
  readonly settled: boolean;
  /** Done with it: the broker removes it from this endpoint's pending set. */
  ack(): Promise<void>;
  /** Not now: the broker redelivers it (after `delayMs`, when given). */
  nak(delayMs?: number): void;
  /** Never: the broker stops redelivering it. */
  term(): void;
}

/**
 * A message. The endpoint acks a durable copy once the listeners return, unless one calls
 * `preventDefault()`; then that listener owns `delivery.ack()` / `nak()`.
 */
export class CotalMessageEvent extends Event {
  readonly message: CotalMessage;
  readonly delivery: Delivery;
  readonly meta: MessageMeta;
  constructor(message: CotalMessage, delivery: Delivery, meta: MessageMeta) {
    super("message", { cancelable: true });
    this.message = message;
    this.delivery = delivery;
    this.meta = meta;
  }
}

/** Why a peer went offline: its final row, a heartbeat older than the window, or a deleted row. */
export type OfflineReason = "left" | "stale" | "removed";

/** A peer appeared, changed, or went offline. */
export class PresenceEvent extends Event {
  readonly change: "join" | "update" | "offline";
  readonly presence: Presence;
  /** Set when `change` is `offline`. */
  readonly reason?: OfflineReason;
  constructor(change: "join" | "update" | "offline", presence: Presence, reason?: OfflineReason) {
    super("presence");
    this.change = change;
    this.presence = presence;
    this.reason = reason;
  }
}

/** The live roster (online peers, sorted by name) after any presence change. */
export class RosterEvent extends Event {
  readonly roster: Presence[];
  constructor(roster: Presence[]) {
    super("roster");
    this.roster = roster;
  }
}

/** True after every full (re)bind; false when the connection is lost or being rebuilt. */
export class ConnectionEvent extends Event {
  readonly connected: boolean;
  constructor(connected: boolean) {
    super("connection");
    this.connected = connected;
  }
}

/** The raw socket edge: the client library lost or regained the broker. */
export class TransportEvent extends Event {
  readonly connected: boolean;
  readonly server?: string;
  constructor(connected: boolean, server?: string) {
    super("transport");
    this.connected = connected;
    this.server = server;
  }
}

/** A condition the endpoint survives (renewal failure, reconnect retry, dropped heartbeat). */
export class EndpointWarningEvent extends Event {
  readonly error: CotalError;
  /** When the endpoint retries next, if it scheduled a retry. */
  readonly retryInMs?: number;
  constructor(error: CotalError, retryInMs?: number) {
    super("warning");
    this.error = error;
    this.retryInMs = retryInMs;
  }
}

/** An asynchronous fault: a permission denial, a dropped spoofed or malformed message. */
export class EndpointErrorEvent extends Event {
  readonly error: CotalError;
  constructor(error: CotalError) {
    super("error");
    this.error = error;
  }
}

/** A renewed credential is now the one the live connection presents. */
export class RenewalEvent extends Event {
  readonly credential: "creds" | "bearer";
  /** The new credential's expiry, epoch ms. */
  readonly expiresAt: number;
  constructor(credential: "creds" | "bearer", expiresAt: number) {
    super("renewed");
    this.credential = credential;
    this.expiresAt = expiresAt;
  }
}

/**
 * Copies meant for this member were refused while its backlog of unread copies was full: how
 * many, and the first and last of them. Nothing of them can be read back from the backstop;
 * `history` on the channels concerned may still hold them.
 */
export class GapEvent extends Event {
  /** How many copies meant for this member were refused (its backlog was full). */
  readonly count: number;
  /** The first copy missed: message id, channel, CHAT sequence, when. */
  readonly first: GapEnd;
  /** The last copy missed. */
  readonly last: GapEnd;
  /** The event for one gap marker read from the member's DLV subject. */
  constructor(marker: GapMarker) {
    super("gap");
    this.count = marker.count;
    this.first = marker.first;
    this.last = marker.last;
  }
}

/** Event name to event class. */
export interface EndpointEventMap {
  message: CotalMessageEvent;
  presence: PresenceEvent;
  roster: RosterEvent;
  connection: ConnectionEvent;
  transport: TransportEvent;
  warning: EndpointWarningEvent;
  error: EndpointErrorEvent;
  renewed: RenewalEvent;
  gap: GapEvent;
}
