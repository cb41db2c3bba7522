/**
 * The `$SYS` creds the membership feed and live eviction read through the secret store
 * (membership observer and connection evictor), and the checks made before either connects:
 * tenancy (the observer's CONNZ grant names this space's account: a complete scan of another
 * account would look exactly like "principal gone"), a torn rotation (observer and evictor
 * issued by different system keys), expiry, and the optional `membership.json` cross-check.
 *
 * @module
 */

import { CotalError, isCotalError } from "../errors.ts";
import { decodeJwt, parseCreds, type UserClaims } from "../nats/mod.ts";
import {
  connectionEvictorCredsKey,
  membershipConfigKey,
  membershipObserverCredsKey,
  type SecretStore,
  type SecretStoreComposition,
} from "../workspace/mod.ts";

/** A loaded, checked `$SYS` cred. */
export interface SysCred {
  text: string;
  claims: UserClaims;
  key: string;
}

/** Where the `$SYS` material of one space is read from. */
export interface SysSource {
  store: SecretStore;
  space: string;
  composition: SecretStoreComposition;
  /** The data account the space's own delivery cred belongs to. */
  expectedAccount: string;
  /** True for an injected store: the repair advice then names no local CLI verb. */
  injected: boolean;
}

/** Repair advice for missing or broken `$SYS` creds, matched to where they live. */
export function sysRepair(src: SysSource, key: string): string {
  return src.injected
    ? `re-mint the $SYS pair at a system-account rotation and put it under ${key}`
    : `re-provision the space's $SYS creds (a system-account rotation) into ${key}`;
}

async function load(src: SysSource, key: string, what: string): Promise<SysCred> {
  let text: string | undefined;
  try {
    text = await src.store.get(key);
  } catch (err) {
    // A store that throws is a refusal (a KMS timeout, a revoked role), never absence.
    throw new CotalError(
      "sys_creds_unreadable",
      `The secret store refused to read the ${what} cred at ${key} (${
        isCotalError(err) ? err.code : "store error"
      }).`,
      { cause: err },
    );
  }
  if (text === undefined) {
    throw new CotalError(
      "sys_creds_missing",
      `The ${what} cred is missing (${key}); ${sysRepair(src, key)}.`,
    );
  }
  let claims: UserClaims;
  try {
    const { jwt } = await parseCreds(text);
    claims = await decodeJwt(jwt, { type: "user" }) as UserClaims;
  } catch (err) {
    throw new CotalError(
      isCotalError(err, "jwt_expired") ? "sys_creds_expired" : "sys_creds_unreadable",
      `The ${what} cred at ${key} is ${
        isCotalError(err, "jwt_expired") ? "expired" : "unreadable"
      } (${isCotalError(err) ? err.code : "invalid"}); ${sysRepair(src, key)}.`,
    );
  }
  return { text, claims, key };
}

/** The account the observer may scan, from its own CONNZ grant. */
function observedAccount(claims: UserClaims): string | undefined {
  for (const s of claims.nats.pub?.allow ?? []) {
    const m = /^\$SYS\.REQ\.ACCOUNT\.(A[A-Z2-7]{55})\.CONNZ$/.exec(s);
    if (m) return m[1];
  }
  return undefined;
}

/** Loads the observer and checks its tenancy (and `membership.json` when present). */
export async function loadObserver(src: SysSource): Promise<SysCred> {
  const key = membershipObserverCredsKey(src.space, src.composition);
  const cred = await load(src, key, "membership-observer");
  const account = observedAccount(cred.claims);
  if (account !== src.expectedAccount) {
    throw new CotalError(
      "sys_creds_foreign",
      `The membership-observer cred at ${key} scans account ${account ?? "(none)"}, not this ` +
        `space's account ${src.expectedAccount}; ${sysRepair(src, key)}.`,
    );
  }
  const cfgKey = membershipConfigKey(src.space, src.composition);
  const cfg = await src.store.get(cfgKey).catch(() => undefined);
  if (cfg !== undefined) {
    let accountId: unknown;
    try {
      accountId = JSON.parse(cfg).accountId;
    } catch {
      accountId = undefined;
    }
    if (accountId !== src.expectedAccount) {
      throw new CotalError(
        "membership_config_mismatch",
        `${cfgKey} does not name this space's account ${src.expectedAccount}; rewrite it as ` +
          `{"accountId": "${src.expectedAccount}"} or remove it.`,
      );
    }
  }
  return cred;
}

/** Loads the evictor and refuses a pair torn by a half-finished rotation. */
export async function loadEvictor(src: SysSource, observer: SysCred): Promise<SysCred> {
  const key = connectionEvictorCredsKey(src.space, src.composition);
  const cred = await load(src, key, "connection-evictor");
  if (cred.claims.iss !== observer.claims.iss) {
    throw new CotalError(
      "sys_creds_torn",
      `The connection-evictor and membership-observer creds were issued by different system ` +
        `keys (a rotation stopped half-way); ${sysRepair(src, key)}.`,
    );
  }
  return cred;
}
