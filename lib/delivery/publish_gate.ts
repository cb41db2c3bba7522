/**
 * The copy path's JetStream publisher: acked publishes, bounded in flight, on one reply
 * subscription.
 *
 * npm:nats's `js.publish` is a full request per message: a mux entry, a timer, a deferred and a
 * throwaway "cancelled" Error when it settles; profiled, that bookkeeping was the largest single
 * cost per copy. Here every publish carries a reply subject under one wildcard subscription in
 * the cred's own inbox, acks are matched by token, and one sweeper times out what never came.
 *
 * The bound matters too: the fan-out writes one entry per member, so a window of messages to a
 * large channel would otherwise put tens of thousands of publishes in flight at once, no faster
 * at the broker and the main cause of memory growth under load.
 *
 * @module
 */

import { headers as newHeaders, type MsgHdrs, type NatsConnection, type Subscription } from "nats";
import { CotalError } from "../errors.ts";
import { headersOf, UNDECODABLE } from "../nats/mod.ts";

/** Acked publishes kept in flight at most. */
export const MAX_PUBLISHES_IN_FLIGHT = 256;
/** A publish whose ack has not arrived after this long is failed (the caller naks). */
export const PUBLISH_ACK_TIMEOUT_MS = 5_000;

/** What the broker acknowledged. */
export interface StoredAck {
  stream: string;
  seq: number;
  /** True when the copy id was already stored (the write was collapsed). */
  duplicate: boolean;
}

/** Options of one publish. */
export interface GatePublishOptions {
  /** `Nats-Msg-Id`: the broker collapses a repeat within the stream's duplicate window. */
  msgID: string;
  /** Extra headers (the id is added to them). */
  headers?: MsgHdrs;
}

interface Pending {
  resolve: (ack: StoredAck) => void;
  reject: (err: Error) => void;
  at: number;
  subject: string;
}

const DEC = new TextDecoder();

/** A bounded, acked publisher on one connection. */
export class PublishGate {
  readonly #nc: NatsConnection;
  readonly #prefix: string;
  readonly #max: number;
  readonly #pending = new Map<string, Pending>();
  readonly #sub: Subscription;
  readonly #sweeper: ReturnType<typeof setInterval>;
  #next = 0;
  #inflight = 0;
  #waiting: (() => void)[] = [];

  /** `inboxPrefix` is the connection's own reply inbox (`_INBOX_<connId>`). */
  constructor(nc: NatsConnection, inboxPrefix: string, max = MAX_PUBLISHES_IN_FLIGHT) {
    this.#nc = nc;
    this.#max = max;
    this.#prefix = `${inboxPrefix}.pa.${crypto.randomUUID().slice(0, 8)}`;
    this.#sub = nc.subscribe(`${this.#prefix}.*`, {
      callback: (_err, m) => {
        const token = m.subject.slice(this.#prefix.length + 1);
        const p = this.#pending.get(token);
        if (!p) return;
        this.#pending.delete(token);
        const h = headersOf(m);
        if (h === UNDECODABLE) return;
        if (h?.hasError) {
          // A status reply (503: no stream listens on the subject).
          p.reject(this.#refused(p.subject, `${h.code} ${h.description}`));
          return;
        }
        let v: {
          stream?: unknown;
          seq?: unknown;
          duplicate?: unknown;
          error?: { description?: unknown };
        };
        try {
          v = JSON.parse(DEC.decode(m.data));
        } catch {
          p.reject(this.#refused(p.subject, "an unparseable ack"));
          return;
        }
        if (v.error !== undefined || typeof v.seq !== "number") {
          p.reject(this.#refused(p.subject, String(v.error?.description ?? "no sequence")));
          return;
        }
        p.resolve({ stream: String(v.stream), seq: v.seq, duplicate: v.duplicate === true });
      },
    });
    this.#sweeper = setInterval(() => {
      const cutoff = Date.now() - PUBLISH_ACK_TIMEOUT_MS;
      for (const [token, p] of this.#pending) {
        if (p.at > cutoff) break; // insertion order is age order
        this.#pending.delete(token);
        p.reject(
          new CotalError(
            "publish_timeout",
            `No JetStream ack for a publish on ${p.subject} within ${PUBLISH_ACK_TIMEOUT_MS} ms.`,
          ),
        );
      }
    }, 1000);
  }

  #refused(subject: string, why: string): CotalError {
    return new CotalError(
      "publish_refused",
      `The broker did not store a publish on ${subject} (${why}).`,
    );
  }

  /** Publishes once a slot is free; resolves with the broker's ack. */
  async publish(subject: string, data: Uint8Array, opts: GatePublishOptions): Promise<StoredAck> {
    // Strictly first come first served: a member's copies keep their order.
    if (this.#inflight >= this.#max || this.#waiting.length > 0) {
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
    this.#inflight++;
    try {
      const token = (this.#next++).toString(36);
      const hdrs = opts.headers ?? newHeaders();
      hdrs.set("Nats-Msg-Id", opts.msgID);
      const acked = new Promise<StoredAck>((resolve, reject) => {
        this.#pending.set(token, { resolve, reject, at: Date.now(), subject });
      });
      try {
        this.#nc.publish(subject, data, { reply: `${this.#prefix}.${token}`, headers: hdrs });
      } catch (err) {
        // Refused before it left (larger than the broker's max_payload, a closed connection):
        // no ack will come, so nothing may be left pending for the sweeper to reject unheard.
        this.#pending.delete(token);
        acked.catch(() => {});
        throw this.#refused(subject, String((err as Error)?.message ?? err));
      }
      return await acked;
    } finally {
      this.#inflight--;
      this.#waiting.shift()?.();
    }
  }

  /** Fails what is in flight and stops listening. */
  close(): void {
    clearInterval(this.#sweeper);
    this.#sub.unsubscribe();
    for (const p of this.#pending.values()) {
      p.reject(
        new CotalError("publish_closed", `The publisher closed before ${p.subject} was acked.`),
      );
    }
    this.#pending.clear();
    for (const w of this.#waiting.splice(0)) w();
  }
}
