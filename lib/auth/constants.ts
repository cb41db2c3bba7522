/**
 * Security policy for bearers and IdP tokens. These are constants, never options or env
 * knobs: the reference once took a tolerance option and a `NaN` value switched its expiry
 * checks off, so nothing here can be widened at run time (the objects are frozen too).
 *
 * @module
 */

/** Clock skew tolerated on `exp`, `iat` and `nbf`, in seconds (fixed; not configurable). */
export const CLOCK_SKEW_SEC = 30;

/** Longest lifetime a Cotal bearer may have (`exp - iat`), in seconds. */
export const MAX_BEARER_TTL_SEC = 900;

/** Bearer schema version written into `ver`; any other value is refused (downgrade defence). */
export const BEARER_VERSION = 1;

/**
 * How long a key must have been inactive before `retire` may drop it from the JWKS: the JWKS
 * cache age (300 s) plus the longest bearer a remote verifier may still hold (900 s).
 */
export const RETIRED_KID_RETENTION_SEC = 1200;

/** Longest compact token accepted before any parsing, in characters. */
export const MAX_TOKEN_LENGTH = 16 * 1024;

/** Largest JWKS document the IdP bridge will read from the network, in bytes. */
export const MAX_JWKS_BYTES = 64 * 1024;

/** Most keys a pinned or fetched JWKS may hold. */
export const MAX_JWKS_KEYS = 32;

/** Smallest RSA modulus accepted for RS256, in bits. */
export const MIN_RSA_MODULUS_BITS = 2048;

/** Default timeout for one IdP HTTP request (discovery or JWKS), in milliseconds. */
export const DEFAULT_IDP_FETCH_TIMEOUT_MS = 10_000;

/** Smallest owner-derivation secret accepted, in bytes. */
export const MIN_OWNER_SECRET_BYTES = 32;

/** The policy above as one frozen record, for callers (and tests) that want to read it whole. */
export const AUTH_POLICY: Readonly<{
  clockSkewSec: number;
  maxBearerTtlSec: number;
  bearerVersion: number;
  retiredKidRetentionSec: number;
  maxTokenLength: number;
  maxJwksBytes: number;
  maxJwksKeys: number;
  minRsaModulusBits: number;
  minOwnerSecretBytes: number;
}> = Object.freeze({
  clockSkewSec: CLOCK_SKEW_SEC,
  maxBearerTtlSec: MAX_BEARER_TTL_SEC,
  bearerVersion: BEARER_VERSION,
  retiredKidRetentionSec: RETIRED_KID_RETENTION_SEC,
  maxTokenLength: MAX_TOKEN_LENGTH,
  maxJwksBytes: MAX_JWKS_BYTES,
  maxJwksKeys: MAX_JWKS_KEYS,
  minRsaModulusBits: MIN_RSA_MODULUS_BITS,
  minOwnerSecretBytes: MIN_OWNER_SECRET_BYTES,
});
