/**
 * Telling a client's write from an answer the broker sent on a client's behalf.
 *
 * The broker checks a publisher's subject against its grants but never the reply subject it
 * names, and JetStream answers (a publish ack, an API reply, a pull's status, a stored message
 * read back) go to that reply subject with the broker's own rights. So a member can aim an
 * answer at any subject of the space, a bucket key or another member's channel included. Cotal
 * grants no Direct Get (whose answer is a stored message verbatim), so an aimed answer is JSON
 * no reader takes for a row or a message, or a status line with no body; receivers still drop
 * anything that carries the marks of a broker answer, so a future responder cannot reopen it.
 *
 * @module
 */
import type { MsgHdrs } from "nats";

/** Headers the broker adds when it replays a stored message (Direct Get and batch gets). */
export const STORED_MESSAGE_HEADERS: readonly string[] = [
  "Nats-Stream",
  "Nats-Subject",
  "Nats-Sequence",
  "Nats-Time-Stamp",
  "Nats-Last-Sequence",
  "Nats-Num-Pending",
  "Nats-UpTo-Sequence",
];

/**
 * True when `headers` mark a message as a broker's answer rather than a client's write: a
 * status line (404, 408, 409, 503, ...) or the headers of a replayed stored message. A client
 * that sets such a header on its own write only gets that write dropped.
 */
export function isBrokerAnswer(headers: MsgHdrs | undefined): boolean {
  if (!headers) return false;
  if (headers.code !== 0) return true;
  for (const k of STORED_MESSAGE_HEADERS) if (headers.has(k)) return true;
  return false;
}
