/**
 * Claim grammars the bearer issuer and validator share, so every token the issuer mints
 * validates and every shape the validator refuses is also refused at mint.
 *
 * @module
 */

import { isLifecycleUid, isPrincipalToken } from "../wire/mod.ts";

/** The scopes a ledger row, and so a bearer, can carry. `role:<r>` allows the anycast role r. */
export const SCOPES: readonly string[] = Object.freeze(["admin", "spawn", "supervise", "run"]);

const DERIVED_OWNER_RE = /^u_[a-z2-7]{26}$/;
const ROLE_SCOPE_RE = /^role:[A-Za-z0-9_-]{1,64}$/;
const CREDENTIAL_SEGMENT_RE = /^[A-Za-z0-9_-]+$/;
const JTI_RE = /^[A-Za-z0-9_-]{1,128}$/;

/** True when `owner` is a derived owner token: `u_` + 26 characters of `[a-z2-7]`. */
export function isDerivedOwner(owner: unknown): owner is string {
  return typeof owner === "string" && DERIVED_OWNER_RE.test(owner);
}

/** True when `actor` is a valid actor token (`[A-Za-z0-9_]{1,64}`). */
export function isActorToken(actor: unknown): actor is string {
  return typeof actor === "string" && isPrincipalToken(actor);
}

/** True when `entry` is a known scope name or `role:<role>`. */
export function isScopeEntry(entry: unknown): entry is string {
  return typeof entry === "string" && (SCOPES.includes(entry) || ROLE_SCOPE_RE.test(entry));
}

/** True when `scope` is an array of distinct scope entries. */
export function isScopeList(scope: unknown): scope is string[] {
  return Array.isArray(scope) && scope.every(isScopeEntry) && new Set(scope).size === scope.length;
}

/** True when `parent` is `<derived owner>.<actor>` (one delegation link). */
export function isParentPrincipal(parent: unknown): parent is string {
  if (typeof parent !== "string") return false;
  const parts = parent.split(".");
  return parts.length === 2 && isDerivedOwner(parts[0]) && isActorToken(parts[1]);
}

/** True when `id` is a credential id: at most 256 characters of dot-separated `[A-Za-z0-9_-]+`. */
export function isCredentialId(id: unknown): id is string {
  return typeof id === "string" && id.length <= 256 &&
    id.split(".").every((s) => CREDENTIAL_SEGMENT_RE.test(s));
}

/** True when `jti` is a token id Cotal mints: 1-128 characters of `[A-Za-z0-9_-]`. */
export function isTokenId(jti: unknown): jti is string {
  return typeof jti === "string" && JTI_RE.test(jti);
}

export { isLifecycleUid };

/** True when two scope lists hold the same entries, in any order. */
export function sameScope(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const set = new Set(a);
  return b.every((s) => set.has(s));
}
