/**
 * The auth secret kinds through a SecretStore: `ensure*` creates once (create-only, so two
 * first users adopt one winner) and then loads; `load*` refuses an absent or malformed
 * record. Neither ever regenerates over existing material, and no error echoes stored bytes.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import { createOnce } from "../workspace/mod.ts";
import type { SecretStore } from "../workspace/mod.ts";
import { MIN_OWNER_SECRET_BYTES } from "./constants.ts";
import { createUserTokenIssuer, type UserTokenIssuer } from "./issuer.ts";
import { isPlainObject } from "./jwks.ts";
import { issuerKey, ownerSecretKey } from "./keys.ts";

/** Create the space's bearer issuer in `store` if absent, then load it. */
export async function ensureIssuer(store: SecretStore, space: string): Promise<UserTokenIssuer> {
  const key = issuerKey(space);
  if ((await store.get(key)) === undefined) {
    const fresh = await createUserTokenIssuer({ space });
    await createOnce(store, key, fresh.exportRecord());
  }
  return await loadIssuer(store, space);
}

/** Load the space's bearer issuer; refuses (`issuer_missing`, `issuer_record_malformed`). */
export async function loadIssuer(store: SecretStore, space: string): Promise<UserTokenIssuer> {
  const text = await store.get(issuerKey(space));
  if (text === undefined) {
    throw new CotalError(
      "issuer_missing",
      `Space ${JSON.stringify(space)} has no bearer issuer in the secret store; provision it ` +
        "with ensureIssuer() (cotal up does this for user-auth spaces).",
    );
  }
  return await createUserTokenIssuer({ space, record: text });
}

/** Persist the issuer's current keys (after `rotate()` or `retire()`), replacing the record. */
export async function saveIssuer(store: SecretStore, issuer: UserTokenIssuer): Promise<void> {
  await store.put(issuerKey(issuer.space), issuer.exportRecord());
}

/** Create the space's 32-byte owner secret in `store` if absent, then load it. */
export async function ensureOwnerSecret(store: SecretStore, space: string): Promise<Uint8Array> {
  const key = ownerSecretKey(space);
  if ((await store.get(key)) === undefined) {
    const secret = crypto.getRandomValues(new Uint8Array(32));
    await createOnce(store, key, JSON.stringify({ ver: 1, secretB64: toBase64(secret) }));
    secret.fill(0);
  }
  return await loadOwnerSecret(store, space);
}

/** Load the space's owner secret; refuses (`owner_secret_missing`, `owner_secret_malformed`). */
export async function loadOwnerSecret(store: SecretStore, space: string): Promise<Uint8Array> {
  const text = await store.get(ownerSecretKey(space));
  if (text === undefined) {
    throw new CotalError(
      "owner_secret_missing",
      `Space ${JSON.stringify(space)} has no owner secret in the secret store; provision it ` +
        "with ensureOwnerSecret() (never regenerate one: it re-keys every owner).",
    );
  }
  let secret: Uint8Array | undefined;
  try {
    const rec: unknown = JSON.parse(text);
    if (isPlainObject(rec) && rec.ver === 1 && typeof rec.secretB64 === "string") {
      secret = fromBase64(rec.secretB64);
    }
  } catch {
    secret = undefined;
  }
  if (!secret || secret.byteLength < MIN_OWNER_SECRET_BYTES) {
    throw new CotalError(
      "owner_secret_malformed",
      `The stored owner secret of space ${JSON.stringify(space)} is malformed or shorter than ` +
        `${MIN_OWNER_SECRET_BYTES} bytes; restore it from backup (a new one re-keys every owner).`,
    );
  }
  return secret;
}

function toBase64(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes));
}

function fromBase64(text: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return undefined;
  const bin = atob(text);
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}
