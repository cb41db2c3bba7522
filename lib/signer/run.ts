/**
 * The `cotal-signer` daemon for one space: the only process that loads the space's signing
 * seeds. It mints its own connection creds in memory (it holds the key), serves the signer rail
 * (lib/signer/serve.ts) and renews its creds at 75 % of their life, reconnecting on the new
 * ones; nothing it holds is ever written anywhere but its audit trail.
 *
 * @module
 */
import { Events, type NatsConnection } from "nats";
import { CotalError } from "../errors.ts";
import { connectWhenUp } from "../nats/mod.ts";
import { credsAuthenticatorFast, mintCreds, newIdentity, requestTrustOf } from "../trust/mod.ts";
import type { SpaceAuth } from "../trust/mod.ts";
import { AuditLog } from "./audit.ts";
import { serveSigner, type SignerStats } from "./serve.ts";

/** The signer's own creds: a day, renewed at 75 %. */
export const SIGNER_CREDS_TTL_SECONDS = 86_400;

/** Options of {@linkcode runSigner}. */
export interface RunSignerOptions {
  /** The space's trust bundle (its account signing seed). */
  readonly auth: SpaceAuth;
  /** Broker URLs. */
  readonly servers: readonly string[];
  /** Where the audit trail is appended. */
  readonly auditPath: string;
  /** Where its own lines go; default stderr with a timestamp. */
  readonly log?: (line: string) => void;
  /** Shorter own-creds life (tests of renewal). */
  readonly credsTtlSeconds?: number;
}

/** A running signer. */
export interface RunningSigner {
  /** Requests signed and refused since start. */
  readonly stats: SignerStats;
  /** Renewals of its own creds so far. */
  readonly renewals: number;
  /** Stops serving (the audit's counted refusals are written) and closes its connection. */
  stop(): Promise<void>;
}

/**
 * Starts serving; resolves once the rail is subscribed on a live connection. It signs what it is
 * asked; it does not re-sign the space's stored daemon and supervisor creds, which `cotal-signer`
 * does beside it: an embedder schedules `remintDaemonCreds` (with `also: [SUPERVISOR_CRED]`) and
 * `nextResignDelayMs`, as cmd/signer.ts does.
 */
export async function runSigner(opts: RunSignerOptions): Promise<RunningSigner> {
  const log = opts.log ?? ((l: string) => console.error(`${new Date().toISOString()} ${l}`));
  const ttl = opts.credsTtlSeconds ?? SIGNER_CREDS_TTL_SECONDS;
  const identity = newIdentity();
  const principal = { owner: "local", actor: "signer" };
  const mint = () => mintCreds(opts.auth, identity, "signer", { principal, expiresInSeconds: ttl });
  let current = await mint();
  const audit = new AuditLog(opts.auditPath);
  let nc: NatsConnection;
  try {
    nc = await connectWhenUp({
      servers: [...opts.servers],
      authenticator: credsAuthenticatorFast(() => current),
      inboxPrefix: `_INBOX_${identity.id}`,
      name: `cotal-signer:${opts.auth.space}`,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
  } catch (err) {
    throw new CotalError(
      "broker_connect_failed",
      `The signer could not connect to ${opts.servers.join(", ")}: ${(err as Error).message}`,
    );
  }
  const served = await serveSigner({
    nc,
    auth: opts.auth,
    trust: await requestTrustOf(opts.auth),
    audit,
    log,
  }).catch(async (err) => {
    await nc.close().catch(() => {});
    throw new CotalError(
      "broker_connect_failed",
      `The signer could not open its rail's stream on ${opts.servers.join(", ")}: ${
        (err as Error)?.message ?? err
      }`,
    );
  });
  await nc.flush();
  // An operator reading the journal sees each cut (a broker restart, or the broker cutting a
  // connection it could not write to fast enough) and the reconnect after it.
  let disconnects = 0;
  (async () => {
    for await (const s of nc.status()) {
      if (s.type === Events.Disconnect) {
        disconnects++;
        log(`cotal-signer lost its broker connection (${disconnects} so far); reconnecting`);
      } else if (s.type === Events.Reconnect) log("cotal-signer reconnected to the broker");
    }
  })().catch(() => {});
  log(`cotal-signer up for space ${opts.auth.space} (audit ${opts.auditPath})`);
  let renewals = 0;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const schedule = () => {
    timer = setTimeout(async () => {
      if (stopped) return;
      try {
        current = await mint();
        await nc.reconnect();
        renewals++;
      } catch (err) {
        log(`renewing the signer's own creds failed (${(err as Error).message}); retrying`);
      }
      schedule();
    }, Math.max(1_000, ttl * 750));
  };
  schedule();
  return {
    stats: served.stats,
    get renewals() {
      return renewals;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      await served.stop();
      await nc.drain().catch(() => nc.close());
    },
  };
}
