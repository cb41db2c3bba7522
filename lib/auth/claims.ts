/**
 * Claim checks shared by the bearer validator and the IdP bridge: exact issuer, exact
 * audience, and the time window against the fixed clock skew.
 *
 * @module
 */

import { CLOCK_SKEW_SEC } from "./constants.ts";
import { type RefusalLabel, refuse } from "./jws.ts";

/** The verifier's clock in whole Unix seconds. */
export function nowSec(): number {
  return Math.floor(Date.now() / 1000);
}

/** Refuse unless `iss` is exactly `expected` (no normalisation: a trailing slash is a mismatch). */
export function checkIssuer(label: RefusalLabel, iss: unknown, expected: string): void {
  if (iss !== expected) {
    throw refuse(
      label,
      "bad_issuer",
      `The ${label.what} issuer ${describeClaim(iss)} is not the pinned issuer ` +
        `${JSON.stringify(expected)}; get a token from that issuer.`,
    );
  }
}

/**
 * Refuse unless `aud` is exactly `expected`, as a string or a one-element array. A
 * multi-audience token is refused even when it lists `expected`: jose treats audience as set
 * membership, which would make one token replayable across every audience it names.
 */
export function checkAudience(label: RefusalLabel, aud: unknown, expected: string): void {
  if (Array.isArray(aud) && aud.length > 1) {
    throw refuse(
      label,
      "bad_audience",
      `The ${label.what} names ${aud.length} audiences; a token must name exactly one ` +
        `(${JSON.stringify(expected)}), so request one minted for this audience only.`,
    );
  }
  const single = Array.isArray(aud) ? aud[0] : aud;
  if (single !== expected) {
    throw refuse(
      label,
      "bad_audience",
      `The ${label.what} audience ${describeClaim(single)} is not ${JSON.stringify(expected)}; ` +
        "it was minted for a different space or client.",
    );
  }
}

/**
 * Read a NumericDate claim. `integer` demands a safe integer (our own bearers); otherwise any
 * finite non-negative number (IdPs may send fractions). Strings are never coerced.
 */
export function numericDate(
  label: RefusalLabel,
  payload: Record<string, unknown>,
  name: "exp" | "iat" | "nbf",
  integer: boolean,
): number | undefined {
  if (!(name in payload)) return undefined;
  const v = payload[name];
  const ok = typeof v === "number" && Number.isFinite(v) && v >= 0 &&
    (!integer || Number.isSafeInteger(v));
  if (!ok) {
    throw refuse(
      label,
      "bad_claim",
      `The ${label.what} "${name}" claim is ${describeClaim(v)}, not a NumericDate; ` +
        "re-issue the token.",
    );
  }
  return v as number;
}

/** Like {@linkcode numericDate}, but an absent claim is refused with `<prefix>_missing_claim`. */
export function requiredNumericDate(
  label: RefusalLabel,
  payload: Record<string, unknown>,
  name: "exp" | "iat" | "nbf",
  integer: boolean,
): number {
  const v = numericDate(label, payload, name, integer);
  if (v === undefined) {
    throw refuse(
      label,
      "missing_claim",
      `The ${label.what} has no "${name}" claim; a token must carry exp, iat` +
        `${label.prefix === "bearer" ? " and nbf" : ""}.`,
    );
  }
  return v;
}

/** Refuse an `iat` or `nbf` later than now plus the fixed skew (a post-dated token). */
export function checkNotPostdated(
  label: RefusalLabel,
  name: "iat" | "nbf",
  value: number | undefined,
  now: number,
): void {
  if (value !== undefined && value > now + CLOCK_SKEW_SEC) {
    throw refuse(
      label,
      "postdated",
      `The ${label.what} "${name}" is ${Math.ceil(value - now)} s in the future (more than ` +
        `the ${CLOCK_SKEW_SEC} s skew allowed); check the issuer's clock.`,
    );
  }
}

/** Describe a claim value for a message without echoing unbounded input. */
export function describeClaim(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v.length > 64 ? `${v.slice(0, 61)}...` : v);
  if (v === undefined) return "(missing)";
  if (typeof v === "number" || typeof v === "boolean" || v === null) return String(v);
  return `(${Array.isArray(v) ? "array" : typeof v})`;
}
