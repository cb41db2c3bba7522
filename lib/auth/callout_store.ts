/**
 * The callout account and the data-signer projection through a SecretStore.
 *
 * - `space.<hex>/callout.json` `{ver:1, callout}`: created once and never regenerated (a new
 *   callout account would orphan the one the broker preloads).
 * - `space.<hex>/service-keys.json` `{ver:1, space, dataAccount:{pub, signingSeed}}`: the only
 *   data-account signing material the auth service loads (not the account seed). It is
 *   rewritten on every `ensureCalloutAuth`, so a rotated signing key reaches the daemon.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import type { CotalErrorCode } from "../error_codes/mod.ts";
import { decodeJwt, isPublicKey, parseCreds, parseSeed, publicKeyFromSeed } from "../nats/mod.ts";
import { createOnce, spaceKeyHex } from "../workspace/mod.ts";
import type { SecretStore } from "../workspace/mod.ts";
import { type CalloutAuth, createCalloutAuth } from "./callout_auth.ts";
import { isPlainObject } from "./jwks.ts";

/** Kind of the callout account record. */
export const CALLOUT_KIND = "callout.json";
/** Kind of the data-signer projection the auth service mints user JWTs with. */
export const SERVICE_KEYS_KIND = "service-keys.json";

/** Key of the callout record of `space`. */
export function calloutKey(space: string): string {
  return `space.${spaceKeyHex(space)}/${CALLOUT_KIND}`;
}

/** Key of the data-signer projection of `space`. */
export function serviceKeysKey(space: string): string {
  return `space.${spaceKeyHex(space)}/${SERVICE_KEYS_KIND}`;
}

/** The data-account signer the callout mints user JWTs with. */
export interface ServiceKeys {
  /** The space the keys belong to. */
  space: string;
  /** The data account's public key and signing seed (no account seed). */
  dataAccount: { pub: string; signingSeed: string };
}

/** The parts of a SpaceAuth {@linkcode ensureCalloutAuth} reads. */
export interface CalloutProvisionAuth {
  /** The space to provision. */
  space: string;
  /** The operator seed that signs the callout's account changes. */
  operator: { seed: string };
  /** The data account's public key and signing seed. */
  account: { pub: string; signingSeed: string };
}

/**
 * Create the callout account of `auth.space` in `store` if it has none, check an existing one
 * belongs to this operator and data account (`callout_foreign` otherwise: it is never
 * regenerated), write the data-signer projection, and return the callout record.
 *
 * @example
 * ```ts
 * const callout = await ensureCalloutAuth(store, spaceAuth);
 * serverConfig(spaceAuth, [spaceAuth], { storeDir, extraAccounts: [callout.account] });
 * ```
 */
export async function ensureCalloutAuth(
  store: SecretStore,
  auth: CalloutProvisionAuth,
): Promise<CalloutAuth> {
  const space = auth?.space;
  const key = calloutKey(space);
  if ((await store.get(key)) === undefined) {
    const fresh = await createCalloutAuth({
      space,
      operatorSeed: auth.operator?.seed,
      accountPub: auth.account?.pub,
    });
    // Create-only: of two first starts exactly one record wins and both adopt it.
    await createOnce(store, key, JSON.stringify({ ver: 1, callout: fresh }));
  }
  const callout = await loadCalloutAuth(store, space);
  const operatorPub = await publicKeyFromSeed(auth.operator.seed).catch(() => "");
  const claims = await decodeJwt(callout.account.jwt, { type: "account", ignoreTimes: true });
  if (claims.iss !== operatorPub || callout.dataAccount !== auth.account.pub) {
    throw new CotalError(
      "callout_foreign",
      `The stored callout account of space ${JSON.stringify(space)} belongs to another ` +
        "operator or data account; restore the matching trust records (regenerating it would " +
        "orphan the account the broker preloads).",
    );
  }
  await saveServiceKeys(store, { space, dataAccount: { ...auth.account } });
  return callout;
}

/** Load the callout record of `space`; refuses (`callout_missing`, `callout_record_malformed`). */
export async function loadCalloutAuth(store: SecretStore, space: string): Promise<CalloutAuth> {
  const text = await store.get(calloutKey(space));
  if (text === undefined) {
    throw new CotalError(
      "callout_missing",
      `Space ${JSON.stringify(space)} has no auth-callout account in the secret store; ` +
        "provision it with ensureCalloutAuth() (cotal up --user-auth does this).",
    );
  }
  return await parseCallout(text, space);
}

/** Write the data-signer projection (an idempotent whole-record replace). */
export async function saveServiceKeys(store: SecretStore, keys: ServiceKeys): Promise<void> {
  const checked = checkServiceKeys(keys, keys?.space, "service_keys_invalid");
  await store.put(
    serviceKeysKey(checked.space),
    JSON.stringify({ ver: 1, space: checked.space, dataAccount: checked.dataAccount }),
  );
}

/** Load the data-signer projection of `space`; refuses (`service_keys_missing`, `_malformed`). */
export async function loadServiceKeys(store: SecretStore, space: string): Promise<ServiceKeys> {
  const text = await store.get(serviceKeysKey(space));
  if (text === undefined) {
    throw new CotalError(
      "service_keys_missing",
      `Space ${JSON.stringify(space)} has no auth-service signing keys in the secret store; ` +
        "provision them with ensureCalloutAuth() (cotal up --user-auth does this).",
    );
  }
  let rec: unknown;
  try {
    rec = JSON.parse(text);
  } catch {
    rec = undefined;
  }
  if (!isPlainObject(rec) || rec.ver !== 1) malformed("service_keys_malformed", space, "version");
  return checkServiceKeys(rec as unknown as ServiceKeys, space, "service_keys_malformed");
}

function checkServiceKeys(keys: ServiceKeys, space: string, code: CotalErrorCode): ServiceKeys {
  const d = keys?.dataAccount;
  let ok = isPlainObject(keys) && keys.space === space && typeof space === "string" &&
    isPlainObject(d) && isPublicKey(d.pub, "account") && typeof d.signingSeed === "string";
  if (ok) {
    try {
      ok = parseSeed(d.signingSeed).kind === "account";
    } catch {
      ok = false;
    }
  }
  if (!ok) malformed(code, space, "dataAccount {pub, signingSeed}");
  return { space, dataAccount: { pub: d.pub, signingSeed: d.signingSeed } };
}

async function parseCallout(text: string, space: string): Promise<CalloutAuth> {
  const bad = (detail: string): never => malformed("callout_record_malformed", space, detail);
  let rec: unknown;
  try {
    rec = JSON.parse(text);
  } catch {
    bad("not JSON");
  }
  if (!isPlainObject(rec) || rec.ver !== 1 || !isPlainObject(rec.callout)) bad("version");
  const c = (rec as { callout: Record<string, unknown> }).callout;
  const a = c.account as Record<string, unknown>;
  const x = c.xkey as Record<string, unknown>;
  if (c.space !== space) bad("it belongs to another space");
  if (!isPublicKey(c.dataAccount as string, "account")) bad("dataAccount");
  if (!isPlainObject(a) || !isPlainObject(x)) bad("account or xkey");
  for (const [seed, pub] of [[a.seed, a.pub], [a.signingSeed, a.signingPub], [x.seed, x.pub]]) {
    const derived = typeof seed === "string"
      ? await publicKeyFromSeed(seed).catch(() => undefined)
      : undefined;
    if (derived === undefined || derived !== pub) bad("a seed does not match its public key");
  }
  let claims;
  try {
    claims = await decodeJwt(a.jwt as string, { type: "account", ignoreTimes: true });
  } catch {
    bad("the account JWT does not verify");
  }
  const z = claims!.nats.authorization;
  if (
    claims!.sub !== a.pub || z?.xkey !== x.pub ||
    !z?.allowed_accounts?.includes(c.dataAccount as string) ||
    !claims!.nats.signing_keys?.includes(a.signingPub as string)
  ) bad("the account JWT does not carry this callout configuration");
  for (const name of ["calloutCreds", "sentinelCreds"] as const) {
    if (typeof c[name] !== "string") bad(name);
    await parseCreds(c[name] as string).catch(() => bad(name));
  }
  return structuredClone(c) as unknown as CalloutAuth;
}

function malformed(code: CotalErrorCode, space: string, detail: string): never {
  throw new CotalError(
    code,
    `The stored auth record of space ${JSON.stringify(space)} is malformed (${detail}); ` +
      "restore it from backup or re-provision the space's user auth.",
  );
}
