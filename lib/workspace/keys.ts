/**
 * Per-space secret-store keys: `space.<hex>/<kind>`.
 *
 * `<hex>` comes from {@linkcode spaceKeyHex}: the first 16 bytes (32 lowercase hex characters)
 * of SHA-256 over the space name's UTF-8 bytes. Hashing, rather than hex-encoding the name
 * itself, keeps every key one short fixed-length path segment (a long space name cannot
 * overflow a 255-byte filename), free of separators and case-proof on case-insensitive
 * filesystems (`alpha` and `Alpha` differ). 128 bits leaves no practical collision between
 * operator-chosen names. This deliberately differs from the reference layout's raw-hex segment,
 * so on-disk keys are not shared with it.
 *
 * A kind is not a key: a cred put under the bare kind (`delivery.creds`) lands where no
 * daemon reads.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { CotalError } from "../errors.ts";

/** Kind of the delivery daemon's standing scoped cred. */
export const DELIVERY_CREDS_KIND = "delivery.creds";
/** Kind of the membership feed's data-account read/write cred (renewable). */
export const MEMBERSHIP_RW_CREDS_KIND = "membership-rw.creds";
/** Kind of the `$SYS` cred that scans one account's connections for the membership feed. */
export const MEMBERSHIP_OBSERVER_CREDS_KIND = "membership-observer.creds";
/** Kind of the `$SYS` cred that kicks evicted connections. */
export const CONNECTION_EVICTOR_CREDS_KIND = "connection-evictor.creds";
/** Kind of the membership feed's non-secret config (`{accountId}`). */
export const MEMBERSHIP_CONFIG_KIND = "membership.json";

/**
 * Which composition a key is built for. `{ injected: true }`: a hosted composition that passes
 * its own `SecretStore`; `{ root }`: the workspace default store under that `.cotal` root.
 * The key string is identical either way; the composition only tells the caller which store
 * to read it from (the injected one, or `workspaceSecretStore(root)`).
 */
export type SecretStoreComposition = { readonly injected: true } | { readonly root: string };

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The 32-hex-character segment that names a space in store keys: lowercase hex of the first
 * 16 bytes of SHA-256(UTF-8(space)). Refuses an empty name and names with unpaired surrogates
 * (they encode to U+FFFD and would collide) with code `store_bad_space`.
 */
export function spaceKeyHex(space: string): string {
  if (typeof space !== "string" || space.length === 0) {
    throw new CotalError("store_bad_space", "The space name is empty; pass the space's name.");
  }
  if (LONE_SURROGATE.test(space)) {
    throw new CotalError(
      "store_bad_space",
      "The space name contains an unpaired UTF-16 surrogate; use a well-formed Unicode name.",
    );
  }
  return createHash("sha256").update(space, "utf8").digest("hex").slice(0, 32);
}

function checkComposition(composition: SecretStoreComposition): void {
  const ok = typeof composition === "object" && composition !== null &&
    (("injected" in composition && composition.injected === true) ||
      ("root" in composition && typeof composition.root === "string" &&
        composition.root.length > 0));
  if (!ok) {
    throw new CotalError(
      "store_bad_composition",
      "The key composition must be { injected: true } or { root: <.cotal dir> }; pass one of those.",
    );
  }
}

/** `space.<hex>/<kind>` for any per-space kind; the builders below are this with a fixed kind. */
export function spaceSecretKey(
  space: string,
  kind: string,
  composition: SecretStoreComposition,
): string {
  checkComposition(composition);
  if (kind.length === 0 || kind.includes("/") || kind === "." || kind === "..") {
    throw new CotalError(
      "store_bad_key",
      `Secret kind ${
        JSON.stringify(kind)
      } is not one path segment; use a kind such as "${DELIVERY_CREDS_KIND}".`,
    );
  }
  return `space.${spaceKeyHex(space)}/${kind}`;
}

/** Key of the delivery daemon's cred for `space`. */
export function deliveryCredsKey(space: string, composition: SecretStoreComposition): string {
  return spaceSecretKey(space, DELIVERY_CREDS_KIND, composition);
}

/** Key of the membership feed's read/write cred for `space`. */
export function membershipRwCredsKey(space: string, composition: SecretStoreComposition): string {
  return spaceSecretKey(space, MEMBERSHIP_RW_CREDS_KIND, composition);
}

/** Key of the membership observer `$SYS` cred for `space`. */
export function membershipObserverCredsKey(
  space: string,
  composition: SecretStoreComposition,
): string {
  return spaceSecretKey(space, MEMBERSHIP_OBSERVER_CREDS_KIND, composition);
}

/** Key of the connection evictor `$SYS` cred for `space`. */
export function connectionEvictorCredsKey(
  space: string,
  composition: SecretStoreComposition,
): string {
  return spaceSecretKey(space, CONNECTION_EVICTOR_CREDS_KIND, composition);
}

/**
 * Key of the supervisor's own cred for `space`, when it signs through the space's
 * `cotal-signer` (it holds no signing seed, so `cotal up` leaves it this cred to start with;
 * renews it through the signer in memory, and the signer re-signs this stored one).
 */
export function supervisorCredsKey(space: string, composition: SecretStoreComposition): string {
  return spaceSecretKey(space, "supervisor.creds", composition);
}

/** Key of the membership feed's `{accountId}` config for `space`. */
export function membershipConfigKey(space: string, composition: SecretStoreComposition): string {
  return spaceSecretKey(space, MEMBERSHIP_CONFIG_KIND, composition);
}
