/**
 * The wire-token rule for space names and the fail-loud grammars grants are built from.
 *
 * `token()` is the one implementation of reference A §3.1; lib/wire re-exports it so subjects,
 * stream names and grants can never disagree about a space's wire form.
 *
 * @module
 */
import { CotalError } from "../errors.ts";

/**
 * The wire token of a space (or any route token): the name trimmed, every UTF-16 code unit
 * outside `[A-Za-z0-9_-]` mapped to `_`, and an empty result turned into `_`. Lossy by design:
 * never decode a token back into a display name.
 *
 * @example
 * ```ts
 * token(" my space "); // "my_space"
 * ```
 */
export function token(name: string): string {
  const t = name.trim().replace(/[^A-Za-z0-9_-]/g, "_");
  return t === "" ? "_" : t;
}

const CHANNEL_SEGMENT = /^[A-Za-z0-9_-]+$/;
const OWNER_ACTOR = /^[A-Za-z0-9_]+$/;
const DERIVED_OWNER = /^u_[a-z2-7]{26}$/;
const LIFECYCLE_UID = /^[a-z0-9]{26,32}$/;
const CONN_ID = /^[A-Za-z0-9_-]{8,120}$/;
const ROLE = /^[A-Za-z0-9_-]+$/;

/** Longest channel path a policy may name (reference `MAX_CHANNEL_LENGTH`). */
export const MAX_CHANNEL_LENGTH = 4096;
/** Longest owner or actor token a principal may carry. */
export const MAX_PRINCIPAL_TOKEN_LENGTH = 64;

/**
 * Refuses a channel path that `token()` would rewrite (so `foo/bar` can never alias `foo_bar`
 * in a grant). Segments are `[A-Za-z0-9_-]+`, `*`, or a final `>`; `concrete` also refuses the
 * wildcards (publishing is always to a concrete channel).
 */
export function assertValidChannel(channel: string, opts: { concrete?: boolean } = {}): void {
  if (typeof channel !== "string" || channel === "" || channel.length > MAX_CHANNEL_LENGTH) {
    throw new CotalError(
      "invalid_channel",
      `Channel ${
        JSON.stringify(String(channel).slice(0, 80))
      } is empty or longer than ${MAX_CHANNEL_LENGTH} characters; name a channel like "general" or "team.backend".`,
    );
  }
  const segments = channel.split(".");
  segments.forEach((seg, i) => {
    const wildcard = seg === "*" || (seg === ">" && i === segments.length - 1);
    if (wildcard && opts.concrete) {
      throw new CotalError(
        "invalid_channel",
        `Channel ${
          JSON.stringify(channel)
        } contains a wildcard, but publish grants must name concrete channels; list each channel explicitly.`,
      );
    }
    if (!wildcard && !CHANNEL_SEGMENT.test(seg)) {
      throw new CotalError(
        "invalid_channel",
        `Channel ${
          JSON.stringify(channel)
        } has a segment outside [A-Za-z0-9_-] (or a misplaced wildcard) that the subject-token rules would rewrite; rename it using only letters, digits, "_" and "-".`,
      );
    }
  });
}

/** True for an owner token that may appear at a trust boundary: `local` or a derived `u_…`. */
export function isPrincipalOwnerToken(owner: string): boolean {
  return owner === "local" || DERIVED_OWNER.test(owner);
}

/** Refuses an owner that is not `local` or a derived owner `u_<26 base32>`. */
export function assertPrincipalOwner(owner: string): void {
  if (typeof owner !== "string" || !isPrincipalOwnerToken(owner)) {
    throw new CotalError(
      "invalid_principal",
      `Owner ${
        JSON.stringify(String(owner).slice(0, 80))
      } is not a principal owner; use "local" or a derived owner of the form u_<26 base32 characters>.`,
    );
  }
}

/** Refuses an actor token outside `[A-Za-z0-9_]{1,64}` (no dots, wildcards or `-`). */
export function assertValidActor(actor: string): void {
  if (
    typeof actor !== "string" || actor.length > MAX_PRINCIPAL_TOKEN_LENGTH ||
    !OWNER_ACTOR.test(actor)
  ) {
    throw new CotalError(
      "invalid_principal",
      `Actor ${
        JSON.stringify(String(actor).slice(0, 80))
      } must be 1-${MAX_PRINCIPAL_TOKEN_LENGTH} characters of [A-Za-z0-9_]; rename the actor.`,
    );
  }
}

/** Refuses a lifecycle uid outside `[a-z0-9]{26,32}` (at least 128 bits of randomness). */
export function assertLifecycleUid(uid: string): void {
  if (typeof uid !== "string" || !LIFECYCLE_UID.test(uid)) {
    throw new CotalError(
      "invalid_lifecycle_uid",
      "The lifecycleUid must be 26-32 characters of [a-z0-9]; mint one with newLifecycleUid().",
    );
  }
}

/** Refuses a reply-inbox connection id outside `[A-Za-z0-9_-]{8,120}`. */
export function assertConnId(connId: string): void {
  if (typeof connId !== "string" || !CONN_ID.test(connId)) {
    throw new CotalError(
      "invalid_conn_id",
      "The connection id must be 8-120 characters of [A-Za-z0-9_-]; use the identity's public key.",
    );
  }
}

/** Refuses a role name that cannot be a subject token and a durable-name suffix. */
export function assertValidRole(role: string): void {
  if (typeof role !== "string" || role.length > MAX_PRINCIPAL_TOKEN_LENGTH || !ROLE.test(role)) {
    throw new CotalError(
      "invalid_role",
      `Role ${
        JSON.stringify(String(role).slice(0, 80))
      } must be 1-${MAX_PRINCIPAL_TOKEN_LENGTH} characters of [A-Za-z0-9_-]; rename the role.`,
    );
  }
}

/**
 * A fresh lifecycle uid: 160 random bits in base36, left-padded to 26 characters (the
 * reference's form, so durables named from it interoperate).
 */
export function newLifecycleUid(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(20));
  let n = 0n;
  for (const b of bytes) n = (n << 8n) | BigInt(b);
  return n.toString(36).padStart(26, "0");
}
