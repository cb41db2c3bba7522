/**
 * The endpoint's bind-only consumers: its lifecycle's `dm_` inbox, its role's shared
 * `svc_<role>` task queue, and its `dlv_` durable-delivery inbox. The provisioner created them
 * with their filters; an agent credential may only read their info, pull and ack.
 *
 * @module
 */

import type { ConsumerMessages, JetStreamClient, JsMsg } from "nats";
import { CotalError } from "../errors.ts";
import type { Principal } from "../wire/mod.ts";
import {
  dlvDurableName,
  dmDurableName,
  isNotFound,
  streamNames,
  svcDurableName,
  wrapJs,
} from "../wire/mod.ts";
import { type InboundHost, surfaceConsumed, surfaceDurable } from "./inbound.ts";

/** Messages pulled per request; the broker keeps the rest until they are asked for. */
const PULL_BATCH = 128;

/** What to bind. */
export interface ConsumerTargets {
  principal: Principal;
  lifecycleUid: string;
  role?: string;
}

/** The running consumers of one connection. */
export class Consumers {
  readonly #host: InboundHost;
  readonly #error: (err: CotalError) => void;
  #running: ConsumerMessages[] = [];

  constructor(host: InboundHost, error: (err: CotalError) => void) {
    this.#host = host;
    this.#error = error;
  }

  /** Bind and start consuming. A missing `dm_` or `svc_` durable fails; a missing `dlv_` does not. */
  async bind(js: JetStreamClient, t: ConsumerTargets): Promise<void> {
    this.stop();
    const s = streamNames(this.#host.space);
    const dm = dmDurableName(t.principal, t.lifecycleUid);
    await this.#consume(js, s.dm, dm, true, (m) => surfaceConsumed(this.#host, m, "dm"));
    if (t.role) {
      const svc = svcDurableName(t.role);
      await this.#consume(js, s.task, svc, true, (m) => surfaceConsumed(this.#host, m, "anycast"));
    }
    const dlv = dlvDurableName(t.principal, t.lifecycleUid);
    await this.#consume(js, s.dlv, dlv, false, (m) => surfaceDurable(this.#host, m));
  }

  /** Stop pulling; unacked copies are redelivered after their ack wait. */
  stop(): void {
    for (const c of this.#running.splice(0)) c.stop();
  }

  async #consume(
    js: JetStreamClient,
    stream: string,
    name: string,
    required: boolean,
    handle: (m: JsMsg) => void,
  ): Promise<void> {
    let consumer;
    try {
      consumer = await js.consumers.get(stream, name);
    } catch (err) {
      if (!isNotFound(err) && !/not found/i.test(String(err))) {
        throw wrapJs(`bind the consumer ${name} on ${stream}`, err);
      }
      if (!required) return;
      throw new CotalError(
        "consumer_missing",
        `The durable ${name} on ${stream} does not exist; provision this agent (and lifecycle uid) before starting it.`,
      );
    }
    const msgs = await consumer.consume({ max_messages: PULL_BATCH, callback: handle });
    this.#running.push(msgs);
    (async () => {
      for await (const s of await msgs.status()) {
        if (s.type === "consumer_deleted" || s.type === "consumer_not_found") {
          this.#error(
            new CotalError(
              "consumer_deleted",
              `The durable ${name} on ${stream} was deleted; this lifecycle was deprovisioned or its inbox removed.`,
            ),
          );
        }
      }
    })().catch(() => {});
  }
}
