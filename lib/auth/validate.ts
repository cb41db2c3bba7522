/**
 * `validateUserToken`: the strict check every Cotal bearer passes before it buys anything.
 * There is no partial result: a token either yields a fully typed {@linkcode ValidatedBearer}
 * or a CotalError coded `bearer_<reason>`.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import {
  checkAudience,
  checkIssuer,
  checkNotPostdated,
  describeClaim,
  nowSec,
  requiredNumericDate,
} from "./claims.ts";
import { BEARER_VERSION, CLOCK_SKEW_SEC, MAX_BEARER_TTL_SEC } from "./constants.ts";
import {
  isActorToken,
  isCredentialId,
  isDerivedOwner,
  isLifecycleUid,
  isParentPrincipal,
  isScopeList,
  isTokenId,
  sameScope,
} from "./grammar.ts";
import { isPlainObject, type KeyResolver } from "./jwks.ts";
import { type RefusalLabel, refuse, verifyStrictJws } from "./jws.ts";

/** Options for {@linkcode validateUserToken}. */
export interface ValidateUserTokenOptions {
  /** Where verification keys come from, e.g. `pinnedJwksResolver(jwks)` or `issuer.resolver()`. */
  resolver: KeyResolver;
  /** The space the bearer must be for; the expected issuer is `urn:cotal:auth:<space>`. */
  space: string;
  /** The exact audience required; defaults to `space`, which is what the issuer mints. */
  audience?: string;
}

/** A bearer that passed every check, reduced to the fields authorization uses. */
export interface ValidatedBearer {
  /** The space it is valid in. */
  space: string;
  /** The owner it speaks for. */
  owner: string;
  /** The actor it speaks as. */
  actor: string;
  /** Its scopes. */
  scope: string[];
  /** The agent lifecycle it is for, if any. */
  lifecycleUid?: string;
  /** The credential id it tracks, if any. */
  credentialId?: string;
  /** The bearer it was derived from, if any. */
  parent?: string;
  /** Its unique token id. */
  jti?: string;
  /** Issued at (Unix seconds). */
  iat: number;
  /** Expires at (Unix seconds). */
  exp: number;
  /** The key id that signed it. */
  kid: string;
}

const LABEL: RefusalLabel = { prefix: "bearer", what: "bearer" };
const CLAIMS = new Set(["iss", "aud", "sub", "iat", "nbf", "exp", "ver", "scope", "act", "jti"]);
const ACT_CLAIMS = new Set(["owner", "actor", "scope", "lifecycleUid", "credentialId", "parent"]);

/** The `iss` a Cotal bearer for `space` carries: a stable URN, not the service's URL. */
export function bearerIssuer(space: string): string {
  return `urn:cotal:auth:${space}`;
}

/**
 * Validate a Cotal bearer: EdDSA only, key by kid from the resolver, no key-carrying or
 * `crit` headers, exact issuer and audience, a fixed 30 s skew, a 900 s lifetime cap anchored
 * on this clock, and exact claim types with no coercion.
 *
 * @example
 * ```ts
 * const bearer = await validateUserToken(token, { resolver: issuer.resolver(), space: "demo" });
 * console.log(bearer.owner, bearer.actor, bearer.exp);
 * ```
 */
export async function validateUserToken(
  token: string,
  opts: ValidateUserTokenOptions,
): Promise<ValidatedBearer> {
  if (typeof opts?.space !== "string" || opts.space === "" || typeof opts.resolver !== "function") {
    throw new CotalError(
      "bearer_bad_options",
      "validateUserToken needs a non-empty space and a key resolver; pass both.",
    );
  }
  const audience = opts.audience ?? opts.space;
  const { payload, kid } = await verifyStrictJws(token, {
    ...LABEL,
    algorithms: ["EdDSA"],
    resolver: opts.resolver,
    closedHeader: true,
  });

  const extra = Object.keys(payload).find((k) => !CLAIMS.has(k));
  if (extra) badClaim(`has the unknown claim ${describeClaim(extra)}`);
  // Audience before issuer, so a bearer for another space is named as exactly that.
  checkAudience(LABEL, payload.aud, audience);
  checkIssuer(LABEL, payload.iss, bearerIssuer(opts.space));

  const now = nowSec();
  const exp = requiredNumericDate(LABEL, payload, "exp", true);
  const iat = requiredNumericDate(LABEL, payload, "iat", true);
  const nbf = requiredNumericDate(LABEL, payload, "nbf", true);
  if (now >= exp + CLOCK_SKEW_SEC) {
    throw refuse(
      LABEL,
      "expired",
      `The bearer expired ${now - exp} s ago; exchange for a fresh one.`,
    );
  }
  checkNotPostdated(LABEL, "iat", iat, now);
  checkNotPostdated(LABEL, "nbf", nbf, now);
  if (exp <= iat || nbf < iat || nbf >= exp) {
    badClaim("has an inconsistent time window (need iat <= nbf < exp)");
  }
  if (exp - iat > MAX_BEARER_TTL_SEC || exp > now + MAX_BEARER_TTL_SEC + CLOCK_SKEW_SEC) {
    throw refuse(
      LABEL,
      "lifetime_exceeded",
      `The bearer lives ${exp - iat} s or ends too far ahead; the cap is ${MAX_BEARER_TTL_SEC} s ` +
        "from now, so exchange for a bearer within it.",
    );
  }
  if (payload.ver !== BEARER_VERSION) {
    throw refuse(
      LABEL,
      "bad_version",
      `The bearer version ${describeClaim(payload.ver)} is not ${BEARER_VERSION}; ` +
        "exchange for a bearer from this Cotal release.",
    );
  }
  const owner = payload.sub;
  if (!isDerivedOwner(owner)) {
    throw refuse(
      LABEL,
      "bad_subject",
      `The bearer subject ${describeClaim(owner)} is not a derived owner (u_ + 26 base32 ` +
        "characters); re-exchange through the auth service.",
    );
  }
  const act = payload.act;
  if (!isPlainObject(act)) badActor("has no act object");
  const actExtra = Object.keys(act).find((k) => !ACT_CLAIMS.has(k));
  if (actExtra) badActor(`act has the unknown member ${describeClaim(actExtra)}`);
  if (act.owner !== owner) badActor("act.owner differs from sub");
  if (!isActorToken(act.actor)) badActor(`act.actor ${describeClaim(act.actor)} is not an actor`);
  if (!isScopeList(payload.scope)) badClaim("scope is not a list of distinct scope names");
  if (
    act.scope !== undefined && (!isScopeList(act.scope) || !sameScope(act.scope, payload.scope))
  ) {
    badActor("act.scope differs from scope");
  }
  if (act.lifecycleUid !== undefined && !isLifecycleUid(act.lifecycleUid)) {
    badActor("act.lifecycleUid is malformed");
  }
  if (act.credentialId !== undefined && !isCredentialId(act.credentialId)) {
    badActor("act.credentialId is malformed");
  }
  if (act.parent !== undefined && !isParentPrincipal(act.parent)) {
    badActor("act.parent is not one <derived owner>.<actor> link");
  }
  if (payload.jti !== undefined && !isTokenId(payload.jti)) badClaim("jti is malformed");

  const out: ValidatedBearer = {
    space: opts.space,
    owner,
    actor: act.actor,
    scope: [...payload.scope],
    iat,
    exp,
    kid,
  };
  if (act.lifecycleUid !== undefined) out.lifecycleUid = act.lifecycleUid;
  if (act.credentialId !== undefined) out.credentialId = act.credentialId;
  if (act.parent !== undefined) out.parent = act.parent;
  if (payload.jti !== undefined) out.jti = payload.jti;
  return out;
}

function badClaim(detail: string): never {
  throw refuse(LABEL, "bad_claim", `The bearer ${detail}; re-exchange through the auth service.`);
}

function badActor(detail: string): never {
  throw refuse(LABEL, "bad_actor", `The bearer ${detail}; re-exchange through the auth service.`);
}
