/**
 * A user-auth mesh for callout tests: an operator-mode broker preloading a space's data
 * account and its callout account (rendered by our own serverConfig), the space's streams,
 * its bearer issuer, an actor ledger, and helpers to connect through the callout.
 */
import { connect, type NatsConnection } from "nats";
import { type ActorLedger, type ActorRow, createActorLedger } from "../../lib/auth/ledger.ts";
import type { CalloutAuth } from "../../lib/auth/callout_auth.ts";
import {
  ensureCalloutAuth,
  loadServiceKeys,
  type ServiceKeys,
} from "../../lib/auth/callout_store.ts";
import {
  type AuthCallout,
  type AuthCalloutOptions,
  type CalloutDecision,
  startAuthCallout,
} from "../../lib/auth/callout.ts";
import type { UserTokenIssuer } from "../../lib/auth/issuer.ts";
import { ensureIssuer } from "../../lib/auth/secrets.ts";
import {
  createSpaceAuth,
  credsAuthenticatorFast,
  mintCreds,
  newIdentity,
  serverConfig,
  type SpaceAuth,
} from "../../lib/trust/mod.ts";
import { setupSpaceStreams } from "../../lib/wire/mod.ts";
import { MemorySecretStore } from "../../lib/workspace/memory_secret_store.ts";
import { startTestBroker, type TestBroker, uniqueSpace } from "../_harness/broker.ts";
import { ownerFor } from "./_helpers.ts";

/** One space in user mode on its own broker. */
export interface CalloutMesh {
  space: string;
  auth: SpaceAuth;
  store: MemorySecretStore;
  callout: CalloutAuth;
  serviceKeys: ServiceKeys;
  issuer: UserTokenIssuer;
  ledger: ActorLedger;
  broker: TestBroker;
  /** Grant `actor` under a fresh owner (or `owner`) with the given channels. */
  grant(actor: string, acl?: Partial<{ sub: string[]; pub: string[]; owner: string }>): Promise<
    ActorRow
  >;
  /** A bearer for a row, from the space's issuer. */
  bearer(row: ActorRow, ttlSec?: number): Promise<string>;
  close(): Promise<void>;
}

/** Start a mesh; `streams` also creates the space's streams (for endpoints). */
export async function startCalloutMesh(opts: { streams?: boolean } = {}): Promise<CalloutMesh> {
  const space = uniqueSpace("co");
  const auth = await createSpaceAuth(space);
  const store = new MemorySecretStore();
  const callout = await ensureCalloutAuth(store, auth);
  const serviceKeys = await loadServiceKeys(store, space);
  const broker = await startTestBroker({
    config: ({ port, storeDir }) =>
      serverConfig(auth, [auth], { storeDir, port, extraAccounts: [callout.account] }),
  });
  if (opts.streams) {
    await setupSpaceStreams({
      servers: broker.url,
      space,
      creds: await mintCreds(auth, newIdentity(), "provisioner"),
    });
  }
  const issuer = await ensureIssuer(store, space);
  const ledger = createActorLedger({ space, store: new MemorySecretStore() });
  let n = 0;
  return {
    space,
    auth,
    store,
    callout,
    serviceKeys,
    issuer,
    ledger,
    broker,
    async grant(actor, acl = {}) {
      return await ledger.grant({
        owner: acl.owner ?? await ownerFor(`${space}-${actor}-${++n}`),
        actor,
        subscribe: [],
        allowSubscribe: acl.sub ?? ["general"],
        allowPublish: acl.pub ?? ["general"],
      });
    },
    async bearer(row, ttlSec = 300) {
      const b = await issuer.issue({
        space,
        owner: row.owner,
        actor: row.actor,
        scope: row.scope,
        lifecycleUid: row.lifecycleUid,
        ttlSec,
      });
      return b.token;
    },
    close: () => broker.stop(),
  };
}

/** A running in-process responder and the decisions it made. */
export interface Responder {
  nc: NatsConnection;
  callout: AuthCallout;
  decisions: CalloutDecision[];
  /** Resolves with the next decision made after the call. */
  next(): Promise<CalloutDecision>;
  stop(): Promise<void>;
}

/** Start the responder on a callout-creds connection and flush it. */
export async function startResponder(
  mesh: CalloutMesh,
  over: Partial<AuthCalloutOptions> = {},
  /** Another (open) broker to serve on, for protocol tests on a test subject. */
  plainUrl?: string,
): Promise<Responder> {
  const nc = await connect({
    servers: plainUrl ?? mesh.broker.url,
    authenticator: plainUrl ? undefined : credsAuthenticatorFast(mesh.callout.calloutCreds),
    name: `cotal:auth-service:${mesh.space}`,
  });
  const decisions: CalloutDecision[] = [];
  const waiters: ((d: CalloutDecision) => void)[] = [];
  const callout = await startAuthCallout({
    nc,
    space: mesh.space,
    callout: mesh.callout,
    serviceKeys: mesh.serviceKeys,
    resolver: mesh.issuer.resolver(),
    ledger: mesh.ledger,
    onDecision: (d) => {
      decisions.push(d);
      waiters.shift()?.(d);
    },
    ...over,
  });
  await nc.flush();
  return {
    nc,
    callout,
    decisions,
    next: () => new Promise((r) => waiters.push(r)),
    async stop() {
      await callout.stop();
      await nc.close();
    },
  };
}

/** A random inbox nonce. */
export function nonce(): string {
  return `n${crypto.randomUUID().replaceAll("-", "")}`;
}

/** Connect through the callout with the sentinel creds and a bearer. */
export function connectUser(
  mesh: CalloutMesh,
  bearer: string,
  opts: { name?: string; reconnect?: boolean } = {},
): Promise<NatsConnection> {
  const name = opts.name ?? nonce();
  return connect({
    servers: mesh.broker.url,
    authenticator: credsAuthenticatorFast(mesh.callout.sentinelCreds),
    token: bearer,
    name,
    inboxPrefix: `_INBOX_${name}`,
    reconnect: opts.reconnect ?? false,
  });
}

/**
 * Expect a connect to be refused. npm:nats's Node transport can surface the server's close as
 * a stray ECONNRESET after the refusal; that one error is expected and swallowed.
 */
export async function refusedConnect(attempt: () => Promise<NatsConnection>): Promise<Error> {
  const swallow = (e: ErrorEvent) => {
    if (/ECONNRESET|EPIPE/.test(String(e.error))) e.preventDefault();
  };
  globalThis.addEventListener("error", swallow);
  try {
    const nc = await attempt().catch((err: Error) => err);
    if (!(nc instanceof Error)) {
      await nc.close();
      throw new Error("the connect was expected to be refused but succeeded");
    }
    await new Promise((r) => setTimeout(r, 30));
    return nc;
  } finally {
    globalThis.removeEventListener("error", swallow);
  }
}
