/**
 * Verification of an upstream IdP's JWT (any OIDC IdP signing with EdDSA, ES256 or RS256)
 * against a fixed pin. The pin is the only source of truth: nothing in the token can widen
 * the algorithms, the keys, the issuer or the audience.
 *
 * @module
 */

import {
  checkAudience,
  checkIssuer,
  checkNotPostdated,
  describeClaim,
  nowSec,
  numericDate,
  requiredNumericDate,
} from "./claims.ts";
import type { JwsAlgorithm, KeyResolver } from "./jwks.ts";
import { type RefusalLabel, refuse, verifyStrictJws } from "./jws.ts";

/** The checks an IdP token must pass. */
export interface IdpTokenPin {
  issuer: string;
  audience: string;
  algorithms: readonly JwsAlgorithm[];
  /** When set, the token's `azp` must equal it (the OIDC client the token was issued to). */
  authorizedParty?: string;
}

/** The parts of a verified IdP token the exchange uses. */
export interface VerifiedIdpToken {
  /** The token's issuer. */
  issuer: string;
  /** The IdP's subject for the user. */
  sub: string;
  /** Unix seconds; may be fractional if the IdP sends fractions. */
  exp: number;
  /** Issued at (Unix seconds). */
  iat: number;
  /** The algorithm it was signed with. */
  alg: JwsAlgorithm;
  /** The key id it was signed with. */
  kid: string;
}

const LABEL: RefusalLabel = { prefix: "idp", what: "IdP token" };
// A subject is an opaque id; control characters in one are a forgery or a broken IdP.
const CONTROL_RE = /\p{Cc}/u;

/**
 * Verify `token` against `pin`, resolving keys with `resolver`. Throws CotalErrors coded
 * `idp_<reason>`: the header and signature reasons of the strict JWS layer, then
 * `bad_issuer`, `bad_audience`, `bad_authorized_party`, `missing_claim`, `bad_claim`,
 * `expired`, `postdated` and `bad_subject`.
 */
export async function verifyIdpToken(
  token: string,
  pin: IdpTokenPin,
  resolver: KeyResolver,
): Promise<VerifiedIdpToken> {
  const { payload, alg, kid } = await verifyStrictJws(token, {
    ...LABEL,
    algorithms: pin.algorithms,
    resolver,
  });
  checkIssuer(LABEL, payload.iss, pin.issuer);
  checkAudience(LABEL, payload.aud, pin.audience);
  if (pin.authorizedParty !== undefined && payload.azp !== pin.authorizedParty) {
    throw refuse(
      LABEL,
      "bad_authorized_party",
      `The IdP token was issued to client ${describeClaim(payload.azp)}, not the pinned ` +
        `${JSON.stringify(pin.authorizedParty)}; log in through that client.`,
    );
  }
  const now = nowSec();
  const exp = requiredNumericDate(LABEL, payload, "exp", false);
  const iat = requiredNumericDate(LABEL, payload, "iat", false);
  const nbf = numericDate(LABEL, payload, "nbf", false);
  // No skew on exp: the exchanged bearer is capped by the proof's remaining life, and a
  // lapsed proof has none.
  if (exp <= now) {
    throw refuse(
      LABEL,
      "expired",
      `The IdP token expired ${Math.ceil(now - exp)} s ago; get a fresh one from the IdP.`,
    );
  }
  checkNotPostdated(LABEL, "iat", iat, now);
  checkNotPostdated(LABEL, "nbf", nbf, now);
  if (exp <= iat) {
    throw refuse(LABEL, "bad_claim", "The IdP token expires before it was issued; re-issue it.");
  }
  const sub = payload.sub;
  if (typeof sub !== "string" || sub === "" || sub.length > 255 || CONTROL_RE.test(sub)) {
    throw refuse(
      LABEL,
      "bad_subject",
      `The IdP token subject ${describeClaim(sub)} is not a non-empty string of at most 255 ` +
        "printable characters; check the IdP's sub mapping.",
    );
  }
  return { issuer: pin.issuer, sub, exp, iat, alg, kid };
}
