/**
 * Reading a message's headers safely. nats.js decodes a message's header block when `headers` is
 * first read, and throws on bytes it does not accept (a key with a space, say). Any peer may send
 * such bytes, and a throw in a subscription's callback ends the connection's read loop (in an
 * iterator, the loop): one message silenced a daemon's rail, or crashed the signer (red team 18).
 * Every subscriber reads headers through {@linkcode headersOf} and drops a message whose headers
 * cannot be read.
 *
 * @module
 */
import type { MsgHdrs } from "nats";

/** What {@linkcode headersOf} answers for a header block that cannot be decoded. */
export const UNDECODABLE: unique symbol = Symbol("undecodable headers");

/** The headers of `m` (undefined when it has none), or `UNDECODABLE`; never throws. */
export function headersOf(
  m: { readonly headers?: MsgHdrs },
): MsgHdrs | undefined | typeof UNDECODABLE {
  try {
    return m.headers;
  } catch {
    return UNDECODABLE;
  }
}
