/**
 * The caller side of the daemon's rails, for agents, the supervisor and tools. A request goes
 * out on the caller's own `ctl.<service>.<owner>.<actor>` subject with its reply inside that
 * subject's `.reply.` subtree (the only replies a Cotal cred may subscribe).
 *
 * @module
 */

import type { NatsConnection } from "nats";
import { codeFrom, CotalError } from "../errors.ts";
import { ctlSubject, type Principal } from "../wire/mod.ts";
import { headersOf, UNDECODABLE } from "../nats/mod.ts";

const ENC = new TextEncoder();
const DEC = new TextDecoder();

/** Options of {@linkcode deliveryRequest}. */
export interface DeliveryRequestOptions {
  /** `delivery` (agents) or `delivery-admin` (the supervisor); default `delivery`. */
  service?: "delivery" | "delivery-admin";
  /** Default 30 s (a join's catch-up can be slow). */
  timeoutMs?: number;
}

async function bound(
  nc: NatsConnection,
  subject: string,
  payload: Uint8Array,
  timeoutMs: number,
): Promise<Uint8Array> {
  const reply = `${subject}.reply.${crypto.randomUUID().replaceAll("-", "")}`;
  const sub = nc.subscribe(reply, { max: 1 });
  const timer = setTimeout(() => sub.unsubscribe(), timeoutMs);
  try {
    await nc.flush();
    nc.publish(subject, payload, { reply });
    for await (const m of sub) {
      // A status reply (503): nobody serves the rail right now.
      const h = headersOf(m);
      if (h === UNDECODABLE) continue;
      if (h?.hasError) {
        throw new CotalError(
          "delivery_unreachable",
          `Nobody serves ${subject} right now; is the space's delivery daemon running?`,
        );
      }
      return m.data;
    }
  } finally {
    clearTimeout(timer);
  }
  throw new CotalError(
    "delivery_unreachable",
    `No reply on ${subject} within ${timeoutMs} ms; is the space's delivery daemon running?`,
  );
}

/**
 * Sends `{op, args: body}` to the delivery daemon as `caller` and resolves the reply's `data`.
 * A refusal (`ok:false`) rejects with a CotalError carrying the daemon's code and sentence.
 *
 * @example
 * ```ts
 * const { generation } = await deliveryRequest(nc, space, me, "durableJoin", { channel: "ops" });
 * ```
 */
export async function deliveryRequest(
  nc: NatsConnection,
  space: string,
  caller: Principal,
  op: string,
  body: Record<string, unknown> = {},
  opts: DeliveryRequestOptions = {},
): Promise<Record<string, unknown>> {
  const subject = ctlSubject(space, opts.service ?? "delivery", caller);
  const data = await bound(
    nc,
    subject,
    ENC.encode(JSON.stringify({ op, args: body })),
    opts.timeoutMs ?? 30_000,
  );
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(DEC.decode(data));
  } catch {
    throw new CotalError("bad_reply", `The delivery daemon's reply to ${op} is not JSON.`);
  }
  if (v.ok !== true) {
    throw new CotalError(codeFrom(v.code, "refused"), String(v.error ?? `${op} was refused.`));
  }
  return (v.data ?? {}) as Record<string, unknown>;
}
