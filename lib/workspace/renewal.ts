/**
 * `remintDaemonCreds`: re-sign the standing daemon creds of one space (the delivery cred and
 * the membership feed's rw cred) for their *existing* nkeys, back into the store they are read
 * from. This is the renewal owner's half of the 75 % re-read the daemons do.
 *
 * A candidate replaces the last good cred only when it is proven: by the caller's `preflight`
 * (the broker accepts it), or, without one, by authority continuity (it is signed by the same
 * account signing key as the current cred, which the broker already accepted). A bundle's chain
 * proves only that it is self-consistent and names the space, not that its account is the one
 * the broker trusts for that space, so a same-label alternate signer is refused.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { CotalError, isCotalError } from "../errors.ts";
import { decodeJwt, decodeJwtUnverified, parseCreds, type UserClaims } from "../nats/mod.ts";
import {
  CREDENTIAL_LIFETIMES,
  mintCreds,
  type Principal,
  principalFromTags,
  type Profile,
  type SpaceAuth,
  STANDING_RENEWABLE_TTL_SEC,
} from "../trust/mod.ts";
import { workspaceSecretStore } from "./fs_secret_store.ts";
import {
  DELIVERY_CREDS_KIND,
  deliveryCredsKey,
  MEMBERSHIP_RW_CREDS_KIND,
  membershipRwCredsKey,
  type SecretStoreComposition,
  supervisorCredsKey,
} from "./keys.ts";
import { getSpaceAuth } from "./space_auth.ts";
import type { SecretStore } from "./types.ts";

/** One re-signable daemon cred: its kind (what results report), key builder and profile. */
export interface RemintableCred {
  /** The file kind results report (`delivery.creds`). */
  readonly kind: string;
  /** The profile it is minted with (a re-sign refuses a cred of another). */
  readonly profile: Profile;
  /** Its store key for a space. */
  readonly key: (space: string, composition: SecretStoreComposition) => string;
  /**
   * The longest span a re-sign gives it, when tighter than its profile's longest: a re-sign
   * keeps the stored cred's span, so whoever could write a long-lived one would have it renewed
   * for as long.
   */
  readonly maxTtlSeconds?: number;
}

/**
 * The daemon creds a renewal owner re-signs. The `$SYS` pair is deliberately absent: its seed
 * is never persisted, so only a system-account rotation can renew it.
 */
export const REMINTABLE_DAEMON_CREDS: readonly RemintableCred[] = Object.freeze([
  Object.freeze({ kind: DELIVERY_CREDS_KIND, profile: "delivery", key: deliveryCredsKey }),
  Object.freeze({
    kind: MEMBERSHIP_RW_CREDS_KIND,
    profile: "membership-rw",
    key: membershipRwCredsKey,
  }),
] as RemintableCred[]);

/**
 * The supervisor's own cred, which `cotal-signer` re-signs (same key) besides the daemon creds:
 * a remote-signing supervisor holds no seed, so after a stop longer than its cred's life only
 * the signer can give it one to start from.
 */
export const SUPERVISOR_CRED: RemintableCred = Object.freeze({
  kind: "supervisor.creds",
  profile: "supervisor",
  key: supervisorCredsKey,
  // What the signer's request path grants a supervisor's own cred (a day), not the profile's
  // seven: a stored cred minted longer is re-signed for a day.
  maxTtlSeconds: STANDING_RENEWABLE_TTL_SEC,
});

/** What a preflight is told about the candidate it gates. */
export interface PreflightInfo {
  /** The space of the cred. */
  space: string;
  /** The kind being re-signed (`delivery.creds`). */
  file: string;
  /** Its store key. */
  key: string;
}

/**
 * Proves a candidate cred (creds file text) before it replaces the last good one, typically
 * by connecting with it. Resolve (or resolve `true`) to accept; reject or resolve `false` to
 * refuse.
 */
export type CredPreflight = (candidate: string, info: PreflightInfo) => Promise<boolean | void>;

/** Options of {@linkcode remintDaemonCreds}. */
export interface RemintOptions {
  /** Gates every candidate; without it, only a re-sign under authority continuity is written. */
  preflight?: CredPreflight;
  /** Further creds re-signed the same way (the signer adds {@linkcode SUPERVISOR_CRED}). */
  also?: readonly RemintableCred[];
}

/** The outcome for one cred. `ok` is true only when a new cred was written. */
export interface RemintResult {
  /** The kind (`delivery.creds`, `membership-rw.creds`). */
  file: string;
  /** The store key it lives under. */
  key: string;
  /** Whether the cred was re-signed. */
  ok: boolean;
  /** Set when nothing was attempted: the cred is absent, or the store holds no signer. */
  skipped?: "missing-file" | "no-auth";
  /** Why it failed: a stable code and one sentence (never a secret or stored bytes). */
  error?: { code: string; message: string };
  /** SHA-256 (hex) of the new user JWT: the generation token an adopter can expect. */
  fingerprint?: string;
  /** The new cred's expiry, Unix seconds. */
  expiresAt?: number;
}

/** SHA-256 hex of a user JWT: the generation token of a cred. */
export function credFingerprint(jwt: string): string {
  return createHash("sha256").update(jwt, "utf8").digest("hex");
}

function failure(err: unknown, fallback: string): { code: string; message: string } {
  if (isCotalError(err)) return { code: err.code, message: err.message };
  return { code: fallback, message: `The re-sign failed unexpectedly (${fallback}).` };
}

/** The principal a minted cred speaks for, from its signed tags. */
function principalOf(claims: UserClaims): Principal | undefined {
  return principalFromTags(claims.nats.tags);
}

/** The reply-inbox token the cred subscribes (`_INBOX_<connId>.>`). */
function connIdOf(claims: UserClaims): string | undefined {
  for (const s of claims.nats.sub?.allow ?? []) {
    const m = /^_INBOX_(.+)\.>$/.exec(s);
    if (m) return m[1];
  }
  return undefined;
}

/**
 * The cred a re-sign replaces, read and verified (an expired one still proves who signed it):
 * its claims and seed, or why nothing is re-signed.
 */
async function readCurrent(
  store: SecretStore,
  cred: RemintableCred,
  key: string,
): Promise<{ claims: UserClaims; seed: string } | Omit<RemintResult, "file" | "key">> {
  let text: string | undefined;
  try {
    text = await store.get(key);
  } catch (err) {
    return { ok: false, error: failure(err, "store_io") };
  }
  // Absent means "not deployed here": minting one would conjure a second identity.
  if (text === undefined) return { ok: false, skipped: "missing-file" };

  let claims: UserClaims;
  let seed: string;
  try {
    const parsed = await parseCreds(text);
    seed = parsed.seed;
    // An expired current cred still proves who signed it; only its signature must verify.
    claims = await decodeJwt(parsed.jwt, { type: "user", ignoreTimes: true }) as UserClaims;
  } catch (err) {
    return {
      ok: false,
      error: {
        code: "current_cred_unreadable",
        message: `The current ${cred.kind} under ${key} does not parse or verify (${
          isCotalError(err) ? err.code : "invalid"
        }); replace it with a freshly minted cred.`,
      },
    };
  }
  if (claims.name !== cred.profile) {
    return {
      ok: false,
      error: {
        code: "cred_profile_mismatch",
        message: `The cred under ${key} is not a ${cred.profile} cred; put the ${cred.kind} ` +
          `there (a re-sign keeps the profile it finds).`,
      },
    };
  }
  return { claims, seed };
}

/**
 * The span a re-sign gives: the replaced cred's, within the profile's bounds and the cred's own
 * cap (a cred an embedder's issuer signed shorter than policy mints is renewed at the minimum).
 */
function resignSpan(claims: UserClaims, cred: RemintableCred): number {
  const { minTtlSeconds: min } = CREDENTIAL_LIFETIMES[cred.profile];
  const max = Math.min(
    CREDENTIAL_LIFETIMES[cred.profile].maxTtlSeconds,
    cred.maxTtlSeconds ?? Infinity,
  );
  return claims.exp !== undefined && claims.iat !== undefined && claims.exp > claims.iat
    ? Math.max(min, Math.min(claims.exp - claims.iat, max))
    : CREDENTIAL_LIFETIMES[cred.profile].defaultTtlSeconds;
}

async function remintOne(
  store: SecretStore,
  auth: SpaceAuth,
  space: string,
  cred: RemintableCred,
  key: string,
  opts: RemintOptions,
): Promise<RemintResult> {
  const base = { file: cred.kind, key };
  const current = await readCurrent(store, cred, key);
  if ("ok" in current) return { ...base, ...current };
  const { claims, seed } = current;
  const principal = principalOf(claims);
  const connId = connIdOf(claims);
  const span = resignSpan(claims, cred);
  let candidate: string;
  try {
    candidate = await mintCreds(auth, { id: claims.sub, seed }, cred.profile, {
      ...(principal ? { principal } : {}),
      ...(connId ? { connId } : {}),
      expiresInSeconds: span,
    });
  } catch (err) {
    return { ...base, ok: false, error: failure(err, "mint_failed") };
  }
  if (opts.preflight) {
    let accepted: boolean | void;
    try {
      accepted = await opts.preflight(candidate, { space, file: cred.kind, key });
    } catch (err) {
      accepted = false;
      if (isCotalError(err)) {
        return {
          ...base,
          ok: false,
          error: {
            code: "preflight_refused",
            message: `The preflight refused the re-signed ${cred.kind} (${err.code}); the last ` +
              `good cred was kept.`,
          },
        };
      }
    }
    if (accepted === false) {
      return {
        ...base,
        ok: false,
        error: {
          code: "preflight_refused",
          message: `The preflight refused the re-signed ${cred.kind}; the last good cred was kept.`,
        },
      };
    }
  } else if (
    claims.iss !== auth.account.signingPub || claims.nats.issuer_account !== auth.account.pub
  ) {
    return {
      ...base,
      ok: false,
      error: {
        code: "continuity_broken",
        message: `The stored signer of space ${JSON.stringify(space)} is not the signing key ` +
          `that signed the current ${cred.kind}; without a preflight only a continuous re-sign ` +
          `is written (pass a preflight, or restore the signer that issued it).`,
      },
    };
  }
  try {
    await store.put(key, candidate);
  } catch (err) {
    return { ...base, ok: false, error: failure(err, "store_io") };
  }
  const jwt = (await parseCreds(candidate)).jwt;
  const exp = decodeJwtUnverified(jwt).exp;
  return {
    ...base,
    ok: true,
    fingerprint: credFingerprint(jwt),
    ...(exp !== undefined ? { expiresAt: exp } : {}),
  };
}

/**
 * Re-signs the delivery and membership-rw creds of `space` for their existing nkeys (same
 * profile, principal, reply inbox and lifetime span) into the same store, reading the signer
 * from that store with {@linkcode getSpaceAuth} (so `space` is checked against the signer).
 * `store` defaults to `workspaceSecretStore(root)`.
 *
 * A candidate replaces the stored cred only when `preflight` accepts it, or, without a
 * preflight, when it is signed by the same account signing key as the current cred. A missing
 * cred is never minted. It never throws: each cred gets a {@linkcode RemintResult}, and the
 * caller must check `ok` or the cred still rides to expiry.
 *
 * @example
 * ```ts
 * const results = await remintDaemonCreds(root, "demo", store, {
 *   // Accept a candidate only once the broker does (a client of your own, e.g. npm:nats).
 *   preflight: async (creds) => {
 *     const authenticator = credsAuthenticator(new TextEncoder().encode(creds));
 *     const nc = await connect({ servers, authenticator });
 *     await nc.close();
 *     return true;
 *   },
 * });
 * if (!results.every((r) => r.ok || r.skipped === "missing-file")) console.error(results);
 * ```
 */
export async function remintDaemonCreds(
  root: string,
  space: string,
  store?: SecretStore,
  opts: RemintOptions = {},
): Promise<RemintResult[]> {
  const results: RemintResult[] = [];
  const creds = [...REMINTABLE_DAEMON_CREDS, ...(opts.also ?? [])];
  let keys: string[];
  let target: SecretStore;
  try {
    target = store ?? workspaceSecretStore(root);
    const composition: SecretStoreComposition = store ? { injected: true } : { root };
    keys = creds.map((c) => c.key(space, composition));
  } catch (err) {
    const error = failure(err, "bad_arguments");
    return creds.map((c) => ({ file: c.kind, key: "", ok: false, error }));
  }
  let auth: SpaceAuth | undefined;
  let authError: { code: string; message: string } | undefined;
  let noAuth = false;
  try {
    auth = await getSpaceAuth(target, space);
  } catch (err) {
    if (isCotalError(err, "no_space_auth")) noAuth = true;
    else authError = failure(err, "signer_unreadable");
  }
  for (const [i, cred] of creds.entries()) {
    const key = keys[i];
    if (noAuth) results.push({ file: cred.kind, key, ok: false, skipped: "no-auth" });
    else if (!auth) results.push({ file: cred.kind, key, ok: false, error: authError });
    else {
      try {
        results.push(await remintOne(target, auth, space, cred, key, opts));
      } catch (err) {
        results.push({ file: cred.kind, key, ok: false, error: failure(err, "remint_failed") });
      }
    }
  }
  return results;
}

/** Throws unless every result is ok or skipped for a missing file (for callers that must fail). */
export function assertReminted(results: readonly RemintResult[]): void {
  const bad = results.filter((r) => !r.ok && r.skipped !== "missing-file");
  if (bad.length > 0) {
    throw new CotalError(
      "remint_failed",
      `Re-signing failed for ${
        bad.map((r) => `${r.file} (${r.error?.code ?? r.skipped})`).join(
          ", ",
        )
      }; run "cotal doctor auth" for details.`,
    );
  }
}

/** How soon a re-sign that failed is tried again (when that is sooner than the schedule). */
export const RESIGN_RETRY_MS = 60_000;

/**
 * When to re-sign next, after `results`: at half the shortest life a re-signed cred has left
 * (so each is renewed well before the 75 % its daemon expects, however short its span), within
 * `maxMs`; within {@linkcode RESIGN_RETRY_MS} when one failed; never sooner than a second.
 * A fixed 6-hour schedule let a daemon cred shorter than that expire (an embedder's 30 s creds).
 */
export function nextResignDelayMs(
  results: readonly RemintResult[],
  opts: { maxMs: number; now?: number },
): number {
  const now = opts.now ?? Date.now();
  let delay = opts.maxMs;
  for (const r of results) {
    if (r.ok && r.expiresAt !== undefined) {
      delay = Math.min(delay, (r.expiresAt * 1000 - now) / 2);
    } else if (r.error) delay = Math.min(delay, RESIGN_RETRY_MS);
  }
  return Math.max(1_000, Math.floor(delay));
}
