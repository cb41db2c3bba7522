/**
 * Short-lived broker connections for the privileged space operations (setup, provisioning,
 * registry writes). Each call dials, does its work and closes, so a one-shot credential is
 * never held longer than the operation.
 *
 * @module
 */

import type { NatsConnection } from "nats";
import { connect, decodeJwtUnverified, parseCreds } from "../nats/mod.ts";
import { CotalError } from "../errors.ts";
import { credsAuthenticatorFast } from "../trust/mod.ts";

/** Where and as whom to connect. */
export interface BrokerTarget {
  /** One or more `nats://host:port` URLs. */
  servers: string | string[];
  /** The content of a `.creds` file; omit only for an unauthenticated (open) broker. */
  creds?: string;
}

/**
 * Connect for one operation. With creds, the reply inbox is `_INBOX_<user public key>`: every
 * Cotal credential may subscribe only its own inbox, so the default `_INBOX.` would be denied.
 */
export async function connectBroker(
  target: BrokerTarget,
  opts: { name?: string } = {},
): Promise<NatsConnection> {
  const servers = target.servers;
  if (
    (typeof servers !== "string" || servers === "") &&
    !(Array.isArray(servers) && servers.length > 0)
  ) {
    throw new CotalError(
      "missing_servers",
      "No broker address was given; pass servers as a nats://host:port URL or a list of them.",
    );
  }
  let inboxPrefix: string | undefined;
  let authenticator;
  if (target.creds !== undefined) {
    const { jwt } = await parseCreds(target.creds);
    inboxPrefix = `_INBOX_${decodeJwtUnverified(jwt).sub}`;
    // Native ed25519 nonce signing: npm:nats's own authenticator spends ~11 ms per connect.
    authenticator = credsAuthenticatorFast(target.creds);
  }
  try {
    return await connect({
      servers,
      authenticator,
      inboxPrefix,
      name: opts.name ?? "cotal-wire",
      maxReconnectAttempts: 0,
    });
  } catch (err) {
    throw new CotalError(
      "broker_connect_failed",
      `Could not connect to ${[servers].flat().join(", ")} (${errorText(err)}); check the ` +
        `broker is running and the credential belongs to this broker.`,
      { cause: err },
    );
  }
}

/** Run `fn` on a fresh connection and always close it afterwards. */
export async function withBroker<T>(
  target: BrokerTarget,
  fn: (nc: NatsConnection) => Promise<T>,
  opts: { name?: string } = {},
): Promise<T> {
  const nc = await connectBroker(target, opts);
  try {
    return await fn(nc);
  } finally {
    await nc.close().catch(() => {});
  }
}

/** A short, secret-free description of an error (its message only). */
export function errorText(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  return msg.length > 200 ? `${msg.slice(0, 197)}...` : msg;
}
