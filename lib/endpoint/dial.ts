/**
 * Dialing the broker: the one place connect options and connect failures are shaped, for the
 * live connection and for a renewal's throwaway preflight.
 *
 * @module
 */

import type { Authenticator, NatsConnection } from "nats";
import { connect } from "../nats/mod.ts";
import { CotalError } from "../errors.ts";
import { errorText } from "./credentials.ts";

/** How to dial. */
export interface DialOptions {
  servers: string[];
  authenticator?: Authenticator;
  /** The reply-inbox token: every Cotal credential may subscribe only `_INBOX_<connId>.>`. */
  connId: string;
  name: string;
  /** A live connection reconnects forever (terminal closes are the endpoint's to handle). */
  live: boolean;
}

/** How long a live endpoint waits between reconnect attempts. */
export const RECONNECT_WAIT_MS = 250;

/** Connect, turning a refusal into a CotalError that says whether the credential or the network failed. */
export async function dial(opts: DialOptions): Promise<NatsConnection> {
  try {
    return await connect({
      servers: opts.servers,
      authenticator: opts.authenticator,
      inboxPrefix: `_INBOX_${opts.connId}`,
      name: opts.name,
      // Our own publishes would come back to our channel subscriptions only to be dropped by
      // the echo rule: let the broker skip them (stream-delivered copies are unaffected).
      noEcho: true,
      // An Error with a stack per request costs ~10% of a busy endpoint's CPU; failures are
      // wrapped into CotalErrors naming the operation anyway.
      noAsyncTraces: true,
      // A broker that comes back is found within a quarter second (plus npm:nats's jitter):
      // delivery resumes as soon as it can, for the price of a refused connect per attempt.
      ...(opts.live
        ? { maxReconnectAttempts: -1, reconnectTimeWait: RECONNECT_WAIT_MS }
        : { maxReconnectAttempts: 0, timeout: 4_000 }),
    });
  } catch (err) {
    if (err instanceof CotalError) throw err;
    const auth = /authorization|authentication/i.test(errorText(err));
    throw new CotalError(
      auth ? "broker_refused_credential" : "broker_connect_failed",
      auth
        ? `The broker refused the credential (${
          errorText(err)
        }); re-mint it for this broker and space.`
        : `Could not reach ${opts.servers.join(", ")} (${
          errorText(err)
        }); check the broker is running.`,
      { cause: err },
    );
  }
}
