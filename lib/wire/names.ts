/**
 * Wire names: the space token, principals, lifecycle ids and channel names.
 *
 * `token()` is the one lossy mapping (a display name into a subject token). Everything a
 * policy or an identity depends on (owner, actor, lifecycle uid, channel) is validated and
 * refused when wrong, never rewritten: a rewrite would silently alias two names. The token rule
 * and the token grammars have one implementation, in lib/trust (grants need them and
 * dependencies point `trust <- wire`); this module re-exports them and adds the principal forms.
 *
 * @module
 */

import type { Principal } from "../trust/mod.ts";
import { createHash } from "node:crypto";
import { CotalError } from "../errors.ts";
import {
  assertLifecycleUid,
  assertValidActor,
  assertValidChannel as assertChannel,
  assertValidRole as assertRole,
  isPrincipalOwnerToken,
  MAX_CHANNEL_LENGTH,
  MAX_PRINCIPAL_TOKEN_LENGTH,
  newLifecycleUid,
  token,
} from "../trust/mod.ts";

export {
  isPrincipalOwnerToken,
  MAX_CHANNEL_LENGTH,
  MAX_PRINCIPAL_TOKEN_LENGTH,
  newLifecycleUid,
  token,
};

/** A wire identity: the pair of single tokens `(owner, actor)` (one definition, in lib/trust). */
export type { Principal };

const OWNER_ACTOR_RE = /^[A-Za-z0-9_]+$/;
const LIFECYCLE_UID_RE = /^[a-z0-9]{26,32}$/;

/** True when `value` is a syntactically valid owner or actor token: `[A-Za-z0-9_]{1,64}`. */
export function isPrincipalToken(value: unknown): value is string {
  return typeof value === "string" && value.length <= MAX_PRINCIPAL_TOKEN_LENGTH &&
    OWNER_ACTOR_RE.test(value);
}

/**
 * Refuse an owner token outside `[A-Za-z0-9_]{1,64}` (`-` is reserved as the dash-form
 * separator). This is grammar only; {@linkcode assertValidPrincipal} also demands a principal
 * owner (`local` or `u_…`).
 */
export function assertValidOwnerToken(owner: unknown): asserts owner is string {
  if (!isPrincipalToken(owner)) {
    throw new CotalError(
      "invalid_principal",
      `Owner ${describe(owner)} must be 1-${MAX_PRINCIPAL_TOKEN_LENGTH} characters of ` +
        `[A-Za-z0-9_] (no dots, dashes or wildcards); rename the owner.`,
    );
  }
}

/** Refuse an actor token outside `[A-Za-z0-9_]{1,64}`. */
export function assertValidActorToken(actor: unknown): asserts actor is string {
  assertValidActor(actor as string);
}

/**
 * Refuse a principal whose tokens are malformed, and (unless `anyOwner`) whose owner is not
 * `local` or a derived `u_` owner: an nkey-shaped owner from an old-format subject must not
 * pass as a principal. Returns a plain copy.
 */
export function assertValidPrincipal(
  p: Principal,
  opts: { anyOwner?: boolean } = {},
): Principal {
  if (typeof p !== "object" || p === null) {
    throw new CotalError(
      "invalid_principal",
      "A principal must be an object { owner, actor }; pass both tokens.",
    );
  }
  assertValidOwnerToken(p.owner);
  assertValidActorToken(p.actor);
  if (!opts.anyOwner && !isPrincipalOwnerToken(p.owner)) {
    throw new CotalError(
      "invalid_principal",
      `Owner ${describe(p.owner)} is not a principal owner; use "local" or a derived owner ` +
        `of the form u_<26 base32 characters>.`,
    );
  }
  return { owner: p.owner, actor: p.actor };
}

/** The dot form `<owner>.<actor>` used in subjects, `card.id`, `from.id` and KV keys. */
export function principalId(p: Principal): string {
  const v = assertValidPrincipal(p, { anyOwner: true });
  return `${v.owner}.${v.actor}`;
}

/** The dash form `<owner>-<actor>` used inside JetStream durable names. */
export function principalName(p: Principal): string {
  const v = assertValidPrincipal(p, { anyOwner: true });
  return `${v.owner}-${v.actor}`;
}

/**
 * Parse a dot-form principal id `<owner>.<actor>`; refuses anything else, including (unless
 * `anyOwner`) an owner that is not a principal owner.
 */
export function parsePrincipalId(id: string, opts: { anyOwner?: boolean } = {}): Principal {
  const parts = typeof id === "string" ? id.split(".") : [];
  if (parts.length !== 2) {
    throw new CotalError(
      "invalid_principal",
      `Principal id ${describe(id)} is not of the dot form "<owner>.<actor>"; pass both tokens.`,
    );
  }
  return assertValidPrincipal({ owner: parts[0], actor: parts[1] }, opts);
}

/** True when `uid` is a valid lifecycle uid: `[a-z0-9]{26,32}`. */
export function isLifecycleUid(uid: unknown): uid is string {
  return typeof uid === "string" && LIFECYCLE_UID_RE.test(uid);
}

/** Refuse a lifecycle uid outside `[a-z0-9]{26,32}` (mint one with `newLifecycleUid()`). */
export function assertValidLifecycleUid(uid: unknown): asserts uid is string {
  assertLifecycleUid(uid as string);
}

/**
 * Validate a channel name used as policy input (ACL lists, subscriptions): dot-separated
 * segments of `[A-Za-z0-9_-]+`, or whole-segment wildcards `*` and `>` (`>` only last).
 * Refuses rather than rewriting, so `foo/bar` cannot silently become `foo_bar`.
 */
export function assertValidChannel(channel: unknown): asserts channel is string {
  assertChannel(channel as string);
}

/** Validate a concrete channel (a publish target, a registry key): no wildcards. */
export function assertConcreteChannel(channel: unknown): asserts channel is string {
  assertChannel(channel as string, { concrete: true });
}

/** True when `channel` is a valid policy channel; with `concrete`, also wildcard-free. */
export function isValidChannel(channel: unknown, opts: { concrete?: boolean } = {}): boolean {
  try {
    assertChannel(channel as string, opts);
    return true;
  } catch {
    return false;
  }
}

/** True when the channel contains a `*` or `>` segment. */
export function hasWildcard(channel: string): boolean {
  return channel.split(".").some((s) => s === "*" || s === ">");
}

/** Refuse a role (anycast service) token outside `[A-Za-z0-9_-]{1,64}`. */
export function assertValidRole(role: unknown): asserts role is string {
  assertRole(role as string);
}

/** Quote a value for an error message without dumping unbounded input. */
export function describe(value: unknown): string {
  if (typeof value !== "string") return value === undefined ? "(missing)" : `(${typeof value})`;
  const shown = value.length > 80 ? `${value.slice(0, 77)}...` : value;
  return JSON.stringify(shown);
}

/**
 * The tag of a lifecycle in presence rows: a hash of its uid, never the uid. The uid names a
 * lifecycle's durables and registry rows (its ACL row, its channel memberships); published in
 * presence it would tell every member which keys to aim a broker answer at. The tag still lets
 * a supervisor tell its agents' incarnations apart.
 */
export function lifecycleTag(uid: string): string {
  return createHash("sha256").update(`cotal-lifecycle-tag\n${uid}`).digest("hex").slice(0, 24);
}
