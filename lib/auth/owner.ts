/**
 * Owner derivation: an IdP subject becomes a stable, non-PII owner token per space. The
 * input bytes match the reference (`"cotal-owner-v1:" + subject`, subject for IdP logins being
 * `JSON.stringify([issuer, sub])`), so owners derived by either implementation agree.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import { base32Encode } from "../nats/mod.ts";
import { MIN_OWNER_SECRET_BYTES } from "./constants.ts";
import { isDerivedOwner } from "./grammar.ts";

const CONTEXT = "cotal-owner-v1:";

/**
 * Derive the owner token for `subject`: HMAC-SHA256 keyed by the space's owner secret, first
 * 16 bytes, lowercase unpadded base32, prefixed `u_` (26 characters after it). Deterministic,
 * so re-login lands in the same lanes; never nkey-shaped (an nkey is 56 uppercase characters).
 *
 * @example
 * ```ts
 * const owner = await deriveOwnerToken(secret, JSON.stringify([issuer, sub]));
 * // "u_" + 26 characters of [a-z2-7]
 * ```
 */
export async function deriveOwnerToken(secret: Uint8Array, subject: string): Promise<string> {
  if (!(secret instanceof Uint8Array) || secret.byteLength < MIN_OWNER_SECRET_BYTES) {
    throw new CotalError(
      "owner_secret_too_short",
      `The owner secret must be at least ${MIN_OWNER_SECRET_BYTES} bytes; load it with ` +
        "loadOwnerSecret() instead of building one by hand.",
    );
  }
  if (typeof subject !== "string" || subject === "") {
    throw new CotalError(
      "owner_subject_empty",
      "The subject to derive an owner from is empty; pass the IdP issuer and sub.",
    );
  }
  const key = await crypto.subtle.importKey(
    "raw",
    new Uint8Array(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const mac = new Uint8Array(
    await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(CONTEXT + subject)),
  );
  const owner = `u_${base32Encode(mac.subarray(0, 16)).toLowerCase()}`;
  if (!isDerivedOwner(owner)) {
    throw new CotalError("owner_derivation_failed", "Owner derivation produced a bad token.");
  }
  return owner;
}

/**
 * Derive the owner for an IdP login. The subject is the JSON array `[issuer, sub]`, which is
 * injective (`("a","b|c")` and `("a|b","c")` differ) and namespaces owners by IdP.
 */
export function deriveOwnerForIdpSubject(
  secret: Uint8Array,
  idpIssuer: string,
  sub: string,
): Promise<string> {
  if (typeof idpIssuer !== "string" || idpIssuer === "" || typeof sub !== "string" || sub === "") {
    return Promise.reject(
      new CotalError(
        "owner_subject_empty",
        "An IdP owner needs a non-empty issuer and sub; check the verified IdP token.",
      ),
    );
  }
  return deriveOwnerToken(secret, JSON.stringify([idpIssuer, sub]));
}
