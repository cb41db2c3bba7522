/**
 * How a manager signs credentials. Local: it loads the space's signer records from the store
 * and signs in process (an embedder's default). Remote: the space's `cotal-signer` signs each
 * credential over the broker, and this process never loads a seed: it starts from its own
 * supervisor cred (left in the store by `cotal up`), learns the space's public keys from that
 * cred's JWT, and renews the cred through the signer.
 *
 * @module
 */
import type { NatsConnection } from "nats";
import { CotalError } from "../errors.ts";
import { decodeJwtUnverified, parseCreds, publicKeyFromSeed } from "../nats/mod.ts";
import { type RemoteSigner, remoteSigner } from "../signer/mod.ts";
import {
  type CredentialSigner,
  type Identity,
  localSigner,
  mintWith,
  newIdentity,
  type Principal,
  principalFromTags,
} from "../trust/mod.ts";
import { getSpaceAuth, supervisorCredsKey } from "../workspace/mod.ts";
import type { SecretStore } from "../workspace/mod.ts";
import { type ControlTrust, controlTrustOf } from "./control_auth.ts";

/** A manager's signing: its signer, its own key and principal, the keys it trusts. */
export interface ManagerSigning {
  readonly where: "local" | "remote";
  /** Signs every credential the manager's lifecycles need. */
  readonly signer: CredentialSigner;
  readonly identity: Identity;
  readonly principal: Principal;
  /** The keys that sign this space's users (the control rail's callers). */
  readonly trust: ControlTrust;
  /** Its cred to connect with first (remote: the stored one; local: freshly minted). */
  readonly initialCreds: string;
  /** A fresh cred of its own (remote: signed by the signer, and written back to the store). */
  mintSelf(): Promise<string>;
  /** Remote: the connection the signer is asked over (the manager's own). */
  attach(nc: NatsConnection, creds: () => string): void;
  close(): void;
}

/** Signing in process from the store's signer records. */
export async function localSigning(
  store: SecretStore,
  space: string,
  principal: Principal,
): Promise<ManagerSigning> {
  const auth = await getSpaceAuth(store, space);
  const signer = localSigner(auth);
  const identity = newIdentity();
  const mintSelf = () => mintWith(signer, identity, "supervisor", { principal });
  return {
    where: "local",
    signer,
    identity,
    principal,
    trust: await controlTrustOf(auth),
    initialCreds: await mintSelf(),
    mintSelf,
    attach: () => {},
    close: () => {},
  };
}

/**
 * Signing through the space's `cotal-signer`, starting from the supervisor cred in the store
 * (`supervisor_creds_missing` when there is none: `cotal up` writes it).
 */
export async function remoteSigning(
  store: SecretStore,
  space: string,
  composition: { injected: true } | { root: string },
): Promise<ManagerSigning> {
  const key = supervisorCredsKey(space, composition);
  const stored = await store.get(key);
  if (stored === undefined) {
    throw new CotalError(
      "supervisor_creds_missing",
      `No supervisor cred for space ${
        JSON.stringify(space)
      } in the store (${key}); a remote-signing supervisor starts from the one cotal up writes.`,
    );
  }
  const { jwt, seed } = await parseCreds(stored);
  const claims = decodeJwtUnverified(jwt);
  const nats = claims.nats as { issuer_account?: string; tags?: string[] };
  const named = principalFromTags(nats.tags);
  if (claims.name !== "supervisor" || !named) {
    throw new CotalError(
      "supervisor_creds_invalid",
      `The stored cred ${key} is not a supervisor cred naming its principal; let cotal up write it again.`,
    );
  }
  const identity = { id: await publicKeyFromSeed(seed), seed };
  const principal = named;
  const accountPub = nats.issuer_account ?? claims.iss;
  let remote: RemoteSigner | undefined;
  const signer: CredentialSigner = {
    space,
    where: "remote",
    sign: (req) => {
      if (!remote) {
        throw new CotalError("signer_unreachable", "The manager is not connected to the broker.");
      }
      return remote.sign(req);
    },
  };
  return {
    where: "remote",
    signer,
    identity,
    principal,
    trust: { accountPub, issuers: [...new Set([accountPub, claims.iss])] },
    initialCreds: stored,
    // In memory only: the stored cred is the signer's to keep fresh (it re-signs it with the
    // daemon creds), so a supervisor needs no write on it and one down for days still starts.
    mintSelf: () => mintWith(signer, identity, "supervisor", { principal }),
    attach(nc, creds) {
      remote?.close();
      remote = remoteSigner({ nc, space, principal, creds });
    },
    close() {
      remote?.close();
      remote = undefined;
    },
  };
}

/** The manager's signing as its options ask: remote through `cotal-signer`, else local. */
export function managerSigning(
  where: "local" | "remote" | undefined,
  store: SecretStore,
  space: string,
  opts: { principal: Principal; composition: { injected: true } | { root: string } },
): Promise<ManagerSigning> {
  return where === "remote"
    ? remoteSigning(store, space, opts.composition)
    : localSigning(store, space, opts.principal);
}
