/**
 * Credential lifetime policy: every kind has a bounded default, a hard maximum and a minimum.
 *
 * The table is deep-frozen at load and mints read a private copy, so neither mutation of the
 * exported record, options nor environment variables can lengthen a credential's life.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import type { CredentialKind, LifetimeOpts } from "./types.ts";

/** How a kind's expiry is renewed. */
export type LifetimeClass =
  | "standing-renewable"
  | "rotation-renewed"
  | "one-shot"
  | "operator-managed";

/** The policy of one credential kind. */
export interface LifetimePolicy {
  /** How credentials of the kind are renewed. */
  readonly class: LifetimeClass;
  /** Lifetime when the caller names none. */
  readonly defaultTtlSeconds: number;
  /** Longest lifetime any caller may request. */
  readonly maxTtlSeconds: number;
  /**
   * Shortest lifetime any caller may request: a standing cred must live long enough for its
   * renewal at 75 % to land with margin (a 1 s delivery cred expired before any renewal could).
   */
  readonly minTtlSeconds: number;
}

const MINUTE = 60;
const HOUR = 3600;
const DAY = 86400;

/**
 * The one renewal line of every renewable credential: its holder renews (or its renewal owner
 * re-signs) it at this fraction of its life, and `cotal doctor auth` calls it near expiry past
 * it. The endpoint, the delivery daemon and the supervisor all read it from here.
 */
export const RENEW_FRACTION = 0.75;

/** Standing daemon creds: 24 h, re-signed by their renewal owner at 75 %. */
export const STANDING_RENEWABLE_TTL_SEC = DAY;
/** `$SYS` creds: 30 d, renewed only by a system-account rotation. */
export const ROTATION_RENEWED_TTL_SEC = 30 * DAY;

/**
 * The shortest standing cred: renewed at 75 % (22.5 s) it keeps 7.5 s for the re-sign, the
 * store write and the reconnect onto it, which take well under a second on one machine
 * (measured by tests/delivery/renewal_test.ts, which runs at exactly this minimum).
 */
export const STANDING_MIN_TTL_SEC = 30;

/** The minimum by renewal class: only one-shot and operator creds may be as short as 1 s. */
const MIN_BY_CLASS: Readonly<Record<LifetimeClass, number>> = Object.freeze({
  "standing-renewable": STANDING_MIN_TTL_SEC,
  "rotation-renewed": HOUR,
  "one-shot": 1,
  "operator-managed": 1,
});

function policy(cls: LifetimeClass, def: number, max: number): LifetimePolicy {
  return Object.freeze({
    class: cls,
    defaultTtlSeconds: def,
    maxTtlSeconds: max,
    minTtlSeconds: MIN_BY_CLASS[cls],
  });
}

const TABLE: Record<CredentialKind, LifetimePolicy> = {
  // The reference leaves static agent creds unbounded; ours expire and the manager renews them.
  agent: policy("standing-renewable", DAY, 7 * DAY),
  observer: policy("operator-managed", DAY, 30 * DAY),
  // Admin reads every DM in the space: a shorter leash than the observer.
  admin: policy("operator-managed", 12 * HOUR, 7 * DAY),
  supervisor: policy("standing-renewable", DAY, 7 * DAY),
  delivery: policy("standing-renewable", DAY, 7 * DAY),
  "membership-rw": policy("standing-renewable", DAY, 7 * DAY),
  provisioner: policy("one-shot", 5 * MINUTE, HOUR),
  deprovisioner: policy("one-shot", 5 * MINUTE, HOUR),
  purger: policy("one-shot", 5 * MINUTE, HOUR),
  "channel-writer": policy("one-shot", 5 * MINUTE, HOUR),
  // The reference's teardown has no expiry at all; it is the only holder of STREAM.DELETE.
  teardown: policy("one-shot", 5 * MINUTE, HOUR),
  // Snapshots of a large space take a while; still one operation, never a standing cred.
  backup: policy("one-shot", 15 * MINUTE, 2 * HOUR),
  // One control request (spawn waits out its readiness window); attach asks for up to the max.
  "control-caller": policy("one-shot", 5 * MINUTE, HOUR),
  operator: policy("one-shot", 5 * MINUTE, HOUR),
  probe: policy("one-shot", MINUTE, 5 * MINUTE),
  // The signer mints its own from the seed it holds, and renews them itself.
  signer: policy("standing-renewable", DAY, 7 * DAY),
  "membership-observer": policy("rotation-renewed", ROTATION_RENEWED_TTL_SEC, 30 * DAY),
  "connection-evictor": policy("rotation-renewed", ROTATION_RENEWED_TTL_SEC, 30 * DAY),
};

/** The frozen lifetime policy of every credential kind. A policy record, not an authz boundary. */
export const CREDENTIAL_LIFETIMES: Readonly<Record<CredentialKind, LifetimePolicy>> = Object
  .freeze(TABLE);

// Mints read this private snapshot, never the exported object, so even a runtime that somehow
// thawed the export could not widen a lifetime.
const SNAPSHOT: ReadonlyMap<CredentialKind, { def: number; max: number; min: number }> = new Map(
  Object.entries(TABLE).map((
    [k, p],
  ) => [
    k as CredentialKind,
    { def: p.defaultTtlSeconds, max: p.maxTtlSeconds, min: p.minTtlSeconds },
  ]),
);

/** `90 d`, `12 h`, `5 m` or `45 s`: the largest whole unit, for a person reading a refusal. */
function spoken(sec: number): string {
  for (const [n, unit] of [[86_400, "d"], [3600, "h"], [60, "m"]] as const) {
    if (sec >= n && sec % n === 0) return `${sec / n} ${unit}`;
  }
  return `${sec} s`;
}

function badLifetime(kind: string, what: string): CotalError {
  return new CotalError("invalid_lifetime", `The ${kind} credential lifetime ${what}.`);
}

/**
 * The `exp` (Unix seconds) of a `kind` credential minted at `nowSec`, refusing both options
 * together, NaN, non-integers, zero or negative values, and anything past the kind's maximum.
 */
export function resolveExpiry(kind: CredentialKind, opts: LifetimeOpts, nowSec: number): number {
  const limits = SNAPSHOT.get(kind);
  if (!limits) {
    throw new CotalError(
      "unknown_profile",
      `Unknown credential kind ${JSON.stringify(String(kind))}; use one of ${
        [...SNAPSHOT.keys()].join(", ")
      }.`,
    );
  }
  const { expiresAt, expiresInSeconds } = opts;
  if (expiresAt !== undefined && expiresInSeconds !== undefined) {
    throw badLifetime(kind, "was given as both expiresAt and expiresInSeconds; pass only one");
  }
  if (expiresAt !== undefined) {
    if (typeof expiresAt !== "number" || !Number.isSafeInteger(expiresAt) || expiresAt <= 0) {
      throw badLifetime(kind, "expiresAt must be a positive integer of Unix seconds");
    }
    if (expiresAt <= nowSec) {
      throw badLifetime(kind, "expiresAt is not in the future; pass a later time");
    }
    if (expiresAt - nowSec < limits.min) {
      throw badLifetime(
        kind,
        `expiresAt is less than the minimum ${limits.min} s away; pass a later time`,
      );
    }
    if (expiresAt - nowSec > limits.max) {
      throw badLifetime(
        kind,
        `expiresAt is more than the maximum ${limits.max} s away; pass an earlier time`,
      );
    }
    return expiresAt;
  }
  const ttl = expiresInSeconds ?? limits.def;
  if (typeof ttl !== "number" || !Number.isSafeInteger(ttl) || ttl <= 0) {
    throw badLifetime(kind, "expiresInSeconds must be a positive integer number of seconds");
  }
  if (ttl < limits.min) {
    throw badLifetime(
      kind,
      `of ${spoken(ttl)} is below the minimum ${
        spoken(limits.min)
      } (its renewal at 75 % needs the margin); request at least the minimum`,
    );
  }
  if (ttl > limits.max) {
    throw badLifetime(
      kind,
      `of ${spoken(ttl)} exceeds the maximum ${spoken(limits.max)}; request at most the maximum`,
    );
  }
  return nowSec + ttl;
}
