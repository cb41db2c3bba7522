/**
 * The endpoint's typed events. They are plain `Event` subclasses dispatched on an
 * `EventTarget`, so a `warning` or `error` nobody listens to is a no-op, never a crash.
 *
 * @module
 */

import type { CotalError } from "../errors.ts";
import type { CotalMessage, DeliveryKind, GapEnd, GapMarker } from "../wire/mod.ts";
import type { Presence } from "./types.ts";

/** Where an inbound copy came from. */
export type MessageSource = "live" | "backfill" | "gap" | "dm" | "anycast" | "durable";

/** How a message reached this endpoint. */
export interface MessageMeta {
  /** Derived from the delivering subject only. */
  kind: DeliveryKind;
  /** True for retained messages surfaced by a join's backfill (published before the join). */
  historical: boolean;
  /** How it arrived: live, a join's backfill, a gap fill, a DM, an anycast task, a durable copy. */
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
  /**
   * Still being worked on: the broker's redelivery timer for this copy starts again (a copy
   * kept unsettled longer than the consumer's ack wait, 60 s, is otherwise delivered again).
   */
  working(): void;
}

/**
 * A message. The endpoint acks a durable copy once the listeners return, unless one calls
 * `preventDefault()`; then that listener owns `delivery.ack()` / `nak()`.
 */
export class CotalMessageEvent extends Event {
  /** The message, decoded and checked. */
  readonly message: CotalMessage;
  /** How it reached this endpoint. */
  readonly delivery: Delivery;
  /** Its stream position and headers, when it came from a stream. */
  readonly meta: MessageMeta;
  /** An event for `message` as delivered. */
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
  /** What happened to the peer. */
  readonly change: "join" | "update" | "offline";
  /** The peer's presence row (its last one, when it went offline). */
  readonly presence: Presence;
  /** Set when `change` is `offline`. */
  readonly reason?: OfflineReason;
  /** An event for one peer's change. */
  constructor(change: "join" | "update" | "offline", presence: Presence, reason?: OfflineReason) {
    super("presence");
    this.change = change;
    this.presence = presence;
    this.reason = reason;
  }
}

/** The live roster (online peers, sorted by name) after any presence change. */
export class RosterEvent extends Event {
  /** Every online peer, sorted by name. */
  readonly roster: Presence[];
  /** An event carrying the whole roster. */
  constructor(roster: Presence[]) {
    super("roster");
    this.roster = roster;
  }
}

/** True after every full (re)bind; false when the connection is lost or being rebuilt. */
export class ConnectionEvent extends Event {
  /** Whether the endpoint is connected and serving. */
  readonly connected: boolean;
  /** An event for the endpoint's connection state. */
  constructor(connected: boolean) {
    super("connection");
    this.connected = connected;
  }
}

/** The raw socket edge: the client library lost or regained the broker. */
export class TransportEvent extends Event {
  /** Whether the broker connection is up. */
  readonly connected: boolean;
  /** The server it is connected to, when connected. */
  readonly server?: string;
  /** An event for the broker connection. */
  constructor(connected: boolean, server?: string) {
    super("transport");
    this.connected = connected;
    this.server = server;
  }
}

/** A condition the endpoint survives (renewal failure, reconnect retry, dropped heartbeat). */
export class EndpointWarningEvent extends Event {
  /** What went wrong. */
  readonly error: CotalError;
  /** When the endpoint retries next, if it scheduled a retry. */
  readonly retryInMs?: number;
  /** A warning; `retryInMs` when the endpoint retries on its own. */
  constructor(error: CotalError, retryInMs?: number) {
    super("warning");
    this.error = error;
    this.retryInMs = retryInMs;
  }
}

/** An asynchronous fault: a permission denial, a dropped spoofed or malformed message. */
export class EndpointErrorEvent extends Event {
  /** What went wrong. */
  readonly error: CotalError;
  /** An error the endpoint cannot recover from by itself. */
  constructor(error: CotalError) {
    super("error");
    this.error = error;
  }
}

/** A renewed credential is now the one the live connection presents. */
export class RenewalEvent extends Event {
  /** Which credential was renewed. */
  readonly credential: "creds" | "bearer";
  /** The new credential's expiry, epoch ms. */
  readonly expiresAt: number;
  /** An event for a renewed credential, valid until `expiresAt` (epoch ms). */
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
  /**
   * Set when what was missed are DMs of this sender (`<owner>.<actor>`) that the storage warden
   * trimmed (the sender's oldest, while DM was half full and it held the most); `first` and
   * `last` then carry DM stream sequences and no channel.
   */
  readonly from?: string;
  /** The event for one gap marker read from the member's DLV subject. */
  constructor(marker: GapMarker) {
    super("gap");
    this.count = marker.count;
    this.first = marker.first;
    this.last = marker.last;
    if (marker.from !== undefined) this.from = marker.from;
  }
}

/** Event name to event class. */
export interface EndpointEventMap {
  /** A message arrived. */
  message: CotalMessageEvent;
  /** A peer joined, changed or went offline. */
  presence: PresenceEvent;
  /** The roster changed. */
  roster: RosterEvent;
  /** The endpoint connected or lost its connection. */
  connection: ConnectionEvent;
  /** The broker connection went up or down. */
  transport: TransportEvent;
  /** Something went wrong that the endpoint retries. */
  warning: EndpointWarningEvent;
  /** Something went wrong that needs the embedder. */
  error: EndpointErrorEvent;
  /** A credential was renewed. */
  renewed: RenewalEvent;
  /** Messages were missed (a backlog past its cap); fetch them from history. */
  gap: GapEvent;
}
