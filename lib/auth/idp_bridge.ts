/**
 * `createIdpBridge`: exchange a verified IdP JWT for a Cotal bearer. Any OIDC IdP works
 * (EdDSA, ES256 or RS256, the algorithm pinned by each key's type), against a pin fixed at
 * creation: issuer, audience, optional `azp`, and either a JWKS or one JWKS URL. The bearer
 * never outlives the IdP proof, and only a granted actor gets one.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import { MAX_BEARER_TTL_SEC, MAX_JWKS_BYTES, MIN_OWNER_SECRET_BYTES } from "./constants.ts";
import { isActorToken, isLifecycleUid, isScopeList } from "./grammar.ts";
import { checkIdpUrl, fetchIdpJson, fetchTimeout } from "./idp_fetch.ts";
import { type IdpTokenPin, type VerifiedIdpToken, verifyIdpToken } from "./idp_token.ts";
import type { UserTokenIssuer } from "./issuer.ts";
import {
  isPlainObject,
  type JsonWebKeySet,
  JWS_ALGORITHMS,
  type JwsAlgorithm,
  type KeyResolver,
  pinnedJwksResolver,
} from "./jwks.ts";
import type { ActorRow } from "./ledger.ts";
import { deriveOwnerForIdpSubject } from "./owner.ts";

/** What the bridge asks of the actor ledger (an `ActorLedger` is one). */
export interface ActorAuthorizer {
  /** The current grant of `(owner, actor)`, or a CotalError when there is none. */
  authorize(owner: string, actor: string): Promise<ActorRow>;
}

/** Options for {@linkcode createIdpBridge}. Pass exactly one of `jwks` and `jwksUrl`. */
export interface IdpBridgeOptions {
  /** The IdP's issuer string, compared exactly with the token's `iss`. */
  issuer: string;
  /** The audience Cotal's tokens must carry, compared exactly (one audience only). */
  audience: string;
  /** A pinned key set (no network). */
  jwks?: JsonWebKeySet;
  /** The one URL the key set is fetched from (`https:` or loopback `http:`). */
  jwksUrl?: string;
  /** Algorithms accepted; a subset of EdDSA, ES256, RS256 (default all three). */
  algorithms?: readonly JwsAlgorithm[];
  /** When set, the token's `azp` must equal it. */
  authorizedParty?: string;
  /** The Cotal space the bearers are for. */
  space: string;
  /** The space's owner-derivation secret (`loadOwnerSecret`). */
  ownerSecret: Uint8Array;
  /** Who may hold a bearer: usually the space's actor ledger. */
  ledger: ActorAuthorizer;
  /** The space's bearer issuer. */
  tokenIssuer: UserTokenIssuer;
  /** Timeout of one JWKS fetch in ms (default 10 000, at most 30 000). */
  fetchTimeoutMs?: number;
  /** How long a fetched JWKS is used before it is re-read, in ms (default 300 000, max 1 h). */
  jwksMaxAgeMs?: number;
  /** Least time between re-reads triggered by an unknown kid, in ms (default 30 000). */
  jwksRefreshCooldownMs?: number;
}

/** What an exchange asks for. */
export interface IdpExchangeRequest {
  /** The actor name the bearer is for. */
  actor: string;
  /** Requested bearer lifetime in seconds (1..900); the IdP proof's remaining life caps it. */
  ttlSec?: number;
}

/** A minted bearer and who it is for. */
export interface IdpExchangeResult {
  /** The Cotal bearer. */
  token: string;
  /** The owner derived from the IdP subject. */
  owner: string;
  /** The actor it speaks as. */
  actor: string;
  /** Unix seconds; never later than the IdP token's `exp`. */
  exp: number;
}

/** The bridge: `verify` checks an IdP token; `exchange` also mints a bearer. */
export interface IdpBridge {
  /** The pinned IdP issuer. */
  readonly issuer: string;
  /** The audience IdP tokens must carry. */
  readonly audience: string;
  /** The space bearers are issued for. */
  readonly space: string;
  /** Verifies an IdP token against the pinned issuer and its keys. */
  verify(idpToken: string): Promise<VerifiedIdpToken>;
  /** Exchanges a verified IdP token for a Cotal bearer. */
  exchange(idpToken: string, req: IdpExchangeRequest): Promise<IdpExchangeResult>;
}

/**
 * Create an IdP bridge. Creation does no network I/O; a `jwksUrl` is read on first use,
 * cached, and re-read when stale or when a token names an unknown kid (at most once per
 * cooldown, so junk kids cannot make the bridge hammer the IdP).
 *
 * @example
 * ```ts
 * const bridge = createIdpBridge({
 *   issuer: "https://idp.example/realms/cotal", audience: "cotal",
 *   jwksUrl: "https://idp.example/realms/cotal/protocol/openid-connect/certs",
 *   space, ownerSecret, ledger, tokenIssuer,
 * });
 * const { token, exp } = await bridge.exchange(idpJwt, { actor: "alice" });
 * ```
 */
export function createIdpBridge(opts: IdpBridgeOptions): IdpBridge {
  const pin = checkPin(opts);
  if (opts.tokenIssuer?.space !== opts.space) {
    badOptions("tokenIssuer must be the issuer of the bridge's space");
  }
  if (!(opts.ownerSecret instanceof Uint8Array)) badOptions("ownerSecret must be bytes");
  if (opts.ownerSecret.byteLength < MIN_OWNER_SECRET_BYTES) {
    badOptions(`ownerSecret must be at least ${MIN_OWNER_SECRET_BYTES} bytes`);
  }
  if (typeof opts.ledger?.authorize !== "function") badOptions("ledger must have authorize()");
  const secret = new Uint8Array(opts.ownerSecret);
  const { ledger, tokenIssuer, space } = opts;
  const resolver = opts.jwks !== undefined
    ? pinnedJwksResolver(structuredClone(opts.jwks), { algorithms: pin.algorithms })
    : remoteJwksResolver(checkIdpUrl(opts.jwksUrl!, "IdP JWKS URL"), pin.algorithms, opts);

  const verify = (idpToken: string) => verifyIdpToken(idpToken, pin, resolver);
  return {
    issuer: pin.issuer,
    audience: pin.audience,
    space,
    verify,
    async exchange(idpToken, req) {
      const actor = req?.actor;
      if (!isActorToken(actor)) {
        throw new CotalError(
          "actor_bad_name",
          "The actor to exchange for is missing or invalid; use 1-64 characters of [A-Za-z0-9_].",
        );
      }
      const ttlSec = req.ttlSec ?? MAX_BEARER_TTL_SEC;
      if (!Number.isSafeInteger(ttlSec) || ttlSec <= 0 || ttlSec > MAX_BEARER_TTL_SEC) {
        throw new CotalError(
          "bearer_bad_ttl",
          `The requested bearer lifetime is not an integer in 1..${MAX_BEARER_TTL_SEC} s.`,
        );
      }
      const proof = await verify(idpToken);
      const owner = await deriveOwnerForIdpSubject(secret, pin.issuer, proof.sub);
      const row: unknown = await ledger.authorize(owner, actor);
      // A pluggable authorizer that answers null, an array or someone else's row grants nothing.
      if (
        !isPlainObject(row) || row.owner !== owner || row.actor !== actor ||
        !isScopeList(row.scope) || !isLifecycleUid(row.lifecycleUid)
      ) {
        throw new CotalError(
          "actor_not_granted",
          `The ledger returned no usable grant for ${owner}.${actor}; grant the actor again.`,
        );
      }
      const issued = await tokenIssuer.issue({
        space,
        owner,
        actor,
        scope: row.scope,
        lifecycleUid: row.lifecycleUid,
        ttlSec,
        // Floor, so a fractional IdP exp still caps the bearer at or before it.
        notAfter: Math.floor(proof.exp),
      });
      return { token: issued.token, owner, actor, exp: issued.exp };
    },
  };
}

function checkPin(opts: IdpBridgeOptions): Readonly<IdpTokenPin> {
  if (typeof opts !== "object" || opts === null) badOptions("options are required");
  for (const name of ["issuer", "audience", "space"] as const) {
    const v = opts[name];
    if (typeof v !== "string" || v === "" || v.length > 2048) badOptions(`${name} is required`);
  }
  if ((opts.jwks === undefined) === (opts.jwksUrl === undefined)) {
    badOptions("pass exactly one of jwks and jwksUrl");
  }
  const algorithms = opts.algorithms ?? JWS_ALGORITHMS;
  if (
    !Array.isArray(algorithms) || algorithms.length === 0 ||
    !algorithms.every((a) => JWS_ALGORITHMS.includes(a))
  ) badOptions("algorithms must be a non-empty subset of EdDSA, ES256, RS256");
  if (
    opts.authorizedParty !== undefined &&
    (typeof opts.authorizedParty !== "string" || opts.authorizedParty === "")
  ) badOptions("authorizedParty must be a non-empty string when set");
  const pin: IdpTokenPin = {
    issuer: opts.issuer,
    audience: opts.audience,
    algorithms: Object.freeze([...algorithms]),
  };
  if (opts.authorizedParty !== undefined) pin.authorizedParty = opts.authorizedParty;
  return Object.freeze(pin);
}

function remoteJwksResolver(
  url: string,
  algorithms: readonly JwsAlgorithm[],
  opts: IdpBridgeOptions,
): KeyResolver {
  const timeoutMs = fetchTimeout(opts.fetchTimeoutMs);
  const maxAgeMs = boundedMs("jwksMaxAgeMs", opts.jwksMaxAgeMs, 300_000, 3_600_000);
  const cooldownMs = boundedMs(
    "jwksRefreshCooldownMs",
    opts.jwksRefreshCooldownMs,
    30_000,
    3_600_000,
  );
  let current: { resolve: KeyResolver; at: number } | undefined;
  let inflight: Promise<{ resolve: KeyResolver; at: number }> | undefined;

  function refresh() {
    inflight ??= (async () => {
      try {
        const doc = await fetchIdpJson(url, {
          timeoutMs,
          maxBytes: MAX_JWKS_BYTES,
          what: "IdP JWKS",
        });
        // A set that fails the checks is never adopted; the last good one stays until stale.
        const resolve = pinnedJwksResolver(doc as unknown as JsonWebKeySet, { algorithms });
        current = { resolve, at: Date.now() };
        return current;
      } finally {
        inflight = undefined;
      }
    })();
    return inflight;
  }

  return async (kid, alg) => {
    let c = current;
    if (!c || Date.now() - c.at >= maxAgeMs) c = await refresh();
    const key = await c.resolve(kid, alg);
    if (key || Date.now() - c.at < cooldownMs) return key;
    // An unknown kid after the cooldown: the IdP may have rotated, so read the set once more.
    return await (await refresh()).resolve(kid, alg);
  };
}

function boundedMs(name: string, v: number | undefined, dflt: number, max: number): number {
  if (v === undefined) return dflt;
  if (!Number.isSafeInteger(v) || v < 0 || v > max) {
    badOptions(`${name} must be an integer in 0..${max} ms`);
  }
  return v;
}

function badOptions(detail: string): never {
  throw new CotalError("idp_bad_options", `The IdP bridge is misconfigured: ${detail}.`);
}
