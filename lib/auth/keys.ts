/**
 * SecretStore keys of the auth kinds, per space: `space.<hex>/<kind>` (the workspace layout,
 * so one store holds a space's daemon creds and its auth material side by side).
 *
 * @module
 */

import { spaceKeyHex } from "../workspace/mod.ts";

/** Kind of the bearer issuer's record (private Ed25519 JWKs): losing it kills every bearer. */
export const ISSUER_KIND = "issuer.json";
/** Kind of the owner-derivation secret: regenerating it re-keys every owner. */
export const OWNER_SECRET_KIND = "owner-secret.json";
/** Kind of the actor ledger: the one authorization source for bearers. */
export const ACTOR_LEDGER_KIND = "actors.json";
/** Kind of the IdP pin (issuer, audience, JWKS): a trust pin, not a secret. */
export const IDP_PIN_KIND = "idp.json";

/** Key of the bearer issuer record of `space`. */
export function issuerKey(space: string): string {
  return `space.${spaceKeyHex(space)}/${ISSUER_KIND}`;
}

/** Key of the owner-derivation secret of `space`. */
export function ownerSecretKey(space: string): string {
  return `space.${spaceKeyHex(space)}/${OWNER_SECRET_KIND}`;
}

/** Key of the actor ledger of `space`. */
export function actorLedgerKey(space: string): string {
  return `space.${spaceKeyHex(space)}/${ACTOR_LEDGER_KIND}`;
}

/** Key of the IdP pin of `space`. */
export function idpPinKey(space: string): string {
  return `space.${spaceKeyHex(space)}/${IDP_PIN_KIND}`;
}
