/**
 * JWKS parsing and the pinned key resolver. A key's algorithm is pinned by its key type
 * (OKP/Ed25519 -> EdDSA, EC/P-256 -> ES256, RSA -> RS256), never taken from a token, so a
 * token cannot talk a verifier into HMAC-with-the-public-key or any other confusion.
 *
 * @module
 */

import { base64url, importJWK } from "jose";
import { CotalError } from "../errors.ts";
import { MAX_JWKS_KEYS, MIN_RSA_MODULUS_BITS } from "./constants.ts";

/** The asymmetric JWS algorithms Cotal verifies. `none` and every HMAC algorithm are absent. */
export type JwsAlgorithm = "EdDSA" | "ES256" | "RS256";

/** Every algorithm a verifier may be asked to allow, frozen. */
export const JWS_ALGORITHMS: readonly JwsAlgorithm[] = Object.freeze(["EdDSA", "ES256", "RS256"]);

/** A public JSON Web Key as published in a JWKS (members Cotal does not use are kept as-is). */
export interface PublicJwk {
  /** Key type (`OKP`, `EC`, `RSA`). */
  kty: string;
  /** Key id. */
  kid?: string;
  /** Algorithm. */
  alg?: string;
  /** Intended use (`sig`). */
  use?: string;
  /** Curve, for OKP and EC keys. */
  crv?: string;
  /** Public x coordinate (OKP, EC). */
  x?: string;
  /** Public y coordinate (EC). */
  y?: string;
  /** RSA modulus. */
  n?: string;
  /** RSA exponent. */
  e?: string;
  /** Any other member, kept as published. */
  [member: string]: unknown;
}

/** A JSON Web Key Set: `{ keys: [...] }`. */
export interface JsonWebKeySet {
  /** The keys. */
  keys: PublicJwk[];
}

/**
 * Resolves the verification key for a token header's `kid` and `alg`, or `undefined` when the
 * pinned set has no key with that kid usable for that algorithm.
 */
export type KeyResolver = (kid: string, alg: JwsAlgorithm) => Promise<CryptoKey | undefined>;

/** Options for {@linkcode pinnedJwksResolver}. */
export interface PinnedJwksResolverOptions {
  /** Algorithms keys may be used with; defaults to all of EdDSA, ES256 and RS256. */
  algorithms?: readonly JwsAlgorithm[];
}

/** One usable verification key of a parsed JWKS. */
export interface PinnedKey {
  kid: string;
  alg: JwsAlgorithm;
  jwk: PublicJwk;
}

// Members that only a private or symmetric key has; a public set carrying them is refused.
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/**
 * Resolve keys only from a pinned JWKS, by kid. Nothing is fetched: a `jku` or `x5u` in a
 * token can never add a key. The set is checked when the resolver is made (private members,
 * duplicate kids and oversized sets are refused); keys that are not signature keys, or whose
 * type does not pin to an allowed algorithm, are ignored.
 *
 * @example
 * ```ts
 * const resolve = pinnedJwksResolver(issuer.jwks(), { algorithms: ["EdDSA"] });
 * await validateUserToken(token, { resolver: resolve, space: "demo" });
 * ```
 */
export function pinnedJwksResolver(
  jwks: JsonWebKeySet,
  opts: PinnedJwksResolverOptions = {},
): KeyResolver {
  const keys = parseJwks(jwks, opts.algorithms ?? JWS_ALGORITHMS);
  const imported = new Map<string, Promise<CryptoKey>>();
  return (kid, alg) => {
    const key = keys.get(kid);
    if (!key || key.alg !== alg) return Promise.resolve(undefined);
    let p = imported.get(kid);
    if (!p) {
      p = importPublicKey(key);
      imported.set(kid, p);
    }
    return p;
  };
}

/**
 * Parse and check a JWKS, returning its usable signature keys by kid. Throws `jwks_malformed`,
 * `jwks_private_key`, `jwks_duplicate_kid` or `jwks_too_many_keys`.
 */
export function parseJwks(
  jwks: unknown,
  algorithms: readonly JwsAlgorithm[],
): Map<string, PinnedKey> {
  if (!isPlainObject(jwks) || !Array.isArray(jwks.keys)) {
    throw new CotalError(
      "jwks_malformed",
      'The JWKS is not an object with a "keys" array; pin the IdP\'s published key set.',
    );
  }
  if (jwks.keys.length > MAX_JWKS_KEYS) {
    throw new CotalError(
      "jwks_too_many_keys",
      `The JWKS holds ${jwks.keys.length} keys, more than the ${MAX_JWKS_KEYS} accepted; ` +
        "publish only the IdP's current signing keys.",
    );
  }
  const out = new Map<string, PinnedKey>();
  for (const raw of jwks.keys) {
    if (!isPlainObject(raw) || typeof raw.kty !== "string") {
      throw new CotalError(
        "jwks_malformed",
        'A JWKS entry is not a JSON Web Key object with a "kty"; fix the published key set.',
      );
    }
    if (PRIVATE_MEMBERS.some((m) => m in raw)) {
      throw new CotalError(
        "jwks_private_key",
        "The JWKS contains private or symmetric key material; publish public keys only " +
          "and rotate the exposed key.",
      );
    }
    const jwk = raw as PublicJwk;
    const alg = pinnedAlgorithm(jwk);
    if (!alg || !algorithms.includes(alg)) continue;
    if (typeof jwk.kid !== "string" || jwk.kid === "" || jwk.kid.length > 256) continue;
    if (out.has(jwk.kid)) {
      throw new CotalError(
        "jwks_duplicate_kid",
        `The JWKS lists the key id ${JSON.stringify(jwk.kid)} twice; every key needs a ` +
          "unique kid.",
      );
    }
    out.set(jwk.kid, { kid: jwk.kid, alg, jwk: publicMembers(jwk) });
  }
  return out;
}

/** The one algorithm a JWK may verify, from its key type; `undefined` when Cotal cannot use it. */
export function pinnedAlgorithm(jwk: PublicJwk): JwsAlgorithm | undefined {
  if (jwk.use !== undefined && jwk.use !== "sig") return undefined;
  if (jwk.key_ops !== undefined) {
    if (!Array.isArray(jwk.key_ops) || !jwk.key_ops.includes("verify")) return undefined;
  }
  let alg: JwsAlgorithm | undefined;
  if (jwk.kty === "OKP" && jwk.crv === "Ed25519" && typeof jwk.x === "string") alg = "EdDSA";
  else if (
    jwk.kty === "EC" && jwk.crv === "P-256" && typeof jwk.x === "string" &&
    typeof jwk.y === "string"
  ) alg = "ES256";
  else if (
    jwk.kty === "RSA" && typeof jwk.n === "string" && typeof jwk.e === "string" &&
    rsaModulusBits(jwk.n) >= MIN_RSA_MODULUS_BITS
  ) alg = "RS256";
  if (!alg) return undefined;
  // A published `alg` must agree with the key type (Keycloak also lists RSA-OAEP `enc` keys).
  if (jwk.alg !== undefined && jwk.alg !== alg) return undefined;
  return alg;
}

function publicMembers(jwk: PublicJwk): PublicJwk {
  const kid = jwk.kid;
  if (jwk.kty === "OKP") return { kty: "OKP", crv: jwk.crv, x: jwk.x, kid };
  if (jwk.kty === "EC") return { kty: "EC", crv: jwk.crv, x: jwk.x, y: jwk.y, kid };
  return { kty: "RSA", n: jwk.n, e: jwk.e, kid };
}

async function importPublicKey(key: PinnedKey): Promise<CryptoKey> {
  try {
    const { kid: _kid, ...material } = key.jwk;
    const imported = await importJWK(material, key.alg);
    if (!(imported instanceof CryptoKey)) throw new TypeError("not an asymmetric key");
    return imported;
  } catch (cause) {
    throw new CotalError(
      "jwks_malformed",
      `The JWKS key ${JSON.stringify(key.kid)} does not import as a ${key.alg} public key; ` +
        "fix the published key set.",
      { cause },
    );
  }
}

function rsaModulusBits(n: string): number {
  let bytes: Uint8Array;
  try {
    bytes = base64url.decode(n);
  } catch {
    return 0;
  }
  let i = 0;
  while (i < bytes.length && bytes[i] === 0) i++;
  if (i === bytes.length) return 0;
  return (bytes.length - i) * 8 - Math.clz32(bytes[i]) + 24;
}

/** True for a non-null, non-array object. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
