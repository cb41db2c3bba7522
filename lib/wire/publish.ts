/**
 * Publishing a message: the subject is derived from the envelope (sender from `from.id`,
 * target from the one routing field), the envelope is validated, and its exact encoded size
 * is checked against the connected broker's `max_payload` before anything is sent.
 *
 * @module
 */

import type { NatsConnection, PubAck } from "nats";
import { CotalError } from "../errors.ts";
import {
  assertFitsPayload,
  type CotalMessage,
  encodeMessage,
  validateMessage,
} from "./envelope.ts";
import { parsePrincipalId } from "./names.ts";
import { chatSubject, instSubject, svcSubject } from "./subjects.ts";
import { wrapJs } from "./js_errors.ts";

/** The subject a message is published on, derived from its envelope. */
export function subjectForMessage(msg: CotalMessage): string {
  validateMessage(msg);
  const sender = parsePrincipalId(msg.from.id);
  if (msg.channel !== undefined) return chatSubject(msg.space, sender, msg.channel);
  if (msg.to !== undefined) return instSubject(msg.space, parsePrincipalId(msg.to), sender);
  return svcSubject(msg.space, msg.toService!, sender);
}

/**
 * Publish `msg` through JetStream with `Nats-Msg-Id = id`, so it is captured (history, the
 * backstop, DM and task queues) and still reaches live subscribers. Refuses a message over
 * the broker's `max_payload` with `message_too_large`.
 */
export async function publishMessage(nc: NatsConnection, msg: CotalMessage): Promise<PubAck> {
  const subject = subjectForMessage(msg);
  const body = encodeMessage(msg);
  const max = nc.info?.max_payload;
  if (max === undefined) {
    throw new CotalError(
      "not_connected",
      "The connection has no server info yet; publish after connect() has resolved.",
    );
  }
  assertFitsPayload(msg, max, body);
  try {
    return await nc.jetstream().publish(subject, body, { msgID: msg.id });
  } catch (err) {
    throw wrapJs(`publish on ${subject}`, err);
  }
}
